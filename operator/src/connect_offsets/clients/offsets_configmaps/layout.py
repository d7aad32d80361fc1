"""What is stored where: the three forms, the shard index, shard names and labels, size limits, and
the errors of a stored document that cannot be read.

Separate because it is the format, pure (no I/O, no compression): what a user sees with ``kubectl
get configmap``, what other code selects on (``SHARD_LABEL``, ``NOT_A_SHARD``), and what a reader
must check before trusting shards (:meth:`ShardIndex.from_json`). The package docstring describes
the format in prose.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from connect_offsets.clients.kubernetes import ConfigMapData
from connect_offsets.errors import ConnectOffsetsError, UserError
from connect_offsets.vocabulary import (
    API_GROUP,
    short_hash,
)

#: The API server rejects a ConfigMap whose data and binaryData values add up to more than this
#: ("Too long: may not be more than 1048576 bytes"; keys are not counted).
CONFIGMAP_MAX_BYTES: Final = 1_048_576
#: Room left for whatever we do not count (metadata, managedFields; etcd's request limit is
#: 1.5 MiB by default): payloads stay at most this large, in the main ConfigMap and in every shard.
MAX_PAYLOAD_BYTES: Final = CONFIGMAP_MAX_BYTES - 64 * 1024

FORMAT: Final = f"{API_GROUP}/offsets-shards"
FORMAT_VERSION: Final = 1
GZIP_SUFFIX: Final = ".gz"
INDEX_SUFFIX: Final = ".shards"
SHARD_LABEL: Final = f"{API_GROUP}/offsets-shard-of"
#: Add to a label selector that must not match shards: they carry the caller's labels (so
#: label-based clean-up reaches them), e.g. ``connect-offsets.io/backup-of=x`` of a backup.
NOT_A_SHARD: Final = f"!{SHARD_LABEL}"
SHARD_CONFIGMAP_ANNOTATION: Final = f"{API_GROUP}/offsets-shard-configmap"
SHARD_KEY_ANNOTATION: Final = f"{API_GROUP}/offsets-shard-key"
SHARD_GENERATION_ANNOTATION: Final = f"{API_GROUP}/offsets-shard-generation"
SHARD_POSITION_ANNOTATION: Final = f"{API_GROUP}/offsets-shard-position"

_MAX_NAME: Final = 253


class StoredForm(StrEnum):
    PLAIN = "plain"
    GZIP = "gzip"
    SHARDED = "sharded"


class OffsetsStoreError(ConnectOffsetsError):
    """An offsets document could not be read from or written to its ConfigMap(s)."""


class OffsetsKeyMissing(OffsetsStoreError, UserError):
    """The ConfigMap exists but holds the key in none of the three forms."""

    def __init__(self, configmap: str, key: str, keys: Sequence[str]) -> None:
        self.configmap = configmap
        self.key = key
        self.keys = list(keys)
        found = ", ".join(self.keys) or "none"
        super().__init__(
            f"ConfigMap {configmap} has no key {key} (nor {key}{GZIP_SUFFIX} or {key}{INDEX_SUFFIX}); keys: {found}"
        )


class OffsetsCorrupt(OffsetsStoreError, UserError):
    """A stored form is unreadable: bad index, missing or altered shard, broken gzip."""


class OffsetsTooLarge(OffsetsCorrupt):
    """The stored document inflates past the operator's document cap (a gzip bomb, or too large)."""

    reason = "DocumentTooLarge"

    def __init__(self, where: str, limit: int) -> None:
        super().__init__(
            f"{where}: the document inflates beyond {limit} bytes; refused before parsing "
            "(the operator's cap CONNECT_OFFSETS_MAX_DOCUMENT_BYTES, chart value maxDocumentBytes)"
        )
        self.limit = limit


@dataclass(frozen=True)
class ShardInfo:
    name: str
    key: str
    size: int
    sha256: str

    def to_json_obj(self) -> dict[str, Any]:
        return {"name": self.name, "key": self.key, "size": self.size, "sha256": self.sha256}


@dataclass(frozen=True)
class ShardIndex:
    """The index of a sharded document, stored as JSON in ``data[<key>.shards]``."""

    key: str
    size: int
    sha256: str
    compressed_size: int
    partitions: int | None
    generation: str
    shards: tuple[ShardInfo, ...]

    def to_json(self) -> str:
        obj = {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "key": self.key,
            "encoding": "gzip",
            "size": self.size,
            "sha256": self.sha256,
            "compressedSize": self.compressed_size,
            "partitions": self.partitions,
            "generation": self.generation,
            "shards": [s.to_json_obj() for s in self.shards],
        }
        return json.dumps(obj, indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str, where: str) -> ShardIndex:
        """Parse and check an index; ``where`` (``ConfigMap x key y``) prefixes every error."""
        try:
            obj = json.loads(text)
        except ValueError as error:
            raise OffsetsCorrupt(f"{where}: the shard index is not valid JSON: {error}") from error
        if not isinstance(obj, dict):
            raise OffsetsCorrupt(f"{where}: the shard index must be a JSON object")
        if obj.get("format") != FORMAT:
            raise OffsetsCorrupt(f"{where}: the shard index has format {obj.get('format')!r}, expected {FORMAT!r}")
        if obj.get("version") != FORMAT_VERSION:
            raise OffsetsCorrupt(
                f"{where}: the shard index has version {obj.get('version')!r}; this operator reads {FORMAT_VERSION}"
            )
        if obj.get("encoding") != "gzip":
            raise OffsetsCorrupt(f"{where}: the shard index has encoding {obj.get('encoding')!r}, expected 'gzip'")
        try:
            shards = tuple(
                ShardInfo(name=_str(s["name"]), key=_str(s["key"]), size=_int(s["size"]), sha256=_str(s["sha256"]))
                for s in obj["shards"]
            )
            partitions = obj.get("partitions")
            return cls(
                key=_str(obj["key"]),
                size=_int(obj["size"]),
                sha256=_str(obj["sha256"]),
                compressed_size=_int(obj["compressedSize"]),
                partitions=None if partitions is None else _int(partitions),
                generation=_str(obj.get("generation", "")),
                shards=shards,
            )
        except (KeyError, TypeError, ValueError) as error:
            raise OffsetsCorrupt(f"{where}: the shard index is incomplete or mistyped: {error!r}") from error


def _str(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return value


def _int(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise TypeError(f"expected an integer >= 0, got {value!r}")
    return value


@dataclass(frozen=True)
class StoredOffsets:
    """A document read back. ``document`` is the JSON bytes exactly as stored (plain text as UTF-8)."""

    configmap: str
    key: str
    form: StoredForm
    document: bytes
    resource_version: str
    partitions: int | None = None  # known for the sharded form (from the index)
    shards: tuple[str, ...] = ()
    ignored: tuple[str, ...] = ()  # keys of other forms that were present but passed over


@dataclass(frozen=True)
class WriteResult:
    configmap: str
    key: str
    form: StoredForm
    size: int  # document bytes as stored before compression
    stored_bytes: int  # payload bytes written (compressed for gzip/sharded)
    partitions: int | None
    shards: tuple[str, ...] = ()
    removed_shards: tuple[str, ...] = ()
    #: Stale shards that could not be deleted (e.g. no RBAC ``delete``): the document itself was
    #: written, and the next write of this key sweeps them again; the caller reports them.
    left_shards: tuple[str, ...] = ()
    #: Why the first of ``left_shards`` could not be deleted (the API server's answer).
    cleanup_error: str = ""
    #: ``vocabulary.short_hash`` of the document as a read gives it back (``content_hash`` of the
    #: planner): how applyOnChange tells the operator's own list from a user's edit.
    document_hash: str = ""

    def describe(self) -> str:
        where = f"ConfigMap {self.configmap} key {self.key}"
        if self.form is StoredForm.PLAIN:
            return f"{where} (plain, {self.size} bytes)"
        if self.form is StoredForm.GZIP:
            return f"{where}{GZIP_SUFFIX} (gzip, {self.size} bytes compressed to {self.stored_bytes})"
        return (
            f"{where}{INDEX_SUFFIX} (gzip in {len(self.shards)} shard ConfigMaps, "
            f"{self.size} bytes compressed to {self.stored_bytes})"
        )


def name_hash(configmap: str) -> str:
    """Label value tying shards to their ConfigMap (names can exceed a label value's 63 chars)."""
    return short_hash(configmap)


def shard_name(configmap: str, generation: str, position: int) -> str:
    suffix = f"-shard-{generation}-{position:04d}"
    base = configmap[: _MAX_NAME - len(suffix)].rstrip("-.")
    return base + suffix


def _form_keys(key: str) -> tuple[str, str, str]:
    return key, key + GZIP_SUFFIX, key + INDEX_SUFFIX


def main_body(
    name: str,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    owner_references: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    """The body of a main ConfigMap the store creates (its data is added by the caller)."""
    metadata: dict[str, Any] = {"name": name, "labels": dict(labels)}
    if annotations:
        metadata["annotations"] = dict(annotations)
    if owner_references:
        metadata["ownerReferences"] = [dict(o) for o in owner_references]
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata}


def other_payload(current: ConfigMapData | None, key: str) -> int:
    """Bytes of the ConfigMap's values that stay (other keys); ours are replaced."""
    if current is None:
        return 0
    ours = set(_form_keys(key))
    text = sum(len(v.encode()) for k, v in current.data.items() if k not in ours)
    binary = sum(len(v) for k, v in current.binary_data.items() if k not in ours)
    return text + binary
