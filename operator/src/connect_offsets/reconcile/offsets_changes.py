"""The offsets requests: list, alter, reset and restore, with a backup before every change, chunked
PATCHes that resume where they stopped, the change step of stop -> change -> resume, dry runs, and
the report of a request the planner refused.

Why separate: this is where offsets are changed, so the order that makes it safe lives in one
place — backup, record the backup, check "already applied", change, record — for both a direct
change (connector already STOPPED) and a staged one. The decisions that only look at data (what
status says, whether an earlier try already applied it) are in ``outcomes``.
"""

from __future__ import annotations

import asyncio
import json
import time

from connect_offsets import metrics
from connect_offsets.clients.connect import ConnectError, ConnectHTTPError
from connect_offsets.clients.kubernetes import KubernetesRejected
from connect_offsets.clients.offsets_configmaps import OffsetsStoreError
from connect_offsets.faults import fault_point
from connect_offsets.models.crds import AppliedOffsetsStatus, KafkaConnectorStatus, OffsetsProgressStatus
from connect_offsets.offsets import (
    OffsetsDiff,
    diff_offsets,
    parse_offsets_document,
    parse_offsets_obj,
    reset_diff,
)
from connect_offsets.offsets.chunking import ChunkProgress, document_entries, plan_chunks
from connect_offsets.planning import Action, Plan
from connect_offsets.planning.copies import pinned_copy
from connect_offsets.planning.outcomes import (
    OFFSETS_OPS,
    already_applied,
    already_applied_text,
    chunk_in_place,
    chunk_resume,
    chunked_alter_text,
    dry_run_report,
    finished_change,
    is_dry_run,
    op_status,
    progress_of,
    refusal_to_report,
    rejected_text,
    reusable_backup,
)
from connect_offsets.reconcile.backups import backup
from connect_offsets.reconcile.context import OffsetsRequestInvalid, Pass, managed_labels
from connect_offsets.reconcile.settings import patch_limits
from connect_offsets.reconcile.status import owner_reference
from connect_offsets.vocabulary import API_GROUP, WATCH_LABEL, dry_run_key, iso


async def report_refusal(p: Pass, plan: Plan) -> None:
    """A request the planner refused for good ends here: a failed operation, nothing sent to Connect."""
    refusal = refusal_to_report(plan, p.target)
    if refusal is None:
        return
    metrics.OPERATIONS.labels(p.kind, refusal.operation, "Failed").inc()
    p.sink.report(
        KafkaConnectorStatus(
            last_offsets_operation=op_status(refusal.operation, "Failed", refusal.message, plan, p.now, refusal.reason)
        )
    )
    p.sink.handled(p.target, plan.request_id, dry_run=is_dry_run(p.target))
    p.event("Warning", "OffsetsOperationFailed", f"{p.target.name}: {refusal.message}")


async def direct_change(p: Pass, plan: Plan, action: Action) -> bool:
    """list, or a change on a connector that is already STOPPED. False: it failed permanently."""
    operation = OFFSETS_OPS[action.kind]
    started = time.monotonic()
    backup_name: str | None = None
    progress = p.target.chunk_progress
    applied = False
    try:
        if action.kind != "list_offsets":
            backup_name = reusable_backup(progress, plan.offsets_request)
            if backup_name is not None:
                # The connector is STOPPED, so its offsets cannot move on their own: a change
                # already in Connect is not sent again. Chunked alters resume from their
                # progress instead.
                applied = (progress is None or progress.fingerprint is None) and await _already_applied_small(p, action)
            else:
                restoring = action.configmap if action.kind == "restore_offsets" else None
                request = OffsetsProgressStatus(
                    request=plan.offsets_request,
                    request_key=plan.request_key,
                    restore_from=restoring,
                    pinned=pinned_copy(p.target),
                )
                if restoring is not None and p.target.chunk_progress != request:
                    # The backup to restore is pinned before this request writes a backup of its
                    # own, which would be "the newest backup" for a retry that chose again.
                    await p.sink.fields(KafkaConnectorStatus(offsets_progress=request))
                # Nothing is lost: the current offsets are saved first, or nothing changes.
                backup_name = await backup(p, operation, restoring)
                # Recorded before the change, so a restart from here on reuses this backup.
                begun = request.model_copy(update={"backup": backup_name})
                await p.sink.fields(KafkaConnectorStatus(offsets_progress=begun))
                fault_point("after-backup")
        if applied:
            message = already_applied_text(operation)
        else:
            prefix = await p.before_offsets(action) if p.before_offsets is not None else ""
            request = OffsetsProgressStatus(
                request=plan.offsets_request,
                request_key=plan.request_key,
                restore_from=action.configmap if action.kind == "restore_offsets" else None,
                pinned=pinned_copy(p.target),
                backup=backup_name,
            )
            message = prefix + await _offsets_action(p, action, request)
            if backup_name is not None:
                fault_point("after-patch")
    except ConnectHTTPError as error:
        if error.retryable:
            raise
        text = rejected_text(operation, error.status_code, error.message)
        metrics.OPERATIONS.labels(p.kind, operation, "Failed").inc()
        if backup_name is not None and error.chunk_failure is None:
            # A chunked failure keeps its report of applied chunks.
            p.sink.report(KafkaConnectorStatus(offsets_progress=None))
        p.sink.failed(plan, operation, "ConnectRejected", text, p.now)
        p.sink.handled(p.target, plan.request_id)
        p.event("Warning", "OffsetsOperationFailed", f"{p.target.name}: {text}")
        return False
    except OffsetsRequestInvalid as error:
        if backup_name is not None:
            p.sink.report(KafkaConnectorStatus(offsets_progress=None))
        text = f"{operation} refused: {error}"
        metrics.OPERATIONS.labels(p.kind, operation, "Failed").inc()
        p.sink.failed(plan, operation, error.reason, text, p.now)
        p.sink.handled(p.target, plan.request_id)
        p.event("Warning", "OffsetsOperationFailed", f"{p.target.name}: {text}")
        return False
    metrics.OPERATION_SECONDS.labels(p.kind, operation).observe(time.monotonic() - started)
    metrics.OPERATIONS.labels(p.kind, operation, "Succeeded").inc()
    succeeded = op_status(operation, "Succeeded", message, plan, p.now, backup=backup_name)
    if backup_name is not None:  # done: nothing left to resume
        p.sink.report(KafkaConnectorStatus(offsets_progress=None, last_offsets_operation=succeeded))
    else:
        p.sink.report(KafkaConnectorStatus(last_offsets_operation=succeeded))
    if plan.alter_content is not None and p.target.alter_configmap is not None:
        # What applyOnChange would apply is in place now: it must not apply it again.
        in_place = AppliedOffsetsStatus(
            config_map=p.target.alter_configmap, content_hash=plan.alter_content, time=iso(p.now), result="Succeeded"
        )
        p.sink.report(KafkaConnectorStatus(applied_offsets=in_place))
    p.sink.handled(p.target, plan.request_id)
    p.event("Normal", "OffsetsOperationSucceeded", f"{p.target.name}: {message}")
    return True


async def staged_change(p: Pass, action: Action) -> None:
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
            backup_name = await backup(p, operation, pending.restore_from)
            pending = pending.model_copy(update={"step": "Changing", "backup": backup_name})
            await p.sink.pending(pending)
            fault_point("after-backup")
            applied = False
        else:
            current = parse_offsets_obj(await p.client.get_offsets(p.target.name), allow_empty=True)
            applied = already_applied(current, action)
        if applied:
            message = already_applied_text(operation)
        else:
            prefix = await p.before_offsets(action) if p.before_offsets is not None else ""
            request = OffsetsProgressStatus(request=pending.request, backup=pending.backup, pinned=pending.pinned)
            message = prefix + await _offsets_action(p, action, request)
            fault_point("after-patch")
        done = pending.model_copy(update={"step": "Resuming", "result": "Succeeded", "message": message})
    except ConnectHTTPError as error:
        if error.retryable:
            raise
        text = rejected_text(operation, error.status_code, error.message)
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
    metrics.OPERATION_SECONDS.labels(p.kind, operation).observe(time.monotonic() - started)
    # The outcome and the end of a chunked alter's progress in one write (see ``_chunked_alter``).
    await p.sink.fields(KafkaConnectorStatus(pending_offsets_operation=done, offsets_progress=None))


async def _already_applied_small(p: Pass, action: Action) -> bool:
    """``already_applied`` when both documents fit one PATCH; False (send it again: a STOPPED
    connector ends in the same offsets) when deciding would parse a large document whole."""
    limit = patch_limits().max_bytes
    if action.offsets_json is not None and len(action.offsets_json) > limit:
        return False
    raw = await p.client.get_offsets_raw(p.target.name)
    if len(raw) > limit:
        return False
    current = parse_offsets_obj(json.loads(raw), allow_empty=True)
    del raw
    return already_applied(current, action)


async def finish_change(p: Pass, action: Action) -> None:
    """The connector is back in spec.state: publish the outcome and forget the pending record."""
    pending = action.pending
    assert pending is not None and pending.result is not None
    metrics.OPERATIONS.labels(p.kind, pending.operation, pending.result).inc()
    finished = finished_change(pending, p.target, p.now)
    p.sink.report(KafkaConnectorStatus(last_offsets_operation=finished.last_operation, pending_offsets_operation=None))
    if finished.applied_offsets is not None:
        p.sink.report(KafkaConnectorStatus(applied_offsets=finished.applied_offsets))
    if finished.condition is not None:
        p.sink.conditions.append(finished.condition)
    p.sink.handled(p.target, pending.request_id)
    p.event(finished.event_type, finished.event_reason, f"{p.target.name}: {finished.message}")


async def dry_run(p: Pass, plan: Plan, action: Action) -> None:
    """Compute what the change would do, publish it, change nothing."""
    operation = action.operation or "alter"
    wanted = action.offsets_json

    def compute(raw: bytes) -> OffsetsDiff:  # parsing and diffing large documents: off the event loop
        current = parse_offsets_obj(json.loads(raw), allow_empty=True)
        return reset_diff(current) if wanted is None else diff_offsets(current, parse_offsets_document(wanted))

    diff = await asyncio.to_thread(compute, await p.client.get_offsets_raw(p.target.name))
    key = dry_run_key(p.target.configmap_key)
    report = dry_run_report(
        p.target, operation, diff, p.now, action.configmap, key, source=action.source, not_matching=action.not_matching
    )
    where: str | None = None
    if action.configmap:
        try:
            await p.kube.write_configmap_key(
                p.namespace,
                action.configmap,
                key,
                report.text(),
                labels=managed_labels(p.body),
                owner=owner_reference(p.body),
            )
        except KubernetesRejected as error:
            where = f"the diff could not be written: {error}"
    message = report.message(where)
    p.sink.report(
        KafkaConnectorStatus(
            last_offsets_operation=op_status(operation, "Succeeded", message, plan, p.now, dry_run=True)
        )
    )
    p.sink.handled(p.target, plan.request_id, dry_run=True)
    p.event("Normal", "OffsetsDryRun", f"{p.target.name}: {message}")


async def _chunked_alter(p: Pass, offsets_json: str, request: OffsetsProgressStatus) -> str:
    """PATCH in bounded chunks (Connect answers one PATCH within 90 s); progress goes to status
    after every chunk, so a retry after a failure or a restart continues where it stopped.

    ``request`` (the request fingerprint and its backup) is kept with the progress: a retry of
    the same request reuses that backup instead of backing up a half-changed connector.
    """
    resume = chunk_resume(p.target.chunk_progress, request)
    limits = patch_limits()
    # The text is parsed as it is encoded, a slice at a time: no bytes copy of it.
    chunk_plan = await asyncio.to_thread(plan_chunks, document_entries(offsets_json), limits)
    chunked = len(chunk_plan) > 1
    if chunked and resume is None:
        # Before the first chunk: from here on a restart must resume, not back up again.
        await p.sink.fields(KafkaConnectorStatus(offsets_progress=progress_of(request, chunk_plan)))

    async def done(progress: ChunkProgress) -> None:
        if not chunked:
            return
        await p.sink.fields(KafkaConnectorStatus(offsets_progress=progress_of(request, progress)))
        if progress.applied < progress.chunks:
            fault_point("mid-patch")

    async def in_place(chunk_body: bytes) -> bool:
        # Only when resuming: one GET of the offsets instead of a chunk applied twice.
        raw = await p.client.get_offsets_raw(p.target.name)
        return await asyncio.to_thread(
            lambda: chunk_in_place(parse_offsets_obj(json.loads(raw), allow_empty=True), chunk_body)
        )

    try:
        result = await p.client.alter_offsets_chunked(
            p.target.name,
            offsets_json,
            limits=limits,
            plan=chunk_plan,
            resume=resume,
            on_chunk_done=done,
            in_place=in_place,
        )
    except ConnectError as error:
        if chunked and error.chunk_failure is not None:
            await p.sink.fields(KafkaConnectorStatus(offsets_progress=progress_of(request, error.chunk_failure)))
        raise
    # The progress stays until the outcome replaces it in one status write (``direct_change``,
    # ``staged_change``): cleared here, a crash before that write ran the whole request again.
    return chunked_alter_text(result.message, result.partitions, result.chunks, result.started_at)


async def _offsets_action(p: Pass, action: Action, request: OffsetsProgressStatus) -> str:
    """Send one offsets request to Connect (list writes the answer to a ConfigMap); its message."""
    if action.kind == "list_offsets":
        assert action.configmap is not None
        offsets = await p.client.get_offsets_raw(p.target.name)
        try:
            written = await p.store.write(
                p.namespace,
                action.configmap,
                p.target.configmap_key,
                offsets,
                # Watched (a user editing the listed document for an alter is noticed at once).
                labels={**managed_labels(p.body), WATCH_LABEL: "true"},
                owner_references=[owner_reference(p.body)],
                claim_only_if=f"{API_GROUP}/kind",  # a ConfigMap we did not create stays its owner's
            )
        except (KubernetesRejected, OffsetsStoreError) as error:
            raise OffsetsRequestInvalid("ConfigMapWriteFailed", str(error)) from error
        if written.left_shards:
            p.cleanup_failed(
                f"{p.target.name}: {len(written.left_shards)} stale shard ConfigMap(s) of {action.configmap} "
                f"not deleted (the next list removes them): {written.cleanup_error}",
            )
        count = "" if written.partitions is None else f"{written.partitions} partition offset(s) "
        if p.target.apply_on_change and action.configmap == p.target.alter_configmap:
            # Reading never writes: applyOnChange must not take the listing for a user's edit.
            listed = AppliedOffsetsStatus(
                config_map=action.configmap, content_hash=written.document_hash, time=iso(p.now), result="Listed"
            )
            p.sink.report(KafkaConnectorStatus(applied_offsets=listed))
        return f"list: wrote {count}to {written.describe()}"
    if action.kind in ("alter_offsets", "restore_offsets"):
        assert action.offsets_json is not None
        message = await _chunked_alter(p, action.offsets_json, request)
        if action.kind == "restore_offsets":
            return f"restore from {action.configmap}: {message}"
        return f"alter: {message}"
    message = await p.client.reset_offsets(p.target.name)
    return f"reset: {message}"
