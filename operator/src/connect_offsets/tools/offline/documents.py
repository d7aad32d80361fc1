"""The export and import documents of ``connect-offsets export|import``: what export writes
(``render_export``) and what import accepts (``parse_import_document``); pure, no I/O.

The documents: KIP-199 export ``{"<connector>": [{"partition", "offset"}]}``, the history form
written by ``--from-beginning`` (each entry adds ``"kafka": {topic, partition, offset,
timestamp}``, ``offset`` may be null for a tombstone, log order), and KIP-875 per connector
``{"<connector>": {"offsets": [...]}}``. ``parse_import_document`` accepts all three, and checks
that every key and value can be stored as Connect writes them (``records``). Reading a document
file, bounded, and checking an export's shape without building it is ``export_file``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from connect_offsets.offsets import (
    OffsetEntry,
    OffsetsProblem,
    OffsetsValidationError,
    Primitive,
    document_text,
    parse_offsets_obj,
    partition_key,
)
from connect_offsets.tools.offline.records import StoredRecord, encode_key, encode_value, latest

__all__ = ["ConnectorChanges", "ImportDocument", "PairChange", "parse_import_document", "render_export"]

#: Connector names shown bare in problem paths; others are shown as JSON strings.
_SIMPLE_NAME = re.compile(r"[A-Za-z0-9._-]+")


# --------------------------------------------------------------------------- export documents


def render_export(
    records: Iterable[StoredRecord],
    *,
    connectors: Sequence[str],
    history: bool,
    kip875: bool = False,
) -> dict[str, Any]:
    """The export document for ``connectors`` (each present, maybe with no entries).

    ``history`` (``--from-beginning``): every record in log order with its ``"kafka"`` position,
    tombstones as ``"offset": null``. Otherwise the latest non-null offset per partition.
    """
    per_connector: dict[str, list[StoredRecord]] = {name: [] for name in connectors}
    for record in records:
        if record.key.connector in per_connector:
            per_connector[record.key.connector].append(record)
    document: dict[str, Any] = {}
    for name, items in per_connector.items():
        chosen = items if history else latest(items)
        entries = [r.to_json_obj(with_kafka=history) for r in chosen]
        document[name] = {"offsets": entries} if kip875 else entries
    return document


# --------------------------------------------------------------------------- import documents


@dataclass(frozen=True)
class PairChange:
    """One partition-offset pair to write; ``offset`` None writes a tombstone."""

    connector: str
    partition: dict[str, Primitive]
    offset: dict[str, Primitive] | None

    @property
    def partition_id(self) -> str:
        return partition_key(self.partition)


@dataclass(frozen=True)
class ConnectorChanges:
    connector: str
    changes: tuple[PairChange, ...]


@dataclass(frozen=True)
class ImportDocument:
    """A validated import: per connector, partitions listed once each, in input order."""

    connectors: tuple[ConnectorChanges, ...] = field(default_factory=tuple)

    @property
    def names(self) -> list[str]:
        return [c.connector for c in self.connectors]

    def __len__(self) -> int:
        return sum(len(c.changes) for c in self.connectors)


def _reprefix(problems: Iterable[OffsetsProblem], prefix: str) -> list[OffsetsProblem]:
    result = []
    for problem in problems:
        path = problem.path
        if path.startswith("offsets"):
            path = prefix + path[len("offsets") :]
        elif path == "$":
            path = prefix
        message = problem.message.replace("duplicate of offsets[", f"duplicate of {prefix}[")
        if "list each partition once" in message:
            message += " (a --from-beginning export lists a partition's history: keep the entry to restore)"
        result.append(OffsetsProblem(path, message))
    return result


def parse_import_document(text: str | bytes) -> ImportDocument:
    """Parse an import document; ``OffsetsValidationError`` lists every problem with its path.

    Accepts ``{"<connector>": [entries]}`` (KIP-199, also a ``--from-beginning`` export whose
    ``"kafka"`` objects are ignored) and ``{"<connector>": {"offsets": [entries]}}`` (KIP-875).
    Each partition may appear once per connector: a history export lists partitions several
    times, and which of them to restore is the user's choice, not ours.
    """
    # Reuse the generic parser for JSON errors (duplicate keys, NaN, bad UTF-8): wrap, then unwrap.
    text = document_text(text)
    obj = _load_json(text)
    problems: list[OffsetsProblem] = []
    if not isinstance(obj, dict):
        raise OffsetsValidationError(
            [
                OffsetsProblem(
                    "$",
                    'expected an object {"<connector>": [{"partition": {...}, "offset": {...} | null}, ...]}, '
                    f"got {type(obj).__name__ if obj is not None else 'null'}",
                )
            ]
        )
    if not obj:
        raise OffsetsValidationError([OffsetsProblem("$", "no connectors in the document; nothing to import")])
    result: list[ConnectorChanges] = []
    for name, body in obj.items():
        prefix = name if _SIMPLE_NAME.fullmatch(name) else json.dumps(name, ensure_ascii=False)
        if isinstance(body, dict) and set(body) == {"offsets"}:
            entries_obj: object = body["offsets"]
            prefix = f"{prefix}.offsets"
        else:
            entries_obj = body
        if not isinstance(entries_obj, list):
            problems.append(
                OffsetsProblem(
                    prefix,
                    'expected a list of {"partition": ..., "offset": ...} entries (or {"offsets": [...]}), '
                    f"got {_kind(entries_obj)}",
                )
            )
            continue
        stripped = [_strip_kafka(entry) for entry in entries_obj]
        try:
            doc = parse_offsets_obj({"offsets": stripped}, allow_empty=False)
        except OffsetsValidationError as error:
            problems.extend(_reprefix(error.problems, prefix))
            continue
        changes = []
        for index, entry in enumerate(doc.entries):
            try:
                encode_key(name, entry.partition)
                encode_value(entry.offset)
            except ValueError as error:
                problems.append(OffsetsProblem(f"{prefix}[{index}]", str(error)))
                continue
            changes.append(_change(name, entry))
        result.append(ConnectorChanges(name, tuple(changes)))
    if problems:
        raise OffsetsValidationError(problems)
    return ImportDocument(tuple(result))


def _load_json(text: str) -> object:
    """JSON with the generic parser's rules (no NaN, no duplicate keys) and its error messages."""
    from connect_offsets.offsets import document as generic

    hook = generic.DuplicateKeys()
    try:
        obj = json.loads(
            text,
            parse_constant=generic.reject_constant,
            parse_float=generic.parse_float,
            object_pairs_hook=hook,
        )
    except json.JSONDecodeError as e:
        raise OffsetsValidationError(
            [OffsetsProblem("$", f"not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}")]
        ) from e
    except ValueError as e:
        raise OffsetsValidationError([OffsetsProblem("$", f"not valid JSON: {e}")]) from e
    except RecursionError as e:
        raise OffsetsValidationError([OffsetsProblem("$", "not valid JSON: nested too deeply")]) from e
    if hook.duplicates:
        raise OffsetsValidationError(
            [
                OffsetsProblem(
                    "$", f"key {json.dumps(k, ensure_ascii=False)} appears twice in one object; keys must be unique"
                )
                for k in hook.duplicates
            ]
        )
    return obj


def _strip_kafka(entry: object) -> object:
    if isinstance(entry, dict) and "kafka" in entry:
        return {k: v for k, v in entry.items() if k != "kafka"}
    return entry


def _kind(value: object) -> str:
    if value is None:
        return "null"
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), type(value).__name__
    )


def _change(connector: str, entry: OffsetEntry) -> PairChange:
    return PairChange(connector=connector, partition=entry.partition, offset=entry.offset)
