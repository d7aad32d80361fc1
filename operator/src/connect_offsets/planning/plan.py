"""The planner's vocabulary: what it is shown (``Observed`` and the documents in it) and what it
returns (``Plan``: ``Action``s, ``ConditionSpec``s, a refusal). Why separate: every other planning
module and the reconcile layer speak these types; they decide nothing themselves.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Literal

from connect_offsets.models.connect import ConnectorStatus
from connect_offsets.models.crds import (
    AppliedOffsetsStatus,
    AutoRestartStatus,
    PendingOffsetsOperation,
)

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
#: How long a stop, pause or resume sent is not sent again while Connect's status still shows the
#: state before it (measured lag on the real stack: 20 ms to 0.9 s). Past it, a status that still
#: disagrees means something else moved the connector (or the change was lost): sent again.
STATE_CHANGE_SETTLE_S = 10.0
#: How long a Lease term that followed another replica's holds every stop, pause and resume back:
#: that replica's last ones (sent at most moments before it released the Lease, or longer before
#: it expired) show in Connect's status within the lag measured above; three times it. Shorter
#: than ``STATE_CHANGE_SETTLE_S``: it delays a change nobody sent as often as one that was.
INHERITED_HOLD_S = 3.0


def state_change_settling(change: str, sent: tuple[str, float] | None, inherited_term_age: float | None) -> bool:
    """Whether ``change`` (stop, pause, resume) may have been sent moments ago - by this process
    (``sent``: the last one and its age) or by the replica whose Lease term this one followed -
    so that Connect's status may not show it yet: then it is not sent again."""
    if sent is not None and sent[0] == change and sent[1] < STATE_CHANGE_SETTLE_S:
        return True
    return inherited_term_age is not None and inherited_term_age < INHERITED_HOLD_S


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
class SourceOffsets:
    """Offsets read from elsewhere for a copy: another connector's (``GET .../offsets``), or a consumer
    group's translated through MirrorMaker 2 checkpoints; or why there are none.

    ``reason`` set: refused (a condition reason: SourceConnectorNotFound, SourceConnectorNotAllowed,
    ClusterNotAllowed, UntranslatablePartitions ...), ``transient``: try again later.
    """

    description: str  # what was read, for messages: "connector orders-v1 on ConnectCluster team-a/local"
    document_json: str | None = None
    reason: str | None = None
    message: str = ""
    transient: bool = False
    notes: tuple[str, ...] = ()  # said next to the outcome (a stale checkpoint, a source that was not listed)


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
    #: The ConfigMap an alter dry run reads instead of ``alter_configmap`` (``dry-run-from``).
    dry_run_configmap: OffsetsConfigMap | None = None
    #: The Ready reason for ``cluster_error`` (e.g. SecretNotOptedIn, PlaintextCredentials, HostNotAllowed,
    #: ClusterNotAllowed, ConnectorNameNotAllowed).
    cluster_error_reason: str = "ConnectClusterUnavailable"
    #: A copy's source read now (alter-from-connector before it is pinned, or its dry run;
    #: initialOffsets.fromConnector / fromMirror before they are pinned).
    copy_source: SourceOffsets | None = None
    #: The pinned copy of an alter-from-connector request (read at its first attempt).
    pinned_copy: OffsetsConfigMap | None = None
    #: The last stop, pause or resume sent to this connector and how many seconds ago (None: none
    #: this process knows of): Connect's status lags it (``clients.connect.state_changes``).
    state_change_sent: tuple[str, float] | None = None
    #: Seconds since this pass's Lease term began, when it followed another replica's term (None
    #: otherwise): that replica's last stops and resumes may not show yet either.
    inherited_term_age: float | None = None

    def carries_documents(self) -> bool:
        """Whether a tenant's offsets text came with this observation (planning validates it)."""
        held = (self.alter_configmap, self.restore, self.initial_configmap, self.dry_run_configmap)
        return any(x is not None for x in (*held, self.seek, self.copy_source, self.pinned_copy))

    def without_documents(self) -> Observed:
        """The same observation without the offsets texts, once the plan holds what it needs of them:
        kept through a chunked PATCH, a million-partition restore would hold two more 100 MB texts."""
        return replace(
            self,
            alter_configmap=_without_data(self.alter_configmap),
            restore=None if self.restore is None else replace(self.restore, backup_json="", current_json=""),
            initial_configmap=_without_data(self.initial_configmap),
            dry_run_configmap=_without_data(self.dry_run_configmap),
            seek=None if self.seek is None else replace(self.seek, document_json=None),
            copy_source=None if self.copy_source is None else replace(self.copy_source, document_json=None),
            pinned_copy=_without_data(self.pinned_copy),
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
    "pin_offsets",
    "pin_initial_offsets",
    "remove_annotation",
    "mark_handled",
]

#: What a plan may do without writing to the connector in Connect. Any other action is a write,
#: and a pass that planned one from the cluster's snapshot plans again from a fresh read first
#: (``reconcile.runner``): the connector may have been deleted and re-created by someone else.
CONNECT_READ_ONLY = frozenset(
    {
        "list_offsets",
        "dry_run_offsets",
        "update_pending",
        "finish_offsets_change",
        "remove_annotation",
        "mark_handled",
        "pin_offsets",
        "pin_initial_offsets",
    }
)


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
    #: A copy (pin_offsets, a copy's dry run, initial offsets from elsewhere): what the offsets were read from.
    source: str | None = None
    #: A copy's dry run: the problems this connector's typed checks find in the source's offsets (the
    #: partitions that will not match it), listed in the report instead of refusing the preview.
    not_matching: tuple[str, ...] = ()


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
    request_key: str | None = None  # identity of the annotations of that request (``request_key``)
    #: The resourceVersion this plan was made from: the ``instance`` of an outcome it records.
    request_instance: str | None = None
    applied_offsets: AppliedOffsetsStatus | None = None  # applyOnChange: record after this plan
    #: An alter request from the applyOnChange ConfigMap: the content hash it applies, recorded in
    #: status.appliedOffsets once it succeeded (so applyOnChange does not apply it a second time).
    alter_content: str | None = None

    def requeue(self, seconds: float) -> None:
        self.requeue_after = seconds if self.requeue_after is None else min(self.requeue_after, seconds)


@dataclass(frozen=True)
class PlannedRefusal:
    reason: str
    message: str


def configmap_text(configmap: OffsetsConfigMap | None, name: str, key: str) -> str | PlannedRefusal:
    """The offsets text under ``key`` of an observed ConfigMap, or why there is none."""
    if configmap is None or not configmap.exists:
        return PlannedRefusal("ConfigMapNotFound", f"ConfigMap {name} does not exist")
    if configmap.error is not None:
        return PlannedRefusal(configmap.error_reason, f"ConfigMap {name}: {configmap.error}")
    if key not in configmap.data:
        keys = ", ".join(sorted(configmap.data)) or "none"
        return PlannedRefusal("OffsetsKeyMissing", f"ConfigMap {name} has no key {key} (keys: {keys})")
    return configmap.data[key]
