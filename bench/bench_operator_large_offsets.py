"""Benchmark: 1,000,000 source partitions through the operator itself (issue 6 §1, issue 10).

bench_large_offsets.py measures the building blocks (chunked PATCH, GET, the ConfigMap store) in
one process. This one measures what a user gets: the operator as shipped (``connect-offsets-operator
-n NS``, a separate process) driven by annotations, and the operator process's own peak RSS (VmHWM
from /proc) after each step.

Set-up on the real local stack: a dedicated Connect worker (tests/integration/connect_worker.py,
-Xmx3g, own group and topics; the shared worker is not touched), a ConnectCluster pointing at it
(``requestTimeoutSeconds: 300``) and a KafkaConnector of MonitorableSourceConnector (connect-runtime's
test jar; it accepts any offsets) with ``state: stopped``. The benchmark seeds 1,000,000 partitions
with chunked PATCHes (not timed as an operator step), then:

1. ``list``: the operator GETs ~116 MiB of offsets and writes them to the list ConfigMap (sharded);
2. ``alter``: the benchmark writes a changed document (every offset bumped, 1,000 new partitions) to
   the alter ConfigMap with the operator's store (sharded, as a user would with the documented
   format); the operator reads and validates it, backs the current offsets up (GET + shards) and
   sends it in chunked PATCHes;
3. ``restore``: the operator puts the newest backup back (its entries plus a null for each of the
   1,000 new partitions).

After each step the benchmark checks Connect's ``GET offsets`` against what was asked (entry count
and an order-independent digest sum, streamed).

Run: ``make bench BENCH=operator_large_offsets`` (or ``.venv/bin/python bench/bench_operator_large_offsets.py [N]``;
another N is printed, not recorded).
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from kubernetes import client as kube_client
from kubernetes import config as kube_config

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.conftest import OperatorProcess, delete_namespace, install_crds, stack_info, wait_for  # noqa: E402
from tests.integration.connect_worker import DedicatedWorker  # noqa: E402
from tests.integration.support import (  # noqa: E402
    GROUP,
    VERSION,
    annotate,
    create_cluster,
    create_connector,
    wait_condition,
)

from bench.bench_large_offsets import EXTRA, LIMITS, MONITORABLE_SOURCE, fingerprint, make_document  # noqa: E402
from bench.report import machine, write_section  # noqa: E402
from connect_offsets.clients.connect import ConnectClient, ConnectEndpoint, ConnectServerError  # noqa: E402
from connect_offsets.clients.kubernetes import KubernetesApi  # noqa: E402
from connect_offsets.clients.offsets_configmaps import OffsetsConfigMapStore  # noqa: E402

PARTITIONS = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
HEAP = "-Xmx3g"
STEP_TIMEOUT = 3600.0


@dataclass
class Row:
    step: str
    seconds: float
    operator_rss: float
    detail: str


def requests(last: dict[str, Any]) -> str:
    """The chunk story at the end of an alter/restore message, e.g. '1001000 partitions in 21 PATCH requests'."""
    found = re.search(r"\((\d+ partitions in \d+ PATCH requests[^)]*)\)", last["message"])
    return found.group(1) if found else "1 PATCH request"


def proc_field(pid: int, field: str) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


async def seed(url: str, connector: str, document: bytes) -> int:
    async with ConnectClient(ConnectEndpoint(url, timeout_seconds=300)) as connect:
        result = await connect.alter_offsets_chunked(connector, document, limits=LIMITS)
        return result.chunks


async def connect_fingerprint(url: str, connector: str, expected: tuple[int, int]) -> tuple[int, int]:
    """GET offsets until Connect lists the expected number of partitions, then the digest sum."""
    deadline = time.monotonic() + 600
    async with ConnectClient(ConnectEndpoint(url, timeout_seconds=300)) as connect:
        while True:
            try:
                body = await connect.get_offsets_raw(connector)
                if body.count(b'"partition"') == expected[0] and b'"offset":null' not in body:
                    return await asyncio.to_thread(fingerprint, body)
                del body
            except ConnectServerError:  # 500 while its offset store consumes a large write
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"GET offsets never listed {expected[0]} partitions")
            await asyncio.sleep(2)


async def write_alter_configmap(kube: KubernetesApi, namespace: str, name: str, document: bytes) -> str:
    written = await OffsetsConfigMapStore(kube).write(namespace, name, "offsets.json", document, pretty=False)
    return f"{written.form.value}, {len(written.shards)} shards"


def main() -> int:
    info = stack_info()
    install_crds(info)
    api_client = kube_config.new_client_from_config(config_file=info["kubeconfig"])
    import urllib3

    urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)  # the local stack's self-signed cert
    core, custom = kube_client.CoreV1Api(api_client), kube_client.CustomObjectsApi(api_client)
    namespace = f"bench-op-large-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": namespace}})
    worker = DedicatedWorker(heap=HEAP, name="bench-op-large")
    work = Path(f"/tmp/{namespace}")
    work.mkdir(parents=True, exist_ok=True)
    op = OperatorProcess(info["kubeconfig"], namespace, work / "operator.log")
    rows: list[Row] = []
    name, list_cm, alter_cm = "bench-large", "bench-large-list", "bench-large-alter"
    facts: dict[str, Any] = {"load_start": os.getloadavg()[0]}
    try:
        print(f"== dedicated Connect worker on {worker.url} ({HEAP})", flush=True)
        worker.start()
        create_cluster(custom, namespace, worker.url, requestTimeoutSeconds=300)
        create_connector(
            custom,
            namespace,
            name,
            {
                "class": MONITORABLE_SOURCE,
                "tasksMax": 1,
                "state": "stopped",
                "config": {"topic": f"{namespace}-topic"},
                "listOffsets": {"toConfigMap": {"name": list_cm}},
                "alterOffsets": {"fromConfigMap": {"name": alter_cm}},
            },
        )
        op.extra_env = {"CONNECT_OFFSETS_DRIFT_INTERVAL": "30"}  # as shipped, not the tests' 5 s
        op.start()
        assert op.process is not None
        pid = op.process.pid
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorStopped", timeout=180)
        facts["rss_idle"] = proc_field(pid, "VmRSS")

        original = make_document(PARTITIONS)
        facts["document_mib"] = len(original) / 2**20
        expected = fingerprint(original)
        started = time.monotonic()
        facts["seed_chunks"] = asyncio.run(seed(worker.url, name, original))
        del original
        assert asyncio.run(connect_fingerprint(worker.url, name, expected)) == expected
        print(f"  seeded {PARTITIONS:,} partitions in {time.monotonic() - started:.0f} s", flush=True)

        def operator_step(operation: str, detail: Any, **extra: str) -> dict[str, Any]:
            request = uuid.uuid4().hex[:8]
            started = time.monotonic()
            annotate(custom, namespace, name, connector_offsets=operation, request_id=request, **extra)

            def done() -> dict[str, Any] | None:
                body = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, "kafkaconnectors", name)
                annotations = body["metadata"].get("annotations") or {}
                if "connect-offsets.io/connector-offsets" in annotations:
                    return None
                last = body["status"]["lastOffsetsOperation"]
                return body if last.get("requestId") == request else None

            body = wait_for(f"operator {operation}", done, timeout=STEP_TIMEOUT, interval=1.0)
            seconds = time.monotonic() - started
            last = body["status"]["lastOffsetsOperation"]
            assert last["result"] == "Succeeded", last
            assert op.process is not None and op.process.poll() is None, "the operator died"
            peak = proc_field(pid, "VmHWM") or 0.0
            text = detail(last) if callable(detail) else detail
            rows.append(Row(operation, seconds, peak, text))
            print(f"  {operation:<8} {seconds:7.1f} s  operator peak RSS {peak:6.0f} MiB  {text}", flush=True)
            print(f"           {last['message'][:300]}", flush=True)
            return dict(body)

        operator_step("list", lambda last: last["message"].split("to ", 1)[-1])
        listed = OffsetsConfigMapStore(KubernetesApi(api_client))
        stored = asyncio.run(listed.read(namespace, list_cm, "offsets.json"))
        assert stored is not None and fingerprint(stored.document) == expected, "list ConfigMap differs from Connect"
        del stored

        changed = make_document(PARTITIONS, bump=1, extra=EXTRA)
        changed_fp = fingerprint(changed)
        form = asyncio.run(write_alter_configmap(KubernetesApi(api_client), namespace, alter_cm, changed))
        del changed
        body = operator_step("alter", lambda last: f"from the {form} alter ConfigMap; backup, then {requests(last)}")
        backup = body["status"]["lastOffsetsOperation"]["backup"]
        assert asyncio.run(connect_fingerprint(worker.url, name, changed_fp)) == changed_fp

        operator_step("restore", lambda last: f"newest backup ({backup[-30:]}) + nulls; {requests(last)}")
        assert asyncio.run(connect_fingerprint(worker.url, name, expected)) == expected
        facts["load_end"] = os.getloadavg()[0]
        facts["worker_rss"] = worker.rss_mib()
    finally:
        try:  # while the operator runs: its finalizer deletes the connector
            custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, "kafkaconnectors", name)
            wait_for("the connector deleted", lambda: httpx.get(f"{worker.url}/connectors/{name}").status_code == 404)
        except Exception as error:  # the worker is going away anyway
            print(f"(cleanup: {error})")
        op.stop()
        worker.stop()
        delete_namespace(core, custom, namespace)
    report(rows, facts)
    return 0


def report(rows: list[Row], facts: dict[str, Any]) -> None:
    table = "\n".join(f"| {r.step} | {r.seconds:.1f} | {r.operator_rss:.0f} | {r.detail} |" for r in rows)
    body = f"""## Large offsets through the operator: {PARTITIONS:,} source partitions (issue 6 §1)

`make bench BENCH=operator_large_offsets` — {machine()}; 1-minute load average {facts["load_start"]:.1f} at
the start, {facts.get("load_end", 0):.1f} at the end.

The operator as shipped (a separate `connect-offsets-operator -n NS` process, drift interval 30 s)
driven by annotations on a STOPPED MonitorableSourceConnector KafkaConnector, against a dedicated
Connect 4.1 worker ({HEAP}). {PARTITIONS:,} partitions were seeded with {facts.get("seed_chunks")} chunked
PATCHes first (not an operator step). Time = annotation to the annotation's removal with
`lastOffsetsOperation` `Succeeded` for this request id. After each step, Connect's `GET offsets`
was compared with what was asked (entry count and an order-independent digest sum): equal each time.

| Step | Wall time (s) | Operator peak RSS so far (MiB) | Detail |
|---|---:|---:|---|
{table}

The operator's RSS when idle with this resource: {facts.get("rss_idle") or 0:.0f} MiB. Connect worker peak RSS
(VmHWM): {facts.get("worker_rss") or 0:.0f} MiB.

Nothing holds a parsed million-entry tree any more: `list`, the backups and the chunked PATCHes
stream, and `alter`/`restore` validate in batches of 10,000 entries (`offsets.validated_compact_json`,
`restore_compact_json`), keeping a 128-bit digest per partition. What remains at the peak is text: the
document as read from the ConfigMaps, the compact text to send and its bytes for the PATCH chunks
(restore: the backup and Connect's GET answer instead of the ConfigMap document), each about
{facts.get("document_mib") or 0:.0f} MiB. Before streamed validation (commit 61f309c) the peaks were
1,526 MiB for `alter` and 2,112 MiB for `restore`.
"""
    if PARTITIONS == 1_000_000:
        write_section("operator_large_offsets", body)
    else:
        print("(not recorded in bench/README.md: only the 1,000,000-partition run is)")
    print(body)


if __name__ == "__main__":
    sys.exit(main())
