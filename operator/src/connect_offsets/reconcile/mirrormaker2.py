"""Reconcile one KafkaMirrorMaker2: check where each mirror writes, run its connectors, write status."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from connect_offsets.clients.connect import (
    ConnectClient,
    ConnectError,
)
from connect_offsets.clients.connect.state_changes import inherited_term_age
from connect_offsets.clients.credentials import CredentialsRefused, secret_parts
from connect_offsets.clients.kafka import (
    ClusterIdCache,
    KafkaAdminError,
    delete_topic,
    librdkafka_config,
)
from connect_offsets.clients.kubernetes import (
    KubernetesApi,
    KubernetesRejected,
)
from connect_offsets.clients.reference_policy import ReferenceRule
from connect_offsets.lag import LagRegistry, MirrorSecrets, check_mirror_configs, mirror_kafka_config
from connect_offsets.models.connect import ServerInfo
from connect_offsets.models.crds import (
    ConfigProviderSpec,
    KafkaConnectorStatus,
    KafkaMirrorMaker2Resource,
    KafkaMirrorMaker2Status,
    MirrorConnectorStatus,
    OffsetsOperationStatus,
    WriteToTarget,
)
from connect_offsets.planning import (
    SETTLE_DELAY_S,
    Action,
    ConditionSpec,
    ConnectorTarget,
    MirrorClusterIds,
    MirrorPlan,
    mirror_connector_name,
    mirror_direction,
    mirror_targets,
)
from connect_offsets.planning.plan import state_change_settling
from connect_offsets.reconcile.clusters import (
    ClusterRegistry,
    ClusterUnreachable,
    ClusterUnusable,
    cluster_display,
    cluster_ref,
    not_honoured,
    resolve_cluster,
)
from connect_offsets.reconcile.context import (
    BeforeOffsets,
    Checkpoint,
    StepUnavailable,
    TargetResult,
    finish_after_answer,
)
from connect_offsets.reconcile.group_failover import GroupFailovers
from connect_offsets.reconcile.runner import TargetRunner, accounted_view, delete_owned
from connect_offsets.reconcile.settings import Outcome, now_utc
from connect_offsets.reconcile.snapshots import ConnectorsSnapshot
from connect_offsets.reconcile.status import (
    load_resource,
    merge_same_type,
    record_event,
    report_refusal,
    write_status,
    write_status_fields,
)
from connect_offsets.vocabulary import (
    MIRROR_CLASS_SUFFIXES,
    MIRROR_CLASSES,
    MIRRORS,
    OWNER_CONFIG_KEY,
    MirrorHoldReason,
    java_string,
)

log = logging.getLogger(__name__)


class MirrorMaker2Service:
    """Reconcile one KafkaMirrorMaker2: its connectors, their offsets, the optional full reset."""

    def __init__(
        self,
        kube: KubernetesApi,
        clusters: ClusterRegistry,
        lag: LagRegistry | None = None,
        secrets: MirrorSecrets | None = None,
    ) -> None:
        self.kube = kube
        self.clusters = clusters
        self.secrets = secrets if secrets is not None else MirrorSecrets(kube, clusters.policy)
        self.runner = TargetRunner(kube)
        self.lag = lag if lag is not None else LagRegistry()  # measured by lag.LagMonitor, reported here
        self.cluster_ids = ClusterIdCache()
        #: Consumer-group failovers through the mirrors' checkpoints (spec.mirrors[].groupFailover and
        #: the connect-offsets.io/failover-group annotation).
        self.failovers = GroupFailovers(kube)
        #: Connect's validation of producer-override configs: (when, problems) by (Connect, config).
        self._validated: dict[str, tuple[float, list[str]]] = {}

    async def _secrets(
        self, resource: KafkaMirrorMaker2Resource, connect_url: str | None, references: ReferenceRule
    ) -> dict[tuple[str, str], str]:
        try:
            return await self.secrets.read(resource, connect_url=connect_url, references=references)
        except CredentialsRefused as error:
            raise ClusterUnusable(str(error), error.reason) from error
        except LookupError as error:
            raise ClusterUnusable(str(error)) from error

    async def reconcile(self, namespace: str, name: str) -> Outcome:
        try:
            return await self._reconcile(namespace, name)
        except KubernetesRejected as error:
            return await report_refusal(self.kube, MIRRORS, namespace, name, error)

    async def _reconcile(self, namespace: str, name: str) -> Outcome:
        now = now_utc()
        loaded = await load_resource(self.kube, MIRRORS, KafkaMirrorMaker2Resource, namespace, name, now)
        if loaded is None:
            return Outcome()
        body, resource = loaded
        outcome = Outcome(seen=accounted_view(body))
        shown_cluster = KafkaMirrorMaker2Status(cluster=cluster_display(namespace, resource.metadata.labels))
        try:
            # The connectors' names do not depend on the Secrets: the binding is checked before any is read.
            declared = mirror_targets(resource, {})
            outcome.referenced_configmaps = {
                name for t in declared.targets for name in (t.alter_configmap, t.dry_run_source()) if name
            }
            client, info = await resolve_cluster(
                self.clusters, namespace, resource.metadata.labels, [t.name for t in declared.targets]
            )
            cluster = cluster_ref(namespace, resource.metadata.labels)
            provider = self.clusters.config_provider(*cluster)
            if provider is not None and not self.clusters.policy.honours_config_providers(cluster[0]):
                if any(c.secret_config for c in resource.spec.clusters):
                    # Writing the values in clear instead would silently undo what the provider
                    # was set for; the references it would make are the cluster writer's to aim.
                    raise ClusterUnusable(
                        f"ConnectCluster {cluster[0]}/{cluster[1]} names spec.configProvider {provider.name!r}, "
                        f"which is not honoured: {not_honoured()}. Nothing was sent to Connect",
                        "ConfigProviderNotHonoured",
                    )
                provider = None
            rule = self.clusters.reference_rule(*cluster, namespace)
            # Without a config provider the values go to Connect inside the connectors' config, so
            # each Secret must allow Connect's host too, and the URL must be verified https.
            secrets = await self._secrets(resource, None if provider else client.endpoint.url, rule)
            kafka = mirror_targets(resource, secrets)  # for the operator's own Kafka clients
            if secrets and provider is None:
                try:
                    self.clusters.policy.check_connect_url(
                        client.endpoint.url,
                        credentials=True,
                        what="the ConnectCluster's spec.url",
                        insecure_skip_verify=client.endpoint.insecure_skip_verify,
                    )
                except CredentialsRefused as error:
                    raise ClusterUnusable(f"secretConfig: {error}", error.reason) from error
            # Connect may echo resolved values in its errors either way.
            client.also_redact(secret_parts(secrets.values()))
            sent = secrets if provider is None else references(resource, provider)
            mirror = kafka if provider is None else mirror_targets(resource, sent)
            try:
                # What Connect receives, secretConfig filled in: a Secret's value or the operator's
                # reference may not refer anywhere the tenant's own text may not.
                check_mirror_configs(resource, self.clusters.policy, rule, sent)
            except CredentialsRefused as error:
                raise ClusterUnusable(str(error), error.reason) from error
        except (ClusterUnusable, ClusterUnreachable, KubernetesRejected) as error:
            if isinstance(error, KubernetesRejected):
                reason = "SecretUnreadable"
            elif isinstance(error, ClusterUnusable):
                reason = error.reason or MirrorHoldReason.CONNECT_CLUSTER_UNAVAILABLE
            else:
                reason = MirrorHoldReason.CONNECT_CLUSTER_UNAVAILABLE
            unreachable = isinstance(error, ClusterUnreachable)
            await write_status(
                self.kube,
                MIRRORS,
                body,
                [ConditionSpec("Ready", "False", reason, str(error))],
                now,
                shown_cluster,
                transient=unreachable,
            )
            if unreachable:
                outcome.transient_error = str(error)
            else:
                outcome.requeue_after = 30.0
            return outcome

        outcome.connectors = {t.name for t in mirror.targets}
        snapshot = self.clusters.snapshot(*cluster_ref(namespace, resource.metadata.labels))
        held, gate_error, stop_settling = await self._gate(body, resource, mirror, kafka, client, info)
        if gate_error is not None:
            outcome.transient_error = gate_error
        if stop_settling:
            outcome.requeue_after = SETTLE_DELAY_S  # a held-back stop is looked at again soon
        entries: list[MirrorConnectorStatus] = []
        conditions: list[ConditionSpec] = list(mirror.conditions)
        not_ready: list[ConditionSpec] = []
        previous = {c.name: c for c in resource.status.connectors}
        last_operation: OffsetsOperationStatus | None = None
        results: list[TargetResult] = []
        handled_ids: list[str] | None = None
        for target in mirror.targets:
            refusal = held.get(target.name)
            if refusal is not None:
                held_entry = MirrorConnectorStatus(
                    name=target.name, ready=False, reason=refusal.reason, message=refusal.message
                )
                entries.append(_kept_entry_fields(held_entry, previous.get(target.name)))
                not_ready.append(refusal)
                continue
            hook = self._offset_syncs_hook(resource, kafka, target.name, body) if kafka.offset_syncs_reset else None
            result = await self.runner.run(
                target,
                body,
                client,
                info,
                now,
                hook,
                checkpoint=self._checkpoint(body, target.name, now),
                snapshot=snapshot,
            )
            if result.superseded:  # the request changed: plan every connector again from the fresh body
                return Outcome(requeue_after=0.0, connectors=outcome.connectors)
            results.append(result)
            if "handled_request_ids" in result.status.model_fields_set:
                handled_ids = result.status.handled_request_ids
            if result.transient_error and outcome.transient_error is None:
                outcome.transient_error = result.transient_error
            if result.plan.requeue_after is not None:
                outcome.requeue_after = min(
                    outcome.requeue_after or result.plan.requeue_after, result.plan.requeue_after
                )
            ready = next((c for c in result.conditions if c.type == "Ready"), None)
            entry = MirrorConnectorStatus(
                name=target.name,
                ready=ready is not None and ready.status == "True",
                reason=ready.reason if ready else "",
                message=ready.message if ready else "",
            )
            # A field the pass set to None is gone from the entry (the status writer leaves None out).
            entries.append(
                _kept_entry_fields(entry, previous.get(target.name)).updated(_entry_update(target.name, result.status))
            )
            if result.status.last_offsets_operation is not None:
                last_operation = result.status.last_offsets_operation
            if ready is not None and ready.status != "True":
                not_ready.append(ready)
            for item in result.conditions:
                if item.type != "Ready":
                    conditions.append(
                        ConditionSpec(item.type, item.status, item.reason, f"{target.name}: {item.message}")
                    )
        await self._delete_undeclared(body, client, {t.name for t in mirror.targets}, snapshot)
        failover = await self.failovers.run(body, resource, secrets, now)
        if failover.superseded:  # the request changed: plan again from the fresh body
            return Outcome(requeue_after=0.0, connectors=outcome.connectors)
        conditions += failover.conditions
        if failover.transient_error is not None and outcome.transient_error is None:
            outcome.transient_error = failover.transient_error
        if not mirror.targets:
            ready_condition = ConditionSpec("Ready", "False", "NoConnectors", "no mirror declares a connector")
        elif not_ready:
            first = not_ready[0]
            names = [e.name for e in entries if not e.ready]
            ready_condition = ConditionSpec(
                "Ready", "False", first.reason, f"not ready: {', '.join(names)}; first: {first.message}"
            )
        else:
            ready_condition = ConditionSpec(
                "Ready", "True", "ConnectorsReady", f"{len(entries)} connector(s) as the spec asks"
            )
        ready_count = f"{sum(1 for e in entries if e.ready)}/{len(mirror.targets)}"
        update = KafkaMirrorMaker2Status(connectors=entries, connectors_ready=ready_count).updated(shown_cluster)
        if handled_ids is not None:
            update = update.updated(KafkaMirrorMaker2Status(handled_request_ids=handled_ids))
        if last_operation is not None:
            update = update.updated(KafkaMirrorMaker2Status(last_offsets_operation=last_operation))
        replication_lag, lag_conditions = self.lag.report(resource, now)
        update = update.updated(KafkaMirrorMaker2Status(replication_lag=replication_lag))
        conditions += lag_conditions
        stored = secrets_condition(resource, mirror, provider, cluster_ref(namespace, resource.metadata.labels))
        if stored is not None:
            conditions.append(stored)
        conditions = [ready_condition, *merge_same_type(conditions)]
        await write_status(
            self.kube, MIRRORS, body, conditions, now, update, transient=outcome.transient_error is not None
        )
        try:
            outcome.seen = await self.runner.finish_requests(results, body, MIRRORS, failover.removals)
        finally:
            await finish_after_answer(self.kube, body, results)
            for event in failover.events:
                await record_event(self.kube, body, event.type, event.reason, event.message)
        return outcome

    async def _gate(
        self,
        body: dict[str, Any],
        resource: KafkaMirrorMaker2Resource,
        mirror: MirrorPlan,
        kafka: MirrorPlan,
        client: ConnectClient,
        info: ServerInfo,
    ) -> tuple[dict[str, ConditionSpec], str | None, bool]:
        """The declared connectors that must not be created or changed this pass, with the reason;
        a transient error when a cluster could not be asked (the pass is retried with back-off);
        and whether a stop of a refused mirror was held back (``state_change_settling``).
        ``mirror`` is what Connect receives, ``kafka`` the same with the secretConfig values (they
        differ when the ConnectCluster names a config provider): the operator's own Kafka clients
        need the values.

        Checked on every pass, not once: a ConnectCluster can be re-pointed and a mirror's clusters
        edited, and a mirror writing into the wrong cluster floods it within minutes. Running
        connectors of a refused mirror are stopped, not deleted (their offsets stay).
        """
        declared = {t.name: t for t in mirror.targets}
        with_values = {t.name: t for t in kafka.targets}
        held: dict[str, ConditionSpec] = {}
        transient: str | None = None
        settling = False
        for index, spec in enumerate(resource.spec.mirrors):
            names = [
                name
                for kind in MIRROR_CLASSES
                if (name := mirror_connector_name(spec.source_cluster, spec.target_cluster, kind)) in declared
            ]
            if not names:
                continue
            sample = with_values[names[0]]
            namespace = resource.metadata.namespace
            try:
                source_id, target_id = await asyncio.gather(
                    self.cluster_ids.get(mirror_kafka_config(sample, "source"), namespace=namespace),
                    self.cluster_ids.get(mirror_kafka_config(sample, "target"), namespace=namespace),
                )
                found = MirrorClusterIds(source_id, target_id)
            except KafkaAdminError as error:
                found = MirrorClusterIds(error=str(error))
            refusal = mirror_direction(index, spec, info.kafka_cluster_id, found)
            if refusal is None and spec.write_to_target is WriteToTarget.PRODUCER_OVERRIDE:
                try:
                    refusal = await self._override_refusal(index, [declared[n] for n in names], client)
                except ConnectError as error:
                    refusal = ConditionSpec(
                        "Ready",
                        "False",
                        MirrorHoldReason.CONNECT_CLUSTER_UNAVAILABLE,
                        f"validating spec.mirrors[{index}]: {error}",
                    )
                    transient = transient or refusal.message
            if refusal is None:
                continue
            held.update(dict.fromkeys(names, refusal))
            if refusal.reason == MirrorHoldReason.MIRROR_CLUSTER_UNREACHABLE:
                transient = transient or refusal.message
            elif refusal.reason != MirrorHoldReason.CONNECT_CLUSTER_UNAVAILABLE:
                settling = await self._stop_refused(body, client, names, refusal) or settling
        return held, transient, settling

    async def _override_refusal(
        self, index: int, targets: list[ConnectorTarget], client: ConnectClient
    ) -> ConditionSpec | None:
        """Connect's own verdict on the producer overrides (its ``connector.client.config.override.policy``),
        asked before anything is created; the answer is kept while the config stays the same."""
        now = time.monotonic()
        problems: list[str] = []
        for target in targets:
            key = hashlib.sha256(json.dumps([client.endpoint.url, sorted(target.config.items())]).encode()).hexdigest()
            cached = self._validated.get(key)
            if cached is None or now - cached[0] > VALIDATION_TTL_S:
                cached = (now, await client.validate_config(target.config))
                self._validated = {k: v for k, v in self._validated.items() if now - v[0] <= VALIDATION_TTL_S}
                self._validated[key] = cached
            problems += [f"{target.name}: {problem}" for problem in cached[1]]
        if not problems:
            return None
        overridden = sorted(
            {
                key.removeprefix("producer.override.")
                for t in targets
                for key in t.config
                if key.startswith("producer.override.")
            }
        )
        return ConditionSpec(
            "Ready",
            "False",
            MirrorHoldReason.PRODUCER_OVERRIDE_REFUSED,
            f"spec.mirrors[{index}] asks writeToTarget: producerOverride, and Connect refused the connectors' "
            f"config, so nothing was created. Connect says: {'; '.join(problems)}. The workers' "
            "connector.client.config.override.policy decides: All, or on Kafka Connect 4.2 and newer (KIP-1188) "
            "Allowlist with connector.client.config.override.allowlist listing the settings this mirror "
            f"overrides: {', '.join(overridden)}",
        )

    async def _stop_refused(
        self, body: dict[str, Any], client: ConnectClient, names: list[str], refusal: ConditionSpec
    ) -> bool:
        """Stop (not delete) this resource's running connectors of a refused mirror, once each;
        whether a stop was held back (sent moments ago, or by the replica before us)."""
        owner = f"{body['metadata']['namespace']}/{body['metadata']['name']}"
        settling = False
        for name in names:
            status = await client.get_connector_status(name)
            if status is None or status.connector.state == "STOPPED":
                continue
            if state_change_settling("stop", client.state_changes.last(name), inherited_term_age()):
                settling = True  # sent moments ago; Connect's status does not show it yet
                continue
            config = await client.get_connector_config(name)
            if config is None or config.get(OWNER_CONFIG_KEY) != owner:
                continue
            await client.stop_connector(name)
            await record_event(
                self.kube, body, "Warning", "MirrorStopped", f"{name} stopped (not deleted): {refusal.message}"
            )
        return settling

    def _checkpoint(self, body: dict[str, Any], connector: str, now: datetime) -> Checkpoint:
        """Checkpoints of one MirrorMaker 2 connector go into its entry of status.connectors."""

        async def checkpoint(update: KafkaConnectorStatus) -> None:
            # The entries as last written (this pass's earlier checkpoints included).
            entries = KafkaMirrorMaker2Status.model_validate(body.get("status") or {}).connectors
            change = _entry_update(connector, update)
            index = next((i for i, e in enumerate(entries) if e.name == connector), None)
            if index is None:
                entries.append(change)
            else:
                entries[index] = entries[index].updated(change)
            await write_status_fields(self.kube, MIRRORS, body, now, KafkaMirrorMaker2Status(connectors=entries))

        return checkpoint

    def _offset_syncs_hook(
        self, resource: KafkaMirrorMaker2Resource, kafka: MirrorPlan, name: str, body: dict[str, Any]
    ) -> BeforeOffsets | None:
        """The full reset's deletion of the offset-syncs topic; ``kafka`` holds the secretConfig values."""
        assert kafka.offset_syncs_reset is not None
        connector, topic, alias = kafka.offset_syncs_reset
        target = next((t for t in kafka.targets if t.name == name), None)
        if name != connector or target is None:
            return None
        clusters = {c.alias: c for c in resource.spec.clusters}
        if alias not in clusters:  # the spec validator makes this impossible; stay safe anyway
            return None
        cluster = clusters[alias]

        async def delete_offset_syncs(action: Action) -> str:
            if action.kind != "reset_offsets":
                return ""
            java = {k: java_string(v) for k, v in cluster.config.items()}
            java.update(
                {
                    k: target.config.get(
                        f"source.cluster.{k}"
                        if alias == target.config["source.cluster.alias"]
                        else f"target.cluster.{k}",
                        "",
                    )
                    for k in cluster.secret_config
                }
            )
            try:
                deleted = await delete_topic(
                    librdkafka_config(cluster.bootstrap_servers, java), topic, namespace=resource.metadata.namespace
                )
            except KafkaAdminError as error:
                # Kafka may answer later: the pass ends like a Connect outage and is retried.
                raise StepUnavailable(f"offset-syncs reset on cluster {alias}: {error}") from error
            step = f"deleted topic {topic} on cluster {alias}" if deleted else f"topic {topic} on {alias} did not exist"
            await record_event(self.kube, body, "Normal", "OffsetSyncsReset", f"{connector}: {step}")
            return f"offset-syncs: {step}; connector "

        return delete_offset_syncs

    async def _delete_undeclared(
        self, body: dict[str, Any], client: ConnectClient, declared: set[str], snapshot: ConnectorsSnapshot | None
    ) -> None:
        """Remove connectors this resource created but no longer declares (a mirror was removed).
        The cluster's snapshot says which connectors exist and who owns them; only a deletion
        reads the connector again (``fresh``)."""
        owner = f"{body['metadata']['namespace']}/{body['metadata']['name']}"
        names = snapshot.names() if snapshot is not None else None
        for name in names if names is not None else await client.list_connectors():
            if name in declared or "->" not in name or not name.endswith(tuple(MIRROR_CLASS_SUFFIXES)):
                continue
            if snapshot is not None:
                seen = await snapshot.read(name)
                if seen.config is None or seen.config.get(OWNER_CONFIG_KEY) != owner:
                    continue
            config = await client.get_connector_config(name)
            if config is not None and config.get(OWNER_CONFIG_KEY) == owner:
                await client.delete_connector(name)
                await record_event(
                    self.kube, body, "Normal", "ConnectorDeleted", f"Deleted {name}: no mirror declares it"
                )

    async def delete(self, namespace: str, name: str, body: dict[str, Any], *, give_up: bool) -> str:
        try:
            resource = KafkaMirrorMaker2Resource.model_validate(body)
        except ValidationError:
            return "resource invalid; nothing to delete in Connect"
        names = [t.name for t in mirror_targets(resource, {}).targets]
        return await delete_owned(self.clusters, self.kube, body, resource.metadata.labels, names, give_up=give_up)


def references(resource: KafkaMirrorMaker2Resource, provider: ConfigProviderSpec) -> dict[tuple[str, str], str]:
    """Every secretConfig entry as the reference the workers' config provider resolves."""
    namespace = resource.metadata.namespace
    return {
        (ref.name, ref.key): provider.reference(namespace, ref.name, ref.key)
        for cluster in resource.spec.clusters
        for ref in cluster.secret_config.values()
    }


#: The condition that says whether secretConfig values are stored in Connect in clear.
SECRETS_CONDITION = "SecretsInConnectorConfig"


def secrets_condition(
    resource: KafkaMirrorMaker2Resource,
    mirror: MirrorPlan,
    provider: ConfigProviderSpec | None,
    cluster: tuple[str, str],
) -> ConditionSpec | None:
    """Whether this resource's connectors carry secretConfig values in clear (None: they carry none)."""
    secrets = sorted({secret for target in mirror.targets for _, _, secret in target.secret_keys})
    if not secrets:
        return None
    where = f"ConnectCluster {cluster[0]}/{cluster[1]}"
    if provider is not None:
        return ConditionSpec(
            SECRETS_CONDITION,
            "False",
            "ConfigProviderReferences",
            f"secretConfig values ({', '.join(secrets)}) reach Connect as references to config provider "
            f"{provider.name!r} of {where}; the workers resolve them",
        )
    aliases = sorted({c.alias for c in resource.spec.clusters if c.secret_config})
    return ConditionSpec(
        SECRETS_CONDITION,
        "True",
        "StoredInClear",
        f"secretConfig values of cluster(s) {', '.join(aliases)} (Secrets {', '.join(secrets)}) are written into "
        "the connectors' config in clear: Connect stores them in its config topic and shows them to anyone with "
        f"access to its REST API (GET /connectors/<name>/config). Name the workers' config provider in {where} "
        "spec.configProvider to send references instead",
    )


#: How long Connect's answer to a producer-override config is trusted (its policy changes only with
#: a worker restart; a changed config is asked again at once).
VALIDATION_TTL_S = 300.0


#: The fields of a connector's entry in status.connectors that a new pass carries over from its
#: previous entry (a pass sets them only when they change); the others it computes afresh.
KEPT_ENTRY_FIELDS = frozenset(
    {"auto_restart", "last_offsets_operation", "pending_offsets_operation", "applied_offsets", "offsets_progress"}
)


def _kept_entry_fields(entry: MirrorConnectorStatus, old: MirrorConnectorStatus | None) -> MirrorConnectorStatus:
    """A connector's new status entry with the fields of its previous entry a new pass carries over."""
    if old is None:
        return entry
    return entry.model_copy(update={name: getattr(old, name) for name in KEPT_ENTRY_FIELDS})


def _entry_update(connector: str, status: KafkaConnectorStatus) -> MirrorConnectorStatus:
    """The fields one connector's pass set, as a change of its entry in status.connectors (its
    handled request ids excepted: the resource keeps them). A field a MirrorMaker 2 connector's
    entry does not declare is a TypeError."""
    fields = {name: getattr(status, name) for name in status.model_fields_set if name != "handled_request_ids"}
    return MirrorConnectorStatus(name=connector, **fields)
