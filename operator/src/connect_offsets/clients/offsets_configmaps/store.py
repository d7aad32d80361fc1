"""The store: :class:`OffsetsConfigMapStore` writes a document in the smallest form that fits and
reads any form back, through the Kubernetes API.

Separate because this is the I/O and the ordering that makes it crash-safe (shards before the
index, old shards swept after the switch, conflicts retried); the format it writes is in
``layout`` and the compression in ``codec``. Writing and reading stay in one class: they share the
Kubernetes client, the shard clean-up and the cache of refused documents.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from connect_offsets.clients import limits
from connect_offsets.clients.kubernetes import (
    ConfigMapData,
    KubernetesApi,
    KubernetesError,
    KubernetesRejected,
    KubernetesUnavailable,
    retry_on_conflict,
)
from connect_offsets.clients.offsets_configmaps.codec import (
    _count_or_none,
    _count_small,
    _gzip,
    _inflated_size,
    _Inflater,
    _is_utf8,
    _pretty,
    _sha256,
)
from connect_offsets.clients.offsets_configmaps.layout import (
    CONFIGMAP_MAX_BYTES,
    GZIP_SUFFIX,
    MAX_PAYLOAD_BYTES,
    SHARD_CONFIGMAP_ANNOTATION,
    SHARD_GENERATION_ANNOTATION,
    SHARD_KEY_ANNOTATION,
    SHARD_LABEL,
    SHARD_POSITION_ANNOTATION,
    OffsetsCorrupt,
    OffsetsKeyMissing,
    OffsetsTooLarge,
    ShardIndex,
    ShardInfo,
    StoredForm,
    StoredOffsets,
    WriteResult,
    _form_keys,
    main_body,
    name_hash,
    other_payload,
    shard_name,
)
from connect_offsets.clients.offsets_configmaps.remembered import RememberedConfigMaps
from connect_offsets.vocabulary import bytes_hash

# The package's name, as before the split into modules: log lines keep the logger name they had.
log = logging.getLogger("connect_offsets.clients.offsets_configmaps")


@dataclass(frozen=True)
class _Swept:
    """What a clean-up of stale shards did: deleted, left in place, and the first refusal."""

    removed: tuple[str, ...]
    left: tuple[str, ...]
    error: str


@dataclass(frozen=True, slots=True)
class _WriteRequest:
    """What one ``write`` stores, and where: the same whichever ConfigMap it starts from."""

    namespace: str
    name: str
    key: str
    data: bytes
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    owner_references: Sequence[Mapping[str, Any]]
    partitions: int | None  # None: counted when the form needs it
    pretty: bool
    claim_only_if: str | None


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
        self.remembered = RememberedConfigMaps()
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
        new_name: bool = False,
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
        ``new_name``: a name the caller made up (a backup's): created without reading it first.
        """
        if isinstance(document, Mapping):
            data = json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()
            if partitions is None and isinstance(document.get("offsets"), list):
                partitions = len(document["offsets"])
        else:
            data = document
        request = _WriteRequest(
            namespace=namespace,
            name=name,
            key=key,
            data=data,
            labels=dict(labels or {}),
            annotations=dict(annotations or {}),
            owner_references=owner_references,
            partitions=partitions,
            pretty=pretty,
            claim_only_if=claim_only_if,
        )
        if new_name:
            return await self._write_from(None, request, remembered=False)
        known = self.remembered.take(namespace, name)
        if known is not None:
            # Our last write's answer instead of a GET (see remembered.py): its resourceVersion
            # guards the patch; a change or deletion since fails it, and we start from a read.
            try:
                return await self._write_from(known, request, remembered=True)
            except (KubernetesUnavailable, KubernetesRejected) as error:
                if error.status not in (404, 409):
                    raise
        return await self._write_from(await self.kube.get_configmap(namespace, name), request, remembered=False)

    async def _write_from(
        self, current: ConfigMapData | None, request: _WriteRequest, *, remembered: bool
    ) -> WriteResult:
        """``write`` from ``current``, as read or (``remembered``) as our last write left it."""
        namespace, name, key, data = request.namespace, request.name, request.key, request.data
        partitions = request.partitions  # counted below when None
        plain_key, gzip_key, _ = _form_keys(key)
        claim_only_if = request.claim_only_if
        if current is not None and claim_only_if is not None and claim_only_if not in current.labels:
            # Someone else's ConfigMap (an app's, a GitOps tool's): write the key and nothing else.
            # An owner reference would hand its lifetime to our resource (deleting the resource
            # would garbage-collect it), and our labels would overwrite theirs (managed-by).
            request = replace(request, labels={}, annotations={}, owner_references=())  # this attempt only
        budget = self.max_payload_bytes - other_payload(current, key)

        form: StoredForm
        plain: bytes | None = None
        compressed: bytearray | None = None
        if len(data) <= budget:
            pretty_data = _pretty(data) if request.pretty else None
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

        document = plain if plain is not None else data
        # A large document is hashed off the event loop (hashlib lets go of the GIL).
        hashed = bytes_hash(document) if len(document) < 1 << 20 else await asyncio.to_thread(bytes_hash, document)
        main_uid = current.uid if current is not None else ""
        if current is None and form is not StoredForm.SHARDED:
            body = main_body(name, request.labels, request.annotations, request.owner_references)
            if plain is not None:
                body["data"] = {plain_key: plain.decode()}
            else:
                assert compressed is not None
                body["binaryData"] = {gzip_key: base64.b64encode(compressed).decode()}
            try:
                await self.kube.create_configmap_uid(namespace, body)
                # A new ConfigMap has no shards of its own: those of one deleted before it follow
                # their owner reference to the garbage collector, and no index names them.
                return self._result(
                    name, key, form, data, plain, compressed, partitions, (), _Swept((), (), ""), hashed
                )
            except KubernetesUnavailable as error:
                if error.status != 409:
                    raise
                current = None  # created meanwhile: fall through to the patch path
        if current is None and main_uid == "":
            main_uid = await self._ensure_main(request)

        shard_names: tuple[str, ...] = ()
        index_json: str | None = None
        if form is StoredForm.SHARDED:
            assert compressed is not None
            index = await self._write_shards(
                namespace, name, key, data, compressed, partitions, request.labels, request.owner_references, main_uid
            )
            shard_names = tuple(s.name for s in index.shards)
            index_json = index.to_json()
        try:
            known = current.resource_version if current is not None else None
            after = await self._switch(
                namespace, name, key, plain, compressed, form, index_json, known, retry=not remembered
            )
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
        if form is not StoredForm.SHARDED:
            self.remembered.keep(namespace, name, after)
        return self._result(name, key, form, data, plain, compressed, partitions, shard_names, swept, hashed)

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
        document_hash: str,
    ) -> WriteResult:
        size = len(plain) if plain is not None else len(data)
        stored = len(plain) if plain is not None else len(compressed or b"")
        return WriteResult(
            name,
            key,
            form,
            size,
            stored,
            partitions,
            shards,
            swept.removed,
            swept.left,
            swept.error,
            document_hash=document_hash,
        )

    async def _ensure_main(self, request: _WriteRequest) -> str:
        """Create the main ConfigMap without the key (shards need its uid); or find the uid."""
        namespace, name = request.namespace, request.name
        try:
            return await self.kube.create_configmap_uid(
                namespace, main_body(name, request.labels, request.annotations, request.owner_references)
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
        known_version: str | None = None,
        *,
        retry: bool = True,
    ) -> ConfigMapData:
        """Point the main ConfigMap at the new form in one patch; the other forms are removed.

        Only data changes: ``_ensure_main`` gave a ConfigMap created here its metadata, and one
        that existed keeps its own (see ``write``). ``known_version``: the resourceVersion the
        caller just read, used for the first try (a second read was a `list` request's only
        extra API call, issue 35); a conflict reads again, unless not to ``retry`` (the caller's
        decisions came from a remembered ConfigMap and are made again from a read).
        Returns the ConfigMap as the API server answered."""
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

        versions = [known_version] if known_version else []

        async def attempt() -> ConfigMapData:
            version = versions.pop() if versions else None
            if version is None:
                current = await self.kube.get_configmap(namespace, name)
                if current is None:
                    raise KubernetesUnavailable(f"ConfigMap {namespace}/{name} was deleted while offsets were written")
                version = current.resource_version
            patch: dict[str, Any] = {"data": data_patch, "binaryData": binary_patch}
            return await self.kube.patch_configmap(namespace, name, patch, resource_version=version)

        if not retry:
            return await attempt()
        return await retry_on_conflict(f"patch ConfigMap {namespace}/{name}", attempt)

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
