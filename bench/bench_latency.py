"""Benchmark: latency from annotation to done for `list` and `alter`, next to the raw cost (issue 10).

What it shows: how long a user waits for the operator, compared with doing the work by hand — the
same Connect REST call plus one Kubernetes API write. Targets: p99 <= 1 s and <= 2 x the raw cost.

Set-up on the real local stack: one namespace, one ConnectCluster, one FileStreamSource
KafkaConnector created STOPPED (so `alter` needs no stop -> change -> resume), the operator as
users run it (``connect-offsets-operator -n NS``, default drift interval) with ``--metrics-port``.

One operator run = PATCH the annotations (``connector-offsets`` and a fresh ``request-id``) and wait
for the watch event in which the annotation is gone; the time is taken on the watch event, not by
polling, so it is the operator's latency plus one watch delivery. Each run checks that
``status.lastOffsetsOperation`` carries its request id and ``Succeeded``. `alter` runs alternate
between two positions (written to the ConfigMap before the run, outside the timing), so every run
really changes the offsets. Each operator run is followed by a raw run in the same process:

* list raw:  ``GET /connectors/{c}/offsets`` + one ConfigMap PATCH with the result;
* alter raw: ``PATCH /connectors/{c}/offsets`` + one ConfigMap PATCH (a record of it).

A second, short phase sends the operator through a counting proxy (bench/kube_proxy.py) and
counts its Kubernetes API calls and the worker's REST log lines per operation, to explain the gap.

Run: ``make bench BENCH=latency`` (or ``.venv/bin/python bench/bench_latency.py [runs]``).
"""

from __future__ import annotations

import json
import os
import queue
import re
import socket
import statistics
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.conftest import OperatorProcess, delete_namespace, install_crds, stack_info, wait_for  # noqa: E402
from tests.integration.support import (  # noqa: E402
    GROUP,
    VERSION,
    create_cluster,
    create_connector,
    file_source_spec,
    wait_condition,
)

from bench.kube_proxy import KubeProxy  # noqa: E402
from bench.report import machine, write_section  # noqa: E402

RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 120
PROFILE_RUNS = 10
ANNOTATION = f"{GROUP}/connector-offsets"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))]


class Watcher:
    """Every event of one KafkaConnector, stamped on arrival, from a thread running the watch API."""

    def __init__(self, custom: Any, namespace: str, name: str) -> None:
        self.events: queue.Queue[tuple[float, dict[str, Any]]] = queue.Queue()
        self._stop = threading.Event()
        self._args = (custom, namespace, name)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from kubernetes import watch

        custom, namespace, name = self._args
        while not self._stop.is_set():
            stream = watch.Watch()
            for event in stream.stream(
                custom.list_namespaced_custom_object,
                GROUP,
                VERSION,
                namespace,
                "kafkaconnectors",
                field_selector=f"metadata.name={name}",
                timeout_seconds=60,
            ):
                self.events.put((time.monotonic(), event["object"]))
                if self._stop.is_set():
                    stream.stop()

    def stop(self) -> None:
        self._stop.set()

    def drain(self) -> None:
        while not self.events.empty():
            self.events.get_nowait()

    def wait_done(self, after_rv: int, request_id: str, timeout: float = 60) -> float:
        """Arrival time of the first event after ``after_rv`` without the annotation; checks the result."""
        deadline = time.monotonic() + timeout
        while True:
            arrived, body = self.events.get(timeout=max(0.01, deadline - time.monotonic()))
            meta = body["metadata"]
            if int(meta["resourceVersion"]) <= after_rv or ANNOTATION in (meta.get("annotations") or {}):
                continue
            last = (body.get("status") or {}).get("lastOffsetsOperation") or {}
            if last.get("requestId") != request_id or last.get("result") != "Succeeded":
                raise AssertionError(f"run {request_id} ended with {last}")
            return arrived


def metric_sum_count(port: int, operation: str) -> tuple[float, float]:
    text = httpx.get(f"http://127.0.0.1:{port}/metrics").text
    found: dict[str, float] = {}
    for suffix in ("sum", "count"):
        pattern = (
            rf"connect_offsets_offsets_operation_duration_seconds_{suffix}"
            rf'\{{kind="KafkaConnector",operation="{operation}"\}} (\S+)'
        )
        match = re.search(pattern, text)
        found[suffix] = float(match.group(1)) if match else 0.0
    return found["sum"], found["count"]


def rest_lines(log: Path, start: int, name: str) -> Counter[str]:
    """Worker request-log lines for connector ``name`` written after byte ``start``."""
    pattern = re.compile(rf'"(\w+) /connectors/{re.escape(name)}(/[^ ?]*)?[^ ]* HTTP')
    counts: Counter[str] = Counter()
    with log.open("rb") as handle:
        handle.seek(start)
        for raw in handle:
            found = pattern.search(raw.decode(errors="replace"))
            if found:
                counts[f"{found.group(1)} {found.group(2) or '/'}"] += 1
    return counts


def main() -> int:
    from kubernetes import client, config

    info = stack_info()

    install_crds(info)
    api = config.new_client_from_config(config_file=info["kubeconfig"])
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    connect = httpx.Client(base_url=info["connect_url"], timeout=30)
    unique = uuid.uuid4().hex[:6]
    namespace, name = f"bench-latency-{unique}", f"lat-{unique}"
    work = Path(os.environ.get("TMPDIR", "/tmp")) / f"bench-latency-{unique}"
    work.mkdir(parents=True)
    source = work / "in.txt"
    source.write_text("".join(f"l{i}\n" for i in range(10)))
    list_cm, alter_cm, raw_cm = f"{name}-list", f"{name}-alter", f"{name}-raw"
    core.create_namespace({"metadata": {"name": namespace}})
    metrics_port = free_port()
    op = OperatorProcess(
        info["kubeconfig"], namespace, work / "operator.log", extra_args=["--metrics-port", str(metrics_port)]
    )
    op.extra_env = {"CONNECT_OFFSETS_DRIFT_INTERVAL": "30"}
    watcher: Watcher | None = None
    proxy = KubeProxy.for_kubeconfig(info["kubeconfig"])
    results: dict[str, Any] = {}
    try:
        create_cluster(custom, namespace, info["connect_url"])
        spec = file_source_spec(source, f"lat-{unique}", list_cm, state="stopped")
        spec["alterOffsets"] = {"fromConfigMap": {"name": alter_cm}}
        create_connector(custom, namespace, name, spec)
        core.create_namespaced_config_map(namespace, {"metadata": {"name": raw_cm}, "data": {}})
        core.create_namespaced_config_map(namespace, {"metadata": {"name": alter_cm}, "data": {}})
        op.start()
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorStopped", timeout=120)
        watcher = Watcher(custom, namespace, name)
        time.sleep(2)  # the watch is established and the operator idle

        def doc(position: int) -> dict[str, Any]:
            return {"offsets": [{"partition": {"filename": str(source)}, "offset": {"position": position}}]}

        def operator_run(operation: str, index: int) -> float:
            if operation == "alter":
                body = {"data": {"offsets.json": json.dumps(doc(3 if index % 2 else 6))}}
                core.patch_namespaced_config_map(alter_cm, namespace, body)
                time.sleep(0.5)  # the operator's wake-up for the ConfigMap change is over
            assert watcher is not None
            watcher.drain()
            request_id = f"{operation}-{index}-{uuid.uuid4().hex[:4]}"
            patch = {"metadata": {"annotations": {ANNOTATION: operation, f"{GROUP}/request-id": request_id}}}
            started = time.monotonic()
            patched = custom.patch_namespaced_custom_object(GROUP, VERSION, namespace, "kafkaconnectors", name, patch)
            done = watcher.wait_done(int(patched["metadata"]["resourceVersion"]), request_id)
            return done - started

        def raw_run(operation: str, index: int) -> float:
            started = time.monotonic()
            if operation == "list":
                response = connect.get(f"/connectors/{name}/offsets")
                response.raise_for_status()
                data = {"offsets.json": json.dumps(response.json(), indent=2)}
            else:
                response = connect.patch(f"/connectors/{name}/offsets", json=doc(3 if index % 2 else 6))
                response.raise_for_status()
                data = {"altered": response.json()["message"]}
            core.patch_namespaced_config_map(raw_cm, namespace, {"data": data})
            return time.monotonic() - started

        for operation in ("list", "alter"):
            sum0, count0 = metric_sum_count(metrics_port, operation)
            timed: list[float] = []
            raw: list[float] = []
            for index in range(RUNS):
                timed.append(operator_run(operation, index))
                raw.append(raw_run(operation, index))
                time.sleep(0.2)
            sum1, count1 = metric_sum_count(metrics_port, operation)
            results[operation] = {
                "operator": timed,
                "raw": raw,
                "internal": (sum1 - sum0) / max(1.0, count1 - count0),
            }
            print(
                operation,
                {k: round(statistics.median(v), 4) for k, v in results[operation].items() if isinstance(v, list)},
            )

        # Profile: the same operations through the counting proxy; API calls and REST lines per operation.
        op.stop()
        watcher.stop()
        proxy.start()
        op.kubeconfig = str(proxy.write_kubeconfig(work / "proxy-kubeconfig.json"))
        op.start()
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorStopped", timeout=120)
        watcher = Watcher(custom, namespace, name)
        time.sleep(3)
        log = Path(info["logs"]) / "connect.log"
        for operation in ("list", "alter"):
            before, offset = proxy.snapshot(), log.stat().st_size
            for index in range(PROFILE_RUNS):
                operator_run(operation, index)
                time.sleep(1.0)  # the follow-up pass the annotation removal triggers is counted too
            calls = proxy.snapshot() - before
            results[operation]["api_calls"] = {k: v / PROFILE_RUNS for k, v in sorted(calls.items()) if v > 0}
            results[operation]["rest_calls"] = {
                k: v / PROFILE_RUNS for k, v in sorted(rest_lines(log, offset, name).items())
            }
    finally:
        if watcher is not None:
            watcher.stop()
        try:
            custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, "kafkaconnectors", name)
            wait_for(
                "the operator to delete the connector",
                lambda: connect.get(f"/connectors/{name}").status_code == 404,
                timeout=60,
            )
        finally:
            op.stop()
            connect.delete(f"/connectors/{name}")
            delete_namespace(core, custom, namespace)
    proxy.stop()
    report(results)
    return 0


def report(results: dict[str, Any]) -> None:
    rows = []
    verdicts = []
    for operation, label in (("list", "list → ConfigMap"), ("alter", "alter (STOPPED, from ConfigMap)")):
        r = results[operation]
        op_p = [pct(r["operator"], q) for q in (50, 95, 99)]
        raw_p = [pct(r["raw"], q) for q in (50, 95, 99)]
        ratio = [o / w for o, w in zip(op_p, raw_p, strict=True)]
        rows.append(
            f"| {label} | {len(r['operator'])} | "
            + " / ".join(f"{v * 1000:.0f}" for v in op_p)
            + " | "
            + " / ".join(f"{v * 1000:.0f}" for v in raw_p)
            + " | "
            + " / ".join(f"{v:.1f}" for v in ratio)
            + f" | {r['internal'] * 1000:.0f} |"
        )
        verdicts.append(
            f"{operation}: p99 {op_p[2] * 1000:.0f} ms {'≤' if op_p[2] <= 1 else '>'} 1 s "
            f"({'met' if op_p[2] <= 1 else 'missed'}); p99 ratio {ratio[2]:.1f}x raw "
            f"({'met' if ratio[2] <= 2 else 'missed'}: target ≤ 2x)"
        )
    calls = []
    for operation in ("list", "alter"):
        api = results[operation]["api_calls"]
        rest = results[operation]["rest_calls"]
        calls.append(
            f"| {operation} | {sum(api.values()):.1f} | "
            + ", ".join(f"{k} {v:g}" for k, v in api.items())
            + f" | {sum(rest.values()):.1f} | "
            + ", ".join(f"{k} {v:g}" for k, v in rest.items())
            + " |"
        )
    body = f"""
## Latency: annotation → done, list and alter (issue 10)

`make bench BENCH=latency` — {machine()}; load average at the end {os.getloadavg()[0]:.1f}
(other engineers' tests share the machine).

One STOPPED FileStreamSource KafkaConnector, the operator as shipped (`-n NS`, drift interval 30 s).
Operator time: from the annotation PATCH (with a fresh `request-id`) to the watch event in which the
annotation is gone and `status.lastOffsetsOperation` is `Succeeded` with that id. Raw: the same
Connect call done directly (list: `GET /offsets`; alter: `PATCH /offsets`) plus one ConfigMap PATCH,
measured right after each operator run. "Inside" = the operator's own
`connect_offsets_offsets_operation_duration_seconds` (mean): for alter the backup and the PATCH, for
list the GET and the ConfigMap write.

| Operation | Runs | Operator p50 / p95 / p99 (ms) | Raw p50 / p95 / p99 (ms) | Ratio p50 / p95 / p99 | Inside (ms) |
|---|---:|---:|---:|---:|---:|
{chr(10).join(rows)}

Targets: {"; ".join(verdicts)}.

Calls per operation (the operator through a counting proxy, {PROFILE_RUNS} runs each, including the
pass the annotation removal wakes and, for alter, the pass the benchmark's ConfigMap write wakes;
REST calls from the worker's request log):

| Operation | Kubernetes API calls | Detail | Connect REST calls | Detail |
|---|---:|---|---:|---|
{chr(10).join(calls)}
"""
    write_section("latency", body)
    print(body)


if __name__ == "__main__":
    sys.exit(main())
