"""Reconcile one KafkaConnector: load it, resolve its cluster, run its one target, write status."""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from pydantic import ValidationError

from connect_offsets.clients.connect import (
    ConnectError,
)
from connect_offsets.clients.kubernetes import (
    KubernetesApi,
    KubernetesRejected,
)
from connect_offsets.models.crds import (
    KafkaConnectorResource,
)
from connect_offsets.planning import (
    Observed,
    plan_target,
    target_for_connector,
)
from connect_offsets.reconcile.clusters import (
    ClusterRegistry,
    ClusterUnreachable,
    ClusterUnusable,
    cluster_ref,
    resolve_cluster,
)
from connect_offsets.reconcile.runner import TargetRunner, delete_owned
from connect_offsets.reconcile.settings import Outcome, now_utc
from connect_offsets.reconcile.status import load_resource, report_refusal, write_status, write_status_fields
from connect_offsets.vocabulary import (
    CONNECTORS,
)

log = logging.getLogger(__name__)


class ConnectorService:
    """Reconcile one KafkaConnector."""

    def __init__(self, kube: KubernetesApi, clusters: ClusterRegistry) -> None:
        self.kube = kube
        self.clusters = clusters
        self.runner = TargetRunner(kube)

    async def reconcile(self, namespace: str, name: str) -> Outcome:
        try:
            return await self._reconcile(namespace, name)
        except KubernetesRejected as error:
            return await report_refusal(self.kube, CONNECTORS, namespace, name, error)

    async def _reconcile(self, namespace: str, name: str) -> Outcome:
        now = now_utc()
        loaded = await load_resource(self.kube, CONNECTORS, KafkaConnectorResource, namespace, name, now)
        if loaded is None:
            return Outcome()
        body, resource = loaded
        target = target_for_connector(resource)
        outcome = Outcome(
            referenced_configmaps={n for n in (target.alter_configmap, target.initial_configmap) if n is not None}
        )
        try:
            client, info = await resolve_cluster(self.clusters, namespace, resource.metadata.labels, [target.name])
        except (ClusterUnusable, ClusterUnreachable) as error:
            reason = (error.reason if isinstance(error, ClusterUnusable) else None) or "ConnectClusterUnavailable"
            plan = plan_target(target, Observed(now, str(error), False, None, None, cluster_error_reason=reason))
            await write_status(self.kube, CONNECTORS, body, plan.conditions, now, {})
            if isinstance(error, ClusterUnreachable):
                outcome.transient_error = str(error)
            else:
                outcome.requeue_after = 30.0
            return outcome

        async def checkpoint(fields: dict[str, Any]) -> None:
            await write_status_fields(self.kube, CONNECTORS, body, now, fields)

        # The cluster's Secrets are read in the cluster's namespace (a platform's credentials).
        cluster_namespace, cluster_name = cluster_ref(namespace, resource.metadata.labels)

        async def kafka() -> dict[str, Any]:
            return await self.clusters.kafka_config(cluster_namespace, cluster_name)

        result = await self.runner.run(target, body, client, info, now, checkpoint=checkpoint, kafka=kafka)
        extra = dict(result.status)
        if result.observed.status is not None:
            extra["tasksMax"] = resource.spec.tasks_max
        if result.observed.config is not None and result.transient_error is None:
            # Topic tracking may be disabled on the worker (topic.tracking.enable=false).
            with contextlib.suppress(ConnectError):
                extra["topics"] = sorted(await client.get_connector_topics(target.name))
        await write_status(self.kube, CONNECTORS, body, result.conditions, now, extra)
        await self.runner.finish_requests([result], body, CONNECTORS)
        outcome.transient_error = result.transient_error
        outcome.requeue_after = result.plan.requeue_after
        return outcome

    async def delete(self, namespace: str, name: str, body: dict[str, Any], *, give_up: bool) -> str:
        """Delete the connector in Connect if this resource owns it. Returns what happened."""
        try:
            resource = KafkaConnectorResource.model_validate(body)
        except ValidationError:
            return "resource invalid; nothing to delete in Connect"
        return await delete_owned(
            self.clusters, self.kube, body, resource.metadata.labels, [resource.connector_name], give_up=give_up
        )
