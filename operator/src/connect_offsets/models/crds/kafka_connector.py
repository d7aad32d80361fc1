"""The KafkaConnector kind: one connector on a ConnectCluster, its initial offsets (KIP-995) and
its status."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from connect_offsets.models.crds.base import (
    CONDITIONS,
    OBSERVED_GENERATION,
    PRESERVE_UNKNOWN,
    Condition,
    ConfigMapRef,
    Model,
    ObjectMeta,
    StatusModel,
    flat_values,
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


class InitialOffsetsSpec(Model):
    """Offsets a new connector starts from (created STOPPED, offsets applied, then brought to spec.state)."""

    from_config_map: ConfigMapRef = Field(
        description="ConfigMap whose `offsets.json` the connector starts from when it is first created (KIP-995)."
    )


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

    config_map: str = Field(description="The ConfigMap the initial offsets come from.")
    step: Literal["Creating", "Applied", "Failed"] = Field(
        description="Creating: created STOPPED, offsets not yet applied; Applied: done; Failed: see message."
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
