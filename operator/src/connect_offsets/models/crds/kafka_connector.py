"""The KafkaConnector kind: one connector on a ConnectCluster, its initial offsets (KIP-995) and
its status."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from connect_offsets.models.crds.base import (
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

    @field_validator("config")
    @classmethod
    def _no_reserved_keys(cls, config: dict[str, Any]) -> dict[str, Any]:
        reserved = [k for k in RESERVED_CONFIG_KEYS if k in config]
        if reserved:
            raise ValueError(
                f"config must not contain {', '.join(reserved)}: use metadata.name, spec.class and "
                "spec.tasksMax instead"
            )
        return flat_values(config)

    def connect_config(self, name: str) -> dict[str, str]:
        """The config document Connect receives (all values as strings, as Connect returns them)."""
        config = {key: java_string(value) for key, value in self.config.items() if value is not None}
        config["connector.class"] = self.class_
        config["name"] = name
        if self.tasks_max is not None:
            config["tasks.max"] = str(self.tasks_max)
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
    message: str = Field("", description="Why it failed.")


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


class KafkaConnectorResource(BaseModel):
    model_config = ConfigDict(extra="ignore")

    metadata: ObjectMeta
    spec: KafkaConnectorSpec
    status: KafkaConnectorStatus = Field(default_factory=KafkaConnectorStatus)

    @property
    def connector_name(self) -> str:
        return self.metadata.name


# --- KafkaMirrorMaker2 -------------------------------------------------------------------
