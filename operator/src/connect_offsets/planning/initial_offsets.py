"""Initial offsets (KIP-995): a new connector is created STOPPED, its offsets applied, then brought to
``spec.state``; on a worker without ``initial_state`` (Connect < 3.7) it is created, then stopped.
"""

from __future__ import annotations

from connect_offsets.offsets import (
    OffsetsValidationError,
    validated_compact_json,
)
from connect_offsets.planning.plan import (
    SETTLE_DELAY_S,
    Action,
    ConditionSpec,
    Observed,
    OffsetsConfigMap,
    Plan,
    PlannedRefusal,
    configmap_text,
)
from connect_offsets.planning.targets import ConnectorTarget, target_config
from connect_offsets.vocabulary import short_hash


def initial_offsets_due(target: ConnectorTarget) -> bool:
    """Initial offsets apply on first creation only: never once they were applied."""
    if target.initial_configmap is None:
        return False
    return target.initial_status is None or target.initial_status.step != "Applied"


def _initial_fingerprint(target: ConnectorTarget, configmap: OffsetsConfigMap | None) -> str:
    parts = [target.name, "initial", str(target.generation), configmap.resource_version if configmap else "-"]
    return short_hash("\x00".join(parts))


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
    plan.actions.append(
        Action(
            "create_with_initial_offsets",
            config=desired,
            initial_state="STOPPED",
            configmap=target.initial_configmap,
            offsets_json=document,
            request=fingerprint,
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
    if isinstance(document, PlannedRefusal):
        plan.actions.append(
            Action(
                "apply_initial_offsets",
                configmap=target.initial_configmap,
                request=fingerprint,
                operation=document.message,
            )
        )
        return
    plan.actions.append(
        Action("apply_initial_offsets", configmap=target.initial_configmap, offsets_json=document, request=fingerprint)
    )
    plan.requeue(SETTLE_DELAY_S)
