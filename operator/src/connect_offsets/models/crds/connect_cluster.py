"""The ConnectCluster kind: how the operator reaches one Connect REST API (URL, credentials, TLS,
its Kafka) and what it reports about the workers."""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from connect_offsets.models.crds.base import (
    CONDITIONS,
    NAMESPACE_NAME,
    OBSERVED_GENERATION,
    PRESERVE_UNKNOWN,
    Condition,
    KeyRef,
    Model,
    ObjectMeta,
    SecretKeyRef,
    StatusModel,
    cel,
    object_name,
    settings_not_from_secrets,
)


class AuthenticationSpec(Model):
    type: Literal["basic", "bearer"] = Field(description="HTTP authentication scheme.")
    secret_name: Annotated[str, object_name("Secret holding the credentials, in the same namespace.")]
    username_key: str = Field("username", description="basic: key of the user name in the Secret.")
    password_key: str = Field("password", description="basic: key of the password in the Secret.")
    token_key: str = Field("token", description="bearer: key of the token in the Secret.")


class CertificateSource(KeyRef):
    """PEM text from a Secret or ConfigMap key."""


class ClientCertificateSpec(Model):
    secret_name: Annotated[str, object_name("Secret with the client certificate.")]
    cert_key: str = Field("tls.crt", description="Key of the PEM certificate.")
    key_key: str = Field("tls.key", description="Key of the PEM private key.")


class TLSSpec(Model):
    ca: CertificateSource | None = Field(None, description="CA bundle that signed Connect's certificate.")
    client_certificate: ClientCertificateSpec | None = Field(None, description="mTLS client certificate.")
    insecure_skip_verify: bool = Field(False, description="Skip server certificate verification (unsafe).")


class KafkaAccessSpec(Model):
    """How the operator reaches the Kafka cluster of this Connect cluster's sink connectors, as a Kafka client.

    Optional, but two features of KafkaConnectors on this cluster read it: the progress of sink
    connectors (``spec.progress``: the consumer group's committed offsets against the topics' end
    offsets, so the LAG column and the Progressing condition; without it a sink's progress is
    Unknown/NotMeasured) and seeking a sink to a time (``alterOffsets.toTimestamp``, the annotation
    connect-offsets.io/seek-to). Source connectors' progress, offsets list/alter/reset and
    MirrorMaker 2 (its own ``spec.clusters``) do not use it.
    """

    bootstrap_servers: Annotated[
        str,
        Field(
            min_length=1,
            description="Bootstrap servers of the Kafka cluster the sink connectors consume from: "
            "host:port[,host:port...].",
        ),
    ]
    config: dict[str, Any] = Field(
        default_factory=dict,
        description="Kafka client settings (Java names: security.protocol, sasl.mechanism, ...); no secrets.",
        json_schema_extra=PRESERVE_UNKNOWN,
    )
    secret_config: dict[str, SecretKeyRef] = Field(
        default_factory=dict, description="Kafka client settings whose values come from Secrets, e.g. sasl.jaas.config."
    )

    _secret_settings = field_validator("secret_config")(settings_not_from_secrets)


class ConfigProviderType(StrEnum):
    """How the workers' config provider finds a Secret's key (the reference the operator writes)."""

    #: A Kubernetes Secret provider such as Strimzi's ``KubernetesSecretConfigProvider``:
    #: ``${<name>:<namespace>/<secret>:<key>}``; the workers' ServiceAccount must be able to read it.
    KUBERNETES_SECRET = "kubernetesSecret"
    #: Kafka's ``DirectoryConfigProvider`` over Secrets mounted on the workers, one directory per
    #: Secret holding a file per key: ``${<name>:<path>/<secret>:<key>}``.
    DIRECTORY = "directory"


#: What Kafka's ConfigTransformer cannot read inside a reference (``${provider:path:key}``).
_NOT_IN_REFERENCE = re.compile(r"[:${}\s]")


class ConfigProviderSpec(Model):
    """A config provider the Connect workers have (``config.providers``), through which the operator
    passes secretConfig values as references instead of writing the values into connector configs."""

    model_config = ConfigDict(
        json_schema_extra=cel(("self.type != 'directory' || has(self.path)", "type directory needs path", ".path"))
    )

    name: Annotated[
        str,
        Field(
            pattern=r"^[A-Za-z0-9_.-]+$",
            max_length=63,
            description="The provider's name in the workers' config.providers (e.g. secrets).",
        ),
    ]
    type: ConfigProviderType = Field(
        description=(
            "kubernetesSecret: a Kubernetes Secret provider (Strimzi's KubernetesSecretConfigProvider), "
            "references ${name:namespace/secret:key}. directory: Kafka's DirectoryConfigProvider over the "
            "Secrets mounted on the workers, references ${name:path/secret:key}."
        )
    )
    path: str | None = Field(
        None,
        max_length=500,
        description=(
            "directory: the directory on the workers holding one directory per Secret (its keys as files); "
            "{namespace} is replaced by the resource's namespace, e.g. /mnt/secrets/{namespace}."
        ),
    )

    @model_validator(mode="after")
    def _path(self) -> ConfigProviderSpec:
        if self.type is ConfigProviderType.DIRECTORY and not self.path:
            raise ValueError("type directory needs path")
        if self.path is not None and _NOT_IN_REFERENCE.search(self.path.replace("{namespace}", "")):
            raise ValueError("path must not contain ':', '$', '{', '}' or whitespace (they end a reference)")
        return self

    def reference(self, namespace: str, secret: str, key: str) -> str:
        """The reference the workers resolve to ``key`` of Secret ``secret`` in ``namespace``."""
        if self.type is ConfigProviderType.KUBERNETES_SECRET:
            return f"${{{self.name}:{namespace}/{secret}:{key}}}"
        directory = (self.path or "").replace("{namespace}", namespace).rstrip("/")
        return f"${{{self.name}:{directory}/{secret}:{key}}}"


class AllowedConfigProvider(Model):
    """A config provider of the workers that tenants' connector configs may refer to, and where."""

    name: Annotated[
        str,
        Field(
            pattern=r"^[A-Za-z0-9_.-]+$",
            max_length=63,
            description="The provider's name in the workers' config.providers (e.g. secrets), exactly as there.",
        ),
    ]
    path_prefix: str | None = Field(
        None,
        min_length=1,  # any path only by leaving it out, never by an empty string
        max_length=500,
        description=(
            "References must name a path under this prefix; {namespace} is replaced by the resource's namespace: "
            '"{namespace}/" for a Kubernetes Secret provider (${secrets:<namespace>/<secret>:<key>}), '
            '"/mnt/secrets/{namespace}/" for a DirectoryConfigProvider over mounted Secrets. A path must lie '
            'below the prefix at a segment boundary ("{namespace}" allows "team-a/x", not "team-a" or '
            '"team-ab/x"); paths with "." or ".." segments are refused. Absent: any path, so only for a provider '
            "that holds nothing one tenant may not read."
        ),
    )
    namespaces: list[Annotated[str, Field(pattern=NAMESPACE_NAME, max_length=63)]] = Field(
        default_factory=list,
        max_length=1000,
        description="Namespaces whose resources may refer to it; empty: every namespace that may use this cluster.",
    )

    @field_validator("path_prefix")
    @classmethod
    def _prefix(cls, prefix: str | None) -> str | None:
        if prefix is not None and _NOT_IN_REFERENCE.search(prefix.replace("{namespace}", "")):
            raise ValueError(
                "must not contain ':', '$', '{', '}' (other than {namespace}) or whitespace: "
                "a reference's path cannot hold them"
            )
        return prefix


class ConfigProvidersSpec(Model):
    """Which of the workers' config providers tenants may refer to in connector configs."""

    allowed: list[AllowedConfigProvider] = Field(
        default_factory=list,
        max_length=50,
        description=(
            "The only providers a connector config of a tenant may refer to (${provider:[path:]key}), each with "
            "the paths allowed. Empty or absent: none; a value with any reference is refused before anything "
            "is sent to Connect."
        ),
    )


class ConnectClusterSpec(Model):
    """How to reach an existing Kafka Connect cluster: its REST URL, authentication and TLS, optional
    Kafka access (for seeking sink connectors to a time), and which namespaces and connector names may
    use it when it is shared."""

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
        None,
        description=(
            "Kafka access for sink connectors' progress (spec.progress: their lag and the Progressing "
            "condition; without it a sink shows no LAG and Progressing Unknown/NotMeasured) and for seeking "
            "a sink to a time (alterOffsets.toTimestamp, the connect-offsets.io/seek-to annotation). "
            "Source connectors, offsets list/alter/reset and MirrorMaker 2 do not need it."
        ),
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
    config_provider: ConfigProviderSpec | None = Field(
        None,
        description=(
            "A config provider of the Connect workers: KafkaMirrorMaker2 secretConfig values reach Connect as "
            "references to it instead of in clear (without one, the values are stored in Connect's config "
            "topic and shown by GET /connectors/<name>/config)."
        ),
    )
    config_providers: ConfigProvidersSpec | None = Field(
        None,
        description=(
            "Config providers of the workers that tenants' connector configs may refer to. The workers resolve "
            "every ${provider:path:key} in a connector's config with their own files, environment and Secrets, "
            "so without an entry here no tenant value may hold one (references the operator writes for "
            "secretConfig through configProvider are its own)."
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


class ConnectClusterStatus(StatusModel):
    """What the operator last found at spec.url: whether Connect answers (the Ready condition) and its
    version. Written by the operator only."""

    conditions: list[Condition] = Field(default_factory=list, description=CONDITIONS)
    observed_generation: int | None = Field(None, description=OBSERVED_GENERATION)
    version: str | None = Field(None, description="Connect worker version, from `GET /`.")
    commit: str | None = Field(None, description="Connect worker commit id, from `GET /`.")
    kafka_cluster_id: str | None = Field(None, description="Id of the Kafka cluster the Connect workers use.")
    connector_plugins: list[str] = Field(
        default_factory=list, description="Connector classes installed on the workers (`GET /connector-plugins`)."
    )
    health: Literal["healthy", "starting", "unhealthy"] | None = Field(
        None,
        description=(
            "What the worker answers at GET /health (Kafka Connect 3.9 or newer, KIP-1017); absent on older "
            "workers, whose readiness is GET /. Offsets changes wait while it is starting or unhealthy."
        ),
    )


class ConnectClusterResource(BaseModel):
    model_config = ConfigDict(extra="ignore")

    metadata: ObjectMeta
    spec: ConnectClusterSpec
    status: ConnectClusterStatus = Field(default_factory=ConnectClusterStatus)
