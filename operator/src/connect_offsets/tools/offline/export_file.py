"""Reading a ``connect-offsets export`` document from a file or stdin, and checking its shape.

Why here and not in each tool: ``connect-offsets import`` and ``connect-offsets pipeline --export``
read the same documents. Both read them through ``read_document`` (a size bound, UTF-8, the same
messages), and ``check_export_text`` is the pipeline's check before Spark starts: Spark's
``from_json`` turns a malformed file into an empty table without a word, so a typo became "0
connector document(s)" and exit 0 after a Spark start.

The bound is the operator's (``clients.limits.max_document_bytes``, CONNECT_OFFSETS_MAX_DOCUMENT_BYTES,
256 MiB by default): an export past it should be read from the topics instead.

``check_export_text`` does not build the document: it walks the top-level object itself and decodes
one entry at a time (``json.JSONDecoder.raw_decode``), each checked with the same entry rules an
import applies (``offsets.document.build_entry``), so a large history export costs its text and one
entry at a time, not a tree of Python objects. Positions in its messages are those of the whole
text, so a JSON error names the line and column, as ``json.loads`` would.
"""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Final

from connect_offsets.clients.limits import max_document_bytes
from connect_offsets.errors import UserError
from connect_offsets.offsets import OffsetsProblem, OffsetsValidationError
from connect_offsets.offsets import document as generic
from connect_offsets.offsets.problems import ProblemList, describe_value

__all__ = ["DocumentReadError", "ExportSummary", "check_export_file", "check_export_text", "read_document"]

#: Problems reported at most; a file full of mistakes is not listed to the end.
MAX_PROBLEMS: Final = 50

_WHITESPACE: Final = re.compile(r"[ \t\n\r]*")
_KAFKA_FIELDS: Final = ("topic", "partition", "offset", "timestamp")
_ENTRY_SHAPE: Final = '{"<connector>": [{"partition": {...}, "offset": {...} | null}, ...]}'


class DocumentReadError(UserError):
    """The document could not be read (missing, unreadable, too large); the message names it."""


@dataclass(frozen=True)
class ExportSummary:
    """What a well-formed export holds."""

    connectors: int
    entries: int
    with_positions: int  # entries with a "kafka" object (a --from-beginning export)


def read_document(source: str | Path | None, *, stdin: BinaryIO | None = None, limit: int | None = None) -> str:
    """The text of a document: the file ``source`` or (None, ``-``) ``stdin``, at most ``limit`` bytes.

    Raises ``DocumentReadError`` (cannot read, too large) or ``OffsetsValidationError`` (not UTF-8).
    """
    limit = max_document_bytes() if limit is None else limit
    name = "stdin" if source in (None, "-") else str(source)
    too_large = f"{name}: larger than {limit} bytes (CONNECT_OFFSETS_MAX_DOCUMENT_BYTES raises the limit)"
    try:
        if source in (None, "-"):
            data = (stdin or sys.stdin.buffer).read(limit + 1)
        else:
            with open(str(source), "rb") as file:
                # A regular file's size is known: one past the bound is refused without reading it.
                if os.fstat(file.fileno()).st_size > limit:
                    raise DocumentReadError(too_large)
                data = file.read(limit + 1)
    except DocumentReadError:
        raise
    except OSError as error:
        raise DocumentReadError(f"{name}: {error.strerror or error}") from None
    if len(data) > limit:
        raise DocumentReadError(too_large)
    return generic.document_text(data)


def check_export_file(path: str | Path, *, limit: int | None = None) -> ExportSummary:
    """``check_export_text`` of a file read with ``read_document``."""
    return check_export_text(read_document(path, limit=limit))


def check_export_text(text: str) -> ExportSummary:
    """Check that ``text`` is a KIP-199 export (``{"<connector>": [entries]}``, entries as an import
    takes them, optionally with the ``"kafka"`` position of a ``--from-beginning`` export).

    Raises ``OffsetsValidationError``; a JSON error is the only problem then, with line and column.
    """
    walker = _Walker(text)
    try:
        return walker.walk()
    except OffsetsValidationError:
        raise
    except json.JSONDecodeError as error:
        problem = f"not valid JSON: {error.msg} at line {error.lineno}, column {error.colno}"
        raise OffsetsValidationError([OffsetsProblem("$", problem)]) from None
    except RecursionError:
        raise OffsetsValidationError([OffsetsProblem("$", "not valid JSON: nested too deeply")]) from None
    except ValueError as error:  # NaN, Infinity, 1e999 (the generic parser's rules)
        raise OffsetsValidationError([OffsetsProblem("$", f"not valid JSON: {error}")]) from None


class _Walker:
    """The top-level object and each connector's list by hand, everything else by the JSON decoder."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.problems = ProblemList()
        self.hook = generic.DuplicateKeys()
        self.decoder = json.JSONDecoder(
            parse_constant=generic.reject_constant, parse_float=generic.parse_float, object_pairs_hook=self.hook
        )

    def _skip(self, pos: int) -> int:
        match = _WHITESPACE.match(self.text, pos)
        return match.end() if match else pos

    def _char(self, pos: int) -> str:
        return self.text[pos : pos + 1]

    def _value(self, pos: int) -> tuple[Any, int]:
        value, end = self.decoder.raw_decode(self.text, pos)
        for key in self.hook.duplicates:
            self._add(
                "$", f"key {json.dumps(key, ensure_ascii=False)} appears twice in one object; keys must be unique"
            )
        self.hook.duplicates.clear()
        return value, end

    def _add(self, path: str, message: str) -> None:
        if len(self.problems.items) < MAX_PROBLEMS:
            self.problems.add(path, message)

    def walk(self) -> ExportSummary:
        pos = self._skip(0)
        if self._char(pos) != "{":
            value, pos = self._value(pos)  # a JSON error, or valid JSON of the wrong type
            self.problems.fail("$", f"expected an object {_ENTRY_SHAPE}, got {describe_value(value)}")
        pos = self._skip(pos + 1)
        names: set[str] = set()
        entries = positions = 0
        if self._char(pos) == "}":
            pos += 1
        else:
            while True:
                if self._char(pos) != '"':
                    raise json.JSONDecodeError("Expecting property name enclosed in double quotes", self.text, pos)
                name, pos = self._value(pos)
                path = name if re.fullmatch(r"[A-Za-z0-9_.-]+", name) else json.dumps(name, ensure_ascii=False)
                if name in names:
                    self._add("$", f"connector {path} appears twice; keys must be unique")
                names.add(name)
                pos = self._skip(pos)
                if self._char(pos) != ":":
                    raise json.JSONDecodeError("Expecting ':' delimiter", self.text, pos)
                pos = self._skip(pos + 1)
                if self._char(pos) == "[":
                    count, with_kafka, pos = self._entries(pos, path)
                    entries, positions = entries + count, positions + with_kafka
                else:
                    value, pos = self._value(pos)
                    self._add(path, self._not_a_list(value))
                pos = self._skip(pos)
                if self._char(pos) == ",":
                    pos = self._skip(pos + 1)
                    continue
                if self._char(pos) == "}":
                    pos += 1
                    break
                raise json.JSONDecodeError("Expecting ',' delimiter", self.text, pos)
        pos = self._skip(pos)
        if pos != len(self.text):
            raise json.JSONDecodeError("Extra data", self.text, pos)
        self.problems.raise_if_any()
        return ExportSummary(len(names), entries, positions)

    def _entries(self, pos: int, path: str) -> tuple[int, int, int]:
        """Each entry of the list at ``pos``: (entries, entries with a position, position after the list)."""
        pos = self._skip(pos + 1)
        count = with_kafka = 0
        if self._char(pos) == "]":
            return 0, 0, pos + 1
        while True:
            entry, pos = self._value(pos)
            with_kafka += self._entry(entry, f"{path}[{count}]")
            count += 1
            pos = self._skip(pos)
            if self._char(pos) == ",":
                pos = self._skip(pos + 1)
                continue
            if self._char(pos) == "]":
                return count, with_kafka, pos + 1
            raise json.JSONDecodeError("Expecting ',' delimiter", self.text, pos)

    def _entry(self, entry: object, path: str) -> int:
        """Check one entry as an import would (plus its ``"kafka"`` object); 1 if it has one."""
        if len(self.problems.items) >= MAX_PROBLEMS:
            return 0
        kafka = 0
        if isinstance(entry, dict) and "kafka" in entry:
            kafka = 1
            self._kafka(entry["kafka"], f"{path}.kafka")
            entry = {k: v for k, v in entry.items() if k != "kafka"}
        problems = ProblemList()
        generic.build_entry(entry, path, problems)
        for problem in problems.items:
            self._add(problem.path, problem.message)
        return kafka

    def _kafka(self, value: object, path: str) -> None:
        if not isinstance(value, dict):
            self._add(path, f"expected an object (topic, partition, offset, timestamp), got {describe_value(value)}")
            return
        for key, item in value.items():
            if key not in _KAFKA_FIELDS:
                self._add(path, f'unknown key "{key}"; expected "topic", "partition", "offset", "timestamp"')
            elif key == "topic" and not isinstance(item, str):
                self._add(f"{path}.topic", f"expected a string, got {describe_value(item)}")
            elif key != "topic" and not (isinstance(item, int) and not isinstance(item, bool)):
                if key == "timestamp" and item is None:
                    continue
                expected = "an integer or null" if key == "timestamp" else "an integer"
                self._add(f"{path}.{key}", f"expected {expected}, got {describe_value(item)}")

    @staticmethod
    def _not_a_list(value: object) -> str:
        if isinstance(value, dict) and set(value) == {"offsets"}:
            return (
                'the KIP-875 form {"offsets": [...]}; expected the KIP-199 form, a list of entries '
                "(connect-offsets export --format kip199, the default)"
            )
        return f'expected a list of {{"partition": ..., "offset": ...}} entries, got {describe_value(value)}'
