"""Building blocks every kind's model uses: the spec and status base classes, object references,
conditions, and the CEL helper.

Why apart: the three kinds (``connect_cluster``, ``kafka_connector``, ``kafka_mirror_maker2``) share
these, and a change here (say, how status models refuse unknown fields) must reach all three at once.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel
from pydantic.config import JsonDict, JsonValue

PRESERVE_UNKNOWN: JsonDict = {"x-kubernetes-preserve-unknown-fields": True}


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


def parse_rfc3339(value: str) -> datetime | None:
    """An RFC 3339 time with an explicit zone (``Z`` or an offset), else None."""
    try:
        moment = datetime.fromisoformat(value.strip().replace("z", "Z").replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None


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


#: A DNS-1123 subdomain: what the API server accepts as a ConfigMap or Secret name. In the schema,
#: so a bad name is refused by `kubectl apply` naming the field, not after admission by a failing
#: read; and a name with `/` or `..` can never reach a request path.
DNS1123_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"


def object_name(description: str) -> Any:
    return Field(min_length=1, max_length=253, pattern=DNS1123_SUBDOMAIN, description=description)


class ConfigMapRef(Model):
    """A ConfigMap in the resource's namespace."""

    name: Annotated[str, object_name("ConfigMap name.")]


class SecretKeyRef(Model):
    name: Annotated[str, object_name("Secret (or ConfigMap) name, in the resource's namespace.")]
    key: Annotated[
        str,
        # Kubernetes' own rule for Secret and ConfigMap keys. It also keeps a key from ending a
        # config provider reference the operator writes with it (``}``, ``:``, ``$``).
        Field(min_length=1, max_length=253, pattern=r"^[-._a-zA-Z0-9]+$", description="Key inside the Secret."),
    ]


#: Kafka client settings a Secret may not give (``secretConfig``): where a client connects (its
#: brokers, the OAuth endpoints it sends credentials to), over what, and whether it checks the
#: broker's name. Each Secret's own ``allowed-hosts`` and the
#: transport checks are made against ``bootstrapServers`` and ``config``; a value that came from a
#: Secret instead would send every other Secret's values where no check looked.
NOT_FROM_SECRETS = (
    "bootstrap.servers",
    "security.protocol",
    "ssl.endpoint.identification.algorithm",
    "client.dns.lookup",
    "sasl.oauthbearer.token.endpoint.url",
    "sasl.oauthbearer.jwks.endpoint.url",
)


def settings_not_from_secrets(secret_config: dict[str, SecretKeyRef]) -> dict[str, SecretKeyRef]:
    """The ``secretConfig`` validator: none of ``NOT_FROM_SECRETS``."""
    refused = [key for key in secret_config if key.strip() in NOT_FROM_SECRETS]
    if refused:
        raise ValueError(
            f"secretConfig must not set {', '.join(sorted(refused))}: where and how the client connects is set "
            "in bootstrapServers and config, where the operator checks it"
        )
    return secret_config


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


NAMESPACE_NAME = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"


CONDITIONS = "Ready and the other conditions of this resource; `kubectl wait --for=condition=Ready` works."
OBSERVED_GENERATION = "The metadata.generation the operator last acted on."
CLAIMED_BY = (
    "The operator replica acting on this resource, as IDENTITY/TERM of the Lease of its ConnectCluster: "
    "written with the first change of a Lease term and checked by every later status write, so a replica "
    "that lost the Lease cannot go on (docs/operator-guide.md#high-availability-and-shards)."
)


class Condition(StatusModel):
    """A condition per the Kubernetes API conventions."""

    type: str = Field(description="Condition type, e.g. Ready, OffsetsOperation, ReplicationLagging.")
    status: Literal["True", "False", "Unknown"] = Field(description="Whether the condition holds.")
    reason: str = Field("", description="CamelCase reason, stable for alerts and scripts.")
    message: str = Field("", description="What happened and what to do, for people; Connect's own text verbatim.")
    last_transition_time: str | None = Field(None, description="When status last changed (RFC 3339).")
    observed_generation: int | None = Field(None, description="metadata.generation the condition was computed for.")


def flat_values(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` unchanged if every value is a string, number or boolean (what Connect takes), else the key."""
    for key, value in config.items():
        if isinstance(value, dict | list):
            raise ValueError(f"config.{key}: expected a string, number or boolean, got {type(value).__name__}")
    return config
