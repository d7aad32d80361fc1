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

Fair share (issue 31, point 4; ``bench_hostile_tenant.py fair-share`` runs it alone): tenant B's
``list`` requests back to back for ``FAIR_SHARE_PHASE_S``, first alone, then while tenant A has
``FAIR_SHARE_MIRRORS`` mirrors on brokers that hang (listeners on 127.0.0.2 that accept and never
answer, once A's connectors exist) and as many on slow brokers (listeners forwarding to Kafka B with
every answer ``SLOW_ANSWER_S`` late), each on an address of its own, measured every second. Recorded:
B's list latency p50 / p99 / max, the worst event-loop lag scraped every 2 s, and what the hanging
and slow brokers saw (connections, most open at once). Target: B's p99 within 1.5x of B alone.

Dead Connect (issue 45, its first target; ``bench_hostile_tenant.py dead-connect`` runs it alone):
tenant B's ``list`` requests back to back for ``DEAD_PHASE_S``, first alone, then for
``DEAD_BUSY_PHASE_S`` from the moment tenant A creates ``DEAD_RESOURCES`` KafkaConnectors, each
with a ``list`` request, on two ConnectClusters whose URLs do not answer (a listener on 127.0.0.2
that accepts and never replies, behind the default 120 s request time-out; an HTTP server
answering 503 after ``GATEWAY_DELAY_S``), then alone again once A's resources are deleted.
Recorded: B's p50 / p99 / max per phase and their ratios to B alone before (target: p50 at most
1.2x, p99 at most 1.5x), what the dead endpoints received, and the operator's circuit breaker
metrics.

Dead Kafka (issue 45, its Kafka target; ``bench_hostile_tenant.py dead-kafka`` runs it alone): tenant
B's ``list`` requests back to back for ``DK_PHASE_S``, first alone, then for ``DK_BUSY_PHASE_S``
while tenant A's Kafka clusters are dead behind the three things that ask them, then alone again
once A's resources are deleted. Tenant A, on a Connect worker of its own (its connectors really
run; only the Kafka the operator is told about is dead):

1. **sink progress**: ``DK_HANGING_CLUSTERS`` ConnectClusters whose ``spec.kafka.bootstrapServers``
   is a listener of its own on 127.0.0.2, and ``DK_SLOW_CLUSTERS`` whose listener answers every
   reply ``SLOW_ANSWER_S`` late, each with ``DK_SINKS_PER_CLUSTER`` RUNNING FileStreamSinks
   (``spec.progress`` on): one progress round per ConnectCluster per drift interval (5 s);
2. **seek-to-time**: ``DK_SEEKS_PER_CLUSTER`` STOPPED FileStreamSinks per ConnectCluster, annotated
   ``connector-offsets=alter`` with ``seek-to`` a new time every ``DK_SEEK_EVERY_S`` (each a user's
   change, a ListOffsets by timestamp on the ConnectCluster's Kafka);
3. **a mirror's lag**: ``DK_MIRRORS`` mirrors whose source brokers hang and as many on slow ones
   (one KafkaMirrorMaker2 each, measured every second), as in the fair-share run.

Every listener forwards to a real Kafka while A is set up (the mirrors pass their cluster-id check,
progress is measured, ``Progressing=True``); when the phase starts, the hanging ones accept
connections and never answer again and the slow ones turn slow. Recorded: B's p50 / p99 / max per
phase and their ratios to B alone before and after (target: p50 at most 1.2x, p99 at most 1.5x),
the worst event-loop lag scraped every 2 s, connections the hanging and slow brokers received (and
the most open at once), the operator's progress rounds and lag measurements by result, and the
conditions A's resources ended the phase with (their messages quoted).

Run: ``make bench BENCH=hostile_tenant`` (or
``.venv/bin/python bench/bench_hostile_tenant.py [LARGE|fair-share|dead-connect|dead-kafka]``).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kubernetes import client as kube_client
from kubernetes import config as kube_config

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.conftest import (  # noqa: E402
    delete_leftover_connectors,
    delete_namespace,
    install_crds,
    stack_info,
    wait_for,
)
from tests.integration.chart_install import chart_operator  # noqa: E402
from tests.integration.connect_worker import DedicatedWorker  # noqa: E402
from tests.integration.hostile import (  # noqa: E402
    ConnectionTally,
    CountingListener,
    Prober,
    gzip_zeros,
    hostile_mirrors,
    huge_answers,
    peak_rss_mib,
)
from tests.integration.support import (  # noqa: E402
    FILE_SINK,
    GROUP,
    MONITORABLE_SOURCE,
    VERSION,
    annotate,
    annotation,
    condition,
    create_cluster,
    create_connector,
    create_mm2,
    delete_with_offsets,
    file_source_spec,
    get_connector,
    wait_annotation_removed,
    wait_condition,
)

from bench.report import machine, write_section  # noqa: E402
from connect_offsets.clients.kubernetes import KubernetesApi  # noqa: E402
from connect_offsets.clients.offsets_configmaps import OffsetsConfigMapStore  # noqa: E402
from connect_offsets.vocabulary import MIRRORS  # noqa: E402

FAIR_SHARE_ONLY = sys.argv[1:] == ["fair-share"]
DEAD_CONNECT_ONLY = sys.argv[1:] == ["dead-connect"]
DEAD_KAFKA_ONLY = sys.argv[1:] == ["dead-kafka"]
LARGE = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 1_000_000
#: Tenant A's mirrors of each kind (hanging brokers, slow brokers), 25 per KafkaMirrorMaker2.
FAIR_SHARE_MIRRORS = 50
MIRRORS_PER_RESOURCE = 25
#: How long tenant B lists, alone and then while tenant A misbehaves.
FAIR_SHARE_PHASE_S = 90.0
#: How late a slow broker answers (every answer).
SLOW_ANSWER_S = 3.0
#: Between two of B's lists. Annotating again within milliseconds of the previous removal can lose
#: the wake-up (docs field notes, "a resource that stops answering requests"; issue 30), which would
#: measure that bug, not fair share.
LIST_GAP_S = 0.3
#: Tenant A's KafkaConnectors on the two dead ConnectClusters (half on each), a ``list`` on each.
DEAD_RESOURCES = 150
#: How late the dead gateway answers 503 (issue 45's scenario).
GATEWAY_DELAY_S = 25.0
#: How long tenant B lists alone (before A, and after A is deleted) in the dead-Connect run.
DEAD_PHASE_S = 60.0
#: How long tenant B lists while A's resources sit on the dead URLs: past the black hole's first
#: requests ending at the default 120 s request time-out (no breaker knows anything before).
DEAD_BUSY_PHASE_S = 150.0
#: Tenant A's ConnectClusters whose spec.kafka hangs, and those whose spec.kafka answers slowly.
DK_HANGING_CLUSTERS = 6
DK_SLOW_CLUSTERS = 2
#: Per ConnectCluster: RUNNING sinks whose progress is measured, STOPPED sinks asked to seek.
DK_SINKS_PER_CLUSTER = 3
DK_SEEKS_PER_CLUSTER = 3
#: Every this often, each of A's seek sinks is annotated with a new ``seek-to`` time.
DK_SEEK_EVERY_S = 10.0
#: Tenant A's mirrors on hanging source brokers, and as many on slow ones (one KafkaMirrorMaker2 each).
DK_MIRRORS = 25
#: How long tenant B lists alone (before A, and after A is deleted), and while A's Kafka is dead:
#: long enough for each dead address's first attempts (10 s time-outs) and two back-offs (30 s, 60 s).
DK_PHASE_S = 90.0
DK_BUSY_PHASE_S = 180.0


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
    if DEAD_CONNECT_ONLY:
        dead_connect(info, core, custom)
        return 0
    if DEAD_KAFKA_ONLY:
        dead_kafka(info, core, custom)
        return 0
    if not FAIR_SHARE_ONLY:
        resource_scenarios(info, api, core, custom)
    fair_share(info, core, custom)
    if not FAIR_SHARE_ONLY:
        dead_connect(info, core, custom)
        dead_kafka(info, core, custom)
    return 0


def resource_scenarios(info: dict[str, Any], api: Any, core: Any, custom: Any) -> None:
    """Issue 18's scenarios: a regex, a gzip bomb, a huge Connect answer, two large alters."""
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


@dataclass
class Phase:
    name: str
    lists: list[float]
    loop_lag: float
    hanging: tuple[int, int]  # connections to the hanging brokers, most open at once
    slow: tuple[int, int]


class LoopLagWatch(threading.Thread):
    """The worst ``connect_offsets_event_loop_lag_seconds`` (itself the worst of 10 s) scraped every 2 s."""

    def __init__(self, metrics_url: str) -> None:
        super().__init__(daemon=True)
        self.metrics_url = metrics_url
        self.worst = 0.0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(2.0):
            with contextlib.suppress(httpx.HTTPError, ValueError):
                self.worst = max(self.worst, worst_loop_lag(self.metrics_url))


def b_lists(custom: Any, namespace: str, name: str, seconds: float, metrics_url: str) -> tuple[list[float], float]:
    """Tenant B's lists back to back for ``seconds``: each one's latency, and the worst loop lag."""
    watch = LoopLagWatch(metrics_url)
    watch.start()
    latencies: list[float] = []
    started = time.monotonic()

    def done() -> bool:
        return annotation(get_connector(custom, namespace, name), "connector-offsets") is None

    try:
        while time.monotonic() - started < seconds:
            begun = time.monotonic()
            annotate(custom, namespace, name, connector_offsets="list")
            # Polled every 20 ms: the tests' 0.5 s would be the resolution of every latency.
            wait_for("B's list done", done, timeout=600, interval=0.02)
            latencies.append(time.monotonic() - begun)
            time.sleep(LIST_GAP_S)
    finally:
        watch.done.set()
        watch.join(5)
    return latencies, watch.worst


def fair_share(info: dict[str, Any], core: Any, custom: Any) -> None:
    """Tenant B's lists alone, then while tenant A's mirrors hang and crawl (see the module docstring)."""
    run_id = uuid.uuid4().hex[:6]
    tenant_a, tenant_b = f"bench-fair-{run_id}-a", f"bench-fair-{run_id}-b"
    for ns in (tenant_a, tenant_b):
        core.create_namespace({"metadata": {"name": ns}})
    hanging_tally, slow_tally = ConnectionTally(), ConnectionTally()
    hanging = [
        CountingListener("slow-proxy", upstream=info["kafka_b"], tally=hanging_tally) for _ in range(FAIR_SHARE_MIRRORS)
    ]
    slow = [
        CountingListener("slow-proxy", upstream=info["kafka_b"], tally=slow_tally) for _ in range(FAIR_SHARE_MIRRORS)
    ]
    worker = DedicatedWorker(heap="-Xmx1g", name="fair-share")
    worker.start()
    phases: list[Phase] = []
    try:
        with (
            tempfile.TemporaryDirectory() as tmp,
            chart_operator(info, core, custom, Path(tmp), [tenant_a, tenant_b]) as op,
            httpx.Client(base_url=worker.url, timeout=60) as own,
        ):
            source = Path(tmp) / "b.txt"
            source.write_text("one\n")
            create_cluster(custom, tenant_a, worker.url)
            create_cluster(custom, tenant_b, info["connect_url"])
            calm = f"calm-{run_id}"
            create_connector(custom, tenant_b, calm, file_source_spec(source, calm, "calm-offsets", state="stopped"))
            wait_condition(custom, tenant_b, calm, "Ready", reason="ConnectorStopped", timeout=120)
            lists, lag = b_lists(custom, tenant_b, calm, FAIR_SHARE_PHASE_S, op.metrics_url)
            phases.append(Phase("B alone", lists, lag, (0, 0), (0, 0)))
            print(f"B alone: {len(lists)} lists, p99 {p99(lists):.3f} s")

            groups = {"hang": hanging, "slow": slow}
            for kind, listeners in groups.items():
                for part in range(FAIR_SHARE_MIRRORS // MIRRORS_PER_RESOURCE):
                    chunk = listeners[part * MIRRORS_PER_RESOURCE : (part + 1) * MIRRORS_PER_RESOURCE]
                    prefix = f"{kind[0]}{part}x"
                    clusters, mirrors = hostile_mirrors(chunk, info["kafka_a"], prefix, len(chunk))
                    create_mm2(
                        custom, tenant_a, f"{kind}-{part}", clusters, mirrors, replicationLag={"intervalSeconds": 1}
                    )
            wanted = 2 * FAIR_SHARE_MIRRORS
            wait_for(
                f"tenant A's {wanted} connectors", lambda: len(own.get("/connectors").json()) == wanted, timeout=900
            )
            for listener in hanging:
                listener.mode = "blackhole"
            for listener in slow:
                listener.delay = SLOW_ANSWER_S
            hanging_tally.restart()
            slow_tally.restart()
            lists, lag = b_lists(custom, tenant_b, calm, FAIR_SHARE_PHASE_S, op.metrics_url)
            phases.append(
                Phase(
                    f"B while A's {FAIR_SHARE_MIRRORS} + {FAIR_SHARE_MIRRORS} mirrors hang and crawl",
                    lists,
                    lag,
                    (hanging_tally.connections, hanging_tally.peak_open),
                    (slow_tally.connections, slow_tally.peak_open),
                )
            )
            print(f"B during A: {len(lists)} lists, p99 {p99(lists):.3f} s")
            # B alone again, once A is gone: the machine is shared, its load drifts.
            for kind in groups:
                for part in range(FAIR_SHARE_MIRRORS // MIRRORS_PER_RESOURCE):
                    custom.delete_namespaced_custom_object(GROUP, VERSION, tenant_a, MIRRORS, f"{kind}-{part}")
            wait_for("tenant A's connectors deleted", lambda: own.get("/connectors").json() == [], timeout=900)
            lists, lag = b_lists(custom, tenant_b, calm, FAIR_SHARE_PHASE_S, op.metrics_url)
            phases.append(Phase("B alone again, A deleted", lists, lag, (0, 0), (0, 0)))
            print(f"B alone again: {len(lists)} lists, p99 {p99(lists):.3f} s")
    finally:
        for listener in [*hanging, *slow]:
            listener.close()
        for ns in (tenant_a, tenant_b):
            delete_namespace(core, custom, ns)
        worker.stop()
    fair_share_report(phases)


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def latency_cells(lists: list[float]) -> str:
    """A phase's ``lists | p50 / p99 / max (ms)`` table cells."""
    ms = sorted(v * 1000 for v in lists)
    return f"{len(ms)} | {statistics.median(ms):.0f} / {p99(ms):.0f} / {ms[-1]:.0f}"


def ratios(lists: list[float], base: list[float]) -> tuple[float, float]:
    """p50 and p99 of ``lists`` against those of ``base``."""
    return statistics.median(lists) / statistics.median(base), p99(lists) / p99(base)


def ratio_cell(lists: list[float], base: list[float]) -> str:
    p50_ratio, p99_ratio = ratios(lists, base)
    return f"{p50_ratio:.2f}x, {p99_ratio:.2f}x"


def verdict(ratio: float, limit: float) -> str:
    return "met" if ratio <= limit else "missed"


def phase_line(name: str, lists: list[float]) -> str:
    """What a phase printed as it ended."""
    return f"{name}: {len(lists)} lists, p50 {statistics.median(lists):.3f} s, p99 {p99(lists):.3f} s"


def fair_share_report(phases: list[Phase]) -> None:
    alone, during, again = phases
    ratio = p99(during.lists) / p99(alone.lists)
    ratio_again = p99(during.lists) / p99(again.lists)
    lines = [
        "## Fair share: a tenant whose brokers hang or crawl (issue 31)",
        "",
        f"`bench/bench_hostile_tenant.py fair-share` — {machine()}.",
        "",
        "The operator under the chart's RBAC and default values (`tenantCallsPerNamespace: 4`), two tenant",
        f"namespaces. Tenant B runs `list` requests on a STOPPED KafkaConnector back to back for "
        f"{FAIR_SHARE_PHASE_S:.0f} s, first alone,",
        f"then while tenant A has {FAIR_SHARE_MIRRORS} mirrors whose source brokers hang (listeners on 127.0.0.2 that",
        f"accept and never answer, each mirror its own address) and {FAIR_SHARE_MIRRORS} on slow brokers (listeners",
        f"forwarding to Kafka B, every answer {SLOW_ANSWER_S:.0f} s late), four KafkaMirrorMaker2s measured every",
        "second (`replicationLag.intervalSeconds: 1`); A's 100 MirrorSourceConnectors (STOPPED) exist on a",
        "Connect worker of its own, so their lag is measured. Loop lag: the worst",
        "`connect_offsets_event_loop_lag_seconds` scraped every 2 s. Brokers: connections they received during",
        "the phase, and the most open at once.",
        f"A list's time: from the annotation to its removal, polled every 20 ms; {LIST_GAP_S} s between lists",
        "(annotated again within milliseconds of a removal, a request can lose its wake-up: issue 30).",
        "",
        "| Phase | B's lists | p50 / p99 / max (ms) | Worst loop lag (s) | Hanging brokers: connections, most open "
        "| Slow brokers: connections, most open |",
        "|---|---:|---|---:|---|---|",
    ]
    for phase in phases:
        lines.append(
            f"| {phase.name} | {latency_cells(phase.lists)} "
            f"| {phase.loop_lag:.3f} | {phase.hanging[0]}, {phase.hanging[1]} | {phase.slow[0]}, {phase.slow[1]} |"
        )
    met = verdict(max(ratio, ratio_again), 1.5)
    lines += [
        "",
        f"B's p99 while A misbehaves is {ratio:.2f}x B alone before and {ratio_again:.2f}x B alone after "
        f"(target: at most 1.5x, {met}).",
    ]
    write_section("hostile_tenant_fair_share", "\n".join(lines))


@dataclass
class DeadPhase:
    name: str
    lists: list[float]
    loop_lag: float
    #: Connections the black hole accepted, requests the gateway received, during the phase.
    hole: int = 0
    gateway: int = 0


def scrape_metric(metrics_url: str, name: str) -> float:
    for line in httpx.get(metrics_url, timeout=5).text.splitlines():
        if line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


BREAKER_METRICS = (
    "connect_offsets_connect_breaker_openings_total",
    "connect_offsets_connect_requests_refused_total",
    "connect_offsets_connect_unreachable_endpoints",
)


def dead_connect(info: dict[str, Any], core: Any, custom: Any) -> None:
    """Tenant B's lists alone, while tenant A's resources sit on two dead Connect URLs, and alone
    again (see the module docstring)."""
    from tests.integration.test_shared_dead_connect import SlowGateway

    run_id = uuid.uuid4().hex[:6]
    tenant_a, tenant_b = f"bench-dead-{run_id}-a", f"bench-dead-{run_id}-b"
    for ns in (tenant_a, tenant_b):
        core.create_namespace({"metadata": {"name": ns}})
    hole = CountingListener("blackhole")
    gateway = SlowGateway(GATEWAY_DELAY_S)
    phases: list[DeadPhase] = []
    breaker: dict[str, float] = {}
    pending = 0
    a_deleted = False
    try:
        with (
            tempfile.TemporaryDirectory() as tmp,
            chart_operator(info, core, custom, Path(tmp), [tenant_a, tenant_b]) as op,
        ):
            source = Path(tmp) / "b.txt"
            source.write_text("one\n")
            create_cluster(custom, tenant_b, info["connect_url"])
            calm = f"calm-{run_id}"
            create_connector(custom, tenant_b, calm, file_source_spec(source, calm, "calm-offsets", state="stopped"))
            wait_condition(custom, tenant_b, calm, "Ready", reason="ConnectorStopped", timeout=120)
            lists, lag = b_lists(custom, tenant_b, calm, DEAD_PHASE_S, op.metrics_url)
            phases.append(DeadPhase("B alone", lists, lag))
            print(phase_line("B alone", lists))

            create_cluster(custom, tenant_a, f"http://{hole.address}", name="hole")
            create_cluster(custom, tenant_a, gateway.url, name="gateway", requestTimeoutSeconds=60)
            hole_before, gateway_before = hole.connections, len(gateway.requests)
            for i in range(DEAD_RESOURCES):
                cluster = ("hole", "gateway")[i % 2]
                name = f"{cluster}-{i:03d}"
                spec = file_source_spec(Path(tmp) / f"{name}.txt", name, f"{name}-offsets", state="stopped")
                create_connector(
                    custom, tenant_a, name, spec, cluster=cluster, annotations={f"{GROUP}/connector-offsets": "list"}
                )
            # From A's last creation on: the first passes of A's resources are in it (before the
            # breakers open, each waits its whole time-out), and the back-offs after.
            lists, lag = b_lists(custom, tenant_b, calm, DEAD_BUSY_PHASE_S, op.metrics_url)
            phases.append(
                DeadPhase(
                    f"B while A's {DEAD_RESOURCES} requests sit on 2 dead Connect URLs",
                    lists,
                    lag,
                    hole.connections - hole_before,
                    len(gateway.requests) - gateway_before,
                )
            )
            breaker = {name: scrape_metric(op.metrics_url, name) for name in BREAKER_METRICS}
            items = custom.list_namespaced_custom_object(GROUP, VERSION, tenant_a, "kafkaconnectors")["items"]
            pending = sum(1 for body in items if annotation(body, "connector-offsets") == "list")
            print(phase_line("B during A", lists))
            print(f"A's lists still open: {pending}; breaker {breaker}")

            # A deleted. A deletion on a dead cluster waits for it (offsetsOnDelete), so its
            # finalizers are taken off once the deletion is asked (not before: the operator would
            # put them back on a resource not being deleted).
            for plural in ("kafkaconnectors", "connectclusters"):
                custom.delete_collection_namespaced_custom_object(GROUP, VERSION, tenant_a, plural)

            def a_gone() -> bool:
                items = [
                    (plural, item)
                    for plural in ("kafkaconnectors", "connectclusters")
                    for item in custom.list_namespaced_custom_object(GROUP, VERSION, tenant_a, plural)["items"]
                ]
                unfinalized = {"metadata": {"finalizers": None}}
                for plural, item in items:
                    if item["metadata"].get("finalizers"):
                        with contextlib.suppress(kube_client.ApiException):
                            name = item["metadata"]["name"]
                            custom.patch_namespaced_custom_object(GROUP, VERSION, tenant_a, plural, name, unfinalized)
                return not items

            wait_for("tenant A's resources gone", a_gone, timeout=300, interval=1)
            delete_namespace(core, custom, tenant_a)
            a_deleted = True
            time.sleep(10)  # the namespace's deletion settles (the controller-manager's, the watches')
            hole_before, gateway_before = hole.connections, len(gateway.requests)
            lists, lag = b_lists(custom, tenant_b, calm, DEAD_PHASE_S, op.metrics_url)
            phases.append(
                DeadPhase(
                    "B alone again, A deleted",
                    lists,
                    lag,
                    hole.connections - hole_before,
                    len(gateway.requests) - gateway_before,
                )
            )
            print(phase_line("B alone again", lists))
    finally:
        hole.close()
        gateway.close()
        delete_leftover_connectors(custom, tenant_b)
        for ns in (tenant_a, tenant_b):
            if ns != tenant_a or not a_deleted:
                delete_namespace(core, custom, ns)
    dead_connect_report(phases, breaker, pending)


def dead_connect_report(phases: list[DeadPhase], breaker: dict[str, float], pending: int) -> None:
    alone, during, again = phases
    p50_ratio, p99_ratio = ratios(during.lists, alone.lists)
    p50_again, p99_again = ratios(during.lists, again.lists)
    lines = [
        "## Dead Connect clusters: a tenant's requests on two URLs that do not answer (issue 45)",
        "",
        f"`bench/bench_hostile_tenant.py dead-connect` — {machine()}.",
        "",
        "The operator under the chart's RBAC and default values (8 workers), two tenant namespaces.",
        f"Tenant B runs `list` requests on a STOPPED KafkaConnector of the stack's worker back to back: "
        f"{DEAD_PHASE_S:.0f} s alone;",
        f"then {DEAD_BUSY_PHASE_S:.0f} s from the moment tenant A has created {DEAD_RESOURCES} KafkaConnectors, "
        "each annotated `list`, half",
        "on a ConnectCluster whose URL accepts connections and never answers (127.0.0.2, the default 120 s",
        f"request time-out) and half on one whose URL answers 503 after {GATEWAY_DELAY_S:.0f} s "
        "(`requestTimeoutSeconds: 60`);",
        f"then {DEAD_PHASE_S:.0f} s alone again once A's resources are deleted (and 10 s after).",
        "A list's time: from the annotation to its removal, polled every 20 ms;",
        f"{LIST_GAP_S} s between lists. Loop lag: the worst `connect_offsets_event_loop_lag_seconds` scraped "
        "every 2 s.",
        "Dead endpoints: connections the black hole accepted and requests the 503 server received in the phase.",
        "",
        "| Phase | B's lists | p50 / p99 / max (ms) | p50, p99 vs B alone | Worst loop lag (s) "
        "| Dead endpoints: black hole, 503 |",
        "|---|---:|---|---|---:|---|",
    ]
    for phase in phases:
        lines.append(
            f"| {phase.name} | {latency_cells(phase.lists)} "
            f"| {ratio_cell(phase.lists, alone.lists)} | {phase.loop_lag:.3f} | {phase.hole}, {phase.gateway} |"
        )
    lines += [
        "",
        f"While A's requests sit on the dead URLs, B's p50 is {p50_ratio:.2f}x B alone (target at most 1.2x: "
        f"{verdict(p50_ratio, 1.2)}) and its p99 {p99_ratio:.2f}x (target at most 1.5x: {verdict(p99_ratio, 1.5)}); "
        "against B alone after "
        f"A was deleted, {p50_again:.2f}x and {p99_again:.2f}x. At the end of that "
        f"phase {pending} of A's {DEAD_RESOURCES} lists were still open (they fail until their cluster answers),",
        f"and the operator's breaker metrics read: {breaker.get(BREAKER_METRICS[0], 0):.0f} openings, "
        f"{breaker.get(BREAKER_METRICS[1], 0):.0f} requests refused without a network call, "
        f"{breaker.get(BREAKER_METRICS[2], 0):.0f} endpoints unreachable.",
    ]
    write_section("hostile_tenant_dead_connect", "\n".join(lines))


def scrape_counters(metrics_url: str, name: str) -> dict[str, float]:
    """A labelled metric's samples, by their labels as exposed (``result="failed"``)."""
    found: dict[str, float] = {}
    for line in httpx.get(metrics_url, timeout=5).text.splitlines():
        if line.startswith(name + "{"):
            labels, _, value = line[len(name) + 1 :].rpartition("} ")
            found[labels] = float(value)
    return found


#: What the operator did for tenant A in the dead-Kafka phase: the metric, and the labels of A's samples
#: (B only lists).
DK_COUNTERS = {
    "sink progress rounds": ("connect_offsets_progress_rounds_total", ""),
    "mirrors' lag measurements": ("connect_offsets_mm2_lag_measurements_total", ""),
    "seeks (offsets alters)": ("connect_offsets_offsets_operations_total", 'operation="alter"'),
}


def label_value(labels: str, key: str) -> str:
    """``key``'s value in exposed labels (``kind="KafkaConnector",result="Failed"``)."""
    for pair in labels.split(","):
        name, _, value = pair.partition("=")
        if name == key:
            return value.strip('"')
    return labels


class SeekRounds(threading.Thread):
    """Tenant A's seek requests: at once and then every ``every`` seconds, each of ``names``
    annotated ``connector-offsets=alter`` with a ``seek-to`` time it did not have before."""

    def __init__(self, custom: Any, namespace: str, names: list[str], every: float) -> None:
        super().__init__(daemon=True)
        self.custom, self.namespace, self.names, self.every = custom, namespace, names, every
        self.done = threading.Event()
        self.annotated = 0
        self.errors: list[str] = []

    def run(self) -> None:
        rounds = 0
        while True:
            rounds += 1
            when = (datetime.now(UTC) - timedelta(minutes=rounds)).strftime("%Y-%m-%dT%H:%M:%SZ")
            for name in self.names:
                try:
                    annotate(self.custom, self.namespace, name, connector_offsets="alter", seek_to=when)
                    self.annotated += 1
                except kube_client.ApiException as error:
                    self.errors.append(f"{name}: {error.status} {error.reason}")
            if self.done.wait(self.every):
                return


def sink_spec(path: Path, topic: str, state: str) -> dict[str, Any]:
    return {"class": FILE_SINK, "tasksMax": 1, "state": state, "config": {"topics": topic, "file": str(path)}}


def produce_records(bootstrap: str, topic: str, partitions: int, records: int) -> None:
    """``topic`` with ``records`` JSON strings spread over ``partitions`` (the worker's JsonConverter)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(records):
        producer.produce(topic, value=json.dumps(f"record-{i}").encode(), partition=i % partitions)
    if producer.flush(30):
        raise RuntimeError(f"records for {topic} not delivered")


def remove_kafka_leftovers(bootstrap: str, topic: str, groups: list[str]) -> None:
    """Best effort: the topic and the sinks' consumer groups a run leaves in Kafka."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = list(admin.delete_topics([topic], operation_timeout=30).values())
    if groups:
        futures += list(admin.delete_consumer_groups(groups, request_timeout=30).values())
    for future in futures:
        try:
            future.result(60)
        except Exception as error:  # a group that never committed, a topic never created
            print(f"(not deleted: {error})")


def quoted(message: str, limit: int = 400) -> str:
    text = " ".join(message.split()).replace("|", "\\|")
    return "“" + (text if len(text) <= limit else text[:limit] + " …") + "”"


def a_outcomes(custom: Any, namespace: str) -> list[tuple[str, str, int, str]]:
    """What tenant A's resources say: (what, condition, how many, one message), one row per kind of
    broker, request and condition."""
    groups: dict[tuple[str, str], list[str]] = {}

    def said(found: dict[str, Any] | None, kind: str) -> str:
        return f"{kind}: none" if found is None else f"{kind}={found['status']}/{found['reason']}"

    for body in custom.list_namespaced_custom_object(GROUP, VERSION, namespace, "kafkaconnectors")["items"]:
        name = body["metadata"]["name"]
        brokers = "hanging" if name.startswith("hang") else "slow"
        status = body.get("status") or {}
        if "-run" in name:
            found = condition(body, "Progressing")
            message = (found or {}).get("message") or (status.get("progress") or {}).get("message") or ""
            groups.setdefault((f"{brokers} Kafka, sink progress", said(found, "Progressing")), []).append(message)
            continue
        found = condition(body, "OffsetsOperationFailed")
        last = status.get("lastOffsetsOperation") or {}
        finished = f"lastOffsetsOperation {last.get('result')}"
        if annotation(body, "connector-offsets") != "alter":
            state, message = f"seek done, {finished}", last.get("message") or ""
        elif found is not None and found["status"] == "True":
            state, message = "seek open, " + said(found, "OffsetsOperationFailed"), found.get("message", "")
        else:  # an answer on its way (a slow Kafka): what the last one finished with
            state, message = f"seek open, in progress, {finished}", last.get("message") or ""
        groups.setdefault((f"{brokers} Kafka, seek-to-time", state), []).append(message)
    for body in custom.list_namespaced_custom_object(GROUP, VERSION, namespace, MIRRORS)["items"]:
        brokers = "hanging" if body["metadata"]["name"].startswith("hang") else "slow"
        lag = (body.get("status") or {}).get("replicationLag") or {}
        found = condition(body, "ReplicationLagging")
        state = said(found, "ReplicationLagging") + (", stale" if lag.get("stale") else "")
        message = lag.get("message") or (found or {}).get("message") or ""
        groups.setdefault((f"{brokers} source brokers, a mirror's lag", state), []).append(message)
    return [(what, state, len(messages), messages[0]) for (what, state), messages in sorted(groups.items())]


def dead_kafka(info: dict[str, Any], core: Any, custom: Any) -> None:
    """Tenant B's lists alone, while tenant A's Kafka clusters are dead behind sink progress,
    seek-to-time and a mirror's lag, and alone again (see the module docstring)."""
    run_id = uuid.uuid4().hex[:6]
    tenant_a, tenant_b = f"bench-dk-{run_id}-a", f"bench-dk-{run_id}-b"
    for ns in (tenant_a, tenant_b):
        core.create_namespace({"metadata": {"name": ns}})
    hanging_tally, slow_tally = ConnectionTally(), ConnectionTally()

    def listeners(count: int, upstream: str, tally: ConnectionTally) -> list[CountingListener]:
        # Forwarding to a real Kafka until the phase starts, each on an address of its own.
        return [CountingListener("slow-proxy", upstream=upstream, tally=tally) for _ in range(count)]

    # The ConnectClusters' Kafka is Kafka A (where the worker runs A's sinks); the mirrors' sources Kafka B.
    cluster_hang = listeners(DK_HANGING_CLUSTERS, info["kafka_a"], hanging_tally)
    cluster_slow = listeners(DK_SLOW_CLUSTERS, info["kafka_a"], slow_tally)
    mirror_hang = listeners(DK_MIRRORS, info["kafka_b"], hanging_tally)
    mirror_slow = listeners(DK_MIRRORS, info["kafka_b"], slow_tally)
    hanging, slow = [*cluster_hang, *mirror_hang], [*cluster_slow, *mirror_slow]
    topic = f"dk-{run_id}"
    worker = DedicatedWorker(heap="-Xmx1g", name="dead-kafka")
    phases: list[Phase] = []
    running: list[str] = []
    seeking: list[str] = []
    counts: dict[str, dict[str, float]] = {}
    outcomes: list[tuple[str, str, int, str]] = []
    seeks = SeekRounds(custom, tenant_a, seeking, DK_SEEK_EVERY_S)
    a_deleted = False
    log_copy = Path(tempfile.gettempdir()) / f"bench-dead-kafka-{run_id}-operator.log"
    try:
        worker.start()
        produce_records(info["kafka_a"], topic, 3, 30)
        with (
            tempfile.TemporaryDirectory() as tmp,
            chart_operator(info, core, custom, Path(tmp), [tenant_a, tenant_b]) as op,
            httpx.Client(base_url=worker.url, timeout=60) as own,
        ):
            try:
                source = Path(tmp) / "b.txt"
                source.write_text("one\n")
                create_cluster(custom, tenant_b, info["connect_url"])
                calm = f"calm-{run_id}"
                spec = file_source_spec(source, calm, "calm-offsets", state="stopped")
                create_connector(custom, tenant_b, calm, spec)
                wait_condition(custom, tenant_b, calm, "Ready", reason="ConnectorStopped", timeout=120)
                lists, lag = b_lists(custom, tenant_b, calm, DK_PHASE_S, op.metrics_url)
                phases.append(Phase("B alone", lists, lag, (0, 0), (0, 0)))
                print(phase_line("B alone", lists))

                create_cluster(custom, tenant_a, worker.url)  # "local", the mirrors'
                for kind, group in (("hang", cluster_hang), ("slow", cluster_slow)):
                    for i, listener in enumerate(group):
                        cluster = f"{kind}{i}"
                        kafka = {"bootstrapServers": listener.address}
                        create_cluster(custom, tenant_a, worker.url, name=cluster, kafka=kafka)
                        for j in range(DK_SINKS_PER_CLUSTER + DK_SEEKS_PER_CLUSTER):
                            seek = j >= DK_SINKS_PER_CLUSTER
                            name = f"{cluster}-{run_id}-{'seek' if seek else 'run'}{j}"
                            spec = sink_spec(Path(tmp) / f"{name}.out", topic, "stopped" if seek else "running")
                            if not seek:
                                spec["progress"] = {"enabled": True}
                            create_connector(custom, tenant_a, name, spec, cluster=cluster)
                            (seeking if seek else running).append(name)
                for kind, group in (("hang", mirror_hang), ("slow", mirror_slow)):
                    clusters, mirrors = hostile_mirrors(group, info["kafka_a"], f"{kind[0]}m{run_id}x", len(group))
                    lagging = {"intervalSeconds": 1}
                    create_mm2(custom, tenant_a, f"{kind}-mirrors", clusters, mirrors, replicationLag=lagging)
                wanted = len(running) + len(seeking) + 2 * DK_MIRRORS
                wait_for(
                    f"tenant A's {wanted} connectors",
                    lambda: len(own.get("/connectors").json()) == wanted,
                    timeout=900,
                    interval=2,
                )
                for name in seeking:
                    wait_condition(custom, tenant_a, name, "Ready", reason="ConnectorStopped", timeout=300)
                for name in running:  # measured while A's Kafka still answers
                    wait_condition(custom, tenant_a, name, "Progressing", timeout=300)

                for listener in hanging:
                    listener.mode = "blackhole"
                for listener in slow:
                    listener.delay = SLOW_ANSWER_S
                hanging_tally.restart()
                slow_tally.restart()
                before = {what: scrape_counters(op.metrics_url, metric) for what, (metric, _) in DK_COUNTERS.items()}
                seeks.start()
                try:
                    lists, lag = b_lists(custom, tenant_b, calm, DK_BUSY_PHASE_S, op.metrics_url)
                finally:
                    seeks.done.set()
                    seeks.join(60)
                phases.append(
                    Phase(
                        "B while A's Kafka is dead (progress, seek-to-time, mirrors' lag)",
                        lists,
                        lag,
                        (hanging_tally.connections, hanging_tally.peak_open),
                        (slow_tally.connections, slow_tally.peak_open),
                    )
                )
                print(phase_line("B during A", lists))
                for what, (metric, only) in DK_COUNTERS.items():
                    after = scrape_counters(op.metrics_url, metric)
                    counts[what] = {
                        label_value(k, "result"): v - before[what].get(k, 0.0) for k, v in after.items() if only in k
                    }
                outcomes = a_outcomes(custom, tenant_a)
                for what, state, n, message in outcomes:
                    print(f"{what}, {state} ({n}): {message[:300]}")
                print(counts, f"seeks annotated {seeks.annotated}, errors {seeks.errors[:3]}")

                # A deleted: its connectors first (the operator deletes them in the worker), then its clusters.
                for plural in (MIRRORS, "kafkaconnectors"):
                    custom.delete_collection_namespaced_custom_object(GROUP, VERSION, tenant_a, plural)
                wait_for(
                    "tenant A's connectors deleted",
                    lambda: own.get("/connectors").json() == [],
                    timeout=900,
                    interval=1,
                )
                custom.delete_collection_namespaced_custom_object(GROUP, VERSION, tenant_a, "connectclusters")
                wait_for(
                    "tenant A's resources gone",
                    lambda: (
                        not any(
                            custom.list_namespaced_custom_object(GROUP, VERSION, tenant_a, plural)["items"]
                            for plural in (MIRRORS, "kafkaconnectors", "connectclusters")
                        )
                    ),
                    timeout=300,
                    interval=1,
                )
                delete_namespace(core, custom, tenant_a)
                a_deleted = True
                time.sleep(10)  # the namespace's deletion settles (the controller-manager's, the watches')
                hanging_tally.restart()
                slow_tally.restart()
                lists, lag = b_lists(custom, tenant_b, calm, DK_PHASE_S, op.metrics_url)
                phases.append(
                    Phase(
                        "B alone again, A deleted",
                        lists,
                        lag,
                        (hanging_tally.connections, hanging_tally.peak_open),
                        (slow_tally.connections, slow_tally.peak_open),
                    )
                )
                print(phase_line("B alone again", lists))
            finally:
                with contextlib.suppress(OSError):
                    shutil.copyfile(op.operator.log_path, log_copy)
                    print(f"operator log: {log_copy}")
    finally:
        seeks.done.set()
        for listener in [*hanging, *slow]:
            listener.close()
        delete_leftover_connectors(custom, tenant_b)
        for ns in (tenant_a, tenant_b):
            if ns != tenant_a or not a_deleted:
                delete_namespace(core, custom, ns)
        worker.stop()
        remove_kafka_leftovers(info["kafka_a"], topic, [f"connect-{name}" for name in running + seeking])
    dead_kafka_report(phases, counts, outcomes, seeks.annotated, len(seeking))


def dead_kafka_report(
    phases: list[Phase],
    counts: dict[str, dict[str, float]],
    outcomes: list[tuple[str, str, int, str]],
    seeks: int,
    seek_sinks: int,
) -> None:
    alone, during, again = phases
    p50_ratio, p99_ratio = ratios(during.lists, alone.lists)
    p50_again, p99_again = ratios(during.lists, again.lists)
    clusters = DK_HANGING_CLUSTERS + DK_SLOW_CLUSTERS
    did = [
        f"{what}: " + (", ".join(f"{result} {n:.0f}" for result, n in sorted(by.items()) if n) or "none")
        for what, by in counts.items()
    ]
    lines = [
        "## Dead Kafka clusters: a tenant's progress, seeks and mirrors' lag on brokers that hang (issue 45)",
        "",
        f"`bench/bench_hostile_tenant.py dead-kafka` — {machine()}.",
        "",
        "The operator under the chart's RBAC and default values (8 workers, `tenantCallsPerNamespace: 4`), two",
        "tenant namespaces. Tenant B runs `list` requests on a STOPPED KafkaConnector of the stack's worker back",
        f"to back (its namespace has no Kafka): {DK_PHASE_S:.0f} s alone; then {DK_BUSY_PHASE_S:.0f} s while "
        "tenant A's Kafka clusters are dead;",
        f"then {DK_PHASE_S:.0f} s alone again once A's resources are deleted (and 10 s after). Tenant A, on a "
        "Connect worker of its own:",
        f"{clusters} ConnectClusters, {DK_HANGING_CLUSTERS} whose `spec.kafka.bootstrapServers` hangs (a listener "
        "of its own on 127.0.0.2 that accepts",
        f"connections and never answers) and {DK_SLOW_CLUSTERS} whose Kafka answers every reply "
        f"{SLOW_ANSWER_S:.0f} s late (a proxy to Kafka A; the brokers",
        f"its metadata names are the real ones), each with {DK_SINKS_PER_CLUSTER} RUNNING FileStreamSinks whose "
        "progress is measured (a round",
        f"per ConnectCluster per drift interval, 5 s) and {DK_SEEKS_PER_CLUSTER} STOPPED ones annotated "
        f"`connector-offsets=alter` with a new `seek-to`",
        f"time every {DK_SEEK_EVERY_S:.0f} s; and {DK_MIRRORS} mirrors whose source brokers hang and {DK_MIRRORS} "
        "on slow ones (two KafkaMirrorMaker2s, lag",
        "measured every second). Every listener forwarded to a real Kafka until the phase began (A's sinks",
        "`Progressing=True`, the mirrors' connectors created).",
        f"A list's time: from the annotation to its removal, polled every 20 ms; {LIST_GAP_S} s between lists. "
        "Loop lag: the worst",
        "`connect_offsets_event_loop_lag_seconds` scraped every 2 s. Brokers: connections A's hanging and slow "
        "brokers received in",
        "the phase, and the most open at once.",
        "",
        "| Phase | B's lists | p50 / p99 / max (ms) | p50, p99 vs B alone | p50, p99 vs B alone again "
        "| Worst loop lag (s) | Hanging brokers: connections, most open | Slow brokers: connections, most open |",
        "|---|---:|---|---|---|---:|---|---|",
    ]
    for phase in phases:
        lines.append(
            f"| {phase.name} | {latency_cells(phase.lists)} | {ratio_cell(phase.lists, alone.lists)} "
            f"| {ratio_cell(phase.lists, again.lists)} | {phase.loop_lag:.3f} "
            f"| {phase.hanging[0]}, {phase.hanging[1]} | {phase.slow[0]}, {phase.slow[1]} |"
        )
    lines += [
        "",
        f"While A's Kafka is dead, B's p50 is {p50_ratio:.2f}x B alone (target at most 1.2x: "
        f"{verdict(p50_ratio, 1.2)}) and its p99 {p99_ratio:.2f}x (target at most 1.5x: {verdict(p99_ratio, 1.5)});",
        f"against B alone after A was deleted, {p50_again:.2f}x ({verdict(p50_again, 1.2)}) and {p99_again:.2f}x "
        f"({verdict(p99_again, 1.5)}).",
        "",
        f"The operator's work for A in the phase, by result: {'; '.join(did)}; {seeks} seek requests "
        f"annotated on {seek_sinks} sinks.",
        "What A's resources said as the phase ended (how many, one message quoted):",
        "",
    ]
    lines += [
        f"- {what}, `{state}` ({n}): {quoted(message) if message else '(no message)'}"
        for what, state, n, message in outcomes
    ]
    write_section("hostile_tenant_dead_kafka", "\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
