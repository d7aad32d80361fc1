"""Typed validation of an offsets document for one connector family; pure.

Each family's rules (``rules_for``) check one entry's partition and offset: sink connectors (Kafka
topic-partitions and offsets, topics against the connector's ``topics``/``topics.regex``),
FileStreamSource, and the three MirrorMaker 2 connectors. ``parse_for_connector`` applies them
while the document is parsed, so one pass reports every problem, generic and typed, in the
document's order (the planner, restore and the kubectl plugin use it); ``validate_for_connector``
applies them to a document parsed before. Each problem names the entry and field and what was
expected.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from connect_offsets import vocabulary
from connect_offsets.models.java_regex import JavaPattern, PatternRefused, compile_java
from connect_offsets.offsets.document import EntryRules, OffsetEntry, OffsetsDocument, parse_offsets_document
from connect_offsets.offsets.problems import (
    Primitive,
    ProblemList,
    check_keys,
    check_non_negative_int,
    check_string,
    child_path,
    describe_value,
    is_non_negative_int,
    quote_all,
)

FILE_STREAM_SOURCE_CLASS = "org.apache.kafka.connect.file.FileStreamSourceConnector"
FILE_STREAM_SINK_CLASS = "org.apache.kafka.connect.file.FileStreamSinkConnector"
MIRROR_SOURCE_CLASS = vocabulary.MIRROR_CLASSES["MirrorSourceConnector"]
MIRROR_CHECKPOINT_CLASS = vocabulary.MIRROR_CLASSES["MirrorCheckpointConnector"]
MIRROR_HEARTBEAT_CLASS = vocabulary.MIRROR_CLASSES["MirrorHeartbeatConnector"]

#: MirrorConnectorConfig.SOURCE_CLUSTER_ALIAS_DEFAULT: used when ``source.cluster.alias`` is unset.
MIRROR_SOURCE_ALIAS_DEFAULT = "source"


def check_single_offset(
    offset: dict[str, Primitive] | None,
    path: str,
    key: str,
    what: str,
    problems: ProblemList,
    *,
    zero_only: str | None = None,
) -> None:
    """Offset null, or exactly ``{key: int >= 0}`` (or ``{key: 0}`` when ``zero_only`` explains why)."""
    if offset is None:
        return
    if not check_keys(offset, (key,), path, f"the offset of {what} (or null)", problems):
        return
    value = offset[key]
    if zero_only is not None:
        if not (is_non_negative_int(value) and value == 0):
            problems.add(child_path(path, key), f"expected 0, got {describe_value(value)}; {zero_only}")
        return
    check_non_negative_int(value, child_path(path, key), problems)


# --------------------------------------------------------------------------- the families' rules


class GenericRules:
    """Connectors of no known family: the generic checks of ``document`` only."""

    def check_partition(self, partition: dict[str, Primitive], path: str, problems: ProblemList) -> None:
        return None

    def check_offset(
        self, offset: dict[str, Primitive] | None, path: str, problems: ProblemList
    ) -> dict[str, Primitive] | None:
        return offset


@dataclass(frozen=True)
class _SingleOffset(GenericRules):
    """Families whose offset is null or exactly ``{key: int >= 0}`` (or ``{key: 0}`` with ``zero_only``)."""

    offset_key: str
    what: str
    zero_only: str | None = None

    def check_offset(
        self, offset: dict[str, Primitive] | None, path: str, problems: ProblemList
    ) -> dict[str, Primitive] | None:
        check_single_offset(offset, path, self.offset_key, self.what, problems, zero_only=self.zero_only)
        return offset


@dataclass(frozen=True)
class SinkRules(_SingleOffset):
    """Sink connectors: ``{"kafka_topic": str, "kafka_partition": int}`` -> ``{"kafka_offset": int}``.

    When ``topics`` or ``pattern`` is given, each topic must be one the connector consumes
    (Connect does not check this; an offset for a foreign topic is silently stored in the group).
    """

    offset_key: str = "kafka_offset"
    what: str = "a sink connector"
    topics: tuple[str, ...] = ()
    topics_regex: str | None = None
    pattern: JavaPattern | None = None

    def check_partition(self, partition: dict[str, Primitive], path: str, problems: ProblemList) -> None:
        if not check_keys(partition, ("kafka_topic", "kafka_partition"), path, "a sink connector partition", problems):
            return
        topic = partition["kafka_topic"]
        tpath = child_path(path, "kafka_topic")
        if not isinstance(topic, str) or not topic:
            problems.add(tpath, f"expected a non-empty string, got {describe_value(topic)}")
        elif self.topics or self.pattern is not None:
            allowed = topic in self.topics or (self.pattern is not None and self.pattern.full_match(topic))
            if not allowed:
                consumed = []
                if self.topics:
                    consumed.append(f"topics {quote_all(self.topics)}")
                if self.topics_regex:
                    consumed.append(f"topics.regex {json.dumps(self.topics_regex, ensure_ascii=False)}")
                problems.add(
                    tpath,
                    f"topic {json.dumps(topic, ensure_ascii=False)} is not consumed by this connector; "
                    f"expected one of its {' or '.join(consumed)}",
                )
        value = partition["kafka_partition"]
        hint = " (write the number without quotes)" if isinstance(value, str) else ""
        check_non_negative_int(value, child_path(path, "kafka_partition"), problems, hint)


def sink_rules(topics: list[str] | None, topics_regex: str | None, problems: ProblemList) -> SinkRules:
    """The sink rules; a ``topics_regex`` that cannot be checked in linear time is a problem of its
    own (whether a topic is consumed cannot be told the way Connect tells it), and topics are then
    not checked against it."""
    pattern: JavaPattern | None = None
    if topics_regex:
        try:
            pattern = compile_java(topics_regex, "config[topics.regex]")
        except PatternRefused as error:
            problems.add(error.field, error.detail)
            return SinkRules(topics=tuple(topics or ()))
    return SinkRules(topics=tuple(topics or ()), topics_regex=topics_regex, pattern=pattern)


@dataclass(frozen=True)
class FileStreamSourceRules(_SingleOffset):
    """FileStreamSourceConnector: ``{"filename": <file>}`` -> ``{"position": int}``."""

    offset_key: str = "position"
    what: str = "a FileStreamSource connector"
    file: str = ""

    def check_partition(self, partition: dict[str, Primitive], path: str, problems: ProblemList) -> None:
        if not check_keys(partition, ("filename",), path, "a FileStreamSource partition", problems):
            return
        name = partition["filename"]
        fpath = child_path(path, "filename")
        if check_string(name, fpath, problems) and name != self.file:
            expected = json.dumps(self.file, ensure_ascii=False)
            problems.add(fpath, f"expected the connector's file {expected}, got {describe_value(name)}")


#: A FileStreamSource without ``file`` reads stdin: no offsets to alter, whatever the document says.
NO_FILE_PROBLEM = (
    "offsets cannot be altered: the connector has no 'file' setting, so it reads stdin and does not track offsets"
)


@dataclass(frozen=True)
class MirrorSourceRules(_SingleOffset):
    """MirrorSourceConnector: ``{"cluster", "partition", "topic"}`` -> ``{"offset": int}``.

    The task seeks to ``offset + 1``: to start at N, set N - 1.
    """

    offset_key: str = "offset"
    what: str = "a MirrorSource connector"
    source_alias: str = MIRROR_SOURCE_ALIAS_DEFAULT

    def check_partition(self, partition: dict[str, Primitive], path: str, problems: ProblemList) -> None:
        if not check_keys(partition, ("cluster", "partition", "topic"), path, "a MirrorSource partition", problems):
            return
        cluster = partition["cluster"]
        cpath = child_path(path, "cluster")
        if check_string(cluster, cpath, problems) and cluster != self.source_alias:
            problems.add(
                cpath,
                f"expected the connector's source.cluster.alias "
                f"{json.dumps(self.source_alias, ensure_ascii=False)}, got {describe_value(cluster)}",
            )
        check_string(partition["topic"], child_path(path, "topic"), problems, non_empty=True)
        check_non_negative_int(partition["partition"], child_path(path, "partition"), problems)


@dataclass(frozen=True)
class MirrorCheckpointRules(_SingleOffset):
    """MirrorCheckpointConnector: ``{"group", "topic", "partition"}`` -> ``{"offset": 0}`` (unused)."""

    offset_key: str = "offset"
    what: str = "a MirrorCheckpoint connector"
    zero_only: str | None = "checkpoint tasks don't use offsets; the only accepted value is 0"

    def check_partition(self, partition: dict[str, Primitive], path: str, problems: ProblemList) -> None:
        if check_keys(partition, ("group", "topic", "partition"), path, "a MirrorCheckpoint partition", problems):
            check_string(partition["group"], child_path(path, "group"), problems)
            check_string(partition["topic"], child_path(path, "topic"), problems)
            check_non_negative_int(partition["partition"], child_path(path, "partition"), problems)


@dataclass(frozen=True)
class MirrorHeartbeatRules(_SingleOffset):
    """MirrorHeartbeatConnector: ``{"sourceClusterAlias", "targetClusterAlias"}`` -> ``{"offset": 0}``."""

    offset_key: str = "offset"
    what: str = "a MirrorHeartbeat connector"
    zero_only: str | None = "heartbeat tasks don't use offsets; the only accepted value is 0"

    def check_partition(self, partition: dict[str, Primitive], path: str, problems: ProblemList) -> None:
        keys = ("sourceClusterAlias", "targetClusterAlias")
        if check_keys(partition, keys, path, "a MirrorHeartbeat partition", problems):
            for key in keys:
                check_string(partition[key], child_path(path, key), problems)


@dataclass(frozen=True)
class ReplayFromRules:
    """MirrorSourceConnector input in "replay from" terms, then ``inner``'s rules:
    ``{"replayFrom": N}`` -> ``{"offset": N - 1}``.

    The task resumes at the stored offset + 1, so "the next record replicated is upstream offset N"
    is stored as N - 1, and N = 0 as no offset at all (null: the task starts from
    ``auto.offset.reset``, earliest by default). Offsets in stored terms pass unchanged.
    """

    inner: EntryRules

    def check_partition(self, partition: dict[str, Primitive], path: str, problems: ProblemList) -> None:
        self.inner.check_partition(partition, path, problems)

    def check_offset(
        self, offset: dict[str, Primitive] | None, path: str, problems: ProblemList
    ) -> dict[str, Primitive] | None:
        if offset is None or "replayFrom" not in offset:
            return self.inner.check_offset(offset, path, problems)
        value = offset["replayFrom"]
        if set(offset) != {"replayFrom"}:
            problems.add(path, "use either replayFrom or offset, not both")
            return offset
        if not isinstance(value, int) or not is_non_negative_int(value):
            problems.add(f"{path}.replayFrom", f"expected an integer >= 0, got {describe_value(value)}")
            return offset
        return None if value == 0 else {"offset": value - 1}


def _check_document(doc: OffsetsDocument, rules: EntryRules, problems: ProblemList) -> None:
    """``rules`` over an already parsed document, every problem collected, raised at the end."""
    for index, entry in enumerate(doc.entries):
        path = f"offsets[{index}]"
        rules.check_partition(entry.partition, f"{path}.partition", problems)
        rules.check_offset(entry.offset, f"{path}.offset", problems)
    problems.raise_if_any()


def validate_sink(doc: OffsetsDocument, *, topics: list[str] | None, topics_regex: str | None) -> None:
    """Sink connectors (``SinkRules``) for a parsed document."""
    problems = ProblemList()
    _check_document(doc, sink_rules(topics, topics_regex, problems), problems)


def validate_file_stream_source(doc: OffsetsDocument, *, file: str | None) -> None:
    """FileStreamSourceConnector (``FileStreamSourceRules``) for a parsed document."""
    problems = ProblemList()
    if not file:
        problems.fail("$", NO_FILE_PROBLEM)
    _check_document(doc, FileStreamSourceRules(file=file), problems)


def translate_replay_from(doc: OffsetsDocument) -> OffsetsDocument:
    """A parsed MirrorSourceConnector document with ``replayFrom`` offsets in stored terms
    (``ReplayFromRules``); a bad ``replayFrom`` is reported with its path and nothing is translated."""
    problems = ProblemList()
    rules = ReplayFromRules(GenericRules())
    entries = [
        OffsetEntry(entry.partition, rules.check_offset(entry.offset, f"offsets[{index}].offset", problems))
        for index, entry in enumerate(doc.entries)
    ]
    problems.raise_if_any()
    return OffsetsDocument(tuple(entries))


def validate_mirror_source(doc: OffsetsDocument, *, source_alias: str) -> None:
    """MirrorSourceConnector (``MirrorSourceRules``) for a parsed document."""
    problems = ProblemList()
    _check_document(doc, MirrorSourceRules(source_alias=source_alias), problems)


def validate_mirror_checkpoint(doc: OffsetsDocument) -> None:
    """MirrorCheckpointConnector (``MirrorCheckpointRules``) for a parsed document."""
    problems = ProblemList()
    _check_document(doc, MirrorCheckpointRules(), problems)


def validate_mirror_heartbeat(doc: OffsetsDocument) -> None:
    """MirrorHeartbeatConnector (``MirrorHeartbeatRules``) for a parsed document."""
    problems = ProblemList()
    _check_document(doc, MirrorHeartbeatRules(), problems)


def _matches_class(connector_class: str, full_name: str) -> bool:
    """Connect accepts the full class name, the simple name, or the simple name without "Connector"."""
    if "." in connector_class:
        return connector_class == full_name
    simple = full_name.rsplit(".", 1)[-1]
    return connector_class in (simple, simple.removesuffix("Connector"))


def _split_topics(value: str | None) -> list[str] | None:
    if not value:
        return None
    topics = [t.strip() for t in value.split(",") if t.strip()]
    return topics or None


def rules_for(
    connector_class: str,
    config: Mapping[str, str],
    problems: ProblemList,
    *,
    is_sink: bool | None = None,
    translate_replay: bool = False,
) -> EntryRules:
    """The rules of ``connector_class`` with its ``config``. A problem that concerns the connector
    rather than an entry (a FileStreamSource reading stdin, a ``topics.regex`` that cannot be
    checked) goes into ``problems`` first; the entries are still checked as far as they can be.

    ``is_sink``: the connector type when known (Connect's ``type`` field); when None the class
    name decides (it ends with ``SinkConnector`` or ``Sink``). Unknown source connectors get the
    generic checks only. ``translate_replay``: MirrorSource ``replayFrom`` offsets are accepted and
    translated first (``ReplayFromRules``).
    """
    cls = connector_class.strip()
    rules: EntryRules = GenericRules()
    simple = cls.rsplit(".", 1)[-1]
    if _matches_class(cls, FILE_STREAM_SOURCE_CLASS):
        file = config.get("file") or ""
        if not file:
            problems.add("$", NO_FILE_PROBLEM)
        else:
            rules = FileStreamSourceRules(file=file)
    elif is_sink if is_sink is not None else simple.endswith(("SinkConnector", "Sink")):
        regex = (config.get("topics.regex") or "").strip() or None
        rules = sink_rules(_split_topics(config.get("topics")), regex, problems)
    elif _matches_class(cls, MIRROR_SOURCE_CLASS):
        alias = (config.get("source.cluster.alias") or "").strip() or MIRROR_SOURCE_ALIAS_DEFAULT
        rules = MirrorSourceRules(source_alias=alias)
    elif _matches_class(cls, MIRROR_CHECKPOINT_CLASS):
        rules = MirrorCheckpointRules()
    elif _matches_class(cls, MIRROR_HEARTBEAT_CLASS):
        rules = MirrorHeartbeatRules()
    return ReplayFromRules(rules) if translate_replay else rules


def validate_for_connector(
    doc: OffsetsDocument, connector_class: str, config: Mapping[str, str], *, is_sink: bool | None = None
) -> None:
    """The family checks of ``connector_class`` (``rules_for``) for an already parsed document."""
    problems = ProblemList()
    _check_document(doc, rules_for(connector_class, config, problems, is_sink=is_sink), problems)


def parse_for_connector(
    text: str | bytes,
    connector_class: str,
    config: Mapping[str, str],
    *,
    is_sink: bool | None = None,
    translate_replay: bool = False,
    allow_empty: bool = False,
) -> OffsetsDocument:
    """Parse ``text`` and check it for ``connector_class`` in one pass: every problem, generic
    (structure, unknown keys, nested values, duplicates) and of the family (partition keys,
    types, the connector's file/topics/alias), in the document's order, each with its path.
    With ``translate_replay``, MirrorSource ``replayFrom`` offsets come back in stored terms."""
    problems = ProblemList()  # a problem of the connector itself (stdin, a regex) is reported first
    rules = rules_for(connector_class, config, problems, is_sink=is_sink, translate_replay=translate_replay)
    return parse_offsets_document(text, allow_empty=allow_empty, rules=rules, problems=problems)
