#!/usr/bin/env python3
"""``make demo``: the Strimzi blog walk-through, done by this operator on the local stack.

Starts the operator, creates a ConnectCluster and a FileStreamSource KafkaConnector, then runs
list -> stop -> alter -> resume -> reset with annotations and ConfigMaps, printing every step,
the ConfigMap contents and what Connect itself reports. Leaves the ``demo`` namespace in place so
you can look around with ``kubectl`` (``eval $(python3 hack/stack.py env)`` first).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx
import urllib3
from kubernetes import client, config

REPO = Path(__file__).resolve().parent.parent
GROUP, VERSION = "connect-offsets.io", "v1beta1"
T = TypeVar("T")


def step(text: str) -> None:
    print(f"\n\033[1m==> {text}\033[0m", flush=True)


def wait(what: str, check: Callable[[], T | None], timeout: float = 90) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.5)
    raise SystemExit(f"demo: timed out waiting for {what}")


def main() -> int:
    info = json.loads(
        subprocess.run(
            [sys.executable, str(REPO / "hack" / "stack.py"), "info"], check=True, capture_output=True, text=True
        ).stdout
    )
    kubectl, kubeconfig = info["kubectl"], info["kubeconfig"]
    env = {**os.environ, "KUBECONFIG": kubeconfig}
    urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
    api = config.new_client_from_config(config_file=kubeconfig)
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    connect = httpx.Client(base_url=info["connect_url"], timeout=30)

    step("Installing the CRDs")
    subprocess.run(
        [kubectl, "apply", "--server-side", "--force-conflicts", "-f", str(REPO / "crds")], env=env, check=True
    )
    namespace = "demo"
    try:
        core.create_namespace({"metadata": {"name": namespace}})
    except client.ApiException as error:
        if error.status != 409:
            raise
    data_dir = Path(info["logs"]).parent / "demo"
    data_dir.mkdir(parents=True, exist_ok=True)
    source = data_dir / "input.txt"
    source.write_text("".join(f"demo line {i}\n" for i in range(10)))
    name = f"demo-source-{uuid.uuid4().hex[:4]}"
    topic = f"demo-{uuid.uuid4().hex[:6]}"

    step("Starting the operator (connect-offsets-operator -n demo)")
    log = (Path(info["logs"]) / "demo-operator.log").open("w")
    operator = subprocess.Popen(
        [str(Path(sys.executable).parent / "connect-offsets-operator"), "-n", namespace],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**env, "CONNECT_OFFSETS_DRIFT_INTERVAL": "5"},
    )
    try:
        manifests = f"""
apiVersion: {GROUP}/{VERSION}
kind: ConnectCluster
metadata: {{name: local, namespace: {namespace}}}
spec: {{url: "{info["connect_url"]}"}}
---
apiVersion: {GROUP}/{VERSION}
kind: KafkaConnector
metadata:
  name: {name}
  namespace: {namespace}
  labels: {{{GROUP}/cluster: local}}
spec:
  class: org.apache.kafka.connect.file.FileStreamSourceConnector
  tasksMax: 1
  config: {{file: "{source}", topic: {topic}}}
  listOffsets: {{toConfigMap: {{name: {name}-offsets}}}}
  alterOffsets: {{fromConfigMap: {{name: {name}-offsets}}}}
"""
        step("Applying a ConnectCluster and a KafkaConnector")
        print(manifests)
        subprocess.run([kubectl, "apply", "-f", "-"], input=manifests.encode(), env=env, check=True)

        def get() -> dict[str, Any]:
            body: dict[str, Any] = custom.get_namespaced_custom_object(
                GROUP, VERSION, namespace, "kafkaconnectors", name
            )
            return body

        def ready(reason: str) -> bool:
            return any(
                c["type"] == "Ready" and c["reason"] == reason for c in get().get("status", {}).get("conditions", [])
            )

        def annotate(value: str) -> None:
            print(f"$ kubectl annotate kafkaconnector {name} {GROUP}/connector-offsets={value}")
            subprocess.run(
                [
                    kubectl,
                    "annotate",
                    "-n",
                    namespace,
                    "kafkaconnector",
                    name,
                    f"{GROUP}/connector-offsets={value}",
                    "--overwrite",
                ],
                env=env,
                check=True,
                capture_output=True,
            )
            wait(
                "the operator to finish and remove the annotation",
                lambda: f"{GROUP}/connector-offsets" not in (get()["metadata"].get("annotations") or {}),
            )
            result = get()["status"]["lastOffsetsOperation"]
            print(f"   status.lastOffsetsOperation: {result['result']}: {result['message']}")

        def show_configmap() -> dict[str, Any]:
            text = core.read_namespaced_config_map(f"{name}-offsets", namespace).data["offsets.json"]
            print(
                f"   ConfigMap {name}-offsets, key offsets.json:\n"
                + "\n".join(f"     {ln}" for ln in text.splitlines())
            )
            document: dict[str, Any] = json.loads(text)
            return document

        def connect_says() -> None:
            print(f"   Connect GET /connectors/{name}/offsets: {connect.get(f'/connectors/{name}/offsets').text}")

        wait("the connector to run", lambda: ready("ConnectorRunning"))
        size = source.stat().st_size
        wait(
            "the connector to read the whole file",
            lambda: (
                connect.get(f"/connectors/{name}/offsets").json()["offsets"]
                and connect.get(f"/connectors/{name}/offsets").json()["offsets"][0]["offset"]["position"] == size
            ),
        )
        print(f"   connector RUNNING, read {size} bytes of {source}")

        step("1. list: write the offsets into a ConfigMap")
        annotate("list")
        document = show_configmap()

        step("2. stop the connector (spec.state: stopped)")
        custom.patch_namespaced_custom_object(
            GROUP, VERSION, namespace, "kafkaconnectors", name, {"spec": {"state": "stopped"}}
        )
        wait("Connect to report STOPPED", lambda: ready("ConnectorStopped"))
        print("   Ready=True, reason ConnectorStopped")

        step("3. alter: rewind to byte 10 by editing the ConfigMap")
        document["offsets"][0]["offset"]["position"] = 10
        core.patch_namespaced_config_map(
            f"{name}-offsets", namespace, {"data": {"offsets.json": json.dumps(document, indent=2)}}
        )
        annotate("alter")
        connect_says()

        step("4. resume (spec.state: running): the file is read again from byte 10")
        custom.patch_namespaced_custom_object(
            GROUP, VERSION, namespace, "kafkaconnectors", name, {"spec": {"state": "running"}}
        )
        wait(
            "the connector to reach the end again",
            lambda: connect.get(f"/connectors/{name}/offsets").json()["offsets"][0]["offset"]["position"] == size,
        )
        connect_says()

        step("5. reset: stop again, then delete all offsets")
        custom.patch_namespaced_custom_object(
            GROUP, VERSION, namespace, "kafkaconnectors", name, {"spec": {"state": "stopped"}}
        )
        wait("Connect to report STOPPED", lambda: ready("ConnectorStopped"))
        annotate("reset")
        connect_says()

        step("6. a refusal: alter with a broken ConfigMap changes nothing")
        core.patch_namespaced_config_map(
            f"{name}-offsets", namespace, {"data": {"offsets.json": '{"offsets": [{"partition": {"filename": "x"}}]}'}}
        )
        subprocess.run(
            [
                kubectl,
                "annotate",
                "-n",
                namespace,
                "kafkaconnector",
                name,
                f"{GROUP}/connector-offsets=alter",
                "--overwrite",
            ],
            env=env,
            check=True,
            capture_output=True,
        )

        def refused() -> dict[str, Any] | None:
            for item in get().get("status", {}).get("conditions", []):
                if item["type"] == "OffsetsOperationFailed":
                    return dict(item)
            return None

        found = wait("the refusal condition", refused)
        print(
            f"   condition OffsetsOperationFailed ({found['reason']}):\n     "
            + found["message"].replace("\n", "\n     ")
        )
        connect_says()
        step(f"Done. Look around: eval $(python3 hack/stack.py env); kubectl get kafkaconnectors -n {namespace}")
    finally:
        operator.terminate()
        operator.wait(timeout=20)
    return 0


if __name__ == "__main__":
    sys.exit(main())
