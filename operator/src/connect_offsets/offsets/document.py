"""The offsets document (KIP-875 shape) and its generic parsing; pure, no I/O.

An offsets document is what ``GET /connectors/{c}/offsets`` returns and what
``PATCH /connectors/{c}/offsets`` accepts::

    {"offsets": [{"partition": {...}, "offset": {...} | null}, ...]}

Why everything is checked before any side effect: changing offsets takes three steps (stop the
connector, PATCH, resume) and Connect checks the document only at the PATCH, after the connector
has been stopped, reporting most mistakes as a bare 500. ``parse_offsets_document`` does the
generic checks here; ``validate.validate_for_connector`` the connector-family checks.

We are deliberately stricter than Connect in a few places: unknown keys are refused (Connect
ignores them) and so is JSON Connect would read differently from us (duplicate keys, NaN,
unpaired surrogates).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from connect_offsets.offsets.problems import (
    OffsetsProblem,
    OffsetsValidationError,
    Primitive,
    ProblemList,
    child_path,
    describe_value,
    is_primitive,
    quote_all,
)

EMPTY_OFFSETS_MESSAGE = (
    "expected at least one entry, got an empty list "
    '(Connect rejects it: "Partitions / offsets need to be provided for an alter offsets request")'
)


# --------------------------------------------------------------------------- errors


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


def canonical_json(value: Mapping[str, Primitive] | None) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


COMPACT_HEAD = '{"offsets":['
COMPACT_TAIL = "]}"
encode_compact = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def compact_entries(entries: Iterable[OffsetEntry]) -> str:
    """The entries as compact JSON, comma-separated: the inside of ``{"offsets":[...]}``."""
    return ",".join(encode_compact({"partition": e.partition, "offset": e.offset}) for e in entries)


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
        return COMPACT_HEAD + compact_entries(self.entries) + COMPACT_TAIL

    @staticmethod
    def partition_key(entry: OffsetEntry) -> str:
        """See the module-level ``partition_key``."""
        return partition_key(entry)


# --------------------------------------------------------------------------- message helpers


class _BadConstant(ValueError):
    pass


def reject_constant(name: str) -> Any:
    raise _BadConstant(f"{name} is not allowed (not valid JSON, and Connect cannot store it)")


def parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _BadConstant(f"the number {text} is out of range (it would become {value})")
    return value


class DuplicateKeys:
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


SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def has_unpaired_surrogate(obj: object) -> bool:
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


class EntryRules(Protocol):
    """A connector family's rules for one entry (``validate.rules_for`` builds them), applied while
    the document is parsed, so one pass reports the generic and the family problems together."""

    def check_partition(self, partition: dict[str, Primitive], path: str, problems: ProblemList) -> None:
        """Problems of a partition map that is generically valid (string keys, primitive values)."""

    def check_offset(
        self, offset: dict[str, Primitive] | None, path: str, problems: ProblemList
    ) -> dict[str, Primitive] | None:
        """Problems of a generically valid offset map (None: remove the partition's offset); returns
        the offset to keep (a family may translate it, e.g. MirrorMaker 2's ``replayFrom``)."""


def parse_offsets_document(
    text: str | bytes,
    *,
    allow_empty: bool = False,
    rules: EntryRules | None = None,
    problems: ProblemList | None = None,
) -> OffsetsDocument:
    """Parse and validate an offsets document: generically (any connector), and with ``rules``
    by a connector family's rules too, every problem in one pass. ``problems``: found before
    (about the connector rather than the document), reported first.

    Raises ``OffsetsValidationError`` with every problem found, in the order of the document
    (up to ``problems.MAX_KEPT_PROBLEMS``, the rest counted); never another exception.
    """
    problems = ProblemList() if problems is None else problems
    try:
        text = document_text(text)
    except OffsetsValidationError as e:
        problems.fail(e.problems[0].path, e.problems[0].message)
    hook = DuplicateKeys()
    try:
        obj = json.loads(text, parse_constant=reject_constant, parse_float=parse_float, object_pairs_hook=hook)
    except json.JSONDecodeError as e:
        problems.fail("$", f"not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}")
    except ValueError as e:  # NaN/Infinity, 1e999, an integer beyond Python's int/str digit limit
        problems.fail("$", f"not valid JSON: {e}")
    except RecursionError:
        problems.fail("$", "not valid JSON: nested too deeply")
    if SURROGATE_ESCAPE.search(text) and has_unpaired_surrogate(obj):
        # "\ud800" alone parses to a str no UTF-8 encoder (httpx, the Kubernetes client) accepts.
        problems.fail("$", "contains an unpaired surrogate escape (\\ud800-\\udfff alone); not valid Unicode")
    for key in hook.duplicates:
        problems.add("$", f"key {json.dumps(key, ensure_ascii=False)} appears twice in one object; keys must be unique")
    return build_document(obj, allow_empty=allow_empty, problems=problems, rules=rules)


def parse_offsets_obj(obj: object, *, allow_empty: bool = False) -> OffsetsDocument:
    """Like ``parse_offsets_document`` for an already decoded JSON value (e.g. a GET response)."""
    return build_document(obj, allow_empty=allow_empty, problems=ProblemList())


def build_document(
    obj: object, *, allow_empty: bool, problems: ProblemList, rules: EntryRules | None = None
) -> OffsetsDocument:
    """The document of a decoded JSON value; raises every problem (``problems`` holds those found
    before) at the end. Only a wrong shape of the whole (not an object, no list of entries) stops
    the checks early: each entry is checked as far as its own parts allow."""
    if not isinstance(obj, dict):
        problems.fail("$", f'expected an object with the key "offsets", got {describe_value(obj)}')
    unknown = [k for k in obj if k != "offsets"]
    if unknown:
        problems.add("$", f'unknown top-level key(s) {quote_all(map(str, unknown))}; only "offsets" is allowed')
    if "offsets" not in obj:
        problems.fail("offsets", 'missing; expected a list of {"partition": ..., "offset": ...} entries')
    raw_entries = obj["offsets"]
    if not isinstance(raw_entries, list):
        problems.fail("offsets", f"expected a list, got {describe_value(raw_entries)}")
    if not raw_entries and not allow_empty:
        problems.add("offsets", EMPTY_OFFSETS_MESSAGE)

    entries: list[OffsetEntry] = []
    seen: dict[int, int] = {}  # digests of the canonical partition keys: a million fit in tens of MB
    for index, raw in enumerate(raw_entries):

        def once(partition: dict[str, Primitive], path: str, index: int = index) -> None:
            digest = partition_digest(partition)
            if digest in seen:
                shown = partition_key(partition)
                problems.add(
                    path, f"duplicate of offsets[{seen[digest]}].partition ({shown}); list each partition once"
                )
            else:
                seen[digest] = index

        entry = build_entry(raw, f"offsets[{index}]", problems, rules, once)
        if entry is not None and not len(problems):
            entries.append(entry)  # once invalid, the document is never built: keep nothing more
    problems.raise_if_any()
    return OffsetsDocument(entries=tuple(entries))


def build_entry(
    raw: object,
    path: str,
    problems: ProblemList,
    rules: EntryRules | None = None,
    on_partition: Callable[[dict[str, Primitive], str], None] | None = None,
) -> OffsetEntry | None:
    """One entry, its problems added to ``problems`` in the order of a reader: the entry's own keys,
    then its partition (generically, by ``rules``, then ``on_partition``: the document's duplicate
    check), then its offset (generically, by ``rules``).

    Returns the entry whenever its partition could be read, even if it has problems: ``problems``
    decides whether the document is valid.
    """
    if not isinstance(raw, dict):
        problems.add(path, f'expected an object with the keys "partition" and "offset", got {describe_value(raw)}')
        return None
    unknown = [k for k in raw if k not in ("partition", "offset")]
    if unknown:
        problems.add(path, f'unknown key(s) {quote_all(map(str, unknown))}; expected exactly "partition" and "offset"')
    partition: dict[str, Primitive] | None = None
    ppath = f"{path}.partition"
    if "partition" not in raw:
        problems.add(ppath, "missing; expected an object")
    elif raw["partition"] is None:
        problems.add(ppath, "expected an object, got null")
    else:
        partition = _primitive_map(raw["partition"], ppath, problems)
        if partition is not None and rules is not None:
            rules.check_partition(partition, ppath, problems)
        if partition is not None and on_partition is not None:
            on_partition(partition, ppath)
    offset: dict[str, Primitive] | None = None
    opath = f"{path}.offset"
    if "offset" not in raw:
        problems.add(opath, "missing; expected an object, or null to remove the partition's offset")
    elif raw["offset"] is not None:
        offset = _primitive_map(raw["offset"], opath, problems)
        if offset is not None and rules is not None:
            offset = rules.check_offset(offset, opath, problems)
    elif rules is not None:
        offset = rules.check_offset(None, opath, problems)
    if partition is None:
        return None
    return OffsetEntry(partition=partition, offset=offset)


def _primitive_map(value: object, path: str, problems: ProblemList) -> dict[str, Primitive] | None:
    expected = "an object" if path.endswith(".partition") else "an object or null"
    if not isinstance(value, dict):
        problems.add(path, f"expected {expected}, got {describe_value(value)}")
        return None
    ok = True
    for key, item in value.items():
        if not isinstance(key, str):
            problems.add(path, f"expected string keys, got {describe_value(key)}")
            ok = False
            continue
        if not is_primitive(item):
            problems.add(
                child_path(path, key),
                f"expected a string, number, boolean or null, got {describe_value(item)}; "
                "Connect rejects nested values",
            )
            ok = False
    # The parsed dict itself, not a copy: a million-partition document would otherwise be held twice.
    result: dict[str, Primitive] = value
    return result if ok else None


# --------------------------------------------------------------------------- family validators


def partition_digest(partition: Mapping[str, Primitive]) -> int:
    """128 bits of the canonical partition key: a million of them take tens of MB, not the keys' size."""
    key = canonical_json(partition).encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(key, digest_size=16).digest(), "big")
