#!/usr/bin/env python3
"""Other work on the local stack, as a stack in use has it: for ``make test`` and to reproduce issue 48.

Why: the suite shares one Connect worker, two Kafka clusters and one API server with whatever else
runs there. A test that passes only on an empty worker (counts over the whole cluster, a mirror
whose topics filter matches another's topic, a wait that a rebalance for someone else's connector
breaks) fails for a user who ran ``make demo`` and the walk-throughs first, or for an engineer
sharing a stack. Two commands make that the normal case:

* ``age``: what about 40 minutes of other work leaves behind (the measured case of issue 48).
  Connectors created and deleted by the hundred (the config topic keeps them, their offsets stay
  in the offsets topic), and then left running: FileStreamSource connectors RUNNING and STOPPED, a
  MirrorMaker 2 source connector B -> A for a topic of its own; and in Kubernetes, namespaces of
  KafkaConnectors no operator watches, on ConnectClusters whose URLs do not answer. Idempotent:
  run again, it adds nothing twice.
* ``run``: work that goes on while the tests run (``hack/suite.py --busy`` starts it for the
  parallel part; ``make test`` asks for that). Connectors RUNNING and STOPPED, a MirrorMaker 2
  source connector replicating a topic of its own that a producer keeps writing to, a heartbeat
  connector writing ``heartbeats`` into Kafka B (as a ``writeToTarget`` mirror does), and one
  connector created and deleted in a loop, so that the worker rebalances for someone else every
  few seconds. It stops by itself after ``--seconds`` or at SIGTERM, and removes what it created.

Everything is named ``busy-…``/``aged-…``, so no test's own names, topics or groups meet it.
Usage::

    hack/busy_stack.py age [--connectors 300]
    hack/busy_stack.py run [--seconds 3600]
    hack/busy_stack.py clean
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

HACK = Path(__file__).resolve().parent
FILE_SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
MIRROR_SOURCE = "org.apache.kafka.connect.mirror.MirrorSourceConnector"
GROUP, VERSION = "connect-offsets.io", "v1beta1"
#: How often the churn loop creates (and then deletes) a connector: every create and delete is a
#: rebalance of the shared worker, which is what tests must tolerate.
CHURN_INTERVAL_S = 6.0
#: How often the mirrored topic gets a record.
PRODUCE_INTERVAL_S = 2.0


def stack_info() -> dict[str, Any]:
    out = subprocess.run([sys.executable, str(HACK / "stack.py"), "info"], check=True, capture_output=True, text=True)
    info: dict[str, Any] = json.loads(out.stdout)
    return info


class Connect:
    """The shared worker's REST API, asking again while it rebalances (409, or 500 "rebalance")."""

    def __init__(self, url: str) -> None:
        self.http = httpx.Client(base_url=url, timeout=60)

    def send(self, method: str, path: str, body: Any = None, *, tries: int = 60) -> httpx.Response:
        for _ in range(tries):
            response = self.http.request(method, path, json=body)
            busy = response.status_code == 409 and "already exists" not in response.text
            if not (busy or (response.status_code == 500 and "rebalanc" in response.text.lower())):
                return response
            time.sleep(0.5)
        return response

    def create(self, name: str, config: dict[str, str], initial_state: str = "RUNNING") -> None:
        response = self.send("POST", "/connectors", {"name": name, "config": config, "initial_state": initial_state})
        if response.status_code not in (201, 409):
            raise RuntimeError(f"POST /connectors {name}: {response.status_code} {response.text[:300]}")

    def delete(self, name: str) -> None:
        self.send("DELETE", f"/connectors/{name}")

    def names(self) -> list[str]:
        return list(self.send("GET", "/connectors").json())


def source_file(info: dict[str, Any], lines: int = 50) -> Path:
    path = Path(info["run_dir"]) / "busy-source.txt"
    if not path.exists():
        path.write_text("".join(f"busy line {i}\n" for i in range(lines)))
    return path


def file_source(path: Path, topic: str) -> dict[str, str]:
    return {"connector.class": FILE_SOURCE, "tasks.max": "1", "file": str(path), "topic": topic}


def mirror_source(info: dict[str, Any], source: str, target: str, topic: str) -> dict[str, str]:
    """A MirrorSourceConnector from Kafka B (``source``) to Kafka A (``target``) for ``topic`` only."""
    return {
        "connector.class": MIRROR_SOURCE,
        "source.cluster.alias": source,
        "target.cluster.alias": target,
        "source.cluster.bootstrap.servers": info["kafka_b"],
        "target.cluster.bootstrap.servers": info["kafka_a"],
        "topics": topic,
        "replication.factor": "1",
        "offset-syncs.topic.replication.factor": "1",
        "sync.topic.acls.enabled": "false",
        "key.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
        "value.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
    }


def heartbeats_into_b(info: dict[str, Any], source: str, target: str) -> dict[str, str]:
    """A MirrorHeartbeatConnector whose producer writes to Kafka B (as a KafkaMirrorMaker2 with
    ``writeToTarget: producerOverride`` does): B gets a ``heartbeats`` topic, which every
    MirrorSourceConnector reading B replicates whatever its topics filter says (unless
    ``heartbeats.replication.enabled=false``)."""
    return {
        "connector.class": "org.apache.kafka.connect.mirror.MirrorHeartbeatConnector",
        "source.cluster.alias": source,
        "target.cluster.alias": target,
        "source.cluster.bootstrap.servers": info["kafka_a"],
        "target.cluster.bootstrap.servers": info["kafka_b"],
        "producer.override.bootstrap.servers": info["kafka_b"],
        "heartbeats.topic.replication.factor": "1",
        "emit.heartbeats.interval.seconds": "2",
        "key.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
        "value.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
    }


def create_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: a collected client cancels its futures
    futures = admin.create_topics([NewTopic(topic, 1, 1)])
    try:
        futures[topic].result(30)
    except Exception as error:  # already there: fine
        if "TOPIC_ALREADY_EXISTS" not in str(error):
            raise


def kubectl(info: dict[str, Any], *args: str, stdin: str | None = None) -> None:
    env = {**os.environ, "KUBECONFIG": info["kubeconfig"]}
    subprocess.run([info["kubectl"], *args], check=True, env=env, input=stdin, text=True, capture_output=True)


# --- age ------------------------------------------------------------------------------------------


def age(info: dict[str, Any], connectors: int, namespaces: int, resources: int) -> None:
    connect = Connect(info["connect_url"])
    path = source_file(info)
    began = time.monotonic()

    def churn(index: int) -> None:
        name = f"aged-churn-{index}"
        # Every fourth one runs long enough to commit offsets, as real connectors leave them.
        connect.create(name, file_source(path, f"aged-churn-{index % 10}"), "RUNNING" if index % 4 == 0 else "STOPPED")
        if index % 4 == 0:
            time.sleep(1.0)
        connect.delete(name)

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        list(pool.map(churn, range(connectors)))
    print(f"aged: {connectors} connectors created and deleted in {time.monotonic() - began:.0f} s")
    for index in range(8):
        connect.create(f"aged-running-{index}", file_source(path, f"aged-running-{index}"))
    for index in range(3):
        connect.create(f"aged-stopped-{index}", file_source(path, f"aged-stopped-{index}"), "STOPPED")
    # A MirrorMaker 2 B -> A left running (the walk-through's own, docs/moving-offsets.md, is made by
    # running it: its aliases b and a are its to take); and the heartbeats an earlier run's
    # writeToTarget mirror left on B.
    create_topic(info["kafka_b"], "aged-mirrored")
    connect.create("aged-b->aged-a.MirrorSourceConnector", mirror_source(info, "aged-b", "aged-a", "aged-mirrored"))
    connect.create("aged-a->aged-b.MirrorHeartbeatConnector", heartbeats_into_b(info, "aged-a", "aged-b"))
    time.sleep(5)
    connect.delete("aged-a->aged-b.MirrorHeartbeatConnector")
    print(f"aged: left on the worker: {len(connect.names())} connectors")
    kubectl(info, "apply", "--server-side", "--force-conflicts", "-f", str(HACK.parent / "crds"))
    documents = []
    for n in range(namespaces):
        namespace = f"aged-{n}"
        documents.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        documents.append(
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "ConnectCluster",
                "metadata": {"name": "gone", "namespace": namespace},
                "spec": {"url": "http://127.0.0.1:9"},  # nothing listens on port 9
            }
        )
        for r in range(resources):
            documents.append(
                {
                    "apiVersion": f"{GROUP}/{VERSION}",
                    "kind": "KafkaConnector",
                    "metadata": {"name": f"orphan-{r}", "namespace": namespace, "labels": {f"{GROUP}/cluster": "gone"}},
                    "spec": {"class": FILE_SOURCE, "tasksMax": 1, "config": {"file": str(path), "topic": f"t-{r}"}},
                }
            )
    for document in documents:  # namespaces first: apply in order
        kubectl(info, "apply", "--server-side", "-f", "-", stdin=json.dumps(document))
    print(f"aged: {namespaces} namespaces with {resources} KafkaConnectors each, no operator watching")


# --- run ------------------------------------------------------------------------------------------


class Busy:
    """The work ``run`` keeps going, and what it removes at the end."""

    def __init__(self, info: dict[str, Any]) -> None:
        self.info = info
        self.connect = Connect(info["connect_url"])
        self.stop = threading.Event()
        self.created: list[str] = []
        #: Names of this run's own (two suites sharing a stack each keep and remove their own).
        self.tag = f"busy{os.environ.get('CONNECT_OFFSETS_TEST_RUN', uuid.uuid4().hex)[:6]}"

    def start(self) -> None:
        path = source_file(self.info)
        for index in range(4):
            self._create(f"{self.tag}-running-{index}", file_source(path, f"busy-running-{index}"))
        for index in range(2):
            self._create(f"{self.tag}-stopped-{index}", file_source(path, f"busy-stopped-{index}"), "STOPPED")
        create_topic(self.info["kafka_b"], "busy-mirrored")
        self._create(
            f"{self.tag}-b->{self.tag}-a.MirrorSourceConnector",
            mirror_source(self.info, f"{self.tag}-b", f"{self.tag}-a", "busy-mirrored"),
        )
        self._create(
            f"{self.tag}-a->{self.tag}-b.MirrorHeartbeatConnector",
            heartbeats_into_b(self.info, f"{self.tag}-a", f"{self.tag}-b"),
        )

    def _create(self, name: str, config: dict[str, str], state: str = "RUNNING") -> None:
        self.connect.create(name, config, state)
        self.created.append(name)

    def produce(self) -> None:
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": self.info["kafka_b"], "enable.idempotence": True})
        sent = 0
        while not self.stop.wait(PRODUCE_INTERVAL_S):
            producer.produce("busy-mirrored", value=f"busy {sent}".encode())
            producer.poll(0)
            sent += 1
        producer.flush(10)

    def churn(self) -> None:
        path = source_file(self.info)
        count = 0
        while not self.stop.wait(CHURN_INTERVAL_S / 2):
            name = f"{self.tag}-churn-{count % 2}"
            self.connect.create(name, file_source(path, "busy-churn"))
            if self.stop.wait(CHURN_INTERVAL_S / 2):
                self.connect.delete(name)
                break
            self.connect.delete(name)
            count += 1

    def finish(self) -> None:
        for name in [*self.created, f"{self.tag}-churn-0", f"{self.tag}-churn-1"]:
            self.connect.delete(name)


def run(info: dict[str, Any], seconds: float) -> None:
    busy = Busy(info)
    signal.signal(signal.SIGTERM, lambda *_: busy.stop.set())
    busy.start()
    workers = [threading.Thread(target=busy.produce, daemon=True), threading.Thread(target=busy.churn, daemon=True)]
    for worker in workers:
        worker.start()
    print(f"busy: {len(busy.created)} connectors, a mirror and a churn loop on {info['connect_url']}", flush=True)
    busy.stop.wait(seconds)
    busy.stop.set()
    for worker in workers:
        worker.join(30)
    busy.finish()
    print("busy: stopped, its connectors removed", flush=True)


def clean(info: dict[str, Any]) -> None:
    connect = Connect(info["connect_url"])
    for name in connect.names():
        if name.startswith(("busy-", "aged-")):
            connect.delete(name)
    env = {**os.environ, "KUBECONFIG": info["kubeconfig"]}
    out = subprocess.run(
        [info["kubectl"], "get", "namespaces", "-o", "name"], check=True, env=env, capture_output=True, text=True
    ).stdout
    for namespace in (n.removeprefix("namespace/") for n in out.split()):
        if namespace.startswith("aged-"):
            # Nothing watches them: their finalizer-less resources go with the namespace.
            subprocess.run([info["kubectl"], "delete", "namespace", namespace, "--wait=false"], env=env, check=False)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    aged = commands.add_parser("age", help="leave what ~40 minutes of other work leaves")
    aged.add_argument("--connectors", type=int, default=300)
    aged.add_argument("--namespaces", type=int, default=3)
    aged.add_argument("--resources", type=int, default=50)
    running = commands.add_parser("run", help="keep other work going until SIGTERM or --seconds")
    running.add_argument("--seconds", type=float, default=3600.0)
    commands.add_parser("clean", help="remove what age and run left")
    args = parser.parse_args(argv)
    info = stack_info()
    if args.command == "age":
        age(info, args.connectors, args.namespaces, args.resources)
    elif args.command == "run":
        run(info, args.seconds)
    else:
        clean(info)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
