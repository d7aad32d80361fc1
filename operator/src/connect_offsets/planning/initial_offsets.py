"""Initial offsets (KIP-995): a new connector is created STOPPED, its offsets applied, then brought to
``spec.state``; on a worker without ``initial_state`` (Connect < 3.7) it is created, then stopped.
"""

from __future__ import annotations

from connect_offsets.offsets import (
    OffsetsValidationError,
    validated_compact_json,
)
from connect_offsets.planning.copies import EMPTY_DOCUMENT
from connect_offsets.planning.plan import (
    KAFKA_RETRY_S,
    SETTLE_DELAY_S,
    Action,
    ConditionSpec,
    Observed,
    OffsetsConfigMap,
    Plan,
    PlannedRefusal,
    configmap_text,
)
from connect_offsets.planning.targets import ConnectorTarget, initial_source_text, target_config
from connect_offsets.vocabulary import short_hash

#: A refused copy source (not found, not allowed, untranslatable) is looked at again this often:
#: nothing was created, and the source may appear or be allowed meanwhile.
SOURCE_RECHECK_S = 30.0


def initial_offsets_due(target: ConnectorTarget) -> bool:
    """Initial offsets apply on first creation only: never once they were applied."""
    if target.initial_configmap is None and target.initial_source is None:
        return False
    return target.initial_status is None or target.initial_status.step != "Applied"


def _initial_fingerprint(target: ConnectorTarget, configmap: OffsetsConfigMap | None) -> str:
    if target.initial_source is not None:
        # The pinned copy's version changes with every pin: a failure waits for the spec instead.
        parts = [target.name, "initial", str(target.generation), initial_source_text(target.initial_source)]
    else:
        parts = [target.name, "initial", str(target.generation), configmap.resource_version if configmap else "-"]
    return short_hash("\x00".join(parts))


def initial_pin_due(target: ConnectorTarget) -> bool:
    """Whether the connector, absent from Connect, copies its initial offsets from a source that is
    not pinned yet (so a pass reads the source), and has not failed for this spec."""
    source, status = target.initial_source, target.initial_status
    if source is None or (status is not None and status.step == "Applied"):
        return False
    if status is not None and status.step == "Failed" and status.request == _initial_fingerprint(target, None):
        return False
    return target.initial_configmap is None or status is None or status.step not in ("Pinned", "Creating")


def plan_initial(target: ConnectorTarget, observed: Observed, desired: dict[str, str], plan: Plan) -> None:
    """A connector to create with initial offsets: from a ConfigMap, or (fromConnector, fromMirror)
    from a copy that is read and pinned first, then applied like a ConfigMap's."""
    status = target.initial_status
    if target.initial_source is not None:
        failed = status is not None and status.step == "Failed"
        if failed and status is not None and status.request == _initial_fingerprint(target, None):
            plan.conditions.append(ConditionSpec("Ready", "False", "InitialOffsetsFailed", status.message))
            return
        if initial_pin_due(target):
            _plan_initial_pin(target, observed, plan)
            return
    plan_initial_create(target, observed, desired, plan)


def _plan_initial_pin(target: ConnectorTarget, observed: Observed, plan: Plan) -> None:
    """Read the source once and keep the document (``pin_initial_offsets``); nothing is created yet."""
    assert target.initial_source is not None
    wanted = initial_source_text(target.initial_source)
    source = observed.copy_source
    if source is None or source.transient or source.reason is not None or source.document_json is None:
        reason = "SourceUnavailable" if source is None or source.transient else source.reason or "SourceUnavailable"
        message = source.message if source is not None and source.message else f"{wanted} could not be read"
        plan.conditions.append(
            ConditionSpec("Ready", "False", reason, f"spec.initialOffsets: {message}; nothing was created")
        )
        plan.requeue(KAFKA_RETRY_S if reason == "SourceUnavailable" else SOURCE_RECHECK_S)
        return
    try:
        document = validated_compact_json(source.document_json, target.class_name, target_config(target), is_sink=None)
    except OffsetsValidationError as error:
        plan.conditions.append(
            ConditionSpec(
                "Ready",
                "False",
                "InitialOffsetsInvalid",
                f"spec.initialOffsets: the offsets of {source.description} do not fit this connector:\n{error}\n"
                "nothing was created",
            )
        )
        plan.requeue(SOURCE_RECHECK_S)
        return
    if document == EMPTY_DOCUMENT:
        plan.conditions.append(
            ConditionSpec(
                "Ready",
                "False",
                "NothingToCopy",
                f"spec.initialOffsets: {source.description} has no offsets; nothing was created",
            )
        )
        plan.requeue(SOURCE_RECHECK_S)
        return
    notes = "".join(f"; {note}" for note in source.notes)
    plan.actions.append(
        Action(
            "pin_initial_offsets",
            offsets_json=document,
            source=wanted,
            request=_initial_fingerprint(target, None),
            operation=f"{source.description}{notes}",
        )
    )
    plan.hold_stopped = "its initial offsets are copied"
    plan.conditions.append(
        ConditionSpec("Ready", "False", "Creating", f"Copying the offsets of {source.description} before creating it")
    )
    plan.requeue(0.0)


def _initial_document(target: ConnectorTarget, observed: Observed) -> str | PlannedRefusal:
    name = target.initial_configmap
    assert name is not None
    key = target.configmap_key
    text = configmap_text(observed.initial_configmap, name, key)
    if isinstance(text, PlannedRefusal):
        return text
    try:
        return validated_compact_json(text, target.class_name, target_config(target), is_sink=None)
    except OffsetsValidationError as error:
        return PlannedRefusal("InvalidOffsets", f"ConfigMap {name} key {key} is invalid:\n{error}")


def plan_initial_create(target: ConnectorTarget, observed: Observed, desired: dict[str, str], plan: Plan) -> None:
    fingerprint = _initial_fingerprint(target, observed.initial_configmap)
    previous = target.initial_status
    if previous is not None and previous.step == "Failed" and previous.request == fingerprint:
        plan.conditions.append(ConditionSpec("Ready", "False", "InitialOffsetsFailed", previous.message))
        return
    if not observed.supports_initial_state:
        plan.conditions.append(
            ConditionSpec(
                "Ready",
                "False",
                "InitialOffsetsUnsupported",
                "spec.initialOffsets needs Connect 3.7 or newer (creating a connector STOPPED); nothing was created",
            )
        )
        return
    document = _initial_document(target, observed)
    if isinstance(document, PlannedRefusal):
        plan.conditions.append(
            ConditionSpec(
                "Ready", "False", "InitialOffsetsInvalid", f"spec.initialOffsets: {document.message}; nothing created"
            )
        )
        return
    source = initial_source_text(target.initial_source) if target.initial_source is not None else None
    plan.actions.append(
        Action(
            "create_with_initial_offsets",
            config=desired,
            initial_state="STOPPED",
            configmap=target.initial_configmap,
            offsets_json=document,
            request=fingerprint,
            source=source,
        )
    )
    plan.hold_stopped = "its initial offsets are applied"
    plan.conditions.append(
        ConditionSpec(
            "Ready",
            "False",
            "Creating",
            f"Creating the connector STOPPED with the initial offsets of ConfigMap {target.initial_configmap}",
        )
    )
    plan.requeue(SETTLE_DELAY_S)


def plan_initial_resume(target: ConnectorTarget, observed: Observed, plan: Plan) -> None:
    """A connector created for initial offsets exists but they are not recorded as applied: finish."""
    plan.hold_stopped = "its initial offsets are applied"
    status = observed.status
    if status is None or not status.is_stopped:
        plan.requeue(SETTLE_DELAY_S)
        return
    fingerprint = _initial_fingerprint(target, observed.initial_configmap)
    document = _initial_document(target, observed)
    source = initial_source_text(target.initial_source) if target.initial_source is not None else None
    if isinstance(document, PlannedRefusal):
        plan.actions.append(
            Action(
                "apply_initial_offsets",
                configmap=target.initial_configmap,
                request=fingerprint,
                operation=document.message,
                source=source,
            )
        )
        return
    plan.actions.append(
        Action(
            "apply_initial_offsets",
            configmap=target.initial_configmap,
            offsets_json=document,
            request=fingerprint,
            source=source,
        )
    )
    plan.requeue(SETTLE_DELAY_S)
