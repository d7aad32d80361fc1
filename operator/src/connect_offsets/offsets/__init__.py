"""Offsets documents: parse, validate, stream, restore, diff and chunk them; pure, no I/O.

The package re-exports its public names so there is one obvious import path
(``from connect_offsets.offsets import parse_offsets_document``), as httpx does; the modules say
where each concern lives: ``problems`` (how problems are collected and reported), ``document``
(the document and its generic parsing), ``validate`` (per connector family), ``stream`` (large
documents, restore), ``diff`` (dry runs), ``chunking`` (PATCHes of bounded size).
"""

from connect_offsets.offsets.diff import (
    OffsetsDiff,
    diff_offsets,
    reset_diff,
)
from connect_offsets.offsets.document import (
    OffsetEntry,
    OffsetsDocument,
    document_text,
    parse_offsets_document,
    parse_offsets_obj,
    partition_key,
)
from connect_offsets.offsets.problems import (
    MAX_KEPT_PROBLEMS,
    MAX_LISTED_PROBLEMS,
    OffsetsProblem,
    OffsetsValidationError,
    Primitive,
)
from connect_offsets.offsets.stream import (
    ENTRIES_PER_BATCH,
    RestoreDocument,
    restore_compact_json,
    validated_compact_json,
)
from connect_offsets.offsets.validate import (
    FILE_STREAM_SINK_CLASS,
    FILE_STREAM_SOURCE_CLASS,
    MIRROR_CHECKPOINT_CLASS,
    MIRROR_HEARTBEAT_CLASS,
    MIRROR_SOURCE_ALIAS_DEFAULT,
    MIRROR_SOURCE_CLASS,
    parse_for_connector,
    translate_replay_from,
    validate_file_stream_source,
    validate_for_connector,
    validate_mirror_checkpoint,
    validate_mirror_heartbeat,
    validate_mirror_source,
    validate_sink,
)

__all__ = [
    "ENTRIES_PER_BATCH",
    "FILE_STREAM_SINK_CLASS",
    "FILE_STREAM_SOURCE_CLASS",
    "MAX_KEPT_PROBLEMS",
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
    "parse_for_connector",
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
