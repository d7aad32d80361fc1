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
import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Literal

from connect_offsets.models.connect import ConnectorStatus
from connect_offsets.models.crds import (
    AutoRestartSpec,
    AutoRestartStatus,
    ConnectorState,
    KafkaConnectorResource,
    KafkaMirrorMaker2Resource,
    OffsetsOperationStatus,
)
from connect_offsets.models.offsets import (
    OffsetsDocument,
    OffsetsValidationError,
    parse_offsets_document,
    translate_replay_from,
    validate_for_connector,
)

__all__ = [
    "ANNOTATION_OFFSETS",
    "ANNOTATION_RESTART",
    "ANNOTATION_RESTART_TASK",
    "Action",
    "ConditionSpec",
    "ConnectorTarget",
    "MirrorPlan",
    "Observed",
    "OffsetsConfigMap",
    "Plan",
    "RestoreSource",
    "auto_restart_backoff",
    "mirror_configmap_key",
    "mirror_connector_name",
    "mirror_targets",
    "offsets_request_fingerprint",
    "plan_connector",
    "plan_target",
    "target_for_connector",
]

ANNOTATION_PREFIX = "connect-offsets.io/"
ANNOTATION_OFFSETS = ANNOTATION_PREFIX + "connector-offsets"
ANNOTATION_RESTART = ANNOTATION_PREFIX + "restart"
ANNOTATION_RESTART_TASK = ANNOTATION_PREFIX + "restart-task"
ANNOTATION_ADOPT = ANNOTATION_PREFIX + "adopt"
#: Written into each connector's config so that two resources (in any namespaces, or two
#: operators) never silently fight over one globally named connector.
OWNER_CONFIG_KEY = "connect-offsets.io/owner"

OFFSETS_OPERATIONS = ("list", "alter", "reset", "restore")
ANNOTATION_RESTORE_FROM = "connect-offsets.io/restore-from"
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


@dataclass(frozen=True)
class OffsetsConfigMap:
    """The ConfigMap an alter reads, as observed (``None`` fields: it does not exist)."""

    name: str
    exists: bool
    resource_version: str = ""
    data: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class RestoreSource:
    """For ``restore``: the chosen backup (``name`` None: there is none) and the current offsets."""

    name: str | None
    resource_version: str = ""
    backup_json: str = ""
    current: tuple[tuple[str, dict[str, object]], ...] = ()  # (canonical partition key, partition)


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
        alter_configmap=spec.alter_offsets.from_config_map.name if spec.alter_offsets else None,
    )


def _fingerprint(target: ConnectorTarget, configmap: OffsetsConfigMap | None) -> str:
    value = target.annotations.get(ANNOTATION_OFFSETS, "")
    parts = [target.name, value, str(target.generation), configmap.resource_version if configmap else "-"]
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:16]


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
        plan.conditions.append(ConditionSpec("Ready", "False", "ConnectClusterUnavailable", observed.cluster_error))
        return plan

    desired = _desired(target)
    spec_state = target.state
    if observed.config is None:
        initial = _CONNECT_STATE[spec_state] if observed.supports_initial_state else None
        plan.actions.append(Action("create", config=desired, initial_state=initial))
        plan.conditions.append(ConditionSpec("Ready", "False", "Creating", "Creating the connector in Connect"))
        plan.requeue(SETTLE_DELAY_S)
        _plan_annotation_conditions(target, plan)
        return plan

    owner = observed.config.get(OWNER_CONFIG_KEY)
    if owner != target.owner and annotations.get(ANNOTATION_ADOPT) != "true":
        who = f"by {owner}" if owner else "by something other than this operator"
        plan.conditions.append(
            ConditionSpec(
                "Ready",
                "False",
                "ConnectorOwnedElsewhere",
                f"Connector {target.name} already exists in Connect, managed {who}. Connector "
                "names are global on a Connect cluster; rename this resource, or annotate it with "
                f"{ANNOTATION_ADOPT}=true to take the existing connector over.",
            )
        )
        return plan

    config_pending = observed.config != desired
    if config_pending:
        plan.actions.append(Action("update_config", config=desired))
        plan.requeue(SETTLE_DELAY_S)

    status = observed.status
    observed_state = status.state if status else None
    want = _CONNECT_STATE[spec_state]
    state_actions: list[Action] = []
    if observed_state is not None and observed_state != want:
        if spec_state is ConnectorState.STOPPED:
            state_actions.append(Action("stop"))
        elif spec_state is ConnectorState.PAUSED:
            if observed_state != "FAILED":  # Connect cannot pause a failed connector
                state_actions.append(Action("pause"))
        elif observed_state in ("PAUSED", "STOPPED"):
            state_actions.append(Action("resume"))
        if state_actions or observed_state in ("UNASSIGNED", "RESTARTING"):
            plan.requeue(SETTLE_DELAY_S)

    if config_pending:
        # Offsets wait for the new config: validating against the old one would refuse (or apply)
        # a request meant for the new one. Strimzi skips offsets in such a pass as well.
        if annotations.get(ANNOTATION_OFFSETS) in OFFSETS_OPERATIONS:
            plan.offsets_refusal = ("WaitingForConfig", "waiting for Connect to apply the new config", False)
    else:
        # Offsets first: an alter on a STOPPED connector whose spec says running must run before
        # the resume, or Connect would refuse it.
        _plan_offsets(target, observed, plan)
    plan.actions += state_actions
    _plan_restarts(target, observed, plan)
    _plan_ready(target, observed, plan)
    _plan_annotation_conditions(target, plan)
    return plan


def _plan_ready(target: ConnectorTarget, observed: Observed, plan: Plan) -> None:
    status = observed.status
    want = _CONNECT_STATE[target.state]
    if status is None:
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
            plan.auto_restart = AutoRestartStatus(count=previous.count + 1, last_restart_time=_iso(observed.now))
        else:
            assert last is not None
            wait = (last + auto_restart_backoff(previous.count) - observed.now).total_seconds()
            plan.requeue(max(wait, 1.0))
    elif previous.count and last is not None and observed.now >= last + auto_restart_backoff(previous.count):
        # Healthy for longer than the next back-off: start counting from zero again.
        plan.auto_restart = AutoRestartStatus(count=0, last_restart_time=previous.last_restart_time)


def _plan_offsets(target: ConnectorTarget, observed: Observed, plan: Plan) -> None:
    value = target.annotations.get(ANNOTATION_OFFSETS)
    if value is None or value not in OFFSETS_OPERATIONS:
        return
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
    removals = [Action("remove_annotation", annotation=ANNOTATION_OFFSETS, annotation_value=value)] + [
        Action("remove_annotation", annotation=key, annotation_value=val) for key, val in target.companion_annotations
    ]
    if (
        value == "restore"
        and ANNOTATION_RESTORE_FROM in target.annotations
        and not any(key == ANNOTATION_RESTORE_FROM for key, _ in target.companion_annotations)
    ):
        removals.append(
            Action(
                "remove_annotation",
                annotation=ANNOTATION_RESTORE_FROM,
                annotation_value=target.annotations[ANNOTATION_RESTORE_FROM],
            )
        )

    key = target.configmap_key
    if value == "list":
        if target.list_configmap is None:
            _refuse(
                plan, "list", "MissingListOffsets", f"{target.spec_path}.listOffsets.toConfigMap.name is not set", True
            )
            return
        plan.actions += [Action("list_offsets", configmap=target.list_configmap), *removals]
        return

    if value == "alter" and target.alter_configmap is None:
        _refuse(
            plan, "alter", "MissingAlterOffsets", f"{target.spec_path}.alterOffsets.fromConfigMap.name is not set", True
        )
        return
    offsets_json: str | None = None
    if value == "alter":
        configmap = observed.alter_configmap
        name = target.alter_configmap
        if configmap is None or not configmap.exists:
            _refuse(plan, "alter", "ConfigMapNotFound", f"ConfigMap {name} does not exist", True)
            return
        if key not in configmap.data:
            keys = ", ".join(sorted(configmap.data)) or "none"
            _refuse(plan, "alter", "OffsetsKeyMissing", f"ConfigMap {name} has no key {key} (keys: {keys})", True)
            return
        # Validate before anything touches Connect: bad input never leads to a stop or a PATCH.
        try:
            document = parse_offsets_document(configmap.data[key])
            if target.class_name == MIRROR_CLASSES["MirrorSourceConnector"]:
                document = translate_replay_from(document)
            is_sink = observed.status.type == "sink" if observed.status and observed.status.type else None
            validate_for_connector(document, target.class_name, _desired(target), is_sink=is_sink)
        except OffsetsValidationError as error:
            _refuse(plan, "alter", "InvalidOffsets", f"ConfigMap {name} key {key} is invalid:\n{error}", True)
            return
        offsets_json = document.to_compact_json()
    if value == "restore":
        restored = _restore_document(target, observed.restore, plan)
        if restored is None:
            return
        offsets_json = restored

    status = observed.status
    if status is None or not status.is_stopped:
        state = status.state if status else "unknown"
        if target.state is ConnectorState.STOPPED:
            # The stop is on its way (Connect's status lags `PUT /stop`): look again shortly.
            plan.offsets_refusal = ("WaitingForStop", f"waiting for Connect to report STOPPED (now {state})", False)
            plan.requeue(SETTLE_DELAY_S)
            return
        _refuse(
            plan,
            value,
            "ConnectorNotStopped",
            f"the connector is {state} in Connect; {value} needs it STOPPED. Set {target.spec_path}.state: stopped, "
            "wait for Ready=True (ConnectorStopped), and the request runs",
            True,
        )
        return
    if value == "alter":
        plan.actions += [
            Action("alter_offsets", configmap=target.alter_configmap, offsets_json=offsets_json),
            *removals,
        ]
    elif value == "restore":
        assert observed.restore is not None
        plan.actions += [
            Action("restore_offsets", configmap=observed.restore.name, offsets_json=offsets_json),
            *removals,
        ]
    else:
        plan.actions += [Action("reset_offsets"), *removals]


def _restore_document(target: ConnectorTarget, source: RestoreSource | None, plan: Plan) -> str | None:
    """The PATCH that puts the backup's offsets back exactly: its entries, plus null for partitions
    that exist now but not in the backup (PATCH alone would leave them)."""
    wanted = target.annotations.get(ANNOTATION_RESTORE_FROM)
    if source is None or source.name is None:
        which = f"backup {wanted}" if wanted else "any backup"
        _refuse(plan, "restore", "BackupNotFound", f"{which} of connector {target.name} not found", True)
        return None
    try:
        document = parse_offsets_document(source.backup_json, allow_empty=True)
    except OffsetsValidationError as error:
        _refuse(plan, "restore", "InvalidBackup", f"backup {source.name} is unreadable:\n{error}", True)
        return None
    entries = [entry.to_json_obj() for entry in document.entries]
    kept = {OffsetsDocument.partition_key(entry) for entry in document.entries}
    entries += [{"partition": partition, "offset": None} for key, partition in source.current if key not in kept]
    if not entries:
        _refuse(
            plan, "restore", "NothingToRestore", f"backup {source.name} and the connector both have no offsets", True
        )
        return None
    return json.dumps({"offsets": entries}, separators=(",", ":"), ensure_ascii=False)


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


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


# --- KafkaMirrorMaker2 -------------------------------------------------------------------

ANNOTATION_MM2_CONNECTOR = ANNOTATION_PREFIX + "mirrormaker-connector"
ANNOTATION_RESET_OFFSET_SYNCS = ANNOTATION_PREFIX + "reset-offset-syncs"
MIRROR_CLASSES = {
    "MirrorSourceConnector": "org.apache.kafka.connect.mirror.MirrorSourceConnector",
    "MirrorCheckpointConnector": "org.apache.kafka.connect.mirror.MirrorCheckpointConnector",
    "MirrorHeartbeatConnector": "org.apache.kafka.connect.mirror.MirrorHeartbeatConnector",
}
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
                settings[f"{prefix}.{key}"] = _to_string(value)
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
            config.update({k: _to_string(v) for k, v in block.config.items() if v is not None})
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
                    alter_configmap=block.alter_offsets.from_config_map.name if block.alter_offsets else None,
                    configmap_key=mirror_configmap_key(name),
                    companion_annotations=companions,
                    spec_path=f"spec.mirrors[{index}].{field_name}",
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


def _to_string(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
