"""Pure decisions about a step's result: how it becomes status, messages and Events.

Why in the planner and apart from the reconcile layer's I/O code (``reconcile/offsets_changes``,
``initial``, ``runner``): these branches only look at data — a refusal, a pending record, a diff, the
progress of an earlier try — so they are tested directly, without a Kubernetes or Connect fake, and
the I/O modules stay a sequence of requests. The planner decides what to do before a pass acts;
this module decides what to report once it has. Not re-exported by ``connect_offsets.planning``:
only the reconcile layer reads it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from connect_offsets.models.crds import (
    AppliedOffsetsStatus,
    OffsetsOperationStatus,
    OffsetsProgressStatus,
    PendingOffsetsOperation,
)
from connect_offsets.offsets import (
    OffsetsDiff,
    OffsetsDocument,
    diff_offsets,
    parse_offsets_document,
    partition_key,
)
from connect_offsets.offsets.chunking import ChunkFailure, ChunkPlan, ChunkProgress, ChunkResume
from connect_offsets.planning.plan import HANDLED_REQUEST_IDS, Action, ConditionSpec, Plan
from connect_offsets.planning.targets import ConnectorTarget
from connect_offsets.vocabulary import ANNOTATION_DRY_RUN, ANNOTATION_OFFSETS, iso

#: The plan's offsets actions and the operation each one is (the word in status and metrics).
OFFSETS_OPS = {
    "list_offsets": "list",
    "alter_offsets": "alter",
    "reset_offsets": "reset",
    "restore_offsets": "restore",
}

#: Condition messages stay readable in `kubectl describe` and far below object size limits; a
#: validation report of a huge document (e.g. a 500 KB partition key) is cut, with a marker.
MAX_CONDITION_MESSAGE = 4096

#: lastOffsetsOperation.message is shorter: it is repeated in Events and per MM2 connector.
MAX_OPERATION_MESSAGE = 2048


def truncate(message: str, limit: int = MAX_CONDITION_MESSAGE) -> str:
    """At most ``limit`` characters, keeping the start and the end (validation reports end with
    "... and N more")."""
    if len(message) <= limit:
        return message
    tail = limit // 4
    head = limit - tail - 64
    cut = len(message) - head - tail
    return f"{message[:head]} ... ({cut} characters cut) ... {message[-tail:]}"


def is_dry_run(target: ConnectorTarget) -> bool:
    return target.annotations.get(ANNOTATION_DRY_RUN) == "true"


def op_status(
    operation: str,
    result: Literal["Succeeded", "Failed"],
    message: str,
    plan: Plan,
    now: datetime,
    reason: str = "",
    backup: str | None = None,
    *,
    dry_run: bool = False,
) -> OffsetsOperationStatus:
    """status.lastOffsetsOperation of a request this plan handled."""
    return OffsetsOperationStatus(
        operation=operation,
        result=result,
        reason=reason,
        backup=backup,
        time=iso(now),
        message=truncate(message, MAX_OPERATION_MESSAGE),
        request=plan.offsets_request,
        request_id=plan.request_id,
        request_key=plan.request_key,
        instance=plan.request_instance,
        dry_run=True if dry_run else None,
    )


def handled_request_ids(target: ConnectorTarget, request_id: str, *, dry_run: bool = False) -> list[str]:
    """status.handledRequestIds once ``request_id`` finished: the newest last, bounded, no repeats
    (a dry run of an id is remembered apart from the change with the same id)."""
    key = f"{request_id}/dry-run" if dry_run else request_id
    previous = [i for i in target.handled_request_ids if i != key]
    return [*previous, key][-HANDLED_REQUEST_IDS:]


@dataclass(frozen=True)
class Refusal:
    """A request the planner refused for good: reported as a failed operation, nothing sent."""

    operation: str
    reason: str
    message: str


def refusal_to_report(plan: Plan, target: ConnectorTarget) -> Refusal | None:
    """The refusal to publish as lastOffsetsOperation, if any: a permanent one, except "Unchanged"
    (an applyOnChange document already applied is no failure), and not a passing one (retried)."""
    if plan.offsets_refusal is None:
        return None
    reason, message, permanent = plan.offsets_refusal
    if not permanent or reason == "Unchanged":
        return None
    return Refusal(target.annotations.get(ANNOTATION_OFFSETS, "alter"), reason, message)


def rejected_text(operation: str, status_code: int, message: str) -> str:
    """How a change Connect refused for good is described."""
    return f"{operation} failed: Connect answered {status_code}: {message}"


def already_applied_text(operation: str) -> str:
    return f"{operation}: already in Connect (applied before the operator restarted); not sent again"


def already_applied(current: OffsetsDocument, action: Action) -> bool:
    """Connect already holds what ``action`` would write (null offsets count as absent)."""
    if action.kind == "reset_offsets":
        return all(entry.offset is None for entry in current.entries)
    assert action.offsets_json is not None
    return not diff_offsets(current, parse_offsets_document(action.offsets_json)).has_changes


def chunk_in_place(current: OffsetsDocument, chunk_body: bytes) -> bool:
    """Connect already holds every entry of this PATCH body (null offsets count as absent)."""
    return not diff_offsets(current, parse_offsets_document(chunk_body.decode())).has_changes


def reusable_backup(progress: OffsetsProgressStatus | None, offsets_request: str | None) -> str | None:
    """The backup of an earlier try of this very request, cut short after its backup (the operator
    died, or Connect failed mid-way): it holds the offsets from before the request, while a new one
    would hold changed or half-changed offsets."""
    if progress is not None and progress.request == offsets_request and progress.backup:
        return progress.backup
    return None


def chunk_resume(previous: OffsetsProgressStatus | None, request: OffsetsProgressStatus) -> ChunkResume | None:
    """Where a chunked alter goes on: after the chunks an earlier try of the same request applied."""
    if previous is None or previous.request != request.request:
        return None
    if previous.fingerprint is not None:
        # Recorded before the first chunk, or after the last applied one: either way a chunk
        # after those may be in Connect already, and is checked before it is sent (``in_place``).
        return ChunkResume(previous.fingerprint, previous.applied_chunks or 0)
    return None


def progress_of(
    request: OffsetsProgressStatus, chunks: ChunkPlan | ChunkProgress | ChunkFailure
) -> OffsetsProgressStatus:
    """status.offsetsProgress of a chunked alter: the request and its backup with the fingerprint of
    its chunk plan (before the first chunk), then how many chunks Connect applied (after each one) or
    which one it refused."""
    if isinstance(chunks, ChunkPlan):
        return request.model_copy(update={"fingerprint": chunks.fingerprint})
    return OffsetsProgressStatus(
        request=request.request,
        request_key=request.request_key,
        restore_from=request.restore_from,
        pinned=request.pinned,
        backup=request.backup,
        fingerprint=chunks.fingerprint,
        applied_chunks=chunks.applied,
        total_chunks=chunks.chunks,
        applied_partitions=chunks.partitions_applied,
        total_partitions=chunks.partitions,
        failed_chunk=chunks.failed_chunk + 1 if isinstance(chunks, ChunkFailure) else None,
    )


def chunked_alter_text(message: str, partitions: int, chunks: int, started_at: int) -> str:
    """Connect's answer to an alter, with how it was split when it took more than one PATCH."""
    if chunks == 1:
        return message
    resumed = f", resumed at chunk {started_at + 1}" if started_at else ""
    return f"{message} ({partitions} partitions in {chunks} PATCH requests{resumed})"


@dataclass(frozen=True)
class FinishedChange:
    """What a finished stop -> change -> resume publishes."""

    message: str
    last_operation: OffsetsOperationStatus
    applied_offsets: AppliedOffsetsStatus | None  # applyOnChange: the document now applied
    condition: ConditionSpec | None  # OffsetsOperationFailed when it failed
    event_type: str
    event_reason: str


def finished_change(pending: PendingOffsetsOperation, target: ConnectorTarget, now: datetime) -> FinishedChange:
    """The outcome of a staged change once the connector is back in spec.state."""
    assert pending.result is not None
    failed = pending.result == "Failed"
    message = pending.message + ("" if failed else f"; connector back to {target.state.value}")
    last = OffsetsOperationStatus(
        operation=pending.operation,
        result=pending.result,
        reason=pending.reason,
        backup=pending.backup,
        time=iso(now),
        message=truncate(message, MAX_OPERATION_MESSAGE),
        request=pending.request,
        request_id=pending.request_id,
        request_key=pending.request_key,
        instance=target.resource_version or None,
    )
    applied = None
    # An applyOnChange apply, or an alter request from its ConfigMap (``Plan.alter_content``).
    if pending.operation == "alter" and target.alter_configmap and pending.content_hash:
        applied = AppliedOffsetsStatus(
            config_map=target.alter_configmap,
            content_hash=pending.content_hash,
            time=iso(now),
            result=pending.result,
        )
    condition = (
        ConditionSpec("OffsetsOperationFailed", "True", pending.reason or "RequestFailed", message) if failed else None
    )
    event_type, reason = ("Warning", "OffsetsOperationFailed") if failed else ("Normal", "OffsetsOperationSucceeded")
    return FinishedChange(message, last, applied, condition, event_type, reason)


@dataclass(frozen=True)
class DryRunReport:
    """What a dry run publishes: the full diff document (for a ConfigMap) and the status message."""

    document: dict[str, Any]
    where: str  # where the full diff is, or how to get it

    def text(self) -> str:
        """The ConfigMap value."""
        return json.dumps(self.document, indent=2, ensure_ascii=False) + "\n"

    def message(self, where: str | None = None) -> str:
        """The status message; ``where`` replaces the location when the diff could not be written."""
        return f"{self.document['operation']} dry run: {self.document['summary']}; nothing was changed; " + (
            where or self.where
        )


def dry_run_report(
    target: ConnectorTarget,
    operation: str,
    diff: OffsetsDiff,
    now: datetime,
    configmap: str | None,
    key: str,
    *,
    source: str | None = None,
    not_matching: tuple[str, ...] = (),
) -> DryRunReport:
    """Describe what a change would do, for a person deciding whether to run it. A copy's preview
    names its source and lists what of it will not match this connector (the real request refuses
    those: its partitions are copied as they are)."""
    summary = diff.summary()
    if not_matching:
        summary += f"; {len(not_matching)} problem(s): the source's partitions will not all match this connector"
    document: dict[str, Any] = {
        "operation": operation,
        "connector": target.name,
        "time": iso(now),
        "summary": summary,
        **({"source": source} if source is not None else {}),
        **({"notMatching": list(not_matching)} if not_matching else {}),
        **diff.to_json_obj(),
    }
    where = (
        f"diff in ConfigMap {configmap} key {key}"
        if configmap
        else f"set {target.spec_path}.listOffsets.toConfigMap to get the full diff in a ConfigMap"
    )
    return DryRunReport(document, where)


def initial_offsets_in_place(current: OffsetsDocument, requested: OffsetsDocument) -> bool:
    """Connect holds exactly the requested initial offsets (same partitions, same offsets): an
    earlier try got this far before the operator restarted, so nothing is wiped or sent again."""
    wanted = {partition_key(e) for e in requested.entries if e.offset is not None}
    return {partition_key(e) for e in current.entries} == wanted and not diff_offsets(current, requested).has_changes
