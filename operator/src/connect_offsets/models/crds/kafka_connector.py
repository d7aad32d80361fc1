"""The KafkaConnector kind: one connector on a ConnectCluster, its initial offsets (KIP-995) and
its status."""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from connect_offsets.models.crds.base import (
    CLAIMED_BY,
    CONDITIONS,
    NAMESPACE_NAME,
    OBSERVED_GENERATION,
    PRESERVE_UNKNOWN,
    Condition,
    ConfigMapRef,
    Model,
    ObjectMeta,
    StatusModel,
    cel,
    flat_values,
    object_name,
)
from connect_offsets.models.crds.connector_parts import (
    ALTER_OFFSETS,
    AUTO_RESTART,
    CONNECTOR_STATUS,
    LIST_OFFSETS,
    OFFSETS_POLICY,
    OFFSETS_PROGRESS,
    RESERVED_CONFIG_KEYS,
    AlterOffsetsSpec,
    AppliedOffsetsStatus,
    AutoRestartSpec,
    AutoRestartStatus,
    ConnectorState,
    ListOffsetsSpec,
    OffsetsOperationStatus,
    OffsetsPolicySpec,
    OffsetsProgressStatus,
    PendingOffsetsOperation,
)
from connect_offsets.vocabulary import java_string

#: Connector names are Connect's (any text); bounded so a hostile spec cannot grow requests and messages.
MAX_CONNECTOR_NAME = 253


class ClusterRef(Model):
    """A ConnectCluster, by name, in the resource's namespace unless ``namespace`` says otherwise."""

    name: Annotated[str, object_name("ConnectCluster name.")]
    namespace: str | None = Field(
        None,
        max_length=63,
        pattern=NAMESPACE_NAME,
        description="Its namespace (default: the resource's); the ConnectCluster must allow this resource's namespace.",
    )


class FromConnectorSpec(Model):
    """Another connector whose offsets a new connector starts from (rename, blue/green, cluster migration)."""

    name: Annotated[
        str,
        Field(
            min_length=1,
            max_length=MAX_CONNECTOR_NAME,
            description="The connector's name in Connect (a KafkaConnector's connector is named after it).",
        ),
    ]
    cluster_ref: ClusterRef | None = Field(
        None, description="The ConnectCluster it runs on (default: this resource's). Both must allow this namespace."
    )


class FromMirrorSpec(Model):
    """A sink connector of the other site whose consumer group MirrorMaker 2 checkpoints: its offsets,
    translated to this cluster, are where a new sink connector starts (disaster recovery)."""

    mirror: Annotated[
        str, object_name("The KafkaMirrorMaker2 in this namespace whose checkpoint connector replicates the group.")
    ]
    source_cluster: str | None = Field(
        None,
        max_length=100,
        description="The source cluster alias of its mirror (needed when several mirrors have a checkpoint connector).",
    )
    source_connector: Annotated[
        str,
        Field(
            min_length=1,
            max_length=MAX_CONNECTOR_NAME,
            description="The sink connector of the source site; its group is connect-<name>, or the "
            "consumer.override.group.id of the KafkaConnector of that name in this namespace.",
        ),
    ]
    group: str | None = Field(
        None, min_length=1, max_length=249, description="The consumer group to translate, when it is neither of those."
    )


class InitialOffsetsSpec(Model):
    """Offsets a new connector starts from (created STOPPED, offsets applied, then brought to spec.state):
    a ConfigMap's document, another connector's offsets, or a consumer group translated through
    MirrorMaker 2 checkpoints. The last two are read once, checked for this connector's class and
    pinned in a ConfigMap of the resource (status.initialOffsets.configMap) before the connector is
    created."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            (
                "[has(self.fromConfigMap), has(self.fromConnector), has(self.fromMirror)].filter(x, x).size() == 1",
                "set exactly one of fromConfigMap, fromConnector and fromMirror",
            )
        )
    )

    from_config_map: ConfigMapRef | None = Field(
        None, description="ConfigMap whose `offsets.json` the connector starts from when it is first created (KIP-995)."
    )
    from_connector: FromConnectorSpec | None = Field(
        None, description="Start where another connector is: its offsets, read when this connector is first created."
    )
    from_mirror: FromMirrorSpec | None = Field(
        None,
        description="Start where the other site's sink connector stopped: its group's offsets translated through "
        "the mirror's checkpoints (KIP-875 sink form, remote topic names).",
    )

    @model_validator(mode="after")
    def _one_source(self) -> InitialOffsetsSpec:
        given = [x for x in (self.from_config_map, self.from_connector, self.from_mirror) if x is not None]
        if len(given) != 1:
            raise ValueError("set exactly one of fromConfigMap, fromConnector and fromMirror")
        return self


#: The connector config key KIP-891 (Kafka Connect 4.1) reads the plugin version from; spec.version sets it.
PLUGIN_VERSION_KEY: Final = "connector.plugin.version"

#: A Go-style duration of whole seconds, minutes and hours ("15m", "1h30m", "90s"): what
#: ``spec.progress.stallAfter`` takes. Linear to match (no nested repetition).
DURATION_PATTERN: Final = r"^([0-9]{1,6}[hms]){1,3}$"
_DURATION_PART = re.compile(r"([0-9]+)([hms])")
_UNIT_SECONDS = {"h": 3600, "m": 60, "s": 1}


def duration_seconds(text: str) -> int:
    """Seconds of a ``DURATION_PATTERN`` duration ("1h30m" -> 5400)."""
    return sum(int(number) * _UNIT_SECONDS[unit] for number, unit in _DURATION_PART.findall(text))


class ProgressSpec(Model):
    """Whether the connector is moving: sink lag and the age of the last offsets change, and when a
    RUNNING connector that should move has not (the Progressing condition)."""

    enabled: bool = Field(
        True,
        description=(
            "Measure progress: a RUNNING sink connector's consumer group against the end offsets (needs "
            "ConnectCluster spec.kafka), a RUNNING source connector's offsets every few minutes."
        ),
    )
    stall_after: Annotated[
        str,
        Field(
            pattern=DURATION_PATTERN,
            max_length=24,
            description=(
                "Progressing turns False (reason NotAdvancing) when a RUNNING connector that should move has "
                'not moved its offsets for this long: a duration such as "15m", "1h" or "90s".'
            ),
        ),
    ] = "15m"
    expect_source_records: bool = Field(
        False,
        description=(
            "Source connectors: their input is outside Kafka, so the operator cannot tell whether records are "
            "waiting. True: a RUNNING source connector whose offsets have not changed for stallAfter is "
            "NotAdvancing. False (default): a source connector is never reported stalled."
        ),
    )

    @field_validator("stall_after")
    @classmethod
    def _positive(cls, value: str) -> str:
        if duration_seconds(value) < 1:
            raise ValueError(f"{value!r} must be at least 1s")
        return value

    @property
    def stall_after_seconds(self) -> int:
        return duration_seconds(self.stall_after)


class OffsetsOnDelete(StrEnum):
    """What happens to the connector's offsets when the KafkaConnector is deleted."""

    #: The connector is deleted, its offsets stay in Kafka (a connector re-created under the same
    #: name continues from them): Kafka Connect's own behaviour, and the default.
    KEEP = "keep"
    #: As keep, with the offsets saved first in a ConfigMap that outlives the resource.
    BACKUP = "backup"
    #: The connector is stopped, its offsets backed up and deleted, then it is deleted: one
    #: re-created under the same name starts clean.
    RESET = "reset"


class KafkaConnectorSpec(Model):
    """The connector as it should be in Connect (class, config, tasks, state) and where its offsets are
    exchanged (listOffsets, alterOffsets, initialOffsets). The ConnectCluster is chosen by the label
    connect-offsets.io/cluster (and connect-offsets.io/cluster-namespace)."""

    class_: Annotated[str, Field(alias="class", min_length=1, description="Connector class (or alias).")]
    tasks_max: Annotated[int, Field(ge=1, description="Maximum number of tasks.")] | None = None
    config: dict[str, Any] = Field(
        default_factory=dict,
        description=(
            "Connector configuration; values are sent to Connect as strings. Not name, connector.class or "
            "tasks.max: metadata.name, spec.class and spec.tasksMax set them."
        ),
        json_schema_extra=PRESERVE_UNKNOWN,
    )
    state: ConnectorState = Field(ConnectorState.RUNNING, description="Desired state in Connect.")
    auto_restart: AutoRestartSpec | None = Field(None, description=AUTO_RESTART)
    list_offsets: ListOffsetsSpec | None = Field(None, description=LIST_OFFSETS)
    alter_offsets: AlterOffsetsSpec | None = Field(None, description=ALTER_OFFSETS)
    offsets_policy: OffsetsPolicySpec | None = Field(None, description=OFFSETS_POLICY)
    initial_offsets: InitialOffsetsSpec | None = Field(
        None, description="Offsets the connector starts from when the operator first creates it (KIP-995)."
    )
    version: Annotated[
        str | None,
        Field(
            min_length=1,
            max_length=200,
            pattern=r"^[^\s]+$",
            description=(
                "The connector plugin's version (KIP-891, Kafka Connect 4.1 or newer): a version or a Maven "
                "range such as [4.0,5.0), sent as connector.plugin.version. Changing it is an upgrade: the "
                "operator backs up the offsets first. Refused on older workers (Ready False, "
                "PluginVersionUnsupported)."
            ),
        ),
    ] = None
    progress: ProgressSpec = Field(
        default_factory=ProgressSpec,
        description="Progress and stall detection (status.progress, the Progressing condition).",
    )
    offsets_on_delete: OffsetsOnDelete = Field(
        OffsetsOnDelete.KEEP,
        description=(
            "What deleting this resource does to the connector's offsets. keep (default): they stay in Kafka. "
            "backup: saved first in a ConfigMap that outlives the resource. reset: the connector is stopped, "
            "its offsets backed up and deleted, then it is deleted, so one re-created under the same name "
            "starts clean."
        ),
    )

    @field_validator("config")
    @classmethod
    def _no_reserved_keys(cls, config: dict[str, Any]) -> dict[str, Any]:
        reserved = [k for k in RESERVED_CONFIG_KEYS if k in config]
        if reserved:
            raise ValueError(
                f"config must not contain {', '.join(reserved)}: use metadata.name, spec.class and "
                "spec.tasksMax instead"
            )
        if PLUGIN_VERSION_KEY in config:
            raise ValueError(f"config must not contain {PLUGIN_VERSION_KEY}: use spec.version instead")
        return flat_values(config)

    def connect_config(self, name: str) -> dict[str, str]:
        """The config document Connect receives (all values as strings, as Connect returns them)."""
        config = {key: java_string(value) for key, value in self.config.items() if value is not None}
        config["connector.class"] = self.class_
        config["name"] = name
        if self.tasks_max is not None:
            config["tasks.max"] = str(self.tasks_max)
        if self.version is not None:
            config[PLUGIN_VERSION_KEY] = self.version
        return config


class InitialOffsetsStatus(StatusModel):
    """Progress of spec.initialOffsets: the connector is created STOPPED, offsets applied, then started."""

    config_map: str = Field(
        description="The ConfigMap the initial offsets come from (fromConnector, fromMirror: the pinned copy)."
    )
    step: Literal["Pinned", "Creating", "Applied", "Failed"] = Field(
        description="Pinned: another connector's offsets (or a translated group) copied into configMap, nothing "
        "created yet; Creating: created STOPPED, offsets not yet applied; Applied: done; Failed: see message."
    )
    source: str | None = Field(
        None,
        description="fromConnector, fromMirror: what was read and pinned (the connector and its cluster, or "
        "the group).",
    )
    time: str = Field(description="When the step was reached (RFC 3339).")
    request: str | None = Field(None, description="Fingerprint of the inputs of a failed attempt.")
    message: str = Field(
        "", description="Applied: what was done; Failed: why; Creating: the leftover offsets already removed."
    )


class ProgressStatus(StatusModel):
    """Whether the connector is moving, bounded in size whatever the number of partitions."""

    type: Literal["sink", "source"] = Field(description="sink: consumer group lag; source: offsets changes.")
    total_lag: int | None = Field(
        None, description="Sink: records waiting, all partitions (end offset minus committed offset)."
    )
    partitions_behind: int | None = Field(None, description="Sink: partitions with records waiting.")
    partitions: int | None = Field(None, description="Partitions measured (sink: topic partitions; source: offsets).")
    last_moved: str | None = Field(
        None,
        description=(
            "When the connector's offsets last moved as far as the operator saw (RFC 3339; the Last Progress "
            "column shows its age). Absent until a move is seen."
        ),
    )
    message: str = Field("", description="Why progress is not measured, or what the last measurement met.")


class DeletionStatus(StatusModel):
    """spec.offsetsOnDelete in progress: written before each step, so a restarted operator finishes
    the same deletion without repeating a step."""

    mode: Literal["backup", "reset"] = Field(description="The spec.offsetsOnDelete being carried out.")
    step: Literal["Stopping", "Resetting", "Deleting", "Done"] = Field(
        description=(
            "Stopping: waiting for STOPPED; Resetting: backup kept, offsets being deleted; Deleting: the "
            "connector being deleted; Done: finished (the Event has been posted)."
        )
    )
    backup: str | None = Field(
        None, description="The ConfigMap holding the offsets from before; it outlives the resource."
    )
    reset: bool = Field(False, description="reset: Connect has deleted the offsets.")
    started: str = Field(description="When the deletion started (RFC 3339).")
    message: str = Field("", description="What was done.")


class PluginUpgradeStatus(StatusModel):
    """A change of spec.version: the backup taken before the new connector.plugin.version was sent."""

    from_version: str | None = Field(None, description="connector.plugin.version before (absent: the default).")
    to_version: str | None = Field(None, description="connector.plugin.version asked (absent: the default).")
    backup: str | None = Field(None, description="ConfigMap holding the offsets from before the upgrade.")
    time: str = Field(description="When the backup was taken (RFC 3339).")


class KafkaConnectorStatus(StatusModel):
    """What the operator last observed and did: conditions, the connector's state in Connect, the last
    offsets operation and any in progress. Written by the operator only."""

    conditions: list[Condition] = Field(default_factory=list, description=CONDITIONS)
    observed_generation: int | None = Field(None, description=OBSERVED_GENERATION)
    cluster: str | None = Field(
        None,
        description=(
            "The ConnectCluster in use, from the labels connect-offsets.io/cluster and "
            "connect-offsets.io/cluster-namespace: NAME in the resource's own namespace, NAMESPACE/NAME in "
            "another (the Cluster column of kubectl get)."
        ),
    )
    claimed_by: str | None = Field(None, description=CLAIMED_BY)
    connector_status: dict[str, Any] | None = Field(
        None, description=CONNECTOR_STATUS, json_schema_extra=PRESERVE_UNKNOWN
    )
    tasks_max: int | None = Field(None, description="The number of tasks Connect reports for the connector.")
    topics: list[str] = Field(default_factory=list, description="Topics the connector used (GET .../topics).")
    auto_restart: AutoRestartStatus | None = None
    last_offsets_operation: OffsetsOperationStatus | None = None
    pending_offsets_operation: PendingOffsetsOperation | None = None
    handled_request_ids: list[str] = Field(
        default_factory=list, description="The newest connect-offsets.io/request-id values already handled."
    )
    applied_offsets: AppliedOffsetsStatus | None = None
    initial_offsets: InitialOffsetsStatus | None = None
    offsets_progress: OffsetsProgressStatus | None = Field(None, description=OFFSETS_PROGRESS)
    progress: ProgressStatus | None = Field(
        None, description="Is it moving: sink lag, the last time the offsets moved (spec.progress)."
    )
    plugin_version: str | None = Field(
        None, description="The connector plugin version Connect reports as running (Kafka Connect 4.1 or newer)."
    )
    plugin_upgrade: PluginUpgradeStatus | None = Field(
        None, description="The last change of spec.version and the offsets backup taken before it."
    )
    deletion: DeletionStatus | None = Field(
        None, description="spec.offsetsOnDelete being carried out (only while the resource is being deleted)."
    )


class KafkaConnectorResource(BaseModel):
    model_config = ConfigDict(extra="ignore")

    metadata: ObjectMeta
    spec: KafkaConnectorSpec
    status: KafkaConnectorStatus = Field(default_factory=KafkaConnectorStatus)

    @property
    def connector_name(self) -> str:
        return self.metadata.name


# --- KafkaMirrorMaker2 -------------------------------------------------------------------
