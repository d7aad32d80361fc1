"""One pass over one planned connector (a KafkaConnector, or one connector of a KafkaMirrorMaker2):
observe, plan, execute, report; plus the deletion of a resource's connectors.

Why separate: this is the thin orchestration the resource services (``connectors``,
``mirrormaker2``) call; what each step does lives in ``observe``, ``execute`` (and the step modules
below it), ``backups`` and ``outcomes``, and what a step receives is one ``context.Pass``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from connect_offsets import metrics
from connect_offsets.clients.connect import ConnectClient, ConnectError, ConnectUnavailable
from connect_offsets.clients.kubernetes import KubernetesApi
from connect_offsets.clients.offsets_configmaps import OffsetsConfigMapStore
from connect_offsets.faults import fault_point
from connect_offsets.models.connect import ServerInfo
from connect_offsets.models.crds import KafkaConnectorStatus
from connect_offsets.planning import CONNECT_READ_ONLY, Action, ConnectorTarget, Observed, Plan, plan_target
from connect_offsets.reconcile.clusters import ClusterRegistry, ClusterUnreachable, ClusterUnusable, resolve_cluster
from connect_offsets.reconcile.context import (
    BeforeOffsets,
    Checkpoint,
    CopySources,
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
from connect_offsets.vocabulary import ANNOTATION_HANDLED_REQUEST, OWNER_CONFIG_KEY, request_view

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
        health: tuple[str, str] | None = None,
        sources: CopySources | None = None,
        defer_to_listing: bool = False,
    ) -> TargetResult:
        """One pass: ``checkpoint`` receives status fields as they happen (restartable steps),
        ``before_offsets`` runs right before each offsets request, ``kafka`` resolves Kafka access,
        ``sources`` reads what copies copy; ``defer_to_listing``: ``ListingPending`` rather than
        wait for the cluster's first listing (``Pass.defer_to_listing``)."""
        sink = StatusSink(checkpoint)
        p = Pass(
            self.kube,
            self.store,
            target,
            body,
            client,
            info,
            now,
            sink,
            before_offsets,
            kafka,
            snapshot,
            health=health,
            sources=sources,
            defer_to_listing=defer_to_listing,
        )
        try:
            return await self._run(p)
        finally:
            p.drop_unused_reads()

    async def _run(self, p: Pass) -> TargetResult:
        target, body, sink, now = p.target, p.body, p.sink, p.now
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
        plan = await _plan(target, observed)
        if digest is not None and any(action.kind not in CONNECT_READ_ONLY for action in plan.actions):
            # The write barrier: this plan came from the cluster's snapshot (up to ~1.5 drift
            # intervals old) and writes to the connector. Meanwhile it may have been deleted and
            # re-created by another tool or team; planned again from a fresh read, a connector
            # owned by someone else is refused (ConnectorOwnedElsewhere), never overwritten.
            # Idle passes never get here: they plan no write.
            observed, digest = await observe(p, fresh=True)
            plan = await _plan(target, observed)
        observed = observed.without_documents()  # the plan's actions carry the texts they send
        sink.conditions = list(plan.conditions)
        transient_error: str | None = None
        try:
            await execute(p, plan)
        except RequestChanged as error:
            log.info("%s: %s; planning again from the fresh body", target.name, error)
            return TargetResult(plan, observed, list(plan.conditions), superseded=True)
        except StepUnavailable as error:
            transient_error = str(error)
            sink.not_ready(error.reason, str(error))
        except ConnectError as error:
            transient_error = str(error)
            sink.not_ready("ConnectError", str(error))
        if observed.status is not None:
            sink.report(KafkaConnectorStatus(connector_status=observed.status.for_status()))
        if plan.auto_restart is not None:
            sink.report(KafkaConnectorStatus(auto_restart=plan.auto_restart))
        if plan.applied_offsets is not None:
            sink.report(KafkaConnectorStatus(applied_offsets=plan.applied_offsets))
        return TargetResult(
            plan,
            observed,
            sink.conditions,
            sink.status,
            transient_error,
            sink.removals,
            connect_digest=digest,
            events=sink.events,
            clean_ups=sink.clean_ups,
        )

    async def finish_requests(
        self, results: list[TargetResult], body: dict[str, Any], plural: str, extra: Sequence[Action] = ()
    ) -> tuple[Any, ...]:
        """Remove the annotations of finished requests and mark them handled, in one patch; call
        after their status is written (once the annotations are gone, status tells how it ended).
        ``extra``: removals of requests that are not a connector's (a KafkaMirrorMaker2's group failover).

        Returns what the pass accounted for (``Outcome.seen``): the request view of ``body``
        without the annotations removed."""
        meta = body["metadata"]
        expected: dict[str, str] = {}
        instances: list[str] = []
        for removals in [*(result.removals for result in results), list(extra)]:
            for action in removals:
                assert action.annotation is not None and action.annotation_value is not None
                if action.kind == "mark_handled":
                    instances.append(action.annotation_value)
                else:
                    expected[action.annotation] = action.annotation_value
        removed: list[str] = []
        if expected or instances:
            fault_point("after-status")
            marker = max(instances, key=lambda i: (len(i), i)) if instances else None  # the newest version
            removed = await self.kube.remove_annotations(
                plural,
                meta["namespace"],
                meta["name"],
                expected,
                set_also={ANNOTATION_HANDLED_REQUEST: marker} if marker is not None else None,
            )
        return accounted_view(body, removed)


async def _plan(target: ConnectorTarget, observed: Observed) -> Plan:
    """Plan in a worker thread when the observation carries a tenant's documents: validating them
    takes seconds of pure Python at a million entries, and the GIL is handed back every few
    milliseconds, so the event loop (other tenants' reconciles, the health endpoint) keeps running
    meanwhile. Without documents (a `list`, an idle or lifecycle pass) planning takes microseconds,
    and the thread hop, waiting for the GIL behind a busy loop, cost more than the planning
    (issue 35: a `list`'s latency against its protocol floor)."""
    if observed.carries_documents():
        return await asyncio.to_thread(plan_target, target, observed)
    return plan_target(target, observed)


def accounted_view(body: dict[str, Any], removed: list[str] | None = None) -> tuple[Any, ...]:
    """The request view of ``body`` once ``removed`` annotations are gone (``Outcome.seen``)."""
    meta = body["metadata"]
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k not in (removed or ())}
    return request_view({"metadata": {**meta, "annotations": annotations}})


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
