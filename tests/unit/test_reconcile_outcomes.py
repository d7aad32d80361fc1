"""The reconcile layer's pure decisions (connect_offsets.planning.outcomes), without any fake.

Covers: which planner refusals are published as a failed operation; request ids remembered
(bounded, no repeats, dry runs apart); "already applied" for alter and reset; the backup an
earlier try of the same request left; where a chunked alter resumes; what a finished staged change
publishes (success, failure, applyOnChange); the dry-run report and its message; initial offsets
already in place; messages capped with a marker.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from connect_offsets.models.crds import (
    ConnectorState,
    KafkaConnectorStatus,
    OffsetsProgressStatus,
    PendingOffsetsOperation,
    StatusModel,
)
from connect_offsets.offsets import diff_offsets, parse_offsets_document, parse_offsets_obj
from connect_offsets.offsets.chunking import ChunkFailure, ChunkLimits, ChunkPlan, ChunkProgress, ChunkResume
from connect_offsets.planning import HANDLED_REQUEST_IDS, Action, ConnectorTarget, Plan
from connect_offsets.planning.outcomes import (
    MAX_OPERATION_MESSAGE,
    already_applied,
    chunk_resume,
    chunked_alter_text,
    dry_run_report,
    finished_change,
    handled_request_ids,
    initial_offsets_in_place,
    op_status,
    progress_of,
    refusal_to_report,
    reusable_backup,
    truncate,
)
from connect_offsets.reconcile.status import status_fields
from connect_offsets.vocabulary import ANNOTATION_OFFSETS

pytestmark = pytest.mark.unit

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def target(**changes: Any) -> ConnectorTarget:
    fields: dict[str, Any] = {
        "name": "orders",
        "owner": "ns/orders",
        "class_name": "org.example.Source",
        "config": {},
        "state": ConnectorState.RUNNING,
        "generation": 1,
        "annotations": {},
    }
    fields.update(changes)
    return ConnectorTarget(**fields)


def doc(*positions: int | None) -> str:
    entries = [{"partition": {"f": str(i)}, "offset": None if p is None else {"p": p}} for i, p in enumerate(positions)]
    return json.dumps({"offsets": entries})


def current(*positions: int | None) -> Any:
    return parse_offsets_obj(json.loads(doc(*positions)), allow_empty=True)


@pytest.mark.parametrize(
    ("refusal", "reported"),
    [
        (None, None),
        (("InvalidOffsets", "bad", True), ("alter", "InvalidOffsets", "bad")),
        (("Unchanged", "same document", True), None),  # applyOnChange: nothing to do is no failure
        (("ConnectorRunning", "waiting", False), None),  # passing: asked again on the next pass
    ],
)
def test_which_refusals_are_published(refusal: tuple[str, str, bool] | None, reported: tuple[str, ...] | None) -> None:
    found = refusal_to_report(Plan(offsets_refusal=refusal), target())
    assert (None if found is None else (found.operation, found.reason, found.message)) == reported


def test_a_refusal_names_the_requested_operation() -> None:
    found = refusal_to_report(Plan(offsets_refusal=("X", "m", True)), target(annotations={ANNOTATION_OFFSETS: "reset"}))
    assert found is not None and found.operation == "reset"


def test_request_ids_are_bounded_unique_and_dry_runs_apart() -> None:
    ids = [f"r{i}" for i in range(HANDLED_REQUEST_IDS)]
    assert handled_request_ids(target(handled_request_ids=ids), "r0") == [*ids[1:], "r0"]
    assert handled_request_ids(target(handled_request_ids=ids), "new")[-1] == "new"
    assert len(handled_request_ids(target(handled_request_ids=ids), "new")) == HANDLED_REQUEST_IDS
    assert handled_request_ids(target(handled_request_ids=["a"]), "a", dry_run=True) == ["a", "a/dry-run"]


def test_already_applied() -> None:
    alter = Action("alter_offsets", offsets_json=doc(5, 6))
    assert already_applied(current(5, 6), alter)
    assert not already_applied(current(5, 7), alter)
    reset = Action("reset_offsets")
    assert already_applied(current(None, None), reset)
    assert already_applied(current(), reset)
    assert not already_applied(current(1), reset)


def test_the_backup_of_an_earlier_try_is_reused_only_for_the_same_request() -> None:
    progress = OffsetsProgressStatus.model_validate({"request": "fp1", "backup": "b1"})
    assert reusable_backup(progress, "fp1") == "b1"
    assert reusable_backup(progress, "fp2") is None
    assert reusable_backup(OffsetsProgressStatus(request="fp1"), "fp1") is None
    assert reusable_backup(None, "fp1") is None


def test_chunk_resume_only_for_the_same_request_with_progress() -> None:
    # read back from status exactly as written (camelCase)
    previous = OffsetsProgressStatus.model_validate({"request": "fp1", "fingerprint": "chunks1", "appliedChunks": 2})
    assert chunk_resume(previous, OffsetsProgressStatus(request="fp1")) == ChunkResume("chunks1", 2)
    assert chunk_resume(previous, OffsetsProgressStatus(request="fp2")) is None
    # Recorded before the first chunk: a resume at chunk 0, so that chunk is checked against
    # Connect before it is sent (the attempt may have died right after sending it).
    partial = OffsetsProgressStatus(request="fp1", fingerprint="chunks1")
    assert chunk_resume(partial, OffsetsProgressStatus(request="fp1")) == ChunkResume("chunks1", 0)
    assert chunk_resume(None, OffsetsProgressStatus(request="fp1")) is None
    assert chunked_alter_text("ok", 5, 1, 0) == "ok"
    assert chunked_alter_text("ok", 5, 3, 0) == "ok (5 partitions in 3 PATCH requests)"
    assert chunked_alter_text("ok", 5, 3, 1) == "ok (5 partitions in 3 PATCH requests, resumed at chunk 2)"


def test_the_progress_of_a_chunked_alter_is_its_status_model_with_the_request_and_its_backup() -> None:
    request = OffsetsProgressStatus(request="fp1", backup="b1")
    plan = ChunkPlan((), 25, 100, "chunks1", ChunkLimits())
    assert progress_of(request, plan) == OffsetsProgressStatus(request="fp1", backup="b1", fingerprint="chunks1")
    assert status_fields(KafkaConnectorStatus(offsets_progress=progress_of(request, plan))) == {
        "offsetsProgress": {"request": "fp1", "backup": "b1", "fingerprint": "chunks1"}
    }
    applied = progress_of(request, ChunkProgress("chunks1", 1, 3, 20, 25, "ok"))
    assert status_fields(KafkaConnectorStatus(offsets_progress=applied)) == {
        "offsetsProgress": {
            "request": "fp1",
            "backup": "b1",
            "fingerprint": "chunks1",
            "appliedChunks": 2,
            "totalChunks": 3,
            "appliedPartitions": 20,
            "totalPartitions": 25,
        }
    }
    failed = progress_of(OffsetsProgressStatus(request="fp1"), ChunkFailure("chunks1", 2, 5, 20, 45, "chunk 3/5"))
    assert (failed.backup, failed.applied_chunks, failed.failed_chunk) == (None, 2, 3)  # failedChunk is 1-based
    assert chunk_resume(failed, OffsetsProgressStatus(request="fp1")) == ChunkResume("chunks1", 2)


def pending(**changes: Any) -> PendingOffsetsOperation:
    fields: dict[str, Any] = {"operation": "alter", "step": "Resuming", "started": "t", "request": "fp", "backup": "b"}
    fields.update(changes)
    return PendingOffsetsOperation(**fields)


def test_a_finished_change_publishes_its_outcome() -> None:
    done = finished_change(pending(result="Succeeded", message="alter: ok"), target(), NOW)
    assert done.message == "alter: ok; connector back to running"
    assert done.last_operation.result == "Succeeded" and done.last_operation.backup == "b"
    assert done.condition is None and done.applied_offsets is None
    assert (done.event_type, done.event_reason) == ("Normal", "OffsetsOperationSucceeded")

    failed = finished_change(pending(result="Failed", reason="ConnectRejected", message="no"), target(), NOW)
    assert failed.message == "no"
    assert failed.condition is not None and failed.condition.reason == "ConnectRejected"
    assert (failed.event_type, failed.event_reason) == ("Warning", "OffsetsOperationFailed")
    unnamed = finished_change(pending(result="Failed", message="no"), target(), NOW)
    assert unnamed.condition is not None and unnamed.condition.reason == "RequestFailed"

    declared = finished_change(
        pending(result="Succeeded", source="applyOnChange", content_hash="h"), target(alter_configmap="cm"), NOW
    )
    assert declared.applied_offsets is not None
    assert as_status(declared.applied_offsets) == {
        "configMap": "cm",
        "contentHash": "h",
        "time": "2026-01-02T03:04:05Z",
        "result": "Succeeded",
    }


def test_the_dry_run_report() -> None:
    diff = diff_offsets(current(1, 2), parse_offsets_document(doc(1, 3)))
    report = dry_run_report(target(), "alter", diff, NOW, "cm", "dry-run.json")
    assert report.document["summary"] == "0 added, 1 changed, 0 removed, 1 unchanged"
    assert json.loads(report.text())["changed"] == [{"partition": {"f": "1"}, "old": {"p": 2}, "new": {"p": 3}}]
    assert report.message() == (
        "alter dry run: 0 added, 1 changed, 0 removed, 1 unchanged; nothing was changed; "
        "diff in ConfigMap cm key dry-run.json"
    )
    assert report.message("the diff could not be written: 403").endswith("the diff could not be written: 403")
    nowhere = dry_run_report(target(spec_path="spec.mirrors[0]"), "reset", diff, NOW, None, "dry-run.json")
    assert nowhere.where == "set spec.mirrors[0].listOffsets.toConfigMap to get the full diff in a ConfigMap"


def test_initial_offsets_in_place_needs_the_same_partitions_and_offsets() -> None:
    requested = parse_offsets_document(doc(1, 2))
    assert initial_offsets_in_place(current(1, 2), requested)
    assert not initial_offsets_in_place(current(1), requested)
    assert not initial_offsets_in_place(current(1, 2, 3), requested)  # a leftover partition
    assert not initial_offsets_in_place(current(1, 5), requested)


def test_messages_are_capped_with_a_marker() -> None:
    assert truncate("short") == "short"
    long = "x" * 10_000 + "END"
    cut = truncate(long, 1000)
    assert len(cut) <= 1000 and cut.endswith("END") and "characters cut" in cut
    status = as_status(op_status("alter", "Failed", long, Plan(offsets_request="fp", request_id="id"), NOW, "R"))
    assert len(status["message"]) <= MAX_OPERATION_MESSAGE
    assert (status["request"], status["requestId"], status["reason"]) == ("fp", "id", "R")
    assert "dryRun" not in status
    assert as_status(op_status("alter", "Succeeded", "m", Plan(), NOW, dry_run=True))["dryRun"] is True


def as_status(model: StatusModel) -> dict[str, Any]:
    """A nested status object as the status writer serializes it."""
    return model.model_dump(by_alias=True, exclude_none=True, mode="json")
