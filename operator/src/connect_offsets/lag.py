"""MirrorMaker 2 replication lag: what a MirrorSourceConnector has not copied yet.

Why this exists: MM2's consumers use no consumer group, so the usual consumer-lag metric cannot see
them. What MM2 does record is, in Connect's offsets, the last upstream offset it replicated for
every source partition (``{cluster, topic, partition}`` -> ``{"offset": n}``). Compared with the
source cluster's log end offsets that is the lag: ``end - (n + 1)``, never negative; a partition
of a mirrored topic with no offset yet counts its whole backlog (``end - start``).

Layout, so that exactly one place writes status:

* pure functions (topic selection as MirrorSourceConnector does it, the arithmetic, the
  ``ReplicationLagging`` decision and the status document) — unit-tested without I/O;
* ``measure_mirror``: one measurement of one mirror = one ``GET /connectors/{c}/offsets`` plus one
  metadata request and one batched ListOffsets on the source cluster (a second one for start
  offsets only while some partitions have no offset yet);
* ``LagRegistry``: the latest measurement per mirror, in memory. ``MirrorMaker2Service`` reads it
  (``report``) and puts ``status.replicationLag`` and the condition into its single status write;
* ``LagMonitor``: measures one resource's mirrors, updates the metrics and the registry, and tells
  its caller (a kopf daemon) whether the status would change, so that it wakes the reconcile.

A failed measurement never presents old numbers as fresh: the registry keeps the last good
numbers with their time and marks them stale, the per-partition metrics are removed, and the
condition becomes ``Unknown``. Nothing here imports kopf or the service layer.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from pydantic import ValidationError

from connect_offsets import metrics
from connect_offsets.clients.connect import ConnectClient, ConnectError, ConnectNotFound
from connect_offsets.clients.credentials import CredentialsPolicy, CredentialsRefused
from connect_offsets.clients.kafka import KafkaAdminError, librdkafka_config, log_offsets
from connect_offsets.clients.kubernetes import KubernetesApi, KubernetesError
from connect_offsets.models.crds import (
    KafkaMirrorMaker2Resource,
    MirrorLagStatus,
    PartitionLagStatus,
    ReplicationLagSpec,
    ReplicationLagStatus,
)
from connect_offsets.planning import (
    ConditionSpec,
    ConnectorTarget,
    mirror_connector_name,
    mirror_targets,
)
from connect_offsets.planning.mirror_topics import mirrored_topic_filter
from connect_offsets.vocabulary import (
    MIRROR_CLASSES,
    iso,
)

__all__ = [
    "CONDITION",
    "LagMonitor",
    "LagRegistry",
    "LagTick",
    "MirrorLag",
    "PartitionLag",
    "lagging_condition",
    "measure_mirror",
    "mirror_kafka_config",
    "next_above_since",
    "partition_lags",
    "replicated_offsets",
    "status_document",
]

log = logging.getLogger(__name__)

CONDITION = "ReplicationLagging"
SOURCE_CLASS = MIRROR_CLASSES["MirrorSourceConnector"]
#: A measurement older than this many intervals (and at least STALE_AFTER_MIN_S) is reported stale.
STALE_AFTER_INTERVALS = 3
STALE_AFTER_MIN_S = 60.0

TP = tuple[str, int]


# --- arithmetic ---------------------------------------------------------------------------------


@dataclass(frozen=True, order=True)
class PartitionLag:
    topic: str
    partition: int
    lag: int
    end: int
    replicated: int | None  # the last replicated upstream offset; None: nothing replicated yet


def replicated_offsets(document: Mapping[str, Any], source_alias: str) -> dict[TP, int]:
    """``GET /connectors/{c}/offsets`` of a MirrorSourceConnector -> {(topic, partition): last replicated}.

    Entries of other clusters or of unexpected shapes are ignored: they cannot be compared with
    this source cluster's offsets.
    """
    found: dict[TP, int] = {}
    for entry in document.get("offsets") or []:
        if not isinstance(entry, dict):
            continue
        partition, offset = entry.get("partition"), entry.get("offset")
        if not isinstance(partition, dict) or not isinstance(offset, dict):
            continue
        topic, number, position = partition.get("topic"), partition.get("partition"), offset.get("offset")
        if partition.get("cluster") != source_alias or not isinstance(topic, str):
            continue
        if type(number) is not int or type(position) is not int:
            continue
        found[(topic, number)] = position
    return found


def partition_lags(
    replicated: Mapping[TP, int], ends: Mapping[TP, int], starts: Mapping[TP, int]
) -> list[PartitionLag]:
    """Lag of every partition in ``ends`` (the mirrored partitions), sorted by topic and partition.

    With an offset n: ``end - (n + 1)``; without one: ``end - start`` (the whole backlog). Never
    negative (an end offset read just before MM2 commits a newer offset would go below zero).
    """
    result = []
    for tp in sorted(ends):
        end = ends[tp]
        if tp in replicated:
            lag = end - (replicated[tp] + 1)
            last: int | None = replicated[tp]
        else:
            lag = end - starts.get(tp, 0)
            last = None
        result.append(PartitionLag(tp[0], tp[1], max(0, lag), end, last))
    return result


# --- one mirror's measurements ------------------------------------------------------------------


@dataclass(frozen=True)
class MirrorLag:
    """The latest state of one mirror: the last good numbers, and whether the last attempt failed."""

    connector: str
    source: str
    target: str
    lags: tuple[PartitionLag, ...] = ()
    measured_at: datetime | None = None  # of the last successful measurement
    attempted_at: datetime | None = None
    error: str | None = None  # why the last attempt failed; None: it succeeded
    above_since: datetime | None = None  # first measurement of the current run above the threshold
    requests: int = 0  # Connect + Kafka requests of the last attempt
    seconds: float = 0.0  # wall time of the last attempt

    @property
    def mirror(self) -> str:
        return f"{self.source}->{self.target}"

    @property
    def measured(self) -> bool:
        return self.measured_at is not None

    @property
    def total(self) -> int:
        return sum(p.lag for p in self.lags)

    @property
    def max(self) -> int:
        return max((p.lag for p in self.lags), default=0)

    @property
    def worst(self) -> PartitionLag | None:
        # Largest lag; ties go to the first topic/partition, so the answer is stable.
        return min(self.lags, key=lambda p: (-p.lag, p.topic, p.partition), default=None)


def next_above_since(
    previous: datetime | None, total: int, threshold: int | None, measured_at: datetime
) -> datetime | None:
    """When the current run of measurements above the threshold began (None: not above now)."""
    if threshold is None or total <= threshold:
        return None
    return previous or measured_at


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
        return ConditionSpec(CONDITION, "Unknown", "ReplicationLagUnknown", "; ".join(unknown)[:1024])
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
    document = ReplicationLagStatus(mirrors=entries, stale=bool(problems), message="; ".join(problems)[:1024])
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


def _declared(resource: KafkaMirrorMaker2Resource) -> list[tuple[str, str, str]]:
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
        declared = _declared(resource)
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


# --- measuring ----------------------------------------------------------------------------------


def source_kafka_config(target: ConnectorTarget) -> dict[str, Any]:
    """Admin-client settings for the mirror's source cluster."""
    return mirror_kafka_config(target, "source")


def mirror_kafka_config(target: ConnectorTarget, side: Literal["source", "target"]) -> dict[str, Any]:
    """Admin-client settings for one of a mirror's clusters, from the connector config the planner
    built (the cluster's ``config`` plus its resolved ``secretConfig``)."""
    prefix = f"{side}.cluster."
    java = {
        key[len(prefix) :]: value
        for key, value in target.config.items()
        if key.startswith(prefix) and key not in (f"{prefix}alias", f"{prefix}bootstrap.servers")
    }
    return librdkafka_config(target.config[f"{prefix}bootstrap.servers"], java)


async def measure_mirror(
    client: ConnectClient,
    target: ConnectorTarget,
    previous: MirrorLag | None,
    threshold: int | None,
    *,
    timeout: float = 10.0,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> MirrorLag:
    """One measurement of one mirror. Never raises for Connect or Kafka trouble: the result says it."""
    source = target.config["source.cluster.alias"]
    target_alias = target.config["target.cluster.alias"]
    base = previous or MirrorLag(target.name, source, target_alias)
    started = time.monotonic()
    now = clock()
    requests = 1
    try:
        try:
            document = await client.get_offsets(target.name)
        except ConnectNotFound as error:
            raise _MeasureFailed(f"connector {target.name} does not exist in Connect (yet)") from error
        except ConnectError as error:
            raise _MeasureFailed(f"Connect offsets of {target.name}: {error}") from error
        replicated = replicated_offsets(document, source)
        try:
            select = mirrored_topic_filter(target.config)
        except ValueError as error:
            raise _MeasureFailed(str(error)) from error
        if select is None:  # a custom topic filter: only the partitions MM2 has offsets for
            topics = {topic for topic, _ in replicated}
            select = topics.__contains__
        try:
            offsets = await log_offsets(source_kafka_config(target), select, replicated.keys(), timeout=timeout)
        except KafkaAdminError as error:
            raise _MeasureFailed(f"source cluster {source}: {error}") from error
        requests += offsets.requests
    except _MeasureFailed as failure:
        return replace(
            base,
            attempted_at=now,
            error=str(failure)[:512],
            requests=requests,
            seconds=time.monotonic() - started,
        )
    lags = tuple(partition_lags(replicated, offsets.ends, offsets.starts))
    total = sum(p.lag for p in lags)
    return MirrorLag(
        connector=target.name,
        source=source,
        target=target_alias,
        lags=lags,
        measured_at=now,
        attempted_at=now,
        error=None,
        above_since=next_above_since(base.above_since, total, threshold, now),
        requests=requests,
        seconds=time.monotonic() - started,
    )


class _MeasureFailed(Exception):
    pass


async def mirror_secrets(
    kube: KubernetesApi, resource: KafkaMirrorMaker2Resource, policy: CredentialsPolicy
) -> dict[tuple[str, str], str]:
    """The ``secretConfig`` values of every cluster, keyed by (Secret name, key), once the policy
    allows each cluster: bootstrap servers in the allow-list, and a cluster with ``secretConfig``
    on SSL or SASL_SSL. Every cluster is checked before any Secret is read.

    The one reader for the MM2 service (which sends the values to Connect) and the lag monitor
    (which connects to the source cluster with them). Raises CredentialsRefused, LookupError (a key
    is missing) or KubernetesError (the Secret cannot be read).
    """
    for cluster in resource.spec.clusters:
        policy.check_kafka(
            f"clusters[{cluster.alias}]",
            cluster.bootstrap_servers,
            cluster.config,
            credentials=bool(cluster.secret_config),
        )
    values: dict[tuple[str, str], str] = {}
    for cluster in resource.spec.clusters:
        for key, ref in cluster.secret_config.items():
            data = await kube.get_secret_data(resource.metadata.namespace, ref.name, [ref.key])
            if ref.key not in data:
                raise LookupError(
                    f"clusters[{cluster.alias}].secretConfig.{key}: Secret {ref.name} has no key {ref.key}"
                )
            values[(ref.name, ref.key)] = data[ref.key]
    return values


#: How long a mirror's ``secretConfig`` values are reused while its spec is unchanged. Every pass
#: of the reconcile and every lag round needs them; reading each Secret each time made the idle cost
#: grow with mirrors (issue 20). A rotated Secret reaches the connectors' config within this long, as
#: a rotated ConnectCluster credential does (reconcile/clusters.py ``ENDPOINT_TTL_S``).
SECRETS_REUSE_S = 60.0


class MirrorSecrets:
    """``mirror_secrets`` with the values reused for ``SECRETS_REUSE_S`` per mirror and spec.

    One instance is shared by the MM2 reconcile and the lag monitor, so a round of both costs one
    read of each Secret per minute at most. Keyed by the resource's uid and ``metadata.generation``:
    a spec change (another Secret, another key, another cluster) reads again at once, and a mirror
    deleted and re-created under the same name never sees the old values. Only successful reads are
    kept: a missing key or an unreadable Secret is asked again on the next pass.
    """

    def __init__(
        self,
        kube: KubernetesApi,
        policy: CredentialsPolicy,
        reuse_s: float = SECRETS_REUSE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kube = kube
        self.policy = policy
        self.reuse_s = reuse_s
        self._clock = clock
        self._kept: dict[tuple[str, str], tuple[str, int, float, dict[tuple[str, str], str]]] = {}

    async def read(self, resource: KafkaMirrorMaker2Resource) -> dict[tuple[str, str], str]:
        """The values by (Secret name, key); raises as ``mirror_secrets`` does."""
        meta = resource.metadata
        key = (meta.namespace, meta.name)
        kept = self._kept.get(key)
        now = self._clock()
        if kept is not None and kept[:2] == (meta.uid, meta.generation) and now - kept[2] < self.reuse_s:
            return dict(kept[3])
        self._kept.pop(key, None)
        values = await mirror_secrets(self.kube, resource, self.policy)
        if any(c.secret_config for c in resource.spec.clusters):  # nothing read, nothing to keep
            self._kept[key] = (meta.uid, meta.generation, now, values)
        return dict(values)

    def forget(self, namespace: str, name: str) -> None:
        """Drop a deleted mirror's values (they are credentials: kept no longer than needed)."""
        self._kept.pop((namespace, name), None)


#: Resolves a resource's ConnectCluster label into a Connect client (the service's ClusterRegistry).
ConnectResolver = Callable[[str, dict[str, str]], Awaitable[ConnectClient]]


@dataclass(frozen=True)
class LagTick:
    """What a measurement round tells its caller: when to measure again, and whether to wake the reconcile."""

    delay: float
    changed: bool


class LagMonitor:
    """Measures a KafkaMirrorMaker2's mirrors; the caller runs it every ``delay`` seconds."""

    def __init__(
        self,
        kube: KubernetesApi,
        registry: LagRegistry,
        connect_for: ConnectResolver,
        policy: CredentialsPolicy | None = None,
        secrets: MirrorSecrets | None = None,
    ) -> None:
        self.kube = kube
        self.registry = registry
        self.connect_for = connect_for
        self.policy = policy if policy is not None else CredentialsPolicy.from_env()
        self.secrets = secrets if secrets is not None else MirrorSecrets(kube, self.policy)

    async def measure(self, body: Mapping[str, Any]) -> LagTick:
        """Measure every mirror of this resource once. Never raises (a failure is a result)."""
        meta = body.get("metadata") or {}
        namespace, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
        try:
            resource = KafkaMirrorMaker2Resource.model_validate(dict(body))
        except ValidationError:
            return LagTick(ReplicationLagSpec().interval_seconds, False)  # the reconcile reports the spec
        spec = resource.spec.replication_lag
        if not spec.enabled:
            had = any(self.registry.get(namespace, name, c) for c, _, _ in _declared(resource))
            self.forget(namespace, name)
            return LagTick(spec.interval_seconds, had)
        before = self.registry.signature(resource, datetime.now(UTC))
        try:
            measured = await self._measure(resource, namespace, name, spec)
        except Exception as error:  # never let the monitor die; the next round tries again
            log.exception("replication lag of %s/%s: unexpected error", namespace, name)
            measured = self._failed_all(resource, namespace, name, f"unexpected error: {type(error).__name__}")
        self.registry.put(namespace, name, measured)
        self._export(namespace, name, measured)
        after = self.registry.signature(resource, datetime.now(UTC))
        return LagTick(spec.interval_seconds, before != after)

    async def _measure(
        self, resource: KafkaMirrorMaker2Resource, namespace: str, name: str, spec: ReplicationLagSpec
    ) -> list[MirrorLag]:
        try:
            secrets = await self.secrets.read(resource)
        except (KubernetesError, LookupError, CredentialsRefused) as error:
            return self._failed_all(resource, namespace, name, f"secretConfig: {error}")
        targets = [t for t in mirror_targets(resource, secrets).targets if t.class_name == SOURCE_CLASS]
        try:
            client = await self.connect_for(namespace, resource.metadata.labels)
        except Exception as error:  # the resolver's own errors (cluster missing, unreachable)
            return self._failed_all(resource, namespace, name, f"Connect cluster: {error}")
        timeout = 10.0  # per Kafka request; an unreachable cluster fails at connection set-up already
        return list(
            await asyncio.gather(
                *(
                    measure_mirror(
                        client, t, self.registry.get(namespace, name, t.name), spec.threshold, timeout=timeout
                    )
                    for t in targets
                )
            )
        )

    def _failed_all(
        self, resource: KafkaMirrorMaker2Resource, namespace: str, name: str, error: str
    ) -> list[MirrorLag]:
        now = datetime.now(UTC)
        result = []
        for connector, source, target in _declared(resource):
            previous = self.registry.get(namespace, name, connector) or MirrorLag(connector, source, target)
            result.append(replace(previous, attempted_at=now, error=error[:512], requests=0, seconds=0.0))
        return result

    def _export(self, namespace: str, name: str, measured: list[MirrorLag]) -> None:
        keep = set()
        for mirror in measured:
            keep.add((mirror.source, mirror.target))
            metrics.set_mirror_lag(
                namespace,
                name,
                mirror.source,
                mirror.target,
                None if mirror.error is not None else [(p.topic, p.partition, p.lag) for p in mirror.lags],
                mirror.measured_at.timestamp() if mirror.measured_at else None,
            )
            metrics.MM2_LAG_MEASUREMENTS.labels("Failed" if mirror.error else "Succeeded").inc()
            if mirror.error is None:
                metrics.MM2_LAG_SECONDS.observe(mirror.seconds)
        metrics.forget_mirror_lag(namespace, name, keep=keep)

    def forget(self, namespace: str, name: str) -> None:
        """The resource is gone (or stopped measuring): drop its numbers and metrics."""
        self.registry.forget(namespace, name)
        self.secrets.forget(namespace, name)
        metrics.forget_mirror_lag(namespace, name)
