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


class FloorController:
    """The protocol floor: a controller that does the least a request needs, and nothing else.

    Why: "operator / raw" compares the operator with two calls, but a `list` cannot finish with fewer
    than these steps, each a round trip: the watch delivers the annotation, GET the offsets, write
    the ConfigMap, patch the status, remove the annotation (and the watch delivers that). An `alter`
    that keeps the promise "offsets are backed up before they change" adds: read its ConfigMap, GET
    the offsets, create the backup, PATCH the offsets. This thread does exactly that, sequentially,
    with the same synchronous client the benchmark uses, on a twin resource in a namespace the
    operator does not watch, so "operator / floor" is the operator's overhead above the protocol.
    """

    def __init__(self, api: Any, connect_url: str, namespace: str, name: str, connector: str) -> None:
        from kubernetes import client

        self.core, self.custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
        self.connect = httpx.Client(base_url=connect_url, timeout=30)
        self.namespace, self.name, self.connector = namespace, name, connector
        self.handled: set[str] = set()
        self.backups = 0
        self.errors: list[str] = []
        self._watch = Watcher(self.custom, namespace, name)  # its own watch, as a controller has
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            _, body = self._watch.events.get()
            annotations = body["metadata"].get("annotations") or {}
            operation, request_id = annotations.get(ANNOTATION), annotations.get(f"{GROUP}/request-id")
            if operation and request_id and request_id not in self.handled:
                self.handled.add(request_id)
                try:
                    self._serve(operation, request_id)
                except Exception as error:  # reported by the run that waits for it
                    self.errors.append(f"{request_id}: {error!r}")

    def _serve(self, operation: str, request_id: str) -> None:
        if operation == "list":
            response = self.connect.get(f"/connectors/{self.connector}/offsets")
            response.raise_for_status()
            data = {"offsets.json": json.dumps(response.json(), indent=2)}
            self.core.patch_namespaced_config_map(f"{self.name}-list", self.namespace, {"data": data})
        else:
            if operation == "alter-guarded":
                # Issue 30's exactly-once steps, which the bare floor leaves out: the request read
                # fresh from the API server, the connector's config and status read fresh from
                # Connect (is it still ours, still STOPPED), and the intent recorded in status
                # before the change (after the backup, below).
                self.custom.get_namespaced_custom_object(GROUP, VERSION, self.namespace, "kafkaconnectors", self.name)
                self.connect.get(f"/connectors/{self.connector}/config").raise_for_status()
                self.connect.get(f"/connectors/{self.connector}/status").raise_for_status()
            source = self.core.read_namespaced_config_map(f"{self.name}-alter", self.namespace)
            document = json.loads(source.data["offsets.json"])
            before = self.connect.get(f"/connectors/{self.connector}/offsets")
            before.raise_for_status()
            self.backups += 1
            backup = {
                "metadata": {"name": f"{self.name}-backup-{self.backups}"},
                "data": {"offsets.json": json.dumps(before.json(), indent=2)},
            }
            self.core.create_namespaced_config_map(self.namespace, backup)
            if operation == "alter-guarded":
                intent = {"status": {"offsetsProgress": {"request": request_id, "backup": backup["metadata"]["name"]}}}
                self.custom.patch_namespaced_custom_object_status(
                    GROUP, VERSION, self.namespace, "kafkaconnectors", self.name, intent
                )
            self.connect.patch(f"/connectors/{self.connector}/offsets", json=document).raise_for_status()
        finished = {"operation": operation, "result": "Succeeded", "time": now(), "requestId": request_id}
        status: dict[str, Any] = {"status": {"lastOffsetsOperation": finished}}
        if operation == "alter-guarded":
            status["status"]["offsetsProgress"] = None  # done: nothing left to resume
        self.custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, self.namespace, "kafkaconnectors", self.name, status
        )
        removal = {"metadata": {"annotations": {ANNOTATION: None, f"{GROUP}/request-id": None}}}
        self.custom.patch_namespaced_custom_object(
            GROUP, VERSION, self.namespace, "kafkaconnectors", self.name, removal
        )

    def stop(self) -> None:
        self._watch.stop()


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


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


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
    floor_namespace, floor_name = f"{namespace}-floor", f"{name}-floor"
    core.create_namespace({"metadata": {"name": namespace}})
    core.create_namespace({"metadata": {"name": floor_namespace}})
    metrics_port = free_port()
    op = OperatorProcess(
        info["kubeconfig"], namespace, work / "operator.log", extra_args=["--metrics-port", str(metrics_port)]
    )
    op.extra_env = {"CONNECT_OFFSETS_DRIFT_INTERVAL": "30"}
    watcher: Watcher | None = None
    floor_watcher: Watcher | None = None
    floor: FloorController | None = None
    proxy = KubeProxy.for_kubeconfig(info["kubeconfig"])
    results: dict[str, Any] = {}
    try:
        create_cluster(custom, namespace, info["connect_url"])
        spec = file_source_spec(source, f"lat-{unique}", list_cm, state="stopped")
        spec["alterOffsets"] = {"fromConfigMap": {"name": alter_cm}}
        create_connector(custom, namespace, name, spec)
        core.create_namespaced_config_map(namespace, {"metadata": {"name": raw_cm}, "data": {}})
        core.create_namespaced_config_map(namespace, {"metadata": {"name": alter_cm}, "data": {}})
        # The floor's twin: the same spec in a namespace the operator does not watch.
        create_connector(custom, floor_namespace, floor_name, spec)
        for suffix in ("list", "alter"):
            core.create_namespaced_config_map(
                floor_namespace, {"metadata": {"name": f"{floor_name}-{suffix}"}, "data": {}}
            )
        op.start()
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorStopped", timeout=120)
        watcher = Watcher(custom, namespace, name)
        floor_watcher = Watcher(custom, floor_namespace, floor_name)
        floor = FloorController(
            config.new_client_from_config(config_file=info["kubeconfig"]),
            info["connect_url"],
            floor_namespace,
            floor_name,
            name,
        )
        time.sleep(2)  # the watches are established and the operator idle

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

        def floor_run(operation: str, index: int) -> float:
            assert floor_watcher is not None and floor is not None
            if operation.startswith("alter"):
                body = {"data": {"offsets.json": json.dumps(doc(3 if index % 2 else 6))}}
                core.patch_namespaced_config_map(f"{floor_name}-alter", floor_namespace, body)
            floor_watcher.drain()
            request_id = f"floor-{operation}-{index}-{uuid.uuid4().hex[:4]}"
            patch = {"metadata": {"annotations": {ANNOTATION: operation, f"{GROUP}/request-id": request_id}}}
            started = time.monotonic()
            patched = custom.patch_namespaced_custom_object(
                GROUP, VERSION, floor_namespace, "kafkaconnectors", floor_name, patch
            )
            try:
                done = floor_watcher.wait_done(int(patched["metadata"]["resourceVersion"]), request_id)
            except queue.Empty:
                raise AssertionError(f"floor run {request_id} not done: {floor.errors}") from None
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
            floors: list[float] = []
            guarded: list[float] = []
            for index in range(RUNS):
                timed.append(operator_run(operation, index))
                raw.append(raw_run(operation, index))
                time.sleep(0.2)
                floors.append(floor_run(operation, index))
                time.sleep(0.2)
                if operation == "alter":
                    guarded.append(floor_run("alter-guarded", index))
                    time.sleep(0.2)
            sum1, count1 = metric_sum_count(metrics_port, operation)
            results[operation] = {
                "operator": timed,
                "raw": raw,
                "floor": floors,
                "guarded": guarded,
                "internal": (sum1 - sum0) / max(1.0, count1 - count0),
            }
            print(
                operation,
                {k: round(statistics.median(v), 4) for k, v in results[operation].items() if isinstance(v, list) and v},
            )

        # Profile: the same operations through the counting proxy; API calls and REST lines per operation.
        op.stop()
        watcher.stop()
        floor_watcher.stop()
        floor.stop()
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
        for stoppable in (watcher, floor_watcher, floor):
            if stoppable is not None:
                stoppable.stop()
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
            delete_namespace(core, custom, floor_namespace)
    proxy.stop()
    report(results)
    return 0


TABLE_HEADER = (
    "| Operation | Runs | Operator p50 / p95 / p99 (ms) | Floor p50 / p95 / p99 (ms) | Operator / floor "
    "| Raw p50 / p95 / p99 (ms) | Operator / raw | Inside (ms) |"
)


def report(results: dict[str, Any]) -> None:
    rows = []
    verdicts = []
    cases = (
        ("list", "list → ConfigMap", "floor"),
        ("alter", "alter (STOPPED, from ConfigMap)", "floor"),
        ("alter", "alter, against the floor with issue 30's steps", "guarded"),
    )
    for operation, label, floor_kind in cases:
        r = results[operation]
        op_p = [pct(r["operator"], q) for q in (50, 95, 99)]
        floor_p = [pct(r[floor_kind], q) for q in (50, 95, 99)]
        raw_p = [pct(r["raw"], q) for q in (50, 95, 99)]
        to_floor = [o / f for o, f in zip(op_p, floor_p, strict=True)]
        to_raw = [o / w for o, w in zip(op_p, raw_p, strict=True)]

        def ms(values: list[float]) -> str:
            return " / ".join(f"{v * 1000:.0f}" for v in values)

        def times(values: list[float]) -> str:
            return " / ".join(f"{v:.2f}" for v in values)

        rows.append(
            f"| {label} | {len(r['operator'])} | {ms(op_p)} | {ms(floor_p)} | {times(to_floor)} | {ms(raw_p)} "
            f"| {times(to_raw)} | {r['internal'] * 1000:.0f} |"
        )
        p50_met, p99_met = to_floor[0] <= 1.5, to_floor[2] <= 2
        which = "the floor" if floor_kind == "floor" else "the floor with issue 30's steps"
        verdicts.append(
            f"{operation}: p50 {to_floor[0]:.2f}x {which} ({'met' if p50_met else 'missed'}: ≤ 1.5x), "
            f"p99 {to_floor[2]:.2f}x ({'met' if p99_met else 'missed'}: ≤ 2x); "
            f"p99 {op_p[2] * 1000:.0f} ms ({'met' if op_p[2] <= 1 else 'missed'}: ≤ 1 s)"
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
## Latency: annotation → done, list and alter (issues 10 and 35)

`make bench BENCH=latency` — {machine()}; load average at the end {os.getloadavg()[0]:.1f}
(other engineers' tests share the machine).

One STOPPED FileStreamSource KafkaConnector, the operator as shipped (`-n NS`, drift interval 30 s).
Operator time: from the annotation PATCH (with a fresh `request-id`) to the watch event in which the
annotation is gone and `status.lastOffsetsOperation` is `Succeeded` with that id.
Floor (issue 35): the same request served by the least a controller can do, timed the same way on
a twin resource in a namespace the operator does not watch (`FloorController`): the watch delivers
the annotation; list: `GET /offsets`, ConfigMap PATCH; alter: ConfigMap GET, `GET /offsets`, backup
ConfigMap create, `PATCH /offsets`; then the status patch and the annotation removal, delivered by the
watch. The floor with issue 30's steps adds what exactly once costs an alter: the resource read
fresh, the connector's config and status read fresh, and the intent (`offsetsProgress`) recorded
in status after the backup. Raw (issue 10): the Connect call done directly plus one ConfigMap PATCH, no watch. One
operator, one raw and one floor run in turn. "Inside" = the operator's own
`connect_offsets_offsets_operation_duration_seconds` (mean): for alter the backup and the PATCH, for
list the GET and the ConfigMap write.

{TABLE_HEADER}
|---|---:|---:|---:|---:|---:|---:|---:|
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
