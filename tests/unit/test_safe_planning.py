"""Unit tests for the planner's safe offsets operations (``plan_connector`` / ``plan_target``, pure).

Why a separate file: these features are a state machine spread over several passes (and operator
restarts), and every pass must be decided from the resource, its status and Connect alone. Each
test pins one branch with the exact actions (kinds, order, fields) and conditions:

* dry runs: ``dry-run=true`` next to alter/reset/restore -> ``dry_run_offsets`` in any connector
  state, with the annotation removals; invalid documents still refused; ``dry-run=false`` is a real
  request; values other than true/false refused (``InvalidAnnotation``) for both flags and every
  operation; a dry run never stops anything, even with ``stop-connector`` or the policy;
  ``dry-run-from`` (an alter dry run's own document) is read instead of the alter ConfigMap, refused
  next to anything but an alter dry run from a document, and must name a ConfigMap;
* stop -> change -> resume: annotation or ``spec.offsetsPolicy.stopConnector`` on a running or
  paused connector -> ``begin_offsets_change`` (the exact pending record) + ``stop``, held STOPPED;
  then ``status.pendingOffsetsOperation`` drives Stopping (wait, stop again) -> Changing (the change
  action carrying ``pending``) -> Resuming (back to spec.state) -> ``finish_offsets_change`` with the
  removals; cancellation while Stopping; a refusal while Changing; pending plus a config update; an
  alter's document pinned with the intent and applied from the pin, never from the ConfigMap as
  edited since (a missing or unfitting pin fails the change and resumes);
* request ids: handled ids -> ``OffsetsRequestIgnored``/``AlreadyHandled`` and nothing else; dry runs
  recorded apart (``<id>/dry-run``); the id is part of the fingerprint;
* applyOnChange: new content -> begin (source ``applyOnChange``, content hash); same content ->
  ``OffsetsApplied`` only; invalid content -> refusal plus a Failed ``applied_offsets`` record;
* initial offsets: create STOPPED with the validated compact document; invalid, unsupported, failed
  with the same inputs -> nothing created; Applied -> a plain create; Creating with the connector
  present -> held STOPPED, ``apply_initial_offsets`` once STOPPED without tasks;
* MirrorMaker 2: request annotations reach only the selected connector, pending records are per
  connector (``status.connectors[]``), removals include the connector selector.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from connect_offsets.models.crds import (
    AppliedOffsetsStatus,
    KafkaConnectorResource,
    PendingOffsetsOperation,
)
from connect_offsets.offsets import FILE_STREAM_SOURCE_CLASS, parse_offsets_document
from connect_offsets.planning import (
    SETTLE_DELAY_S,
    Action,
    ConditionSpec,
    ConnectorTarget,
    Observed,
    OffsetsConfigMap,
    Plan,
    RestoreSource,
    content_hash,
    desired_config,
    mirror_targets,
    offsets_request_fingerprint,
    plan_connector,
    plan_target,
    request_key,
    target_for_connector,
)
from connect_offsets.vocabulary import (
    ANNOTATION_DRY_RUN,
    ANNOTATION_DRY_RUN_FROM,
    ANNOTATION_MM2_CONNECTOR,
    ANNOTATION_OFFSETS,
    ANNOTATION_REQUEST_ID,
    ANNOTATION_RESTORE_FROM,
    ANNOTATION_SEEK_TO,
    ANNOTATION_STOP_CONNECTOR,
    OWNER_CONFIG_KEY,
)
from tests.unit import test_mirror_planning as mm2
from tests.unit.planning_fixtures import NAME, NAMESPACE, NOW, conditions, handled, iso, kinds, observe

pytestmark = pytest.mark.unit

FILE = "/data/in.txt"
ALTER_CM = "offsets-in"
LIST_CM = "offsets-out"
INITIAL_CM = "initial-offsets"
BACKUP = f"{NAME}-backup-1a2b3c4d-20240501t115900z-9f3e"
CHANGE_KINDS = {"alter_offsets", "reset_offsets", "restore_offsets"}
STATE_OF = {"running": "RUNNING", "paused": "PAUSED", "stopped": "STOPPED"}


# --------------------------------------------------------------------------- factories


def doc(position: int, filename: str = FILE) -> str:
    return json.dumps({"offsets": [{"partition": {"filename": filename}, "offset": {"position": position}}]})


def compact(text: str) -> str:
    return parse_offsets_document(text).to_compact_json()


def make(
    *,
    annotations: dict[str, str] | None = None,
    state: str = "running",
    stop_policy: bool | None = None,
    apply_on_change: bool | None = None,
    initial: str | None = None,
    list_to: str | None = LIST_CM,
    alter_from: str | None = ALTER_CM,
    status: dict[str, Any] | None = None,
    generation: int = 3,
) -> KafkaConnectorResource:
    """A FileStreamSource KafkaConnector (exact offsets schema: filename + position)."""
    spec: dict[str, Any] = {
        "class": FILE_STREAM_SOURCE_CLASS,
        "tasksMax": 1,
        "state": state,
        "config": {"file": FILE, "topic": "orders"},
    }
    if list_to is not None:
        spec["listOffsets"] = {"toConfigMap": {"name": list_to}}
    if alter_from is not None:
        spec["alterOffsets"] = {"fromConfigMap": {"name": alter_from}}
        if apply_on_change is not None:
            spec["alterOffsets"]["applyOnChange"] = apply_on_change
    if stop_policy is not None:
        spec["offsetsPolicy"] = {"stopConnector": stop_policy}
    if initial is not None:
        spec["initialOffsets"] = {"fromConfigMap": {"name": initial}}
    body: dict[str, Any] = {
        "apiVersion": "connect-offsets.io/v1beta1",
        "kind": "KafkaConnector",
        "metadata": {
            "name": NAME,
            "namespace": NAMESPACE,
            "generation": generation,
            "resourceVersion": "100",
            "annotations": annotations or {},
        },
        "spec": spec,
    }
    if status is not None:
        body["status"] = status
    return KafkaConnectorResource.model_validate(body)


def cm(text: str | None, *, name: str = ALTER_CM, rv: str = "7", **data: str) -> OffsetsConfigMap:
    if text is not None:
        data["offsets.json"] = text
    return OffsetsConfigMap(name, True, rv, dict(data))


def seen(
    resource: KafkaConnectorResource,
    state: str | None = "RUNNING",
    tasks: tuple[str, ...] | None = None,
    *,
    configmap: OffsetsConfigMap | None = None,
    restore: RestoreSource | None = None,
    initial: OffsetsConfigMap | None = None,
    supports_initial_state: bool = True,
) -> Observed:
    """The resource's own connector in ``state`` (tasks as Connect reports them by default)."""
    base = observe(resource, state, tasks, configmap=configmap, supports_initial_state=supports_initial_state)
    return dataclasses.replace(base, restore=restore, initial_configmap=initial)


def absent(
    *,
    initial: OffsetsConfigMap | None = None,
    supports_initial_state: bool = True,
    configmap: OffsetsConfigMap | None = None,
) -> Observed:
    return Observed(NOW, None, supports_initial_state, None, None, alter_configmap=configmap, initial_configmap=initial)


def backup_source(position: int = 12, current: tuple[int, ...] = (30,)) -> RestoreSource:
    """The chosen backup (one partition of FILE) and the partitions the connector has now."""
    partitions = [{"filename": FILE}, {"filename": "/data/old.txt"}][: len(current)]
    return RestoreSource(
        name=BACKUP,
        resource_version="55",
        backup_json=doc(position),
        current_json=json.dumps(
            {
                "offsets": [
                    {"partition": p, "offset": {"position": at}} for p, at in zip(partitions, current, strict=False)
                ]
            }
        ),
    )


def removal(key: str, value: str) -> Action:
    return Action("remove_annotation", annotation=key, annotation_value=value)


def pending(
    operation: str = "alter",
    step: str = "Stopping",
    *,
    source: str = "annotation",
    request: str | None = "fp",
    request_id: str | None = None,
    content: str | None = None,
    restore_from: str | None = None,
    backup: str | None = None,
    result: str | None = None,
    reason: str = "",
    message: str = "",
    pinned: str | None = None,
) -> dict[str, Any]:
    """status.pendingOffsetsOperation as the executor writes it (camelCase)."""
    record: dict[str, Any] = {"operation": operation, "step": step, "source": source, "started": iso(NOW)}
    optional = {
        "request": request,
        "requestId": request_id,
        "contentHash": content,
        "restoreFrom": restore_from,
        "backup": backup,
        "result": result,
        "pinned": pinned,
    }
    record.update({k: v for k, v in optional.items() if v is not None})
    if reason:
        record["reason"] = reason
    if message:
        record["message"] = message
    return record


def pending_model(resource: KafkaConnectorResource) -> PendingOffsetsOperation:
    assert resource.status.pending_offsets_operation is not None
    return resource.status.pending_offsets_operation


def ready(plan: Plan) -> ConditionSpec:
    (found,) = conditions(plan, "Ready")
    return found


def only(plan: Plan, type_: str) -> ConditionSpec:
    (found,) = conditions(plan, type_)
    return found


def held(plan: Plan, state: str = "RUNNING") -> None:
    """The connector is held STOPPED and Ready says so (never silently stopped)."""
    assert plan.hold_stopped
    found = ready(plan)
    assert (found.status, found.reason) == ("False", "StoppedForOffsetsChange")
    assert found.message == f"Connector held STOPPED while {plan.hold_stopped}; it returns to {state} afterwards"


def assert_refused(plan: Plan, operation: str, reason: str, *fragments: str) -> str:
    """Refused before anything: no offsets, dry-run, begin, stop or removal actions."""
    forbidden = CHANGE_KINDS | {"dry_run_offsets", "begin_offsets_change", "stop", "remove_annotation", "list_offsets"}
    assert not [a for a in plan.actions if a.kind in forbidden], plan.actions
    assert plan.offsets_refusal is not None
    got, message, permanent = plan.offsets_refusal
    assert (got, permanent) == (reason, True)
    assert message.startswith(f"{operation} refused: "), message
    for fragment in fragments:
        assert fragment in message, message
    assert conditions(plan, "OffsetsOperationFailed") == [
        ConditionSpec("OffsetsOperationFailed", "True", reason, message)
    ]
    assert plan.hold_stopped is None
    return message


# --------------------------------------------------------------------------- dry runs


@pytest.mark.parametrize("state", ["running", "paused", "stopped"])
def test_dry_run_alter_in_any_state(state: str) -> None:
    annotations = {ANNOTATION_OFFSETS: "alter", ANNOTATION_DRY_RUN: "true"}
    resource = make(annotations=annotations, state=state)
    configmap = cm(doc(6).replace(",", ", "))
    plan = plan_connector(resource, seen(resource, STATE_OF[state], configmap=configmap))
    assert plan.actions == [
        Action("dry_run_offsets", operation="alter", configmap=LIST_CM, offsets_json=compact(doc(6))),
        removal(ANNOTATION_OFFSETS, "alter"),
        removal(ANNOTATION_DRY_RUN, "true"),
        handled(),
    ]
    assert plan.offsets_request == offsets_request_fingerprint(resource, configmap)
    assert plan.offsets_refusal is None and plan.hold_stopped is None and plan.request_id is None
    assert ready(plan).status == "True"
    assert [c.type for c in plan.conditions] == ["Ready"]


def test_dry_run_reset_has_no_document() -> None:
    annotations = {ANNOTATION_OFFSETS: "reset", ANNOTATION_DRY_RUN: "true"}
    resource = make(annotations=annotations)
    plan = plan_connector(resource, seen(resource, "RUNNING"))
    assert plan.actions == [
        Action("dry_run_offsets", operation="reset", configmap=LIST_CM, offsets_json=None),
        removal(ANNOTATION_OFFSETS, "reset"),
        removal(ANNOTATION_DRY_RUN, "true"),
        handled(),
    ]
    assert plan.offsets_request == offsets_request_fingerprint(resource, None)


def test_dry_run_restore_previews_the_exact_restore_document() -> None:
    annotations = {ANNOTATION_OFFSETS: "restore", ANNOTATION_DRY_RUN: "true", ANNOTATION_RESTORE_FROM: BACKUP}
    resource = make(annotations=annotations)
    plan = plan_connector(resource, seen(resource, "RUNNING", restore=backup_source(12, current=(30, 5))))
    expected = {
        "offsets": [
            {"partition": {"filename": FILE}, "offset": {"position": 12}},
            {"partition": {"filename": "/data/old.txt"}, "offset": None},  # exists now, not in the backup
        ]
    }
    assert plan.actions == [
        Action(
            "dry_run_offsets",
            operation="restore",
            configmap=LIST_CM,
            offsets_json=json.dumps(expected, separators=(",", ":")),
        ),
        removal(ANNOTATION_OFFSETS, "restore"),
        removal(ANNOTATION_DRY_RUN, "true"),
        removal(ANNOTATION_RESTORE_FROM, BACKUP),
        handled(),
    ]
    assert plan.offsets_request == offsets_request_fingerprint(resource, OffsetsConfigMap(BACKUP, True, "55"))


def test_dry_run_without_list_configmap_still_runs() -> None:
    resource = make(annotations={ANNOTATION_OFFSETS: "reset", ANNOTATION_DRY_RUN: "true"}, list_to=None)
    plan = plan_connector(resource, seen(resource, "RUNNING"))
    assert plan.actions[0] == Action("dry_run_offsets", operation="reset", configmap=None)


@pytest.mark.parametrize(
    ("configmap", "reason", "fragment"),
    [
        (cm(doc(6, "/data/other.txt")), "InvalidOffsets", "offsets[0].partition.filename"),
        (cm("{"), "InvalidOffsets", "not valid JSON"),
        (None, "ConfigMapNotFound", f"ConfigMap {ALTER_CM} does not exist"),
        (cm(None, other="x"), "OffsetsKeyMissing", "keys: other"),
    ],
)
def test_dry_run_validates_like_the_real_request(
    configmap: OffsetsConfigMap | None, reason: str, fragment: str
) -> None:
    resource = make(annotations={ANNOTATION_OFFSETS: "alter", ANNOTATION_DRY_RUN: "true"})
    plan = plan_connector(resource, seen(resource, "RUNNING", configmap=configmap))
    assert_refused(plan, "alter", reason, fragment)
    assert plan.actions == []


def test_dry_run_restore_without_backup_is_refused() -> None:
    resource = make(annotations={ANNOTATION_OFFSETS: "restore", ANNOTATION_DRY_RUN: "true"})
    plan = plan_connector(resource, seen(resource, "STOPPED", restore=RestoreSource(None)))
    assert_refused(plan, "restore", "BackupNotFound", f"any backup of connector {NAME} not found")


@pytest.mark.parametrize("trigger", ["annotation", "policy"])
def test_dry_run_never_stops_even_with_stop_connector(trigger: str) -> None:
    annotations = {ANNOTATION_OFFSETS: "reset", ANNOTATION_DRY_RUN: "true"}
    if trigger == "annotation":
        annotations[ANNOTATION_STOP_CONNECTOR] = "true"
    resource = make(annotations=annotations, stop_policy=trigger == "policy")
    plan = plan_connector(resource, seen(resource, "RUNNING"))
    assert kinds(plan) == ["dry_run_offsets", *["remove_annotation"] * (len(annotations)), "mark_handled"]
    assert plan.hold_stopped is None
    assert ready(plan).reason == "ConnectorRunning"


def test_dry_run_false_is_a_real_request() -> None:
    annotations = {ANNOTATION_OFFSETS: "alter", ANNOTATION_DRY_RUN: "false"}
    resource = make(annotations=annotations, state="stopped")
    configmap = cm(doc(6))
    plan = plan_connector(resource, seen(resource, "STOPPED", configmap=configmap))
    assert plan.actions == [
        Action("alter_offsets", configmap=ALTER_CM, offsets_json=compact(doc(6))),
        removal(ANNOTATION_OFFSETS, "alter"),
        removal(ANNOTATION_DRY_RUN, "false"),
        handled(),
    ]
    running = make(annotations=annotations)
    plan = plan_connector(running, seen(running, "RUNNING", configmap=configmap))
    assert_refused(plan, "alter", "ConnectorNotStopped", "the connector is RUNNING in Connect")


@pytest.mark.parametrize("key", [ANNOTATION_DRY_RUN, ANNOTATION_STOP_CONNECTOR])
@pytest.mark.parametrize("operation", ["alter", "reset", "restore", "list"])
@pytest.mark.parametrize("flag", ["yes", "True", "TRUE", "1", "", " true", "trüe", "true\n"])
def test_invalid_flag_values_are_refused(key: str, operation: str, flag: str) -> None:
    """A typo must never turn a dry run into a real change (nor start a stop)."""
    resource = make(annotations={ANNOTATION_OFFSETS: operation, key: flag}, state="stopped")
    observed = seen(resource, "STOPPED", configmap=cm(doc(6)), restore=backup_source())
    plan = plan_connector(resource, observed)
    message = assert_refused(plan, operation, "InvalidAnnotation")
    assert message == f"{operation} refused: {key}={flag!r} must be true or false; nothing was done"
    assert plan.actions == []
    assert ready(plan).reason == "ConnectorStopped"


def test_dry_run_flag_checked_before_the_document() -> None:
    resource = make(annotations={ANNOTATION_OFFSETS: "alter", ANNOTATION_DRY_RUN: "maybe"})
    plan = plan_connector(resource, seen(resource, "RUNNING", configmap=cm("not json")))
    assert_refused(plan, "alter", "InvalidAnnotation", "dry-run='maybe'")


DRY_RUN_CM = f"{NAME}-dry-run-input"


def test_dry_run_from_reads_its_own_configmap_and_never_the_alter_one() -> None:
    """Issue 36: a plugin dry run used to replace offsets.json in the alter ConfigMap. The preview's
    document comes from the ConfigMap dry-run-from names; the alter ConfigMap is not read."""
    annotations = {ANNOTATION_OFFSETS: "alter", ANNOTATION_DRY_RUN: "true", ANNOTATION_DRY_RUN_FROM: DRY_RUN_CM}
    resource = make(annotations=annotations, apply_on_change=True)
    preview = cm(doc(6), name=DRY_RUN_CM, rv="21")
    observed = dataclasses.replace(seen(resource, "RUNNING", configmap=cm(doc(30))), dry_run_configmap=preview)
    plan = plan_connector(resource, observed)
    assert plan.actions == [
        Action("dry_run_offsets", operation="alter", configmap=LIST_CM, offsets_json=compact(doc(6))),
        removal(ANNOTATION_OFFSETS, "alter"),
        removal(ANNOTATION_DRY_RUN, "true"),
        removal(ANNOTATION_DRY_RUN_FROM, DRY_RUN_CM),
        handled(),
    ]
    # its fingerprint is that of its own document: the same failed input is not retried
    assert plan.offsets_request == offsets_request_fingerprint(resource, preview)
    # a missing document is refused naming that ConfigMap, not the alter one
    plan = plan_connector(resource, seen(resource, "RUNNING", configmap=cm(doc(30))))
    assert_refused(plan, "alter", "ConfigMapNotFound", f"ConfigMap {DRY_RUN_CM} does not exist")
    # an alter dry run naming a document needs no alterOffsets at all
    bare = make(annotations=annotations, alter_from=None)
    plan = plan_connector(bare, dataclasses.replace(seen(bare, "RUNNING"), dry_run_configmap=preview))
    assert kinds(plan)[0] == "dry_run_offsets"


@pytest.mark.parametrize(
    ("annotations", "fragment"),
    [
        ({ANNOTATION_OFFSETS: "alter"}, "only applies to an alter dry run"),
        ({ANNOTATION_OFFSETS: "alter", ANNOTATION_DRY_RUN: "false"}, "only applies to an alter dry run"),
        ({ANNOTATION_OFFSETS: "reset", ANNOTATION_DRY_RUN: "true"}, "only applies to an alter dry run"),
        ({ANNOTATION_OFFSETS: "restore", ANNOTATION_DRY_RUN: "true"}, "only applies to an alter dry run"),
        ({ANNOTATION_OFFSETS: "list"}, "only applies to an alter dry run"),
        (
            {ANNOTATION_OFFSETS: "alter", ANNOTATION_DRY_RUN: "true", ANNOTATION_SEEK_TO: "2026-11-21T10:00:00Z"},
            "this alter seeks to a time",
        ),
    ],
)
def test_dry_run_from_anywhere_else_is_refused_and_nothing_runs(annotations: dict[str, str], fragment: str) -> None:
    """Next to a real alter it would be ignored: the user would get a real change of a document they
    only meant to preview."""
    resource = make(annotations={**annotations, ANNOTATION_DRY_RUN_FROM: DRY_RUN_CM}, state="stopped")
    observed = seen(resource, "STOPPED", configmap=cm(doc(6)), restore=backup_source())
    plan = plan_connector(resource, observed)
    message = assert_refused(plan, annotations[ANNOTATION_OFFSETS], "InvalidAnnotation", fragment)
    assert message.endswith("nothing was done")
    assert plan.actions == []
    assert ConnectorTarget.dry_run_source(target_for_connector(resource)) is None  # observe reads nothing


@pytest.mark.parametrize("name", ["Upper", "a_b", "-a", "a" * 254, "../x", ""])
def test_dry_run_from_must_name_a_configmap(name: str) -> None:
    annotations = {ANNOTATION_OFFSETS: "alter", ANNOTATION_DRY_RUN: "true", ANNOTATION_DRY_RUN_FROM: name}
    resource = make(annotations=annotations)
    plan = plan_connector(resource, seen(resource, "RUNNING", configmap=cm(doc(6))))
    assert_refused(plan, "alter", "InvalidAnnotation", "is not a ConfigMap name")
    assert target_for_connector(resource).dry_run_source() is None


def test_list_with_dry_run_true_just_lists() -> None:
    resource = make(annotations={ANNOTATION_OFFSETS: "list", ANNOTATION_DRY_RUN: "true"})
    plan = plan_connector(resource, seen(resource, "RUNNING"))
    assert plan.actions == [
        Action("list_offsets", configmap=LIST_CM),
        removal(ANNOTATION_OFFSETS, "list"),
        removal(ANNOTATION_DRY_RUN, "true"),
        handled(),
    ]


# --------------------------------------------------------------------------- stop -> change -> resume: begin


@pytest.mark.parametrize("operation", ["alter", "reset", "restore"])
@pytest.mark.parametrize("trigger", ["annotation", "policy"])
@pytest.mark.parametrize(
    ("state", "observed_state"), [("running", "RUNNING"), ("paused", "PAUSED"), ("running", "FAILED")]
)
def test_begin_records_intent_then_stops(operation: str, trigger: str, state: str, observed_state: str) -> None:
    annotations = {ANNOTATION_OFFSETS: operation}
    if trigger == "annotation":
        annotations[ANNOTATION_STOP_CONNECTOR] = "true"
    resource = make(annotations=annotations, state=state, stop_policy=trigger == "policy")
    configmap = cm(doc(6)) if operation == "alter" else None
    restore = backup_source() if operation == "restore" else None
    plan = plan_connector(resource, seen(resource, observed_state, configmap=configmap, restore=restore))
    source = OffsetsConfigMap(BACKUP, True, "55") if operation == "restore" else configmap
    fingerprint = offsets_request_fingerprint(resource, source)
    assert plan.actions == [
        Action(
            "begin_offsets_change",
            pending=PendingOffsetsOperation(
                operation=operation,
                step="Stopping",
                source="annotation",
                request=fingerprint,
                request_id=None,
                request_key=request_key(target_for_connector(resource)),
                content_hash=None,
                restore_from=BACKUP if operation == "restore" else None,
                started=iso(NOW),
            ),
            # An alter's document, as read now: pinned with the intent (issue 44).
            configmap=ALTER_CM if operation == "alter" else None,
            offsets_json=compact(doc(6)) if operation == "alter" else None,
        ),
        Action("stop"),
    ]
    assert plan.offsets_request == fingerprint
    assert plan.offsets_refusal is None
    assert plan.hold_stopped == f"{operation} runs (stop -> change -> resume)"
    held(plan, STATE_OF[state])
    assert only(plan, "OffsetsOperationInProgress") == ConditionSpec(
        "OffsetsOperationInProgress", "True", "Stopping", f"{operation}: stopping the connector before the change"
    )
    assert plan.requeue_after == SETTLE_DELAY_S


def test_begin_carries_the_request_id() -> None:
    annotations = {ANNOTATION_OFFSETS: "reset", ANNOTATION_STOP_CONNECTOR: "true", ANNOTATION_REQUEST_ID: "INC-1"}
    resource = make(annotations=annotations)
    plan = plan_connector(resource, seen(resource, "RUNNING"))
    assert plan.request_id == "INC-1"
    begin = plan.actions[0]
    assert begin.pending is not None and begin.pending.request_id == "INC-1"
    assert begin.pending.request == offsets_request_fingerprint(resource, None)


def test_begin_without_status_does_not_stop_blindly() -> None:
    resource = make(annotations={ANNOTATION_OFFSETS: "reset", ANNOTATION_STOP_CONNECTOR: "true"})
    plan = plan_connector(resource, seen(resource, None))
    assert kinds(plan) == ["begin_offsets_change"]
    held(plan)


@pytest.mark.parametrize(
    ("configmap", "reason"),
    [(cm(doc(6, "/data/other.txt")), "InvalidOffsets"), (None, "ConfigMapNotFound"), (cm("[]"), "InvalidOffsets")],
)
@pytest.mark.parametrize("trigger", ["annotation", "policy"])
def test_invalid_input_never_starts_a_stop(configmap: OffsetsConfigMap | None, reason: str, trigger: str) -> None:
    annotations = {ANNOTATION_OFFSETS: "alter"}
    if trigger == "annotation":
        annotations[ANNOTATION_STOP_CONNECTOR] = "true"
    resource = make(annotations=annotations, stop_policy=trigger == "policy")
    plan = plan_connector(resource, seen(resource, "RUNNING", configmap=configmap))
    assert_refused(plan, "alter", reason)
    assert plan.actions == []
    assert ready(plan).reason == "ConnectorRunning"


def test_restore_without_backup_never_starts_a_stop() -> None:
    resource = make(annotations={ANNOTATION_OFFSETS: "restore", ANNOTATION_STOP_CONNECTOR: "true"})
    plan = plan_connector(resource, seen(resource, "RUNNING", restore=RestoreSource(None)))
    assert_refused(plan, "restore", "BackupNotFound")
    assert plan.actions == []


def test_stop_connector_false_is_refused_like_no_flag() -> None:
    resource = make(annotations={ANNOTATION_OFFSETS: "reset", ANNOTATION_STOP_CONNECTOR: "false"})
    plan = plan_connector(resource, seen(resource, "RUNNING"))
    assert_refused(plan, "reset", "ConnectorNotStopped", "reset needs it STOPPED", f"{ANNOTATION_STOP_CONNECTOR}=true")


def test_stop_connector_on_spec_stopped_waits_for_the_stop() -> None:
    """spec.state stopped: the spec's own stop is on its way; no stop -> change -> resume needed."""
    resource = make(annotations={ANNOTATION_OFFSETS: "reset", ANNOTATION_STOP_CONNECTOR: "true"}, state="stopped")
    plan = plan_connector(resource, seen(resource, "RUNNING"))
    assert kinds(plan) == ["stop"]
    assert plan.offsets_refusal == ("WaitingForStop", "waiting for Connect to report STOPPED (now RUNNING)", False)
    assert plan.hold_stopped is None


@pytest.mark.parametrize("trigger", ["annotation", "policy"])
def test_already_stopped_connector_changes_directly(trigger: str) -> None:
    annotations = {ANNOTATION_OFFSETS: "reset"}
    if trigger == "annotation":
        annotations[ANNOTATION_STOP_CONNECTOR] = "true"
    resource = make(annotations=annotations, state="stopped", stop_policy=trigger == "policy")
    plan = plan_connector(resource, seen(resource, "STOPPED"))
    expected = [Action("reset_offsets"), removal(ANNOTATION_OFFSETS, "reset")]
    if trigger == "annotation":
        expected.append(removal(ANNOTATION_STOP_CONNECTOR, "true"))
    assert plan.actions == [*expected, handled()]


# --------------------------------------------------------------------------- stop -> change -> resume: steps


def staged(
    operation: str = "alter",
    step: str = "Stopping",
    *,
    annotations: dict[str, str] | None = None,
    state: str = "running",
    **record: Any,
) -> KafkaConnectorResource:
    if annotations is None:
        annotations = {ANNOTATION_OFFSETS: operation, ANNOTATION_STOP_CONNECTOR: "true"}
    return make(
        annotations=annotations,
        state=state,
        status={"pendingOffsetsOperation": pending(operation, step, **record)},
    )


@pytest.mark.parametrize("step", ["Stopping", "Changing"])
def test_pending_waits_for_stopped_and_stops_again(step: str) -> None:
    resource = staged(step=step)
    plan = plan_connector(resource, seen(resource, "RUNNING", configmap=cm(doc(6))))
    assert plan.actions == [Action("stop")]
    assert plan.hold_stopped == f"alter is in progress (step {step})"
    held(plan)
    assert only(plan, "OffsetsOperationInProgress") == ConditionSpec(
        "OffsetsOperationInProgress",
        "True",
        "Stopping",
        "alter: waiting for Connect to report STOPPED with no tasks (now RUNNING with 1 task(s))",
    )
    assert plan.offsets_request == "fp"
    assert plan.requeue_after == SETTLE_DELAY_S


def test_pending_waits_while_tasks_wind_down() -> None:
    resource = staged()
    plan = plan_connector(resource, seen(resource, "STOPPED", ("RUNNING", "RUNNING"), configmap=cm(doc(6))))
    assert plan.actions == []
    assert "now STOPPED with 2 task(s)" in only(plan, "OffsetsOperationInProgress").message
    assert plan.requeue_after == SETTLE_DELAY_S


def test_pending_without_status_waits() -> None:
    resource = staged()
    plan = plan_connector(resource, seen(resource, None, configmap=cm(doc(6))))
    assert plan.actions == []
    assert only(plan, "OffsetsOperationInProgress").message.endswith("(now unknown)")


@pytest.mark.parametrize("step", ["Stopping", "Changing"])
def test_pending_alter_changes_once_stopped(step: str) -> None:
    resource = staged(step=step, request_id="INC-7", backup=BACKUP if step == "Changing" else None)
    plan = plan_connector(resource, seen(resource, "STOPPED", configmap=cm(doc(6).replace(":", ": "))))
    assert plan.actions == [
        Action("alter_offsets", configmap=ALTER_CM, offsets_json=compact(doc(6)), pending=pending_model(resource))
    ]
    assert plan.request_id == "INC-7"
    assert plan.offsets_request == "fp"
    held(plan)
    assert only(plan, "OffsetsOperationInProgress") == ConditionSpec(
        "OffsetsOperationInProgress", "True", "Changing", "alter: backing up and changing"
    )
    assert plan.requeue_after == SETTLE_DELAY_S


PIN = f"{NAME}-pinned-1a2b3c4d-20240501t115900z-77aa"


@pytest.mark.parametrize("source", ["annotation", "applyOnChange"])
@pytest.mark.parametrize("step", ["Stopping", "Changing"])
def test_pending_alter_applies_its_pinned_document_not_the_configmap_now(step: str, source: str) -> None:
    """Issue 44: the document was pinned when the request began; the ConfigMap edited since is not
    what this change applies (an edit is a request of its own)."""
    record = pending("alter", step, source=source, pinned=PIN, content=content_hash(doc(6)))
    if source == "annotation":
        resource = staged(step=step, pinned=PIN, content=content_hash(doc(6)))
    else:
        resource = make(apply_on_change=True, status={"pendingOffsetsOperation": record})
    observed = dataclasses.replace(
        seen(resource, "STOPPED", configmap=cm(doc(8))), pinned_copy=cm(doc(6), name=PIN, rv="40")
    )
    plan = plan_connector(resource, observed)
    assert plan.actions == [
        Action("alter_offsets", configmap=ALTER_CM, offsets_json=compact(doc(6)), pending=pending_model(resource))
    ]


@pytest.mark.parametrize("pin", [None, OffsetsConfigMap(PIN, False), cm(None, name=PIN, rv="40", other="{}")])
def test_pending_alter_whose_pin_is_gone_fails_and_resumes_without_reading_the_configmap(
    pin: OffsetsConfigMap | None,
) -> None:
    resource = staged(pinned=PIN)
    observed = dataclasses.replace(seen(resource, "STOPPED", configmap=cm(doc(8))), pinned_copy=pin)
    plan = plan_connector(resource, observed)
    update, resume = plan.actions
    assert update.kind == "update_pending" and update.pending is not None and resume == Action("resume")
    assert (update.pending.step, update.pending.result, update.pending.reason) == (
        "Resuming",
        "Failed",
        "PinnedCopyMissing",
    )
    assert "is not read again from its source" in update.pending.message
    assert not [a for a in plan.actions if a.kind in CHANGE_KINDS]


def test_pending_alter_whose_pin_no_longer_fits_the_connector_is_refused() -> None:
    resource = staged(pinned=PIN)
    observed = dataclasses.replace(
        seen(resource, "STOPPED", configmap=cm(doc(8))), pinned_copy=cm(doc(6, "/data/other.txt"), name=PIN)
    )
    (update, _) = plan_connector(resource, observed).actions
    assert update.pending is not None and update.pending.reason == "InvalidOffsets"
    assert update.pending.message.startswith(f"alter refused: the document pinned in ConfigMap {PIN} when this")


def test_pending_reset_changes_once_stopped() -> None:
    resource = staged("reset")
    plan = plan_connector(resource, seen(resource, "STOPPED"))
    assert plan.actions == [Action("reset_offsets", pending=pending_model(resource))]


def test_pending_restore_uses_the_backup_chosen_at_the_start() -> None:
    resource = staged("restore", restore_from=BACKUP)
    plan = plan_connector(resource, seen(resource, "STOPPED", restore=backup_source(12)))
    (action,) = plan.actions
    assert action == Action(
        "restore_offsets", configmap=BACKUP, offsets_json=compact(doc(12)), pending=pending_model(resource)
    )


def test_pending_change_keeps_paused_spec_held() -> None:
    resource = staged(state="paused")
    plan = plan_connector(resource, seen(resource, "STOPPED", configmap=cm(doc(6))))
    assert kinds(plan) == ["alter_offsets"]  # no resume/pause before the change
    held(plan, "PAUSED")


@pytest.mark.parametrize("step", ["Stopping", "Changing"])
def test_input_invalid_when_stopped_fails_the_change_and_resumes(step: str) -> None:
    resource = staged(step=step)
    plan = plan_connector(resource, seen(resource, "STOPPED", configmap=cm(doc(6, "/data/other.txt"))))
    (update, *rest) = plan.actions
    assert update.kind == "update_pending"
    assert update.pending is not None
    assert update.pending.message.startswith(f"alter refused: ConfigMap {ALTER_CM} key offsets.json is invalid:\n")
    assert "offsets[0].partition.filename" in update.pending.message
    assert update.pending == pending_model(resource).model_copy(
        update={"step": "Resuming", "result": "Failed", "reason": "InvalidOffsets", "message": update.pending.message}
    )
    assert not [a for a in plan.actions if a.kind in CHANGE_KINDS]
    # The request is not executed: the plan says why, and the connector goes back to spec.state.
    progress = only(plan, "OffsetsOperationInProgress")
    assert (progress.reason, progress.status) == ("Resuming", "True")
    assert progress.message == f"{update.pending.message}; moving the connector back to RUNNING"
    assert rest == [Action("resume")]
    assert plan.hold_stopped is None


@pytest.mark.parametrize("annotations", [{}, {ANNOTATION_OFFSETS: "reset"}, {ANNOTATION_OFFSETS: "bogus"}])
def test_withdrawn_while_stopping_cancels(annotations: dict[str, str]) -> None:
    resource = staged(annotations=annotations)
    plan = plan_connector(resource, seen(resource, "RUNNING", configmap=cm(doc(6))))
    cancelled = pending_model(resource).model_copy(
        update={
            "step": "Resuming",
            "result": "Failed",
            "reason": "Cancelled",
            "message": "alter cancelled: the request was withdrawn before the connector stopped",
        }
    )
    assert plan.actions == [Action("update_pending", pending=cancelled)]
    assert plan.hold_stopped is None
    assert ready(plan).reason == "ConnectorRunning"
    assert plan.requeue_after == SETTLE_DELAY_S


def test_withdrawn_after_the_stop_resumes_right_after_recording() -> None:
    resource = staged(annotations={})
    plan = plan_connector(resource, seen(resource, "STOPPED"))
    assert kinds(plan) == ["update_pending", "resume"]  # recorded first: a crash in between still resumes


def test_withdrawn_while_changing_still_finishes() -> None:
    """Once Changing, the backup may exist and the PATCH may be in flight: finish, never half-cancel."""
    resource = staged(step="Changing", annotations={}, backup=BACKUP)
    plan = plan_connector(resource, seen(resource, "STOPPED", configmap=cm(doc(6))))
    assert kinds(plan) == ["alter_offsets"]
    held(plan)


@pytest.mark.parametrize(
    ("state", "observed_state", "action"), [("running", "STOPPED", "resume"), ("paused", "STOPPED", "pause")]
)
def test_resuming_moves_back_to_spec_state(state: str, observed_state: str, action: str) -> None:
    resource = staged(step="Resuming", state=state, result="Succeeded", message="alter: ok")
    plan = plan_connector(resource, seen(resource, observed_state))
    assert plan.actions == [Action(action)]
    assert plan.hold_stopped is None
    assert only(plan, "OffsetsOperationInProgress") == ConditionSpec(
        "OffsetsOperationInProgress",
        "True",
        "Resuming",
        f"alter done (Succeeded); moving the connector back to {STATE_OF[state]}",
    )
    assert ready(plan).reason == "Progressing"
    assert plan.requeue_after == SETTLE_DELAY_S


@pytest.mark.parametrize(
    ("state", "observed_state"), [("running", "RUNNING"), ("paused", "PAUSED"), ("stopped", "STOPPED")]
)
def test_resumed_finishes_and_removes_the_request(state: str, observed_state: str) -> None:
    annotations = {ANNOTATION_OFFSETS: "alter", ANNOTATION_STOP_CONNECTOR: "true", ANNOTATION_REQUEST_ID: "INC-9"}
    resource = staged(
        step="Resuming", state=state, annotations=annotations, result="Succeeded", request_id="INC-9", backup=BACKUP
    )
    plan = plan_connector(resource, seen(resource, observed_state))
    assert plan.actions == [
        Action("finish_offsets_change", pending=pending_model(resource)),
        removal(ANNOTATION_OFFSETS, "alter"),
        removal(ANNOTATION_STOP_CONNECTOR, "true"),
        removal(ANNOTATION_REQUEST_ID, "INC-9"),
        handled(),
    ]
    assert plan.request_id == "INC-9"
    assert plan.offsets_request == "fp"
    assert not conditions(plan, "OffsetsOperationInProgress")
    assert ready(plan).status == "True"


@pytest.mark.parametrize(
    ("annotations", "result"),
    [
        ({ANNOTATION_OFFSETS: "alter"}, "Failed"),  # kept: the failure is visible, not repeated (fingerprint)
        ({ANNOTATION_OFFSETS: "reset"}, "Succeeded"),  # another request arrived meanwhile
        ({}, "Failed"),  # cancelled
    ],
)
def test_finish_keeps_annotations_that_are_not_a_succeeded_same_request(
    annotations: dict[str, str], result: str
) -> None:
    resource = staged(step="Resuming", annotations=annotations, result=result, reason="X", message="m")
    plan = plan_connector(resource, seen(resource, "RUNNING"))
    assert plan.actions == [Action("finish_offsets_change", pending=pending_model(resource))]


def test_pending_waits_for_a_config_update_held_stopped() -> None:
    resource = staged()
    observed = seen(resource, "STOPPED", configmap=cm(doc(6)))
    observed = dataclasses.replace(observed, config={**desired_config(resource), "topic": "old"})
    plan = plan_connector(resource, observed)
    assert plan.actions == [Action("update_config", config=desired_config(resource))]
    held(plan)


def test_resuming_with_a_config_update_is_not_held() -> None:
    resource = staged(step="Resuming", result="Succeeded")
    observed = dataclasses.replace(seen(resource, "STOPPED"), config={**desired_config(resource), "topic": "old"})
    plan = plan_connector(resource, observed)
    assert kinds(plan) == ["update_config", "resume"]
    assert plan.hold_stopped is None


def test_pending_takes_precedence_over_a_new_request_and_dry_run() -> None:
    annotations = {ANNOTATION_OFFSETS: "alter", ANNOTATION_DRY_RUN: "true"}
    resource = staged(annotations=annotations)
    plan = plan_connector(resource, seen(resource, "STOPPED", configmap=cm(doc(6))))
    assert kinds(plan) == ["alter_offsets"]  # the recorded change, not a dry run of it


@pytest.mark.parametrize("operation", ["list", "bogus", ""])
def test_pending_with_an_unknown_operation_never_changes_offsets(operation: str) -> None:
    """A hand-edited (or foreign) pending record must not turn into a reset."""
    annotations = {ANNOTATION_OFFSETS: operation} if operation else {}
    resource = staged(operation, step="Changing", annotations=annotations)
    plan = plan_connector(resource, seen(resource, "STOPPED"))
    assert not [a for a in plan.actions if a.kind in CHANGE_KINDS], plan.actions
    (update,) = [a for a in plan.actions if a.kind == "update_pending"]
    assert update.pending is not None
    assert (update.pending.step, update.pending.result) == ("Resuming", "Failed")
    assert repr(operation) in update.pending.message


def test_resuming_without_result_finishes_as_failed() -> None:
    """The executor needs a result to publish; a record without one (hand-edited) is finished as Failed."""
    resource = staged(step="Resuming")
    plan = plan_connector(resource, seen(resource, "RUNNING"))
    (finish,) = plan.actions
    assert finish.kind == "finish_offsets_change"
    assert finish.pending is not None
    assert (finish.pending.result, finish.pending.reason) == ("Failed", "Interrupted")
    assert finish.pending.message


# --------------------------------------------------------------------------- request ids


def test_handled_request_id_is_ignored_entirely() -> None:
    annotations = {ANNOTATION_OFFSETS: "reset", ANNOTATION_REQUEST_ID: "INC-4711"}
    last = {"operation": "reset", "result": "Succeeded", "time": iso(NOW), "requestId": "INC-4711"}
    resource = make(
        annotations=annotations,
        state="stopped",
        status={"handledRequestIds": ["INC-1", "INC-4711"], "lastOffsetsOperation": last},
    )
    plan = plan_connector(resource, seen(resource, "STOPPED"))
    assert plan.actions == []
    assert only(plan, "OffsetsRequestIgnored") == ConditionSpec(
        "OffsetsRequestIgnored",
        "True",
        "AlreadyHandled",
        f"{ANNOTATION_REQUEST_ID}='INC-4711' was already handled (last operation: reset Succeeded at {iso(NOW)}); "
        "set a new request id to run it again",
    )
    assert plan.offsets_request is None and plan.request_id is None and plan.offsets_refusal is None
    assert ready(plan).reason == "ConnectorStopped"


@pytest.mark.parametrize("stop", [True, False])
def test_handled_request_id_never_stops_a_running_connector(stop: bool) -> None:
    annotations = {ANNOTATION_OFFSETS: "alter", ANNOTATION_REQUEST_ID: "r1"}
    if stop:
        annotations[ANNOTATION_STOP_CONNECTOR] = "true"
    resource = make(annotations=annotations, stop_policy=not stop, status={"handledRequestIds": ["r1"]})
    plan = plan_connector(resource, seen(resource, "RUNNING", configmap=cm(doc(6))))
    assert plan.actions == []
    assert only(plan, "OffsetsRequestIgnored").message == (
        f"{ANNOTATION_REQUEST_ID}='r1' was already handled; set a new request id to run it again"
    )


def test_new_request_id_runs_and_is_removed_with_the_request() -> None:
    annotations = {ANNOTATION_OFFSETS: "reset", ANNOTATION_REQUEST_ID: "INC-2"}
    resource = make(annotations=annotations, state="stopped", status={"handledRequestIds": ["INC-1"]})
    plan = plan_connector(resource, seen(resource, "STOPPED"))
    assert plan.actions == [
        Action("reset_offsets"),
        removal(ANNOTATION_OFFSETS, "reset"),
        removal(ANNOTATION_REQUEST_ID, "INC-2"),
        handled(),
    ]
    assert plan.request_id == "INC-2"


def test_refused_request_carries_its_id_to_be_recorded() -> None:
    resource = make(annotations={ANNOTATION_OFFSETS: "reset", ANNOTATION_REQUEST_ID: "INC-3"})
    plan = plan_connector(resource, seen(resource, "RUNNING"))
    assert_refused(plan, "reset", "ConnectorNotStopped")
    assert plan.request_id == "INC-3"


def test_dry_run_ids_are_recorded_apart() -> None:
    dry = {ANNOTATION_OFFSETS: "reset", ANNOTATION_REQUEST_ID: "r", ANNOTATION_DRY_RUN: "true"}
    real = {ANNOTATION_OFFSETS: "reset", ANNOTATION_REQUEST_ID: "r"}
    # A dry run handled as r/dry-run: the real request with the same id still runs...
    resource = make(annotations=real, state="stopped", status={"handledRequestIds": ["r/dry-run"]})
    assert kinds(plan_connector(resource, seen(resource, "STOPPED")))[0] == "reset_offsets"
    # ... and a handled real request does not block a dry run with the same id...
    resource = make(annotations=dry, state="stopped", status={"handledRequestIds": ["r"]})
    plan = plan_connector(resource, seen(resource, "STOPPED"))
    assert kinds(plan)[0] == "dry_run_offsets" and plan.request_id == "r"
    # ... while the same dry run again is ignored.
    resource = make(annotations=dry, state="stopped", status={"handledRequestIds": ["r/dry-run"]})
    plan = plan_connector(resource, seen(resource, "STOPPED"))
    assert plan.actions == []
    assert only(plan, "OffsetsRequestIgnored").reason == "AlreadyHandled"


def test_request_id_is_part_of_the_fingerprint() -> None:
    base = make(annotations={ANNOTATION_OFFSETS: "reset"})
    one = make(annotations={ANNOTATION_OFFSETS: "reset", ANNOTATION_REQUEST_ID: "a"})
    two = make(annotations={ANNOTATION_OFFSETS: "reset", ANNOTATION_REQUEST_ID: "b"})
    prints = {offsets_request_fingerprint(r, None) for r in (base, one, two)}
    assert len(prints) == 3
    # A permanently failed request with id "a" runs again under id "b".
    failed = {
        "operation": "reset",
        "result": "Failed",
        "reason": "ConnectRejected",
        "time": iso(NOW),
        "message": "reset failed: Connect answered 400",
        "request": offsets_request_fingerprint(one, None),
    }
    retried = make(
        annotations={ANNOTATION_OFFSETS: "reset", ANNOTATION_REQUEST_ID: "b"},
        state="stopped",
        status={"lastOffsetsOperation": failed},
    )
    assert kinds(plan_connector(retried, seen(retried, "STOPPED")))[0] == "reset_offsets"
    same = make(
        annotations={ANNOTATION_OFFSETS: "reset", ANNOTATION_REQUEST_ID: "a"},
        state="stopped",
        status={"lastOffsetsOperation": failed},
    )
    plan = plan_connector(same, seen(same, "STOPPED"))
    assert plan.actions == []
    assert plan.offsets_refusal == ("Unchanged", failed["message"], True)


# --------------------------------------------------------------------------- applyOnChange


#: applyOnChange's record of an earlier content (position 3) of the alter ConfigMap: the content in
#: a test's ConfigMap is then an edit made since, which is applied.
EARLIER = {"configMap": ALTER_CM, "contentHash": content_hash(doc(3)), "time": iso(NOW), "result": "Succeeded"}


def declarative(
    state: str = "running", applied: dict[str, Any] | None = EARLIER, **kwargs: Any
) -> KafkaConnectorResource:
    status = {"appliedOffsets": applied} if applied is not None else None
    return make(state=state, apply_on_change=True, status=status, **kwargs)


@pytest.mark.parametrize(
    ("state", "observed_state", "stops"), [("running", "RUNNING", True), ("stopped", "STOPPED", False)]
)
def test_apply_on_change_begins_for_new_content(state: str, observed_state: str, stops: bool) -> None:
    resource = declarative(state)
    configmap = cm(doc(9))
    plan = plan_connector(resource, seen(resource, observed_state, configmap=configmap))
    fingerprint = offsets_request_fingerprint(resource, configmap)
    expected = [
        Action(
            "begin_offsets_change",
            pending=PendingOffsetsOperation(
                operation="alter",
                step="Stopping",
                source="applyOnChange",
                request=fingerprint,
                request_id=None,
                content_hash=content_hash(doc(9)),
                started=iso(NOW),
            ),
            configmap=ALTER_CM,
            offsets_json=compact(doc(9)),
        )
    ]
    if stops:
        expected.append(Action("stop"))
    assert plan.actions == expected
    assert plan.offsets_request == fingerprint
    assert plan.applied_offsets is None
    held(plan, observed_state)
    assert only(plan, "OffsetsOperationInProgress").reason == "Stopping"


def test_apply_on_change_changed_content_applies_again() -> None:
    old = {"configMap": ALTER_CM, "contentHash": content_hash(doc(3)), "time": iso(NOW), "result": "Succeeded"}
    resource = declarative(applied=old)
    plan = plan_connector(resource, seen(resource, "RUNNING", configmap=cm(doc(9))))
    assert kinds(plan) == ["begin_offsets_change", "stop"]


@pytest.mark.parametrize("applied", [None, {**EARLIER, "configMap": "elsewhere"}], ids=["turned-on", "re-pointed"])
def test_apply_on_change_turned_on_adopts_the_content_found(applied: dict[str, Any] | None) -> None:
    """Issue 36: turning applyOnChange on (or pointing it at another ConfigMap) does not apply what
    the ConfigMap holds now (it may be a listing of long ago); it is recorded as the starting point
    and the next edit is applied."""
    resource = declarative(applied=applied)
    plan = plan_connector(resource, seen(resource, "RUNNING", configmap=cm(doc(9))))
    assert plan.actions == [] and plan.offsets_request is None
    assert plan.applied_offsets == AppliedOffsetsStatus(
        config_map=ALTER_CM, content_hash=content_hash(doc(9)), time=iso(NOW), result="Adopted"
    )
    assert only(plan, "OffsetsApplied") == ConditionSpec(
        "OffsetsApplied",
        "True",
        "Adopted",
        f"content {content_hash(doc(9))} of ConfigMap {ALTER_CM} found when applyOnChange was turned on "
        f"(not applied) at {iso(NOW)}; it is applied when it changes",
    )
    edited = declarative(applied=plan.applied_offsets.model_dump(by_alias=True))
    plan = plan_connector(edited, seen(edited, "RUNNING", configmap=cm(doc(11))))
    assert kinds(plan) == ["begin_offsets_change", "stop"]


def test_apply_on_change_from_creation_applies_what_its_configmap_holds() -> None:
    """A resource created with applyOnChange (generation 1) applies its ConfigMap's content: the
    GitOps layout of a resource and its offsets committed together, whichever the API server sees
    first. A ConfigMap that appears later is an edit, applied too."""
    created = make(apply_on_change=True, generation=1)
    plan = plan_connector(created, seen(created, "RUNNING", configmap=cm(doc(9))))
    assert kinds(plan) == ["begin_offsets_change", "stop"]

    waiting = make(apply_on_change=True, generation=4)  # turned on by an edit, nothing there yet
    plan = plan_connector(waiting, seen(waiting, "RUNNING", configmap=None))
    assert plan.actions == [] and only(plan, "OffsetsApplied").reason == "ConfigMapNotFound"
    assert plan.applied_offsets is not None and plan.applied_offsets.content_hash == ""
    appeared = declarative(applied=plan.applied_offsets.model_dump(by_alias=True))
    plan = plan_connector(appeared, seen(appeared, "RUNNING", configmap=cm(doc(9))))
    assert kinds(plan) == ["begin_offsets_change", "stop"]


def test_apply_on_change_never_applies_the_operators_own_listing() -> None:
    """Issue 36: the list wrote this content (recorded as Listed): reading never writes."""
    listed = {"configMap": ALTER_CM, "contentHash": content_hash(doc(30)), "time": iso(NOW), "result": "Listed"}
    resource = declarative(applied=listed)
    plan = plan_connector(resource, seen(resource, "RUNNING", configmap=cm(doc(30))))
    assert plan.actions == [] and plan.applied_offsets is None
    assert only(plan, "OffsetsApplied").reason == "Listed"
    plan = plan_connector(resource, seen(resource, "RUNNING", configmap=cm(doc(12))))  # the user's edit
    assert kinds(plan) == ["begin_offsets_change", "stop"]


@pytest.mark.parametrize(
    ("result", "status", "reason"), [("Succeeded", "True", "Applied"), ("Failed", "False", "ApplyFailed")]
)
def test_apply_on_change_same_content_does_nothing(result: str, status: str, reason: str) -> None:
    text = doc(9)
    applied = {"configMap": ALTER_CM, "contentHash": content_hash(text), "time": iso(NOW), "result": result}
    resource = declarative(applied=applied)
    # Other keys changed, resourceVersion changed: only offsets.json's content counts.
    plan = plan_connector(resource, seen(resource, "RUNNING", configmap=cm(text, rv="99", note="re-synced")))
    assert plan.actions == []
    assert only(plan, "OffsetsApplied") == ConditionSpec(
        "OffsetsApplied",
        status,
        reason,
        f"content {content_hash(text)} of ConfigMap {ALTER_CM} {'applied' if result == 'Succeeded' else 'failed'} "
        f"at {iso(NOW)}; it is applied when it changes",
    )
    assert plan.offsets_request is None and plan.offsets_refusal is None and plan.applied_offsets is None
    assert ready(plan).reason == "ConnectorRunning"


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (doc(9, "/data/other.txt"), "offsets[0].partition.filename"),
        ("{", "not valid JSON"),
        ('{"offsets": [{"partition": {"filename": "/data/in.txt"}, "offset": {"position": NaN}}]}', "NaN"),
    ],
)
def test_apply_on_change_invalid_content_is_refused_once(text: str, fragment: str) -> None:
    resource = declarative()
    configmap = cm(text)
    plan = plan_connector(resource, seen(resource, "RUNNING", configmap=configmap))
    assert_refused(plan, "alter", "InvalidOffsets", fragment)
    assert plan.actions == []
    assert plan.offsets_request == offsets_request_fingerprint(resource, configmap)
    assert plan.applied_offsets == AppliedOffsetsStatus(
        config_map=ALTER_CM, content_hash=content_hash(text), time=iso(NOW), result="Failed"
    )
    # Next pass, with the Failed record: not retried.
    again = declarative(applied=plan.applied_offsets.model_dump(by_alias=True))
    plan = plan_connector(again, seen(again, "RUNNING", configmap=configmap))
    assert plan.actions == []
    assert only(plan, "OffsetsApplied").reason == "ApplyFailed"
    assert not conditions(plan, "OffsetsOperationFailed")


@pytest.mark.parametrize(
    ("configmap", "what"),
    [
        (None, f"ConfigMap {ALTER_CM} does not exist"),
        (OffsetsConfigMap(ALTER_CM, False), f"ConfigMap {ALTER_CM} does not exist"),
        (cm(None, other="{}"), "no key offsets.json"),
    ],
)
def test_apply_on_change_waits_for_the_configmap(configmap: OffsetsConfigMap | None, what: str) -> None:
    resource = declarative()
    plan = plan_connector(resource, seen(resource, "RUNNING", configmap=configmap))
    assert plan.actions == []
    assert only(plan, "OffsetsApplied") == ConditionSpec(
        "OffsetsApplied", "False", "ConfigMapNotFound", f"applyOnChange: waiting for it ({what})"
    )
    assert plan.offsets_refusal is None


def test_apply_on_change_annotation_request_takes_precedence() -> None:
    resource = declarative(annotations={ANNOTATION_OFFSETS: "reset"})
    plan = plan_connector(resource, seen(resource, "RUNNING", configmap=cm(doc(9))))
    assert_refused(plan, "reset", "ConnectorNotStopped")
    assert not conditions(plan, "OffsetsApplied")


def test_apply_on_change_pending_cancelled_when_turned_off() -> None:
    record = pending("alter", "Stopping", source="applyOnChange", content=content_hash(doc(9)))
    resource = make(apply_on_change=False, status={"pendingOffsetsOperation": record})
    plan = plan_connector(resource, seen(resource, "RUNNING", configmap=cm(doc(9))))
    (update,) = plan.actions
    assert update.kind == "update_pending" and update.pending is not None
    assert (update.pending.step, update.pending.reason) == ("Resuming", "Cancelled")


def test_apply_on_change_pending_not_cancelled_while_on() -> None:
    record = pending("alter", "Stopping", source="applyOnChange", content=content_hash(doc(9)))
    resource = make(apply_on_change=True, status={"pendingOffsetsOperation": record})
    plan = plan_connector(resource, seen(resource, "STOPPED", configmap=cm(doc(9))))
    assert kinds(plan) == ["alter_offsets"]


def test_apply_on_change_finish_removes_no_annotation() -> None:
    record = pending("alter", "Resuming", source="applyOnChange", content="c", result="Succeeded")
    resource = make(
        apply_on_change=True, annotations={ANNOTATION_OFFSETS: "alter"}, status={"pendingOffsetsOperation": record}
    )
    plan = plan_connector(resource, seen(resource, "RUNNING", configmap=cm(doc(9))))
    assert kinds(plan) == ["finish_offsets_change"]


# --------------------------------------------------------------------------- initial offsets


def initial_resource(
    state: str = "running", initial_status: dict[str, Any] | None = None, **kwargs: Any
) -> KafkaConnectorResource:
    status = {"initialOffsets": initial_status} if initial_status is not None else None
    return make(state=state, initial=INITIAL_CM, status=status, **kwargs)


def initial_cm(text: str | None = None, rv: str = "11", **data: str) -> OffsetsConfigMap:
    return cm(text, name=INITIAL_CM, rv=rv, **data)


@pytest.mark.parametrize("state", ["running", "paused", "stopped"])
def test_initial_offsets_create_stopped_with_the_validated_document(state: str) -> None:
    resource = initial_resource(state)
    text = json.dumps(json.loads(doc(18)), indent=4)
    plan = plan_connector(resource, absent(initial=initial_cm(text)))
    (create,) = plan.actions
    assert create == Action(
        "create_with_initial_offsets",
        config=desired_config(resource),
        initial_state="STOPPED",
        configmap=INITIAL_CM,
        offsets_json='{"offsets":[{"partition":{"filename":"/data/in.txt"},"offset":{"position":18}}]}',
        request=create.request,
    )
    assert create.request and len(create.request) == 16
    assert create.config is not None and create.config[OWNER_CONFIG_KEY] == f"{NAMESPACE}/{NAME}"
    assert plan.hold_stopped == "its initial offsets are applied"
    assert ready(plan) == ConditionSpec(
        "Ready",
        "False",
        "Creating",
        f"Creating the connector STOPPED with the initial offsets of ConfigMap {INITIAL_CM}",
    )
    assert plan.requeue_after == SETTLE_DELAY_S


def test_initial_offsets_fingerprint_follows_configmap_and_generation() -> None:
    def request(resource: KafkaConnectorResource, configmap: OffsetsConfigMap) -> str | None:
        return plan_connector(resource, absent(initial=configmap)).actions[0].request

    base = request(initial_resource(), initial_cm(doc(1)))
    assert base == request(initial_resource(), initial_cm(doc(2)))  # same resourceVersion: same inputs
    assert base != request(initial_resource(), initial_cm(doc(1), rv="12"))
    assert base != request(initial_resource(generation=4), initial_cm(doc(1)))


@pytest.mark.parametrize(
    ("configmap", "fragment"),
    [
        (None, f"ConfigMap {INITIAL_CM} does not exist"),
        (OffsetsConfigMap(INITIAL_CM, False), f"ConfigMap {INITIAL_CM} does not exist"),
        (initial_cm(None, other="{}"), "has no key offsets.json (keys: other)"),
        (initial_cm("{oops"), "not valid JSON"),
        (initial_cm(doc(3, "/data/other.txt")), "offsets[0].partition.filename"),
        (initial_cm('{"offsets": []}'), "expected at least one entry"),
    ],
)
def test_initial_offsets_invalid_creates_nothing(configmap: OffsetsConfigMap | None, fragment: str) -> None:
    resource = initial_resource()
    plan = plan_connector(resource, absent(initial=configmap))
    assert plan.actions == []
    found = ready(plan)
    assert (found.status, found.reason) == ("False", "InitialOffsetsInvalid")
    assert found.message.startswith("spec.initialOffsets: ") and found.message.endswith("; nothing created")
    assert fragment in found.message
    assert plan.hold_stopped is None


@pytest.mark.parametrize("configmap", [initial_cm(doc(3)), initial_cm("{")])
def test_initial_offsets_unsupported_before_connect_3_7(configmap: OffsetsConfigMap) -> None:
    resource = initial_resource()
    plan = plan_connector(resource, absent(initial=configmap, supports_initial_state=False))
    assert plan.actions == []
    assert ready(plan) == ConditionSpec(
        "Ready",
        "False",
        "InitialOffsetsUnsupported",
        "spec.initialOffsets needs Connect 3.7 or newer (creating a connector STOPPED); nothing was created",
    )


def test_initial_offsets_failed_with_same_inputs_is_not_retried() -> None:
    configmap = initial_cm(doc(3))
    request = plan_connector(initial_resource(), absent(initial=configmap)).actions[0].request
    failure = {
        "configMap": INITIAL_CM,
        "step": "Failed",
        "time": iso(NOW),
        "request": request,
        "message": "initial offsets failed at step patch: Connect answered 500: boom",
    }
    resource = initial_resource(initial_status=failure)
    plan = plan_connector(resource, absent(initial=configmap))
    assert plan.actions == []
    assert ready(plan) == ConditionSpec("Ready", "False", "InitialOffsetsFailed", failure["message"])
    # The ConfigMap changed (new resourceVersion): tried again.
    plan = plan_connector(resource, absent(initial=initial_cm(doc(3), rv="12")))
    assert kinds(plan) == ["create_with_initial_offsets"]


def test_initial_offsets_applied_means_a_plain_create() -> None:
    applied = {"configMap": INITIAL_CM, "step": "Applied", "time": iso(NOW), "message": "applied 1"}
    resource = initial_resource("paused", initial_status=applied)
    plan = plan_connector(resource, absent(initial=initial_cm(doc(3))))
    assert plan.actions == [Action("create", config=desired_config(resource), initial_state="PAUSED")]
    assert plan.hold_stopped is None


def test_initial_offsets_creating_but_absent_creates_again() -> None:
    creating = {"configMap": INITIAL_CM, "step": "Creating", "time": iso(NOW)}
    resource = initial_resource(initial_status=creating)
    plan = plan_connector(resource, absent(initial=initial_cm(doc(3))))
    assert kinds(plan) == ["create_with_initial_offsets"]


def creating(**kwargs: Any) -> KafkaConnectorResource:
    return initial_resource(initial_status={"configMap": INITIAL_CM, "step": "Creating", "time": iso(NOW)}, **kwargs)


@pytest.mark.parametrize("observed_state", ["RUNNING", "PAUSED"])
def test_initial_offsets_creating_holds_the_connector_stopped(observed_state: str) -> None:
    resource = creating()
    plan = plan_connector(resource, seen(resource, observed_state, initial=initial_cm(doc(3))))
    assert plan.actions == [Action("stop")]
    held(plan)
    assert plan.requeue_after == SETTLE_DELAY_S


def test_initial_offsets_creating_waits_for_tasks_to_go() -> None:
    resource = creating()
    plan = plan_connector(resource, seen(resource, "STOPPED", ("RUNNING",), initial=initial_cm(doc(3))))
    assert plan.actions == []
    held(plan)
    assert plan.requeue_after == SETTLE_DELAY_S


def test_initial_offsets_creating_applies_once_stopped() -> None:
    resource = creating()
    configmap = initial_cm(doc(3))
    expected_request = plan_connector(initial_resource(), absent(initial=configmap)).actions[0].request
    plan = plan_connector(resource, seen(resource, "STOPPED", initial=configmap))
    assert plan.actions == [
        Action("apply_initial_offsets", configmap=INITIAL_CM, offsets_json=compact(doc(3)), request=expected_request)
    ]
    held(plan)
    assert plan.requeue_after == SETTLE_DELAY_S


def test_initial_offsets_creating_with_invalid_document_fails_the_step() -> None:
    resource = creating()
    plan = plan_connector(resource, seen(resource, "STOPPED", initial=initial_cm("[1]")))
    (action,) = plan.actions
    assert action.kind == "apply_initial_offsets" and action.offsets_json is None
    assert action.operation is not None
    assert action.operation.startswith(f"ConfigMap {INITIAL_CM} key offsets.json is invalid:")


def test_initial_offsets_creating_but_removed_from_spec_does_not_crash() -> None:
    """status says Creating but spec.initialOffsets is gone: the connector is managed as usual."""
    resource = make(status={"initialOffsets": {"configMap": INITIAL_CM, "step": "Creating", "time": iso(NOW)}})
    plan = plan_connector(resource, seen(resource, "STOPPED"))
    assert plan.actions == [Action("resume")]
    assert plan.hold_stopped is None


def test_initial_offsets_applied_connector_present_is_managed_normally() -> None:
    applied = {"configMap": INITIAL_CM, "step": "Applied", "time": iso(NOW)}
    resource = initial_resource(initial_status=applied)
    plan = plan_connector(resource, seen(resource, "STOPPED"))
    assert plan.actions == [Action("resume")]


# --------------------------------------------------------------------------- MirrorMaker 2


def mm2_target(
    annotations: dict[str, str],
    connector: str = mm2.SOURCE,
    status: dict[str, Any] | None = None,
    block: dict[str, Any] | None = None,
) -> tuple[list[ConnectorTarget], ConnectorTarget]:
    block = block or {
        "state": "running",
        "listOffsets": {"toConfigMap": {"name": "mm2-offsets"}},
        "alterOffsets": {"fromConfigMap": {"name": "mm2-offsets"}},
    }
    resource = mm2.make_mm2(annotations=annotations, mirrors=mm2.with_offsets_blocks(block), status=status)
    targets = mirror_targets(resource, mm2.SECRETS).targets
    return targets, next(t for t in targets if t.name == connector)


def mm2_seen(target: ConnectorTarget, state: str, configmap: OffsetsConfigMap | None = None) -> Observed:
    return mm2.observe(target, state, configmap)


def test_mm2_request_annotations_reach_only_the_selected_connector() -> None:
    annotations = {
        ANNOTATION_OFFSETS: "reset",
        ANNOTATION_MM2_CONNECTOR: mm2.CHECKPOINT,
        ANNOTATION_DRY_RUN: "true",
        ANNOTATION_STOP_CONNECTOR: "true",
        ANNOTATION_REQUEST_ID: "mm-1",
    }
    targets, selected = mm2_target(annotations, mm2.CHECKPOINT)
    assert selected.annotations == {
        ANNOTATION_OFFSETS: "reset",
        ANNOTATION_DRY_RUN: "true",
        ANNOTATION_STOP_CONNECTOR: "true",
        ANNOTATION_REQUEST_ID: "mm-1",
    }
    assert [t.annotations for t in targets if t is not selected] == [{}, {}]
    for other in (t for t in targets if t is not selected):
        assert plan_target(other, mm2_seen(other, "RUNNING")).actions == []


def test_mm2_dry_run_on_running_connector() -> None:
    annotations = {ANNOTATION_OFFSETS: "alter", ANNOTATION_MM2_CONNECTOR: mm2.SOURCE, ANNOTATION_DRY_RUN: "true"}
    _, target = mm2_target(annotations)
    plan = plan_target(target, mm2_seen(target, "RUNNING", mm2.mm2_cm(mm2.SOURCE, mm2.SOURCE_DOC)))
    assert plan.actions == [
        Action(
            "dry_run_offsets",
            operation="alter",
            configmap="mm2-offsets",
            offsets_json=parse_offsets_document(json.dumps(mm2.SOURCE_DOC)).to_compact_json(),
        ),
        removal(ANNOTATION_OFFSETS, "alter"),
        removal(ANNOTATION_MM2_CONNECTOR, mm2.SOURCE),
        removal(ANNOTATION_DRY_RUN, "true"),
        handled("200"),
    ]


def test_mm2_invalid_dry_run_flag_refused() -> None:
    annotations = {ANNOTATION_OFFSETS: "reset", ANNOTATION_MM2_CONNECTOR: mm2.SOURCE, ANNOTATION_DRY_RUN: "ja"}
    _, target = mm2_target(annotations)
    plan = plan_target(target, mm2_seen(target, "RUNNING"))
    assert_refused(plan, "reset", "InvalidAnnotation", "dry-run='ja' must be true or false")
    assert plan.actions == []


@pytest.mark.parametrize("trigger", ["annotation", "policy"])
def test_mm2_stop_change_resume_begins_on_the_selected_connector(trigger: str) -> None:
    annotations = {ANNOTATION_OFFSETS: "reset", ANNOTATION_MM2_CONNECTOR: mm2.SOURCE, ANNOTATION_REQUEST_ID: "mm-2"}
    block: dict[str, Any] = {"state": "running"}
    if trigger == "annotation":
        annotations[ANNOTATION_STOP_CONNECTOR] = "true"
    else:
        block["offsetsPolicy"] = {"stopConnector": True}
    _, target = mm2_target(annotations, block=block)
    plan = plan_target(target, mm2_seen(target, "RUNNING"))
    assert kinds(plan) == ["begin_offsets_change", "stop"]
    begin = plan.actions[0].pending
    assert begin is not None
    assert (begin.operation, begin.step, begin.source, begin.request_id) == ("reset", "Stopping", "annotation", "mm-2")
    assert plan.hold_stopped and ready(plan).reason == "StoppedForOffsetsChange"


def test_mm2_pending_is_per_connector() -> None:
    annotations = {ANNOTATION_OFFSETS: "reset", ANNOTATION_MM2_CONNECTOR: mm2.SOURCE, ANNOTATION_STOP_CONNECTOR: "true"}
    status = {"connectors": [{"name": mm2.SOURCE, "pendingOffsetsOperation": pending("reset", "Stopping")}]}
    targets, source = mm2_target(annotations, status=status)
    assert source.pending is not None and source.pending.operation == "reset"
    assert [t.pending for t in targets if t is not source] == [None, None]
    plan = plan_target(source, mm2_seen(source, "STOPPED"))
    assert plan.actions == [Action("reset_offsets", pending=source.pending)]
    for other in (t for t in targets if t is not source):
        assert plan_target(other, mm2_seen(other, "RUNNING")).actions == []


def test_mm2_finish_removes_selector_and_request_annotations() -> None:
    annotations = {
        ANNOTATION_OFFSETS: "reset",
        ANNOTATION_MM2_CONNECTOR: mm2.SOURCE,
        ANNOTATION_STOP_CONNECTOR: "true",
        ANNOTATION_REQUEST_ID: "mm-3",
    }
    record = pending("reset", "Resuming", result="Succeeded", request_id="mm-3")
    _, source = mm2_target(
        annotations, status={"connectors": [{"name": mm2.SOURCE, "pendingOffsetsOperation": record}]}
    )
    plan = plan_target(source, mm2_seen(source, "RUNNING"))
    assert plan.actions == [
        Action("finish_offsets_change", pending=source.pending),
        removal(ANNOTATION_OFFSETS, "reset"),
        removal(ANNOTATION_MM2_CONNECTOR, mm2.SOURCE),
        removal(ANNOTATION_STOP_CONNECTOR, "true"),
        removal(ANNOTATION_REQUEST_ID, "mm-3"),
        handled("200"),
    ]


def test_mm2_selector_withdrawn_cancels_the_pending_change() -> None:
    status = {"connectors": [{"name": mm2.SOURCE, "pendingOffsetsOperation": pending("reset", "Stopping")}]}
    _, source = mm2_target({}, status=status)
    plan = plan_target(source, mm2_seen(source, "RUNNING"))
    (update,) = plan.actions
    assert update.kind == "update_pending" and update.pending is not None and update.pending.reason == "Cancelled"


def test_mm2_handled_request_id_is_resource_wide() -> None:
    annotations = {ANNOTATION_OFFSETS: "reset", ANNOTATION_MM2_CONNECTOR: mm2.HEARTBEAT, ANNOTATION_REQUEST_ID: "mm-4"}
    block = {"state": "stopped"}
    _, target = mm2_target(annotations, mm2.HEARTBEAT, status={"handledRequestIds": ["mm-4"]}, block=block)
    plan = plan_target(target, mm2_seen(target, "STOPPED"))
    assert plan.actions == []
    assert only(plan, "OffsetsRequestIgnored").reason == "AlreadyHandled"


def test_mm2_apply_on_change_per_connector() -> None:
    block = {
        "state": "running",
        "alterOffsets": {"fromConfigMap": {"name": "mm2-offsets"}, "applyOnChange": True},
    }
    earlier = {"name": mm2.SOURCE, "appliedOffsets": {**EARLIER, "configMap": "mm2-offsets"}}
    targets, source = mm2_target({}, block=block, status={"connectors": [earlier]})
    configmap = mm2.mm2_cm(mm2.SOURCE, mm2.SOURCE_DOC)
    plan = plan_target(source, mm2_seen(source, "RUNNING", configmap))
    assert kinds(plan) == ["begin_offsets_change", "stop"]
    begin = plan.actions[0].pending
    assert begin is not None and begin.source == "applyOnChange"
    assert begin.content_hash == content_hash(configmap.data[mm2.mirror_configmap_key(mm2.SOURCE)])
    # The checkpoint connector's key is absent from this ConfigMap: it waits, and says so.
    checkpoint = next(t for t in targets if t.name == mm2.CHECKPOINT)
    plan = plan_target(checkpoint, mm2_seen(checkpoint, "RUNNING", configmap))
    assert plan.actions == []
    assert only(plan, "OffsetsApplied").reason == "ConfigMapNotFound"


def test_resuming_ends_when_the_connector_failed_after_the_resume() -> None:
    """A connector that FAILED after the resume must not keep the change open forever."""
    resource = staged(step="Resuming", result="Succeeded", message="alter: done")
    plan = plan_connector(resource, seen(resource, "FAILED"))
    assert [a.kind for a in plan.actions][:1] == ["finish_offsets_change"]


def test_condition_messages_are_capped() -> None:
    """A validation report of a huge document must not blow up the status."""
    from connect_offsets.planning.outcomes import MAX_CONDITION_MESSAGE
    from connect_offsets.reconcile.status import merge_conditions

    merged = merge_conditions(
        [], [ConditionSpec("OffsetsOperationFailed", "True", "InvalidOffsets", "x" * 500_000)], 1, "t"
    )
    message = merged[0]["message"]
    assert len(message) <= MAX_CONDITION_MESSAGE
    assert "characters cut) ... xxx" in message and message.startswith("xxxx") and message.endswith("xxxx")
    short = merge_conditions([], [ConditionSpec("Ready", "True", "ConnectorRunning", "fine")], 1, "t")
    assert short[0]["message"] == "fine"


def test_observed_without_documents_keeps_everything_but_the_texts() -> None:
    """After planning the service drops the offsets texts (the plan carries what it sends)."""
    configmap = OffsetsConfigMap("cm", True, "7", {"offsets.json": doc(5), "other": "x"})
    observed = Observed(
        NOW,
        None,
        True,
        {"connector.class": "x"},
        None,
        alter_configmap=configmap,
        restore=backup_source(),
        initial_configmap=configmap,
    )
    slim = observed.without_documents()
    assert slim.alter_configmap == OffsetsConfigMap("cm", True, "7", {"offsets.json": "", "other": ""})
    assert slim.initial_configmap == slim.alter_configmap
    assert slim.restore == RestoreSource(name=BACKUP, resource_version="55")
    assert (slim.now, slim.config, slim.supports_initial_state) == (NOW, {"connector.class": "x"}, True)
    assert observed.alter_configmap is configmap  # the original is not changed


@pytest.mark.parametrize("observed_state", ["STOPPED", "RUNNING"])
def test_a_backup_gets_the_typed_checks_of_an_alter(observed_state: str) -> None:
    """Issue 21: a restore once skipped the connector-family checks, so a bad backup reached Connect."""
    resource = make(annotations={ANNOTATION_OFFSETS: "restore"}, stop_policy=True)
    edited = json.dumps({"offsets": [{"partition": {"filename": FILE}, "offset": {"position": -4}}]})
    source = dataclasses.replace(backup_source(), backup_json=edited)
    plan = plan_connector(resource, seen(resource, observed_state, restore=source))
    message = assert_refused(plan, "restore", "InvalidBackup", f"backup {BACKUP} is not valid for this connector")
    assert "offsets[0].offset.position" in message
    # the same backup without the edit is restored
    good = plan_connector(resource, seen(resource, "STOPPED", restore=backup_source()))
    assert any(a.kind == "restore_offsets" for a in good.actions), good.actions
