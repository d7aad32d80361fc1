"""How the plugin knows the operator has answered a request (``classify``), and how it reports it.

The operator writes ``lastOffsetsOperation`` (the resource's, or ``status.connectors[]``'s for
MirrorMaker 2) and only *then* removes the request annotation on success; a failure keeps the
annotation and records ``result: Failed``. A record counts as this request's answer when it names
this request's id, or (operators without request ids) when it changed since the request was made
or carries this request's fingerprint (``planning.offsets_request_fingerprint``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from connect_offsets.tools.kubectl.common import Kind
from connect_offsets.tools.kubectl.request import Request
from connect_offsets.vocabulary import ANNOTATION_MM2_CONNECTOR, ANNOTATION_OFFSETS

# --- completion --------------------------------------------------------------------------


@dataclass
class RequestOutcome:
    """How one request ended (or did not)."""

    namespace: str
    name: str
    kind: str
    connector: str
    operation: str
    result: str  # Succeeded | Failed | Invalid | Timeout | Error | Requested | DryRun
    code: int
    reason: str = ""
    message: str = ""
    backup: str | None = None
    request_id: str = ""  # set once the request was made (annotated); "" when refused before that
    offsets: Any = None  # list: the listed document ({"offsets": [...]}, as printed with -o text)
    dry_run: Any = None  # --dry-run (the operator's preview): the report
    hint: str = ""
    detail: str = ""
    record: dict[str, Any] = field(default_factory=dict)
    #: --dry-run=client|server: the strategy, and each write as it would be sent (client) or as the
    #: API server answered it with dryRun=All (server); result "DryRun", nothing was kept
    dry_run_strategy: str = ""
    writes: list[dict[str, Any]] = field(default_factory=list)
    #: Refused by the plugin itself before anything was written (``common.Refused``): no request was
    #: made and no status records it
    refused_here: bool = False

    def to_json_obj(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "connector": self.connector,
            "operation": self.operation,
            "result": self.result,
            "reason": self.reason,
            "message": self.message,
            "exitCode": self.code,
        }
        # list: the entries themselves, not the document around them ({"offsets": {"offsets": ...}})
        offsets = self.offsets.get("offsets") if isinstance(self.offsets, dict) else self.offsets
        for key, value in (
            ("backup", self.backup),
            ("requestId", self.request_id),
            ("offsets", offsets),
            ("dryRun", self.dry_run),
            ("dryRunStrategy", self.dry_run_strategy),
            ("writes", self.writes or None),
        ):
            if value is not None and value != "":  # an empty list of offsets is an answer too
                data[key] = value
        return data


def last_operation(kind: Kind, body: dict[str, Any], connector: str) -> dict[str, Any] | None:
    """The operator's ``lastOffsetsOperation`` for this connector (MM2: its ``status.connectors[]`` entry)."""
    status = body.get("status") or {}
    if kind.is_mirror:
        for entry in status.get("connectors") or []:
            if isinstance(entry, dict) and entry.get("name") == connector:
                record = entry.get("lastOffsetsOperation")
                return record if isinstance(record, dict) else None
        return None
    record = status.get("lastOffsetsOperation")
    return record if isinstance(record, dict) else None


def _parse_time(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Waiting:
    """What ``classify`` compares against: the request and the state before it was made."""

    request: Request
    before: dict[str, Any] | None
    started: datetime  # UTC, whole seconds (the operator records whole seconds)
    fingerprint: str | None = None


def classify(kind: Kind, body: dict[str, Any], connector: str, waiting: Waiting) -> tuple[str, dict[str, Any]] | None:
    """``("Succeeded" | "Failed" | "Withdrawn", record)`` once the operator has answered, else None.

    Succeeded: the annotation is gone (removed only after the status was written) and the record is
    a success of this operation that is new (a different record, this request's id, or written
    since the request). Failed: a Failed record that is this request's answer (its id, a record
    that changed since the request, or this request's fingerprint) — the annotation stays then.
    """
    request = waiting.request
    annotations = (body.get("metadata") or {}).get("annotations") or {}
    pending = annotations.get(ANNOTATION_OFFSETS) == request.operation and (
        request.mirror_connector is None or annotations.get(ANNOTATION_MM2_CONNECTOR) == request.mirror_connector
    )
    record = last_operation(kind, body, connector)
    if record is None or record.get("operation") != request.operation:
        return None if pending else ("Withdrawn", {})
    ids = {record.get(key) for key in ("requestId", "requestID")} - {None}
    if ids:
        ours = request.request_id in ids
        new = ours
    else:
        ours = record != waiting.before or (
            waiting.fingerprint is not None and record.get("request") == waiting.fingerprint
        )
        written = _parse_time(record.get("time"))
        new = ours or (written is not None and written >= waiting.started)
    if pending:
        return ("Failed", record) if ours and record.get("result") == "Failed" else None
    if new and record.get("result") == "Succeeded":
        return "Succeeded", record
    if ours and record.get("result") == "Failed":
        return "Failed", record
    return "Withdrawn", {}


#: The operations that back the connector's offsets up before changing them (a dry run never does).
BACKED_UP_OPERATIONS = ("alter", "reset", "restore")


def own_backup(record: dict[str, Any], waiting: Waiting) -> str | None:
    """The backup ``record`` names, only if this request made it: the undo advice and the BACKUP
    column must never point at a backup of an earlier operation (restoring it would put back the
    wrong offsets).

    The record must be this request's answer on its own terms, whatever else ``classify`` accepted,
    and not only because the operator writes each record whole: an operation that backs up (alter,
    reset, restore; not list, not a dry run), the same operation in the record, this request's id (a
    record without any id, from an operator that does not record them, only when it was written
    since the request was made), and a backup other than the one the record named before the request
    (a record merged into the previous one would still name that). The runner then checks the
    backup ConfigMap itself (``Runner._is_backup_of``).
    """
    request = waiting.request
    backup = record.get("backup")
    if not isinstance(backup, str) or not backup:
        return None
    if request.operation not in BACKED_UP_OPERATIONS or request.dry_run:
        return None
    if record.get("operation") != request.operation:
        return None
    if waiting.before is not None and waiting.before.get("backup") == backup:
        return None
    ids = {record.get(key) for key in ("requestId", "requestID")} - {None}
    if ids:
        return backup if ids == {request.request_id} else None
    written = _parse_time(record.get("time"))
    return backup if written is not None and written >= waiting.started else None


#: ``status.pendingOffsetsOperation.step`` of stop -> change -> resume, in order, as the user reads it.
STEPS = {
    "Stopping": (1, "stopping the connector"),
    "Changing": (2, "changing the offsets"),
    "Resuming": (3, "resuming the connector"),
}


def _status_entry(kind: Kind, body: dict[str, Any], connector: str) -> dict[str, Any]:
    """The status object that holds this connector's offsets state (MM2: its ``status.connectors[]`` entry)."""
    status = body.get("status") or {}
    if not kind.is_mirror:
        return status if isinstance(status, dict) else {}
    for entry in status.get("connectors") or []:
        if isinstance(entry, dict) and entry.get("name") == connector:
            return entry
    return {}


def progress_text(kind: Kind, body: dict[str, Any], connector: str, waiting: Waiting) -> str:
    """One line on how far the operator has got with this request, from the resource's status.

    The phase comes from ``pendingOffsetsOperation.step`` (stop -> change -> resume), when that
    pending operation is this request's (its operation, and its request id if it records one); the
    chunks from ``offsetsProgress`` (chunked alters and restores), unless it names another request's
    fingerprint. Before either shows, the operator has not started: "waiting for the operator"; after
    them, the result is recorded and the operator is about to remove the annotation.
    """
    request = waiting.request
    entry = _status_entry(kind, body, connector)
    parts: list[str] = []
    pending = entry.get("pendingOffsetsOperation")
    if (
        isinstance(pending, dict)
        and pending.get("operation") == request.operation
        and pending.get("requestId") in (None, request.request_id)
        and pending.get("step") in STEPS
    ):
        number, text = STEPS[str(pending["step"])]
        parts.append(f"step {number}/3, {text}")
    progress = entry.get("offsetsProgress")
    if isinstance(progress, dict) and progress.get("totalChunks"):
        fingerprint = progress.get("request")
        if waiting.fingerprint is None or fingerprint in (None, waiting.fingerprint):
            chunks = f"{progress.get('appliedChunks') or 0}/{progress['totalChunks']} chunks applied"
            if progress.get("totalPartitions"):
                chunks += f" ({progress.get('appliedPartitions') or 0}/{progress['totalPartitions']} partitions)"
            parts.append(chunks)
    if parts:
        return ", ".join(parts)
    record = last_operation(kind, body, connector) or {}
    if request.request_id in (record.get("requestId"), record.get("requestID")):
        return f"result recorded ({record.get('result')}), finishing"
    return "waiting for the operator"
