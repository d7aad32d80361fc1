"""Reconcile one KafkaConnector: load it, resolve its cluster, run its one target, write status."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from connect_offsets import metrics
from connect_offsets.clients.connect import (
    ConnectClient,
    ConnectError,
)
from connect_offsets.clients.kafka_groups import KafkaGroups
from connect_offsets.clients.kubernetes import (
    KubernetesApi,
    KubernetesRejected,
)
from connect_offsets.lag import MirrorSecrets
from connect_offsets.models.connect import ConnectorStatus, plugin_version_refusal
from connect_offsets.models.crds import (
    KafkaConnectorResource,
    KafkaConnectorStatus,
    OffsetsOnDelete,
)
from connect_offsets.planning import (
    ConditionSpec,
    ConnectorTarget,
    Observed,
    plan_target,
    target_for_connector,
)
from connect_offsets.planning.outcomes import truncate
from connect_offsets.planning.plugin_versions import (
    NOT_INSTALLED_REASON,
    VersionRefusal,
    check_plugin_versions,
    has_version_keys,
)
from connect_offsets.progress import CONDITION as PROGRESSING
from connect_offsets.progress import ProgressRegistry
from connect_offsets.reconcile.clusters import (
    ClusterRegistry,
    ClusterUnreachable,
    ClusterUnusable,
    check_connector_config,
    cluster_display,
    cluster_ref,
    resolve_cluster,
)
from connect_offsets.reconcile.context import finish_after_answer
from connect_offsets.reconcile.deletion import offsets_on_delete
from connect_offsets.reconcile.runner import TargetRunner, accounted_view, delete_owned
from connect_offsets.reconcile.settings import Outcome, now_utc
from connect_offsets.reconcile.snapshots import ListingPending
from connect_offsets.reconcile.sources import SourceReader
from connect_offsets.reconcile.status import (
    load_resource,
    record_event,
    report_refusal,
    write_status,
    write_status_fields,
)
from connect_offsets.vocabulary import CONNECTORS, cluster_of

log = logging.getLogger(__name__)

_KIND = "KafkaConnector"

#: How long a Connect cluster's plugin listing is trusted when it allows the version asked for
#: (plugins change when workers restart), and how old it may be when it refuses: a refusal asks
#: again first, so a plugin just installed is seen within this long of the next pass.
PLUGINS_TRUSTED_S = 300.0
PLUGINS_RECHECK_S = 30.0


def _running(status: ConnectorStatus | None) -> bool:
    return status is not None and status.state == "RUNNING"


@dataclass(frozen=True)
class _Quiet:
    """What a full pass that found nothing to do saw: the next check that sees the same skips the
    pass (no parsing, no planning, no status comparison)."""

    resource_version: str | None
    cluster: tuple[str, str]
    client: ConnectClient
    connector: str
    digest: str
    outcome: Outcome


class ConnectorService:
    """Reconcile one KafkaConnector."""

    def __init__(
        self,
        kube: KubernetesApi,
        clusters: ClusterRegistry,
        progress: ProgressRegistry | None = None,
        *,
        secrets: MirrorSecrets | None = None,
        kafka_groups: KafkaGroups | None = None,
    ) -> None:
        self.kube = kube
        self.clusters = clusters
        #: What the progress monitor measured (status.progress, the Progressing condition).
        self.progress = progress
        self.runner = TargetRunner(kube)
        self._quiet: dict[tuple[str, str], _Quiet] = {}
        #: For initialOffsets.fromMirror: the mirrors' secretConfig (shared with the MM2 service) and
        #: the checkpoint and group calls (a fake in the unit simulation).
        self.secrets = secrets if secrets is not None else MirrorSecrets(kube, clusters.policy)
        self.kafka_groups = kafka_groups if kafka_groups is not None else KafkaGroups()

    async def reconcile(self, namespace: str, name: str) -> Outcome:
        metrics.RESOURCE_CHECKS.labels(_KIND).inc()
        try:
            unchanged = await self._unchanged(namespace, name)
            if unchanged is not None:
                metrics.RESOURCE_CHECKS_UNCHANGED.labels(_KIND).inc()
                return unchanged
            self._quiet.pop((namespace, name), None)
            return await self._reconcile(namespace, name)
        except KubernetesRejected as error:
            return await report_refusal(self.kube, CONNECTORS, namespace, name, error)

    def first_listing(self, namespace: str, name: str) -> asyncio.Future[Any] | None:
        """The first connector listing of the resource's ConnectCluster while one is under way and
        a check would wait for it (``ConnectorsSnapshot.first_listing``), from the watch cache
        alone: the controller asks before a pass, so that a start's thousands of checks do not each
        parse their resource to find that out. None: the pass runs now (also when the cluster is
        not resolved yet, or no listing is under way)."""
        labels = self.kube.cache.labels(CONNECTORS, namespace, name)
        if labels is None:
            return None
        cluster = cluster_of(CONNECTORS, namespace, name, labels)
        if cluster[0] != namespace:
            # Another namespace's ConnectCluster: the pass checks that it admits this namespace
            # before anything is asked of its Connect (a refused tenant starts no listing there).
            return None
        snapshot = self.clusters.current_snapshot(*cluster)
        # Only a listing under way: one is started by a pass, once it has found the cluster usable
        # and bound to the namespace (an endpoint whose GET / fails is never asked to list).
        return None if snapshot is None else snapshot.first_listing(start=False)

    async def _unchanged(self, namespace: str, name: str) -> Outcome | None:
        """The last full pass's outcome when nothing it depended on changed: the resource (its
        resourceVersion in the watch cache), the ConnectCluster's client, the connector in the
        cluster's snapshot (its digest). None: run a full pass.

        Why this is enough: a pass with no action, no requeue and no document to read decides
        from exactly these, and the planner is pure. Connect's side is compared through the
        snapshot, which is at most one drift interval old, so drift is still found every interval.
        """
        quiet = self._quiet.get((namespace, name))
        if quiet is None or self.kube.cache.resource_version(CONNECTORS, namespace, name) != quiet.resource_version:
            return None
        if self.progress is not None and self.progress.is_dirty(namespace, name):
            return None  # its progress would show something new
        snapshot = self.clusters.snapshot(*quiet.cluster)
        if snapshot is None or not self.clusters.is_current(*quiet.cluster, quiet.client):
            return None
        try:
            read = await snapshot.read(quiet.connector)
        except ConnectError:
            return None  # the full pass reports it
        if read.digest != quiet.digest or snapshot.topics_due(quiet.connector, _running(read.status)):
            return None
        return quiet.outcome

    async def _reconcile(self, namespace: str, name: str) -> Outcome:
        now = now_utc()
        loaded = await load_resource(self.kube, CONNECTORS, KafkaConnectorResource, namespace, name, now)
        if loaded is None:
            return Outcome()
        body, resource = loaded
        target = target_for_connector(resource)
        outcome = Outcome(
            referenced_configmaps={
                n for n in (target.alter_configmap, target.initial_configmap, target.dry_run_source()) if n is not None
            },
            connectors={target.name},
            seen=accounted_view(body),
        )
        shown_cluster = KafkaConnectorStatus(cluster=cluster_display(namespace, resource.metadata.labels))
        try:
            client, info = await resolve_cluster(self.clusters, namespace, resource.metadata.labels, [target.name])
            check_connector_config(self.clusters, cluster_ref(namespace, resource.metadata.labels), namespace, target)
            too_old = plugin_version_refusal(info.version)
            if too_old is not None and resource.spec.version is not None:
                # An older worker ignores connector.plugin.version: the version asked would not be
                # the one running. Nothing is created or changed until the spec or worker changes.
                raise ClusterUnusable(too_old, "PluginVersionUnsupported")
            if too_old is None:
                versions = await _version_refusal(client, cluster_ref(namespace, resource.metadata.labels), target)
                if versions is not None:
                    # Capped as the condition is, so that the Event says the same and is posted once.
                    raise _VersionRefused(truncate(versions.message), versions.reason)
        except (ClusterUnusable, ClusterUnreachable) as error:
            reason = (error.reason if isinstance(error, ClusterUnusable) else None) or "ConnectClusterUnavailable"
            plan = plan_target(target, Observed(now, str(error), False, None, None, cluster_error_reason=reason))
            unreachable = isinstance(error, ClusterUnreachable)
            await write_status(self.kube, CONNECTORS, body, plan.conditions, now, shown_cluster, transient=unreachable)
            if isinstance(error, _VersionRefused) and _newly_refused(resource, reason, str(error)):
                # Once per refusal (its passes repeat every 30 s): after the status that says it.
                await record_event(self.kube, body, "Warning", reason, str(error))
            if unreachable:
                outcome.transient_error = str(error)
            else:
                outcome.requeue_after = 30.0
            return outcome

        async def checkpoint(update: KafkaConnectorStatus) -> None:
            await write_status_fields(self.kube, CONNECTORS, body, now, update)

        # The cluster's Secrets are read in the cluster's namespace (a platform's credentials).
        cluster = cluster_ref(namespace, resource.metadata.labels)

        async def kafka() -> dict[str, Any]:
            return await self.clusters.kafka_config(*cluster)

        snapshot = self.clusters.snapshot(*cluster)
        sources = SourceReader(
            self.kube,
            self.clusters,
            self.kafka_groups,
            self.secrets,
            namespace=namespace,
            labels=resource.metadata.labels,
            connector=target.name,
        )
        try:
            result = await self.runner.run(
                target,
                body,
                client,
                info,
                now,
                checkpoint=checkpoint,
                kafka=kafka,
                snapshot=snapshot,
                health=self.clusters.health(*cluster),
                sources=sources,
                defer_to_listing=True,
            )
        except ListingPending as pending:  # nothing written yet: back when the listing lands
            outcome.after = pending.listing
            return outcome
        if result.superseded:
            return Outcome(
                requeue_after=0.0, connectors=outcome.connectors
            )  # the request changed: plan again from the fresh body
        update = result.status.updated(shown_cluster)
        if result.observed.status is not None:
            update = update.updated(
                KafkaConnectorStatus(
                    tasks_max=resource.spec.tasks_max, plugin_version=result.observed.status.connector.version
                )
            )
        conditions = list(result.conditions)
        running = _running(result.observed.status)
        if self.progress is not None:
            watched = running and resource.spec.progress.enabled
            if watched and self.progress.get(namespace, name) is None:
                # Not measured yet (an operator just started): what status says stays, rather than
                # being removed now and written again after the cluster's next round.
                conditions += [
                    ConditionSpec(c.type, c.status, c.reason, c.message)
                    for c in resource.status.conditions
                    if c.type == PROGRESSING
                ]
            else:
                shown, progressing, _ = (
                    self.progress.report(namespace, name, resource.spec.progress, now) if watched else (None, None, 0)
                )
                update = update.updated(KafkaConnectorStatus(progress=shown))
                conditions += [progressing] if progressing is not None else []
        topics_due = snapshot.topics_due(target.name, running) if snapshot is not None else running
        if topics_due and result.observed.config is not None and result.transient_error is None:
            # Topic tracking may be disabled on the worker (topic.tracking.enable=false).
            with contextlib.suppress(ConnectError):
                topics = sorted(await client.get_connector_topics(target.name))
                update = update.updated(KafkaConnectorStatus(topics=topics))
        await write_status(
            self.kube, CONNECTORS, body, conditions, now, update, transient=result.transient_error is not None
        )
        try:
            outcome.seen = await self.runner.finish_requests([result], body, CONNECTORS)
        finally:
            await finish_after_answer(self.kube, body, [result])
        outcome.transient_error = result.transient_error
        outcome.requeue_after = result.plan.requeue_after
        observed = result.observed
        if (
            result.connect_digest is not None
            and result.transient_error is None
            and not result.plan.actions
            and result.plan.requeue_after is None
            and observed.alter_configmap is None
            and observed.dry_run_configmap is None
            and observed.initial_configmap is None
            and observed.seek is None
            and observed.restore is None
            and observed.copy_source is None
            and observed.pinned_copy is None
        ):
            # The version this pass planned from, not the cache's now: a request that arrived
            # while the pass ran is in a newer body, and remembering that one as "nothing to do"
            # made the resource deaf to it for good (issue 30, the lost `list`).
            self._quiet[(namespace, name)] = _Quiet(
                body["metadata"].get("resourceVersion"),
                cluster,
                client,
                target.name,
                result.connect_digest,
                outcome,
            )
        return outcome

    async def delete(self, namespace: str, name: str, body: dict[str, Any], *, give_up: bool) -> str:
        """Delete the connector in Connect if this resource owns it, after what
        ``spec.offsetsOnDelete`` asks (``reconcile.deletion``). Returns what happened."""
        try:
            resource = KafkaConnectorResource.model_validate(body)
        except ValidationError:
            return "resource invalid; nothing to delete in Connect"
        if resource.spec.offsets_on_delete is not OffsetsOnDelete.KEEP:
            return await offsets_on_delete(self.kube, self.clusters, self.runner.store, body, give_up=give_up)
        return await delete_owned(
            self.clusters, self.kube, body, resource.metadata.labels, [resource.connector_name], give_up=give_up
        )


class _VersionRefused(ClusterUnusable):
    """A plugin version the Connect cluster does not have (PluginVersionNotInstalled) or that is
    not a version (InvalidSpec): reported like an unusable cluster (nothing is created or changed,
    looked at again every 30 s), and posted once as a Warning Event."""


async def _version_refusal(
    client: ConnectClient, cluster: tuple[str, str], target: ConnectorTarget
) -> VersionRefusal | None:
    """Whether the plugin versions the config asks for (``spec.version``, and the converters',
    transforms' and predicates' ``*.plugin.version`` keys spec.config holds) are installed on the
    Connect cluster (Kafka Connect 4.1+), from its cached plugin listing; a refusal is confirmed
    against a listing at most ``PLUGINS_RECHECK_S`` old. None: nothing to refuse, or the listing
    could not be read (Connect's own answer then decides)."""
    if not has_version_keys(target.config):
        return None
    where = f"the Connect worker of ConnectCluster {cluster[1]}"
    refusal: VersionRefusal | None = None
    for max_age in (PLUGINS_TRUSTED_S, PLUGINS_RECHECK_S):
        installed = await client.installed_plugins.get(max_age=max_age)
        if installed is None:
            return None
        refusal = check_plugin_versions(target.config, installed, where=where)
        if refusal is None or refusal.reason != NOT_INSTALLED_REASON:
            return refusal
    return refusal


def _newly_refused(resource: KafkaConnectorResource, reason: str, message: str) -> bool:
    """Whether the resource's Ready condition did not already say this refusal."""
    return not any(
        c.type == "Ready" and c.reason == reason and c.message == message for c in resource.status.conditions
    )
