"""The CPU work on a document, bounded: gzip in slices, inflating with a size cap (a gzip bomb in a
tenant's ConfigMap is refused without being inflated into memory), hashing, counting partitions.

Separate because none of it touches Kubernetes: these are the steps the store runs in a thread
(``asyncio.to_thread``) so the event loop stays responsive, and the place to look when memory or
CPU per document is the question.
"""

from __future__ import annotations

import hashlib
import io
import json
import zlib
from collections.abc import Iterator
from typing import Any, Final

from connect_offsets.clients.offsets_configmaps.layout import OffsetsCorrupt, OffsetsTooLarge
from connect_offsets.offsets.chunking import OffsetsStreamError, count_entries

_SLICE: Final = 1024 * 1024  # bytes fed to zlib per call


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
