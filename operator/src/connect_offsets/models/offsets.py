"""Offsets documents (KIP-875 shape) and their validation; pure, no I/O.

An offsets document is what ``GET /connectors/{c}/offsets`` returns and what
``PATCH /connectors/{c}/offsets`` accepts::

    {"offsets": [{"partition": {...}, "offset": {...} | null}, ...]}

Why everything is validated here, before any side effect: changing offsets
takes three steps (stop the connector, PATCH, resume). Kafka Connect only
checks the document at the PATCH, i.e. *after* the connector has already been
stopped, and it reports most mistakes as a bare 500 (see the reference,
sections 1, 3, 9 and 10). A ConfigMap that fails validation must therefore
never lead to a stopped connector or a PATCH: ``parse_offsets_document`` does
the generic checks, ``validate_for_connector`` (or one ``validate_*``
function) the connector-family checks, and only a document that passes both
may be acted on.

All checks collect every problem rather than stopping at the first, so a user
fixes a ConfigMap in one round trip. Each problem has a path such as
``offsets[3].partition.kafka_partition``, ``offsets`` or ``$`` (the document
root) and a message saying what was found and what was expected.

We are deliberately stricter than Connect in a few places: a sink partition
given as the string ``"3"`` is accepted by Connect but rejected here (the
document should say what it means), and so are unknown keys, which Connect
silently ignores.

``diff_offsets`` compares a current document (from GET) with a requested one
for dry runs, matching partitions by ``partition_key``.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn, TypeVar

from connect_offsets import vocabulary
from connect_offsets.errors import UserError
from connect_offsets.models.java_regex import JavaPattern, PatternRefused, compile_java

Primitive = str | int | float | bool | None

#: How many problems ``str(OffsetsValidationError)`` lists before "... and N more".
MAX_LISTED_PROBLEMS = 10

#: Longest rendering of a found value inside a message; ConfigMaps can hold large values.
_MAX_SHOWN_VALUE = 80

FILE_STREAM_SOURCE_CLASS = "org.apache.kafka.connect.file.FileStreamSourceConnector"
FILE_STREAM_SINK_CLASS = "org.apache.kafka.connect.file.FileStreamSinkConnector"
MIRROR_SOURCE_CLASS = vocabulary.MIRROR_CLASSES["MirrorSourceConnector"]
MIRROR_CHECKPOINT_CLASS = vocabulary.MIRROR_CLASSES["MirrorCheckpointConnector"]
MIRROR_HEARTBEAT_CLASS = vocabulary.MIRROR_CLASSES["MirrorHeartbeatConnector"]

#: MirrorConnectorConfig.SOURCE_CLUSTER_ALIAS_DEFAULT: used when ``source.cluster.alias`` is unset.
MIRROR_SOURCE_ALIAS_DEFAULT = "source"

_EMPTY_OFFSETS_MESSAGE = (
    "expected at least one entry, got an empty list "
    '(Connect rejects it: "Partitions / offsets need to be provided for an alter offsets request")'
)


# --------------------------------------------------------------------------- errors


@dataclass(frozen=True)
class OffsetsProblem:
    """One problem in an offsets document: where (``path``) and what (``message``)."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class OffsetsValidationError(UserError, ValueError):
    """An offsets document is invalid; ``problems`` lists every problem found."""

    def __init__(self, problems: Iterable[OffsetsProblem]) -> None:
        self.problems: list[OffsetsProblem] = list(problems)
        super().__init__(self._render())

    def _render(self) -> str:
        if not self.problems:
            return "invalid offsets document"
        lines = [str(p) for p in self.problems[:MAX_LISTED_PROBLEMS]]
        hidden = len(self.problems) - MAX_LISTED_PROBLEMS
        if hidden > 0:
            lines.append(f"... and {hidden} more")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self._render()


class _Problems:
    """Accumulates problems; raises them all at once."""

    def __init__(self) -> None:
        self.items: list[OffsetsProblem] = []

    def add(self, path: str, message: str) -> None:
        self.items.append(OffsetsProblem(path, message))

    def raise_if_any(self) -> None:
        if self.items:
            raise OffsetsValidationError(self.items)

    def fail(self, path: str, message: str) -> NoReturn:
        """Add a problem after which nothing more can be checked, and raise everything so far."""
        self.add(path, message)
        raise OffsetsValidationError(self.items)


# --------------------------------------------------------------------------- documents


@dataclass(frozen=True, slots=True)  # slots: a million entries are ~100 MB smaller
class OffsetEntry:
    """One partition and its offset; ``offset`` None means "remove this partition's offset"."""

    partition: dict[str, Primitive]
    offset: dict[str, Primitive] | None

    def to_json_obj(self) -> dict[str, Any]:
        return {
            "partition": dict(self.partition),
            "offset": None if self.offset is None else dict(self.offset),
        }


def partition_key(entry: OffsetEntry | Mapping[str, Primitive]) -> str:
    """Canonical JSON of a partition (sorted keys, compact), to match partitions across documents.

    Types matter, as they do for Connect: ``1``, ``1.0`` and ``true`` are different partitions.
    """
    partition = entry.partition if isinstance(entry, OffsetEntry) else entry
    return json.dumps(partition, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _canonical(value: Mapping[str, Primitive] | None) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


_COMPACT_HEAD = '{"offsets":['
_COMPACT_TAIL = "]}"
_encode_compact = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def _compact_entries(entries: Iterable[OffsetEntry]) -> str:
    """The entries as compact JSON, comma-separated: the inside of ``{"offsets":[...]}``."""
    return ",".join(_encode_compact({"partition": e.partition, "offset": e.offset}) for e in entries)


@dataclass(frozen=True)
class OffsetsDocument:
    """A validated offsets document; entries keep their order, dicts keep their key order."""

    entries: tuple[OffsetEntry, ...]

    def __len__(self) -> int:
        return len(self.entries)

    def to_json_obj(self) -> dict[str, Any]:
        return {"offsets": [e.to_json_obj() for e in self.entries]}

    def to_pretty_json(self) -> str:
        return json.dumps(self.to_json_obj(), indent=2, ensure_ascii=False)

    def to_compact_json(self) -> str:
        """The same text as ``json.dumps(self.to_json_obj(), separators=(",", ":"))``, entry by entry:
        no second tree of a million dicts at once."""
        return _COMPACT_HEAD + _compact_entries(self.entries) + _COMPACT_TAIL

    @staticmethod
    def partition_key(entry: OffsetEntry) -> str:
        """See the module-level ``partition_key``."""
        return partition_key(entry)


# --------------------------------------------------------------------------- message helpers


def _type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, dict):
        return "object"
    return f"Python {type(value).__name__}"


def _describe(value: object) -> str:
    """``"abc" (string)``, ``3 (integer)``, ``null``, ``{"a": 1} (object)``: what was found."""
    if value is None:
        return "null"
    try:
        shown = json.dumps(value, ensure_ascii=False, allow_nan=True)
    except (TypeError, ValueError, RecursionError):
        shown = repr(value)
    if len(shown) > _MAX_SHOWN_VALUE:
        shown = shown[: _MAX_SHOWN_VALUE - 3] + "..."
    return f"{shown} ({_type_name(value)})"


def _quote_all(names: Iterable[str]) -> str:
    return ", ".join(json.dumps(n, ensure_ascii=False) for n in names)


def _child(path: str, key: str) -> str:
    """``offsets[0].partition`` + ``kafka_topic``; keys that are not identifiers get brackets."""
    if key.isidentifier():
        return f"{path}.{key}"
    return f"{path}[{json.dumps(key, ensure_ascii=False)}]"


def _is_primitive(value: object) -> bool:
    if value is None or isinstance(value, str | bool | int):
        return True
    return isinstance(value, float) and math.isfinite(value)


def _is_non_negative_int(value: object) -> bool:
    # bool is a subclass of int; true/false are not offsets.
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


# --------------------------------------------------------------------------- generic parsing


class _BadConstant(ValueError):
    pass


def _reject_constant(name: str) -> Any:
    raise _BadConstant(f"{name} is not allowed (not valid JSON, and Connect cannot store it)")


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _BadConstant(f"the number {text} is out of range (it would become {value})")
    return value


class _DuplicateKeys:
    """``object_pairs_hook`` that keeps order and records keys given twice in one object."""

    def __init__(self) -> None:
        self.duplicates: list[str] = []

    def __call__(self, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for key, value in pairs:
            if key in result and key not in self.duplicates:
                self.duplicates.append(key)
            result[key] = value
        return result


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _has_unpaired_surrogate(obj: object) -> bool:
    try:
        json.dumps(obj, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def document_text(text: str | bytes) -> str:
    """A document's text: bytes are UTF-8 (a leading BOM dropped); anything else is a validation
    error at ``$`` naming the first bad byte."""
    if isinstance(text, bytes):
        try:
            return text.decode("utf-8-sig")
        except UnicodeDecodeError as e:
            raise OffsetsValidationError(
                [OffsetsProblem("$", f"expected UTF-8 text, got invalid byte(s) at position {e.start}")]
            ) from e
    return text


def parse_offsets_document(text: str | bytes, *, allow_empty: bool = False) -> OffsetsDocument:
    """Parse and generically validate an offsets document (any connector).

    Raises ``OffsetsValidationError`` with every problem found; never another exception.
    """
    text = document_text(text)
    hook = _DuplicateKeys()
    try:
        obj = json.loads(text, parse_constant=_reject_constant, parse_float=_parse_float, object_pairs_hook=hook)
    except json.JSONDecodeError as e:
        raise OffsetsValidationError(
            [OffsetsProblem("$", f"not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}")]
        ) from e
    except ValueError as e:  # NaN/Infinity, 1e999, an integer beyond Python's int/str digit limit
        raise OffsetsValidationError([OffsetsProblem("$", f"not valid JSON: {e}")]) from e
    except RecursionError as e:
        raise OffsetsValidationError([OffsetsProblem("$", "not valid JSON: nested too deeply")]) from e
    problems = _Problems()
    if _SURROGATE_ESCAPE.search(text) and _has_unpaired_surrogate(obj):
        # "\ud800" alone parses to a str no UTF-8 encoder (httpx, the Kubernetes client) accepts.
        problems.fail("$", "contains an unpaired surrogate escape (\\ud800-\\udfff alone); not valid Unicode")
    for key in hook.duplicates:
        problems.add("$", f"key {json.dumps(key, ensure_ascii=False)} appears twice in one object; keys must be unique")
    return _build_document(obj, allow_empty=allow_empty, problems=problems)


def parse_offsets_obj(obj: object, *, allow_empty: bool = False) -> OffsetsDocument:
    """Like ``parse_offsets_document`` for an already decoded JSON value (e.g. a GET response)."""
    return _build_document(obj, allow_empty=allow_empty, problems=_Problems())


def _build_document(obj: object, *, allow_empty: bool, problems: _Problems) -> OffsetsDocument:
    if not isinstance(obj, dict):
        problems.fail("$", f'expected an object with the key "offsets", got {_describe(obj)}')
    unknown = [k for k in obj if k != "offsets"]
    if unknown:
        problems.add("$", f'unknown top-level key(s) {_quote_all(map(str, unknown))}; only "offsets" is allowed')
    if "offsets" not in obj:
        problems.fail("offsets", 'missing; expected a list of {"partition": ..., "offset": ...} entries')
    raw_entries = obj["offsets"]
    if not isinstance(raw_entries, list):
        problems.fail("offsets", f"expected a list, got {_describe(raw_entries)}")
    if not raw_entries and not allow_empty:
        problems.add("offsets", _EMPTY_OFFSETS_MESSAGE)

    entries: list[OffsetEntry] = []
    seen: dict[int, int] = {}  # digests of the canonical partition keys: a million fit in tens of MB
    for index, raw in enumerate(raw_entries):
        entry = _build_entry(raw, f"offsets[{index}]", problems)
        if entry is None:
            continue
        digest = _partition_digest(entry.partition)
        if digest in seen:
            problems.add(
                f"offsets[{index}].partition",
                f"duplicate of offsets[{seen[digest]}].partition ({partition_key(entry)}); list each partition once",
            )
        else:
            seen[digest] = index
        entries.append(entry)
    problems.raise_if_any()
    return OffsetsDocument(entries=tuple(entries))


def _build_entry(raw: object, path: str, problems: _Problems) -> OffsetEntry | None:
    if not isinstance(raw, dict):
        problems.add(path, f'expected an object with the keys "partition" and "offset", got {_describe(raw)}')
        return None
    before = len(problems.items)
    unknown = [k for k in raw if k not in ("partition", "offset")]
    if unknown:
        problems.add(path, f'unknown key(s) {_quote_all(map(str, unknown))}; expected exactly "partition" and "offset"')
    partition: dict[str, Primitive] | None = None
    if "partition" not in raw:
        problems.add(f"{path}.partition", "missing; expected an object")
    elif raw["partition"] is None:
        problems.add(f"{path}.partition", "expected an object, got null")
    else:
        partition = _primitive_map(raw["partition"], f"{path}.partition", problems)
    offset: dict[str, Primitive] | None = None
    if "offset" not in raw:
        problems.add(f"{path}.offset", "missing; expected an object, or null to remove the partition's offset")
    elif raw["offset"] is not None:
        offset = _primitive_map(raw["offset"], f"{path}.offset", problems)
    if len(problems.items) != before or partition is None:
        return None
    return OffsetEntry(partition=partition, offset=offset)


def _primitive_map(value: object, path: str, problems: _Problems) -> dict[str, Primitive] | None:
    expected = "an object" if path.endswith(".partition") else "an object or null"
    if not isinstance(value, dict):
        problems.add(path, f"expected {expected}, got {_describe(value)}")
        return None
    ok = True
    for key, item in value.items():
        if not isinstance(key, str):
            problems.add(path, f"expected string keys, got {_describe(key)}")
            ok = False
            continue
        if not _is_primitive(item):
            problems.add(
                _child(path, key),
                f"expected a string, number, boolean or null, got {_describe(item)}; Connect rejects nested values",
            )
            ok = False
    # The parsed dict itself, not a copy: a million-partition document would otherwise be held twice.
    result: dict[str, Primitive] = value
    return result if ok else None


# --------------------------------------------------------------------------- family validators


def _check_keys(
    mapping: Mapping[str, Primitive], expected: tuple[str, ...], path: str, what: str, problems: _Problems
) -> bool:
    """Exactly ``expected`` keys; one problem naming the missing and the unexpected ones."""
    missing = [k for k in expected if k not in mapping]
    extra = [k for k in mapping if k not in expected]
    if not missing and not extra:
        return True
    found = []
    if missing:
        found.append(f"missing {_quote_all(missing)}")
    if extra:
        found.append(f"unexpected {_quote_all(extra)}")
    problems.add(path, f"{what} must contain exactly the keys {_quote_all(expected)}; {', '.join(found)}")
    return False


def _check_non_negative_int(value: Primitive, path: str, problems: _Problems, hint: str = "") -> None:
    if not _is_non_negative_int(value):
        problems.add(path, f"expected an integer >= 0, got {_describe(value)}{hint}")


def _check_string(value: Primitive, path: str, problems: _Problems, *, non_empty: bool = False) -> bool:
    if not isinstance(value, str) or (non_empty and not value):
        kind = "a non-empty string" if non_empty else "a string"
        problems.add(path, f"expected {kind}, got {_describe(value)}")
        return False
    return True


def _check_single_offset(
    entry: OffsetEntry, path: str, key: str, what: str, problems: _Problems, *, zero_only: str | None = None
) -> None:
    """Offset null, or exactly ``{key: int >= 0}`` (or ``{key: 0}`` when ``zero_only`` explains why)."""
    if entry.offset is None:
        return
    opath = f"{path}.offset"
    if not _check_keys(entry.offset, (key,), opath, f"the offset of {what} (or null)", problems):
        return
    value = entry.offset[key]
    if zero_only is not None:
        if not (_is_non_negative_int(value) and value == 0):
            problems.add(_child(opath, key), f"expected 0, got {_describe(value)}; {zero_only}")
        return
    _check_non_negative_int(value, _child(opath, key), problems)


def validate_sink(doc: OffsetsDocument, *, topics: list[str] | None, topics_regex: str | None) -> None:
    """Sink connectors: ``{"kafka_topic": str, "kafka_partition": int}`` -> ``{"kafka_offset": int}``.

    When ``topics`` or ``topics_regex`` is given, each topic must be one the connector consumes
    (Connect does not check this; an offset for a foreign topic is silently stored in the group).
    """
    problems = _Problems()
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
        if _check_keys(part, ("kafka_topic", "kafka_partition"), ppath, "a sink connector partition", problems):
            topic = part["kafka_topic"]
            tpath = _child(ppath, "kafka_topic")
            if not isinstance(topic, str) or not topic:
                problems.add(tpath, f"expected a non-empty string, got {_describe(topic)}")
            elif check_topics:
                allowed = topic in (topics or []) or (pattern is not None and pattern.full_match(topic))
                if not allowed:
                    consumed = []
                    if topics:
                        consumed.append(f"topics {_quote_all(topics)}")
                    if topics_regex:
                        consumed.append(f"topics.regex {json.dumps(topics_regex, ensure_ascii=False)}")
                    problems.add(
                        tpath,
                        f"topic {json.dumps(topic, ensure_ascii=False)} is not consumed by this connector; "
                        f"expected one of its {' or '.join(consumed)}",
                    )
            value = part["kafka_partition"]
            hint = " (write the number without quotes)" if isinstance(value, str) else ""
            _check_non_negative_int(value, _child(ppath, "kafka_partition"), problems, hint)
        _check_single_offset(entry, path, "kafka_offset", "a sink connector", problems)
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
    problems = _Problems()
    for index, entry in enumerate(doc.entries):
        path = f"offsets[{index}]"
        ppath = f"{path}.partition"
        if _check_keys(entry.partition, ("filename",), ppath, "a FileStreamSource partition", problems):
            name = entry.partition["filename"]
            fpath = _child(ppath, "filename")
            if _check_string(name, fpath, problems) and name != file:
                problems.add(
                    fpath,
                    f"expected the connector's file {json.dumps(file, ensure_ascii=False)}, got {_describe(name)}",
                )
        _check_single_offset(entry, path, "position", "a FileStreamSource connector", problems)
    problems.raise_if_any()


def translate_replay_from(doc: OffsetsDocument) -> OffsetsDocument:
    """MirrorSourceConnector input in "replay from" terms: ``{"replayFrom": N}`` -> ``{"offset": N - 1}``.

    The task resumes at the stored offset + 1, so "the next record replicated is upstream offset N"
    is stored as N - 1, and N = 0 as no offset at all (null: the task starts from
    ``auto.offset.reset``, earliest by default). Entries in stored terms pass unchanged; a bad
    ``replayFrom`` is reported with its path and nothing is translated.
    """
    problems = _Problems()
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
        elif not isinstance(value, int) or not _is_non_negative_int(value):
            problems.add(f"{path}.replayFrom", f"expected an integer >= 0, got {_describe(value)}")
        else:
            start = value
            entries.append(OffsetEntry(entry.partition, None if start == 0 else {"offset": start - 1}))
    problems.raise_if_any()
    return OffsetsDocument(tuple(entries))


def validate_mirror_source(doc: OffsetsDocument, *, source_alias: str) -> None:
    """MirrorSourceConnector: ``{"cluster", "partition", "topic"}`` -> ``{"offset": int}``.

    The task seeks to ``offset + 1``: to start at N, set N - 1.
    """
    problems = _Problems()
    for index, entry in enumerate(doc.entries):
        path = f"offsets[{index}]"
        ppath = f"{path}.partition"
        part = entry.partition
        if _check_keys(part, ("cluster", "partition", "topic"), ppath, "a MirrorSource partition", problems):
            cluster = part["cluster"]
            cpath = _child(ppath, "cluster")
            if _check_string(cluster, cpath, problems) and cluster != source_alias:
                problems.add(
                    cpath,
                    f"expected the connector's source.cluster.alias "
                    f"{json.dumps(source_alias, ensure_ascii=False)}, got {_describe(cluster)}",
                )
            _check_string(part["topic"], _child(ppath, "topic"), problems, non_empty=True)
            _check_non_negative_int(part["partition"], _child(ppath, "partition"), problems)
        _check_single_offset(entry, path, "offset", "a MirrorSource connector", problems)
    problems.raise_if_any()


def validate_mirror_checkpoint(doc: OffsetsDocument) -> None:
    """MirrorCheckpointConnector: ``{"group", "topic", "partition"}`` -> ``{"offset": 0}`` (unused)."""
    problems = _Problems()
    for index, entry in enumerate(doc.entries):
        path = f"offsets[{index}]"
        ppath = f"{path}.partition"
        part = entry.partition
        if _check_keys(part, ("group", "topic", "partition"), ppath, "a MirrorCheckpoint partition", problems):
            _check_string(part["group"], _child(ppath, "group"), problems)
            _check_string(part["topic"], _child(ppath, "topic"), problems)
            _check_non_negative_int(part["partition"], _child(ppath, "partition"), problems)
        _check_single_offset(
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
    problems = _Problems()
    for index, entry in enumerate(doc.entries):
        path = f"offsets[{index}]"
        ppath = f"{path}.partition"
        part = entry.partition
        keys = ("sourceClusterAlias", "targetClusterAlias")
        if _check_keys(part, keys, ppath, "a MirrorHeartbeat partition", problems):
            for key in keys:
                _check_string(part[key], _child(ppath, key), problems)
        _check_single_offset(
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
ENTRIES_PER_BATCH = 10_000

_Item = TypeVar("_Item")

_JSON_WHITESPACE = re.compile(r"[ \t\n\r]*")  # what the json module skips between tokens
_OFFSETS_KEY = '"offsets"'


def _skip_whitespace(text: str, at: int) -> int:
    match = _JSON_WHITESPACE.match(text, at)
    return match.end() if match else at


class _NeedsWholeDocument(Exception):
    """The streamed path cannot vouch for this document; the whole-document path decides."""


def _scan_entries(text: str, decoder: json.JSONDecoder) -> Iterator[tuple[object, int, int]]:
    """The raw entries of exactly ``{"offsets": [ ... ]}`` (any JSON whitespace), decoded one at a
    time with ``decoder``, each with where its text starts and ends; anything else raises
    ``_NeedsWholeDocument``."""
    skip = _skip_whitespace

    def expect(token: str, at: int) -> int:
        at = skip(text, at)
        if not text.startswith(token, at):
            raise _NeedsWholeDocument
        return skip(text, at + len(token))

    at = expect("[", expect(":", expect(_OFFSETS_KEY, expect("{", 0))))
    if text.startswith("]", at):
        at += 1
    else:
        while True:
            start = at
            try:
                raw, at = decoder.raw_decode(text, at)
            except (ValueError, RecursionError):  # bad JSON, NaN, 1e999, too deep: the whole path says which
                raise _NeedsWholeDocument from None
            yield raw, start, at
            at = skip(text, at)
            if text.startswith(",", at):
                at = skip(text, at + 1)
            elif text.startswith("]", at):
                at += 1
                break
            else:
                raise _NeedsWholeDocument
    if skip(text, expect("}", at)) != len(text):
        raise _NeedsWholeDocument


def _partition_digest(partition: Mapping[str, Primitive]) -> int:
    """128 bits of the canonical partition key: a million of them take tens of MB, not the keys' size."""
    key = _canonical(partition).encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(key, digest_size=16).digest(), "big")


class _CompactWriter:
    """``{"offsets":[...]}`` written a batch at a time; the same text as ``to_compact_json``.

    With ``source`` (the text the entries were read from, given with each batch's span), nothing
    is written while the source already is that text, which is the usual case for large documents
    (Connect's GET answers, the operator's own lists and backups): ``text()`` then returns the
    source itself, and a 100 MB document is not copied at all.
    """

    def __init__(self, source: str | None = None) -> None:
        self.pieces: list[str] = []
        self.entries = 0
        compact = source is not None and source.startswith(_COMPACT_HEAD) and source.endswith(_COMPACT_TAIL)
        self._source = source if compact else None
        self._same_until = len(_COMPACT_HEAD) - 1  # the source is the output up to here (before a ",")

    def add(self, entries: Sequence[OffsetEntry], span: tuple[int, int] | None = None) -> None:
        if not entries:
            return
        body = _compact_entries(entries)
        self.entries += len(entries)
        source = self._source
        # the next entries of the source, right after a "," (or the "["), and written as we would
        if (
            source is not None
            and span is not None
            and span[0] == self._same_until + 1
            and source[span[0] : span[1]] == body
        ):
            self._same_until = span[1]
            return
        self._diverge()
        self.pieces.append(body)

    def _diverge(self) -> None:
        """From here on the output differs from the source: keep the part that was the same."""
        if self._source is not None:
            if self._same_until > len(_COMPACT_HEAD):
                self.pieces.append(self._source[len(_COMPACT_HEAD) : self._same_until])
            self._source = None

    def text(self, *more: _CompactWriter) -> str:
        extra = [piece for writer in more for piece in writer.pieces]
        source = self._source
        if source is not None and self._same_until == len(source) - len(_COMPACT_TAIL):  # all of it matched
            if not extra:
                return source
            # The source plus what follows (a restore's nulls). Grown in place: CPython extends a
            # str held by one local name, so there is no third copy as a join of a slice would make.
            out = source[: -len(_COMPACT_TAIL)]
            out += ","
            out += ",".join(extra)
            out += _COMPACT_TAIL
            return out
        self._diverge()
        return _COMPACT_HEAD + ",".join(self.pieces + extra) + _COMPACT_TAIL


def _streamed_entries(text: str, seen: set[int]) -> Iterator[tuple[OffsetEntry, int, int]]:
    """Generically valid entries of ``text``, each partition's digest added to ``seen``; raises
    ``_NeedsWholeDocument`` at the first thing the whole-document path has to judge."""
    if _SURROGATE_ESCAPE.search(text):
        raise _NeedsWholeDocument  # paired escapes are fine, lone ones are not: the whole path tells
    hook = _DuplicateKeys()
    decoder = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_parse_float, object_pairs_hook=hook)
    problems = _Problems()
    for raw, start, end in _scan_entries(text, decoder):
        entry = _build_entry(raw, "offsets", problems)
        if entry is None or hook.duplicates:
            raise _NeedsWholeDocument
        digest = _partition_digest(entry.partition)
        if digest in seen:
            raise _NeedsWholeDocument  # a duplicate (or a digest collision): the whole path decides
        seen.add(digest)
        yield entry, start, end


def _in_batches(items: Iterable[_Item]) -> Iterator[list[_Item]]:
    """``items`` in lists of ``ENTRIES_PER_BATCH`` (the last one shorter)."""
    batch: list[_Item] = []
    for item in items:
        batch.append(item)
        if len(batch) == ENTRIES_PER_BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def _batches(entries: Iterable[tuple[OffsetEntry, int, int]]) -> Iterator[tuple[OffsetsDocument, tuple[int, int]]]:
    """Entries with their spans as small documents, each with the span of its text in the source."""
    for batch in _in_batches(entries):
        yield OffsetsDocument(tuple(entry for entry, _, _ in batch)), (batch[0][1], batch[-1][2])


def validated_compact_json(
    text: str,
    connector_class: str | None = None,
    config: Mapping[str, str] | None = None,
    *,
    is_sink: bool | None = None,
    translate_replay: bool = False,
    allow_empty: bool = False,
) -> str:
    """``parse_offsets_document`` (+ ``translate_replay_from`` when asked, + ``validate_for_connector``
    when a class is given), then ``to_compact_json``, without holding the parsed document.

    Raises ``OffsetsValidationError`` exactly as those functions do.
    """

    def whole() -> str:
        document = parse_offsets_document(text, allow_empty=allow_empty)
        if translate_replay:
            document = translate_replay_from(document)
        if connector_class is not None:
            validate_for_connector(document, connector_class, config or {}, is_sink=is_sink)
        return document.to_compact_json()

    writer = _CompactWriter(text)
    try:
        for batch, span in _batches(_streamed_entries(text, set())):
            if translate_replay:
                batch = translate_replay_from(batch)
            if connector_class is not None:
                validate_for_connector(batch, connector_class, config or {}, is_sink=is_sink)
            writer.add(batch.entries, span)
    except (_NeedsWholeDocument, OffsetsValidationError):
        return whole()
    if not writer.entries and not allow_empty:
        return whole()  # raises: an empty list is refused
    return writer.text()


@dataclass(frozen=True)
class RestoreDocument:
    """The PATCH that puts a backup back exactly, and how many entries it has."""

    json: str
    entries: int


def restore_compact_json(backup_text: str, current_text: str) -> RestoreDocument:
    """The backup's entries, then ``"offset": null`` for every partition that has an offset in
    ``current_text`` (the connector's GET) but is not in the backup: a PATCH of the backup alone
    would leave those in place. Raises ``OffsetsValidationError`` for an invalid backup.

    Streamed like ``validated_compact_json``: the backup's partitions are remembered as digests.
    """
    backup = _CompactWriter(backup_text)
    kept: set[int] = set()
    try:
        for batch, span in _batches(_streamed_entries(backup_text, kept)):
            backup.add(batch.entries, span)
    except (_NeedsWholeDocument, OffsetsValidationError):
        document = parse_offsets_document(backup_text, allow_empty=True)  # raises for an invalid backup
        backup = _CompactWriter()
        backup.add(document.entries)
        kept = {_partition_digest(entry.partition) for entry in document.entries}
        del document
    try:
        nulls = _nulls((raw for raw, _, _ in _scan_entries(current_text, json.JSONDecoder())), kept)
    except _NeedsWholeDocument:  # not the usual shape (or empty): decide on the whole answer
        whole = json.loads(current_text) if current_text.strip() else {}
        listed = whole.get("offsets") if isinstance(whole, dict) else None
        nulls = _nulls(iter(listed if isinstance(listed, list) else []), kept)
    return RestoreDocument(backup.text(nulls), backup.entries + nulls.entries)


def _nulls(current: Iterator[object], kept: set[int]) -> _CompactWriter:
    """``"offset": null`` for each partition in ``current`` (GET entries) with an offset but not kept."""
    nulls = (
        OffsetEntry(partition=raw["partition"], offset=None)
        for raw in current
        # a partition Connect lists with a null offset has none: nothing to null
        if isinstance(raw, dict)
        and isinstance(raw.get("partition"), dict)
        and raw.get("offset") is not None
        and _partition_digest(raw["partition"]) not in kept
    )
    writer = _CompactWriter()
    for batch in _in_batches(nulls):
        writer.add(batch)
    return writer


# --------------------------------------------------------------------------- diffs


@dataclass(frozen=True)
class OffsetsDiff:
    """What a PATCH with ``requested`` would do to ``current`` (for dry runs).

    ``added``: partitions not in current, with an offset. ``changed``: (old, new) where the offset
    differs. ``removed``: current entries that a null offset removes. ``unchanged``: partitions
    whose state stays the same (current partitions not listed or listed with the same offset, and
    null offsets for partitions that have none).
    """

    added: list[OffsetEntry]
    changed: list[tuple[OffsetEntry, OffsetEntry]]
    removed: list[OffsetEntry]
    unchanged: int

    @property
    def has_changes(self) -> bool:
        return bool(self.added or self.changed or self.removed)

    def summary(self) -> str:
        return (
            f"{len(self.added)} added, {len(self.changed)} changed, "
            f"{len(self.removed)} removed, {self.unchanged} unchanged"
        )

    def to_json_obj(self) -> dict[str, Any]:
        return {
            "added": [e.to_json_obj() for e in self.added],
            "changed": [
                {
                    "partition": dict(new.partition),
                    "old": None if old.offset is None else dict(old.offset),
                    "new": None if new.offset is None else dict(new.offset),
                }
                for old, new in self.changed
            ],
            "removed": [e.to_json_obj() for e in self.removed],
            "unchanged": self.unchanged,
        }


def diff_offsets(current: OffsetsDocument, requested: OffsetsDocument) -> OffsetsDiff:
    """Compare by ``partition_key``; offsets compare by canonical JSON, so ``1`` != ``1.0`` != ``true``."""
    by_key = {partition_key(e): e for e in current.entries}
    touched: set[str] = set()
    added: list[OffsetEntry] = []
    changed: list[tuple[OffsetEntry, OffsetEntry]] = []
    removed: list[OffsetEntry] = []
    unchanged = 0
    for entry in requested.entries:
        key = partition_key(entry)
        old = by_key.get(key)
        if old is not None:
            touched.add(key)
        if entry.offset is None:
            if old is not None and old.offset is not None:
                removed.append(old)
            else:
                unchanged += 1
        elif old is None or old.offset is None:
            added.append(entry)
        elif _canonical(old.offset) != _canonical(entry.offset):
            changed.append((old, entry))
        else:
            unchanged += 1
    unchanged += sum(1 for key in by_key if key not in touched)
    return OffsetsDiff(added=added, changed=changed, removed=removed, unchanged=unchanged)


def reset_diff(current: OffsetsDocument) -> OffsetsDiff:
    """What ``DELETE /connectors/{c}/offsets`` would do: every current partition is removed."""
    return OffsetsDiff(added=[], changed=[], removed=list(current.entries), unchanged=0)


__all__ = [
    "ENTRIES_PER_BATCH",
    "FILE_STREAM_SINK_CLASS",
    "FILE_STREAM_SOURCE_CLASS",
    "MAX_LISTED_PROBLEMS",
    "MIRROR_CHECKPOINT_CLASS",
    "MIRROR_HEARTBEAT_CLASS",
    "MIRROR_SOURCE_ALIAS_DEFAULT",
    "MIRROR_SOURCE_CLASS",
    "OffsetEntry",
    "OffsetsDiff",
    "OffsetsDocument",
    "OffsetsProblem",
    "OffsetsValidationError",
    "Primitive",
    "RestoreDocument",
    "diff_offsets",
    "document_text",
    "parse_offsets_document",
    "parse_offsets_obj",
    "partition_key",
    "reset_diff",
    "restore_compact_json",
    "translate_replay_from",
    "validate_file_stream_source",
    "validate_for_connector",
    "validate_mirror_checkpoint",
    "validate_mirror_heartbeat",
    "validate_mirror_source",
    "validate_sink",
    "validated_compact_json",
]
