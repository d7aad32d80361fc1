"""The lag monitor: measures one resource's mirrors, updates the metrics and the registry, and tells
its caller (a kopf daemon) whether the status would change, so that it wakes the reconcile.

It never raises: a failed round is a result (the registry marks the numbers stale, the per-partition
metrics are removed), and the next round tries again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from connect_offsets import metrics
from connect_offsets.clients.connect import ConnectClient
from connect_offsets.clients.credentials import CredentialsPolicy, CredentialsRefused
from connect_offsets.clients.kubernetes import KubernetesApi, KubernetesError
from connect_offsets.lag.measure import MirrorLag, measure_mirror
from connect_offsets.lag.report import LagRegistry, declared_mirrors
from connect_offsets.lag.secrets import MirrorSecrets
from connect_offsets.models.crds import KafkaMirrorMaker2Resource, ReplicationLagSpec
from connect_offsets.planning import mirror_targets
from connect_offsets.vocabulary import MIRROR_CLASSES

# The package's name, as before the split into modules: log lines keep the logger name they had.
log = logging.getLogger("connect_offsets.lag")

SOURCE_CLASS = MIRROR_CLASSES["MirrorSourceConnector"]


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
