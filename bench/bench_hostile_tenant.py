"""Benchmark: what one hostile tenant costs a shared operator (issue 18, points 3 and 4).

The operator runs as the chart installs it (its ServiceAccount token, env and namespaces, default
values: document cap 256 MiB) for two tenant namespaces. Tenant A, one after the other:

1. an alter of a sink connector with ``topics.regex=(a+)+`` and 1,000 topics named ``aaaa…!``
   (catastrophic for a backtracking engine);
2. an alter from a gzip ConfigMap that inflates to 900 MiB (a bomb of ~900 KB);
3. a ConnectCluster whose ``spec.url`` answers ``GET /`` with ~300 KB of gzip inflating to 300 MiB;
4. an alter of LARGE entries (default 1,000,000: validated, planned, chunked, PATCHed) onto a
   connector without offsets, then a second alter changing every entry (so the operator first
   backs up LARGE current offsets). This connector runs on a dedicated Connect worker with a 3 GiB
   heap: the shared stack worker (768 MiB) runs out of heap serving a million offsets.

During each, a prober asks the liveness endpoint every 0.2 s (1 s timeout) and tenant B runs
``list`` requests back to back. Recorded per scenario: wall time to the outcome, liveness latency
(p50 / p99 / max, failures), the worst ``connect_offsets_event_loop_lag_seconds`` scraped, tenant
B's lists completed, and the operator's peak RSS (VmHWM) so far.

Run: ``make bench BENCH=hostile_tenant`` (or ``.venv/bin/python bench/bench_hostile_tenant.py [LARGE]``).
"""

from __future__ import annotations

import asyncio
import base64
import json
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from kubernetes import client as kube_client
from kubernetes import config as kube_config

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.conftest import delete_namespace, install_crds, stack_info, wait_for  # noqa: E402
from tests.integration.chart_install import chart_operator  # noqa: E402
from tests.integration.connect_worker import DedicatedWorker  # noqa: E402
from tests.integration.hostile import Prober, gzip_zeros, huge_answers, peak_rss_mib  # noqa: E402
from tests.integration.support import (  # noqa: E402
    FILE_SINK,
    GROUP,
    MONITORABLE_SOURCE,
    VERSION,
    annotate,
    condition,
    create_cluster,
    create_connector,
    delete_with_offsets,
    file_source_spec,
    get_connector,
    wait_annotation_removed,
    wait_condition,
)

from bench.report import machine, write_section  # noqa: E402
from connect_offsets.clients.kubernetes import KubernetesApi  # noqa: E402
from connect_offsets.clients.offsets_configmaps import OffsetsConfigMapStore  # noqa: E402

LARGE = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000


@dataclass
class Row:
    scenario: str
    seconds: float
    outcome: str
    probes: list[float]
    failures: int
    loop_lag: float
    lists: int
    rss: float


class TenantB(threading.Thread):
    """Tenant B's list requests, back to back, while tenant A's scenario runs."""

    def __init__(self, custom: Any, namespace: str, name: str) -> None:
        super().__init__(daemon=True)
        self.custom, self.namespace, self.name = custom, namespace, name
        self.done = threading.Event()
        self.completed = 0

    def run(self) -> None:
        while not self.done.is_set():
            annotate(self.custom, self.namespace, self.name, connector_offsets="list")
            wait_annotation_removed(self.custom, self.namespace, self.name, timeout=120)
            self.completed += 1


def worst_loop_lag(metrics_url: str) -> float:
    for line in httpx.get(metrics_url, timeout=5).text.splitlines():
        if line.startswith("connect_offsets_event_loop_lag_seconds "):
            return float(line.split()[1])
    return float("nan")


def measure(scenario: str, op: Any, custom: Any, tenant_b: str, calm: str, action: Callable[[], str]) -> Row:
    prober = Prober(op.liveness_url)
    other = TenantB(custom, tenant_b, calm)
    lag = 0.0
    prober.start()
    other.start()
    started = time.monotonic()
    try:
        outcome = action()
        seconds = time.monotonic() - started
        lag = worst_loop_lag(op.metrics_url)
    finally:
        prober.done.set()
        other.done.set()
        prober.join(5)
        other.join(130)
    assert op.operator.process is not None
    row = Row(
        scenario,
        seconds,
        outcome,
        prober.latencies,
        len(prober.failures),
        lag,
        other.completed,
        peak_rss_mib(op.operator.process.pid),
    )
    print(row.scenario, f"{row.seconds:.1f}s", row.outcome, f"max probe {max(row.probes):.3f}s", f"rss {row.rss:.0f}")
    return row


def main() -> int:
    info = stack_info()
    install_crds(info)
    api = kube_config.new_client_from_config(config_file=info["kubeconfig"])
    core, custom = kube_client.CoreV1Api(api), kube_client.CustomObjectsApi(api)
    run_id = uuid.uuid4().hex[:6]
    tenant_a, tenant_b = f"bench-hostile-{run_id}-a", f"bench-hostile-{run_id}-b"
    for ns in (tenant_a, tenant_b):
        core.create_namespace({"metadata": {"name": ns}})
    connect = httpx.Client(base_url=info["connect_url"], timeout=120)
    rows: list[Row] = []
    names: list[str] = []
    big = DedicatedWorker(heap="-Xmx3g", name="hostile")
    big.start()
    try:
        with (
            tempfile.TemporaryDirectory() as tmp,
            chart_operator(info, core, custom, Path(tmp), [tenant_a, tenant_b]) as op,
        ):
            tmp_path = Path(tmp)
            source = tmp_path / "b.txt"
            source.write_text("one\n")
            for ns in (tenant_a, tenant_b):
                create_cluster(custom, ns, info["connect_url"])
            create_cluster(custom, tenant_a, big.url, name="big")
            calm, regex, bomb, large = (f"{kind}-{run_id}" for kind in ("calm", "regex", "bomb", "large"))
            names += [calm, regex, bomb]
            create_connector(custom, tenant_b, calm, file_source_spec(source, calm, "calm-offsets"))
            sink = {"topics.regex": "(a+)+", "file": str(tmp_path / "sink.txt")}
            create_connector(
                custom,
                tenant_a,
                regex,
                {
                    "class": FILE_SINK,
                    "tasksMax": 1,
                    "state": "stopped",
                    "config": sink,
                    "alterOffsets": {"fromConfigMap": {"name": "regex-offsets"}},
                },
            )
            create_connector(custom, tenant_a, bomb, file_source_spec(source, bomb, "bomb-offsets", state="stopped"))
            create_connector(
                custom,
                tenant_a,
                large,
                {
                    "class": MONITORABLE_SOURCE,
                    "tasksMax": 1,
                    "state": "stopped",
                    "config": {"topic": f"{large}-t"},
                    "alterOffsets": {"fromConfigMap": {"name": "large-offsets"}},
                },
                cluster="big",
            )
            wait_condition(custom, tenant_b, calm, "Ready", reason="ConnectorRunning", timeout=120)
            for name in (regex, bomb, large):
                wait_condition(custom, tenant_a, name, "Ready", reason="ConnectorStopped", timeout=120)

            def refused(name: str) -> str:
                found = wait_for(
                    f"{name} refused",
                    lambda: condition(get_connector(custom, tenant_a, name), "OffsetsOperationFailed"),
                    timeout=600,
                )
                return f"{found['reason']}"

            def hostile_regex() -> str:
                entries = [
                    {
                        "partition": {"kafka_topic": "a" * (30 + i % 200) + "!", "kafka_partition": 0},
                        "offset": {"kafka_offset": 1},
                    }
                    for i in range(1000)
                ]
                core.create_namespaced_config_map(
                    tenant_a,
                    {"metadata": {"name": "regex-offsets"}, "data": {"offsets.json": json.dumps({"offsets": entries})}},
                )
                annotate(custom, tenant_a, regex, connector_offsets="alter")
                return refused(regex)

            def gzip_bomb() -> str:
                packed = base64.b64encode(gzip_zeros(900 << 20)).decode()
                core.create_namespaced_config_map(
                    tenant_a, {"metadata": {"name": "bomb-offsets"}, "binaryData": {"offsets.json.gz": packed}}
                )
                annotate(custom, tenant_a, bomb, connector_offsets="alter")
                return refused(bomb)

            def huge_answer() -> str:
                with huge_answers() as (url, _seen):
                    create_cluster(custom, tenant_a, url, name="hostile")

                    def reported() -> str | None:
                        body = custom.get_namespaced_custom_object(
                            GROUP, VERSION, tenant_a, "connectclusters", "hostile"
                        )
                        found = condition(body, "Ready")
                        return found["reason"] if found and "larger than" in found["message"] else None

                    return wait_for("the hostile cluster reported", reported, timeout=300)

            def large_alter(shift: int) -> Callable[[], str]:
                def alter() -> str:
                    document = {
                        "offsets": [
                            {
                                "partition": {"file": f"/data/landing/batch-{i:07d}.csv"},
                                "offset": {"line": (i + shift) % 97},
                            }
                            for i in range(LARGE)
                        ]
                    }
                    store = OffsetsConfigMapStore(KubernetesApi(api))
                    data = json.dumps(document).encode()
                    del document
                    asyncio.run(store.write(tenant_a, "large-offsets", "offsets.json", data, pretty=False))
                    annotate(custom, tenant_a, large, connector_offsets="alter")
                    body = wait_annotation_removed(custom, tenant_a, large, timeout=3600)
                    last = body["status"]["lastOffsetsOperation"]
                    return f"{last['result']}" + (", backed up" if last.get("backup") else "")

                return alter

            for scenario, action in (
                ("hostile topics.regex, 1,000 topics", hostile_regex),
                ("gzip bomb, 900 MiB inflated", gzip_bomb),
                ("Connect answer, 300 MiB inflated", huge_answer),
                (f"alter of {LARGE:,} entries (no offsets before)", large_alter(0)),
                (f"alter of {LARGE:,} entries (all changed, backup first)", large_alter(1)),
            ):
                rows.append(measure(scenario, op, custom, tenant_b, calm, action))
    finally:
        for name in names:
            delete_with_offsets(connect, name)  # the large alter's offsets must not stay in the worker's heap
        for ns in (tenant_a, tenant_b):
            delete_namespace(core, custom, ns)
        big.stop()
    report(rows)
    return 0


def report(rows: list[Row]) -> None:
    lines = [
        "## A hostile tenant on a shared operator (issue 18)",
        "",
        f"`make bench BENCH=hostile_tenant` — {machine()}.",
        "",
        "The operator under the chart's RBAC and default values (document cap 256 MiB), two tenant",
        "namespaces. While tenant A's scenario runs, a prober asks the liveness endpoint every 0.2 s",
        "(1 s timeout) and tenant B runs `list` requests back to back. RSS is the operator's peak so far.",
        "The large alters run against a dedicated Connect worker (3 GiB heap; the stack's shared worker",
        "has 768 MiB, too little to serve a million offsets); tenant B stays on the shared worker.",
        "Worst loop lag is `connect_offsets_event_loop_lag_seconds` scraped as the scenario ends (the",
        "worst of its last 10 s); the liveness columns cover the whole scenario.",
        "",
        "| Scenario | Outcome | Time (s) | Liveness p50 / p99 / max (ms) | Probe failures "
        "| Worst loop lag (s) | B's lists | Peak RSS (MiB) |",
        "|---|---|---:|---|---:|---:|---:|---:|",
    ]
    for row in rows:
        ms = sorted(p * 1000 for p in row.probes)
        p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
        lines.append(
            f"| {row.scenario} | {row.outcome} | {row.seconds:.1f} "
            f"| {statistics.median(ms):.0f} / {p99:.0f} / {ms[-1]:.0f} | {row.failures} "
            f"| {row.loop_lag:.3f} | {row.lists} | {row.rss:.0f} |"
        )
    write_section("hostile_tenant", "\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
