"""Our custom resources as pydantic models: the single source of the CRD schemas.

``crds/*.yaml`` is generated from these classes (``connect-offsets crds``) and a unit test fails
when the committed YAML drifts, so the API server and the operator can never disagree on a field.
Bodies are parsed here at the boundary; a ``ValidationError`` becomes a permanent error with the
field path in its message.

Field names are camelCase in Kubernetes and snake_case in Python (``alias_generator``). Specs
forbid unknown fields (a typo must fail loudly); the API server prunes them anyway, so the check
matters mostly for documents built by the CLI and the tests.

One module per kind, plus what they share:

- ``base``: spec/status base classes, object references, conditions, the CEL helper;
- ``connector_parts``: what a KafkaConnector and each MirrorMaker 2 connector share (state,
  auto-restart, offsets request specs and their status records);
- ``connect_cluster``, ``kafka_connector``, ``kafka_mirror_maker2``: one kind each.

Callers import from this package (``from connect_offsets.models.crds import KafkaConnectorSpec``):
which file holds a model is this package's business.
"""

from __future__ import annotations

from connect_offsets.models.crds.base import (
    CONDITIONS,
    DNS1123_SUBDOMAIN,
    NAMESPACE_NAME,
    OBSERVED_GENERATION,
    RFC3339_CEL,
    Condition,
    ConfigMapRef,
    KeyRef,
    Model,
    ObjectMeta,
    SecretKeyRef,
    StatusModel,
    cel,
    flat_values,
    object_name,
    parse_rfc3339,
)
from connect_offsets.models.crds.connect_cluster import (
    AuthenticationSpec,
    CertificateSource,
    ClientCertificateSpec,
    ConfigProviderSpec,
    ConfigProviderType,
    ConnectClusterResource,
    ConnectClusterSpec,
    ConnectClusterStatus,
    KafkaAccessSpec,
    TLSSpec,
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
from connect_offsets.models.crds.kafka_connector import (
    MAX_CONNECTOR_NAME,
    ClusterRef,
    FromConnectorSpec,
    FromMirrorSpec,
    InitialOffsetsSpec,
    InitialOffsetsStatus,
    KafkaConnectorResource,
    KafkaConnectorSpec,
    KafkaConnectorStatus,
)
from connect_offsets.models.crds.kafka_mirror_maker2 import (
    MAX_ALIAS,
    MAX_GROUP_ID,
    MAX_MIRROR_CLUSTERS,
    MAX_MIRRORS,
    MIRROR_RESERVED_CONFIG_KEYS,
    GroupFailoverSpec,
    GroupFailoverStatus,
    KafkaMirrorMaker2Resource,
    KafkaMirrorMaker2Spec,
    KafkaMirrorMaker2Status,
    MirrorClusterSpec,
    MirrorConnectorSpec,
    MirrorConnectorStatus,
    MirrorLagStatus,
    MirrorSpec,
    PartitionLagStatus,
    ReplicationLagSpec,
    ReplicationLagStatus,
    WriteToTarget,
)

__all__ = [
    "ALTER_OFFSETS",
    "AUTO_RESTART",
    "CONDITIONS",
    "CONNECTOR_STATUS",
    "DNS1123_SUBDOMAIN",
    "LIST_OFFSETS",
    "MAX_ALIAS",
    "MAX_CONNECTOR_NAME",
    "MAX_GROUP_ID",
    "MAX_MIRRORS",
    "MAX_MIRROR_CLUSTERS",
    "MIRROR_RESERVED_CONFIG_KEYS",
    "NAMESPACE_NAME",
    "OBSERVED_GENERATION",
    "OFFSETS_POLICY",
    "OFFSETS_PROGRESS",
    "RESERVED_CONFIG_KEYS",
    "RFC3339_CEL",
    "AlterOffsetsSpec",
    "AppliedOffsetsStatus",
    "AuthenticationSpec",
    "AutoRestartSpec",
    "AutoRestartStatus",
    "CertificateSource",
    "ClientCertificateSpec",
    "ClusterRef",
    "Condition",
    "ConfigMapRef",
    "ConfigProviderSpec",
    "ConfigProviderType",
    "ConnectClusterResource",
    "ConnectClusterSpec",
    "ConnectClusterStatus",
    "ConnectorState",
    "FromConnectorSpec",
    "FromMirrorSpec",
    "GroupFailoverSpec",
    "GroupFailoverStatus",
    "InitialOffsetsSpec",
    "InitialOffsetsStatus",
    "KafkaAccessSpec",
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
    "Model",
    "ObjectMeta",
    "OffsetsOperationStatus",
    "OffsetsPolicySpec",
    "OffsetsProgressStatus",
    "PartitionLagStatus",
    "PendingOffsetsOperation",
    "ReplicationLagSpec",
    "ReplicationLagStatus",
    "SecretKeyRef",
    "StatusModel",
    "TLSSpec",
    "WriteToTarget",
    "cel",
    "flat_values",
    "object_name",
    "parse_rfc3339",
]
