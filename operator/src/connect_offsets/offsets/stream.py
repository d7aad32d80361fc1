"""Streaming validation and re-encoding of large offsets documents, and restore documents.

Why streamed: a million-entry document is ~116 MiB of JSON; a parsed tree of it would need
gigabytes. Entries are scanned one at a time, validated in batches of ``ENTRIES_PER_BATCH`` and
written out compact, keeping only a 128-bit digest per partition (duplicates, restore nulls).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from connect_offsets.offsets.document import (
    COMPACT_HEAD,
    COMPACT_TAIL,
    SURROGATE_ESCAPE,
    DuplicateKeys,
    OffsetEntry,
    OffsetsDocument,
    build_entry,
    compact_entries,
    parse_float,
    parse_offsets_document,
    partition_digest,
    reject_constant,
)
from connect_offsets.offsets.problems import OffsetsValidationError, ProblemList
from connect_offsets.offsets.validate import parse_for_connector, translate_replay_from, validate_for_connector

# Why a second path: ``parse_offsets_document`` builds the whole tree, which for a 1,000,000-partition
# document (about 100 MB of JSON) is over a gigabyte of dicts. An alter or restore only needs "is it
# valid?" and the compact text to send, so valid documents are checked entry by entry instead, in
# batches that the ordinary validators see as small documents, and only digests are kept. Any
# problem, or any shape the scanner does not expect, re-runs the whole-document path
# (``parse_for_connector``): it produces the exact messages (paths, first index of a duplicate,
# every problem at once) and decides in the rare cases the fast path cannot (a digest match, an
# escaped surrogate). Valid input gives the same text either way.

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
        compact = source is not None and source.startswith(COMPACT_HEAD) and source.endswith(COMPACT_TAIL)
        self._source = source if compact else None
        self._same_until = len(COMPACT_HEAD) - 1  # the source is the output up to here (before a ",")

    def add(self, entries: Sequence[OffsetEntry], span: tuple[int, int] | None = None) -> None:
        if not entries:
            return
        body = compact_entries(entries)
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
            if self._same_until > len(COMPACT_HEAD):
                self.pieces.append(self._source[len(COMPACT_HEAD) : self._same_until])
            self._source = None

    def text(self, *more: _CompactWriter) -> str:
        extra = [piece for writer in more for piece in writer.pieces]
        source = self._source
        if source is not None and self._same_until == len(source) - len(COMPACT_TAIL):  # all of it matched
            if not extra:
                return source
            # The source plus what follows (a restore's nulls). Grown in place: CPython extends a
            # str held by one local name, so there is no third copy as a join of a slice would make.
            out = source[: -len(COMPACT_TAIL)]
            out += ","
            out += ",".join(extra)
            out += COMPACT_TAIL
            return out
        self._diverge()
        return COMPACT_HEAD + ",".join(self.pieces + extra) + COMPACT_TAIL


def _streamed_entries(text: str, seen: set[int]) -> Iterator[tuple[OffsetEntry, int, int]]:
    """Generically valid entries of ``text``, each partition's digest added to ``seen``; raises
    ``_NeedsWholeDocument`` at the first thing the whole-document path has to judge."""
    if SURROGATE_ESCAPE.search(text):
        raise _NeedsWholeDocument  # paired escapes are fine, lone ones are not: the whole path tells
    hook = DuplicateKeys()
    decoder = json.JSONDecoder(parse_constant=reject_constant, parse_float=parse_float, object_pairs_hook=hook)
    problems = ProblemList()
    for raw, start, end in _scan_entries(text, decoder):
        entry = build_entry(raw, "offsets", problems)
        if entry is None or len(problems) or hook.duplicates:
            raise _NeedsWholeDocument
        digest = partition_digest(entry.partition)
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
        if connector_class is None:
            document = parse_offsets_document(text, allow_empty=allow_empty)
            return (translate_replay_from(document) if translate_replay else document).to_compact_json()
        return parse_for_connector(
            text,
            connector_class,
            config or {},
            is_sink=is_sink,
            translate_replay=translate_replay,
            allow_empty=allow_empty,
        ).to_compact_json()

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


def restore_compact_json(
    backup_text: str,
    current_text: str,
    connector_class: str | None = None,
    config: Mapping[str, str] | None = None,
    *,
    is_sink: bool | None = None,
) -> RestoreDocument:
    """The backup's entries, then ``"offset": null`` for every partition that has an offset in
    ``current_text`` (the connector's GET) but is not in the backup: a PATCH of the backup alone
    would leave those in place. Raises ``OffsetsValidationError`` for an invalid backup.

    With ``connector_class`` the backup also gets the typed checks an ``alter`` gets
    (``validate_for_connector``): a backup is a ConfigMap anyone with write access may have edited,
    and Connect would report a bad sink entry only as a 500 after the connector was stopped.

    Streamed like ``validated_compact_json``: the backup's partitions are remembered as digests.
    """
    backup = _CompactWriter(backup_text)
    kept: set[int] = set()
    try:
        for batch, span in _batches(_streamed_entries(backup_text, kept)):
            if connector_class is not None:
                validate_for_connector(batch, connector_class, config or {}, is_sink=is_sink)
            backup.add(batch.entries, span)
    except (_NeedsWholeDocument, OffsetsValidationError):
        # raises for an invalid backup, with every problem
        document = (
            parse_offsets_document(backup_text, allow_empty=True)
            if connector_class is None
            else parse_for_connector(backup_text, connector_class, config or {}, is_sink=is_sink, allow_empty=True)
        )
        backup = _CompactWriter()
        backup.add(document.entries)
        kept = {partition_digest(entry.partition) for entry in document.entries}
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
        and partition_digest(raw["partition"]) not in kept
    )
    writer = _CompactWriter()
    for batch in _in_batches(nulls):
        writer.add(batch)
    return writer


# --------------------------------------------------------------------------- diffs
