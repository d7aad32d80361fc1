"""Prometheus metrics of the operator, served by ``connect-offsets-operator --metrics-port``.

Why a module of its own: the service records outcomes where they happen (an offsets operation,
an auto-restart, a reconcile error), and the entry point only decides whether to serve them.
Connector states are a gauge computed at scrape time from the last state each reconcile saw, so
a deleted resource simply drops out.

Metrics (prefix ``connect_offsets_``):

* ``offsets_operations_total{kind, operation, result}``: list/alter/reset, Succeeded or Failed
* ``offsets_operation_duration_seconds{kind, operation}``: time of the Connect call and ConfigMap write
* ``connectors{kind, state}``: connectors by their state in Connect (``ABSENT`` when not created yet)
* ``reconcile_errors_total{kind}``: reconciles that ended in a transient error
* ``auto_restarts_total{kind}``: automatic restarts of failed connectors/tasks
* ``mm2_replication_lag{namespace, mirror, source, target, topic, partition}``: records of a source
  partition not replicated yet by a KafkaMirrorMaker2 (``mirror`` is the resource name), for the
  ``MAX_LAG_SERIES_PER_MIRROR`` most lagging partitions of each mirror only: a tenant chooses how
  many partitions its mirrors cover, and every one would be a series in every scrape
* ``mm2_mirror_lag`` / ``mm2_mirror_lag_max{namespace, mirror, source, target}``: the sum and maximum
  over all partitions; ``mm2_mirror_partitions{...}``: how many partitions were measured
* ``mm2_lag_measurement_timestamp_seconds{...}``: time of the last successful measurement
* ``mm2_lag_stale{...}``: 1 while the latest measurement failed; the lag series above are then
  removed rather than left at their old values
* ``mm2_lag_measurements_total{result}``, ``mm2_lag_measurement_duration_seconds``
* ``connector_lag{namespace, resource}``: records waiting for a RUNNING sink KafkaConnector's
  consumer group (all partitions; no per-partition series), ``connector_partitions_behind{...}``:
  partitions with records waiting, ``connector_last_progress_timestamp_seconds{...}``: when its
  offsets last moved, ``connector_not_advancing{...}``: 1 while ``Progressing`` is ``NotAdvancing``
* ``progress_kafka_requests_total{request}``: Kafka requests of sink progress (metadata,
  list_offsets, group_offsets), ``progress_rounds_total{result}``: per-cluster rounds,
  ``progress_connect_reads_total``: source offsets read for progress
* ``connect_unreachable_endpoints``: Connect endpoints (URL and credentials; ConnectClusters naming
  the same one share it) whose circuit breaker is open: not asked until their back-off has passed;
  ``connect_breaker_openings_total``: times one opened (or a probe reopened it),
  ``connect_requests_refused_total``: requests failed at once without a network call. No label:
  a URL is a tenant's choice, and may hold what should not be in a time series.
* ``event_loop_lag_seconds``: how late the event loop ran a timer, the worst of the last
  ``LAG_WINDOW_S`` seconds; ``event_loop_lag_probe_seconds`` has every probe as a histogram. One
  loop serves every tenant and the health endpoint: lag here is a tenant's work starving the rest.

Replication lag series are computed at scrape time from the latest measurement, so partitions and
mirrors that disappear drop out with it.
"""

from __future__ import annotations

import asyncio
import heapq
import threading
import time
import weakref
from collections import Counter as Tally
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

__all__ = [
    "AUTO_RESTARTS",
    "CONNECT_BREAKER_OPENINGS",
    "CONNECT_REQUESTS_REFUSED",
    "EVENT_LOOP_LAG",
    "EVENT_LOOP_LAG_PROBES",
    "MAX_LAG_SERIES_PER_MIRROR",
    "MM2_LAG_MEASUREMENTS",
    "MM2_LAG_SECONDS",
    "OPERATIONS",
    "OPERATION_SECONDS",
    "PROGRESS_CONNECT_READS",
    "PROGRESS_KAFKA_REQUESTS",
    "PROGRESS_ROUNDS",
    "QUEUE_ADDS",
    "QUEUE_DEPTH",
    "QUEUE_PAST_SHARE",
    "QUEUE_RETRIES",
    "QUEUE_SECONDS",
    "QUEUE_TAKEN",
    "RECONCILE_ERRORS",
    "REGISTRY",
    "RESOURCE_CHECKS",
    "RESOURCE_CHECKS_UNCHANGED",
    "WORK_SECONDS",
    "forget_connector",
    "forget_connector_progress",
    "forget_mirror_lag",
    "measure_event_loop_lag",
    "serve",
    "set_connector_progress",
    "set_connector_state",
    "set_mirror_lag",
    "watch_connect_breaker",
    "watch_queue",
]

REGISTRY = CollectorRegistry()
OPERATIONS = Counter(
    "connect_offsets_offsets_operations",
    "Offsets operations by resource kind, operation and result.",
    ["kind", "operation", "result"],
    registry=REGISTRY,
)
OPERATION_SECONDS = Histogram(
    "connect_offsets_offsets_operation_duration_seconds",
    "Duration of offsets operations (Connect call and ConfigMap write).",
    ["kind", "operation"],
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 90),
    registry=REGISTRY,
)
RECONCILE_ERRORS = Counter(
    "connect_offsets_reconcile_errors", "Reconciles that ended in a transient error.", ["kind"], registry=REGISTRY
)
RESOURCE_CHECKS = Counter(
    "connect_offsets_resource_checks",
    "Checks of a resource against Connect (each pass, including those that found nothing changed).",
    ["kind"],
    registry=REGISTRY,
)
RESOURCE_CHECKS_UNCHANGED = Counter(
    "connect_offsets_resource_checks_unchanged",
    "Checks that found the resource and its connector in Connect as the last full pass left them.",
    ["kind"],
    registry=REGISTRY,
)
AUTO_RESTARTS = Counter(
    "connect_offsets_auto_restarts", "Automatic restarts of failed connectors or tasks.", ["kind"], registry=REGISTRY
)

EVENT_LOOP_LAG = Gauge(
    "connect_offsets_event_loop_lag_seconds",
    "Worst delay of the event loop running a timer over the last window (LAG_WINDOW_S seconds).",
    registry=REGISTRY,
)
EVENT_LOOP_LAG_PROBES = Histogram(
    "connect_offsets_event_loop_lag_probe_seconds",
    "Delay of each event-loop probe (a timer due every LAG_PROBE_INTERVAL_S seconds).",
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
    registry=REGISTRY,
)
GC_PAUSE_SECONDS = Histogram(
    "connect_offsets_gc_pause_seconds",
    "How long each garbage collection held the event loop, by generation (2: a full collection).",
    ["generation"],
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1),
    registry=REGISTRY,
)
# --- the work queue (client-go's workqueue metrics, by key kind) ----------------------------------

UNCHECKED_RESOURCES = Gauge(
    "connect_offsets_unchecked_resources",
    "Resources queued on first sight (a start, a Lease taken) whose first check has not ended yet.",
    registry=REGISTRY,
)

QUEUE_DEPTH = Gauge(
    "connect_offsets_workqueue_depth", "Keys ready and waiting for a worker.", ["kind"], registry=REGISTRY
)
QUEUE_SCHEDULED = Gauge(
    "connect_offsets_workqueue_scheduled",
    "Keys waiting for their timer (the drift interval, a requeue, a back-off).",
    registry=REGISTRY,
)
QUEUE_IN_FLIGHT = Gauge("connect_offsets_workqueue_in_flight", "Keys a worker is processing.", registry=REGISTRY)
QUEUE_ADDS = Counter("connect_offsets_workqueue_adds", "Keys added to the queue.", ["kind"], registry=REGISTRY)
QUEUE_RETRIES = Counter(
    "connect_offsets_workqueue_retries", "Keys added again after a transient failure.", ["kind"], registry=REGISTRY
)
QUEUE_TAKEN = Counter(
    "connect_offsets_workqueue_taken",
    "Keys given to a worker, by priority: urgent (a user's change or request) or background (checks).",
    ["priority"],
    registry=REGISTRY,
)
QUEUE_PAST_SHARE = Counter(
    "connect_offsets_workqueue_past_share",
    "Keys given to a namespace past its share of the workers (no other namespace could take the worker).",
    registry=REGISTRY,
)
_QUEUE_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
QUEUE_SECONDS = Histogram(
    "connect_offsets_workqueue_queue_duration_seconds",
    "How long a key waited ready before a worker took it.",
    ["kind"],
    buckets=_QUEUE_BUCKETS,
    registry=REGISTRY,
)
WORK_SECONDS = Histogram(
    "connect_offsets_workqueue_work_duration_seconds",
    "How long a worker took to process a key (one pass).",
    ["kind"],
    buckets=_QUEUE_BUCKETS,
    registry=REGISTRY,
)


class _Queue(Protocol):
    stats: Any

    def depth(self) -> Tally[str]: ...

    def scheduled(self) -> int: ...

    def processing(self) -> int: ...


async def watch_queue(queue: _Queue, kinds: Mapping[str, str], interval: float = 1.0) -> None:
    """Run forever: copy the queue's counts into the metrics every ``interval`` seconds (the queue
    itself stays free of metrics, and is not slowed by them)."""
    reported: dict[tuple[str, str], float] = {}
    while True:
        depth = queue.depth()
        for plural, kind in kinds.items():
            QUEUE_DEPTH.labels(kind).set(depth.get(plural, 0))
            for counter, name in ((QUEUE_ADDS, "adds"), (QUEUE_RETRIES, "retries")):
                total = float(getattr(queue.stats, name).get(plural, 0))
                delta = total - reported.get((name, plural), 0.0)
                if delta > 0:
                    counter.labels(kind).inc(delta)
                reported[(name, plural)] = total
        for priority in ("urgent", "background"):
            total = float(queue.stats.taken.get(priority, 0))
            delta = total - reported.get(("taken", priority), 0.0)
            if delta > 0:
                QUEUE_TAKEN.labels(priority).inc(delta)
            reported[("taken", priority)] = total
        delta = float(queue.stats.past_share) - reported.get(("past_share", ""), 0.0)
        if delta > 0:
            QUEUE_PAST_SHARE.inc(delta)
        reported[("past_share", "")] = float(queue.stats.past_share)
        QUEUE_SCHEDULED.set(queue.scheduled())
        QUEUE_IN_FLIGHT.set(queue.processing())
        await asyncio.sleep(interval)


#: A probe every quarter second; the gauge keeps the worst of the last ten seconds, so a scrape
#: every 15-30 s still sees a stall that a single latest sample would usually miss.
LAG_PROBE_INTERVAL_S = 0.25
LAG_WINDOW_S = 10.0


async def measure_event_loop_lag(interval: float = LAG_PROBE_INTERVAL_S, window: float = LAG_WINDOW_S) -> None:
    """Run forever on the operator's loop: sleep ``interval`` and record how late the wake-up was.

    Why a timer: it measures exactly what a starved loop does to everything else (the health
    endpoint, watch streams, other tenants' reconciles), whatever the cause (CPU work on the loop,
    a blocking call, GIL contention with a worker thread).
    """
    recent: deque[tuple[float, float]] = deque()
    while True:
        planned = time.monotonic() + interval
        await asyncio.sleep(interval)
        now = time.monotonic()
        lag = max(0.0, now - planned)
        EVENT_LOOP_LAG_PROBES.observe(lag)
        recent.append((now, lag))
        while recent and recent[0][0] < now - window:
            recent.popleft()
        EVENT_LOOP_LAG.set(max(value for _, value in recent))


_states: dict[tuple[str, str, str, str], str] = {}  # (kind, namespace, resource, connector) -> state


def set_connector_state(kind: str, namespace: str, resource: str, connector: str, state: str) -> None:
    _states[(kind, namespace, resource, connector)] = state


def forget_connector(kind: str, namespace: str, resource: str) -> None:
    for key in [k for k in _states if k[:3] == (kind, namespace, resource)]:
        del _states[key]


class _ConnectorStates(Collector):
    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "connect_offsets_connectors", "Managed connectors by their state in Connect.", labels=["kind", "state"]
        )
        # Scraped on the metrics server's thread while the event loop's passes change the states:
        # a copy first, or the scrape fails with "dictionary changed size during iteration"
        # (bench_cold_start's restart over 20,000 resources, twice). ``dict.copy()``, not
        # ``list(d.items())``: that creates a tuple per item, a collection can run mid-copy, and
        # the collector's Python callback (``measure_pauses``) lets the loop's thread in.
        states = _states.copy()
        for (kind, state), count in sorted(Tally((k[0], v) for k, v in states.items()).items()):
            family.add_metric([kind, state], count)
        yield family


REGISTRY.register(_ConnectorStates())

MM2_LAG_MEASUREMENTS = Counter(
    "connect_offsets_mm2_lag_measurements",
    "MirrorMaker 2 replication lag measurements of one mirror, by result.",
    ["result"],
    registry=REGISTRY,
)
MM2_LAG_SECONDS = Histogram(
    "connect_offsets_mm2_lag_measurement_duration_seconds",
    "Wall time of one successful replication lag measurement of one mirror (Connect and Kafka calls).",
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
    registry=REGISTRY,
)

MirrorKey = tuple[str, str, str, str]  # namespace, resource, source alias, target alias


#: Per-partition lag series exported per mirror: the most lagging ones (ties: topic, partition).
MAX_LAG_SERIES_PER_MIRROR = 20


class _MirrorLag:
    """One mirror's latest measurement as exported: its top partitions, and totals over all of them."""

    def __init__(self, partitions: list[tuple[str, int, int]] | None, measured_at: float | None) -> None:
        self.measured_at = measured_at
        self.partitions: list[tuple[str, int, int]] | None = None
        self.total = self.max = self.count = 0
        if partitions is not None:
            self.partitions = heapq.nsmallest(MAX_LAG_SERIES_PER_MIRROR, partitions, key=lambda p: (-p[2], p[0], p[1]))
            self.total = sum(p[2] for p in partitions)
            self.max = max((p[2] for p in partitions), default=0)
            self.count = len(partitions)


_mirror_lags: dict[MirrorKey, _MirrorLag] = {}


def set_mirror_lag(
    namespace: str,
    resource: str,
    source: str,
    target: str,
    partitions: list[tuple[str, int, int]] | None,
    measured_at: float | None,
) -> None:
    """The latest measurement of one mirror: (topic, partition, lag) per partition, or None when it
    failed (its lag series disappear; ``measured_at`` stays the last good measurement's time)."""
    _mirror_lags[(namespace, resource, source, target)] = _MirrorLag(partitions, measured_at)


def forget_mirror_lag(namespace: str, resource: str, keep: set[tuple[str, str]] | None = None) -> None:
    """Drop a resource's mirrors, except the (source, target) pairs in ``keep``."""
    for key in [k for k in _mirror_lags if k[:2] == (namespace, resource) and k[2:] not in (keep or set())]:
        del _mirror_lags[key]


class _MirrorLags(Collector):
    def collect(self) -> Iterator[GaugeMetricFamily]:
        labels = ["namespace", "mirror", "source", "target"]
        per_partition = GaugeMetricFamily(
            "connect_offsets_mm2_replication_lag",
            "Records of a source partition that MirrorMaker 2 has not replicated yet.",
            labels=[*labels, "topic", "partition"],
        )
        total = GaugeMetricFamily(
            "connect_offsets_mm2_mirror_lag", "Replication lag of a mirror, all partitions (records).", labels=labels
        )
        worst = GaugeMetricFamily(
            "connect_offsets_mm2_mirror_lag_max", "Largest replication lag of one partition (records).", labels=labels
        )
        stamp = GaugeMetricFamily(
            "connect_offsets_mm2_lag_measurement_timestamp_seconds",
            "Unix time of the last successful replication lag measurement.",
            labels=labels,
        )
        stale = GaugeMetricFamily(
            "connect_offsets_mm2_lag_stale",
            "1 when the latest replication lag measurement failed (the lag series are then absent).",
            labels=labels,
        )
        count = GaugeMetricFamily(
            "connect_offsets_mm2_mirror_partitions",
            "Source partitions measured (connect_offsets_mm2_replication_lag shows the most lagging of them).",
            labels=labels,
        )
        for key, sample in sorted(_mirror_lags.copy().items()):
            values = list(key)
            if sample.partitions is not None:
                for topic, partition, lag in sample.partitions:
                    per_partition.add_metric([*values, topic, str(partition)], lag)
                total.add_metric(values, sample.total)
                worst.add_metric(values, sample.max)
                count.add_metric(values, sample.count)
            if sample.measured_at is not None:
                stamp.add_metric(values, sample.measured_at)
            stale.add_metric(values, 0 if sample.partitions is not None else 1)
        yield from (per_partition, total, worst, count, stamp, stale)


REGISTRY.register(_MirrorLags())


PROGRESS_KAFKA_REQUESTS = Counter(
    "connect_offsets_progress_kafka_requests",
    "Kafka requests made to measure sink connectors' progress, by request (metadata, list_offsets, group_offsets).",
    ["request"],
    registry=REGISTRY,
)
PROGRESS_ROUNDS = Counter(
    "connect_offsets_progress_rounds",
    "Sink progress rounds of one ConnectCluster (one per drift interval while it has RUNNING sinks), by result.",
    ["result"],
    registry=REGISTRY,
)
PROGRESS_CONNECT_READS = Counter(
    "connect_offsets_progress_connect_reads",
    "GET /connectors/<name>/offsets requests made to see source connectors' offsets move.",
    registry=REGISTRY,
)


@dataclass(frozen=True)
class _Progress:
    lag: int | None
    behind: int | None
    last_moved: float | None
    stalled: bool


_progress: dict[tuple[str, str], _Progress] = {}


def set_connector_progress(
    namespace: str, resource: str, *, lag: int | None, behind: int | None, last_moved: float | None, stalled: bool
) -> None:
    """The latest progress of one KafkaConnector (lag and behind: None for a source or unmeasured)."""
    _progress[(namespace, resource)] = _Progress(lag, behind, last_moved, stalled)


def forget_connector_progress(namespace: str, resource: str) -> None:
    _progress.pop((namespace, resource), None)


class _ConnectorProgress(Collector):
    def collect(self) -> Iterator[GaugeMetricFamily]:
        labels = ["namespace", "resource"]
        lag = GaugeMetricFamily(
            "connect_offsets_connector_lag", "Records waiting for a sink connector, all partitions.", labels=labels
        )
        behind = GaugeMetricFamily(
            "connect_offsets_connector_partitions_behind", "Partitions with records waiting for a sink.", labels=labels
        )
        moved = GaugeMetricFamily(
            "connect_offsets_connector_last_progress_timestamp_seconds",
            "Unix time the connector's offsets last moved (as far as the operator saw).",
            labels=labels,
        )
        stalled = GaugeMetricFamily(
            "connect_offsets_connector_not_advancing",
            "1 while a RUNNING connector that should move has not moved its offsets for spec.progress.stallAfter.",
            labels=labels,
        )
        for key, sample in sorted(_progress.copy().items()):
            values = list(key)
            if sample.lag is not None:
                lag.add_metric(values, sample.lag)
            if sample.behind is not None:
                behind.add_metric(values, sample.behind)
            if sample.last_moved is not None:
                moved.add_metric(values, sample.last_moved)
            stalled.add_metric(values, 1 if sample.stalled else 0)
        yield from (lag, behind, moved, stalled)


REGISTRY.register(_ConnectorProgress())


CONNECT_BREAKER_OPENINGS = Counter(
    "connect_offsets_connect_breaker_openings",
    "Times a Connect endpoint's circuit breaker opened (time-out, no connection, 502/503/504) or a probe reopened it.",
    registry=REGISTRY,
)
CONNECT_REQUESTS_REFUSED = Counter(
    "connect_offsets_connect_requests_refused",
    "Connect requests failed at once, without a network call, while their endpoint's circuit breaker was open.",
    registry=REGISTRY,
)


class _Breaker(Protocol):
    @property
    def is_open(self) -> bool: ...


#: The circuit breakers of the live Connect clients (weakly: a retired client drops out).
_breakers: weakref.WeakSet[_Breaker] = weakref.WeakSet()
#: Scrapes run on the metrics server's thread, breakers are added on the event loop's.
_breakers_lock = threading.Lock()


def watch_connect_breaker(breaker: _Breaker) -> None:
    """Count ``breaker`` in ``connect_unreachable_endpoints`` while it is open and alive."""
    with _breakers_lock:
        _breakers.add(breaker)


class _ConnectBreakers(Collector):
    def collect(self) -> Iterator[GaugeMetricFamily]:
        with _breakers_lock:
            breakers = list(_breakers)
        family = GaugeMetricFamily(
            "connect_offsets_connect_unreachable_endpoints",
            "Connect endpoints whose circuit breaker is open (requests fail at once until a probe is answered).",
        )
        family.add_metric([], sum(1 for breaker in breakers if breaker.is_open))
        yield family


REGISTRY.register(_ConnectBreakers())


def serve(port: int, address: str = "0.0.0.0") -> None:
    """Serve ``/metrics`` on a background thread."""
    start_http_server(port, addr=address, registry=REGISTRY)
