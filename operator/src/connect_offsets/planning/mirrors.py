"""MirrorMaker 2 planning: the connectors a KafkaMirrorMaker2 declares, their names and ConfigMap
keys, where each mirror writes (cluster ids) and the producer override.
"""

from __future__ import annotations

from dataclasses import dataclass

from connect_offsets.models.crds import (
    AutoRestartStatus,
    KafkaMirrorMaker2Resource,
    MirrorSpec,
    WriteToTarget,
)
from connect_offsets.planning.mirror_topics import DEFAULT_GROUPS_EXCLUDE, exclude_reference_groups, replication_policy
from connect_offsets.planning.plan import ConditionSpec
from connect_offsets.planning.targets import ConnectorTarget
from connect_offsets.vocabulary import (
    ANNOTATION_DRY_RUN,
    ANNOTATION_FAILOVER_GROUP,
    ANNOTATION_HANDLED_REQUEST,
    ANNOTATION_MM2_CONNECTOR,
    ANNOTATION_OFFSETS,
    ANNOTATION_REQUEST_ID,
    ANNOTATION_RESET_OFFSET_SYNCS,
    ANNOTATION_RESTORE_FROM,
    MIRROR_CLASSES,
    OFFSETS_OPERATIONS,
    REQUEST_ANNOTATIONS,
    java_string,
)

# --- KafkaMirrorMaker2 -------------------------------------------------------------------

#: Records pass through unchanged: MM2 copies bytes, whatever the worker's default converters.
BYTES = "org.apache.kafka.connect.converters.ByteArrayConverter"


def mirror_connector_name(source: str, target: str, kind: str) -> str:
    return f"{source}->{target}.{kind}"


def mirror_configmap_key(connector: str) -> str:
    """Strimzi's key: the connector name with ``->`` replaced by ``--``, plus ``.json``."""
    return connector.replace("->", "--") + ".json"


#: Target-cluster settings that decide where and how a producer connects (copied into
#: ``producer.override.*``); the rest of a cluster's settings are for MirrorMaker 2's own clients.
_PRODUCER_CONNECTION_PREFIXES = ("bootstrap.servers", "security.", "sasl.", "ssl.", "client.dns.lookup")


def producer_override(target_settings: dict[str, str]) -> dict[str, str]:
    """``producer.override.*`` settings that send a connector's records to the target cluster.

    Every record a MirrorMaker 2 connector emits goes through the Connect worker's producer, not
    through MirrorMaker 2's target clients: only these overrides point it elsewhere.
    """
    prefix = "target.cluster."
    return {
        f"producer.override.{key[len(prefix) :]}": value
        for key, value in target_settings.items()
        if key.startswith(prefix) and key[len(prefix) :].startswith(_PRODUCER_CONNECTION_PREFIXES)
    }


@dataclass(frozen=True)
class MirrorClusterIds:
    """The Kafka cluster ids found for one mirror this pass, or why they are unknown."""

    source: str | None = None
    target: str | None = None
    error: str | None = None


def mirror_direction(
    index: int, mirror: MirrorSpec, connect_cluster_id: str | None, found: MirrorClusterIds
) -> ConditionSpec | None:
    """Whether a mirror's connectors may run on this Connect cluster; a refusal as a condition.

    The records of a MirrorMaker 2 connector go through the Connect worker's producer: into the
    worker's own Kafka cluster. With ``writeToTarget: worker`` that cluster must be the target,
    or the mirror writes elsewhere — into its own source, if the aliases are reversed, where its
    output matches the mirror again and topics named ``a.a.a.…`` multiply on both clusters.
    """
    where = f"spec.mirrors[{index}] ({mirror.source_cluster} -> {mirror.target_cluster})"
    if found.error is not None:
        return ConditionSpec(
            "Ready",
            "False",
            "MirrorClusterUnreachable",
            f"{where}: cannot tell which Kafka cluster it reads and writes, so nothing is created or "
            f"changed for it: {found.error}",
        )
    if found.source is not None and found.source == found.target:
        return ConditionSpec(
            "Ready",
            "False",
            "MirrorOntoItself",
            f"{where}: source and target are the same Kafka cluster (id {found.source}); a mirror of a "
            "cluster onto itself copies its own output forever. Point the two aliases at different clusters.",
        )
    if mirror.write_to_target is WriteToTarget.PRODUCER_OVERRIDE or found.target == connect_cluster_id:
        return None
    into = "its source" if found.source == connect_cluster_id else "a cluster that is neither source nor target"
    return ConditionSpec(
        "Ready",
        "False",
        "TargetIsNotConnectCluster",
        f"{where}: the target {mirror.target_cluster} is Kafka cluster {found.target}, but this Connect "
        f"cluster's workers use Kafka cluster {connect_cluster_id or '(not reported by Connect)'}. MirrorMaker 2 "
        f"connectors write their records through the worker's producer, so this mirror would write into "
        f"{into}. Run it on a Connect cluster whose Kafka is the target, swap the aliases if they are "
        f"reversed, or set spec.mirrors[{index}].writeToTarget: producerOverride (the worker's "
        "connector.client.config.override.policy must allow it). Nothing was created.",
    )


@dataclass(frozen=True)
class MirrorPlan:
    targets: list[ConnectorTarget]
    conditions: list[ConditionSpec]
    #: (connector name, offset-syncs topic, cluster alias holding it) when a full reset is requested.
    offset_syncs_reset: tuple[str, str, str] | None = None


def mirror_targets(resource: KafkaMirrorMaker2Resource, secrets: dict[tuple[str, str], str]) -> MirrorPlan:
    """The connectors a KafkaMirrorMaker2 declares, and the problems with its annotations.

    ``secrets`` maps (Secret name, key) to the values the service read for ``secretConfig``.
    """
    spec = resource.spec
    meta = resource.metadata
    clusters = {c.alias: c for c in spec.clusters}
    owner = f"{meta.namespace}/{meta.name}"
    annotations = meta.annotations
    operation = annotations.get(ANNOTATION_OFFSETS)
    selected = annotations.get(ANNOTATION_MM2_CONNECTOR)
    conditions: list[ConditionSpec] = []
    targets: list[ConnectorTarget] = []
    previous = {c.name: c for c in resource.status.connectors}
    shared = [key for key in (ANNOTATION_DRY_RUN, ANNOTATION_REQUEST_ID) if key in annotations]
    ambiguous = operation is not None and ANNOTATION_FAILOVER_GROUP in annotations and bool(shared)
    if ambiguous:
        # dry-run and request-id would be the offsets request's and the failover's alike: the
        # offsets request's removal would strip them from the failover waiting behind it (a dry
        # run committed for real). Neither runs until one of the two requests is taken away.
        conditions.append(
            ConditionSpec(
                "InvalidAnnotation",
                "True",
                "AmbiguousRequest",
                f"{ANNOTATION_OFFSETS}={operation!r} and {ANNOTATION_FAILOVER_GROUP}="
                f"{annotations[ANNOTATION_FAILOVER_GROUP][:80]!r} are both on the resource with "
                f"{' and '.join(shared)}, which would belong to both; neither runs until one request is removed "
                "(one request at a time). Nothing was done",
            )
        )

    def cluster_settings(prefix: str, alias: str) -> dict[str, str]:
        cluster = clusters[alias]
        settings = {f"{prefix}.alias": alias, f"{prefix}.bootstrap.servers": cluster.bootstrap_servers}
        for key, value in cluster.config.items():
            if value is not None:
                settings[f"{prefix}.{key}"] = java_string(value)
        for key, ref in cluster.secret_config.items():
            settings[f"{prefix}.{key}"] = secrets.get((ref.name, ref.key), "")
        return settings

    def secret_keys(mirror: MirrorSpec) -> tuple[tuple[str, str, str], ...]:
        """(config key, client prefix, Secret) of every secretConfig value a mirror's connectors carry."""
        keys = [
            (f"{prefix}.{key}", f"{prefix}.", ref.name)
            for prefix, alias in (("source.cluster", mirror.source_cluster), ("target.cluster", mirror.target_cluster))
            for key, ref in clusters[alias].secret_config.items()
        ]
        if mirror.write_to_target is WriteToTarget.PRODUCER_OVERRIDE:
            keys += [
                (f"producer.override.{key}", "producer.override.", ref.name)
                for key, ref in clusters[mirror.target_cluster].secret_config.items()
                if key.startswith(_PRODUCER_CONNECTION_PREFIXES)
            ]
        return tuple(keys)

    for index, mirror in enumerate(spec.mirrors):
        blocks = {
            "MirrorSourceConnector": ("sourceConnector", mirror.source_connector),
            "MirrorCheckpointConnector": ("checkpointConnector", mirror.checkpoint_connector),
            "MirrorHeartbeatConnector": ("heartbeatConnector", mirror.heartbeat_connector),
        }
        for kind, (field_name, block) in blocks.items():
            if block is None:
                continue
            name = mirror_connector_name(mirror.source_cluster, mirror.target_cluster, kind)
            config: dict[str, str] = {
                "name": name,
                "connector.class": MIRROR_CLASSES[kind],
                "key.converter": BYTES,
                "value.converter": BYTES,
                **cluster_settings("source.cluster", mirror.source_cluster),
                **cluster_settings("target.cluster", mirror.target_cluster),
            }
            if mirror.topics_pattern is not None and kind == "MirrorSourceConnector":
                config["topics"] = mirror.topics_pattern
            if mirror.topics_exclude_pattern is not None and kind != "MirrorHeartbeatConnector":
                config["topics.exclude"] = mirror.topics_exclude_pattern
            if mirror.groups_pattern is not None and kind == "MirrorCheckpointConnector":
                config["groups"] = mirror.groups_pattern
            if block.tasks_max is not None:
                config["tasks.max"] = str(block.tasks_max)
            if mirror.write_to_target is WriteToTarget.PRODUCER_OVERRIDE:
                config.update(producer_override(cluster_settings("target.cluster", mirror.target_cluster)))
            config.update({k: java_string(v) for k, v in block.config.items() if v is not None})
            if kind == "MirrorCheckpointConnector":
                excluded = config.get("groups.exclude", config.get("groups.blacklist", DEFAULT_GROUPS_EXCLUDE))
                config["groups.exclude"] = exclude_reference_groups(excluded)
            own: dict[str, str] = {}
            companions: tuple[tuple[str, str], ...] = ()
            if selected == name and operation is not None and not ambiguous:
                own[ANNOTATION_OFFSETS] = operation
                companions = ((ANNOTATION_MM2_CONNECTOR, selected),)
                syncs = annotations.get(ANNOTATION_RESET_OFFSET_SYNCS)
                if syncs is not None:
                    companions += ((ANNOTATION_RESET_OFFSET_SYNCS, syncs),)
                restore_from = annotations.get(ANNOTATION_RESTORE_FROM)
                if restore_from is not None and operation == "restore":
                    own[ANNOTATION_RESTORE_FROM] = restore_from
                    companions += ((ANNOTATION_RESTORE_FROM, restore_from),)
                own.update({key: annotations[key] for key in REQUEST_ANNOTATIONS if key in annotations})
            status = previous.get(name)
            targets.append(
                ConnectorTarget(
                    name=name,
                    owner=owner,
                    class_name=MIRROR_CLASSES[kind],
                    config=config,
                    state=block.state,
                    generation=meta.generation,
                    annotations=own,
                    auto_restart=block.auto_restart,
                    auto_restart_status=(
                        status.auto_restart if status and status.auto_restart else AutoRestartStatus()
                    ),
                    last_offsets_operation=status.last_offsets_operation if status else None,
                    list_configmap=block.list_offsets.to_config_map.name if block.list_offsets else None,
                    alter_configmap=(
                        block.alter_offsets.from_config_map.name
                        if block.alter_offsets and block.alter_offsets.from_config_map
                        else None
                    ),
                    configmap_key=mirror_configmap_key(name),
                    companion_annotations=companions,
                    spec_path=f"spec.mirrors[{index}].{field_name}",
                    stop_policy=bool(block.offsets_policy and block.offsets_policy.stop_connector),
                    pending=status.pending_offsets_operation if status else None,
                    handled_request_ids=tuple(resource.status.handled_request_ids),
                    apply_on_change=bool(block.alter_offsets and block.alter_offsets.apply_on_change),
                    applied_offsets=status.applied_offsets if status else None,
                    chunk_progress=status.offsets_progress if status else None,
                    resource_version=meta.resource_version,
                    handled_marker=annotations.get(ANNOTATION_HANDLED_REQUEST),
                    tenant_keys=frozenset(block.config),
                    secret_keys=secret_keys(mirror),
                )
            )

    names = [t.name for t in targets]
    if operation is not None and selected is None:
        conditions.append(
            ConditionSpec(
                "InvalidAnnotation",
                "True",
                "MissingAnnotation",
                f"{ANNOTATION_OFFSETS}={operation!r} needs {ANNOTATION_MM2_CONNECTOR}=<connector>, one of: "
                + ", ".join(names),
            )
        )
    elif selected is not None and operation is None:
        conditions.append(
            ConditionSpec(
                "InvalidAnnotation",
                "True",
                "MissingAnnotation",
                f"{ANNOTATION_MM2_CONNECTOR}={selected!r} needs {ANNOTATION_OFFSETS}=list|alter|reset next to it",
            )
        )
    elif selected is not None and selected not in names:
        conditions.append(
            ConditionSpec(
                "InvalidAnnotation",
                "True",
                "UnknownConnector",
                f"{ANNOTATION_MM2_CONNECTOR}={selected!r} matches no connector of this resource; valid names: "
                + ", ".join(names),
            )
        )
    elif operation is not None and operation not in OFFSETS_OPERATIONS:
        conditions.append(
            ConditionSpec(
                "InvalidAnnotation",
                "True",
                "UnknownValue",
                f"{ANNOTATION_OFFSETS}={operation!r} is not one of {', '.join(OFFSETS_OPERATIONS)}; nothing was done",
            )
        )

    syncs_reset: tuple[str, str, str] | None = None
    syncs_value = annotations.get(ANNOTATION_RESET_OFFSET_SYNCS)
    if syncs_value is not None and not ambiguous:
        target = next((t for t in targets if t.name == selected), None)
        if (
            syncs_value != "true"
            or operation != "reset"
            or target is None
            or not target.name.endswith(".MirrorSourceConnector")
        ):
            conditions.append(
                ConditionSpec(
                    "InvalidAnnotation",
                    "True",
                    "InvalidOffsetSyncsReset",
                    f"{ANNOTATION_RESET_OFFSET_SYNCS}=true only goes with {ANNOTATION_OFFSETS}=reset of a "
                    "MirrorSourceConnector; nothing in Kafka was touched",
                )
            )
        elif isinstance(policy := replication_policy(target.config, f"{target.name}'s config"), str):
            conditions.append(
                ConditionSpec(
                    "InvalidAnnotation",
                    "True",
                    "InvalidOffsetSyncsReset",
                    f"{policy}: the offset-syncs topic it names cannot be known; clear that topic by hand. "
                    "Nothing in Kafka was touched",
                )
            )
        else:
            source_alias = target.config["source.cluster.alias"]
            target_alias = target.config["target.cluster.alias"]
            location = target.config.get("offset-syncs.topic.location", "source")
            # MirrorSourceConfig.offsetSyncsTopic(): named after the *other* cluster's alias
            # (DefaultReplicationPolicy.offsetSyncsTopic, with the policy's internal separator).
            other, holder = (source_alias, target_alias) if location == "target" else (target_alias, source_alias)
            syncs_reset = (target.name, policy.offset_syncs_topic(other), holder)
    return MirrorPlan(targets, conditions, syncs_reset)
