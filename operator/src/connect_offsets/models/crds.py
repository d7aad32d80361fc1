"""Our custom resources as pydantic models: the single source of the CRD schemas.

``crds/*.yaml`` is generated from these classes (``connect-offsets crds``) and a unit test fails
when the committed YAML drifts, so the API server and the operator can never disagree on a field.
Bodies are parsed here at the boundary; a ``ValidationError`` becomes a permanent error with the
field path in its message.

Field names are camelCase in Kubernetes and snake_case in Python (``alias_generator``). Specs
forbid unknown fields (a typo must fail loudly); the API server prunes them anyway, so the check
matters mostly for documents built by the CLI and the tests.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel
from pydantic.config import JsonDict, JsonValue

from connect_offsets.vocabulary import java_string

__all__ = [
    "AlterOffsetsSpec",
    "AuthenticationSpec",
    "AutoRestartSpec",
    "AutoRestartStatus",
    "CertificateSource",
    "ClientCertificateSpec",
    "Condition",
    "ConfigMapRef",
    "ConnectClusterResource",
    "ConnectClusterSpec",
    "ConnectClusterStatus",
    "ConnectorState",
    "KafkaConnectorResource",
    "KafkaConnectorSpec",
    "KafkaConnectorStatus",
    "KafkaMirrorMaker2Resource",
    "KafkaMirrorMaker2Spec",
    "KafkaMirrorMaker2Status",
    "KeyRef",
    "ListOffsetsSpec",
    "MirrorClusterSpec",
    "MirrorConnectorSpec",
    "MirrorConnectorStatus",
    "MirrorLagStatus",
    "MirrorSpec",
    "ObjectMeta",
    "OffsetsOperationStatus",
    "OffsetsProgressStatus",
    "PartitionLagStatus",
    "ReplicationLagSpec",
    "ReplicationLagStatus",
    "SecretKeyRef",
    "TLSSpec",
    "WriteToTarget",
]

#: Keys Connect derives from the resource itself; setting them in ``config`` would be ambiguous.
RESERVED_CONFIG_KEYS = ("name", "connector.class", "tasks.max")

#: ... and for a MirrorMaker 2 connector, the cluster aliases its mirror sets.
MIRROR_RESERVED_CONFIG_KEYS = (*RESERVED_CONFIG_KEYS, "source.cluster.alias", "target.cluster.alias")

PRESERVE_UNKNOWN: JsonDict = {"x-kubernetes-preserve-unknown-fields": True}

#: Bounds that keep the CEL rules' estimated cost within the API server's budget (it refuses a
#: CRD whose rules could cost too much on an unbounded list or string).
MAX_ALIAS = 100
MAX_MIRROR_CLUSTERS = 32
MAX_MIRRORS = 100


def cel(*rules: tuple[str, str] | tuple[str, str, str]) -> JsonDict:
    """Cross-field rules the API server checks at admission (CEL, ``x-kubernetes-validations``).

    Each rule is ``(rule, message[, fieldPath])`` and repeats a pydantic validator of the same
    model, so ``kubectl apply`` refuses the resource with the message the operator would give
    later, naming the field. The validators stay: documents built by the CLI and the plugin never
    pass through admission. Rules over ``config`` keys are not possible: CEL cannot see inside a
    free-form map whose values may be strings, numbers or booleans, so those stay operator-side.
    """
    out: list[JsonValue] = []
    for rule in rules:
        entry: dict[str, JsonValue] = {"rule": rule[0], "message": rule[1]}
        if len(rule) == 3:
            entry["fieldPath"] = rule[2]
        out.append(entry)
    return {"x-kubernetes-validations": out}


#: RFC 3339 with an explicit zone, as ``parse_rfc3339`` accepts (``T``/``t``/space, fraction optional).
RFC3339_CEL = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}(:[0-9]{2}([.][0-9]+)?)?([Zz]|[+-][0-9]{2}:[0-9]{2})$"


class Model(BaseModel):
    """Spec models: camelCase on the wire, unknown fields rejected."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class StatusModel(BaseModel):
    """Status models: tolerant when read, strict when built.

    Read from the API server (``model_validate``), fields this operator does not know are ignored:
    older operators may have written other fields. Built by the operator (keyword arguments, by
    Python name), an unknown field is a ``TypeError``: the API server would prune a status field the
    model (so the CRD schema) does not declare, without a word.

    A status write is one of these built with only the fields it sets (``model_fields_set``); a
    field set to None is removed from the resource's status (``reconcile.status.write_status``).
    """

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    def __init__(self, /, **data: Any) -> None:
        unknown = sorted(key for key in data if key not in type(self).model_fields)
        if unknown:
            raise TypeError(f"{type(self).__name__} declares no field {', '.join(unknown)}")
        super().__init__(**data)

    # Validation (``model_validate``, a status nested in a parsed resource) does not go through
    # this ``__init__``, as with ``BaseModel``'s own: reading stays tolerant. (Without this mark
    # pydantic calls an overridden ``__init__`` for every nested model it validates.)
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]

    def updated(self, change: Self) -> Self:
        """This partial status with the fields ``change`` sets (None included) set to its values."""
        return self.model_copy(update={name: getattr(change, name) for name in change.model_fields_set})


class ObjectMeta(BaseModel):
    """The parts of ``metadata`` we read."""

    model_config = ConfigDict(populate_by_name=True, extra="ignore")

    name: str
    namespace: str = "default"
    uid: str = ""
    generation: int = 0
    resource_version: str = Field("", alias="resourceVersion")
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    deletion_timestamp: str | None = Field(None, alias="deletionTimestamp")


# --- shared references -----------------------------------------------------------------


#: A DNS-1123 subdomain: what the API server accepts as a ConfigMap or Secret name. In the schema,
#: so a bad name is refused by `kubectl apply` naming the field, not after admission by a failing
#: read; and a name with `/` or `..` can never reach a request path.
DNS1123_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"


def _object_name(description: str) -> Any:
    return Field(min_length=1, max_length=253, pattern=DNS1123_SUBDOMAIN, description=description)


class ConfigMapRef(Model):
    """A ConfigMap in the resource's namespace."""

    name: Annotated[str, _object_name("ConfigMap name.")]


class ListOffsetsSpec(Model):
    """Where `connect-offsets.io/connector-offsets=list` writes the connector's offsets."""

    to_config_map: ConfigMapRef = Field(description="ConfigMap that `list` writes `offsets.json` to.")


class AlterOffsetsSpec(Model):
    """What `connect-offsets.io/connector-offsets=alter` applies: offsets from a ConfigMap, or a time (sinks)."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            ("has(self.fromConfigMap) != has(self.toTimestamp)", "set exactly one of fromConfigMap and toTimestamp"),
            (
                "!has(self.applyOnChange) || !self.applyOnChange || has(self.fromConfigMap)",
                "applyOnChange needs fromConfigMap",
            ),
            (
                f"!has(self.toTimestamp) || self.toTimestamp.matches('{RFC3339_CEL}')",
                "toTimestamp must be an RFC 3339 time with a zone, e.g. 2026-11-21T10:00:00Z",
            ),
        )
    )

    from_config_map: ConfigMapRef | None = Field(None, description="ConfigMap whose `offsets.json` `alter` applies.")
    to_timestamp: str | None = Field(
        None,
        max_length=64,
        description=(
            "Sink connectors: `alter` seeks every consumed topic-partition to the first record with a timestamp "
            "at or after this RFC 3339 time (partitions without one: to their end). Needs ConnectCluster "
            "spec.kafka. The annotation connect-offsets.io/seek-to overrides it per request."
        ),
    )
    apply_on_change: bool = Field(
        False,
        description=(
            "Declarative mode: apply the ConfigMap's offsets once whenever their content changes (content hash "
            "recorded in status.appliedOffsets), stopping and resuming the connector around the change. "
            "Re-applying the same content does nothing."
        ),
    )

    @field_validator("to_timestamp")
    @classmethod
    def _rfc3339(cls, value: str | None) -> str | None:
        if value is not None and parse_rfc3339(value) is None:
            raise ValueError(f"{value!r} is not an RFC 3339 time with a zone, e.g. 2026-11-21T10:00:00Z")
        return value

    @model_validator(mode="after")
    def _one_source(self) -> AlterOffsetsSpec:
        if (self.from_config_map is None) == (self.to_timestamp is None):
            raise ValueError("set exactly one of fromConfigMap and toTimestamp")
        if self.apply_on_change and self.from_config_map is None:
            raise ValueError("applyOnChange needs fromConfigMap")
        return self


def parse_rfc3339(value: str) -> datetime | None:
    """An RFC 3339 time with an explicit zone (``Z`` or an offset), else None."""
    try:
        moment = datetime.fromisoformat(value.strip().replace("z", "Z").replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None


class OffsetsPolicySpec(Model):
    """How offsets changes treat a connector that is not STOPPED."""

    stop_connector: bool = Field(
        False,
        description=(
            "alter/reset/restore on a running or paused connector: stop it, wait for STOPPED, back up, change "
            "the offsets, then bring it back to spec.state. Without it such requests are refused."
        ),
    )


class InitialOffsetsSpec(Model):
    """Offsets a new connector starts from (created STOPPED, offsets applied, then brought to spec.state)."""

    from_config_map: ConfigMapRef = Field(
        description="ConfigMap whose `offsets.json` the connector starts from when it is first created (KIP-995)."
    )


class SecretKeyRef(Model):
    name: Annotated[str, _object_name("Secret (or ConfigMap) name, in the resource's namespace.")]
    key: Annotated[str, Field(min_length=1, description="Key inside the Secret.")]


class KeyRef(Model):
    """A key of a Secret or of a ConfigMap (exactly one)."""

    model_config = ConfigDict(
        json_schema_extra=cel(("has(self.secret) != has(self.configMap)", "set exactly one of `secret` or `configMap`"))
    )

    secret: SecretKeyRef | None = Field(None, description="Read the value from a Secret.")
    config_map: SecretKeyRef | None = Field(None, description="Read the value from a ConfigMap.")

    @model_validator(mode="after")
    def _exactly_one(self) -> KeyRef:
        if (self.secret is None) == (self.config_map is None):
            raise ValueError("set exactly one of `secret` or `configMap`")
        return self


# --- ConnectCluster ----------------------------------------------------------------------


class AuthenticationSpec(Model):
    type: Literal["basic", "bearer"] = Field(description="HTTP authentication scheme.")
    secret_name: Annotated[str, _object_name("Secret holding the credentials, in the same namespace.")]
    username_key: str = Field("username", description="basic: key of the user name in the Secret.")
    password_key: str = Field("password", description="basic: key of the password in the Secret.")
    token_key: str = Field("token", description="bearer: key of the token in the Secret.")


class CertificateSource(KeyRef):
    """PEM text from a Secret or ConfigMap key."""


class ClientCertificateSpec(Model):
    secret_name: Annotated[str, _object_name("Secret with the client certificate.")]
    cert_key: str = Field("tls.crt", description="Key of the PEM certificate.")
    key_key: str = Field("tls.key", description="Key of the PEM private key.")


class TLSSpec(Model):
    ca: CertificateSource | None = Field(None, description="CA bundle that signed Connect's certificate.")
    client_certificate: ClientCertificateSpec | None = Field(None, description="mTLS client certificate.")
    insecure_skip_verify: bool = Field(False, description="Skip server certificate verification (unsafe).")


class KafkaAccessSpec(Model):
    """How the operator reaches the Connect cluster's Kafka (optional: only seek-to-timestamp needs it)."""

    bootstrap_servers: Annotated[str, Field(min_length=1, description="host:port[,host:port...]")]
    config: dict[str, Any] = Field(
        default_factory=dict,
        description="Kafka client settings (Java names: security.protocol, sasl.mechanism, ...); no secrets.",
        json_schema_extra=PRESERVE_UNKNOWN,
    )
    secret_config: dict[str, SecretKeyRef] = Field(
        default_factory=dict, description="Kafka client settings whose values come from Secrets, e.g. sasl.jaas.config."
    )


#: A namespace name (a DNS-1123 label).
NAMESPACE_NAME = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"


class ConnectClusterSpec(Model):
    url: Annotated[
        str,
        Field(
            # No "@" before the path: user info (user:password@) is refused, see _no_userinfo.
            pattern=r"^https?://[^\s/@]+(/.*)?$",
            description=(
                "Base URL of the Connect REST API, e.g. https://connect.kafka.svc:8083. No user:password@ "
                "(use authentication)."
            ),
        ),
    ]
    authentication: AuthenticationSpec | None = Field(None, description="Credentials for the REST API.")
    tls: TLSSpec | None = Field(None, description="TLS settings for https URLs.")
    request_timeout_seconds: Annotated[
        float, Field(ge=1, le=600, description="Timeout of one REST request (Connect's own limit is 90 s).")
    ] = 120.0
    kafka: KafkaAccessSpec | None = Field(
        None, description="Kafka access for sink seek-to-timestamp; not needed for anything else."
    )
    allowed_namespaces: list[Annotated[str, Field(pattern=NAMESPACE_NAME, max_length=63)]] = Field(
        default_factory=list,
        max_length=1000,
        description=(
            "Other namespaces whose KafkaConnectors and KafkaMirrorMaker2s may use this cluster (they "
            "reference it with the labels connect-offsets.io/cluster and connect-offsets.io/cluster-namespace). "
            "Empty or absent: only this namespace. The credentials stay here: resources elsewhere never read them."
        ),
    )
    connector_name_prefix: Annotated[
        str | None,
        Field(
            max_length=200,
            description=(
                "Every connector created on this cluster must have a name starting with this prefix; "
                '{namespace} is replaced by the namespace of the resource, e.g. "{namespace}-" gives each '
                "namespace its own connector names on a shared Connect cluster. Applies to MirrorMaker 2 "
                "connector names too."
            ),
        ),
    ] = None

    @field_validator("url", mode="before")
    @classmethod
    def _no_userinfo(cls, url: Any) -> Any:
        # Before the pattern, for a clear message; the URL itself is never repeated (it holds a password).
        if isinstance(url, str) and "@" in url.split("://", 1)[-1].split("/", 1)[0]:
            raise ValueError(
                "must not contain user info (user:password@): put credentials in a Secret and use spec.authentication"
            )
        return url


#: Descriptions shared by every status.
CONDITIONS = "Ready and the other conditions of this resource; `kubectl wait --for=condition=Ready` works."
OBSERVED_GENERATION = "The metadata.generation the operator last acted on."


class Condition(StatusModel):
    """A condition per the Kubernetes API conventions."""

    type: str = Field(description="Condition type, e.g. Ready, OffsetsOperation, ReplicationLagging.")
    status: Literal["True", "False", "Unknown"] = Field(description="Whether the condition holds.")
    reason: str = Field("", description="CamelCase reason, stable for alerts and scripts.")
    message: str = Field("", description="What happened and what to do, for people; Connect's own text verbatim.")
    last_transition_time: str | None = Field(None, description="When status last changed (RFC 3339).")
    observed_generation: int | None = Field(None, description="metadata.generation the condition was computed for.")


class ConnectClusterStatus(StatusModel):
    conditions: list[Condition] = Field(default_factory=list, description=CONDITIONS)
    observed_generation: int | None = Field(None, description=OBSERVED_GENERATION)
    version: str | None = Field(None, description="Connect worker version, from `GET /`.")
    commit: str | None = Field(None, description="Connect worker commit id, from `GET /`.")
    kafka_cluster_id: str | None = Field(None, description="Id of the Kafka cluster the Connect workers use.")
    connector_plugins: list[str] = Field(
        default_factory=list, description="Connector classes installed on the workers (`GET /connector-plugins`)."
    )


class ConnectClusterResource(BaseModel):
    model_config = ConfigDict(extra="ignore")

    metadata: ObjectMeta
    spec: ConnectClusterSpec
    status: ConnectClusterStatus = Field(default_factory=ConnectClusterStatus)


# --- KafkaConnector ----------------------------------------------------------------------


#: Descriptions shared by a KafkaConnector and each MirrorMaker 2 connector.
AUTO_RESTART = "Restart the connector or its tasks when they FAIL, with back-off."
LIST_OFFSETS = "Where the `list` request writes the offsets (a ConfigMap, key offsets.json)."
ALTER_OFFSETS = "What the `alter` request applies: a ConfigMap's offsets, or a time to seek to (sinks)."
OFFSETS_POLICY = "Whether alter/reset/restore may stop a running connector and resume it after the change."
CONNECTOR_STATUS = "Connect's GET /connectors/<name>/status answer, as Connect wrote it."


class ConnectorState(StrEnum):
    RUNNING = "running"
    PAUSED = "paused"
    STOPPED = "stopped"


class AutoRestartSpec(Model):
    """Restart a FAILED connector or its tasks with back-off (Strimzi's autoRestart)."""

    enabled: bool = Field(True, description="Restart a FAILED connector or tasks with back-off.")
    max_restarts: Annotated[int, Field(ge=0, description="Give up after this many restarts.")] | None = None


class KafkaConnectorSpec(Model):
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
        for key, value in config.items():
            if isinstance(value, dict | list):
                raise ValueError(f"config.{key}: expected a string, number or boolean, got {type(value).__name__}")
        return config

    def connect_config(self, name: str) -> dict[str, str]:
        """The config document Connect receives (all values as strings, as Connect returns them)."""
        config = {key: java_string(value) for key, value in self.config.items() if value is not None}
        config["connector.class"] = self.class_
        config["name"] = name
        if self.tasks_max is not None:
            config["tasks.max"] = str(self.tasks_max)
        return config


def _flat_values(config: dict[str, Any]) -> dict[str, Any]:
    for key, value in config.items():
        if isinstance(value, dict | list):
            raise ValueError(f"config.{key}: expected a string, number or boolean, got {type(value).__name__}")
    return config


class AutoRestartStatus(StatusModel):
    """Auto-restarts so far; the count resets once the connector stays healthy."""

    count: int = Field(0, description="Restarts made since the connector was last healthy.")
    last_restart_time: str | None = Field(None, description="When the last restart was made (RFC 3339).")


class OffsetsOperationStatus(StatusModel):
    """The outcome of the last offsets request (list, alter, reset or restore)."""

    operation: str = Field(description="list, alter, reset or restore.")
    result: Literal["Succeeded", "Failed"] = Field(description="Succeeded or Failed.")
    reason: str = Field("", description="Why it failed (the condition reason), empty on success.")
    time: str = Field(description="When it finished (RFC 3339).")
    message: str = Field("", description="What was done, or Connect's error verbatim (capped).")
    request: str | None = Field(None, description="Fingerprint of the request this result belongs to.")
    request_id: str | None = Field(None, description="The connect-offsets.io/request-id of the request, if any.")
    backup: str | None = Field(None, description="ConfigMap holding the offsets from before this change.")
    dry_run: bool | None = Field(None, description="True: a dry run; nothing was changed.")


class PendingOffsetsOperation(StatusModel):
    """An offsets change in progress with stop -> change -> resume; survives operator restarts."""

    operation: str = Field(description="alter, reset or restore.")
    step: Literal["Stopping", "Changing", "Resuming"] = Field(
        description="Stopping: waiting for STOPPED; Changing: backup and change; Resuming: back to spec.state."
    )
    source: Literal["annotation", "applyOnChange"] = Field(
        "annotation", description="What asked for the change: the annotation or spec.alterOffsets.applyOnChange."
    )
    request: str | None = Field(None, description="Fingerprint of the request being carried out.")
    request_id: str | None = Field(None, description="The connect-offsets.io/request-id of the request, if any.")
    content_hash: str | None = Field(None, description="applyOnChange: hash of the offsets being applied.")
    restore_from: str | None = Field(None, description="restore: the backup chosen when the request started.")
    seek_to: str | None = Field(None, description="alter by timestamp: the RFC 3339 time sought.")
    backup: str | None = Field(None, description="Backup taken before the change (set once it exists).")
    started: str = Field(description="When the request started (RFC 3339).")
    result: Literal["Succeeded", "Failed"] | None = Field(None, description="Outcome of the change, once made.")
    reason: str = Field("", description="Why the change failed (the condition reason), once made.")
    message: str = Field("", description="The change's outcome message, reported once the connector is resumed.")


class AppliedOffsetsStatus(StatusModel):
    """applyOnChange: the ConfigMap content last applied, so the same content is never applied twice."""

    config_map: str = Field(description="The ConfigMap applied.")
    content_hash: str = Field(description="Hash of the offsets applied.")
    time: str = Field(description="When they were applied (RFC 3339).")
    result: Literal["Succeeded", "Failed"] = Field(description="Succeeded or Failed.")


class InitialOffsetsStatus(StatusModel):
    """Progress of spec.initialOffsets: the connector is created STOPPED, offsets applied, then started."""

    config_map: str = Field(description="The ConfigMap the initial offsets come from.")
    step: Literal["Creating", "Applied", "Failed"] = Field(
        description="Creating: created STOPPED, offsets not yet applied; Applied: done; Failed: see message."
    )
    time: str = Field(description="When the step was reached (RFC 3339).")
    request: str | None = Field(None, description="Fingerprint of the inputs of a failed attempt.")
    message: str = Field("", description="Why it failed.")


OFFSETS_PROGRESS = (
    "Progress of an offsets change on a STOPPED connector: its request and backup, and for a chunked alter "
    "the chunks applied of total; a retry or a restarted operator continues from here."
)


class OffsetsProgressStatus(StatusModel):
    """Progress of an offsets change on a STOPPED connector, written before each step.

    Why in status: a retry or a restarted operator must continue the same request, reusing its
    backup (a new backup would hold half-changed offsets) and, for a chunked alter, skipping the
    chunks Connect already applied. The kubectl plugin reads it for its progress line.
    """

    request: str | None = Field(None, description="Fingerprint of the request being carried out.")
    backup: str | None = Field(None, description="The backup taken before the change; a retry reuses it.")
    fingerprint: str | None = Field(
        None, description="Chunked alter: fingerprint of its chunk plan (a changed document starts over)."
    )
    applied_chunks: int | None = Field(None, description="Chunked alter: PATCH requests Connect applied so far.")
    total_chunks: int | None = Field(None, description="Chunked alter: PATCH requests in all.")
    applied_partitions: int | None = Field(None, description="Chunked alter: partitions applied so far.")
    total_partitions: int | None = Field(None, description="Chunked alter: partitions in all.")
    failed_chunk: int | None = Field(None, description="Chunked alter: the chunk (1-based) Connect refused.")

    def to_status(self) -> dict[str, Any]:
        """As written to status: camelCase, unset fields left out."""
        return self.model_dump(by_alias=True, exclude_none=True)


class KafkaConnectorStatus(StatusModel):
    conditions: list[Condition] = Field(default_factory=list, description=CONDITIONS)
    observed_generation: int | None = Field(None, description=OBSERVED_GENERATION)
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
        return _flat_values(config)


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
        return _flat_values(config)


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


class KafkaMirrorMaker2Status(StatusModel):
    conditions: list[Condition] = Field(default_factory=list, description=CONDITIONS)
    observed_generation: int | None = Field(None, description=OBSERVED_GENERATION)
    connectors: list[MirrorConnectorStatus] = Field(default_factory=list, description="Each mirror connector.")
    replication_lag: ReplicationLagStatus | None = Field(
        None, description="Replication lag over all mirrors (spec.replicationLag)."
    )
    last_offsets_operation: OffsetsOperationStatus | None = None
    handled_request_ids: list[str] = Field(
        default_factory=list, description="The newest connect-offsets.io/request-id values already handled."
    )


class KafkaMirrorMaker2Resource(BaseModel):
    model_config = ConfigDict(extra="ignore")

    metadata: ObjectMeta
    spec: KafkaMirrorMaker2Spec
    status: KafkaMirrorMaker2Status = Field(default_factory=KafkaMirrorMaker2Status)
