"""The lag monitor: measures one resource's mirrors, updates the metrics and the registry, and tells
its caller (the controller's lag key) whether the status would change, so that it wakes the reconcile.

It never raises: a failed round is a result (the registry marks the numbers stale, the per-partition
metrics are removed), and the next round tries again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from connect_offsets import metrics
from connect_offsets.clients.connect import ConnectClient, ConnectError
from connect_offsets.clients.credentials import CredentialsPolicy, CredentialsRefused
from connect_offsets.clients.kubernetes import KubernetesApi, KubernetesError
from connect_offsets.clients.reference_policy import ReferenceRule
from connect_offsets.lag.measure import MirrorLag, measure_mirror
from connect_offsets.lag.report import LagRegistry, declared_mirrors
from connect_offsets.lag.secrets import MirrorSecrets
from connect_offsets.models.crds import KafkaMirrorMaker2Resource, ReplicationLagSpec
from connect_offsets.planning import ConnectorTarget, mirror_targets
from connect_offsets.vocabulary import MIRROR_CLASSES, OWNER_CONFIG_KEY

# The package's name, as before the split into modules: log lines keep the logger name they had.
log = logging.getLogger("connect_offsets.lag")

SOURCE_CLASS = MIRROR_CLASSES["MirrorSourceConnector"]


#: Reads a connector's config in the resolved Connect cluster (None: no such connector).
ConfigReader = Callable[[str], Awaitable[Mapping[str, str] | None]]
#: Resolves a resource's ConnectCluster labels into a Connect client and a config reader, once the
#: cluster's binding allows the resource's namespace and connector names (the reconcile's own
#: checks, ``reconcile.clusters.resolve_cluster``); raises when it does not.
ConnectResolver = Callable[
    [str, dict[str, str], Sequence[str]], Awaitable[tuple[ConnectClient, ConfigReader, ReferenceRule]]
]


@dataclass(frozen=True)
class LagTick:
    """What a measurement round tells its caller: when to measure again, and whether to wake the reconcile."""

    delay: float
    changed: bool


#: Per Kafka request; an unreachable cluster fails at connection set-up already.
KAFKA_TIMEOUT_S = 10.0


def _failed(previous: MirrorLag | None, target: ConnectorTarget, why: str) -> MirrorLag:
    """A round that could not measure: the last good numbers stay (stale), with the reason."""
    source, dest = target.config["source.cluster.alias"], target.config["target.cluster.alias"]
    base = previous or MirrorLag(target.name, source, dest)
    return replace(base, attempted_at=datetime.now(UTC), error=why[:512], requests=0, seconds=0.0)


def _refused(target: ConnectorTarget, why: str) -> MirrorLag:
    """A mirror whose connector is not this resource's: no numbers (not even earlier ones), the reason."""
    source, dest = target.config["source.cluster.alias"], target.config["target.cluster.alias"]
    return MirrorLag(target.name, source, dest, attempted_at=datetime.now(UTC), error=why[:512])


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
            had = any(self.registry.get(namespace, name, c) for c, _, _ in declared_mirrors(resource))
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
        """The reconcile's checks first, in its order: the cluster's binding (namespace, connector
        names), the connector config policy (in ``MirrorSecrets.read``), then per mirror the owner
        key of its connector. A refused resource or connector gets nothing read for it."""
        names = [t.name for t in mirror_targets(resource, {}).targets]
        try:
            client, config_of, references = await self.connect_for(namespace, resource.metadata.labels, names)
        except Exception as error:  # the resolver's own errors (binding refused, cluster missing, unreachable)
            return self._failed_all(resource, namespace, name, f"Connect cluster: {error}")
        try:
            secrets = await self.secrets.read(resource, references=references)
        except CredentialsRefused as error:
            return self._failed_all(resource, namespace, name, str(error))
        except (KubernetesError, LookupError) as error:
            return self._failed_all(resource, namespace, name, f"secretConfig: {error}")
        targets = [t for t in mirror_targets(resource, secrets).targets if t.class_name == SOURCE_CLASS]
        owner = f"{namespace}/{name}"

        async def one(target: ConnectorTarget) -> MirrorLag:
            # Only the resource that owns the connector (the owner key the operator writes into
            # every config it creates, the reconcile's ConnectorOwnedElsewhere) reads its offsets.
            previous = self.registry.get(namespace, name, target.name)
            try:
                config = await config_of(target.name)
            except ConnectError as error:
                return _failed(previous, target, f"Connect: {error}")
            if config is None:
                return _failed(previous, target, f"connector {target.name} does not exist in Connect (yet)")
            found = config.get(OWNER_CONFIG_KEY)
            if found != owner:
                who = f"resource {found[:300]}" if found else "no resource of the operator"
                return _refused(
                    target, f"connector {target.name} belongs to {who}: its offsets are not read for {owner}"
                )
            return await measure_mirror(
                client, target, previous, spec.threshold, timeout=KAFKA_TIMEOUT_S, namespace=namespace
            )

        return list(await asyncio.gather(*(one(t) for t in targets)))

    def _failed_all(
        self, resource: KafkaMirrorMaker2Resource, namespace: str, name: str, error: str
    ) -> list[MirrorLag]:
        now = datetime.now(UTC)
        result = []
        for connector, source, target in declared_mirrors(resource):
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
