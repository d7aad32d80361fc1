"""Typed validation of an offsets document for one connector family; pure.

``validate_for_connector`` is the one entry point (the planner, restore and the kubectl plugin
all call it): sink connectors (Kafka topic-partitions and offsets, topics against the
connector's ``topics``/``topics.regex``), FileStreamSource, and the three MirrorMaker 2
connectors. Each problem names the entry and field and what was expected.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from connect_offsets import vocabulary
from connect_offsets.models.java_regex import JavaPattern, PatternRefused, compile_java
from connect_offsets.offsets.document import OffsetEntry, OffsetsDocument
from connect_offsets.offsets.problems import (
    OffsetsProblem,
    OffsetsValidationError,
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


def validate_sink(doc: OffsetsDocument, *, topics: list[str] | None, topics_regex: str | None) -> None:
    """Sink connectors: ``{"kafka_topic": str, "kafka_partition": int}`` -> ``{"kafka_offset": int}``.

    When ``topics`` or ``topics_regex`` is given, each topic must be one the connector consumes
    (Connect does not check this; an offset for a foreign topic is silently stored in the group).
    """
    problems = ProblemList()
    pattern: JavaPattern | None = None
    if topics_regex:
        try:
            pattern = compile_java(topics_regex, "config[topics.regex]")
        except PatternRefused as error:
            # Checked in linear time or not at all: a pattern RE2 refuses refuses the document,
            # since whether its topics are consumed cannot be told the way Connect tells it.
            problems.fail(error.field, error.detail)
    check_topics = bool(topics) or pattern is not None
    for index, entry in enumerate(doc.entries):
        path = f"offsets[{index}]"
        ppath = f"{path}.partition"
        part = entry.partition
        if check_keys(part, ("kafka_topic", "kafka_partition"), ppath, "a sink connector partition", problems):
            topic = part["kafka_topic"]
            tpath = child_path(ppath, "kafka_topic")
            if not isinstance(topic, str) or not topic:
                problems.add(tpath, f"expected a non-empty string, got {describe_value(topic)}")
            elif check_topics:
                allowed = topic in (topics or []) or (pattern is not None and pattern.full_match(topic))
                if not allowed:
                    consumed = []
                    if topics:
                        consumed.append(f"topics {quote_all(topics)}")
                    if topics_regex:
                        consumed.append(f"topics.regex {json.dumps(topics_regex, ensure_ascii=False)}")
                    problems.add(
                        tpath,
                        f"topic {json.dumps(topic, ensure_ascii=False)} is not consumed by this connector; "
                        f"expected one of its {' or '.join(consumed)}",
                    )
            value = part["kafka_partition"]
            hint = " (write the number without quotes)" if isinstance(value, str) else ""
            check_non_negative_int(value, child_path(ppath, "kafka_partition"), problems, hint)
        check_single_offset(entry, path, "kafka_offset", "a sink connector", problems)
    problems.raise_if_any()


def validate_file_stream_source(doc: OffsetsDocument, *, file: str | None) -> None:
    """FileStreamSourceConnector: ``{"filename": <file>}`` -> ``{"position": int}``."""
    if not file:
        raise OffsetsValidationError(
            [
                OffsetsProblem(
                    "$",
                    "offsets cannot be altered: the connector has no 'file' setting, so it reads stdin "
                    "and does not track offsets",
                )
            ]
        )
    problems = ProblemList()
    for index, entry in enumerate(doc.entries):
        path = f"offsets[{index}]"
        ppath = f"{path}.partition"
        if check_keys(entry.partition, ("filename",), ppath, "a FileStreamSource partition", problems):
            name = entry.partition["filename"]
            fpath = child_path(ppath, "filename")
            if check_string(name, fpath, problems) and name != file:
                problems.add(
                    fpath,
                    f"expected the connector's file {json.dumps(file, ensure_ascii=False)}, got {describe_value(name)}",
                )
        check_single_offset(entry, path, "position", "a FileStreamSource connector", problems)
    problems.raise_if_any()


def translate_replay_from(doc: OffsetsDocument) -> OffsetsDocument:
    """MirrorSourceConnector input in "replay from" terms: ``{"replayFrom": N}`` -> ``{"offset": N - 1}``.

    The task resumes at the stored offset + 1, so "the next record replicated is upstream offset N"
    is stored as N - 1, and N = 0 as no offset at all (null: the task starts from
    ``auto.offset.reset``, earliest by default). Entries in stored terms pass unchanged; a bad
    ``replayFrom`` is reported with its path and nothing is translated.
    """
    problems = ProblemList()
    entries: list[OffsetEntry] = []
    for index, entry in enumerate(doc.entries):
        offset = entry.offset
        if offset is None or "replayFrom" not in offset:
            entries.append(entry)
            continue
        value = offset["replayFrom"]
        path = f"offsets[{index}].offset"
        if set(offset) != {"replayFrom"}:
            problems.add(path, "use either replayFrom or offset, not both")
        elif not isinstance(value, int) or not is_non_negative_int(value):
            problems.add(f"{path}.replayFrom", f"expected an integer >= 0, got {describe_value(value)}")
        else:
            start = value
            entries.append(OffsetEntry(entry.partition, None if start == 0 else {"offset": start - 1}))
    problems.raise_if_any()
    return OffsetsDocument(tuple(entries))


def validate_mirror_source(doc: OffsetsDocument, *, source_alias: str) -> None:
    """MirrorSourceConnector: ``{"cluster", "partition", "topic"}`` -> ``{"offset": int}``.

    The task seeks to ``offset + 1``: to start at N, set N - 1.
    """
    problems = ProblemList()
    for index, entry in enumerate(doc.entries):
        path = f"offsets[{index}]"
        ppath = f"{path}.partition"
        part = entry.partition
        if check_keys(part, ("cluster", "partition", "topic"), ppath, "a MirrorSource partition", problems):
            cluster = part["cluster"]
            cpath = child_path(ppath, "cluster")
            if check_string(cluster, cpath, problems) and cluster != source_alias:
                problems.add(
                    cpath,
                    f"expected the connector's source.cluster.alias "
                    f"{json.dumps(source_alias, ensure_ascii=False)}, got {describe_value(cluster)}",
                )
            check_string(part["topic"], child_path(ppath, "topic"), problems, non_empty=True)
            check_non_negative_int(part["partition"], child_path(ppath, "partition"), problems)
        check_single_offset(entry, path, "offset", "a MirrorSource connector", problems)
    problems.raise_if_any()


def validate_mirror_checkpoint(doc: OffsetsDocument) -> None:
    """MirrorCheckpointConnector: ``{"group", "topic", "partition"}`` -> ``{"offset": 0}`` (unused)."""
    problems = ProblemList()
    for index, entry in enumerate(doc.entries):
        path = f"offsets[{index}]"
        ppath = f"{path}.partition"
        part = entry.partition
        if check_keys(part, ("group", "topic", "partition"), ppath, "a MirrorCheckpoint partition", problems):
            check_string(part["group"], child_path(ppath, "group"), problems)
            check_string(part["topic"], child_path(ppath, "topic"), problems)
            check_non_negative_int(part["partition"], child_path(ppath, "partition"), problems)
        check_single_offset(
            entry,
            path,
            "offset",
            "a MirrorCheckpoint connector",
            problems,
            zero_only="checkpoint tasks don't use offsets; the only accepted value is 0",
        )
    problems.raise_if_any()


def validate_mirror_heartbeat(doc: OffsetsDocument) -> None:
    """MirrorHeartbeatConnector: ``{"sourceClusterAlias", "targetClusterAlias"}`` -> ``{"offset": 0}``."""
    problems = ProblemList()
    for index, entry in enumerate(doc.entries):
        path = f"offsets[{index}]"
        ppath = f"{path}.partition"
        part = entry.partition
        keys = ("sourceClusterAlias", "targetClusterAlias")
        if check_keys(part, keys, ppath, "a MirrorHeartbeat partition", problems):
            for key in keys:
                check_string(part[key], child_path(ppath, key), problems)
        check_single_offset(
            entry,
            path,
            "offset",
            "a MirrorHeartbeat connector",
            problems,
            zero_only="heartbeat tasks don't use offsets; the only accepted value is 0",
        )
    problems.raise_if_any()


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


def validate_for_connector(
    doc: OffsetsDocument, connector_class: str, config: Mapping[str, str], *, is_sink: bool | None = None
) -> None:
    """Run the family-specific checks for ``connector_class`` with its ``config``.

    ``is_sink``: the connector type when known (Connect's ``type`` field); when None the class
    name decides (it ends with ``SinkConnector`` or ``Sink``). Unknown source connectors get the
    generic checks only, which ``parse_offsets_document`` has already done.
    """
    cls = connector_class.strip()
    if _matches_class(cls, FILE_STREAM_SOURCE_CLASS):
        validate_file_stream_source(doc, file=config.get("file") or None)
        return
    simple = cls.rsplit(".", 1)[-1]
    sink = is_sink if is_sink is not None else simple.endswith(("SinkConnector", "Sink"))
    if sink:
        regex = (config.get("topics.regex") or "").strip() or None
        validate_sink(doc, topics=_split_topics(config.get("topics")), topics_regex=regex)
    elif _matches_class(cls, MIRROR_SOURCE_CLASS):
        alias = (config.get("source.cluster.alias") or "").strip() or MIRROR_SOURCE_ALIAS_DEFAULT
        validate_mirror_source(doc, source_alias=alias)
    elif _matches_class(cls, MIRROR_CHECKPOINT_CLASS):
        validate_mirror_checkpoint(doc)
    elif _matches_class(cls, MIRROR_HEARTBEAT_CLASS):
        validate_mirror_heartbeat(doc)


# --------------------------------------------------------------------------- streamed validation


# Why a second path: ``parse_offsets_document`` builds the whole tree, which for a 1,000,000-partition
# document (about 100 MB of JSON) is over a gigabyte of dicts. An alter or restore only needs "is it
# valid?" and the compact text to send, so valid documents are checked entry by entry instead, in
# batches that the ordinary validators see as small documents, and only digests are kept. Any
# problem, or any shape the scanner does not expect, re-runs the whole-document path: it produces the
# exact messages (paths, first index of a duplicate) and decides in the rare cases the fast path
# cannot (a digest match, an escaped surrogate). Valid input gives the same text either way.

#: Entries per batch handed to the family validators; bounds what is held besides the output text.


def check_single_offset(
    entry: OffsetEntry, path: str, key: str, what: str, problems: ProblemList, *, zero_only: str | None = None
) -> None:
    """Offset null, or exactly ``{key: int >= 0}`` (or ``{key: 0}`` when ``zero_only`` explains why)."""
    if entry.offset is None:
        return
    opath = f"{path}.offset"
    if not check_keys(entry.offset, (key,), opath, f"the offset of {what} (or null)", problems):
        return
    value = entry.offset[key]
    if zero_only is not None:
        if not (is_non_negative_int(value) and value == 0):
            problems.add(child_path(opath, key), f"expected 0, got {describe_value(value)}; {zero_only}")
        return
    check_non_negative_int(value, child_path(opath, key), problems)
