"""Which topics a MirrorSourceConnector replicates, and what its replication policy calls them,
decided from its config alone (pure).

Separate from the lag monitor (lag.py) because it is Connect's own rule, restated: MM2's
DefaultTopicFilter, its replication policies and their defaults. The lag monitor uses it to tell
which source topics a mirror should keep up with; user regexes go through the linear-time
matcher (models/java_regex.py).

``ReplicationPolicy`` restates ``DefaultReplicationPolicy`` (its ``replication.policy.separator``,
remote topics nesting once per hop: ``a.b.t`` came from ``a``, where it came from ``b``;
``originalTopic`` strips every alias, recursively) and ``IdentityReplicationPolicy`` (names kept,
but heartbeats named as by the default policy), from ``connect/mirror-client``; the class comes
from the mirror's config (``replication.policy.class``), and a class neither of those cannot be
known from outside (``replication_policy`` says why).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from connect_offsets.models.java_regex import JavaPattern, compile_java

__all__ = [
    "DEFAULT_EXCLUDE",
    "DEFAULT_GROUPS_EXCLUDE",
    "DEFAULT_POLICY",
    "IDENTITY_POLICY",
    "ReplicationPolicy",
    "mirrored_group_filter",
    "mirrored_topic_filter",
    "replication_policy",
]

DEFAULT_FILTER = "org.apache.kafka.connect.mirror.DefaultTopicFilter"
DEFAULT_POLICY = "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"
IDENTITY_POLICY = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"
#: DefaultTopicFilter.TOPICS_EXCLUDE_DEFAULT (Kafka 3.x/4.x).
DEFAULT_EXCLUDE = r"mm2.*\.internal, .*\.replica, __.*"
#: DefaultGroupFilter.GROUPS_EXCLUDE_DEFAULT: sink connectors' groups (``connect-<name>``) are not
#: checkpointed unless the checkpoint connector's ``groups.exclude`` says otherwise.
DEFAULT_GROUPS_EXCLUDE = "console-consumer-.*, connect-.*, __.*"
#: Added to every checkpoint connector's ``groups.exclude``: a group id read from the source cluster
#: goes into the task's config (``task.assigned.groups``), which the Connect workers resolve like a
#: connector's. A source cluster a tenant controls could name a group ``${file:/…:sasl.jaas.config}``
#: and have the workers read their own files; no real group id needs ``${``.
REFERENCE_GROUPS_EXCLUDE = r".*\$\{.*"


def exclude_reference_groups(exclude: str) -> str:
    """A checkpoint connector's ``groups.exclude`` with ``REFERENCE_GROUPS_EXCLUDE`` first, once.

    First: MirrorMaker 2 joins the list with ``|`` into one Java pattern, and a tenant's entry can
    change what follows it (a trailing ``\\``, ``\\Q`` quoting the rest, ``(?x)`` and ``#``),
    never what comes before."""
    patterns = [p.strip() for p in exclude.split(",") if p.strip() and p.strip() != REFERENCE_GROUPS_EXCLUDE]
    return ", ".join([REFERENCE_GROUPS_EXCLUDE, *patterns])


DEFAULT_GROUP_FILTER = "org.apache.kafka.connect.mirror.DefaultGroupFilter"
#: ConfigDef's LIST type splits on commas with surrounding whitespace.
_LIST_SPLIT = re.compile(r"\s*,\s*")


# --- what the replication policy calls topics ----------------------------------------------------

#: Remote topics nest once per hop; a name is never taken apart more often than this.
MAX_HOPS = 64


@dataclass(frozen=True)
class ReplicationPolicy:
    """``DefaultReplicationPolicy`` or ``IdentityReplicationPolicy`` as configured on a mirror."""

    identity: bool
    separator: str
    internal_separator: str  # replication.policy.internal.topic.separator.enabled=false: "."
    heartbeats_topic: str = "heartbeats"
    #: Identity: what ``topicSource`` answers for any topic but heartbeats (``source.cluster.alias``).
    source_alias: str | None = None

    def _heartbeat(self, topic: str) -> bool:
        return topic.endswith(self.heartbeats_topic)

    def format_remote(self, source_alias: str, topic: str) -> str:
        """``formatRemoteTopic``: ``<alias><separator><topic>``; identity keeps the name."""
        if self.identity and not self._heartbeat(topic):
            return topic
        return f"{source_alias}{self.separator}{topic}"

    def topic_source(self, topic: str) -> str | None:
        """``topicSource``: the alias before the first separator (None: not a remote topic)."""
        if self.identity and not self._heartbeat(topic):
            return self.source_alias
        return _topic_source(topic, self.separator)

    def upstream_topic(self, topic: str) -> str | None:
        """``upstreamTopic``: the name one hop up (identity: the same name)."""
        if self.identity and not self._heartbeat(topic):
            return topic
        source = _topic_source(topic, self.separator)
        return None if source is None else topic[len(source) + len(self.separator) :]

    def original_topic(self, topic: str) -> str:
        """``originalTopic``: ``upstreamTopic`` until it is no remote topic (``a.b.t`` -> ``t``)."""
        current = topic
        for _ in range(MAX_HOPS):
            upstream = self.upstream_topic(current)
            if upstream is None or upstream == current:
                return current
            current = upstream
        return current

    def checkpoint_topic(self, topic: str, source_alias: str, target_alias: str) -> str:
        """``MirrorCheckpointTask.renameTopicPartition``: what a checkpoint of ``source_alias`` ->
        ``target_alias`` calls the source cluster's ``topic``: a topic that came from the target
        goes back to its original name (every hop stripped), any other gets the source's alias."""
        if self.topic_source(topic) == target_alias:
            return self.original_topic(topic)
        return self.format_remote(source_alias, topic)

    def offset_syncs_topic(self, alias: str) -> str:
        """``offsetSyncsTopic``: ``mm2-offset-syncs.<alias>.internal`` with the internal separator."""
        return f"mm2-offset-syncs{self.internal_separator}{alias}{self.internal_separator}internal"

    def checkpoints_topic(self, alias: str) -> str:
        """``checkpointsTopic``: ``<alias>.checkpoints.internal`` with the internal separator."""
        return f"{alias}{self.internal_separator}checkpoints{self.internal_separator}internal"


def replication_policy(config: Mapping[str, str], where: str) -> ReplicationPolicy | str:
    """The replication policy ``config`` (a mirror connector's) configures, or why it cannot be known:
    a ``replication.policy.class`` other than MirrorMaker 2's two names its topics in code, and an
    empty ``replication.policy.separator`` is refused rather than taken for the default ``.``."""
    policy = config.get("replication.policy.class", DEFAULT_POLICY).strip()
    if policy not in (DEFAULT_POLICY, IDENTITY_POLICY):
        return (
            f"{where}: replication.policy.class {policy!r} is not {DEFAULT_POLICY} or {IDENTITY_POLICY}; the "
            "checkpoints topic and the remote topic names a custom policy chooses cannot be known from outside"
        )
    separator = config.get("replication.policy.separator", ".")
    if separator == "":
        # MirrorMaker 2 keeps an empty separator (DefaultReplicationPolicy.configure takes the
        # value as given): remote topics are <alias><topic>, the offset-syncs topic
        # mm2-offset-syncs<alias>internal, and topicSource splits a name into characters. Taking
        # "." for it would name other topics (a reset could clear another mirror's offset syncs).
        return (
            f"{where}: replication.policy.separator is empty; the remote topic names and internal topics "
            "MirrorMaker 2 derives from an empty separator are not restated here (set a separator, or leave "
            "it unset for the default '.')"
        )
    enabled = config.get("replication.policy.internal.topic.separator.enabled", "true").strip().lower() != "false"
    return ReplicationPolicy(
        identity=policy == IDENTITY_POLICY,
        separator=separator,
        internal_separator=separator if enabled else ".",
        source_alias=config.get("source.cluster.alias") or None,
    )


# --- which topics MirrorSourceConnector replicates ----------------------------------------------


def _java_list(value: str) -> list[str]:
    trimmed = value.strip()
    return [] if not trimmed else _LIST_SPLIT.split(trimmed)


def _compile(patterns: list[str], key: str) -> JavaPattern | None:
    """MirrorUtils.compilePatternList: the list joined with ``|``; an empty list matches nothing.

    Compiled for RE2 (linear time): the patterns are the tenant's. A pattern RE2 refuses raises
    ``PatternRefused`` (a ValueError naming ``key``), as an invalid pattern does.
    """
    if not patterns:
        return None
    return compile_java("|".join(patterns), key)


def _topic_source(topic: str, separator: str) -> str | None:
    """DefaultReplicationPolicy.topicSource: Java's split drops trailing empty strings."""
    parts = topic.split(separator)
    while parts and parts[-1] == "":
        parts.pop()
    return parts[0] if len(parts) >= 2 else None


def mirrored_topic_filter(config: Mapping[str, str]) -> Callable[[str], bool] | None:
    """The topics a MirrorSourceConnector with this config replicates, or None when it cannot be known.

    ``MirrorSourceConnector.shouldReplicateTopic``: (the topic filter accepts it, or it is a
    heartbeats topic and heartbeat replication is on) and it is not internal and not a cycle (a
    topic that came from the target cluster). A custom ``topic.filter.class`` makes the set
    unknowable from outside: None; so does an empty ``replication.policy.separator``.
    """
    if config.get("topic.filter.class", DEFAULT_FILTER) != DEFAULT_FILTER:
        return None
    include = _compile(_java_list(config.get("topics", ".*")), "topics")
    exclude_raw = config.get("topics.exclude", config.get("topics.blacklist", DEFAULT_EXCLUDE))
    exclude = _compile(_java_list(exclude_raw), "topics.exclude")
    policy = config.get("replication.policy.class", DEFAULT_POLICY)
    separator = config.get("replication.policy.separator", ".")
    if separator == "":  # see replication_policy: not restated, so unknowable from outside
        return None
    internal_separator = (
        separator if config.get("replication.policy.internal.topic.separator.enabled", "true") != "false" else "."
    )
    target = config.get("target.cluster.alias", "")
    heartbeats = config.get("heartbeats.replication.enabled", "true").strip().lower() != "false"

    def source_of(topic: str) -> str | None:
        if policy == IDENTITY_POLICY and not topic.endswith("heartbeats"):  # looksLikeHeartbeat
            return None
        return _topic_source(topic, separator)

    def upstream(topic: str) -> str | None:
        source = source_of(topic)
        return None if source is None else topic[len(source) + len(separator) :]

    def _original(topic: str) -> str:
        current = topic
        for _ in range(64):  # remote topics nest once per hop; bound it anyway
            parent = _topic_source(current, separator)
            if parent is None:
                return current
            current = current[len(parent) + len(separator) :]
        return current

    def is_cycle(topic: str) -> bool:
        current = topic
        for _ in range(64):
            source = source_of(current)
            if source is None:
                return False
            if source == target:
                return True
            parent = upstream(current)
            if parent is None or parent == current:
                return False
            current = parent
        return False

    def is_internal(topic: str) -> bool:
        return (
            topic.startswith(("__", "."))
            or topic.endswith(("-internal", ".internal", f"{internal_separator}internal"))
            or (topic.startswith("mm2") and topic.endswith(".internal"))
        )

    def accepts(topic: str) -> bool:
        filtered = (
            include is not None and include.full_match(topic) and (exclude is None or not exclude.full_match(topic))
        )
        heartbeat = heartbeats and _original(topic) == "heartbeats"
        if policy not in (DEFAULT_POLICY, IDENTITY_POLICY):
            return (filtered or heartbeat) and not is_internal(topic)
        return (filtered or heartbeat) and not is_internal(topic) and not is_cycle(topic)

    return accepts


# --- which consumer groups MirrorCheckpointConnector checkpoints ---------------------------------


def mirrored_group_filter(config: Mapping[str, str]) -> Callable[[str], bool] | None:
    """The groups a MirrorCheckpointConnector with this config checkpoints (``DefaultGroupFilter``:
    matched by ``groups``, default ``.*``, and not by ``groups.exclude``), or None for a custom
    ``group.filter.class``."""
    if config.get("group.filter.class", DEFAULT_GROUP_FILTER) != DEFAULT_GROUP_FILTER:
        return None
    include = _compile(_java_list(config.get("groups", ".*")), "groups")
    exclude_raw = config.get("groups.exclude", config.get("groups.blacklist", DEFAULT_GROUPS_EXCLUDE))
    exclude = _compile(_java_list(exclude_raw), "groups.exclude")

    def accepts(group: str) -> bool:
        return include is not None and include.full_match(group) and (exclude is None or not exclude.full_match(group))

    return accepts
