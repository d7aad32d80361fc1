"""Benchmark: requests back to back and all at once — each answered within 2 s (issue 30).

What it shows: that no request is lost or left waiting, with the latency the user sees. Target: no
request slower than 2 s on this 2-core machine, in both scenarios:

* 1,000 `list` requests back to back on one KafkaConnector (each made as soon as the previous one's
  annotation is gone; the case in which a resource used to stop answering for good);
* 100 KafkaConnectors asked at once (8 client threads annotate them; one watch on the namespace,
  begun before the first request, stamps each answer).

Next to it, the protocol floor of the second scenario measured in the same run: the same Kubernetes
calls a `list` needs before its annotation is gone (read the ConfigMap, write it, patch status,
patch the annotations) plus `GET /connectors/{c}/offsets`, made directly by 8 threads for the same
100 resources. The operator cannot be faster than that on the same API server.

Set-up on the real local stack: one namespace, one ConnectCluster, STOPPED FileStreamSource
connectors, the operator as users run it (``connect-offsets-operator -n NS``, drift interval 30 s).
Helpers are the integration tests' (tests/integration/support.py), so both measure the same way.

Run: ``make bench BENCH=request_storm`` (or ``.venv/bin/python bench/bench_request_storm.py``).
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.conftest import OperatorProcess, delete_namespace, install_crds, stack_info  # noqa: E402
from tests.integration.support import (  # noqa: E402
    GROUP,
    VERSION,
    ask_all_at_once,
    ask_request,
    create_cluster,
    create_connector,
    file_source_spec,
    wait_answered,
    wait_condition,
)

from bench.report import machine, write_section  # noqa: E402

BACK_TO_BACK = int(os.environ.get("BENCH_STORM_REQUESTS", "1000"))
AT_ONCE = int(os.environ.get("BENCH_STORM_RESOURCES", "100"))
TARGET_S = 2.0


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))]


def row(name: str, took: list[float], makespan: float | None = None, target: bool = True) -> str:
    ms = [t * 1000 for t in took]
    verdict = ("met" if max(took) <= TARGET_S else "**missed**") if target else "-"
    span = f"{makespan:.2f}" if makespan is not None else "-"
    return (
        f"| {name} | {len(took)} | {statistics.median(ms):.0f} | {percentile(ms, 99):.0f} | {max(ms):.0f} "
        f"| {span} | {verdict} |"
    )


def floor(core: Any, custom: Any, connect: httpx.Client, namespace: str, names: list[str]) -> tuple[list[float], float]:
    """The protocol floor of one `list` per resource, all at once from 8 threads: the seconds of each
    (from its own start), and from the first start to the last end."""

    def one(name: str) -> float:
        started = time.monotonic()
        offsets = connect.get(f"/connectors/{name}/offsets").json()
        configmap = f"{name}-floor"
        try:
            core.read_namespaced_config_map(configmap, namespace)
            core.patch_namespaced_config_map(configmap, namespace, {"data": {"offsets.json": json.dumps(offsets)}})
        except Exception:  # first run: the ConfigMap does not exist yet
            core.create_namespaced_config_map(
                namespace, {"metadata": {"name": configmap}, "data": {"offsets.json": json.dumps(offsets)}}
            )
        custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, namespace, "kafkaconnectors", name, {"status": {"topics": [str(started)]}}
        )
        custom.patch_namespaced_custom_object(
            GROUP, VERSION, namespace, "kafkaconnectors", name, {"metadata": {"annotations": {"floor": str(started)}}}
        )
        return time.monotonic() - started

    begun = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        took = list(pool.map(one, names))
    return took, time.monotonic() - begun


def main() -> int:
    from kubernetes import client, config

    info = stack_info()
    install_crds(info)
    api = config.new_client_from_config(config_file=info["kubeconfig"])
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    connect = httpx.Client(base_url=info["connect_url"], timeout=30)
    namespace = f"bench-storm-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": namespace}})
    work = Path(tempfile.mkdtemp(prefix="bench-storm-"))
    source = work / "src.txt"
    source.write_text("".join(f"a{i}\n" for i in range(10)))
    operator = OperatorProcess(
        info["kubeconfig"], namespace, work / "operator.log", {"CONNECT_OFFSETS_DRIFT_INTERVAL": "30"}
    )
    names = [f"storm-{i:03d}" for i in range(AT_ONCE)]
    load: list[float] = []
    try:
        operator.start()
        create_cluster(custom, namespace, info["connect_url"])
        for name in names:
            create_connector(
                custom, namespace, name, file_source_spec(source, f"{namespace}-t", f"{name}-offsets", "stopped")
            )
        for name in names:
            wait_condition(custom, namespace, name, "Ready", reason="ConnectorStopped", timeout=300)

        back_to_back: list[float] = []
        load.append(os.getloadavg()[0])
        for _ in range(BACK_TO_BACK):
            asked, version = ask_request(custom, namespace, names[0])
            back_to_back.append(wait_answered(custom, namespace, names[0], version, timeout=60) - asked)
        load.append(os.getloadavg()[0])
        at_once = ask_all_at_once(custom, namespace, names, timeout=120)
        load.append(os.getloadavg()[0])
        time.sleep(2)
        floor_took, floor_span = floor(core, custom, connect, namespace, names)
        load.append(os.getloadavg()[0])
    finally:
        operator.stop()
        for name in names:
            connect.delete(f"/connectors/{name}")
        delete_namespace(core, custom, namespace)

    body = f"""## Requests back to back and all at once (issue 30)

`make bench BENCH=request_storm` — {machine()}.

STOPPED FileStreamSource KafkaConnectors on the shared worker, the operator as users run it
(`-n NS`, drift interval 30 s). A request's time runs from the PATCH that adds
`connector-offsets=list` to the watch event in which the operator removed it. Target: every request
within {TARGET_S:.0f} s. The floor: the calls a `list` needs before its annotation is gone (ConfigMap
read + write, status patch, annotation patch, `GET offsets`), made directly by 8 threads for the
same {AT_ONCE} resources at once.

| Scenario | Requests | p50 (ms) | p99 (ms) | max (ms) | all done (s) | Target (max <= {TARGET_S:.0f} s) |
|---|---:|---:|---:|---:|---:|---|
{row(f"{BACK_TO_BACK:,} back to back, one resource", back_to_back)}
{row(f"{AT_ONCE} resources at once", list(at_once.took.values()), at_once.makespan)}
{row(f"floor: {AT_ONCE} at once, direct calls", floor_took, floor_span, target=False)}

"all done": from the first request to the last answer. The floor's per-request times run from each
call's own start (8 threads), so compare the "all done" column: the operator's extra time over the
floor is what it adds to the API server's and Connect's own cost.

1-minute load average during the run: {", ".join(f"{value:.1f}" for value in load)} (2 cores; other
processes on the machine count too). No request was lost: each scenario waits for every answer.
"""
    write_section("request_storm", body)
    print(body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
