"""One pass over one planned connector (a KafkaConnector, or one connector of a KafkaMirrorMaker2):
observe, plan, execute, report; plus the deletion of a resource's connectors.

Why separate: this is the thin orchestration the resource services (``connectors``,
``mirrormaker2``) call; what each step does lives in ``observe``, ``execute`` (and the step modules
below it), ``backups`` and ``outcomes``, and what a step receives is one ``context.Pass``.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime
from typing import Any

from connect_offsets import metrics
from connect_offsets.clients.connect import ConnectClient, ConnectError, ConnectUnavailable
from connect_offsets.clients.kubernetes import KubernetesApi
from connect_offsets.clients.offsets_configmaps import OffsetsConfigMapStore
from connect_offsets.models.connect import ServerInfo
from connect_offsets.models.crds import KafkaConnectorStatus
from connect_offsets.planning import ConnectorTarget, Observed, plan_target
from connect_offsets.reconcile.clusters import ClusterRegistry, ClusterUnreachable, ClusterUnusable, resolve_cluster
from connect_offsets.reconcile.context import (
    BeforeOffsets,
    Checkpoint,
    KafkaConfig,
    Pass,
    RequestChanged,
    StatusSink,
    StepUnavailable,
    TargetResult,
)
from connect_offsets.reconcile.execute import execute
from connect_offsets.reconcile.observe import observe
from connect_offsets.reconcile.snapshots import ConnectorsSnapshot
from connect_offsets.reconcile.status import record_event
from connect_offsets.vocabulary import OWNER_CONFIG_KEY

log = logging.getLogger(__name__)


class TargetRunner:
    """Observe, plan and act for one connector target; shared by every resource kind."""

    def __init__(self, kube: KubernetesApi) -> None:
        self.kube = kube
        # Offsets documents of any size: plain offsets.json, gzip, or shard ConfigMaps.
        self.store = OffsetsConfigMapStore(kube)

    async def run(
        self,
        target: ConnectorTarget,
        body: dict[str, Any],
        client: ConnectClient,
        info: ServerInfo,
        now: datetime,
        before_offsets: BeforeOffsets | None = None,
        checkpoint: Checkpoint | None = None,
        kafka: KafkaConfig | None = None,
        snapshot: ConnectorsSnapshot | None = None,
    ) -> TargetResult:
        """One pass: ``checkpoint`` receives status fields as they happen (restartable steps),
        ``before_offsets`` runs right before each offsets request, ``kafka`` resolves Kafka access."""
        sink = StatusSink(checkpoint)
        p = Pass(self.kube, self.store, target, body, client, info, now, sink, before_offsets, kafka, snapshot)
        try:
            observed, digest = await observe(p)
        except ConnectError as error:
            observed = Observed(now, f"Connect unreachable: {error}", False, None, None)
            plan = plan_target(target, observed)
            return TargetResult(plan, observed, list(plan.conditions), transient_error=str(error))
        metrics.set_connector_state(
            p.kind,
            p.namespace,
            body["metadata"]["name"],
            target.name,
            observed.status.state if observed.status else "ABSENT",
        )
        # In a worker thread: planning validates the tenant's documents (a million entries take
        # seconds of pure Python). The GIL is handed back every few milliseconds, so the event
        # loop (other tenants' reconciles, the health endpoint) keeps running meanwhile.
        plan = await asyncio.to_thread(plan_target, target, observed)
        observed = observed.without_documents()  # the plan's actions carry the texts they send
        sink.conditions = list(plan.conditions)
        transient_error: str | None = None
        try:
            await execute(p, plan)
        except RequestChanged as error:
            log.info("%s: %s; planning again from the fresh body", target.name, error)
            return TargetResult(plan, observed, list(plan.conditions), superseded=True)
        except (ConnectError, StepUnavailable) as error:
            transient_error = str(error)
            sink.not_ready("ConnectError", str(error))
        if observed.status is not None:
            sink.report(KafkaConnectorStatus(connector_status=observed.status.for_status()))
        if plan.auto_restart is not None:
            sink.report(KafkaConnectorStatus(auto_restart=plan.auto_restart))
        if plan.applied_offsets is not None:
            sink.report(KafkaConnectorStatus(applied_offsets=plan.applied_offsets))
        return TargetResult(
            plan, observed, sink.conditions, sink.status, transient_error, sink.removals, connect_digest=digest
        )

    async def finish_requests(self, results: list[TargetResult], body: dict[str, Any], plural: str) -> None:
        """Remove the annotations of finished requests; call after their status is written."""
        meta = body["metadata"]
        expected: dict[str, str] = {}
        for result in results:
            for action in result.removals:
                assert action.annotation is not None and action.annotation_value is not None
                expected[action.annotation] = action.annotation_value
        if expected:
            await self.kube.remove_annotations(plural, meta["namespace"], meta["name"], expected)


async def delete_owned(
    clusters: ClusterRegistry,
    kube: KubernetesApi,
    body: dict[str, Any],
    labels: dict[str, str],
    names: list[str],
    *,
    give_up: bool,
) -> str:
    """Delete these connectors in Connect where this resource owns them; report what happened."""
    meta = body["metadata"]
    owner = f"{meta['namespace']}/{meta['name']}"
    try:
        # No name check: deleting connectors this resource owns is allowed whatever the prefix
        # says now (it may have been set after they were created).
        client, _ = await resolve_cluster(clusters, meta["namespace"], labels)
        done = []
        for name in names:
            config = await client.get_connector_config(name)
            if config is None:
                done.append(f"{name}: already absent")
            elif config.get(OWNER_CONFIG_KEY) != owner:
                done.append(f"{name}: owned by someone else, left in place")
            else:
                await client.delete_connector(name)
                done.append(f"{name}: deleted (its offsets stay in Kafka)")
        return "; ".join(done)
    except ClusterUnusable as error:
        await record_event(kube, body, "Warning", "ConnectorNotDeleted", f"Could not delete in Connect: {error}")
        return f"could not delete in Connect: {error}"
    except (ConnectError, ClusterUnreachable) as error:
        if give_up:
            await record_event(kube, body, "Warning", "ConnectorNotDeleted", f"Gave up deleting in Connect: {error}")
            return f"gave up: {error}"
        raise ConnectUnavailable(str(error)) from error
