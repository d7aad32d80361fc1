"""Failover through MirrorMaker 2 checkpoints, pure: which mirror of a KafkaMirrorMaker2 translates a
consumer group, how its offsets translate, and which partitions cannot be translated and why.

MirrorMaker 2's semantics, restated from its sources (``RemoteClusterUtils.translateOffsets`` ->
``MirrorClient.remoteConsumerOffsets``, ``MirrorCheckpointTask``, ``OffsetSyncStore``): the
checkpoint connector emits, every ``emit.checkpoints.interval.seconds`` (60 s), a checkpoint per
partition of each group it replicates (``groups``, minus ``groups.exclude``: by default
``console-consumer-.*, connect-.*, __.*``, so sink connectors' groups are left out) whose offset it
can translate: one at or after an offset sync of the source connector (``emit.offset-syncs.enabled``).
The translation of upstream offset U is the newest sync's downstream offset D, plus one when U is
past the sync's upstream offset: the consumer may read again up to ``offset.lag.max`` (100) records
it had read, never skip one. The translated offsets of a group are the newest checkpoint per
downstream partition, topics renamed by the replication policy (``<source alias>.<topic>``; a topic
that came from the target goes back to its original name, every hop stripped: ``ReplicationPolicy``
in ``planning.mirror_topics``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from connect_offsets.models.crds import KafkaMirrorMaker2Resource
from connect_offsets.models.java_regex import PatternRefused
from connect_offsets.planning.mirror_topics import (
    DEFAULT_GROUPS_EXCLUDE,
    ReplicationPolicy,
    mirrored_group_filter,
    mirrored_topic_filter,
    replication_policy,
)
from connect_offsets.planning.mirrors import mirror_connector_name, mirror_targets
from connect_offsets.planning.plan import PlannedRefusal
from connect_offsets.planning.targets import ConnectorTarget

__all__ = [
    "ALLOW_PARTIAL_HOW",
    "FAILOVER_REFUSALS",
    "MirrorFacts",
    "Translation",
    "Untranslatable",
    "group_refusal",
    "mirror_facts",
    "offsets_document",
    "translate",
]

TP = tuple[str, int]

#: Reasons a failover (of a group, or of a sink connector's offsets) is refused for.
FAILOVER_REFUSALS = (
    "MirrorNotFound",
    "NoCheckpointConnector",
    "CheckpointsDisabled",
    "GroupNotCheckpointed",
    "CheckpointsTopicMissing",
    "UntranslatablePartitions",
    "CustomReplicationPolicy",
    "ConsumerGroupActive",
)

#: Partitions listed one per line in a refusal; the rest are counted.
MAX_LISTED_PARTITIONS = 50


@dataclass(frozen=True)
class MirrorFacts:
    """What translating a group through one mirror needs to know, from its connectors' configs."""

    name: str  # "<source>-><target>"
    source_alias: str
    target_alias: str
    checkpoint_connector: str
    checkpoints_topic: str
    emit_interval: str  # emit.checkpoints.interval.seconds as configured
    checkpoints_enabled: bool
    offset_syncs: bool  # the source connector writes offset syncs (emit.offset-syncs.enabled)
    policy: ReplicationPolicy  # the checkpoint connector's replication.policy.class and separator
    #: Whether a source topic is replicated (None: a custom topic filter, unknowable from outside).
    replicated: Callable[[str], bool] | None
    #: Whether a group is checkpointed (None: a custom group filter).
    groups: Callable[[str], bool] | None
    groups_text: str  # how groups / groups.exclude read, for messages

    def remote(self, topic: str) -> str:
        """``MirrorCheckpointTask.renameTopicPartition``: the name of ``topic`` on the target, as its
        checkpoints carry it (a multi-hop topic that came from the target: its original name)."""
        return self.policy.checkpoint_topic(topic, self.source_alias, self.target_alias)


def _flag(config: Mapping[str, str], key: str) -> bool:
    return config.get(key, "true").strip().lower() != "false"


def mirror_facts(resource: KafkaMirrorMaker2Resource, source_alias: str | None) -> MirrorFacts | PlannedRefusal:
    """The mirror of ``resource`` that translates groups from ``source_alias`` (or its only mirror
    with a checkpoint connector), or why there is none."""
    meta = resource.metadata
    where = f"KafkaMirrorMaker2 {meta.namespace}/{meta.name}"
    candidates = [m for m in resource.spec.mirrors if m.checkpoint_connector is not None]
    if source_alias is not None:
        candidates = [m for m in candidates if m.source_cluster == source_alias]
    if not candidates:
        flows = ", ".join(f"{m.source_cluster}->{m.target_cluster}" for m in resource.spec.mirrors)
        which = f"from {source_alias} " if source_alias else ""
        return PlannedRefusal(
            "NoCheckpointConnector",
            f"{where} has no mirror {which}with a checkpointConnector (mirrors: {flows}); MirrorMaker 2 "
            "translates consumer groups only through a checkpoint connector's checkpoints",
        )
    if len(candidates) > 1:
        flows = ", ".join(f"{m.source_cluster}->{m.target_cluster}" for m in candidates)
        return PlannedRefusal(
            "MirrorNotFound",
            f"{where} has several mirrors with a checkpointConnector ({flows}): name the source cluster",
        )
    mirror = candidates[0]
    targets: dict[str, ConnectorTarget] = {t.name: t for t in mirror_targets(resource, {}).targets}
    checkpoint_name = mirror_connector_name(mirror.source_cluster, mirror.target_cluster, "MirrorCheckpointConnector")
    checkpoint = targets[checkpoint_name].config
    source = targets.get(mirror_connector_name(mirror.source_cluster, mirror.target_cluster, "MirrorSourceConnector"))
    policy = replication_policy(
        checkpoint,
        f"{where} mirror {mirror.source_cluster}->{mirror.target_cluster} (its checkpoint connector's config)",
    )
    if isinstance(policy, str):
        return PlannedRefusal("CustomReplicationPolicy", policy)
    include = checkpoint.get("groups", ".*")
    exclude = checkpoint.get("groups.exclude", checkpoint.get("groups.blacklist", DEFAULT_GROUPS_EXCLUDE))
    try:
        replicated = mirrored_topic_filter(source.config if source is not None else checkpoint)
        groups = mirrored_group_filter(checkpoint)
    except PatternRefused as error:
        return PlannedRefusal("InvalidSpec", f"{where}: {error}")
    return MirrorFacts(
        name=f"{mirror.source_cluster}->{mirror.target_cluster}",
        source_alias=mirror.source_cluster,
        target_alias=mirror.target_cluster,
        checkpoint_connector=checkpoint_name,
        checkpoints_topic=policy.checkpoints_topic(mirror.source_cluster),
        emit_interval=checkpoint.get("emit.checkpoints.interval.seconds", "60"),
        checkpoints_enabled=_flag(checkpoint, "emit.checkpoints.enabled"),
        offset_syncs=source is None or _flag(source.config, "emit.offset-syncs.enabled"),
        policy=policy,
        replicated=replicated,
        groups=groups,
        groups_text=f"groups {include!r}, groups.exclude {exclude!r}",
    )


def group_refusal(facts: MirrorFacts, group: str) -> PlannedRefusal | None:
    """Why ``facts``' mirror never checkpoints ``group`` at all, if it does not."""
    if not facts.checkpoints_enabled:
        return PlannedRefusal(
            "CheckpointsDisabled",
            f"mirror {facts.name}: its checkpoint connector has emit.checkpoints.enabled=false, so no group is "
            "ever checkpointed",
        )
    if facts.groups is not None and not facts.groups(group):
        return PlannedRefusal(
            "GroupNotCheckpointed",
            f"mirror {facts.name} does not checkpoint group {group}: its checkpoint connector's {facts.groups_text} "
            "leave it out (MirrorMaker 2 excludes console-consumer-.*, connect-.* and __.* by default, so a sink "
            "connector's group connect-<name> needs groups.exclude set in checkpointConnector.config)",
        )
    return None


@dataclass(frozen=True)
class Untranslatable:
    """A partition the group has on the source whose offset cannot be translated, and why."""

    topic: str  # the source topic
    partition: int
    offset: int  # the group's committed offset there
    reason: str  # TopicNotReplicated, OffsetSyncsDisabled, NoCheckpoint
    why: str

    def line(self) -> str:
        return f"{self.topic}-{self.partition} (offset {self.offset}): {self.reason}: {self.why}"


#: How a request asks for a partial failover, for messages.
ALLOW_PARTIAL_HOW = (
    "connect-offsets.io/allow-partial=true with the failover-group annotation, or "
    "spec.mirrors[].groupFailover.allowPartial: true"
)


@dataclass(frozen=True)
class Translation:
    """A group's offsets translated to the target: downstream (topic, partition) -> offset."""

    group: str
    mirror: str
    offsets: dict[TP, int]
    untranslatable: list[Untranslatable] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: The group's offsets on the source could not be read: partitions it has there without a
    #: checkpoint are unknown, so the translation may be partial without anyone knowing.
    source_unread: bool = False
    #: The checkpointed upstream offset of each translated partition (for the listing).
    upstream: dict[TP, int] = field(default_factory=dict)

    @property
    def partial(self) -> bool:
        """Whether committing the translation may leave partitions of the group out."""
        return bool(self.untranslatable) or self.source_unread

    def partition_lines(self) -> list[str]:
        """Every partition of the group with what happens to it: translated (the offset committed on
        the target) or not, and why; at most ``MAX_LISTED_PARTITIONS`` lines, the rest counted."""
        lines = [
            f"{topic}-{partition}: translated to offset {offset} (checkpoint of upstream offset "
            f"{self.upstream.get((topic, partition), '?')})"
            for (topic, partition), offset in sorted(self.offsets.items())
        ]
        lines += [u.line() for u in self.untranslatable]
        if self.source_unread:
            lines.append(
                "partitions without a checkpoint: unknown (the group's offsets on the source cluster could not be "
                "read); they would start from the consumer's auto.offset.reset"
            )
        shown = lines[:MAX_LISTED_PARTITIONS]
        more = len(lines) - len(shown)
        return shown + ([f"... and {more} more"] if more else [])

    def refusal(self, allow_partial: bool = False) -> PlannedRefusal | None:
        """Why the translation is not committed: nothing translated, or a partial translation
        (untranslatable partitions, or the source's offsets unread) not asked for with
        ``allow_partial``: partitions left out would silently start from ``auto.offset.reset``."""
        if not self.offsets:
            if not self.untranslatable:
                return PlannedRefusal(
                    "UntranslatablePartitions",
                    f"group {self.group}: mirror {self.mirror} has no checkpoint of it yet; nothing was changed",
                )
        elif not self.partial or allow_partial:
            return None
        if self.untranslatable:
            what = f"{len(self.untranslatable)} partition(s) cannot be translated through mirror {self.mirror}"
        else:
            what = (
                f"the group's offsets on the source cluster could not be read, so the partitions it has there "
                f"without a checkpoint of mirror {self.mirror} are unknown"
            )
        partial = (
            f" A partial failover commits the {len(self.offsets)} translated partition(s) and leaves the rest to "
            f"auto.offset.reset: ask for it with {ALLOW_PARTIAL_HOW}."
            if self.offsets
            else ""
        )
        return PlannedRefusal(
            "UntranslatablePartitions",
            f"group {self.group}: {what}; nothing was changed.{partial} Partitions:\n"
            + "\n".join(self.partition_lines()),
        )


def translate(
    group: str,
    facts: MirrorFacts,
    checkpoints: Mapping[TP, tuple[int, int]],
    upstream: Mapping[TP, int] | None,
    remote_topics: set[str] | None,
) -> Translation:
    """``group``'s offsets on the target: the newest checkpoint per downstream partition
    (``checkpoints``: (upstream, downstream) offsets), as ``RemoteClusterUtils.translateOffsets``
    answers. ``upstream``: the group's committed offsets on the source (None: not readable, e.g.
    the source site is down), to list every partition the group has without a checkpoint and why;
    ``remote_topics``: the source topics' remote names that exist on the target (None: unknown).
    """
    offsets = {tp: downstream for tp, (_, downstream) in sorted(checkpoints.items())}
    upstream_of = {tp: up for tp, (up, _) in checkpoints.items()}
    translation = Translation(group, facts.name, offsets, source_unread=upstream is None, upstream=upstream_of)
    if upstream is None:
        translation.notes.append(
            "the group's offsets on the source cluster could not be read: the checkpoints alone were used, and "
            "partitions the group has there without one cannot be listed"
        )
        return translation
    for (topic, partition), committed in sorted(upstream.items()):
        remote = facts.remote(topic)
        found = checkpoints.get((remote, partition))
        if facts.replicated is not None and not facts.replicated(topic):
            reason, why = "TopicNotReplicated", f"mirror {facts.name} does not replicate topic {topic}"
        elif remote_topics is not None and remote not in remote_topics:
            reason, why = "TopicNotReplicated", f"its remote topic {remote} does not exist on {facts.target_alias}"
        elif not facts.offset_syncs:
            reason, why = (
                "OffsetSyncsDisabled",
                "the source connector has emit.offset-syncs.enabled=false: without offset syncs nothing translates",
            )
        elif found is None:
            reason, why = (
                "NoCheckpoint",
                f"no checkpoint yet: MirrorMaker 2 emits one every emit.checkpoints.interval.seconds "
                f"({facts.emit_interval} s) for an offset at or after an offset sync; a group idle since before the "
                "mirror replicated its offset (or committed only before the first sync) gets none. Wait an "
                "interval after the group commits again",
            )
        else:
            checkpointed = found[0]
            if checkpointed != committed:
                translation.notes.append(
                    f"{topic}-{partition}: the newest checkpoint is for offset {checkpointed}, the group is at "
                    f"{committed} on the source (it committed after the last checkpoint; MirrorMaker 2 emits every "
                    f"{facts.emit_interval} s)"
                )
            continue
        translation.untranslatable.append(Untranslatable(topic, partition, committed, reason, why))
    return translation


def offsets_document(offsets: Mapping[TP, int]) -> dict[str, list[dict[str, dict[str, object]]]]:
    """Translated offsets in KIP-875's sink form (what a sink connector's offsets and the pinned copy
    of a group failover hold)."""
    return {
        "offsets": [
            {"partition": {"kafka_topic": topic, "kafka_partition": partition}, "offset": {"kafka_offset": offset}}
            for (topic, partition), offset in sorted(offsets.items())
        ]
    }
