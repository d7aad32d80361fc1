"""The KafkaMirrorMaker2 kind: Kafka clusters by alias, mirrors (source -> target flows, each a set
of MirrorMaker 2 connectors), replication lag settings, and its status."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

from connect_offsets.models.crds.base import (
    CLAIMED_BY,
    CONDITIONS,
    OBSERVED_GENERATION,
    PRESERVE_UNKNOWN,
    Condition,
    Model,
    ObjectMeta,
    SecretKeyRef,
    StatusModel,
    cel,
    flat_values,
    settings_not_from_secrets,
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

#: ... and for a MirrorMaker 2 connector, the cluster aliases its mirror sets.
MIRROR_RESERVED_CONFIG_KEYS = (*RESERVED_CONFIG_KEYS, "source.cluster.alias", "target.cluster.alias")


#: Bounds that keep the CEL rules' estimated cost within the API server's budget (it refuses a
#: CRD whose rules could cost too much on an unbounded list or string).
MAX_ALIAS = 100
MAX_MIRROR_CLUSTERS = 32
MAX_MIRRORS = 100


class MirrorClusterSpec(Model):
    """A Kafka cluster MirrorMaker 2 reads from or writes to."""

    alias: Annotated[
        str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", max_length=MAX_ALIAS, description="Cluster alias.")
    ]
    bootstrap_servers: Annotated[str, Field(min_length=1, description="host:port[,host:port...]")]
    config: dict[str, Any] = Field(
        default_factory=dict,
        description="Kafka client settings for this cluster (no secrets: use secretConfig).",
        json_schema_extra=PRESERVE_UNKNOWN,
    )
    secret_config: dict[str, SecretKeyRef] = Field(
        default_factory=dict,
        description="Kafka client settings whose values come from Secrets, e.g. sasl.jaas.config.",
    )

    @field_validator("config")
    @classmethod
    def _plain_settings(cls, config: dict[str, Any]) -> dict[str, Any]:
        reserved = [k for k in ("alias", "bootstrap.servers") if k in config]
        if reserved:
            raise ValueError(f"config must not contain {', '.join(reserved)}: use alias and bootstrapServers")
        return flat_values(config)

    _secret_settings = field_validator("secret_config")(settings_not_from_secrets)


class MirrorConnectorSpec(Model):
    """One MirrorMaker 2 connector of a mirror; the same knobs as a KafkaConnector."""

    tasks_max: Annotated[int, Field(ge=1, description="Maximum number of tasks.")] | None = None
    config: dict[str, Any] = Field(
        default_factory=dict,
        description="Connector settings added to what the mirror derives (topics, clusters, converters).",
        json_schema_extra=PRESERVE_UNKNOWN,
    )
    state: ConnectorState = Field(ConnectorState.RUNNING, description="Desired state in Connect.")
    auto_restart: AutoRestartSpec | None = Field(None, description=AUTO_RESTART)
    list_offsets: ListOffsetsSpec | None = Field(None, description=LIST_OFFSETS)
    alter_offsets: AlterOffsetsSpec | None = Field(None, description=ALTER_OFFSETS)
    offsets_policy: OffsetsPolicySpec | None = Field(None, description=OFFSETS_POLICY)

    @field_validator("config")
    @classmethod
    def _no_reserved_keys(cls, config: dict[str, Any]) -> dict[str, Any]:
        reserved = [k for k in MIRROR_RESERVED_CONFIG_KEYS if k in config]
        if reserved:
            raise ValueError(f"config must not contain {', '.join(reserved)}: the mirror sets them")
        return flat_values(config)


class WriteToTarget(StrEnum):
    """How a mirror's records reach its target cluster.

    MirrorMaker 2 run as Connect connectors writes every record through the *worker's* producer,
    i.e. into the Kafka cluster the Connect workers use, whatever ``target.cluster.bootstrap.servers``
    says. ``worker`` (the default) therefore requires the target to be that cluster; the operator
    checks the cluster ids and refuses otherwise (a mirror writing into its own source mirrors its
    own output, recursively). ``producerOverride`` points the connectors' producer at the target
    with ``producer.override.*`` settings, which the worker's
    ``connector.client.config.override.policy`` must allow.
    """

    WORKER = "worker"
    PRODUCER_OVERRIDE = "producerOverride"


#: Kafka limits a group id to 249 characters in practice (like topic names); more is surely a mistake.
MAX_GROUP_ID = 249


class GroupFailoverSpec(Model):
    """Consumer groups of the source cluster to fail over to the target (disaster recovery)."""

    groups: Annotated[
        list[Annotated[str, Field(min_length=1, max_length=MAX_GROUP_ID)]],
        Field(
            min_length=1,
            max_length=100,
            description="Group ids. Each is failed over once (status.groupFailovers); remove a group and add it "
            "again to fail it over again.",
        ),
    ]
    allow_partial: bool = Field(
        False,
        description="Commit a partial translation: the partitions MirrorMaker 2's checkpoints translate, when "
        "some cannot be (or the group's offsets on the source cluster cannot be read, the source site being "
        "down). The others start from the consumer's auto.offset.reset on the target. false (default): "
        "refused, nothing committed, each partition listed with its reason.",
    )


class MirrorSpec(Model):
    """One replication flow: its source and target clusters, and the connectors that run it."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            ("self.sourceCluster != self.targetCluster", "sourceCluster and targetCluster must differ")
        )
    )

    source_cluster: Annotated[
        str, Field(min_length=1, max_length=MAX_ALIAS, description="Alias of the source cluster.")
    ]
    target_cluster: Annotated[
        str, Field(min_length=1, max_length=MAX_ALIAS, description="Alias of the target cluster.")
    ]
    write_to_target: WriteToTarget = Field(
        WriteToTarget.WORKER,
        description=(
            "worker: the Connect cluster's own Kafka must be the target (checked by cluster id; the "
            "mirror is refused otherwise). producerOverride: the connectors write to the target through "
            "producer.override.* settings, which the worker's connector.client.config.override.policy "
            "must allow (checked with Connect's config validation before anything is created)."
        ),
    )
    topics_pattern: str | None = Field(None, description="Topics to mirror (MM2 `topics`).")
    topics_exclude_pattern: str | None = Field(None, description="Topics not to mirror (`topics.exclude`).")
    groups_pattern: str | None = Field(None, description="Consumer groups to checkpoint (`groups`).")
    source_connector: MirrorConnectorSpec | None = None
    checkpoint_connector: MirrorConnectorSpec | None = None
    heartbeat_connector: MirrorConnectorSpec | None = None
    group_failover: GroupFailoverSpec | None = Field(
        None,
        description="Fail these consumer groups over to the target: each group's offsets, translated through this "
        "mirror's checkpoints, are committed on the target cluster once (while the group has no active members).",
    )


class ReplicationLagSpec(Model):
    """How the operator measures MirrorMaker 2 replication lag (on by default for every sourceConnector)."""

    enabled: bool = Field(True, description="Measure the lag of every mirror that declares a sourceConnector.")
    interval_seconds: Annotated[
        float, Field(ge=1, le=3600, description="Seconds between two measurements of a mirror.")
    ] = 30.0
    threshold: Annotated[int, Field(ge=0)] | None = Field(
        None, description="ReplicationLagging=True when a mirror's total lag (records) stays above this..."
    )
    for_seconds: Annotated[
        float, Field(ge=0, description="... for at least this many seconds (measured at each interval).")
    ] = 300.0


class PartitionLagStatus(StatusModel):
    """One source partition and its lag in records."""

    topic: str = Field(description="Source topic.")
    partition: int = Field(description="Partition number.")
    lag: int = Field(description="Records on the source not yet replicated.")
    mirror: str | None = Field(None, description="`<source>-><target>`, in the resource-wide summary.")


class MirrorLagStatus(StatusModel):
    """The latest replication lag measurement of one mirror."""

    source_cluster: str = Field(description="Alias of the source cluster.")
    target_cluster: str = Field(description="Alias of the target cluster.")
    connector: str = Field(description="The MirrorSourceConnector measured.")
    total: int | None = Field(None, description="Records on the source not yet replicated, all partitions.")
    max: int | None = Field(None, description="The largest lag of one partition.")
    partitions: int | None = Field(None, description="Source partitions measured.")
    worst_partition: PartitionLagStatus | None = None
    measured_at: str | None = Field(None, description="Time of the last successful measurement.")
    stale: bool = Field(False, description="The numbers are from an earlier measurement; see message.")
    message: str = Field("", description="Why the measurement failed or is stale.")


class ReplicationLagStatus(StatusModel):
    """Replication lag over all mirrors (the sum of their totals, the worst partition of all)."""

    total: int | None = Field(None, description="Records not yet replicated, summed over the mirrors.")
    max: int | None = Field(None, description="The largest lag of one partition, over the mirrors.")
    worst_partition: PartitionLagStatus | None = None
    measured_at: str | None = Field(None, description="The oldest measurement time among the mirrors.")
    stale: bool = Field(False, description="Some mirror's numbers are from an earlier measurement.")
    message: str = Field("", description="Why some measurement failed or is stale.")
    mirrors: list[MirrorLagStatus] = Field(default_factory=list, description="The lag of each mirror.")


class KafkaMirrorMaker2Spec(Model):
    """The Kafka clusters (by alias) and the mirrors between them; each mirror runs up to three
    MirrorMaker 2 connectors (source, checkpoint, heartbeat) on the ConnectCluster chosen by the label
    connect-offsets.io/cluster, each with its own offsets requests."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            (
                "self.clusters.all(c, self.clusters.exists_one(d, d.alias == c.alias))",
                "every alias must be unique",
                ".clusters",
            ),
            (
                "self.mirrors.all(m, self.clusters.exists(c, c.alias == m.sourceCluster)"
                " && self.clusters.exists(c, c.alias == m.targetCluster))",
                "sourceCluster and targetCluster must each be the alias of one of the clusters",
                ".mirrors",
            ),
        )
    )

    clusters: Annotated[
        list[MirrorClusterSpec],
        Field(
            min_length=1,
            max_length=MAX_MIRROR_CLUSTERS,
            description="The Kafka clusters the mirrors refer to by alias.",
        ),
    ]
    mirrors: Annotated[
        list[MirrorSpec],
        Field(
            min_length=1,
            max_length=MAX_MIRRORS,
            description="Source -> target replication flows, each a set of connectors.",
        ),
    ]
    replication_lag: ReplicationLagSpec = Field(
        default_factory=ReplicationLagSpec,
        description="Replication lag monitoring: source end offsets minus the MirrorSourceConnector's offsets.",
    )

    @model_validator(mode="after")
    def _aliases(self) -> KafkaMirrorMaker2Spec:
        aliases = [c.alias for c in self.clusters]
        duplicates = sorted({a for a in aliases if aliases.count(a) > 1})
        if duplicates:
            raise ValueError(f"clusters: duplicate alias(es) {', '.join(duplicates)}")
        for index, mirror in enumerate(self.mirrors):
            for field_name in ("source_cluster", "target_cluster"):
                alias = getattr(mirror, field_name)
                if alias not in aliases:
                    raise ValueError(
                        f"mirrors[{index}].{to_camel(field_name)}: {alias!r} is not one of the clusters "
                        f"({', '.join(aliases)})"
                    )
            if mirror.source_cluster == mirror.target_cluster:
                raise ValueError(f"mirrors[{index}]: sourceCluster and targetCluster must differ")
        return self


class MirrorConnectorStatus(StatusModel):
    """One MirrorMaker 2 connector: its readiness and the same offsets status a KafkaConnector has."""

    name: str = Field(description="Connector name in Connect.")
    ready: bool = Field(False, description="Running as desired with no failed task.")
    reason: str = Field("", description="Why it is not ready (a condition reason).")
    message: str = Field("", description="Details of reason.")
    connector_status: dict[str, Any] | None = Field(
        None, description=CONNECTOR_STATUS, json_schema_extra=PRESERVE_UNKNOWN
    )
    auto_restart: AutoRestartStatus | None = None
    last_offsets_operation: OffsetsOperationStatus | None = None
    pending_offsets_operation: PendingOffsetsOperation | None = None
    applied_offsets: AppliedOffsetsStatus | None = None
    offsets_progress: OffsetsProgressStatus | None = Field(None, description=OFFSETS_PROGRESS)


class GroupFailoverStatus(StatusModel):
    """One consumer group failed over through a mirror's checkpoints (or a failover being carried out)."""

    mirror: str = Field(description="`<source>-><target>`: the mirror whose checkpoints translated the group.")
    group: str = Field(description="The consumer group.")
    source: Literal["annotation", "spec"] = Field(
        description="What asked for it: the connect-offsets.io/failover-group annotation, or "
        "spec.mirrors[].groupFailover."
    )
    step: Literal["Committing"] | None = Field(
        None,
        description="Committing: the translated offsets are pinned (pinned) and being committed; a restarted "
        "operator checks the group's offsets before committing again.",
    )
    result: Literal["Succeeded", "Failed"] | None = Field(None, description="The outcome, once there is one.")
    reason: str = Field("", description="Why it failed (the condition reason), empty on success.")
    message: str = Field("", description="What was done, or why not; every untranslatable partition with why.")
    time: str = Field(description="When the step or the outcome was reached (RFC 3339).")
    partitions: int | None = Field(None, description="Partitions translated (committed, unless a dry run).")
    pinned: str | None = Field(None, description="The ConfigMap holding the translated offsets (key offsets.json).")
    dry_run: bool | None = Field(None, description="True: a dry run; nothing was committed.")
    generation: int | None = Field(None, description="metadata.generation of the resource it was decided for.")
    request_id: str | None = Field(None, description="The connect-offsets.io/request-id of the request, if any.")
    request_key: str | None = Field(None, description="Identity of the annotations that asked for it.")
    instance: str | None = Field(
        None, description="The resourceVersion the outcome was decided at (see lastOffsetsOperation.instance)."
    )


class KafkaMirrorMaker2Status(StatusModel):
    """What the operator last observed and did: conditions, each mirror connector's state and last
    offsets operation, and the replication lag. Written by the operator only."""

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
    connectors: list[MirrorConnectorStatus] = Field(default_factory=list, description="Each mirror connector.")
    connectors_ready: str | None = Field(
        None,
        description=(
            "READY/DECLARED: the mirror connectors running as their spec asks, of all declared (the "
            "Connectors column of kubectl get)."
        ),
    )
    replication_lag: ReplicationLagStatus | None = Field(
        None, description="Replication lag over all mirrors (spec.replicationLag)."
    )
    last_offsets_operation: OffsetsOperationStatus | None = None
    handled_request_ids: list[str] = Field(
        default_factory=list, description="The newest connect-offsets.io/request-id values already handled."
    )
    group_failovers: list[GroupFailoverStatus] = Field(
        default_factory=list,
        description="Consumer group failovers: one entry per group of spec.mirrors[].groupFailover, and the newest "
        "ones asked with the connect-offsets.io/failover-group annotation.",
    )


class KafkaMirrorMaker2Resource(BaseModel):
    model_config = ConfigDict(extra="ignore")

    metadata: ObjectMeta
    spec: KafkaMirrorMaker2Spec
    status: KafkaMirrorMaker2Status = Field(default_factory=KafkaMirrorMaker2Status)
