"""Runs one planned connector (a KafkaConnector, or one connector of a KafkaMirrorMaker2):
observe, plan, execute the actions in order (backups before changes, staged stop -> change -> resume,
chunked PATCHes), report. The biggest room of the reconcile layer; splitting TargetRunner by
concern (observe, offsets requests, backups, lifecycle) is the next step of issue 19.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from connect_offsets import (
    metrics,
)
from connect_offsets.clients.connect import (
    ConnectClient,
    ConnectConflict,
    ConnectError,
    ConnectHTTPError,
    ConnectUnavailable,
)
from connect_offsets.clients.kafka import (
    KafkaAdminError,
    offsets_for_timestamp,
)
from connect_offsets.clients.kubernetes import (
    KubernetesApi,
    KubernetesError,
    KubernetesRejected,
    KubernetesUnavailable,
    label_value,
)
from connect_offsets.clients.offsets_configmaps import (
    NOT_A_SHARD,
    OffsetsConfigMapStore,
    OffsetsCorrupt,
    OffsetsKeyMissing,
    OffsetsStoreError,
    OffsetsTooLarge,
)
from connect_offsets.errors import UserError
from connect_offsets.faults import fault_point
from connect_offsets.models.chunking import (
    ChunkProgress,
    ChunkResume,
    document_entries,
    plan_chunks,
)
from connect_offsets.models.connect import ServerInfo, supports_initial_state
from connect_offsets.models.crds import (
    AppliedOffsetsStatus,
    OffsetsOperationStatus,
    PendingOffsetsOperation,
    parse_rfc3339,
)
from connect_offsets.models.java_regex import PatternRefused, compile_java
from connect_offsets.models.offsets import (
    OffsetsDiff,
    OffsetsDocument,
    diff_offsets,
    parse_offsets_document,
    parse_offsets_obj,
    partition_key,
    reset_diff,
)
from connect_offsets.planning import (
    HANDLED_REQUEST_IDS,
    Action,
    ConditionSpec,
    ConnectorTarget,
    Observed,
    OffsetsConfigMap,
    Plan,
    RestoreSource,
    SeekOffsets,
    leftovers_owned_elsewhere,
    plan_target,
)
from connect_offsets.reconcile import settings
from connect_offsets.reconcile.clusters import ClusterRegistry, ClusterUnreachable, ClusterUnusable, resolve_cluster
from connect_offsets.reconcile.settings import backup_retention, patch_limits
from connect_offsets.reconcile.status import owner_reference, truncate
from connect_offsets.vocabulary import (
    ANNOTATION_DRY_RUN,
    ANNOTATION_OFFSETS,
    ANNOTATION_RESTORE_FROM,
    API_GROUP,
    CLUSTER_LABEL,
    LAST_OWNER_LABEL,
    OWNER_CONFIG_KEY,
    WATCH_LABEL,
    dry_run_key,
    iso,
)

log = logging.getLogger(__name__)


def _owner_record_hash(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()[:16]


def _connector_hash(name: str) -> str:
    """Connector names (``a->b.X``) are not valid label values; their hash is."""
    return hashlib.sha256(name.encode()).hexdigest()[:8]


@dataclass
class TargetResult:
    """What running one connector target produced, for the resource's status."""

    plan: Plan
    observed: Observed
    conditions: list[ConditionSpec]
    status: dict[str, Any] = field(default_factory=dict)  # lastOffsetsOperation, autoRestart, connectorStatus
    transient_error: str | None = None
    removals: list[Action] = field(default_factory=list)  # annotations of finished requests


#: Called right before an offsets action; returns text to prefix to its message. Raising
#: OffsetsRequestInvalid fails the request permanently, ConnectError-like errors retry it.
BeforeOffsets = Callable[[Action], Awaitable[str]]


#: Resolves the ConnectCluster's Kafka settings (only called when a request needs Kafka).
KafkaConfig = Callable[[], Awaitable[dict[str, Any]]]


#: Writes status fields of one connector target right away (before the next step runs): how a
#: multi-step change survives an operator restart. A None value removes the field.
Checkpoint = Callable[[dict[str, Any]], Awaitable[None]]


OFFSETS_OPS = {
    "list_offsets": "list",
    "alter_offsets": "alter",
    "reset_offsets": "reset",
    "restore_offsets": "restore",
}


class _Steps:
    """Status checkpoints of one target during one pass; the final status write includes them too."""

    def __init__(self, result: TargetResult, checkpoint: Checkpoint | None) -> None:
        self._result = result
        self._checkpoint = checkpoint

    async def fields(self, fields: dict[str, Any]) -> None:
        self._result.status.update(fields)
        if self._checkpoint is not None:
            await self._checkpoint(fields)

    async def pending(self, pending: PendingOffsetsOperation) -> None:
        await self.fields({"pendingOffsetsOperation": pending.model_dump(by_alias=True, exclude_none=True)})


def _transient_for_initial(error: ConnectHTTPError) -> bool:
    """Initial offsets treat only rebalances, rate limits and timeouts as passing: any other error
    (Connect answers 500 for offsets Kafka rejects) would otherwise keep a half-created connector
    STOPPED forever, so it fails the step and cleans up."""
    return isinstance(error, ConnectConflict) or error.status_code == 429 or getattr(error, "is_request_timeout", False)


def _is_dry_run(target: ConnectorTarget) -> bool:
    return target.annotations.get(ANNOTATION_DRY_RUN) == "true"


class TargetRunner:
    """Observe, plan and act for one connector target; shared by every resource kind."""

    def __init__(self, kube: KubernetesApi) -> None:
        self.kube = kube
        # Offsets documents of any size: plain offsets.json, gzip, or shard ConfigMaps.
        self.store = OffsetsConfigMapStore(kube)

    async def observe(
        self,
        target: ConnectorTarget,
        namespace: str,
        client: ConnectClient,
        info: ServerInfo,
        now: datetime,
        kafka: KafkaConfig | None = None,
    ) -> Observed:
        # One after the other, not concurrently: against a frozen or overloaded worker each retry
        # must leave one request behind, not two (the fault tests bound the requests a frozen
        # worker finds queued).
        config = await client.get_connector_config(target.name)
        status = await client.get_connector_status(target.name) if config is not None else None
        pending = target.pending
        operation = pending.operation if pending is not None else target.annotations.get(ANNOTATION_OFFSETS)
        configmap: OffsetsConfigMap | None = None
        if target.alter_configmap and (operation == "alter" or target.apply_on_change):
            configmap = await self._offsets_configmap(namespace, target.alter_configmap, target.configmap_key)
        initial: OffsetsConfigMap | None = None
        initial_status = target.initial_status
        if target.initial_configmap and (
            (config is None and (initial_status is None or initial_status.step != "Applied"))
            or (initial_status is not None and initial_status.step == "Creating")
        ):
            initial = await self._offsets_configmap(namespace, target.initial_configmap, target.configmap_key)
        seek: SeekOffsets | None = None
        when = target.seek_to()
        if operation == "alter" and when is not None and config is not None and status is not None:
            seek = await self._seek(target, config, when, kafka)
        restore: RestoreSource | None = None
        if operation == "restore" and config is not None:
            wanted = pending.restore_from if pending is not None else target.annotations.get(ANNOTATION_RESTORE_FROM)
            restore = await self._restore_source(target, namespace, client, wanted)
        return Observed(
            now=now,
            cluster_error=None,
            supports_initial_state=supports_initial_state(info.version),
            config=config,
            status=status,
            alter_configmap=configmap,
            restore=restore,
            initial_configmap=initial,
            seek=seek,
        )

    async def _seek(
        self, target: ConnectorTarget, config: dict[str, str], when: str, kafka: KafkaConfig | None
    ) -> SeekOffsets:
        """The offsets document of a sink seek: every consumed partition at the first offset >= the time."""
        moment = parse_rfc3339(when)
        if moment is None:
            return SeekOffsets(error=f"{when!r} is not an RFC 3339 time")  # the planner names the problem
        if kafka is None:
            return SeekOffsets(error="seeking to a time needs Kafka access (ConnectCluster spec.kafka)")
        try:
            settings = await kafka()
        except ClusterUnusable as error:
            return SeekOffsets(error=str(error))
        topics = {t.strip() for t in config.get("topics", "").split(",") if t.strip()}
        try:  # the tenant's pattern: linear time (RE2), or refused with the reason
            pattern = (
                compile_java(config["topics.regex"], "config[topics.regex]") if config.get("topics.regex") else None
            )
        except PatternRefused as error:
            return SeekOffsets(error=str(error))

        def consumed(topic: str) -> bool:
            return topic in topics or (pattern is not None and pattern.full_match(topic))

        try:
            found = await offsets_for_timestamp(settings, consumed, int(moment.timestamp() * 1000))
        except KafkaAdminError as error:
            return SeekOffsets(error=f"Kafka: {error}", transient=True)
        if not found.offsets:
            wanted = ", ".join(sorted(topics)) or config.get("topics.regex", "")
            return SeekOffsets(error=f"none of the connector's topics exist in Kafka ({wanted})")
        entries = [
            {"partition": {"kafka_topic": topic, "kafka_partition": partition}, "offset": {"kafka_offset": offset}}
            for (topic, partition), offset in sorted(found.offsets.items())
        ]
        return SeekOffsets(json.dumps({"offsets": entries}, separators=(",", ":")), at_end=len(found.at_end))

    async def _offsets_configmap(self, namespace: str, name: str, key: str) -> OffsetsConfigMap:
        """The ConfigMap with ``key`` as document text, whichever form (plain, gzip, shards) holds it."""
        cm = await self.kube.get_configmap(namespace, name)
        if cm is None:
            return OffsetsConfigMap(name, False)
        try:
            stored = await self.store.read_from(namespace, cm, key)
        except OffsetsKeyMissing:
            return OffsetsConfigMap(name, True, cm.resource_version, {**cm.data, **dict.fromkeys(cm.binary_data, "")})
        except OffsetsCorrupt as error:
            reason = "DocumentTooLarge" if isinstance(error, OffsetsTooLarge) else "InvalidOffsets"
            return OffsetsConfigMap(
                name, True, cm.resource_version, dict(cm.data), error=str(error), error_reason=reason
            )
        try:
            text = stored.document.decode()
        except UnicodeDecodeError as error:
            return OffsetsConfigMap(name, True, cm.resource_version, {}, error=f"key {key} is not UTF-8: {error}")
        return OffsetsConfigMap(name, True, cm.resource_version, {**cm.data, key: text})

    async def _restore_source(
        self, target: ConnectorTarget, namespace: str, client: ConnectClient, wanted: str | None
    ) -> RestoreSource:
        """The backup to restore (named by restore-from, else the newest) and the current offsets."""
        selector = f"{API_GROUP}/connector-hash={_connector_hash(target.name)},{NOT_A_SHARD}"
        backups = [
            (name, annotations)
            for name, annotations in await self.kube.list_configmaps(namespace, selector)
            if annotations.get(f"{API_GROUP}/connector") == target.name
        ]
        if wanted:
            backups = [item for item in backups if item[0] == wanted]
        backups.sort(key=lambda item: (item[1].get(f"{API_GROUP}/time", ""), item[0]), reverse=True)
        if not backups:
            return RestoreSource(None)
        chosen = await self.kube.get_configmap(namespace, backups[0][0])
        if chosen is None:
            return RestoreSource(None)
        try:
            backup_json = (await self.store.read_from(namespace, chosen, "offsets.json")).document.decode()
        except (OffsetsStoreError, UnicodeDecodeError) as error:
            backup_json = f"unreadable: {error}"  # the planner reports it as an unreadable backup
        # The text, not the parsed answer: the planner streams it (a million partitions parsed
        # whole would be a gigabyte of dicts).
        current_json = (await client.get_offsets_raw(target.name)).decode()
        return RestoreSource(
            name=chosen.name,
            resource_version=chosen.resource_version,
            backup_json=backup_json,
            current_json=current_json,
        )

    async def run(
        self,
        target: ConnectorTarget,
        body: dict[str, Any],
        plural: str,
        client: ConnectClient,
        info: ServerInfo,
        now: datetime,
        before_offsets: BeforeOffsets | None = None,
        checkpoint: Checkpoint | None = None,
        kafka: KafkaConfig | None = None,
    ) -> TargetResult:
        namespace = body["metadata"]["namespace"]
        try:
            observed = await self.observe(target, namespace, client, info, now, kafka)
        except ConnectError as error:
            observed = Observed(now, f"Connect unreachable: {error}", False, None, None)
            plan = plan_target(target, observed)
            return TargetResult(plan, observed, list(plan.conditions), transient_error=str(error))
        metrics.set_connector_state(
            str(body.get("kind", "")),
            namespace,
            body["metadata"]["name"],
            target.name,
            observed.status.state if observed.status else "ABSENT",
        )
        # In a worker thread: planning validates the tenant's documents (a million entries take
        # seconds of pure Python). The GIL is handed back every few milliseconds, so the event
        # loop (other tenants' reconciles, the health endpoint) keeps running meanwhile.
        plan = await asyncio.to_thread(plan_target, target, observed)
        observed = observed.without_documents()  # the plan's actions carry the texts they send
        result = TargetResult(plan, observed, list(plan.conditions))
        step = _Steps(result, checkpoint)
        try:
            await self._execute(target, body, plural, client, result, now, step, before_offsets)
        except ConnectError as error:
            result.transient_error = str(error)
            result.conditions = [c for c in result.conditions if c.type != "Ready"]
            result.conditions.insert(0, ConditionSpec("Ready", "False", "ConnectError", str(error)[:1024]))
        if observed.status is not None:
            result.status["connectorStatus"] = observed.status.for_status()
        if plan.auto_restart is not None:
            result.status["autoRestart"] = plan.auto_restart.model_dump(by_alias=True, exclude_none=True)
        if plan.applied_offsets is not None:
            result.status["appliedOffsets"] = plan.applied_offsets.model_dump(by_alias=True, exclude_none=True)
        return result

    async def _execute(
        self,
        target: ConnectorTarget,
        body: dict[str, Any],
        plural: str,
        client: ConnectClient,
        result: TargetResult,
        now: datetime,
        step: _Steps,
        before_offsets: BeforeOffsets | None = None,
    ) -> None:
        plan = result.plan
        kind = str(body.get("kind", ""))
        if plan.offsets_refusal is not None:
            reason, message, permanent = plan.offsets_refusal
            if permanent and reason != "Unchanged":
                operation = target.annotations.get(ANNOTATION_OFFSETS, "alter")
                metrics.OPERATIONS.labels(kind, operation, "Failed").inc()
                result.status["lastOffsetsOperation"] = _op_status(operation, "Failed", message, plan, now, reason)
                self._handled(target, result, plan.request_id, dry_run=_is_dry_run(target))
                await self.event(body, "Warning", "OffsetsOperationFailed", f"{target.name}: {message}")
        for action in plan.actions:
            if action.kind in OFFSETS_OPS and action.pending is not None:
                await self._staged_change(target, body, client, result, now, step, action, before_offsets)
            elif action.kind in OFFSETS_OPS:
                if not await self._direct_change(target, body, client, result, now, action, before_offsets, step):
                    return
            elif action.kind == "dry_run_offsets":
                await self._dry_run(target, body, client, result, now, action)
            elif action.kind == "begin_offsets_change":
                assert action.pending is not None
                # The intent is in status before the connector is touched: a restarted operator
                # finds it and finishes the change (or resumes the connector), never forgets it.
                await step.pending(action.pending)
                fault_point("after-intent")
                await self.event(
                    body,
                    "Normal",
                    "OffsetsChangeStarted",
                    f"{target.name}: stopping the connector for {action.pending.operation}",
                )
            elif action.kind == "update_pending":
                assert action.pending is not None
                await step.pending(action.pending)
            elif action.kind == "finish_offsets_change":
                await self._finish_change(target, body, result, now, step, action)
            elif action.kind in ("create_with_initial_offsets", "apply_initial_offsets"):
                await self._initial_offsets(target, body, client, result, now, step, action)
            elif action.kind == "remove_annotation":
                # Done after the status write (finish_requests): once the annotation is gone, the
                # status already tells how the request ended.
                result.removals.append(action)
            else:
                await self._lifecycle_action(target, body, client, action)
                if action.kind == "stop" and plan.hold_stopped:
                    fault_point("after-stop")

    async def _direct_change(
        self,
        target: ConnectorTarget,
        body: dict[str, Any],
        client: ConnectClient,
        result: TargetResult,
        now: datetime,
        action: Action,
        before_offsets: BeforeOffsets | None,
        step: _Steps,
    ) -> bool:
        """list, or a change on a connector that is already STOPPED. False: it failed permanently."""
        plan = result.plan
        operation = OFFSETS_OPS[action.kind]
        kind = str(body.get("kind", ""))
        started = time.monotonic()
        backup: str | None = None
        progress = target.chunk_progress or {}
        applied = False
        try:
            if action.kind != "list_offsets":
                if progress.get("request") == plan.offsets_request and progress.get("backup"):
                    # This request was cut short after its backup (the operator died, or Connect
                    # failed mid-way): that backup holds the offsets from before it; a new one
                    # would hold changed or half-changed offsets.
                    backup = str(progress["backup"])
                    # The connector is STOPPED, so its offsets cannot move on their own: a change
                    # already in Connect is not sent again. Chunked alters resume from their
                    # progress instead.
                    applied = "fingerprint" not in progress and await self._already_applied_small(
                        target, client, action
                    )
                else:
                    # Nothing is lost: the current offsets are saved first, or nothing changes.
                    backup = await self._backup(target, body, client, operation, now)
                    # Recorded before the change, so a restart from here on reuses this backup.
                    await step.fields({"offsetsProgress": {"request": plan.offsets_request, "backup": backup}})
                    fault_point("after-backup")
            if applied:
                message = f"{operation}: already in Connect (applied before the operator restarted); not sent again"
            else:
                prefix = await before_offsets(action) if before_offsets is not None else ""
                request = {"request": plan.offsets_request, "backup": backup}
                message = prefix + await self._offsets_action(target, body, client, action, step, request)
                if backup is not None:
                    fault_point("after-patch")
        except ConnectHTTPError as error:
            if error.retryable:
                raise
            text = f"{operation} failed: Connect answered {error.status_code}: {error.message}"
            metrics.OPERATIONS.labels(kind, operation, "Failed").inc()
            if backup is not None and error.chunk_failure is None:
                result.status["offsetsProgress"] = None  # a chunked failure keeps its report of applied chunks
            self._failed(result, operation, "ConnectRejected", text, now)
            self._handled(target, result, plan.request_id)
            await self.event(body, "Warning", "OffsetsOperationFailed", f"{target.name}: {text}")
            return False
        except OffsetsRequestInvalid as error:
            if backup is not None:
                result.status["offsetsProgress"] = None
            text = f"{operation} refused: {error}"
            metrics.OPERATIONS.labels(kind, operation, "Failed").inc()
            self._failed(result, operation, error.reason, text, now)
            self._handled(target, result, plan.request_id)
            await self.event(body, "Warning", "OffsetsOperationFailed", f"{target.name}: {text}")
            return False
        metrics.OPERATION_SECONDS.labels(kind, operation).observe(time.monotonic() - started)
        metrics.OPERATIONS.labels(kind, operation, "Succeeded").inc()
        if backup is not None:
            result.status["offsetsProgress"] = None  # done: nothing left to resume
        result.status["lastOffsetsOperation"] = _op_status(operation, "Succeeded", message, plan, now, backup=backup)
        self._handled(target, result, plan.request_id)
        await self.event(body, "Normal", "OffsetsOperationSucceeded", f"{target.name}: {message}")
        return True

    async def _staged_change(
        self,
        target: ConnectorTarget,
        body: dict[str, Any],
        client: ConnectClient,
        result: TargetResult,
        now: datetime,
        step: _Steps,
        action: Action,
        before_offsets: BeforeOffsets | None,
    ) -> None:
        """The change step of stop -> change -> resume, restartable at every point.

        Order: backup, record the backup in status, change, record the result in status. A restart
        after the backup was recorded first checks whether the change is already in Connect (the
        connector is STOPPED, so its offsets cannot move on their own) and then does not send it again.
        """
        assert action.pending is not None
        pending = action.pending
        operation = OFFSETS_OPS[action.kind]
        started = time.monotonic()
        try:
            if pending.backup is None:
                backup = await self._backup(target, body, client, operation, now)
                pending = pending.model_copy(update={"step": "Changing", "backup": backup})
                await step.pending(pending)
                fault_point("after-backup")
                applied = False
            else:
                applied = await self._already_applied(target, client, action)
            if applied:
                message = f"{operation}: already in Connect (applied before the operator restarted); not sent again"
            else:
                prefix = await before_offsets(action) if before_offsets is not None else ""
                request = {"request": pending.request, "backup": pending.backup}
                message = prefix + await self._offsets_action(target, body, client, action, step, request)
                fault_point("after-patch")
            done = pending.model_copy(update={"step": "Resuming", "result": "Succeeded", "message": message})
        except ConnectHTTPError as error:
            if error.retryable:
                raise
            text = f"{operation} failed: Connect answered {error.status_code}: {error.message}"
            done = pending.model_copy(
                update={"step": "Resuming", "result": "Failed", "reason": "ConnectRejected", "message": text}
            )
        except OffsetsRequestInvalid as error:
            done = pending.model_copy(
                update={
                    "step": "Resuming",
                    "result": "Failed",
                    "reason": error.reason,
                    "message": f"{operation} refused: {error}",
                }
            )
        metrics.OPERATION_SECONDS.labels(str(body.get("kind", "")), operation).observe(time.monotonic() - started)
        await step.pending(done)

    async def _already_applied_small(self, target: ConnectorTarget, client: ConnectClient, action: Action) -> bool:
        """``_already_applied`` when both documents fit one PATCH; False (send it again: a STOPPED
        connector ends in the same offsets) when deciding would parse a large document whole."""
        limit = patch_limits().max_bytes
        if action.offsets_json is not None and len(action.offsets_json) > limit:
            return False
        raw = await client.get_offsets_raw(target.name)
        if len(raw) > limit:
            return False
        current = parse_offsets_obj(json.loads(raw), allow_empty=True)
        del raw
        return self._matches(current, action)

    async def _already_applied(self, target: ConnectorTarget, client: ConnectClient, action: Action) -> bool:
        current = parse_offsets_obj(await client.get_offsets(target.name), allow_empty=True)
        return self._matches(current, action)

    @staticmethod
    def _matches(current: OffsetsDocument, action: Action) -> bool:
        """Connect already holds what ``action`` would write (null offsets count as absent)."""
        if action.kind == "reset_offsets":
            return all(entry.offset is None for entry in current.entries)
        assert action.offsets_json is not None
        return not diff_offsets(current, parse_offsets_document(action.offsets_json)).has_changes

    async def _finish_change(
        self,
        target: ConnectorTarget,
        body: dict[str, Any],
        result: TargetResult,
        now: datetime,
        step: _Steps,
        action: Action,
    ) -> None:
        """The connector is back in spec.state: publish the outcome and forget the pending record."""
        pending = action.pending
        assert pending is not None and pending.result is not None
        kind = str(body.get("kind", ""))
        operation = pending.operation
        metrics.OPERATIONS.labels(kind, operation, pending.result).inc()
        message = pending.message + ("" if pending.result == "Failed" else f"; connector back to {target.state.value}")
        result.status["lastOffsetsOperation"] = OffsetsOperationStatus(
            operation=operation,
            result=pending.result,
            reason=pending.reason,
            backup=pending.backup,
            time=iso(now),
            message=truncate(message, 2048),
            request=pending.request,
            request_id=pending.request_id,
        ).model_dump(by_alias=True, exclude_none=True)
        result.status["pendingOffsetsOperation"] = None
        if pending.source == "applyOnChange" and target.alter_configmap and pending.content_hash:
            result.status["appliedOffsets"] = AppliedOffsetsStatus(
                config_map=target.alter_configmap,
                content_hash=pending.content_hash,
                time=iso(now),
                result=pending.result,
            ).model_dump(by_alias=True)
        if pending.result == "Failed":
            result.conditions.append(
                ConditionSpec("OffsetsOperationFailed", "True", pending.reason or "RequestFailed", message)
            )
        self._handled(target, result, pending.request_id)
        event_type, reason = (
            ("Normal", "OffsetsOperationSucceeded")
            if pending.result == "Succeeded"
            else ("Warning", "OffsetsOperationFailed")
        )
        await self.event(body, event_type, reason, f"{target.name}: {message}")

    async def _dry_run(
        self,
        target: ConnectorTarget,
        body: dict[str, Any],
        client: ConnectClient,
        result: TargetResult,
        now: datetime,
        action: Action,
    ) -> None:
        """Compute what the change would do, publish it, change nothing."""
        operation = action.operation or "alter"
        wanted = action.offsets_json

        def compute(raw: bytes) -> OffsetsDiff:  # parsing and diffing large documents: off the event loop
            current = parse_offsets_obj(json.loads(raw), allow_empty=True)
            return reset_diff(current) if wanted is None else diff_offsets(current, parse_offsets_document(wanted))

        diff = await asyncio.to_thread(compute, await client.get_offsets_raw(target.name))
        document = {
            "operation": operation,
            "connector": target.name,
            "time": iso(now),
            "summary": diff.summary(),
            **diff.to_json_obj(),
        }
        key = dry_run_key(target.configmap_key)
        where = (
            f"diff in ConfigMap {action.configmap} key {key}"
            if action.configmap
            else f"set {target.spec_path}.listOffsets.toConfigMap to get the full diff in a ConfigMap"
        )
        if action.configmap:
            try:
                await self.kube.write_configmap_key(
                    body["metadata"]["namespace"],
                    action.configmap,
                    key,
                    json.dumps(document, indent=2, ensure_ascii=False) + "\n",
                    labels=_labels(body),
                    owner=owner_reference(body),
                )
            except KubernetesRejected as error:
                where = f"the diff could not be written: {error}"
        message = f"{operation} dry run: {diff.summary()}; nothing was changed; {where}"
        result.status["lastOffsetsOperation"] = _op_status(
            operation, "Succeeded", message, result.plan, now, dry_run=True
        )
        self._handled(target, result, result.plan.request_id, dry_run=True)
        await self.event(body, "Normal", "OffsetsDryRun", f"{target.name}: {message}")

    async def _initial_offsets(
        self,
        target: ConnectorTarget,
        body: dict[str, Any],
        client: ConnectClient,
        result: TargetResult,
        now: datetime,
        step: _Steps,
        action: Action,
    ) -> None:
        """Create STOPPED, wipe leftovers of an earlier same-named connector, PATCH, record.

        Any failure deletes the half-created connector and names the failed step; transient
        errors propagate, and the recorded ``Creating`` step makes the next pass finish the job.
        """
        name = target.name
        assert action.configmap is not None
        record = {"configMap": action.configmap, "time": iso(now)}
        current_step = "validate"
        created = action.kind == "apply_initial_offsets"
        try:
            if action.kind == "create_with_initial_offsets":
                assert action.config is not None
                problems = await client.validate_config(action.config)
                if problems:
                    raise OffsetsRequestInvalid("InvalidConfig", "Connect rejects the config: " + "; ".join(problems))
                await step.fields({"initialOffsets": {**record, "step": "Creating"}})
                current_step = "create"
                await client.create_connector(name, action.config, initial_state="STOPPED")
                created = True
                fault_point("initial-after-create")
            if action.offsets_json is None:
                raise OffsetsRequestInvalid("InvalidOffsets", action.operation or "initial offsets invalid")
            requested = parse_offsets_document(action.offsets_json)
            current_step = "wait-for-stopped"
            await self._wait_stopped(client, name)
            current_step = "wipe"
            current = parse_offsets_obj(await client.get_offsets(name), allow_empty=True)
            wanted = {partition_key(e) for e in requested.entries if e.offset is not None}
            exact = {partition_key(e) for e in current.entries} == wanted and not diff_offsets(
                current, requested
            ).has_changes
            if exact:
                message = "initial offsets already in place (applied before the operator restarted)"
            else:
                wiped = ""
                if len(current):
                    await self._check_leftovers_owner(body, name, len(current))
                    await client.reset_offsets(name)
                    wiped = f"removed {len(current)} offset(s) left by an earlier connector named {name}; "
                current_step = "patch"
                answer = await client.alter_offsets(name, requested.to_json_obj())
                fault_point("initial-after-patch")
                message = (
                    f"{wiped}applied {len(requested)} initial offset(s) from ConfigMap {action.configmap}: {answer}"
                )
        except (ConnectHTTPError, OffsetsRequestInvalid, TimeoutError) as error:
            if isinstance(error, ConnectHTTPError) and _transient_for_initial(error):
                raise
            text = (
                f"Connect answered {error.status_code}: {error.message}"
                if isinstance(error, ConnectHTTPError)
                else str(error)
            )
            cleanup = ""
            if created:
                try:
                    await client.delete_connector(name)
                    cleanup = "; the half-created connector was deleted"
                except ConnectError as delete_error:
                    cleanup = f"; deleting the half-created connector failed: {delete_error}"
            full = f"initial offsets failed at step {current_step}: {text}{cleanup}"
            await step.fields(
                {"initialOffsets": {**record, "step": "Failed", "request": action.request, "message": full}}
            )
            result.conditions = [c for c in result.conditions if c.type != "Ready"]
            result.conditions.insert(0, ConditionSpec("Ready", "False", "InitialOffsetsFailed", full[:1024]))
            await self.event(body, "Warning", "InitialOffsetsFailed", f"{name}: {full}")
            return
        await step.fields({"initialOffsets": {**record, "step": "Applied", "message": message}})
        # Recorded once the leftovers were judged: before, this very record would be the newest.
        await self._record_owner(body, name)
        await self.event(body, "Normal", "InitialOffsetsApplied", f"{name}: {message}")
        result.plan.requeue(1.0)  # now move it to spec.state

    async def _record_owner(self, body: dict[str, Any], name: str) -> None:
        """Note in the resource's namespace that it is now the last owner of connector ``name``.

        Connect keeps a deleted connector's offsets but not who owned them; this record is what
        lets ``initialOffsets`` tell leftovers of this namespace from another tenant's. Best
        effort: without it, a later initialOffsets of another namespace would wipe leftovers of
        this one, so a failure is reported as a Warning Event, not hidden.
        """
        meta = body["metadata"]
        namespace, digest = meta["namespace"], _owner_record_hash(name)
        record_name = f"connect-offsets-owner-{digest}"
        annotations = {
            f"{API_GROUP}/connector": name,
            f"{API_GROUP}/owner": f"{namespace}/{meta['name']}",
            f"{API_GROUP}/time": datetime.now(UTC).isoformat(),
        }
        record = {
            "metadata": {
                "name": record_name,
                "labels": {"app.kubernetes.io/managed-by": "connect-offsets-operator", LAST_OWNER_LABEL: digest},
                "annotations": annotations,
            }
        }
        try:
            try:
                await self.kube.create_configmap(namespace, record)
            except KubernetesUnavailable as error:
                if error.status != 409:
                    raise
                await self.kube.patch_configmap(namespace, record_name, {"metadata": {"annotations": annotations}})
        except KubernetesError as error:
            await self.event(
                body,
                "Warning",
                "OwnerRecordNotWritten",
                f"{name}: could not record this resource as its owner: {error}",
            )

    async def _check_leftovers_owner(self, body: dict[str, Any], name: str, count: int) -> None:
        """Refuse to wipe leftover offsets whose last owner (see ``_record_owner``) was in another namespace.

        The newest record of this connector name in the watched namespaces names the last
        resource that created it. Leftovers without any record (a hand-made connector) are
        wiped as before; leftovers of this namespace too.
        """
        namespace, digest = body["metadata"]["namespace"], _owner_record_hash(name)
        selector = f"{LAST_OWNER_LABEL}={digest}"
        try:
            if settings.WATCHED_NAMESPACES is None:
                found = await self.kube.list_configmap_metadata(None, selector)
            else:
                found = [
                    m
                    for ns in settings.WATCHED_NAMESPACES
                    for m in await self.kube.list_configmap_metadata(ns, selector)
                ]
        except KubernetesRejected as error:
            raise OffsetsRequestInvalid(
                "LeftoverOffsetsOwnerUnknown",
                f"Connect holds {count} offset(s) of an earlier connector {name}; who owned it could not be "
                f"checked ({error}), so they were not wiped",
            ) from error
        records = [
            (m.annotations.get(f"{API_GROUP}/owner", ""), m.annotations.get(f"{API_GROUP}/time", ""))
            for m in found
            if m.annotations.get(f"{API_GROUP}/connector") == name  # not another name of the same hash
        ]
        owner = leftovers_owned_elsewhere(records, namespace)
        if owner is not None:
            raise OffsetsRequestInvalid(
                "LeftoverOffsetsOwnedElsewhere",
                f"Connect holds {count} offset(s) left by connector {name} of {owner} (namespace "
                f"{owner.partition('/')[0]}); initialOffsets wipes only leftovers of this namespace. Nothing "
                "was changed: rename this resource, or have that namespace's team delete those offsets",
            )

    @staticmethod
    async def _wait_stopped(client: ConnectClient, name: str, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            status = await client.get_connector_status(name)
            if status is not None and status.is_stopped:
                return
            if time.monotonic() > deadline:
                state = status.state if status else "absent"
                raise TimeoutError(f"connector still {state} after {timeout:.0f}s; expected STOPPED with no tasks")
            await asyncio.sleep(0.5)

    def _handled(
        self, target: ConnectorTarget, result: TargetResult, request_id: str | None, *, dry_run: bool = False
    ) -> None:
        """Remember a finished request's id, so the same id re-applied later is a no-op."""
        if request_id is None:
            return
        key = f"{request_id}/dry-run" if dry_run else request_id
        previous = [i for i in target.handled_request_ids if i != key]
        result.status["handledRequestIds"] = [*previous, key][-HANDLED_REQUEST_IDS:]

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

    @staticmethod
    def _failed(result: TargetResult, operation: str, reason: str, text: str, now: datetime) -> None:
        result.status["lastOffsetsOperation"] = _op_status(operation, "Failed", text, result.plan, now, reason)
        result.conditions.append(ConditionSpec("OffsetsOperationFailed", "True", reason, text))

    async def _backup(
        self, target: ConnectorTarget, body: dict[str, Any], client: ConnectClient, operation: str, now: datetime
    ) -> str:
        """Save the connector's current offsets in a new ConfigMap; keep the newest BACKUP_RETENTION."""
        meta = body["metadata"]
        namespace = meta["namespace"]
        connector_hash = _connector_hash(target.name)
        stamp = now.strftime("%Y%m%dt%H%M%Sz")
        # The random suffix keeps two backups within one second apart.
        name = f"{meta['name'][:200]}-backup-{connector_hash}-{stamp}-{secrets.token_hex(2)}"
        created = datetime.now(UTC).isoformat()
        offsets = await client.get_offsets_raw(target.name)
        backup_of = label_value(meta["name"])
        selector = f"{API_GROUP}/backup-of={backup_of},{API_GROUP}/connector-hash={connector_hash},{NOT_A_SHARD}"
        try:
            await self.store.write(
                namespace,
                name,
                "offsets.json",
                offsets,
                labels={
                    **_labels(body),
                    f"{API_GROUP}/backup-of": backup_of,
                    f"{API_GROUP}/connector-hash": connector_hash,
                },
                annotations={
                    f"{API_GROUP}/connector": target.name,
                    f"{API_GROUP}/operation": operation,
                    f"{API_GROUP}/time": created,
                },
                owner_references=[owner_reference(body)],
            )
        except KubernetesRejected as error:
            # A quota, a policy or missing RBAC: retrying changes nothing, and without a backup
            # the change must not run (nothing is lost). The request waits for a fix.
            raise OffsetsRequestInvalid(
                "BackupFailed",
                f"the backup ConfigMap {name} could not be written, so nothing was changed: {error}; "
                "fix the cause (ResourceQuota on ConfigMaps, an admission policy, the operator's RBAC), "
                f"then ask again with a new {API_GROUP}/request-id",
            ) from error
        del offsets
        await self._prune_backups(body, target, selector)
        return name

    async def _prune_backups(self, body: dict[str, Any], target: ConnectorTarget, selector: str) -> None:
        """Keep the newest ``backup_retention()`` backups of this connector; delete the older ones.

        A refusal (no RBAC ``delete``, a webhook) must neither block nor repeat the change this
        backup protects: the change goes on, the backups that stay are named in a Warning Event,
        and the next change prunes again.
        """
        namespace = body["metadata"]["namespace"]
        left: list[str] = []
        error_text = ""
        try:
            backups = await self.kube.list_configmaps(namespace, selector)
            backups.sort(key=lambda item: (item[1].get(f"{API_GROUP}/time", ""), item[0]), reverse=True)
            for old, _ in backups[backup_retention() :]:
                try:
                    await self.kube.delete_configmap(namespace, old)
                except KubernetesError as error:
                    left.append(old)
                    error_text = error_text or str(error)
        except KubernetesError as error:
            error_text = f"listing the backups failed: {error}"
        if error_text:
            kept = f" {len(left)} backup(s) beyond the retention of {backup_retention()} kept" if left else ""
            await self.cleanup_failed(body, f"{target.name}: old backups not pruned;{kept}: {error_text}")

    async def cleanup_failed(self, body: dict[str, Any], message: str) -> None:
        """Report a clean-up that failed after its change succeeded: a Warning Event (best effort), never an error."""
        await self.event(body, "Warning", "CleanupFailed", truncate(message, 1024))

    async def _chunked_alter(
        self,
        target: ConnectorTarget,
        body: dict[str, Any],
        client: ConnectClient,
        offsets_json: str,
        checkpoint: _Steps | None,
        request: dict[str, Any] | None = None,
    ) -> str:
        """PATCH in bounded chunks (Connect answers one PATCH within 90 s); progress goes to status
        after every chunk, so a retry after a failure or a restart continues where it stopped.

        ``request`` (the request fingerprint and its backup) is kept with the progress: a retry of
        the same request reuses that backup instead of backing up a half-changed connector.
        """
        request = request or {}
        previous = target.chunk_progress or {}
        same = previous.get("request") == request.get("request")
        resume = (
            ChunkResume(str(previous["fingerprint"]), int(previous["appliedChunks"]))
            if same and "fingerprint" in previous and "appliedChunks" in previous
            else None
        )
        limits = patch_limits()
        # The text is parsed as it is encoded, a slice at a time: no bytes copy of it.
        chunk_plan = await asyncio.to_thread(plan_chunks, document_entries(offsets_json), limits)
        chunked = len(chunk_plan) > 1
        if chunked and checkpoint is not None and resume is None:
            # Before the first chunk: from here on a restart must resume, not back up again.
            await checkpoint.fields({"offsetsProgress": {**request, "fingerprint": chunk_plan.fingerprint}})

        async def done(progress: ChunkProgress) -> None:
            if not chunked:
                return
            if checkpoint is not None:
                await checkpoint.fields({"offsetsProgress": {**request, **progress.to_status()}})
            if progress.applied < progress.chunks:
                fault_point("mid-patch")

        try:
            result = await client.alter_offsets_chunked(
                target.name, offsets_json, limits=limits, plan=chunk_plan, resume=resume, on_chunk_done=done
            )
        except ConnectError as error:
            if checkpoint is not None and chunked and error.chunk_failure is not None:
                await checkpoint.fields({"offsetsProgress": {**request, **error.chunk_failure.to_status()}})
            raise
        if chunked and checkpoint is not None:
            await checkpoint.fields({"offsetsProgress": None})
        if result.chunks == 1:
            return result.message
        resumed = f", resumed at chunk {result.started_at + 1}" if result.started_at else ""
        return f"{result.message} ({result.partitions} partitions in {result.chunks} PATCH requests{resumed})"

    async def _offsets_action(
        self,
        target: ConnectorTarget,
        body: dict[str, Any],
        client: ConnectClient,
        action: Action,
        checkpoint: _Steps | None = None,
        request: dict[str, Any] | None = None,
    ) -> str:
        if action.kind == "list_offsets":
            assert action.configmap is not None
            offsets = await client.get_offsets_raw(target.name)
            try:
                written = await self.store.write(
                    body["metadata"]["namespace"],
                    action.configmap,
                    target.configmap_key,
                    offsets,
                    # Watched (a user editing the listed document for an alter is noticed at once).
                    labels={**_labels(body), WATCH_LABEL: "true"},
                    owner_references=[owner_reference(body)],
                    claim_only_if=f"{API_GROUP}/kind",  # a ConfigMap we did not create stays its owner's
                )
            except (KubernetesRejected, OffsetsStoreError) as error:
                raise OffsetsRequestInvalid("ConfigMapWriteFailed", str(error)) from error
            if written.left_shards:
                await self.cleanup_failed(
                    body,
                    f"{target.name}: {len(written.left_shards)} stale shard ConfigMap(s) of {action.configmap} "
                    f"not deleted (the next list removes them): {written.cleanup_error}",
                )
            count = "" if written.partitions is None else f"{written.partitions} partition offset(s) "
            return f"list: wrote {count}to {written.describe()}"
        if action.kind in ("alter_offsets", "restore_offsets"):
            assert action.offsets_json is not None
            message = await self._chunked_alter(target, body, client, action.offsets_json, checkpoint, request)
            if action.kind == "restore_offsets":
                return f"restore from {action.configmap}: {message}"
            return f"alter: {message}"
        message = await client.reset_offsets(target.name)
        return f"reset: {message}"

    async def _lifecycle_action(
        self, target: ConnectorTarget, body: dict[str, Any], client: ConnectClient, action: Action
    ) -> None:
        name = target.name
        if action.kind == "create":
            assert action.config is not None
            await client.create_connector(name, action.config, initial_state=action.initial_state)
            if action.initial_state is None and target.state.value != "running":
                # Workers before 3.7 have no initial_state: create, then move to the desired state.
                if target.state.value == "stopped":
                    await client.stop_connector(name)
                else:
                    await client.pause_connector(name)
            await self.event(body, "Normal", "ConnectorCreated", f"Created connector {name} in Connect")
            await self._record_owner(body, name)
        elif action.kind == "update_config":
            assert action.config is not None
            await client.put_connector_config(name, action.config)
            await self.event(body, "Normal", "ConnectorConfigUpdated", f"Updated the config of connector {name}")
        elif action.kind == "stop":
            await client.stop_connector(name)
        elif action.kind == "pause":
            if target.pending is not None:
                fault_point("before-resume")
            await client.pause_connector(name)
        elif action.kind == "resume":
            if target.pending is not None:
                fault_point("before-resume")
            await client.resume_connector(name)
        elif action.kind == "restart":
            await client.restart_connector(name, include_tasks=action.include_tasks, only_failed=action.only_failed)
            reason = "ConnectorAutoRestarted" if action.automatic else "ConnectorRestarted"
            if action.automatic:
                metrics.AUTO_RESTARTS.labels(str(body.get("kind", ""))).inc()
            await self.event(
                body,
                "Normal",
                reason,
                f"Restarted connector {name} (includeTasks={action.include_tasks}, onlyFailed={action.only_failed})",
            )
        elif action.kind == "restart_task":
            assert action.task_id is not None
            await client.restart_task(name, action.task_id)
            await self.event(body, "Normal", "TaskRestarted", f"Restarted task {action.task_id} of {name}")

    async def event(self, body: dict[str, Any], event_type: str, reason: str, message: str) -> None:
        log.info("%s/%s %s: %s", body["metadata"]["namespace"], body["metadata"]["name"], reason, message)
        await self.kube.post_event(involved=body, event_type=event_type, reason=reason, message=message)


def _op_status(
    operation: str,
    result: Literal["Succeeded", "Failed"],
    message: str,
    plan: Plan,
    now: datetime,
    reason: str = "",
    backup: str | None = None,
    *,
    dry_run: bool = False,
) -> dict[str, Any]:
    return OffsetsOperationStatus(
        operation=operation,
        result=result,
        reason=reason,
        backup=backup,
        time=iso(now),
        message=truncate(message, 2048),
        request=plan.offsets_request,
        request_id=plan.request_id,
        dry_run=True if dry_run else None,
    ).model_dump(by_alias=True, exclude_none=True)


def _labels(body: dict[str, Any]) -> dict[str, str]:
    meta = body["metadata"]
    return {
        "app.kubernetes.io/managed-by": "connect-offsets-operator",
        f"{API_GROUP}/kind": str(body.get("kind", "")),
        f"{API_GROUP}/name": label_value(meta["name"]),
        CLUSTER_LABEL: (meta.get("labels") or {}).get(CLUSTER_LABEL, ""),
    }


async def delete_owned(
    clusters: ClusterRegistry,
    runner: TargetRunner,
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
        await runner.event(body, "Warning", "ConnectorNotDeleted", f"Could not delete in Connect: {error}")
        return f"could not delete in Connect: {error}"
    except (ConnectError, ClusterUnreachable) as error:
        if give_up:
            await runner.event(body, "Warning", "ConnectorNotDeleted", f"Gave up deleting in Connect: {error}")
            return f"gave up: {error}"
        raise ConnectUnavailable(str(error)) from error


class OffsetsRequestInvalid(UserError):
    """An offsets request that cannot succeed as given (bad ConfigMap content, ConfigMap write refused)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
