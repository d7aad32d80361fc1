"""Offsets documents in ConfigMaps, including documents far larger than one ConfigMap.

Why: Strimzi's list/alter exchange offsets through one ConfigMap key (``offsets.json``), and a
ConfigMap holds at most 1 MiB of data, so they break at roughly 10,000 source partitions. Source
connectors that track one partition per file or table can carry a million (about 100 MB of JSON).
This module stores such a document in one of three forms and reads all three back:

``plain``
    ``data[<key>]``: the JSON text, as Strimzi users know it. Used whenever it fits.
``gzip``
    ``binaryData[<key>.gz]``: the gzip of the document, when the plain text does not fit but the
    compressed one does (JSON offsets compress about 10:1).
``sharded``
    ``data[<key>.shards]``: an index (JSON) naming shard ConfigMaps
    ``<name>-shard-<generation>-0000``, ``-0001``, ... Each shard holds one slice of a single gzip
    stream in ``binaryData[<key>.gz.<nnnn>]``; the slices, concatenated in index order, are one
    gzip file of the document. The index records, per shard, its name, key, size and sha256, and
    for the whole document its size, sha256, compressed size and partition count.

Reading takes the first form present, in this order: ``data[<key>]`` (plain text), ``binaryData[<key>]``
(plain bytes, as ``kubectl create configmap --from-file`` stores non-UTF-8 files), ``binaryData[<key>.gz]``,
then the index. So a ConfigMap a user edited in plain form is always accepted: the operator
removes the other forms of a key whenever it writes one, so several forms only coexist after a
hand edit, and then the hand-written plain text wins (:attr:`StoredOffsets.ignored` names the
forms that were passed over).

Shards are written *before* the index that names them, under a fresh generation, and the old
shards are deleted only after the main ConfigMap points at the new ones: a reader never sees a
half-written set, and a crash leaves unreferenced shards that the next write of that key sweeps
away. A ConfigMap created here gets the caller's labels and owner references; one that existed
keeps its metadata untouched (it may be an application's: an owner reference would let garbage
collection delete it with the caller's resource). Shards carry the caller's labels and owner
references (garbage collection follows the resource) plus an owner reference to the main
ConfigMap (deleting it removes its shards), the label
``connect-offsets.io/offsets-shard-of=<hash of the ConfigMap name>`` and annotations naming the
ConfigMap, key, generation and position.

Memory: the document exists once as bytes; compression and decompression stream over slices of
it, and only one shard is held in transit at a time. CPU-heavy steps (gzip, hashing, counting
partitions) run in a thread so the operator's event loop stays responsive.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import json
import logging
import secrets
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from connect_offsets.clients import limits
from connect_offsets.clients.kubernetes import (
    ConfigMapData,
    KubernetesApi,
    KubernetesError,
    KubernetesRejected,
    KubernetesUnavailable,
)
from connect_offsets.errors import ConnectOffsetsError, UserError
from connect_offsets.offsets.chunking import OffsetsStreamError, count_entries
from connect_offsets.vocabulary import (
    API_GROUP,
    short_hash,
)

__all__ = [
    "CONFIGMAP_MAX_BYTES",
    "FORMAT",
    "FORMAT_VERSION",
    "GZIP_SUFFIX",
    "INDEX_SUFFIX",
    "MAX_PAYLOAD_BYTES",
    "NOT_A_SHARD",
    "SHARD_LABEL",
    "OffsetsConfigMapStore",
    "OffsetsCorrupt",
    "OffsetsKeyMissing",
    "OffsetsStoreError",
    "ShardIndex",
    "ShardInfo",
    "StoredForm",
    "StoredOffsets",
    "WriteResult",
]

log = logging.getLogger(__name__)

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

_SLICE: Final = 1024 * 1024  # bytes fed to zlib per call
_MAX_NAME: Final = 253
_CONFLICT_RETRIES: Final = 5


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


@dataclass(frozen=True)
class _Swept:
    """What a clean-up of stale shards did: deleted, left in place, and the first refusal."""

    removed: tuple[str, ...]
    left: tuple[str, ...]
    error: str


def name_hash(configmap: str) -> str:
    """Label value tying shards to their ConfigMap (names can exceed a label value's 63 chars)."""
    return short_hash(configmap)


def shard_name(configmap: str, generation: str, position: int) -> str:
    suffix = f"-shard-{generation}-{position:04d}"
    base = configmap[: _MAX_NAME - len(suffix)].rstrip("-.")
    return base + suffix


def _form_keys(key: str) -> tuple[str, str, str]:
    return key, key + GZIP_SUFFIX, key + INDEX_SUFFIX


def _gzip(document: bytes | bytearray | memoryview, level: int) -> bytearray:
    """gzip of ``document``, fed to zlib in slices (no second full-size buffer)."""
    compressor = zlib.compressobj(level, zlib.DEFLATED, 31)  # wbits 31: gzip header and trailer
    out = bytearray()
    view = memoryview(document)
    for start in range(0, len(view), _SLICE):
        out += compressor.compress(view[start : start + _SLICE])
    out += compressor.flush()
    return out


def _sha256(data: bytes | bytearray | memoryview) -> str:
    return hashlib.sha256(data).hexdigest()


def _pretty(document: bytes) -> bytes | None:
    """Strimzi-like indented JSON for small documents; None if it is not JSON."""
    try:
        return (json.dumps(json.loads(document), indent=2, ensure_ascii=False) + "\n").encode()
    except (ValueError, RecursionError):
        return None


def _is_utf8(document: bytes | bytearray | memoryview) -> bool:
    try:
        bytes(document).decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


#: Output of one decompression step: a gzip bomb never inflates by more than this past the cap.
_INFLATE_STEP: Final = 1 << 20


def _inflate_steps(decompressor: Any, data: bytes, where: str, part: str) -> Iterator[bytes]:
    """Decompress ``data`` in steps of at most ``_INFLATE_STEP`` output bytes.

    One ``decompress(data)`` call would inflate a 200 KB bomb to 1 GiB before any size check.
    """
    pending = data
    while pending and not decompressor.eof:
        try:
            out = decompressor.decompress(pending, _INFLATE_STEP)
        except zlib.error as error:
            raise OffsetsCorrupt(f"{where}: {part} is not valid gzip data ({error})") from error
        pending = decompressor.unconsumed_tail
        yield out


def _inflated_size(data: bytes, limit: int, where: str) -> int:
    """The size ``data`` inflates to, read without keeping it; ``OffsetsTooLarge`` past ``limit``.

    A first pass in constant memory, so refusing a bomb costs CPU only (zlib releases the GIL, and
    this runs in a thread): the tenant's ConfigMap is never inflated into the operator's memory.
    """
    size = 0
    for out in _inflate_steps(zlib.decompressobj(31), data, where, "it"):
        size += len(out)
        if size > limit:
            raise OffsetsTooLarge(where, limit)
    return size


class _Inflater:
    """Streaming gunzip with a running sha256 and size bound; one shard's input at a time."""

    def __init__(self, where: str, limit: int) -> None:
        self.where = where
        self.limit = limit
        self.decompressor = zlib.decompressobj(31)
        self.output = io.BytesIO()
        self.digest = hashlib.sha256()
        self.size = 0

    def feed(self, data: bytes, part: str) -> None:
        if self.decompressor.eof:
            raise OffsetsCorrupt(f"{self.where}: data after the end of the gzip stream in {part}")
        for out in _inflate_steps(self.decompressor, data, self.where, part):
            self.size += len(out)
            if self.size > self.limit:
                raise OffsetsTooLarge(self.where, self.limit)
            self.digest.update(out)
            self.output.write(out)

    def finish(self, part: str) -> bytes:
        if not self.decompressor.eof:
            raise OffsetsCorrupt(f"{self.where}: the gzip stream ends early (after {part}); data is missing")
        if self.decompressor.unused_data:
            raise OffsetsCorrupt(f"{self.where}: unexpected bytes after the end of the gzip stream in {part}")
        # BytesIO hands over its buffer without copying when nothing else references it.
        return self.output.getvalue()


class OffsetsConfigMapStore:
    """Reads and writes offsets documents in ConfigMaps in the plain, gzip or sharded form."""

    def __init__(
        self,
        kube: KubernetesApi,
        *,
        max_payload_bytes: int = MAX_PAYLOAD_BYTES,
        compression_level: int = 6,
        max_document_bytes: int | None = None,
    ) -> None:
        if not 1024 <= max_payload_bytes <= CONFIGMAP_MAX_BYTES:
            raise ValueError(f"max_payload_bytes must be between 1024 and {CONFIGMAP_MAX_BYTES}")
        self.kube = kube
        self.max_payload_bytes = max_payload_bytes
        self.compression_level = compression_level
        # (namespace, ConfigMap, key) -> (resourceVersion, refusal): a document refused for its
        # size is refused again without inflating it again, until the ConfigMap changes
        # (applyOnChange and a pending alter re-read it every drift interval).
        self._too_large: dict[tuple[str, str, str], tuple[str, OffsetsTooLarge]] = {}
        # Documents read back larger than this are refused (a gzip bomb in a tenant's ConfigMap).
        self.max_document_bytes = max_document_bytes if max_document_bytes is not None else limits.max_document_bytes()

    # --- writing --------------------------------------------------------------------------

    async def write(
        self,
        namespace: str,
        name: str,
        key: str,
        document: bytes | Mapping[str, Any],
        *,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
        owner_references: Sequence[Mapping[str, Any]] = (),
        partitions: int | None = None,
        pretty: bool = True,
        claim_only_if: str | None = None,
    ) -> WriteResult:
        """Store ``document`` (JSON bytes, or a decoded document) under ``key`` of ConfigMap ``name``.

        Creates the ConfigMap if needed, with ``labels``, ``annotations`` and ``owner_references``;
        otherwise keeps its other keys and leaves its metadata exactly as it is. A ConfigMap that
        already exists may belong to an application: an owner reference to the caller's resource
        would hand its lifetime to that resource (garbage collection deletes it with the
        resource), and the caller's labels would overwrite the app's (``managed-by``...). One this
        store created already carries them. Shards get them too (plus the owner reference to the
        main ConfigMap), except the shards of a ConfigMap ``claim_only_if`` says is not ours: they
        follow that ConfigMap only, so deleting the caller's resource cannot break its index. The
        smallest form that fits is chosen: plain (indented like Strimzi's when ``pretty`` and that
        fits, else as given), gzip, then shards. Stale forms and shards of this key are removed.
        ``partitions``: the entry count if the caller knows it; otherwise it is counted for the
        gzip and sharded forms.
        ``claim_only_if``: a label the caller puts on the ConfigMaps it creates; an existing
        ConfigMap without it gets only the document, no labels, annotations or owner references.
        """
        if isinstance(document, Mapping):
            data = json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()
            if partitions is None and isinstance(document.get("offsets"), list):
                partitions = len(document["offsets"])
        else:
            data = document
        plain_key, gzip_key, _ = _form_keys(key)
        labels = dict(labels or {})
        annotations = dict(annotations or {})
        current = await self.kube.get_configmap(namespace, name)
        if current is not None and claim_only_if is not None and claim_only_if not in current.labels:
            # Someone else's ConfigMap (an app's, a GitOps tool's): write the key and nothing else.
            # An owner reference would hand its lifetime to our resource (deleting the resource
            # would garbage-collect it), and our labels would overwrite theirs (managed-by).
            labels, annotations, owner_references = {}, {}, ()
        budget = self.max_payload_bytes - _other_payload(current, key)

        form: StoredForm
        plain: bytes | None = None
        compressed: bytearray | None = None
        if len(data) <= budget:
            pretty_data = _pretty(data) if pretty else None
            if pretty_data is not None and len(pretty_data) <= budget:
                plain = pretty_data
            elif _is_utf8(data):
                plain = data
        if plain is not None:
            form = StoredForm.PLAIN
            if partitions is None:
                partitions = _count_small(plain)
        else:
            # Two threads: zlib releases the GIL while it compresses, so counting overlaps it.
            gzip_job = asyncio.to_thread(_gzip, data, self.compression_level)
            if partitions is None:
                packed, partitions = await asyncio.gather(gzip_job, asyncio.to_thread(_count_or_none, data))
            else:
                packed = await gzip_job
            compressed = packed
            form = StoredForm.GZIP if len(packed) <= budget else StoredForm.SHARDED

        main_uid = current.uid if current is not None else ""
        if current is None and form is not StoredForm.SHARDED:
            body = _main_body(name, labels, annotations, owner_references)
            if plain is not None:
                body["data"] = {plain_key: plain.decode()}
            else:
                assert compressed is not None
                body["binaryData"] = {gzip_key: base64.b64encode(compressed).decode()}
            try:
                await self.kube.create_configmap_uid(namespace, body)
                # A new ConfigMap has no shards of its own: those of one deleted before it follow
                # their owner reference to the garbage collector, and no index names them.
                return self._result(name, key, form, data, plain, compressed, partitions, (), _Swept((), (), ""))
            except KubernetesUnavailable as error:
                if error.status != 409:
                    raise
                current = None  # created meanwhile: fall through to the patch path
        if current is None and main_uid == "":
            main_uid = await self._ensure_main(namespace, name, labels, annotations, owner_references)

        shard_names: tuple[str, ...] = ()
        index_json: str | None = None
        if form is StoredForm.SHARDED:
            assert compressed is not None
            index = await self._write_shards(
                namespace, name, key, data, compressed, partitions, labels, owner_references, main_uid
            )
            shard_names = tuple(s.name for s in index.shards)
            index_json = index.to_json()
        try:
            await self._switch(namespace, name, key, plain, compressed, form, index_json)
        except BaseException:
            if shard_names:
                await self._delete_quietly(namespace, shard_names)
            raise
        if form is StoredForm.SHARDED or (current is not None and _form_keys(key)[2] in current.data):
            swept = await self._sweep(namespace, name, key, keep=shard_names)
        else:
            # Neither this form nor the one it replaces has shards: no list on every write
            # (a ``list`` request's hot path). Shards of a write that died half-way have an owner
            # reference to this ConfigMap and are swept by the next sharded write.
            swept = _Swept((), (), "")
        return self._result(name, key, form, data, plain, compressed, partitions, shard_names, swept)

    @staticmethod
    def _result(
        name: str,
        key: str,
        form: StoredForm,
        data: bytes,
        plain: bytes | None,
        compressed: bytearray | None,
        partitions: int | None,
        shards: tuple[str, ...],
        swept: _Swept,
    ) -> WriteResult:
        size = len(plain) if plain is not None else len(data)
        stored = len(plain) if plain is not None else len(compressed or b"")
        return WriteResult(name, key, form, size, stored, partitions, shards, swept.removed, swept.left, swept.error)

    async def _ensure_main(
        self,
        namespace: str,
        name: str,
        labels: Mapping[str, str],
        annotations: Mapping[str, str],
        owner_references: Sequence[Mapping[str, Any]],
    ) -> str:
        """Create the main ConfigMap without the key (shards need its uid); or find the uid."""
        try:
            return await self.kube.create_configmap_uid(
                namespace, _main_body(name, labels, annotations, owner_references)
            )
        except KubernetesUnavailable as error:
            if error.status != 409:
                raise
        existing = await self.kube.get_configmap(namespace, name)
        if existing is None:
            raise KubernetesUnavailable(f"ConfigMap {namespace}/{name} was created and deleted meanwhile")
        return existing.uid

    async def _write_shards(
        self,
        namespace: str,
        name: str,
        key: str,
        data: bytes,
        compressed: bytearray,
        partitions: int | None,
        labels: Mapping[str, str],
        owner_references: Sequence[Mapping[str, Any]],
        main_uid: str,
    ) -> ShardIndex:
        generation = secrets.token_hex(4)
        owners = [dict(o) for o in owner_references]
        if main_uid:
            owners.append(
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "name": name,
                    "uid": main_uid,
                    "controller": False,
                    "blockOwnerDeletion": False,
                }
            )
        view = memoryview(compressed)
        shards: list[ShardInfo] = []
        try:
            for position, start in enumerate(range(0, len(view), self.max_payload_bytes)):
                piece = view[start : start + self.max_payload_bytes]
                info = ShardInfo(
                    name=shard_name(name, generation, position),
                    key=f"{key}{GZIP_SUFFIX}.{position:04d}",
                    size=len(piece),
                    sha256=_sha256(piece),
                )
                body = {
                    "metadata": {
                        "name": info.name,
                        "labels": {**labels, SHARD_LABEL: name_hash(name)},
                        "annotations": {
                            SHARD_CONFIGMAP_ANNOTATION: name,
                            SHARD_KEY_ANNOTATION: key,
                            SHARD_GENERATION_ANNOTATION: generation,
                            SHARD_POSITION_ANNOTATION: str(position),
                        },
                        "ownerReferences": owners,
                    },
                    "binaryData": {info.key: base64.b64encode(piece).decode()},
                }
                await self.kube.create_configmap(namespace, body)
                shards.append(info)
                del body
        except BaseException:
            await self._delete_quietly(namespace, [s.name for s in shards])
            raise
        document_sha = await asyncio.to_thread(_sha256, data)
        return ShardIndex(
            key=key,
            size=len(data),
            sha256=document_sha,
            compressed_size=len(compressed),
            partitions=partitions,
            generation=generation,
            shards=tuple(shards),
        )

    async def _switch(
        self,
        namespace: str,
        name: str,
        key: str,
        plain: bytes | None,
        compressed: bytearray | None,
        form: StoredForm,
        index_json: str | None,
    ) -> None:
        """Point the main ConfigMap at the new form in one patch; the other forms are removed.

        Only data changes: ``_ensure_main`` gave a ConfigMap created here its metadata, and one
        that existed keeps its own (see ``write``)."""
        plain_key, gzip_key, index_key = _form_keys(key)
        data_patch: dict[str, str | None] = {plain_key: None, index_key: None}
        binary_patch: dict[str, str | None] = {plain_key: None, gzip_key: None}
        if form is StoredForm.PLAIN:
            assert plain is not None
            data_patch[plain_key] = plain.decode()
        elif form is StoredForm.GZIP:
            assert compressed is not None
            binary_patch[gzip_key] = base64.b64encode(compressed).decode()
        else:
            data_patch[index_key] = index_json
        for _ in range(_CONFLICT_RETRIES):
            current = await self.kube.get_configmap(namespace, name)
            if current is None:
                raise KubernetesUnavailable(f"ConfigMap {namespace}/{name} was deleted while offsets were written")
            patch: dict[str, Any] = {
                "data": data_patch,
                "binaryData": binary_patch,
            }
            try:
                await self.kube.patch_configmap(namespace, name, patch, resource_version=current.resource_version)
                return
            except KubernetesUnavailable as error:
                if error.status == 409:
                    continue
                raise
        raise KubernetesUnavailable(f"patch ConfigMap {namespace}/{name}: kept conflicting with other writers")

    async def _sweep(self, namespace: str, name: str, key: str, keep: Sequence[str]) -> _Swept:
        """Delete this key's shards that the current form does not use (stale or orphaned)."""
        try:
            found = await self.kube.list_configmap_metadata(namespace, f"{SHARD_LABEL}={name_hash(name)}")
        except KubernetesError as error:
            log.warning("could not list old offsets shards of %s/%s: %s", namespace, name, error)
            return _Swept((), (), str(error))
        stale = [
            meta.name
            for meta in found
            if meta.annotations.get(SHARD_CONFIGMAP_ANNOTATION) == name
            and meta.annotations.get(SHARD_KEY_ANNOTATION) == key
            and meta.name not in keep
        ]
        return await self._delete_quietly(namespace, stale)

    async def _delete_quietly(self, namespace: str, names: Sequence[str]) -> _Swept:
        """Delete what can be deleted; a refusal never fails the write that made these shards stale."""
        removed: list[str] = []
        left: list[str] = []
        first_error = ""
        for shard in names:
            try:
                await self.kube.delete_configmap(namespace, shard)
                removed.append(shard)
            except KubernetesError as error:  # swept by the next write of this key
                log.warning("could not delete offsets shard %s/%s: %s", namespace, shard, error)
                left.append(shard)
                first_error = first_error or str(error)
        return _Swept(tuple(removed), tuple(left), first_error)

    # --- reading --------------------------------------------------------------------------

    async def read(self, namespace: str, name: str, key: str) -> StoredOffsets | None:
        """The document under ``key`` of ConfigMap ``name`` in whichever form it is stored.

        ``None`` if the ConfigMap does not exist; :class:`OffsetsKeyMissing` if it holds no form
        of the key; :class:`OffsetsCorrupt` naming the shard or key when a stored form is broken.
        """
        current = await self.kube.get_configmap(namespace, name)
        if current is None:
            return None
        return await self.read_from(namespace, current, key)

    async def read_from(self, namespace: str, current: ConfigMapData, key: str) -> StoredOffsets:
        """Like :meth:`read`, for a ConfigMap already fetched (shards are fetched as needed)."""
        where = (namespace, current.name, key)
        refused = self._too_large.get(where)
        if refused is not None and refused[0] == current.resource_version:
            raise refused[1].with_traceback(None)
        self._too_large.pop(where, None)
        try:
            return await self._read_from(namespace, current, key)
        except OffsetsTooLarge as error:
            if len(self._too_large) >= 1024:  # bounded: forget the oldest refusal
                self._too_large.pop(next(iter(self._too_large)))
            self._too_large[where] = (current.resource_version, error)
            raise

    async def _read_from(self, namespace: str, current: ConfigMapData, key: str) -> StoredOffsets:
        plain_key, gzip_key, index_key = _form_keys(key)
        name = current.name
        present = [
            k
            for k, there in (
                (plain_key, plain_key in current.data),
                (plain_key, plain_key in current.binary_data),
                (gzip_key, gzip_key in current.binary_data),
                (index_key, index_key in current.data),
            )
            if there
        ]
        if not present:
            raise OffsetsKeyMissing(name, key, sorted({*current.data, *current.binary_data}))
        ignored = tuple(k for k in dict.fromkeys(present[1:]) if k != present[0])
        rv = current.resource_version
        if plain_key in current.data:
            document = current.data[plain_key].encode()
            return StoredOffsets(name, key, StoredForm.PLAIN, document, rv, ignored=ignored)
        if plain_key in current.binary_data:
            return StoredOffsets(name, key, StoredForm.PLAIN, current.binary_data[plain_key], rv, ignored=ignored)
        if gzip_key in current.binary_data:
            where = f"ConfigMap {name} key {gzip_key}"
            packed = current.binary_data[gzip_key]
            size = await asyncio.to_thread(_inflated_size, packed, self.max_document_bytes, where)
            inflater = _Inflater(where, size)
            await asyncio.to_thread(inflater.feed, packed, "it")
            document = inflater.finish("its last byte")
            return StoredOffsets(name, key, StoredForm.GZIP, document, rv, ignored=ignored)
        where = f"ConfigMap {name} key {index_key}"
        index = ShardIndex.from_json(current.data[index_key], where)
        if index.size > self.max_document_bytes:
            raise OffsetsTooLarge(where, self.max_document_bytes)
        document = await self._read_shards(namespace, name, index, where)
        return StoredOffsets(
            name,
            key,
            StoredForm.SHARDED,
            document,
            rv,
            partitions=index.partitions,
            shards=tuple(s.name for s in index.shards),
            ignored=ignored,
        )

    async def _read_shards(self, namespace: str, name: str, index: ShardIndex, where: str) -> bytes:
        inflater = _Inflater(where, min(self.max_document_bytes, index.size))
        total = len(index.shards)
        if total == 0:
            raise OffsetsCorrupt(f"{where}: the shard index lists no shards")
        compressed = 0
        for position, shard in enumerate(index.shards):
            part = f"shard {shard.name} ({position + 1} of {total})"
            try:
                found = await self.kube.get_configmap(namespace, shard.name)
            except KubernetesRejected as error:
                raise OffsetsCorrupt(f"{where}: cannot read {part}: {error}") from error
            if found is None:
                raise OffsetsCorrupt(f"{where}: {part} does not exist")
            data = found.binary_data.get(shard.key)
            del found
            if data is None:
                raise OffsetsCorrupt(f"{where}: {part} has no binaryData key {shard.key}")
            if len(data) != shard.size:
                raise OffsetsCorrupt(
                    f"{where}: {part} holds {len(data)} bytes, the index says {shard.size}; it was changed"
                )
            digest = await asyncio.to_thread(_sha256, data)
            if digest != shard.sha256:
                raise OffsetsCorrupt(
                    f"{where}: {part} has sha256 {digest}, the index says {shard.sha256}; it was changed"
                )
            compressed += len(data)
            await asyncio.to_thread(inflater.feed, data, part)
            del data
        document = inflater.finish(f"shard {index.shards[-1].name} ({total} of {total})")
        if len(document) != index.size or inflater.digest.hexdigest() != index.sha256:
            raise OffsetsCorrupt(
                f"{where}: the reassembled document ({len(document)} bytes, sha256 {inflater.digest.hexdigest()}) "
                f"does not match the index ({index.size} bytes, sha256 {index.sha256})"
            )
        return document

    # --- removal --------------------------------------------------------------------------

    async def delete_shards(self, namespace: str, name: str, key: str | None = None) -> tuple[str, ...]:
        """Delete the shards of one key (or of every key) of ConfigMap ``name``; returns their names.

        Deleting the main ConfigMap removes them too, through their owner reference, wherever the
        garbage collector runs; this is for clean-up without waiting for it.
        """
        found = await self.kube.list_configmap_metadata(namespace, f"{SHARD_LABEL}={name_hash(name)}")
        names = [
            meta.name
            for meta in found
            if meta.annotations.get(SHARD_CONFIGMAP_ANNOTATION) == name
            and (key is None or meta.annotations.get(SHARD_KEY_ANNOTATION) == key)
        ]
        return (await self._delete_quietly(namespace, names)).removed


def _main_body(
    name: str,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    owner_references: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "labels": dict(labels)}
    if annotations:
        metadata["annotations"] = dict(annotations)
    if owner_references:
        metadata["ownerReferences"] = [dict(o) for o in owner_references]
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata}


def _other_payload(current: ConfigMapData | None, key: str) -> int:
    """Bytes of the ConfigMap's values that stay (other keys); ours are replaced."""
    if current is None:
        return 0
    ours = set(_form_keys(key))
    text = sum(len(v.encode()) for k, v in current.data.items() if k not in ours)
    binary = sum(len(v) for k, v in current.binary_data.items() if k not in ours)
    return text + binary


def _count_small(document: bytes) -> int | None:
    try:
        obj = json.loads(document)
    except ValueError:
        return None
    offsets = obj.get("offsets") if isinstance(obj, dict) else None
    return len(offsets) if isinstance(offsets, list) else None


def _count_or_none(document: bytes) -> int | None:
    try:
        return count_entries(document)
    except OffsetsStreamError:
        return None
