"""Where a copy reads its source, through the same checks as everything else a tenant asks for.

* **Another connector** (``SourceReader.connector``): its ConnectCluster is resolved for the
  resource's namespace exactly as the resource's own (``clusters.resolve_cluster``: the namespace
  must be allowed, the credentials opted in, Connect not too old), then the connector must be the
  namespace's own or its resource must let the namespace read it (``planning.copies.source_refusal``);
  only then are its offsets read (``GET /connectors/<name>/offsets``).
* **A consumer group translated through MirrorMaker 2 checkpoints** (``SourceReader.mirror`` for a
  sink connector's initial offsets, ``translate_group`` for a KafkaMirrorMaker2's group failover): the
  KafkaMirrorMaker2 must be in the resource's namespace; its clusters' settings and Secrets go
  through the credentials policy (``lag.MirrorSecrets``), and every Kafka call through the tenant
  pool (``clients.kafka_groups``). The source cluster is asked for the group's offsets only to
  list what cannot be translated: when it does not answer (the site is down) the checkpoints alone
  are used, and the outcome says so.

Refusals are ``SourceOffsets.reason`` (a condition reason naming the rule); a cluster that does
not answer is ``transient`` (the request is tried again).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from connect_offsets.clients.connect import ConnectError
from connect_offsets.clients.credentials import CredentialsRefused
from connect_offsets.clients.kafka import KafkaAdminError
from connect_offsets.clients.kafka_groups import KafkaGroups
from connect_offsets.clients.kubernetes import KubernetesApi, KubernetesError
from connect_offsets.lag import MirrorSecrets, mirror_kafka_config
from connect_offsets.models.crds import (
    DNS1123_SUBDOMAIN,
    NAMESPACE_NAME,
    FromMirrorSpec,
    KafkaConnectorResource,
    KafkaMirrorMaker2Resource,
)
from connect_offsets.planning import SourceOffsets, mirror_targets
from connect_offsets.planning.copies import offsets_readers, source_refusal
from connect_offsets.planning.failover import (
    MirrorFacts,
    Translation,
    group_refusal,
    mirror_facts,
    offsets_document,
    translate,
)
from connect_offsets.planning.plan import PlannedRefusal
from connect_offsets.reconcile.clusters import (
    ClusterRegistry,
    ClusterUnreachable,
    ClusterUnusable,
    cluster_ref,
    resolve_cluster,
)
from connect_offsets.vocabulary import (
    ANNOTATION_ALTER_FROM_CLUSTER,
    CLUSTER_LABEL,
    CLUSTER_NAMESPACE_LABEL,
    CONNECTORS,
    MIRRORS,
    OWNER_CONFIG_KEY,
)

__all__ = ["MirrorKafka", "SourceReader", "mirror_kafka", "translate_group"]


@dataclass(frozen=True)
class MirrorKafka:
    """librdkafka settings of a mirror's two clusters (secretConfig values resolved)."""

    source: dict[str, Any]
    target: dict[str, Any]


def mirror_kafka(
    resource: KafkaMirrorMaker2Resource, values: dict[tuple[str, str], str], facts: MirrorFacts
) -> MirrorKafka:
    """The clusters of ``facts``' mirror, from its checkpoint connector's config with the values read."""
    target = next(t for t in mirror_targets(resource, values).targets if t.name == facts.checkpoint_connector)
    return MirrorKafka(source=mirror_kafka_config(target, "source"), target=mirror_kafka_config(target, "target"))


async def translate_group(
    kafka: KafkaGroups, facts: MirrorFacts, clusters: MirrorKafka, group: str, namespace: str
) -> Translation | PlannedRefusal:
    """``group``'s offsets translated through ``facts``' mirror (``planning.failover.translate``).
    KafkaAdminError when the target cluster (the checkpoints) cannot be read: try again later."""
    refusal = group_refusal(facts, group)
    if refusal is not None:
        return refusal
    read = await kafka.checkpoints(clusters.target, facts.checkpoints_topic, group, namespace=namespace)
    if not read.exists:
        return PlannedRefusal(
            "CheckpointsTopicMissing",
            f"mirror {facts.name}: topic {facts.checkpoints_topic} does not exist on cluster {facts.target_alias}: "
            "its checkpoint connector has not emitted any checkpoint yet",
        )
    unread: str | None = None
    try:
        upstream: dict[tuple[str, int], int] | None = await kafka.committed(clusters.source, group, namespace=namespace)
    except KafkaAdminError as error:
        upstream, unread = None, str(error)
    remote: set[str] | None = None
    if upstream:
        try:
            wanted = {facts.remote(topic) for topic, _ in upstream}
            remote = await kafka.existing_topics(clusters.target, wanted, namespace=namespace)
        except KafkaAdminError:
            remote = None
    checkpoints = {tp: (c.upstream, c.downstream) for tp, c in read.checkpoints.items()}
    translation = translate(group, facts, checkpoints, upstream, remote)
    if unread is not None:
        translation.notes.append(f"source cluster {facts.source_alias}: {unread}")
    return translation


class SourceReader:
    """The copy sources of one KafkaConnector pass (``context.CopySources``)."""

    def __init__(
        self,
        kube: KubernetesApi,
        clusters: ClusterRegistry,
        kafka: KafkaGroups,
        secrets: MirrorSecrets,
        *,
        namespace: str,
        labels: dict[str, str],
        connector: str,
    ) -> None:
        self.kube = kube
        self.clusters = clusters
        self.kafka = kafka
        self.secrets = secrets
        self.namespace = namespace
        self.labels = labels
        self.own = connector

    def _cluster(self, written: str | None) -> tuple[str, str] | SourceOffsets:
        if written is None:
            return cluster_ref(self.namespace, self.labels)
        namespace, _, name = written.rpartition("/")
        namespace = namespace or self.namespace
        good = (
            len(name) <= 253
            and re.fullmatch(DNS1123_SUBDOMAIN, name)
            and len(namespace) <= 63
            and re.fullmatch(NAMESPACE_NAME, namespace)
        )
        if not good:
            return SourceOffsets(
                f"ConnectCluster {written[:80]!r}",
                reason="InvalidAnnotation",
                message=f"{ANNOTATION_ALTER_FROM_CLUSTER}={written[:80]!r} is not [<namespace>/]<ConnectCluster>; "
                "nothing was read",
            )
        return namespace, name

    async def connector(self, name: str, cluster: str | None) -> SourceOffsets:
        """Connector ``name``'s offsets, on ``cluster`` (``[namespace/]name``; default the resource's)."""
        where = self._cluster(cluster)
        if isinstance(where, SourceOffsets):
            return where
        description = f"connector {name} on ConnectCluster {where[0]}/{where[1]}"
        if where == cluster_ref(self.namespace, self.labels) and name == self.own:
            return SourceOffsets(
                description, reason="InvalidAnnotation", message=f"{description} is this connector; nothing to copy"
            )
        labels = {CLUSTER_LABEL: where[1], CLUSTER_NAMESPACE_LABEL: where[0]}
        try:
            # The namespace must be allowed on the source's cluster as on its own; the source's
            # name is checked by ownership below, not by this namespace's name prefix.
            client, _ = await resolve_cluster(self.clusters, self.namespace, labels)
        except ClusterUnusable as error:
            return SourceOffsets(
                description, reason=error.reason_or("ConnectClusterUnavailable"), message=f"{description}: {error}"
            )
        except ClusterUnreachable as error:
            return SourceOffsets(description, transient=True, message=f"{description}: {error}")
        try:
            config = await client.get_connector_config(name)
            if config is None:
                return SourceOffsets(
                    description,
                    reason="SourceConnectorNotFound",
                    message=f"{description} does not exist; nothing was read",
                )
            owner = config.get(OWNER_CONFIG_KEY)
            readers = await self._readers(owner) if owner and owner.partition("/")[0] != self.namespace else None
            refusal = source_refusal(description, owner, self.namespace, readers)
            if refusal is not None:
                return SourceOffsets(description, reason=refusal.reason, message=refusal.message)
            document = await client.get_offsets_raw(name)
        except ConnectError as error:
            return SourceOffsets(description, transient=True, message=f"{description}: {error}")
        return SourceOffsets(description, document.decode("utf-8", errors="replace"))

    async def _readers(self, owner: str) -> frozenset[str] | None:
        """The offsets-readers of the resource ``owner`` names (a KafkaConnector or KafkaMirrorMaker2);
        None when it cannot be read (gone, or the operator may not read that namespace)."""
        namespace, _, name = owner.partition("/")
        for plural in (CONNECTORS, MIRRORS):
            try:
                body = await self.kube.cached_resource(plural, namespace, name)
            except KubernetesError:
                return None
            if body is not None:
                return offsets_readers((body.get("metadata") or {}).get("annotations") or {})
        return None

    async def _sink_group(self, connector: str) -> str:
        """A sink connector's consumer group: its KafkaConnector's consumer.override.group.id, else connect-<name>."""
        try:
            body = await self.kube.cached_resource(CONNECTORS, self.namespace, connector)
            if body is not None:
                resource = KafkaConnectorResource.model_validate(body)
                override = resource.spec.config.get("consumer.override.group.id")
                if override:
                    return str(override)
        except (KubernetesError, ValidationError):
            pass
        return f"connect-{connector}"

    async def mirror(self, spec: FromMirrorSpec) -> SourceOffsets:
        """The group of ``spec.source_connector`` translated through ``spec.mirror``'s checkpoints, as
        this sink connector's offsets (KIP-875 sink form, remote topic names)."""
        group = spec.group or await self._sink_group(spec.source_connector)
        description = f"group {group} through the checkpoints of KafkaMirrorMaker2 {self.namespace}/{spec.mirror}"
        try:
            body = await self.kube.cached_resource(MIRRORS, self.namespace, spec.mirror)
            resource = KafkaMirrorMaker2Resource.model_validate(body) if body is not None else None
        except (KubernetesError, ValidationError) as error:
            return SourceOffsets(description, reason="MirrorNotFound", message=f"{description}: unreadable ({error})")
        if resource is None:
            return SourceOffsets(
                description,
                reason="MirrorNotFound",
                message=f"KafkaMirrorMaker2 {spec.mirror} does not exist in namespace {self.namespace}",
            )
        facts = mirror_facts(resource, spec.source_cluster)
        if isinstance(facts, PlannedRefusal):
            return SourceOffsets(description, reason=facts.reason, message=facts.message)
        try:
            values = await self.secrets.read(resource)
        except CredentialsRefused as error:
            return SourceOffsets(description, reason=error.reason, message=f"{description}: {error}")
        except KubernetesError as error:
            if error.retryable:
                return SourceOffsets(description, transient=True, message=f"{description}: {error}")
            return SourceOffsets(description, reason="SecretUnreadable", message=f"{description}: {error}")
        except LookupError as error:
            return SourceOffsets(description, reason="SecretUnreadable", message=f"{description}: {error}")
        try:
            translation = await translate_group(
                self.kafka, facts, mirror_kafka(resource, values, facts), group, self.namespace
            )
        except KafkaAdminError as error:
            return SourceOffsets(description, transient=True, message=f"{description}: {error}")
        refusal = translation if isinstance(translation, PlannedRefusal) else translation.refusal()
        if refusal is not None:
            return SourceOffsets(description, reason=refusal.reason, message=refusal.message)
        assert isinstance(translation, Translation)
        document = json.dumps(offsets_document(translation.offsets), separators=(",", ":"))
        return SourceOffsets(description, document, notes=tuple(translation.notes))
