"""Offsets requests (list, alter, reset, restore, dry runs, ``applyOnChange``): validated before
anything is touched, refused with a reason the user can act on, or staged as stop -> change ->
resume that survives restarts (``PendingOffsetsOperation``).
"""

from __future__ import annotations

from typing import Literal

from connect_offsets.models.crds import (
    AppliedOffsetsStatus,
    ConnectorState,
    OffsetsOperationStatus,
    PendingOffsetsOperation,
    parse_rfc3339,
)
from connect_offsets.offsets import (
    OffsetsValidationError,
    restore_compact_json,
    validated_compact_json,
)
from connect_offsets.planning.copies import copy_document, pin_action, pinned_copy, pinned_document, typed_problems
from connect_offsets.planning.plan import (
    KAFKA_RETRY_S,
    RESTART_VALUES,
    SETTLE_DELAY_S,
    Action,
    ConditionSpec,
    Observed,
    OffsetsConfigMap,
    Plan,
    PlannedRefusal,
    configmap_text,
)
from connect_offsets.planning.targets import (
    CONNECT_STATE,
    ConnectorTarget,
    content_hash,
    dry_run_from_problem,
    handled_before,
    parse_task_id,
    request_key,
    target_config,
    target_fingerprint,
)
from connect_offsets.vocabulary import (
    ANNOTATION_DRY_RUN,
    ANNOTATION_HANDLED_REQUEST,
    ANNOTATION_OFFSETS,
    ANNOTATION_REQUEST_ID,
    ANNOTATION_RESTART,
    ANNOTATION_RESTART_TASK,
    ANNOTATION_RESTORE_FROM,
    ANNOTATION_SEEK_TO,
    ANNOTATION_STOP_CONNECTOR,
    MIRROR_CLASSES,
    OFFSETS_OPERATIONS,
    REQUEST_ANNOTATIONS,
    iso,
)

#: Refusals that pass: the request is tried again after ``KAFKA_RETRY_S``, nothing is recorded.
TRANSIENT_REASONS = frozenset({"KafkaUnavailable", "SourceUnavailable"})


def plan_offsets(target: ConnectorTarget, observed: Observed, plan: Plan) -> None:
    if target.pending is not None:
        _plan_pending(target, observed, plan, target.pending)
        return
    annotations = target.annotations
    value = annotations.get(ANNOTATION_OFFSETS)
    unremoved = _unremoved(target)
    if value is None:
        if unremoved is not None and unremoved.instance is not None and unremoved.instance.isdigit():
            # Its annotations went away without us (withdrawn after its outcome was recorded, while
            # our removal could not be done): say so, or an identical request made later would be
            # taken for this one and never run.
            plan.actions.append(_mark_handled(unremoved.instance))
        if target.apply_on_change:
            _plan_apply_on_change(target, observed, plan)
        return
    if value not in OFFSETS_OPERATIONS:
        return
    key = request_key(target)
    if unremoved is not None and unremoved.instance is not None and unremoved.request_key == key:
        # Finished, and only the removal of its annotations was interrupted (the operator died,
        # or the API server kept refusing): finish that, never run the request again.
        plan.actions += _request_removals(target, value, unremoved.instance)
        return
    plan.request_key = key
    plan.request_instance = target.resource_version or None
    dry_run = annotations.get(ANNOTATION_DRY_RUN) == "true"
    request_id = annotations.get(ANNOTATION_REQUEST_ID)
    if request_id is not None and _handled_key(request_id, dry_run) in target.handled_request_ids:
        # A GitOps tool re-applied a request that already ran: leave everything as it is.
        plan.conditions.append(
            ConditionSpec(
                "OffsetsRequestIgnored",
                "True",
                "AlreadyHandled",
                f"{ANNOTATION_REQUEST_ID}={request_id!r} was already handled"
                + (f" ({_describe_last(target.last_offsets_operation)})" if target.last_offsets_operation else "")
                + "; set a new request id to run it again",
            )
        )
        return
    plan.request_id = request_id
    source = _alter_source(target, observed)[1] if value == "alter" else None
    if value == "restore" and observed.restore is not None and observed.restore.name is not None:
        source = OffsetsConfigMap(observed.restore.name, True, observed.restore.resource_version)
    fingerprint = target_fingerprint(target, source)
    last = target.last_offsets_operation
    if last is not None and last.request == fingerprint and last.result == "Failed":
        # Failed permanently for exactly these inputs: wait for the resource or ConfigMap to change.
        plan.offsets_request = fingerprint
        plan.offsets_refusal = ("Unchanged", last.message, True)
        plan.conditions.append(
            ConditionSpec("OffsetsOperationFailed", "True", last.reason or "RequestFailed", last.message)
        )
        return
    plan.offsets_request = fingerprint
    removals = _request_removals(target, value, target.resource_version)

    for key in (ANNOTATION_DRY_RUN, ANNOTATION_STOP_CONNECTOR):
        flag = annotations.get(key)
        if flag is not None and flag not in ("true", "false"):
            # A typo must never turn a dry run into a real change.
            _refuse(plan, value, "InvalidAnnotation", f"{key}={flag!r} must be true or false; nothing was done", True)
            return
    misuse = dry_run_from_problem(target)
    if misuse is not None:
        _refuse(plan, value, "InvalidAnnotation", misuse, True)
        return

    if value == "list":
        if target.list_configmap is None:
            _refuse(
                plan, "list", "MissingListOffsets", f"{target.spec_path}.listOffsets.toConfigMap.name is not set", True
            )
            return
        plan.actions += [Action("list_offsets", configmap=target.list_configmap), *removals]
        return

    requested = _requested_offsets(target, observed, value, plan)
    if not dry_run:
        plan.alter_content = _applied_content(target, observed, value)
    if isinstance(requested, PlannedRefusal):
        transient = requested.reason in TRANSIENT_REASONS
        _refuse(plan, value, requested.reason, requested.message, not transient)
        if transient:
            plan.requeue(KAFKA_RETRY_S)
        return
    copies = value == "alter" and target.copies()
    if dry_run:
        # Needs no STOPPED state: it only reads the offsets. A copy's report lists what will not match.
        copied = observed.copy_source.description if copies and observed.copy_source else None
        unmatched = typed_problems(target, observed, requested) if copies and requested else ()
        plan.actions += [
            Action(
                "dry_run_offsets",
                operation=value,
                configmap=target.list_configmap,
                offsets_json=requested,
                source=copied,
                not_matching=unmatched,
            ),
            *removals,
        ]
        return
    if copies and requested is not None and pinned_copy(target) is None:
        # The source as read now is what this request applies, whenever it gets to: pinned first.
        plan.actions.append(pin_action(observed, requested, plan.request_key))
        plan.requeue(0.0)
        return

    status = observed.status
    if status is None or not status.is_stopped:
        state = status.state if status else "unknown"
        if target.state is ConnectorState.STOPPED:
            # The stop is on its way (Connect's status lags `PUT /stop`): look again shortly.
            plan.offsets_refusal = ("WaitingForStop", f"waiting for Connect to report STOPPED (now {state})", False)
            plan.requeue(SETTLE_DELAY_S)
            return
        if target.stop_policy or annotations.get(ANNOTATION_STOP_CONNECTOR) == "true":
            document = requested if value == "alter" and _reads_configmap(target) else None
            _begin(target, observed, plan, value, "annotation", fingerprint, request_id, plan.alter_content, document)
            return
        _refuse(
            plan,
            value,
            "ConnectorNotStopped",
            f"the connector is {state} in Connect; {value} needs it STOPPED. Set {target.spec_path}.state: stopped "
            f"and wait for Ready=True (ConnectorStopped), or let the operator stop and resume it: annotate "
            f"{ANNOTATION_STOP_CONNECTOR}=true or set {target.spec_path}.offsetsPolicy.stopConnector: true",
            True,
        )
        return
    plan.actions += [_change_action(value, target, observed, requested), *removals]


def _change_action(operation: str, target: ConnectorTarget, observed: Observed, requested: str | None) -> Action:
    if operation == "alter":
        return Action("alter_offsets", configmap=target.alter_configmap, offsets_json=requested)
    if operation == "restore":
        assert observed.restore is not None
        return Action("restore_offsets", configmap=observed.restore.name, offsets_json=requested)
    return Action("reset_offsets")


def _requested_offsets(
    target: ConnectorTarget, observed: Observed, operation: str, plan: Plan
) -> str | PlannedRefusal | None:
    """The validated document an alter or restore sends (None for reset), or why there is none."""
    key = target.configmap_key
    if operation == "alter" and target.pending is not None and target.pending.pinned:
        # A staged change applies what it pinned when it began (a copy's source, or its ConfigMap's
        # document), whatever the source or the ConfigMap holds now.
        return pinned_document(target, observed, target.pending.pinned)
    if operation == "alter" and target.copies():
        return copy_document(target, observed, dry_run=target.annotations.get(ANNOTATION_DRY_RUN) == "true")
    if operation == "alter" and target.seek_to() is not None:
        return _seek_document(target, observed, target.seek_to() or "")
    if operation == "alter":
        name, configmap = _alter_source(target, observed)
        if name is None:
            return PlannedRefusal(
                "MissingAlterOffsets", f"{target.spec_path}.alterOffsets.fromConfigMap.name is not set"
            )
        text = configmap_text(configmap, name, key)
        if isinstance(text, PlannedRefusal):
            return text
        # Validate before anything touches Connect: bad input never leads to a stop or a PATCH.
        # Streamed: a million-partition document is checked without holding it parsed.
        is_sink = observed.status.type == "sink" if observed.status and observed.status.type else None
        try:
            return validated_compact_json(
                text,
                target.class_name,
                target_config(target),
                is_sink=is_sink,
                translate_replay=target.class_name == MIRROR_CLASSES["MirrorSourceConnector"],
            )
        except OffsetsValidationError as error:
            return PlannedRefusal("InvalidOffsets", f"ConfigMap {name} key {key} is invalid:\n{error}")
    if operation == "restore":
        return _restore_document(target, observed)
    return None


def _reads_configmap(target: ConnectorTarget) -> bool:
    """Whether an alter's document is read from ``spec.alterOffsets.fromConfigMap`` (not a copy,
    which pins its own source, nor a seek, which asks Kafka): the document a staged change pins."""
    return not target.copies() and target.seek_to() is None and target.dry_run_source() is None


def _applied_content(target: ConnectorTarget, observed: Observed, operation: str) -> str | None:
    """The content hash an alter request applies when it reads the applyOnChange ConfigMap (None
    otherwise): recorded once it succeeded, so applyOnChange does not apply the same content again
    (the plugin's ``alter --from-file`` writes the document there and annotates)."""
    if operation != "alter" or not target.apply_on_change or target.seek_to() is not None:
        return None
    name, configmap = _alter_source(target, observed)
    if name != target.alter_configmap or configmap is None or target.configmap_key not in configmap.data:
        return None
    return content_hash(configmap.data[target.configmap_key])


def _alter_source(target: ConnectorTarget, observed: Observed) -> tuple[str | None, OffsetsConfigMap | None]:
    """Where an alter reads its document: the ``dry-run-from`` ConfigMap of a dry run that names one,
    else ``spec.alterOffsets.fromConfigMap``."""
    dry_run_source = target.dry_run_source()
    if dry_run_source is not None:
        return dry_run_source, observed.dry_run_configmap
    if target.copies():
        # A copy's identity is its annotations: the pinned copy is made by the request itself.
        return None, None
    return target.alter_configmap, observed.alter_configmap


def _seek_document(target: ConnectorTarget, observed: Observed, when: str) -> str | PlannedRefusal:
    """The sink offsets for a seek to ``when``: from Kafka (observed), validated like any alter."""
    if parse_rfc3339(when) is None:
        return PlannedRefusal(
            "InvalidTimestamp",
            f"{ANNOTATION_SEEK_TO}={when!r} is not an RFC 3339 time with a zone, e.g. 2026-11-21T10:00:00Z",
        )
    status = observed.status
    if status is None or status.type != "sink":
        kind = status.type if status is not None and status.type else "unknown"
        return PlannedRefusal("NotASink", f"seeking to a time needs a sink connector; Connect reports type {kind}")
    seek = observed.seek
    if seek is None or seek.document_json is None:
        reason = "KafkaUnavailable" if seek is not None and seek.transient else "SeekFailed"
        return PlannedRefusal(reason, seek.error if seek is not None and seek.error else "no offsets for the time")
    try:
        return validated_compact_json(seek.document_json, target.class_name, target_config(target), is_sink=True)
    except OffsetsValidationError as error:
        return PlannedRefusal("InvalidOffsets", f"offsets for {when} are invalid:\n{error}")


def _unremoved(target: ConnectorTarget) -> OffsetsOperationStatus | None:
    """The target's last outcome, if it finished an annotation request whose annotations the
    operator has not removed yet (``handled_before``); None otherwise."""
    last = target.last_offsets_operation
    if last is None or last.result != "Succeeded" or last.instance is None or last.request_key is None:
        return None
    return None if handled_before(target.handled_marker, last.instance) else last


def _mark_handled(instance: str) -> Action:
    return Action("mark_handled", annotation=ANNOTATION_HANDLED_REQUEST, annotation_value=instance)


def _request_removals(target: ConnectorTarget, value: str, instance: str) -> list[Action]:
    """Remove the request's annotations (each only while it still has the value acted on), and
    mark ``instance`` handled in the same patch (a body without a resourceVersion, which only a
    test builds, has no instance to mark)."""
    removals = [Action("remove_annotation", annotation=ANNOTATION_OFFSETS, annotation_value=value)] + [
        Action("remove_annotation", annotation=key, annotation_value=val) for key, val in target.companion_annotations
    ]
    companions = {key for key, _ in target.companion_annotations}
    extra = [*REQUEST_ANNOTATIONS, ANNOTATION_RESTORE_FROM] if value == "restore" else list(REQUEST_ANNOTATIONS)
    for key in extra:
        if key in target.annotations and key not in companions:
            removals.append(Action("remove_annotation", annotation=key, annotation_value=target.annotations[key]))
    return [*removals, _mark_handled(instance)] if instance else removals


def _handled_key(request_id: str, dry_run: bool) -> str:
    """Dry runs are recorded apart: the same id without dry-run must still run for real."""
    return f"{request_id}/dry-run" if dry_run else request_id


def _describe_last(last: OffsetsOperationStatus | None) -> str:
    if last is None:
        return ""
    return f"last operation: {last.operation} {last.result} at {last.time}"


def _begin(
    target: ConnectorTarget,
    observed: Observed,
    plan: Plan,
    operation: str,
    source: Literal["annotation", "applyOnChange"],
    fingerprint: str,
    request_id: str | None,
    content: str | None = None,
    document: str | None = None,
) -> None:
    """Record the intent (in status, before anything else), then stop the connector.

    ``document``: an alter's validated document read from its ConfigMap now; the executor pins it
    (``pins.pin_document``) and names the pin in the intent, so the change applies this content
    however the ConfigMap is edited while the connector stops (``content`` is its hash)."""
    pending = PendingOffsetsOperation(
        operation=operation,
        step="Stopping",
        seek_to=target.seek_to() if operation == "alter" else None,
        source=source,
        request=fingerprint,
        request_id=request_id,
        request_key=request_key(target) if source == "annotation" else None,
        content_hash=content,
        restore_from=observed.restore.name if operation == "restore" and observed.restore else None,
        pinned=pinned_copy(target) if operation == "alter" else None,
        started=iso(observed.now),
    )
    where = target.alter_configmap if document is not None else None
    plan.actions.append(Action("begin_offsets_change", pending=pending, configmap=where, offsets_json=document))
    plan.hold_stopped = f"{operation} runs (stop -> change -> resume)"
    plan.offsets_request = fingerprint
    plan.conditions.append(
        ConditionSpec(
            "OffsetsOperationInProgress", "True", "Stopping", f"{operation}: stopping the connector before the change"
        )
    )
    plan.requeue(SETTLE_DELAY_S)


def _plan_pending(target: ConnectorTarget, observed: Observed, plan: Plan, pending: PendingOffsetsOperation) -> None:
    """Continue a stop -> change -> resume from the step status records (also after a restart)."""
    plan.offsets_request = pending.request
    plan.request_id = pending.request_id
    plan.request_key = pending.request_key
    plan.request_instance = target.resource_version or None
    status = observed.status
    operation = pending.operation
    if pending.step == "Resuming" and pending.result is None:
        # Only a hand-edited record lacks the outcome; never publish it as a success.
        pending = pending.model_copy(
            update={"result": "Failed", "reason": "Interrupted", "message": f"{operation}: outcome unknown"}
        )
    if pending.step == "Resuming":
        want = CONNECT_STATE[target.state]
        # FAILED after the resume also ends the change: Ready reports the failure, and auto-restart
        # (or the user) takes it from there; waiting for spec.state would never finish.
        if status is not None and (status.state == want or status.state == "FAILED"):
            plan.actions.append(Action("finish_offsets_change", pending=pending))
            value = target.annotations.get(ANNOTATION_OFFSETS)
            if pending.source == "annotation" and value == operation and pending.result == "Succeeded":
                plan.actions += _request_removals(target, value, target.resource_version)
            if pending.source == "applyOnChange":
                # An edit made while this apply ran was seen and waited; look at it right away.
                plan.requeue(SETTLE_DELAY_S)
            return
        plan.conditions.append(
            ConditionSpec(
                "OffsetsOperationInProgress",
                "True",
                "Resuming",
                f"{operation} done ({pending.result}); moving the connector back to {want}",
            )
        )
        plan.requeue(SETTLE_DELAY_S)
        return
    withdrawn = (
        target.annotations.get(ANNOTATION_OFFSETS) != operation
        if pending.source == "annotation"
        else not target.apply_on_change
    )
    if operation not in ("alter", "reset", "restore"):
        # A record no operator wrote (hand-edited status): anything but alter/restore would become a reset.
        withdrawn = True
        reason, message = "UnknownOperation", f"pending operation {operation!r} is not alter, reset or restore"
    else:
        reason, message = "Cancelled", f"{operation} cancelled: the request was withdrawn before the connector stopped"
    if withdrawn and (pending.step == "Stopping" or reason == "UnknownOperation"):
        cancelled = pending.model_copy(
            update={"step": "Resuming", "result": "Failed", "reason": reason, "message": message}
        )
        plan.actions.append(Action("update_pending", pending=cancelled))
        plan.requeue(SETTLE_DELAY_S)
        return
    plan.hold_stopped = f"{operation} is in progress (step {pending.step})"
    if status is None or not status.is_stopped:
        now = status.state if status else "unknown"
        tasks = f" with {len(status.tasks)} task(s)" if status is not None and status.tasks else ""
        plan.conditions.append(
            ConditionSpec(
                "OffsetsOperationInProgress",
                "True",
                "Stopping",
                f"{operation}: waiting for Connect to report STOPPED with no tasks (now {now}{tasks})",
            )
        )
        plan.requeue(SETTLE_DELAY_S)
        return
    requested = _requested_offsets(target, observed, operation, plan)
    if isinstance(requested, PlannedRefusal) and requested.reason in TRANSIENT_REASONS:
        plan.conditions.append(ConditionSpec("OffsetsOperationInProgress", "True", "Changing", requested.message))
        plan.requeue(KAFKA_RETRY_S)
        return
    if isinstance(requested, PlannedRefusal):
        # The input changed while the connector was stopping: refuse, and bring it back.
        failed = pending.model_copy(
            update={
                "step": "Resuming",
                "result": "Failed",
                "reason": requested.reason,
                "message": f"{operation} refused: {requested.message}",
            }
        )
        plan.actions.append(Action("update_pending", pending=failed))
        # Recorded first (above), so the connector may go back to spec.state in this very pass.
        plan.hold_stopped = None
        plan.conditions.append(
            ConditionSpec(
                "OffsetsOperationInProgress",
                "True",
                "Resuming",
                f"{failed.message}; moving the connector back to {CONNECT_STATE[target.state]}",
            )
        )
        plan.requeue(SETTLE_DELAY_S)
        return
    action = _change_action(operation, target, observed, requested)
    plan.actions.append(
        Action(action.kind, configmap=action.configmap, offsets_json=action.offsets_json, pending=pending)
    )
    plan.conditions.append(
        ConditionSpec("OffsetsOperationInProgress", "True", "Changing", f"{operation}: backing up and changing")
    )
    plan.requeue(SETTLE_DELAY_S)


def _plan_apply_on_change(target: ConnectorTarget, observed: Observed, plan: Plan) -> None:
    """Declarative alter: apply the ConfigMap once per content change, with stop -> change -> resume."""
    configmap = observed.alter_configmap
    name = target.alter_configmap
    key = target.configmap_key
    if name is None:
        return
    if configmap is not None and configmap.error is not None:
        plan.conditions.append(
            ConditionSpec("OffsetsApplied", "False", configmap.error_reason, f"ConfigMap {name}: {configmap.error}")
        )
        return
    applied = target.applied_offsets
    first_sight = applied is None or applied.config_map != name
    if configmap is None or not configmap.exists or key not in configmap.data:
        what = f"ConfigMap {name} does not exist" if configmap is None or not configmap.exists else f"no key {key}"
        plan.conditions.append(
            ConditionSpec("OffsetsApplied", "False", "ConfigMapNotFound", f"applyOnChange: waiting for it ({what})")
        )
        if first_sight:
            # Nothing there to start from: whatever appears next is an edit, and is applied.
            plan.applied_offsets = AppliedOffsetsStatus(
                config_map=name, content_hash="", time=iso(observed.now), result="Adopted"
            )
        return
    content = content_hash(configmap.data[key])
    if first_sight and target.generation > 1:
        # Turned on (or pointed at another ConfigMap) by an edit of the spec: what is there now may
        # be a listing of long ago, so it is the starting point, not applied; the next edit is
        # (issue 36). A resource created with applyOnChange applies what its ConfigMap holds.
        plan.applied_offsets = AppliedOffsetsStatus(
            config_map=name, content_hash=content, time=iso(observed.now), result="Adopted"
        )
        applied = plan.applied_offsets
    if applied is not None and applied.config_map == name and applied.content_hash == content:
        reason, state, text = _APPLIED_STATES[applied.result]
        plan.conditions.append(
            ConditionSpec(
                "OffsetsApplied",
                state,
                reason,
                f"content {content} of ConfigMap {name} {text} at {applied.time}; it is applied when it changes",
            )
        )
        return
    fingerprint = target_fingerprint(target, configmap)
    plan.offsets_request = fingerprint
    requested = _requested_offsets(target, observed, "alter", plan)
    if isinstance(requested, PlannedRefusal):
        _refuse(plan, "alter", requested.reason, requested.message, True)
        plan.applied_offsets = AppliedOffsetsStatus(
            config_map=name, content_hash=content, time=iso(observed.now), result="Failed"
        )
        return
    document = requested if _reads_configmap(target) else None
    _begin(target, observed, plan, "alter", "applyOnChange", fingerprint, None, content, document)


#: OffsetsApplied for content that was already handled: (reason, status, what happened to it).
_APPLIED_STATES: dict[str, tuple[str, Literal["True", "False"], str]] = {
    "Succeeded": ("Applied", "True", "applied"),
    "Failed": ("ApplyFailed", "False", "failed"),
    "Listed": ("Listed", "True", "written by the operator's own list (not applied)"),
    "Adopted": ("Adopted", "True", "found when applyOnChange was turned on (not applied)"),
}


def _restore_document(target: ConnectorTarget, observed: Observed) -> str | PlannedRefusal:
    """The PATCH that puts the backup's offsets back exactly: its entries, plus null for partitions
    that exist now but not in the backup (PATCH alone would leave them). The backup gets the same
    typed checks as an ``alter`` document (issue 21: an invalid sink backup reached Connect)."""
    source = observed.restore
    wanted = target.annotations.get(ANNOTATION_RESTORE_FROM)
    if source is None or source.name is None:
        which = f"backup {wanted}" if wanted else "any backup"
        return PlannedRefusal("BackupNotFound", f"{which} of connector {target.name} not found")
    try:
        is_sink = observed.status.type == "sink" if observed.status and observed.status.type else None
        restored = restore_compact_json(
            source.backup_json, source.current_json, target.class_name, target_config(target), is_sink=is_sink
        )
    except OffsetsValidationError as error:
        return PlannedRefusal("InvalidBackup", f"backup {source.name} is not valid for this connector:\n{error}")
    if not restored.entries:
        return PlannedRefusal("NothingToRestore", f"backup {source.name} and the connector both have no offsets")
    return restored.json


def _refuse(plan: Plan, operation: str, reason: str, message: str, permanent: bool) -> None:
    full = f"{operation} refused: {message}"
    plan.offsets_refusal = (reason, full, permanent)
    plan.conditions.append(ConditionSpec("OffsetsOperationFailed", "True", reason, full))


def plan_annotation_conditions(target: ConnectorTarget, plan: Plan) -> None:
    problems: list[str] = []
    annotations = target.annotations
    value = annotations.get(ANNOTATION_OFFSETS)
    if value is not None and value not in OFFSETS_OPERATIONS:
        problems.append(
            f"{ANNOTATION_OFFSETS}={value!r} is not one of {', '.join(OFFSETS_OPERATIONS)}; nothing was done"
        )
    restart = annotations.get(ANNOTATION_RESTART)
    if restart is not None and restart.replace(" ", "").lower() not in RESTART_VALUES:
        problems.append(
            f"{ANNOTATION_RESTART}={restart!r} is not one of true, includeTasks, onlyFailed, includeTasks,onlyFailed"
        )
    task = annotations.get(ANNOTATION_RESTART_TASK)
    if task is not None and parse_task_id(task) is None:
        problems.append(f"{ANNOTATION_RESTART_TASK}={task!r} is not a task id (an integer >= 0)")
    if problems:
        plan.conditions.append(ConditionSpec("InvalidAnnotation", "True", "UnknownValue", "; ".join(problems)))
