"""The planner: a pure function from (resource, observed Connect state, clock) to actions and conditions.

Why pure: every decision the operator makes about a connector — create it, fix its config, move
it to the desired state, restart it, run an offsets request or refuse one — is taken here, with no
I/O, so it is unit-tested exhaustively and fuzzed. The service gathers the observed state, calls
``plan``, executes the actions in order and writes the status the plan describes.

Offsets requests are level-based but must not repeat after a permanent failure: each request has a
fingerprint (operation, annotation value, resource generation, ConfigMap resourceVersion) and a
request whose fingerprint already failed permanently waits until one of those inputs changes.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from connect_offsets.models.connect import ConnectorStatus
from connect_offsets.models.crds import (
    AppliedOffsetsStatus,
    AutoRestartSpec,
    AutoRestartStatus,
    ConnectClusterSpec,
    ConnectorState,
    InitialOffsetsStatus,
    KafkaConnectorResource,
    KafkaMirrorMaker2Resource,
    MirrorSpec,
    OffsetsOperationStatus,
    PendingOffsetsOperation,
    WriteToTarget,
    parse_rfc3339,
)
from connect_offsets.offsets import (
    OffsetsValidationError,
    restore_compact_json,
    validated_compact_json,
)
from connect_offsets.vocabulary import (
    ANNOTATION_ADOPT,
    ANNOTATION_DRY_RUN,
    ANNOTATION_MM2_CONNECTOR,
    ANNOTATION_OFFSETS,
    ANNOTATION_REQUEST_ID,
    ANNOTATION_RESET_OFFSET_SYNCS,
    ANNOTATION_RESTART,
    ANNOTATION_RESTART_TASK,
    ANNOTATION_RESTORE_FROM,
    ANNOTATION_SEEK_TO,
    ANNOTATION_STOP_CONNECTOR,
    MIRROR_CLASSES,
    OFFSETS_OPERATIONS,
    OWNER_CONFIG_KEY,
    REQUEST_ANNOTATIONS,
    iso,
    java_string,
)

__all__ = [
    "Action",
    "ConditionSpec",
    "ConnectorTarget",
    "MirrorClusterIds",
    "MirrorPlan",
    "Observed",
    "OffsetsConfigMap",
    "Plan",
    "RestoreSource",
    "SeekOffsets",
    "auto_restart_backoff",
    "mirror_configmap_key",
    "mirror_connector_name",
    "mirror_direction",
    "mirror_targets",
    "offsets_request_fingerprint",
    "plan_connector",
    "plan_target",
    "target_for_connector",
]

#: How many handled request ids status keeps.
HANDLED_REQUEST_IDS = 20
RESTART_VALUES = {
    "true": (False, False),
    "includetasks": (True, False),
    "onlyfailed": (False, True),
    "includetasks,onlyfailed": (True, True),
    "onlyfailed,includetasks": (True, True),
}
TASK_ID = re.compile(r"[0-9]{1,9}")
#: While Connect's status lags a stop/pause/resume or a create, look again soon.
SETTLE_DELAY_S = 2.0
#: Kafka unreachable while seeking to a time: try again after this long.
KAFKA_RETRY_S = 10.0


@dataclass(frozen=True)
class OffsetsConfigMap:
    """The ConfigMap an alter reads, as observed (``None`` fields: it does not exist)."""

    name: str
    exists: bool
    resource_version: str = ""
    data: dict[str, str] = field(default_factory=dict)
    error: str | None = None  # the stored document is unreadable (a corrupt gzip or shard)
    error_reason: str = "InvalidOffsets"  # or DocumentTooLarge: inflating past the operator's cap


@dataclass(frozen=True)
class RestoreSource:
    """For ``restore``: the chosen backup (``name`` None: there is none) and the current offsets."""

    name: str | None
    resource_version: str = ""
    backup_json: str = ""
    current_json: str = ""  # the connector's GET offsets answer, as Connect sent it


@dataclass(frozen=True)
class SeekOffsets:
    """For alter-by-timestamp: the offsets document Kafka's ListOffsets gave, or why there is none."""

    document_json: str | None = None
    error: str | None = None
    transient: bool = False  # Kafka unreachable: try again later
    at_end: int = 0  # partitions without a record at or after the time, sent to their end offset


@dataclass(frozen=True)
class Observed:
    """What the service saw before planning. ``config is None``: the connector does not exist."""

    now: datetime
    cluster_error: str | None  # why the ConnectCluster cannot be used, or None
    supports_initial_state: bool
    config: dict[str, str] | None
    status: ConnectorStatus | None
    alter_configmap: OffsetsConfigMap | None = None
    restore: RestoreSource | None = None
    initial_configmap: OffsetsConfigMap | None = None
    seek: SeekOffsets | None = None
    #: The Ready reason for ``cluster_error`` (e.g. SecretNotOptedIn, PlaintextCredentials, HostNotAllowed,
    #: ClusterNotAllowed, ConnectorNameNotAllowed).
    cluster_error_reason: str = "ConnectClusterUnavailable"

    def without_documents(self) -> Observed:
        """The same observation without the offsets texts, once the plan holds what it needs of them:
        kept through a chunked PATCH, a million-partition restore would hold two more 100 MB texts."""
        return replace(
            self,
            alter_configmap=_without_data(self.alter_configmap),
            restore=None if self.restore is None else replace(self.restore, backup_json="", current_json=""),
            initial_configmap=_without_data(self.initial_configmap),
            seek=None if self.seek is None else replace(self.seek, document_json=None),
        )


def _without_data(configmap: OffsetsConfigMap | None) -> OffsetsConfigMap | None:
    return None if configmap is None else replace(configmap, data=dict.fromkeys(configmap.data, ""))


Kind = Literal[
    "create",
    "update_config",
    "stop",
    "pause",
    "resume",
    "restart",
    "restart_task",
    "list_offsets",
    "alter_offsets",
    "reset_offsets",
    "restore_offsets",
    "dry_run_offsets",
    "begin_offsets_change",
    "update_pending",
    "finish_offsets_change",
    "create_with_initial_offsets",
    "apply_initial_offsets",
    "remove_annotation",
]


@dataclass(frozen=True)
class Action:
    kind: Kind
    config: dict[str, str] | None = None
    initial_state: str | None = None
    include_tasks: bool = False
    only_failed: bool = False
    task_id: int | None = None
    configmap: str | None = None
    offsets_json: str | None = None
    annotation: str | None = None
    annotation_value: str | None = None
    automatic: bool = False  # auto-restart rather than a user request
    operation: str | None = None  # dry runs: the operation previewed
    #: stop -> change -> resume: the in-progress record the executor checkpoints to status.
    pending: PendingOffsetsOperation | None = None
    request: str | None = None  # initial offsets: fingerprint of the inputs


@dataclass(frozen=True)
class ConditionSpec:
    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str
    message: str


@dataclass
class Plan:
    actions: list[Action] = field(default_factory=list)
    conditions: list[ConditionSpec] = field(default_factory=list)
    requeue_after: float | None = None
    auto_restart: AutoRestartStatus | None = None
    offsets_request: str | None = None  # fingerprint of the offsets request this plan executes
    offsets_refusal: tuple[str, str, bool] | None = None  # (reason, message, permanent)
    #: An offsets change (or initial offsets) needs the connector STOPPED whatever spec.state says.
    hold_stopped: str | None = None  # why, for the Ready condition
    request_id: str | None = None  # connect-offsets.io/request-id of the request this plan handles
    applied_offsets: AppliedOffsetsStatus | None = None  # applyOnChange: record after this plan

    def requeue(self, seconds: float) -> None:
        self.requeue_after = seconds if self.requeue_after is None else min(self.requeue_after, seconds)


@dataclass(frozen=True)
class ConnectorTarget:
    """One connector as the planner sees it, whichever resource declares it.

    A KafkaConnector declares one; a KafkaMirrorMaker2 declares up to three per mirror. The
    resource-specific parts (naming, which annotations apply, where ConfigMaps live) are resolved
    by the builders, so the decisions below are shared.
    """

    name: str  # the connector name in Connect
    owner: str  # "<namespace>/<resource>", written into the connector config
    class_name: str
    config: dict[str, str]  # desired config without the owner key
    state: ConnectorState
    generation: int
    annotations: dict[str, str]  # the annotations that apply to this connector
    auto_restart: AutoRestartSpec | None = None
    auto_restart_status: AutoRestartStatus = field(default_factory=AutoRestartStatus)
    last_offsets_operation: OffsetsOperationStatus | None = None
    list_configmap: str | None = None
    alter_configmap: str | None = None
    configmap_key: str = "offsets.json"
    #: Extra annotations removed together with the offsets annotation (MM2's connector selector).
    companion_annotations: tuple[tuple[str, str], ...] = ()
    spec_path: str = "spec"  # where this connector's block lives, for messages
    stop_policy: bool = False  # spec.offsetsPolicy.stopConnector
    pending: PendingOffsetsOperation | None = None
    handled_request_ids: tuple[str, ...] = ()
    apply_on_change: bool = False  # spec.alterOffsets.applyOnChange
    applied_offsets: AppliedOffsetsStatus | None = None
    initial_configmap: str | None = None  # spec.initialOffsets.fromConfigMap.name
    initial_status: InitialOffsetsStatus | None = None
    to_timestamp: str | None = None  # spec.alterOffsets.toTimestamp
    chunk_progress: dict[str, Any] | None = None  # status.offsetsProgress of an unfinished chunked PATCH

    def seek_to(self) -> str | None:
        """The time an alter seeks to (annotation first), or None for an alter from a ConfigMap."""
        if self.pending is not None:
            return self.pending.seek_to
        return self.annotations.get(ANNOTATION_SEEK_TO, self.to_timestamp)


def target_for_connector(resource: KafkaConnectorResource) -> ConnectorTarget:
    spec = resource.spec
    config = spec.connect_config(resource.connector_name)
    return ConnectorTarget(
        name=resource.connector_name,
        owner=owner_id(resource),
        class_name=spec.class_,
        config=config,
        state=spec.state,
        generation=resource.metadata.generation,
        annotations=resource.metadata.annotations,
        auto_restart=spec.auto_restart,
        auto_restart_status=resource.status.auto_restart or AutoRestartStatus(),
        last_offsets_operation=resource.status.last_offsets_operation,
        list_configmap=spec.list_offsets.to_config_map.name if spec.list_offsets else None,
        alter_configmap=(
            spec.alter_offsets.from_config_map.name
            if spec.alter_offsets and spec.alter_offsets.from_config_map
            else None
        ),
        to_timestamp=spec.alter_offsets.to_timestamp if spec.alter_offsets else None,
        chunk_progress=resource.status.offsets_progress,
        stop_policy=bool(spec.offsets_policy and spec.offsets_policy.stop_connector),
        pending=resource.status.pending_offsets_operation,
        handled_request_ids=tuple(resource.status.handled_request_ids),
        apply_on_change=bool(spec.alter_offsets and spec.alter_offsets.apply_on_change),
        applied_offsets=resource.status.applied_offsets,
        initial_configmap=spec.initial_offsets.from_config_map.name if spec.initial_offsets else None,
        initial_status=resource.status.initial_offsets,
    )


def _fingerprint(target: ConnectorTarget, configmap: OffsetsConfigMap | None) -> str:
    value = target.annotations.get(ANNOTATION_OFFSETS, "")
    parts = [target.name, value, str(target.generation), configmap.resource_version if configmap else "-"]
    # Only present annotations take part, so fingerprints of plain requests stay what they were.
    parts += [f"{key}={target.annotations[key]}" for key in REQUEST_ANNOTATIONS if key in target.annotations]
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:16]


def content_hash(text: str) -> str:
    """Identity of an offsets document's content (applyOnChange): re-applying the same text is a no-op."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def offsets_request_fingerprint(resource: KafkaConnectorResource, configmap: OffsetsConfigMap | None) -> str:
    return _fingerprint(target_for_connector(resource), configmap)


def auto_restart_backoff(count: int) -> timedelta:
    """Strimzi's back-off: 0, 2, 6, 12, 20, 30, 42, 56, then 60 minutes."""
    return timedelta(minutes=min(count * count + count, 60))


def _parse_time(value: str | None) -> datetime | None:
    """Status written by others (or older versions) may hold anything: unparsable means unknown."""
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _task_id(value: str) -> int | None:
    """ASCII digits only: str.isdigit() accepts '²', which int() rejects."""
    value = value.strip()
    return int(value) if TASK_ID.fullmatch(value) else None


def owner_id(resource: KafkaConnectorResource) -> str:
    return f"{resource.metadata.namespace}/{resource.metadata.name}"


def desired_config(resource: KafkaConnectorResource) -> dict[str, str]:
    return _desired(target_for_connector(resource))


def _desired(target: ConnectorTarget) -> dict[str, str]:
    return {**target.config, OWNER_CONFIG_KEY: target.owner}


_CONNECT_STATE = {
    ConnectorState.RUNNING: "RUNNING",
    ConnectorState.PAUSED: "PAUSED",
    ConnectorState.STOPPED: "STOPPED",
}


def plan_connector(resource: KafkaConnectorResource, observed: Observed) -> Plan:
    """Decide what to do for one KafkaConnector. Pure: no I/O, no clock but ``observed.now``."""
    return plan_target(target_for_connector(resource), observed)


def plan_target(target: ConnectorTarget, observed: Observed) -> Plan:
    """Decide what to do for one connector. Pure: no I/O, no clock but ``observed.now``."""
    plan = Plan()
    annotations = target.annotations
    if observed.cluster_error is not None:
        plan.conditions.append(ConditionSpec("Ready", "False", observed.cluster_error_reason, observed.cluster_error))
        return plan

    desired = _desired(target)
    spec_state = target.state
    if observed.config is None:
        if _initial_offsets_due(target):
            _plan_initial_create(target, observed, desired, plan)
        else:
            initial = _CONNECT_STATE[spec_state] if observed.supports_initial_state else None
            plan.actions.append(Action("create", config=desired, initial_state=initial))
            plan.conditions.append(ConditionSpec("Ready", "False", "Creating", "Creating the connector in Connect"))
            plan.requeue(SETTLE_DELAY_S)
        _plan_annotation_conditions(target, plan)
        return plan

    owner = observed.config.get(OWNER_CONFIG_KEY)
    # Adopt takes over only a connector nobody here owns (created by hand, by another tool). A
    # connector that names another resource as owner stays that resource's whatever the
    # annotation says: on a shared Connect cluster the other owner may be another tenant, and
    # adopting would let this resource reset or rewrite that tenant's offsets.
    if owner != target.owner and (owner or annotations.get(ANNOTATION_ADOPT) != "true"):
        if owner:
            hint = (
                f"the {ANNOTATION_ADOPT} annotation applies only to connectors without an owner; "
                f"delete {owner} (which deletes the connector) or rename this resource"
            )
            who = f"by {owner}"
        else:
            hint = (
                f"rename this resource, or annotate it with {ANNOTATION_ADOPT}=true to take the existing connector over"
            )
            who = "by something other than this operator"
        plan.conditions.append(
            ConditionSpec(
                "Ready",
                "False",
                "ConnectorOwnedElsewhere",
                f"Connector {target.name} already exists in Connect, managed {who}. Connector "
                f"names are global on a Connect cluster; {hint}.",
            )
        )
        return plan

    config_pending = observed.config != desired
    if config_pending:
        plan.actions.append(Action("update_config", config=desired))
        plan.requeue(SETTLE_DELAY_S)

    if target.initial_status is not None and target.initial_status.step == "Creating" and target.initial_configmap:
        # Created STOPPED by an earlier pass (or an operator that died) that did not finish.
        _plan_initial_resume(target, observed, plan)
    elif config_pending:
        # Offsets wait for the new config: validating against the old one would refuse (or apply)
        # a request meant for the new one. Strimzi skips offsets in such a pass as well.
        if target.pending is not None:
            plan.hold_stopped = "an offsets change is in progress" if target.pending.step != "Resuming" else None
        if annotations.get(ANNOTATION_OFFSETS) in OFFSETS_OPERATIONS:
            plan.offsets_refusal = ("WaitingForConfig", "waiting for Connect to apply the new config", False)
    else:
        # Offsets first: an alter on a STOPPED connector whose spec says running must run before
        # the resume, or Connect would refuse it.
        _plan_offsets(target, observed, plan)

    status = observed.status
    observed_state = status.state if status else None
    effective = ConnectorState.STOPPED if plan.hold_stopped else spec_state
    want = _CONNECT_STATE[effective]
    state_actions: list[Action] = []
    if observed_state is not None and observed_state != want:
        if effective is ConnectorState.STOPPED:
            state_actions.append(Action("stop"))
        elif effective is ConnectorState.PAUSED:
            if observed_state != "FAILED":  # Connect cannot pause a failed connector
                state_actions.append(Action("pause"))
        elif observed_state in ("PAUSED", "STOPPED"):
            state_actions.append(Action("resume"))
        if state_actions or observed_state in ("UNASSIGNED", "RESTARTING"):
            plan.requeue(SETTLE_DELAY_S)
    elif plan.hold_stopped and status is not None and not status.is_stopped:
        plan.requeue(SETTLE_DELAY_S)  # STOPPED but tasks still listed: Connect is winding them down
    plan.actions += state_actions
    _plan_restarts(target, observed, plan)
    _plan_ready(target, observed, plan, effective)
    _plan_annotation_conditions(target, plan)
    return plan


def _plan_ready(target: ConnectorTarget, observed: Observed, plan: Plan, effective: ConnectorState) -> None:
    status = observed.status
    want = _CONNECT_STATE[effective]
    if plan.hold_stopped:
        # Never leave the connector stopped without saying so.
        plan.conditions.append(
            ConditionSpec(
                "Ready",
                "False",
                "StoppedForOffsetsChange",
                f"Connector held STOPPED while {plan.hold_stopped}; it returns to "
                f"{_CONNECT_STATE[target.state]} afterwards",
            )
        )
    elif status is None:
        plan.conditions.append(ConditionSpec("Ready", "False", "StatusUnknown", "Connect reports no status yet"))
        plan.requeue(SETTLE_DELAY_S)
    elif status.any_failed:
        trace = status.first_trace()
        failed = ", ".join(str(t) for t in status.failed_task_ids)
        what = "connector" if status.state == "FAILED" else f"task(s) {failed}"
        message = f"Connect reports the {what} FAILED" + (f": {trace}" if trace else "")
        plan.conditions.append(ConditionSpec("Ready", "False", "ConnectorFailed", message[:1024]))
    elif any(a.kind == "update_config" for a in plan.actions):
        plan.conditions.append(ConditionSpec("Ready", "False", "Progressing", "Applying the new config in Connect"))
    elif status.state != want:
        plan.conditions.append(
            ConditionSpec("Ready", "False", "Progressing", f"Connector is {status.state}; moving it to {want}")
        )
    elif want == "RUNNING" and any(t.state != "RUNNING" for t in status.tasks):
        plan.conditions.append(ConditionSpec("Ready", "False", "TasksNotRunning", "Not every task is RUNNING yet"))
        plan.requeue(SETTLE_DELAY_S)
    else:
        reason = {"RUNNING": "ConnectorRunning", "PAUSED": "ConnectorPaused", "STOPPED": "ConnectorStopped"}[want]
        plan.conditions.append(ConditionSpec("Ready", "True", reason, f"Connector is {want} in Connect"))


def _plan_restarts(target: ConnectorTarget, observed: Observed, plan: Plan) -> None:
    annotations = target.annotations
    status = observed.status
    value = annotations.get(ANNOTATION_RESTART)
    if value is not None:
        key = value.replace(" ", "").lower()
        if key in RESTART_VALUES:
            include_tasks, only_failed = RESTART_VALUES[key]
            plan.actions.append(Action("restart", include_tasks=include_tasks, only_failed=only_failed))
            plan.actions.append(Action("remove_annotation", annotation=ANNOTATION_RESTART, annotation_value=value))
    task = annotations.get(ANNOTATION_RESTART_TASK)
    if task is not None and _task_id(task) is not None:
        plan.actions.append(Action("restart_task", task_id=_task_id(task)))
        plan.actions.append(Action("remove_annotation", annotation=ANNOTATION_RESTART_TASK, annotation_value=task))

    auto = target.auto_restart
    previous = target.auto_restart_status
    if auto is None or not auto.enabled or status is None:
        return
    last = _parse_time(previous.last_restart_time)
    if status.any_failed and target.state is not ConnectorState.STOPPED:
        if auto.max_restarts is not None and previous.count >= auto.max_restarts:
            plan.conditions.append(
                ConditionSpec(
                    "AutoRestartExhausted",
                    "True",
                    "MaxRestartsReached",
                    f"Restarted {previous.count} time(s), the limit set in spec.autoRestart.maxRestarts; "
                    "fix the cause and restart with the connect-offsets.io/restart annotation",
                )
            )
            return
        due = last is None or observed.now >= last + auto_restart_backoff(previous.count)
        if due:
            plan.actions.append(Action("restart", include_tasks=True, only_failed=True, automatic=True))
            plan.auto_restart = AutoRestartStatus(count=previous.count + 1, last_restart_time=iso(observed.now))
        else:
            assert last is not None
            wait = (last + auto_restart_backoff(previous.count) - observed.now).total_seconds()
            plan.requeue(max(wait, 1.0))
    elif previous.count and last is not None and observed.now >= last + auto_restart_backoff(previous.count):
        # Healthy for longer than the next back-off: start counting from zero again.
        plan.auto_restart = AutoRestartStatus(count=0, last_restart_time=previous.last_restart_time)


@dataclass(frozen=True)
class _Refusal:
    reason: str
    message: str


def _plan_offsets(target: ConnectorTarget, observed: Observed, plan: Plan) -> None:
    if target.pending is not None:
        _plan_pending(target, observed, plan, target.pending)
        return
    annotations = target.annotations
    value = annotations.get(ANNOTATION_OFFSETS)
    if value is None:
        if target.apply_on_change:
            _plan_apply_on_change(target, observed, plan)
        return
    if value not in OFFSETS_OPERATIONS:
        return
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
    source = observed.alter_configmap if value == "alter" else None
    if value == "restore" and observed.restore is not None and observed.restore.name is not None:
        source = OffsetsConfigMap(observed.restore.name, True, observed.restore.resource_version)
    fingerprint = _fingerprint(target, source)
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
    removals = _request_removals(target, value)

    for key in (ANNOTATION_DRY_RUN, ANNOTATION_STOP_CONNECTOR):
        flag = annotations.get(key)
        if flag is not None and flag not in ("true", "false"):
            # A typo must never turn a dry run into a real change.
            _refuse(plan, value, "InvalidAnnotation", f"{key}={flag!r} must be true or false; nothing was done", True)
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
    if isinstance(requested, _Refusal):
        transient = requested.reason == "KafkaUnavailable"
        _refuse(plan, value, requested.reason, requested.message, not transient)
        if transient:
            plan.requeue(KAFKA_RETRY_S)
        return
    if dry_run:
        # Needs no STOPPED state: it only reads the offsets.
        plan.actions += [
            Action("dry_run_offsets", operation=value, configmap=target.list_configmap, offsets_json=requested),
            *removals,
        ]
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
            _begin(target, observed, plan, value, "annotation", fingerprint, request_id)
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
) -> str | _Refusal | None:
    """The validated document an alter or restore sends (None for reset), or why there is none."""
    key = target.configmap_key
    if operation == "alter" and target.seek_to() is not None:
        return _seek_document(target, observed, target.seek_to() or "")
    if operation == "alter":
        name = target.alter_configmap
        if name is None:
            return _Refusal("MissingAlterOffsets", f"{target.spec_path}.alterOffsets.fromConfigMap.name is not set")
        text = _configmap_text(observed.alter_configmap, name, key)
        if isinstance(text, _Refusal):
            return text
        # Validate before anything touches Connect: bad input never leads to a stop or a PATCH.
        # Streamed: a million-partition document is checked without holding it parsed.
        is_sink = observed.status.type == "sink" if observed.status and observed.status.type else None
        try:
            return validated_compact_json(
                text,
                target.class_name,
                _desired(target),
                is_sink=is_sink,
                translate_replay=target.class_name == MIRROR_CLASSES["MirrorSourceConnector"],
            )
        except OffsetsValidationError as error:
            return _Refusal("InvalidOffsets", f"ConfigMap {name} key {key} is invalid:\n{error}")
    if operation == "restore":
        return _restore_document(target, observed)
    return None


def _configmap_text(configmap: OffsetsConfigMap | None, name: str, key: str) -> str | _Refusal:
    """The offsets text under ``key`` of an observed ConfigMap, or why there is none."""
    if configmap is None or not configmap.exists:
        return _Refusal("ConfigMapNotFound", f"ConfigMap {name} does not exist")
    if configmap.error is not None:
        return _Refusal(configmap.error_reason, f"ConfigMap {name}: {configmap.error}")
    if key not in configmap.data:
        keys = ", ".join(sorted(configmap.data)) or "none"
        return _Refusal("OffsetsKeyMissing", f"ConfigMap {name} has no key {key} (keys: {keys})")
    return configmap.data[key]


def _seek_document(target: ConnectorTarget, observed: Observed, when: str) -> str | _Refusal:
    """The sink offsets for a seek to ``when``: from Kafka (observed), validated like any alter."""
    if parse_rfc3339(when) is None:
        return _Refusal(
            "InvalidTimestamp",
            f"{ANNOTATION_SEEK_TO}={when!r} is not an RFC 3339 time with a zone, e.g. 2026-11-21T10:00:00Z",
        )
    status = observed.status
    if status is None or status.type != "sink":
        kind = status.type if status is not None and status.type else "unknown"
        return _Refusal("NotASink", f"seeking to a time needs a sink connector; Connect reports type {kind}")
    seek = observed.seek
    if seek is None or seek.document_json is None:
        reason = "KafkaUnavailable" if seek is not None and seek.transient else "SeekFailed"
        return _Refusal(reason, seek.error if seek is not None and seek.error else "no offsets for the time")
    try:
        return validated_compact_json(seek.document_json, target.class_name, _desired(target), is_sink=True)
    except OffsetsValidationError as error:
        return _Refusal("InvalidOffsets", f"offsets for {when} are invalid:\n{error}")


def _request_removals(target: ConnectorTarget, value: str) -> list[Action]:
    removals = [Action("remove_annotation", annotation=ANNOTATION_OFFSETS, annotation_value=value)] + [
        Action("remove_annotation", annotation=key, annotation_value=val) for key, val in target.companion_annotations
    ]
    companions = {key for key, _ in target.companion_annotations}
    extra = [*REQUEST_ANNOTATIONS, ANNOTATION_RESTORE_FROM] if value == "restore" else list(REQUEST_ANNOTATIONS)
    for key in extra:
        if key in target.annotations and key not in companions:
            removals.append(Action("remove_annotation", annotation=key, annotation_value=target.annotations[key]))
    return removals


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
) -> None:
    """Record the intent (in status, before anything else), then stop the connector."""
    pending = PendingOffsetsOperation(
        operation=operation,
        step="Stopping",
        seek_to=target.seek_to() if operation == "alter" else None,
        source=source,
        request=fingerprint,
        request_id=request_id,
        content_hash=content,
        restore_from=observed.restore.name if operation == "restore" and observed.restore else None,
        started=iso(observed.now),
    )
    plan.actions.append(Action("begin_offsets_change", pending=pending))
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
    status = observed.status
    operation = pending.operation
    if pending.step == "Resuming" and pending.result is None:
        # Only a hand-edited record lacks the outcome; never publish it as a success.
        pending = pending.model_copy(
            update={"result": "Failed", "reason": "Interrupted", "message": f"{operation}: outcome unknown"}
        )
    if pending.step == "Resuming":
        want = _CONNECT_STATE[target.state]
        # FAILED after the resume also ends the change: Ready reports the failure, and auto-restart
        # (or the user) takes it from there; waiting for spec.state would never finish.
        if status is not None and (status.state == want or status.state == "FAILED"):
            plan.actions.append(Action("finish_offsets_change", pending=pending))
            value = target.annotations.get(ANNOTATION_OFFSETS)
            if pending.source == "annotation" and value == operation and pending.result == "Succeeded":
                plan.actions += _request_removals(target, value)
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
    if isinstance(requested, _Refusal) and requested.reason == "KafkaUnavailable":
        plan.conditions.append(ConditionSpec("OffsetsOperationInProgress", "True", "Changing", requested.message))
        plan.requeue(KAFKA_RETRY_S)
        return
    if isinstance(requested, _Refusal):
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
                f"{failed.message}; moving the connector back to {_CONNECT_STATE[target.state]}",
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
    if configmap is None or not configmap.exists or key not in configmap.data:
        what = f"ConfigMap {name} does not exist" if configmap is None or not configmap.exists else f"no key {key}"
        plan.conditions.append(
            ConditionSpec("OffsetsApplied", "False", "ConfigMapNotFound", f"applyOnChange: waiting for it ({what})")
        )
        return
    content = content_hash(configmap.data[key])
    applied = target.applied_offsets
    if applied is not None and applied.content_hash == content and applied.config_map == name:
        reason = "Applied" if applied.result == "Succeeded" else "ApplyFailed"
        plan.conditions.append(
            ConditionSpec(
                "OffsetsApplied",
                "True" if applied.result == "Succeeded" else "False",
                reason,
                f"content {content} of ConfigMap {name} {applied.result.lower()} at {applied.time}; "
                "it is applied again only when it changes",
            )
        )
        return
    fingerprint = _fingerprint(target, configmap)
    plan.offsets_request = fingerprint
    requested = _requested_offsets(target, observed, "alter", plan)
    if isinstance(requested, _Refusal):
        _refuse(plan, "alter", requested.reason, requested.message, True)
        plan.applied_offsets = AppliedOffsetsStatus(
            config_map=name, content_hash=content, time=iso(observed.now), result="Failed"
        )
        return
    _begin(target, observed, plan, "alter", "applyOnChange", fingerprint, None, content)


def _initial_offsets_due(target: ConnectorTarget) -> bool:
    """Initial offsets apply on first creation only: never once they were applied."""
    if target.initial_configmap is None:
        return False
    return target.initial_status is None or target.initial_status.step != "Applied"


def _initial_fingerprint(target: ConnectorTarget, configmap: OffsetsConfigMap | None) -> str:
    parts = [target.name, "initial", str(target.generation), configmap.resource_version if configmap else "-"]
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:16]


def _initial_document(target: ConnectorTarget, observed: Observed) -> str | _Refusal:
    name = target.initial_configmap
    assert name is not None
    key = target.configmap_key
    text = _configmap_text(observed.initial_configmap, name, key)
    if isinstance(text, _Refusal):
        return text
    try:
        return validated_compact_json(text, target.class_name, _desired(target), is_sink=None)
    except OffsetsValidationError as error:
        return _Refusal("InvalidOffsets", f"ConfigMap {name} key {key} is invalid:\n{error}")


def _plan_initial_create(target: ConnectorTarget, observed: Observed, desired: dict[str, str], plan: Plan) -> None:
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
    if isinstance(document, _Refusal):
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


def _plan_initial_resume(target: ConnectorTarget, observed: Observed, plan: Plan) -> None:
    """A connector created for initial offsets exists but they are not recorded as applied: finish."""
    plan.hold_stopped = "its initial offsets are applied"
    status = observed.status
    if status is None or not status.is_stopped:
        plan.requeue(SETTLE_DELAY_S)
        return
    fingerprint = _initial_fingerprint(target, observed.initial_configmap)
    document = _initial_document(target, observed)
    if isinstance(document, _Refusal):
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


def _restore_document(target: ConnectorTarget, observed: Observed) -> str | _Refusal:
    """The PATCH that puts the backup's offsets back exactly: its entries, plus null for partitions
    that exist now but not in the backup (PATCH alone would leave them). The backup gets the same
    typed checks as an ``alter`` document (issue 21: an invalid sink backup reached Connect)."""
    source = observed.restore
    wanted = target.annotations.get(ANNOTATION_RESTORE_FROM)
    if source is None or source.name is None:
        which = f"backup {wanted}" if wanted else "any backup"
        return _Refusal("BackupNotFound", f"{which} of connector {target.name} not found")
    try:
        is_sink = observed.status.type == "sink" if observed.status and observed.status.type else None
        restored = restore_compact_json(
            source.backup_json, source.current_json, target.class_name, _desired(target), is_sink=is_sink
        )
    except OffsetsValidationError as error:
        return _Refusal("InvalidBackup", f"backup {source.name} is not valid for this connector:\n{error}")
    if not restored.entries:
        return _Refusal("NothingToRestore", f"backup {source.name} and the connector both have no offsets")
    return restored.json


def _refuse(plan: Plan, operation: str, reason: str, message: str, permanent: bool) -> None:
    full = f"{operation} refused: {message}"
    plan.offsets_refusal = (reason, full, permanent)
    plan.conditions.append(ConditionSpec("OffsetsOperationFailed", "True", reason, full))


def _plan_annotation_conditions(target: ConnectorTarget, plan: Plan) -> None:
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
    if task is not None and _task_id(task) is None:
        problems.append(f"{ANNOTATION_RESTART_TASK}={task!r} is not a task id (an integer >= 0)")
    if problems:
        plan.conditions.append(ConditionSpec("InvalidAnnotation", "True", "UnknownValue", "; ".join(problems)))


# --- leftover offsets of an earlier connector -------------------------------------------------


def leftovers_owned_elsewhere(records: list[tuple[str, str]], namespace: str) -> str | None:
    """The owner (``ns/name``) of leftover offsets when it is a resource of another namespace, else None.

    ``records``: (owner, ISO time) of every record the operator kept of a resource that created a
    connector of this name. Connect does not say who left offsets behind; the newest record does:
    it names the last resource that created the name. No record (a hand-made connector) or a
    newest record in ``namespace`` -> the leftovers may be wiped; another namespace's -> never.
    Times are the operator's own clock (one active operator), compared as ISO text; an equal
    time is settled by the owner text so the answer does not depend on the listing order.
    """
    if not records:
        return None
    owner, _ = max(records, key=lambda r: (r[1], r[0]))
    return None if owner.partition("/")[0] == namespace else owner


# --- binding a resource to a ConnectCluster ------------------------------------------------

NAMESPACE_PLACEHOLDER = "{namespace}"


@dataclass(frozen=True)
class BindingRefusal:
    """Why a resource may not use a ConnectCluster: a condition reason and its message."""

    reason: Literal["ClusterNotAllowed", "ConnectorNameNotAllowed"]
    message: str


def connector_name_prefix(spec: ConnectClusterSpec, namespace: str) -> str:
    """The prefix connector names of resources in ``namespace`` must have ('' = any name)."""
    return (spec.connector_name_prefix or "").replace(NAMESPACE_PLACEHOLDER, namespace)


def check_binding(
    spec: ConnectClusterSpec,
    cluster_namespace: str,
    cluster_name: str,
    namespace: str,
    connector_names: tuple[str, ...] | list[str],
) -> BindingRefusal | None:
    """May a resource in ``namespace`` with these connectors use this ConnectCluster?

    The cluster's own namespace always may; another only if ``spec.allowedNamespaces`` lists it
    (empty = nobody else), so a tenant cannot use a platform's Connect cluster, or its
    credentials, unless the platform says so. Every connector name must start with the cluster's
    ``connectorNamePrefix`` (``{namespace}`` = the resource's namespace): with ``"{namespace}-"``
    no tenant can create, adopt or reuse the offsets of another namespace's connector names. A
    namespace may be a prefix of another (``team`` and ``team-a``); the platform picks a
    prefix whose separator cannot occur in namespace names ("{namespace}." or "{namespace}--"
    ... ) when that matters: documented, not guessed here.
    """
    where = f"ConnectCluster {cluster_namespace}/{cluster_name}"
    if namespace != cluster_namespace and namespace not in spec.allowed_namespaces:
        return BindingRefusal(
            "ClusterNotAllowed",
            f"{where} does not list namespace {namespace} in spec.allowedNamespaces; nothing was done. Ask the "
            f"owner of {where} to add it, or use a ConnectCluster in namespace {namespace}",
        )
    prefix = connector_name_prefix(spec, namespace)
    wrong = [name for name in connector_names if not name.startswith(prefix)]
    if wrong:
        shown = ", ".join(wrong[:5]) + (f" and {len(wrong) - 5} more" if len(wrong) > 5 else "")
        return BindingRefusal(
            "ConnectorNameNotAllowed",
            f"{where} requires connector names in namespace {namespace} to start with {prefix!r} "
            f"(spec.connectorNamePrefix {spec.connector_name_prefix!r}); not: {shown}. Nothing was created: "
            "rename it (a KafkaConnector's connector is named after the resource; a MirrorMaker 2 connector "
            "starts with its source cluster alias)",
        )
    return None


# --- KafkaMirrorMaker2 -------------------------------------------------------------------

DEFAULT_POLICY = "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"
#: Policies whose internal topic names we know (IdentityReplicationPolicy extends the default).
KNOWN_POLICIES = (DEFAULT_POLICY, "org.apache.kafka.connect.mirror.IdentityReplicationPolicy")
#: Records pass through unchanged: MM2 copies bytes, whatever the worker's default converters.
BYTES = "org.apache.kafka.connect.converters.ByteArrayConverter"


def mirror_connector_name(source: str, target: str, kind: str) -> str:
    return f"{source}->{target}.{kind}"


def mirror_configmap_key(connector: str) -> str:
    """Strimzi's key: the connector name with ``->`` replaced by ``--``, plus ``.json``."""
    return connector.replace("->", "--") + ".json"


#: Target-cluster settings that decide where and how a producer connects (copied into
#: ``producer.override.*``); the rest of a cluster's settings are for MirrorMaker 2's own clients.
_PRODUCER_CONNECTION_PREFIXES = ("bootstrap.servers", "security.", "sasl.", "ssl.", "client.dns.lookup")


def producer_override(target_settings: dict[str, str]) -> dict[str, str]:
    """``producer.override.*`` settings that send a connector's records to the target cluster.

    Every record a MirrorMaker 2 connector emits goes through the Connect worker's producer, not
    through MirrorMaker 2's target clients: only these overrides point it elsewhere.
    """
    prefix = "target.cluster."
    return {
        f"producer.override.{key[len(prefix) :]}": value
        for key, value in target_settings.items()
        if key.startswith(prefix) and key[len(prefix) :].startswith(_PRODUCER_CONNECTION_PREFIXES)
    }


@dataclass(frozen=True)
class MirrorClusterIds:
    """The Kafka cluster ids found for one mirror this pass, or why they are unknown."""

    source: str | None = None
    target: str | None = None
    error: str | None = None


def mirror_direction(
    index: int, mirror: MirrorSpec, connect_cluster_id: str | None, found: MirrorClusterIds
) -> ConditionSpec | None:
    """Whether a mirror's connectors may run on this Connect cluster; a refusal as a condition.

    The records of a MirrorMaker 2 connector go through the Connect worker's producer: into the
    worker's own Kafka cluster. With ``writeToTarget: worker`` that cluster must be the target,
    or the mirror writes elsewhere — into its own source, if the aliases are reversed, where its
    output matches the mirror again and topics named ``a.a.a.…`` multiply on both clusters.
    """
    where = f"spec.mirrors[{index}] ({mirror.source_cluster} -> {mirror.target_cluster})"
    if found.error is not None:
        return ConditionSpec(
            "Ready",
            "False",
            "MirrorClusterUnreachable",
            f"{where}: cannot tell which Kafka cluster it reads and writes, so nothing is created or "
            f"changed for it: {found.error}",
        )
    if found.source is not None and found.source == found.target:
        return ConditionSpec(
            "Ready",
            "False",
            "MirrorOntoItself",
            f"{where}: source and target are the same Kafka cluster (id {found.source}); a mirror of a "
            "cluster onto itself copies its own output forever. Point the two aliases at different clusters.",
        )
    if mirror.write_to_target is WriteToTarget.PRODUCER_OVERRIDE or found.target == connect_cluster_id:
        return None
    into = "its source" if found.source == connect_cluster_id else "a cluster that is neither source nor target"
    return ConditionSpec(
        "Ready",
        "False",
        "TargetIsNotConnectCluster",
        f"{where}: the target {mirror.target_cluster} is Kafka cluster {found.target}, but this Connect "
        f"cluster's workers use Kafka cluster {connect_cluster_id or '(not reported by Connect)'}. MirrorMaker 2 "
        f"connectors write their records through the worker's producer, so this mirror would write into "
        f"{into}. Run it on a Connect cluster whose Kafka is the target, swap the aliases if they are "
        f"reversed, or set spec.mirrors[{index}].writeToTarget: producerOverride (the worker's "
        "connector.client.config.override.policy must allow it). Nothing was created.",
    )


@dataclass(frozen=True)
class MirrorPlan:
    targets: list[ConnectorTarget]
    conditions: list[ConditionSpec]
    #: (connector name, offset-syncs topic, cluster alias holding it) when a full reset is requested.
    offset_syncs_reset: tuple[str, str, str] | None = None


def mirror_targets(resource: KafkaMirrorMaker2Resource, secrets: dict[tuple[str, str], str]) -> MirrorPlan:
    """The connectors a KafkaMirrorMaker2 declares, and the problems with its annotations.

    ``secrets`` maps (Secret name, key) to the values the service read for ``secretConfig``.
    """
    spec = resource.spec
    meta = resource.metadata
    clusters = {c.alias: c for c in spec.clusters}
    owner = f"{meta.namespace}/{meta.name}"
    annotations = meta.annotations
    operation = annotations.get(ANNOTATION_OFFSETS)
    selected = annotations.get(ANNOTATION_MM2_CONNECTOR)
    conditions: list[ConditionSpec] = []
    targets: list[ConnectorTarget] = []
    previous = {c.name: c for c in resource.status.connectors}

    def cluster_settings(prefix: str, alias: str) -> dict[str, str]:
        cluster = clusters[alias]
        settings = {f"{prefix}.alias": alias, f"{prefix}.bootstrap.servers": cluster.bootstrap_servers}
        for key, value in cluster.config.items():
            if value is not None:
                settings[f"{prefix}.{key}"] = java_string(value)
        for key, ref in cluster.secret_config.items():
            settings[f"{prefix}.{key}"] = secrets.get((ref.name, ref.key), "")
        return settings

    for index, mirror in enumerate(spec.mirrors):
        blocks = {
            "MirrorSourceConnector": ("sourceConnector", mirror.source_connector),
            "MirrorCheckpointConnector": ("checkpointConnector", mirror.checkpoint_connector),
            "MirrorHeartbeatConnector": ("heartbeatConnector", mirror.heartbeat_connector),
        }
        for kind, (field_name, block) in blocks.items():
            if block is None:
                continue
            name = mirror_connector_name(mirror.source_cluster, mirror.target_cluster, kind)
            config: dict[str, str] = {
                "name": name,
                "connector.class": MIRROR_CLASSES[kind],
                "key.converter": BYTES,
                "value.converter": BYTES,
                **cluster_settings("source.cluster", mirror.source_cluster),
                **cluster_settings("target.cluster", mirror.target_cluster),
            }
            if mirror.topics_pattern is not None and kind == "MirrorSourceConnector":
                config["topics"] = mirror.topics_pattern
            if mirror.topics_exclude_pattern is not None and kind != "MirrorHeartbeatConnector":
                config["topics.exclude"] = mirror.topics_exclude_pattern
            if mirror.groups_pattern is not None and kind == "MirrorCheckpointConnector":
                config["groups"] = mirror.groups_pattern
            if block.tasks_max is not None:
                config["tasks.max"] = str(block.tasks_max)
            if mirror.write_to_target is WriteToTarget.PRODUCER_OVERRIDE:
                config.update(producer_override(cluster_settings("target.cluster", mirror.target_cluster)))
            config.update({k: java_string(v) for k, v in block.config.items() if v is not None})
            own: dict[str, str] = {}
            companions: tuple[tuple[str, str], ...] = ()
            if selected == name and operation is not None:
                own[ANNOTATION_OFFSETS] = operation
                companions = ((ANNOTATION_MM2_CONNECTOR, selected),)
                syncs = annotations.get(ANNOTATION_RESET_OFFSET_SYNCS)
                if syncs is not None:
                    companions += ((ANNOTATION_RESET_OFFSET_SYNCS, syncs),)
                restore_from = annotations.get(ANNOTATION_RESTORE_FROM)
                if restore_from is not None and operation == "restore":
                    own[ANNOTATION_RESTORE_FROM] = restore_from
                    companions += ((ANNOTATION_RESTORE_FROM, restore_from),)
                own.update({key: annotations[key] for key in REQUEST_ANNOTATIONS if key in annotations})
            status = previous.get(name)
            targets.append(
                ConnectorTarget(
                    name=name,
                    owner=owner,
                    class_name=MIRROR_CLASSES[kind],
                    config=config,
                    state=block.state,
                    generation=meta.generation,
                    annotations=own,
                    auto_restart=block.auto_restart,
                    auto_restart_status=(
                        status.auto_restart if status and status.auto_restart else AutoRestartStatus()
                    ),
                    last_offsets_operation=status.last_offsets_operation if status else None,
                    list_configmap=block.list_offsets.to_config_map.name if block.list_offsets else None,
                    alter_configmap=(
                        block.alter_offsets.from_config_map.name
                        if block.alter_offsets and block.alter_offsets.from_config_map
                        else None
                    ),
                    configmap_key=mirror_configmap_key(name),
                    companion_annotations=companions,
                    spec_path=f"spec.mirrors[{index}].{field_name}",
                    stop_policy=bool(block.offsets_policy and block.offsets_policy.stop_connector),
                    pending=status.pending_offsets_operation if status else None,
                    handled_request_ids=tuple(resource.status.handled_request_ids),
                    apply_on_change=bool(block.alter_offsets and block.alter_offsets.apply_on_change),
                    applied_offsets=status.applied_offsets if status else None,
                    chunk_progress=status.offsets_progress if status else None,
                )
            )

    names = [t.name for t in targets]
    if operation is not None and selected is None:
        conditions.append(
            ConditionSpec(
                "InvalidAnnotation",
                "True",
                "MissingAnnotation",
                f"{ANNOTATION_OFFSETS}={operation!r} needs {ANNOTATION_MM2_CONNECTOR}=<connector>, one of: "
                + ", ".join(names),
            )
        )
    elif selected is not None and operation is None:
        conditions.append(
            ConditionSpec(
                "InvalidAnnotation",
                "True",
                "MissingAnnotation",
                f"{ANNOTATION_MM2_CONNECTOR}={selected!r} needs {ANNOTATION_OFFSETS}=list|alter|reset next to it",
            )
        )
    elif selected is not None and selected not in names:
        conditions.append(
            ConditionSpec(
                "InvalidAnnotation",
                "True",
                "UnknownConnector",
                f"{ANNOTATION_MM2_CONNECTOR}={selected!r} matches no connector of this resource; valid names: "
                + ", ".join(names),
            )
        )
    elif operation is not None and operation not in OFFSETS_OPERATIONS:
        conditions.append(
            ConditionSpec(
                "InvalidAnnotation",
                "True",
                "UnknownValue",
                f"{ANNOTATION_OFFSETS}={operation!r} is not one of {', '.join(OFFSETS_OPERATIONS)}; nothing was done",
            )
        )

    syncs_reset: tuple[str, str, str] | None = None
    syncs_value = annotations.get(ANNOTATION_RESET_OFFSET_SYNCS)
    if syncs_value is not None:
        target = next((t for t in targets if t.name == selected), None)
        if (
            syncs_value != "true"
            or operation != "reset"
            or target is None
            or not target.name.endswith(".MirrorSourceConnector")
        ):
            conditions.append(
                ConditionSpec(
                    "InvalidAnnotation",
                    "True",
                    "InvalidOffsetSyncsReset",
                    f"{ANNOTATION_RESET_OFFSET_SYNCS}=true only goes with {ANNOTATION_OFFSETS}=reset of a "
                    "MirrorSourceConnector; nothing in Kafka was touched",
                )
            )
        elif target.config.get("replication.policy.class", DEFAULT_POLICY) not in KNOWN_POLICIES:
            conditions.append(
                ConditionSpec(
                    "InvalidAnnotation",
                    "True",
                    "InvalidOffsetSyncsReset",
                    "a custom replication.policy.class names the offset-syncs topic itself; clear that topic by hand. "
                    "Nothing in Kafka was touched",
                )
            )
        else:
            source_alias = target.config["source.cluster.alias"]
            target_alias = target.config["target.cluster.alias"]
            location = target.config.get("offset-syncs.topic.location", "source")
            # MirrorSourceConfig.offsetSyncsTopic(): named after the *other* cluster's alias, with the
            # policy's internal separator (DefaultReplicationPolicy.offsetSyncsTopic).
            separator = target.config.get("replication.policy.separator", ".")
            if target.config.get("replication.policy.internal.topic.separator.enabled", "true") == "false":
                separator = "."
            other, holder = (source_alias, target_alias) if location == "target" else (target_alias, source_alias)
            syncs_reset = (target.name, f"mm2-offset-syncs{separator}{other}{separator}internal", holder)
    return MirrorPlan(targets, conditions, syncs_reset)
