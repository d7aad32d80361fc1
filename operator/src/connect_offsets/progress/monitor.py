"""The progress monitor: one round per ConnectCluster per drift interval, called from the cluster's own
pass (``reconcile.clusters.ClusterService``) right after it refreshed the connector snapshot.

Which connectors: the RUNNING connectors of the snapshot whose owner key names a KafkaConnector bound
to this ConnectCluster (its labels, as the watch cache has them) with ``spec.progress.enabled``.
Nothing is read for a connector no resource of this cluster owns.

* **Sinks**, all of the cluster's in one call in the tenant pool (``clients.kafka.sink_positions``,
  the ConnectCluster's ``spec.kafka`` through the credentials policy, counted against the
  ConnectCluster's namespace like every tenant Kafka call): two batched ListOffsets per interval
  (last stable offsets and high watermarks: topics written in transactions),
  a metadata request every ``METADATA_REFRESH_S``, and the committed offsets only of the groups
  whose input moved or that had records waiting. Idle sinks cost nothing per connector.
* **Sources**: ``GET /connectors/<name>/offsets`` of each RUNNING source connector every
  ``CONNECT_OFFSETS_SOURCE_PROGRESS_INTERVAL`` seconds (default 300), each at its own phase of the
  interval (a hash of its name), so reads are spread rather than bunched; a change of the
  offsets' digest is a move.

A resource whose status would now say something else (``ProgressRegistry.would_change``: the
stall clock ran out, the lag changed, ...) is marked and woken; its own pass writes the status.
A failed round is a result (``NotMeasured`` with the reason), never an exception.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
import zlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from connect_offsets import metrics
from connect_offsets.clients.connect import ConnectClient, ConnectError, ExpandedConnector
from connect_offsets.clients.kafka import KafkaAdminError, Tail, sink_positions
from connect_offsets.clients.kubernetes import KubernetesApi
from connect_offsets.errors import ConnectOffsetsError
from connect_offsets.models.crds import ProgressSpec
from connect_offsets.models.java_regex import PatternRefused, compile_java
from connect_offsets.progress.state import ConnectorProgress, ProgressRegistry, judge, sink_lag
from connect_offsets.vocabulary import (
    CLUSTER_LABEL,
    CLUSTER_NAMESPACE_LABEL,
    CONNECTORS,
    OWNER_CONFIG_KEY,
    bytes_hash,
)

__all__ = ["METADATA_REFRESH_S", "PROGRESS_ENV", "ProgressMonitor", "progress_enabled", "source_interval"]

log = logging.getLogger(__name__)

TP = tuple[str, int]

#: The topic list (partitions per topic) is asked again this often, or at once when a sink names
#: a topic it does not have: new partitions of a topic are seen within this long.
METADATA_REFRESH_S = 300.0
SOURCE_INTERVAL_ENV = "CONNECT_OFFSETS_SOURCE_PROGRESS_INTERVAL"
DEFAULT_SOURCE_INTERVAL_S = 300.0
#: Connect's offsets of a source are parsed for the partition count only up to this size (the
#: digest is taken of any size).
MAX_PARSED_OFFSETS_BYTES = 4 * 1024 * 1024
#: Source offsets read at once, per cluster.
SOURCE_READS_AT_ONCE = 4

#: The ConnectCluster's Kafka client settings (``ClusterRegistry.kafka_config``); raises a
#: ``UserError`` (no spec.kafka, a policy refusal) or ``KubernetesError``.
KafkaSettings = Callable[[str, str], Awaitable[dict[str, Any]]]


PROGRESS_ENV = "CONNECT_OFFSETS_PROGRESS"


def progress_enabled() -> bool:
    """``CONNECT_OFFSETS_PROGRESS``: ``off`` (``false``, ``0``, ``no``) turns progress off operator-wide."""
    return os.environ.get(PROGRESS_ENV, "").strip().lower() not in ("off", "false", "0", "no")


def source_interval() -> float:
    raw = os.environ.get(SOURCE_INTERVAL_ENV, "").strip()
    try:
        value = float(raw) if raw else DEFAULT_SOURCE_INTERVAL_S
    except ValueError:
        value = DEFAULT_SOURCE_INTERVAL_S
    return value if value > 0 else DEFAULT_SOURCE_INTERVAL_S


@dataclass(frozen=True)
class _Candidate:
    namespace: str  # the KafkaConnector's
    name: str
    connector: str
    kind: str  # sink | source
    config: dict[str, str]
    spec: ProgressSpec


@dataclass
class _ClusterState:
    topics: dict[str, int] | None = None
    topics_at: float = float("-inf")
    source_due: dict[str, float] | None = None  # connector -> monotonic time of its next read
    measured: set[tuple[str, str]] | None = None  # resources measured in the last round
    tail_round: int = 0  # turns the order tails are taken in (MAX_TAIL_PROBES a round), each round


def reads_committed(config: Mapping[str, str]) -> bool:
    """Whether a sink's consumer reads only committed records: Connect's sink consumers read
    uncommitted ones unless the connector sets ``consumer.override.isolation.level``."""
    return config.get("consumer.override.isolation.level", "").strip().lower() == "read_committed"


def _standing(
    known: frozenset[tuple[TP, int, int]],
    read: frozenset[Tail],
    own: bool,
    committed: Mapping[TP, int],
    until: Mapping[TP, int],
) -> set[tuple[TP, int, int]]:
    """The tails of a sink (known before, or read this round by a consumer of its isolation) that
    still stand: from its committed offset to the end its consumer can reach."""
    mine = {(tp, start, end) for tp, start, end, isolation in read if isolation is own}
    return {t for t in mine | known if t[0] in committed and (committed[t[0]], until.get(t[0])) == t[1:]}


def _fair(lists: list[list[Tail]], turn: int) -> list[Tail]:
    """``lists`` (one per sink) taken in turns, one tail of each at a time, both the sink first and
    each sink's first tail moving on by ``turn``: no sink's tails keep the others' out of the cap."""
    if not lists:
        return []
    first = turn % len(lists)
    rotated = [lst[turn % len(lst) :] + lst[: turn % len(lst)] for lst in lists[first:] + lists[:first] if lst]
    order: list[Tail] = []
    for index in range(max((len(lst) for lst in rotated), default=0)):
        order.extend(lst[index] for lst in rotated if index < len(lst))
    return order


class ProgressMonitor:
    """Measures the progress of one ConnectCluster's connectors each time its pass calls ``measure``."""

    def __init__(
        self,
        kube: KubernetesApi,
        registry: ProgressRegistry,
        kafka_settings: KafkaSettings,
        wake: Callable[[str, str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kube = kube
        self.registry = registry
        self.kafka_settings = kafka_settings
        self.wake = wake
        self._clock = clock
        self._clusters: dict[tuple[str, str], _ClusterState] = {}

    def forget_cluster(self, namespace: str, name: str) -> None:
        self._clusters.pop((namespace, name), None)

    async def measure(
        self, namespace: str, name: str, client: ConnectClient, connectors: Mapping[str, ExpandedConnector]
    ) -> None:
        """One round for ConnectCluster ``namespace/name`` from its snapshot ``connectors``. Never raises."""
        state = self._clusters.setdefault((namespace, name), _ClusterState())
        now = datetime.now(UTC).replace(microsecond=0)
        candidates, stopped = self._candidates(namespace, name, connectors)
        try:
            sinks = [c for c in candidates if c.kind == "sink"]
            if sinks:
                await self._sinks(namespace, name, state, sinks, now)
            sources = [c for c in candidates if c.kind == "source"]
            if sources:
                await self._sources(client, state, sources, now)
        except Exception:  # never let the ConnectCluster's pass fail because of progress
            log.exception("progress of ConnectCluster %s/%s: unexpected error", namespace, name)
        measured = {(c.namespace, c.name) for c in candidates}
        for key in stopped:
            previous = self.registry.get(*key)
            if previous is not None and previous.running:
                self.registry.put(*key, replace(previous, running=False))
        for key in (state.measured or set()) - measured - stopped:
            self.registry.forget(*key)  # the resource is gone, disabled progress, or moved elsewhere
            metrics.forget_connector_progress(*key)
            self._wake(*key)
        state.measured = measured
        for candidate in candidates:
            self._publish(candidate, now)
        for key in stopped:
            metrics.forget_connector_progress(*key)
            self._notify(key[0], key[1], ProgressSpec(), now)

    def _candidates(
        self, namespace: str, name: str, connectors: Mapping[str, ExpandedConnector]
    ) -> tuple[list[_Candidate], set[tuple[str, str]]]:
        """The RUNNING connectors owned by KafkaConnectors of this ConnectCluster with progress on,
        and the resources of this cluster measured before whose connector is no longer RUNNING."""
        found: list[_Candidate] = []
        stopped: set[tuple[str, str]] = set()
        for connector, entry in connectors.items():
            if entry.config is None or entry.status is None:
                continue
            owner = entry.config.get(OWNER_CONFIG_KEY, "")
            resource_namespace, _, resource_name = owner.partition("/")
            if resource_name != connector:
                continue  # a MirrorMaker 2 connector, or not created by a KafkaConnector
            body = self.kube.cache.peek(CONNECTORS, resource_namespace, resource_name)
            if body is None:
                continue
            labels = (body.get("metadata") or {}).get("labels") or {}
            if labels.get(CLUSTER_LABEL) != name or (labels.get(CLUSTER_NAMESPACE_LABEL) or resource_namespace) != (
                namespace
            ):
                continue
            if entry.status.state != "RUNNING":
                if self.registry.get(resource_namespace, resource_name) is not None:
                    stopped.add((resource_namespace, resource_name))
                continue
            kind = entry.status.type
            if kind not in ("sink", "source"):
                continue
            try:
                spec = ProgressSpec.model_validate(((body.get("spec") or {}).get("progress")) or {})
            except ValidationError:
                continue  # the resource's own pass reports the spec
            if spec.enabled:
                found.append(_Candidate(resource_namespace, resource_name, connector, kind, entry.config, spec))
        return found, stopped

    def _start(self, candidate: _Candidate, now: datetime) -> ConnectorProgress:
        previous = self.registry.get(candidate.namespace, candidate.name)
        if previous is None or not previous.running or previous.kind != candidate.kind:
            return ConnectorProgress(candidate.connector, candidate.kind, watching_since=now)
        return previous

    # --- sinks -------------------------------------------------------------------------------------

    async def _sinks(
        self, namespace: str, name: str, state: _ClusterState, sinks: list[_Candidate], now: datetime
    ) -> None:
        started = {(c.namespace, c.name): self._start(c, now) for c in sinks}
        try:
            config = await self.kafka_settings(namespace, name)
        except ConnectOffsetsError as error:
            why = f"sink progress needs Kafka access: {error}"
            for candidate in sinks:
                self._failed(candidate, started, why)
            metrics.PROGRESS_ROUNDS.labels("Failed").inc()
            return
        selectors: dict[tuple[str, str], tuple[list[str], Any]] = {}
        refused: dict[tuple[str, str], str] = {}
        for candidate in sinks:
            key = (candidate.namespace, candidate.name)
            listed = [t.strip() for t in candidate.config.get("topics", "").split(",") if t.strip()]
            pattern = candidate.config.get("topics.regex", "").strip()
            try:
                compiled = compile_java(pattern, "spec.config.topics.regex") if pattern and not listed else None
            except PatternRefused as error:
                refused[key] = str(error)
                continue
            selectors[key] = (listed, compiled)
        if self._clock() - state.topics_at > METADATA_REFRESH_S:
            state.topics = None
        wanted_topics = {t for listed, _ in selectors.values() for t in listed}
        if state.topics is not None and not wanted_topics <= state.topics.keys():
            state.topics = None  # a sink names a topic the last answer did not have
        partitions: dict[tuple[str, str], list[TP]] = {}

        def partitions_of(topics: dict[str, int]) -> list[TP]:
            # In the tenant pool's thread: regular expressions over every topic are CPU work.
            for key, (listed, compiled) in selectors.items():
                names = (
                    [t for t in listed if t in topics]
                    if compiled is None
                    else sorted(t for t in topics if compiled.full_match(t))
                )
                partitions[key] = [(t, p) for t in names for p in range(topics[t])]
            return sorted({tp for parts in partitions.values() for tp in parts})

        groups = {key: _group(c) for c in sinks if (key := (c.namespace, c.name)) in selectors}

        def groups_to_read(ends: dict[TP, int], highs: dict[TP, int]) -> dict[str, list[TP]]:
            reads: dict[str, set[TP]] = {}
            for key, parts in partitions.items():
                previous = started[key]
                idle = (
                    previous.committed is not None
                    and previous.lag is not None
                    and previous.lag.total == 0
                    and previous.measured_at is not None
                    and set(previous.ends) == set(parts)
                    and all(previous.ends.get(tp) == ends.get(tp) for tp in parts)
                    and all(previous.highs.get(tp) == highs.get(tp) for tp in parts)
                )
                if not idle:
                    reads.setdefault(groups[key], set()).update(parts)
            return {group: sorted(parts) for group, parts in reads.items()}

        committed_only = {key: reads_committed(c.config) for c in sinks if (key := (c.namespace, c.name)) in selectors}
        turn = state.tail_round
        state.tail_round += 1

        def tails_to_read(committed: dict[str, dict[TP, int]], ends: dict[TP, int], highs: dict[TP, int]) -> list[Tail]:
            # Partitions whose committed offset is below the end and did not move since the last
            # round (a sink that moves is Advancing anyway): is anything readable left there, or
            # only markers (and aborted records)? The end is the last stable offset for a sink
            # reading committed records, the high watermark for one reading uncommitted records
            # (Connect's default). Tails known empty, or known to hold records, are not read again.
            lists: list[list[Tail]] = []
            for key in sorted(partitions):
                previous = started[key]
                offsets = committed.get(groups[key])
                if offsets is None:
                    continue
                own = committed_only[key]
                until = ends if own else highs
                wanted: list[Tail] = []
                for tp in partitions[key]:
                    offset, end = offsets.get(tp), until.get(tp)
                    if offset is None or end is None or offset >= end:
                        continue
                    if (tp, offset, end) in previous.empty_tails or (tp, offset, end) in previous.full_tails:
                        continue
                    if previous.committed is None or previous.committed.get(tp) == offset:
                        wanted.append((tp, offset, end, own))
                lists.append(wanted)
            return _fair(lists, turn)

        try:
            positions = await sink_positions(
                config,
                topics=state.topics,
                partitions_of=partitions_of,
                groups_to_read=groups_to_read,
                tails_to_read=tails_to_read,
                namespace=namespace,
            )
        except KafkaAdminError as error:
            for candidate in sinks:
                self._failed(candidate, started, f"sink progress: {error}")
            metrics.PROGRESS_ROUNDS.labels("Failed").inc()
            return
        if state.topics is None:
            state.topics, state.topics_at = positions.topics, self._clock()
        for kind, count in positions.requests.items():
            metrics.PROGRESS_KAFKA_REQUESTS.labels(kind).inc(count)
        metrics.PROGRESS_ROUNDS.labels("Succeeded").inc()
        for candidate in sinks:
            key = (candidate.namespace, candidate.name)
            previous = started[key]
            if key in refused:
                self._failed(candidate, started, refused[key])
                continue
            parts = partitions.get(key, [])
            ends = {tp: positions.ends[tp] for tp in parts if tp in positions.ends}
            highs = {tp: positions.highs[tp] for tp in parts if tp in positions.highs}
            group = groups[key]
            if group in positions.group_errors:
                self._failed(candidate, started, positions.group_errors[group])
                continue
            if group not in positions.committed:  # idle: nothing moved, nothing waiting
                self.registry.put(*key, replace(previous, ends=ends, highs=highs, measured_at=now, error=None))
                continue
            committed = {tp: offset for tp, offset in positions.committed[group].items() if tp in ends}
            own = committed_only[key]
            # The end its consumer can reach: the last stable offset (read_committed), else the high
            # watermark - a sink reading uncommitted records is given an open transaction's records.
            until = ends if own else {tp: highs.get(tp, end) for tp, end in ends.items()}

            empty = _standing(previous.empty_tails, positions.empty_tails, own, committed, until)
            full = _standing(previous.full_tails, positions.full_tails, own, committed, until)
            # What its consumer can still be given: nothing past an empty tail.
            reached = {
                tp: until[tp] if (tp, offset, until[tp]) in empty else offset for tp, offset in committed.items()
            }
            from_latest = candidate.config.get("consumer.override.auto.offset.reset", "").strip() == "latest"
            lag = sink_lag(parts, reached, until, positions.starts, from_latest=from_latest)
            open_tps = [
                tp
                for tp in parts
                if own
                and tp in reached
                and reached[tp] >= ends[tp]
                and highs.get(tp, ends[tp]) > max(ends[tp], reached[tp])
            ]
            moved = previous.committed is not None and committed != previous.committed
            self.registry.put(
                *key,
                replace(
                    previous,
                    lag=lag,
                    committed=committed,
                    ends=ends,
                    highs=highs,
                    empty_tails=frozenset(empty),
                    full_tails=frozenset(full),
                    # A sink reading uncommitted records may be past the last stable offset already.
                    open_records=sum(highs[tp] - max(ends[tp], reached[tp]) for tp in open_tps),
                    open_partitions=len(open_tps),
                    last_moved=now if moved else previous.last_moved,
                    measured_at=now,
                    error=None,
                ),
            )

    def _failed(self, candidate: _Candidate, started: Mapping[tuple[str, str], ConnectorProgress], why: str) -> None:
        key = (candidate.namespace, candidate.name)
        self.registry.put(*key, replace(started[key], measured_at=None, error=why[:512]))

    # --- sources -----------------------------------------------------------------------------------

    async def _sources(
        self, client: ConnectClient, state: _ClusterState, sources: list[_Candidate], now: datetime
    ) -> None:
        interval = source_interval()
        due = state.source_due if state.source_due is not None else {}
        state.source_due = due
        clock = self._clock()
        names = {c.connector for c in sources}
        for gone in [n for n in due if n not in names]:
            del due[gone]
        reading: list[_Candidate] = []
        for candidate in sources:
            if candidate.connector not in due:
                # Its own phase of the interval: reads of many sources spread evenly over it.
                due[candidate.connector] = clock + (zlib.crc32(candidate.connector.encode()) % 1000) / 1000 * interval
                self.registry.put(candidate.namespace, candidate.name, self._start(candidate, now))
            if clock >= due[candidate.connector]:
                due[candidate.connector] = clock + interval
                reading.append(candidate)
        limit = asyncio.Semaphore(SOURCE_READS_AT_ONCE)

        async def read(candidate: _Candidate) -> None:
            async with limit:
                await self._read_source(client, candidate, now)

        await asyncio.gather(*(read(c) for c in reading))

    async def _read_source(self, client: ConnectClient, candidate: _Candidate, now: datetime) -> None:
        key = (candidate.namespace, candidate.name)
        previous = self._start(candidate, now)
        try:
            raw = await client.get_offsets_raw(candidate.connector)
        except ConnectError as error:
            self.registry.put(*key, replace(previous, measured_at=None, error=f"Connect offsets: {error}"[:512]))
            return
        metrics.PROGRESS_CONNECT_READS.inc()
        digest, partitions = await asyncio.to_thread(_digest_and_count, raw)
        moved = previous.digest is not None and digest != previous.digest
        self.registry.put(
            *key,
            replace(
                previous,
                digest=digest,
                partitions=partitions,
                last_moved=now if moved else previous.last_moved,
                measured_at=now,
                error=None,
            ),
        )

    # --- reporting ---------------------------------------------------------------------------------

    def _publish(self, candidate: _Candidate, now: datetime) -> None:
        progress = self.registry.get(candidate.namespace, candidate.name)
        if progress is None:
            return
        _, condition = judge(progress, candidate.spec, now)
        lag = progress.lag if progress.kind == "sink" and progress.measured_at is not None else None
        metrics.set_connector_progress(
            candidate.namespace,
            candidate.name,
            lag=None if lag is None else lag.total,
            behind=None if lag is None else lag.behind,
            last_moved=None if progress.last_moved is None else progress.last_moved.timestamp(),
            stalled=condition is not None and condition.reason == "NotAdvancing",
        )
        self._notify(candidate.namespace, candidate.name, candidate.spec, now)

    def _notify(self, namespace: str, name: str, spec: ProgressSpec, now: datetime) -> None:
        if self.registry.would_change(namespace, name, spec, now):
            self.registry.mark(namespace, name)
            self._wake(namespace, name)

    def _wake(self, namespace: str, name: str) -> None:
        if self.wake is not None:
            self.wake(namespace, name)


def _group(candidate: _Candidate) -> str:
    """The sink's consumer group: Connect's ``connect-<name>``, or ``consumer.override.group.id``."""
    return candidate.config.get("consumer.override.group.id", "").strip() or f"connect-{candidate.connector}"


def _digest_and_count(raw: bytes) -> tuple[str, int | None]:
    digest = bytes_hash(raw, 32)
    if len(raw) > MAX_PARSED_OFFSETS_BYTES:
        return digest, None
    try:
        document = json.loads(raw)
    except ValueError:
        return digest, None
    offsets = document.get("offsets") if isinstance(document, dict) else None
    return digest, len(offsets) if isinstance(offsets, list) else None
