"""What a resource's status says about replication lag: ``status.replicationLag`` and the
``ReplicationLagging`` condition, from the latest measurement of each mirror; and the registry that
keeps those measurements for the MM2 service to read.

Pure but for the registry (in memory: a restarted operator measures anew). Old numbers are never
shown as fresh: a failed or late measurement keeps its last good numbers with their time, marked
stale, and the condition becomes ``Unknown``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from connect_offsets.lag.measure import MirrorLag, PartitionLag
from connect_offsets.models.crds import (
    KafkaMirrorMaker2Resource,
    MirrorLagStatus,
    PartitionLagStatus,
    ReplicationLagSpec,
    ReplicationLagStatus,
)
from connect_offsets.planning import ConditionSpec, mirror_connector_name
from connect_offsets.vocabulary import MAX_QUOTED_TEXT, iso

CONDITION = "ReplicationLagging"
#: A measurement older than this many intervals (and at least STALE_AFTER_MIN_S) is reported stale.
STALE_AFTER_INTERVALS = 3
STALE_AFTER_MIN_S = 60.0


def _age_limit(spec: ReplicationLagSpec) -> timedelta:
    return timedelta(seconds=max(STALE_AFTER_INTERVALS * spec.interval_seconds, STALE_AFTER_MIN_S))


def _staleness(mirror: MirrorLag | None, spec: ReplicationLagSpec, now: datetime) -> str | None:
    """Why the mirror's numbers are not current (None: they are)."""
    if mirror is None or mirror.attempted_at is None:
        return "not measured yet"
    if mirror.error is not None:
        return mirror.error
    if now - mirror.attempted_at > _age_limit(spec):
        return f"no measurement since {iso(mirror.attempted_at)}"
    return None


def lagging_condition(
    mirrors: list[tuple[str, MirrorLag | None]], spec: ReplicationLagSpec, now: datetime
) -> ConditionSpec:
    """``ReplicationLagging``: True when a mirror's total stayed above ``threshold`` for ``forSeconds``.

    Judged at each mirror's latest measurement. Unknown when some mirror cannot be measured (and no
    other one is lagging): an old number must not keep the condition False — or True.
    """
    lagging, unknown, totals = [], [], []
    for name, mirror in mirrors:
        why = _staleness(mirror, spec, now)
        if why is not None or mirror is None or mirror.measured_at is None:
            unknown.append(f"{name}: {why}")
            continue
        totals.append(f"{name}: {mirror.total}")
        since = mirror.above_since
        if (
            spec.threshold is not None
            and since is not None
            and (mirror.measured_at - since).total_seconds() >= spec.for_seconds
        ):
            lagging.append(f"{name}: {mirror.total} records behind (threshold {spec.threshold}) since {iso(since)}")
    if lagging:
        return ConditionSpec(CONDITION, "True", "LagAboveThreshold", "; ".join(lagging))
    if unknown:
        return ConditionSpec(CONDITION, "Unknown", "ReplicationLagUnknown", "; ".join(unknown)[:MAX_QUOTED_TEXT])
    if spec.threshold is None:
        return ConditionSpec(
            CONDITION,
            "False",
            "NoThreshold",
            f"total lag {', '.join(totals)} records; set spec.replicationLag.threshold to be alerted",
        )
    return ConditionSpec(
        CONDITION,
        "False",
        "WithinThreshold",
        f"total lag {', '.join(totals)} records; threshold {spec.threshold} for {spec.for_seconds:g}s",
    )


def _partition_status(lag: PartitionLag, mirror: str | None = None) -> PartitionLagStatus:
    return PartitionLagStatus(topic=lag.topic, partition=lag.partition, lag=lag.lag, mirror=mirror)


def _mirror_status(
    connector: str, source: str, target: str, mirror: MirrorLag | None, why: str | None
) -> MirrorLagStatus:
    """One mirror's entry in ``status.replicationLag.mirrors``: its last good numbers, if any, and
    why they are not current (``why``)."""
    if mirror is None or mirror.measured_at is None:
        return MirrorLagStatus(source_cluster=source, target_cluster=target, connector=connector, message=why or "")
    worst = mirror.worst
    return MirrorLagStatus(
        source_cluster=source,
        target_cluster=target,
        connector=connector,
        total=mirror.total,
        max=mirror.max,
        partitions=len(mirror.lags),
        measured_at=iso(mirror.measured_at),
        worst_partition=_partition_status(worst) if worst is not None else None,
        stale=why is not None,
        message=why or "",
    )


def status_document(
    mirrors: list[tuple[str, MirrorLag | None]],
    declared: list[tuple[str, str, str]],
    spec: ReplicationLagSpec,
    now: datetime,
) -> ReplicationLagStatus:
    """``status.replicationLag``: per mirror, and summed over the mirrors that have numbers.

    ``declared`` is (connector, source alias, target alias) per mirror, in spec order. Numbers of a
    failed or old measurement stay, with their ``measuredAt`` and ``stale: true``.
    """
    entries: list[MirrorLagStatus] = []
    problems: list[str] = []
    measured: list[MirrorLag] = []
    by_name = dict(mirrors)
    for connector, source, target in declared:
        mirror = by_name.get(connector)
        why = _staleness(mirror, spec, now)
        if mirror is not None and mirror.measured_at is not None:
            measured.append(mirror)
        if why is not None:
            problems.append(f"{source}->{target}: {why}")
        entries.append(_mirror_status(connector, source, target, mirror, why))
    document = ReplicationLagStatus(
        mirrors=entries, stale=bool(problems), message="; ".join(problems)[:MAX_QUOTED_TEXT]
    )
    if not measured:
        return document
    candidates = [(m.worst, m.mirror) for m in measured if m.worst is not None]
    worst_partition = None
    if candidates:
        top, where = min(candidates, key=lambda item: (-item[0].lag, item[1], item[0].topic, item[0].partition))
        worst_partition = _partition_status(top, where)
    return document.updated(
        ReplicationLagStatus(
            total=sum(m.total for m in measured),
            max=max(m.max for m in measured),
            measured_at=iso(min(m.measured_at for m in measured if m.measured_at is not None)),
            worst_partition=worst_partition,
        )
    )


def declared_mirrors(resource: KafkaMirrorMaker2Resource) -> list[tuple[str, str, str]]:
    """(connector, source alias, target alias) of every mirror that declares a sourceConnector."""
    seen: dict[str, tuple[str, str, str]] = {}
    for mirror in resource.spec.mirrors:
        if mirror.source_connector is not None:
            name = mirror_connector_name(mirror.source_cluster, mirror.target_cluster, "MirrorSourceConnector")
            seen.setdefault(name, (name, mirror.source_cluster, mirror.target_cluster))
    return list(seen.values())


# --- the registry the service reads -------------------------------------------------------------


@dataclass
class _ResourceLag:
    mirrors: dict[str, MirrorLag] = field(default_factory=dict)


class LagRegistry:
    """The latest measurement of every mirror, by resource. In memory: a restarted operator measures anew."""

    def __init__(self) -> None:
        self._resources: dict[tuple[str, str], _ResourceLag] = {}

    def get(self, namespace: str, name: str, connector: str) -> MirrorLag | None:
        entry = self._resources.get((namespace, name))
        return entry.mirrors.get(connector) if entry is not None else None

    def put(self, namespace: str, name: str, mirrors: list[MirrorLag]) -> None:
        self._resources[(namespace, name)] = _ResourceLag({m.connector: m for m in mirrors})

    def forget(self, namespace: str, name: str) -> None:
        self._resources.pop((namespace, name), None)

    def report(
        self, resource: KafkaMirrorMaker2Resource, now: datetime
    ) -> tuple[ReplicationLagStatus, list[ConditionSpec]]:
        """``status.replicationLag`` and the ``ReplicationLagging`` condition for this resource."""
        spec = resource.spec.replication_lag
        if not spec.enabled:
            return ReplicationLagStatus(stale=True, message="replication lag monitoring is off", mirrors=[]), []
        declared = declared_mirrors(resource)
        if not declared:
            return ReplicationLagStatus(stale=False, message="no mirror declares a sourceConnector", mirrors=[]), []
        meta = resource.metadata
        mirrors = [
            (f"{source}->{target}", self.get(meta.namespace, meta.name, connector))
            for connector, source, target in declared
        ]
        by_connector = [(c, self.get(meta.namespace, meta.name, c)) for c, _, _ in declared]
        return status_document(by_connector, declared, spec, now), [lagging_condition(mirrors, spec, now)]

    def signature(self, resource: KafkaMirrorMaker2Resource, now: datetime) -> Any:
        """What the status would show, minus the measurement time: a change is worth a reconcile."""
        document, conditions = self.report(resource, now)
        shown = document.model_dump(exclude={"measured_at": True, "mirrors": {"__all__": {"measured_at"}}})
        return shown, [(c.status, c.reason, c.message) for c in conditions]
