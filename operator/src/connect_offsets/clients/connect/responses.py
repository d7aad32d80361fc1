"""What Connect answers, read safely: bounded body reading, response models, snapshot parsing.

Separate because it is the defensive half of the client: whoever controls ``spec.url`` controls
these bytes. ``_decoded_parts``/``_read_capped`` read (and inflate) a body without ever holding more
than a cap; the pydantic models and ``_expanded`` turn the bytes into typed values (``_expanded`` is
CPU work the client runs in a thread). Nothing here sends a request.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import zlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Final, Literal

import httpx
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from connect_offsets.clients.connect.errors import ConnectError, ConnectResponseTooLarge
from connect_offsets.models.connect import ConnectorStatus, ServerInfo

# --------------------------------------------------------------------------------------------------
# Response models
# --------------------------------------------------------------------------------------------------


class _PluginInfo(BaseModel):
    model_config = ConfigDict(extra="ignore")

    class_: str = Field(alias="class")


class _PluginEntry(BaseModel):
    """One plugin of ``GET /connector-plugins?connectorsOnly=false`` (Connect's ``PluginInfo``): the
    version is left out when the plugin has none (``undefined``)."""

    model_config = ConfigDict(extra="ignore")

    class_: str = Field(alias="class")
    type: str
    version: str | None = None


@dataclass(frozen=True)
class PluginInfo:
    """An installed plugin: its class, Connect's lower-case type (source, sink, converter,
    header_converter, transformation, predicate) and version (None: undefined). Every installed
    version of a class is an entry of its own (KIP-891, Kafka Connect 4.1+)."""

    class_name: str
    type: str
    version: str | None


class _TopicsEntry(BaseModel):
    model_config = ConfigDict(extra="ignore")

    topics: list[str] = Field(default_factory=list)


class _MessageBody(BaseModel):
    model_config = ConfigDict(extra="ignore")

    message: str = ""


class _WorkerHealth(BaseModel):
    """``GET /health`` (KIP-1017): Connect's ``WorkerStatus``."""

    model_config = ConfigDict(extra="ignore")

    status: Literal["healthy", "starting", "unhealthy"]
    message: str = ""


_SERVER_INFO: Final = TypeAdapter(ServerInfo)
_WORKER_HEALTH: Final = TypeAdapter(_WorkerHealth)
_STATUS: Final = TypeAdapter(ConnectorStatus)
_PLUGINS: Final = TypeAdapter(list[_PluginInfo])
_ALL_PLUGINS: Final = TypeAdapter(list[_PluginEntry])
_STR_LIST: Final = TypeAdapter(list[str])
_CONFIG: Final = TypeAdapter(dict[str, str])
_TOPICS: Final = TypeAdapter(dict[str, _TopicsEntry])
_MESSAGE: Final = TypeAdapter(_MessageBody)
_JSON_OBJECT: Final = TypeAdapter(dict[str, Any])


@dataclass(frozen=True)
class ChunkedAlterResult:
    """A completed :meth:`ConnectClient.alter_offsets_chunked`."""

    message: str  # Connect's message for the last chunk (every chunk gets the same one)
    chunks: int
    partitions: int
    fingerprint: str
    started_at: int  # 0-based chunk the call began with (> 0 when it resumed)

    @property
    def requests(self) -> int:
        return self.chunks - self.started_at


@dataclass(frozen=True)
class ExpandedConnector:
    """One connector of ``GET /connectors?expand=status&expand=info``.

    ``config`` or ``status`` is None when the worker left that part out (it does for a connector
    deleted while it answered, and a worker mid-rebalance may): the caller asks for that connector
    alone. ``digest``: equal digests mean the same config and status (what changed between two
    snapshots)."""

    config: dict[str, str] | None
    status: ConnectorStatus | None
    digest: str

    @property
    def complete(self) -> bool:
        return self.config is not None and self.status is not None


def _expanded_unless_same(
    raw: bytes, last: tuple[str, dict[str, ExpandedConnector]] | None
) -> tuple[str, dict[str, ExpandedConnector]]:
    """The answer's sha256 and its parse, which is ``last``'s when the answer is byte for byte the
    same (CPU work: the caller runs it in a thread).

    Why: an idle cluster answers the same bytes interval after interval, and parsing 5,000
    connectors (2.4 MB) took 0.16 s of CPU, a third of the idle operator's (issue 35); hashing them
    takes a few milliseconds. The parse is immutable once made (its entries are shared by every
    reader of the snapshot already), so handing it out again is safe.
    """
    digest = hashlib.sha256(raw).hexdigest()
    if last is not None and last[0] == digest:
        return last
    return digest, _expanded(raw)


def _expanded(raw: bytes) -> dict[str, ExpandedConnector]:
    """Parse a snapshot answer (CPU work: the caller runs it in a thread). Entries that do not have
    the expected shape are kept as incomplete rather than failing the whole snapshot."""
    data = json.loads(raw)
    if not isinstance(data, dict):
        raise ValueError("the answer is not a JSON object")
    found: dict[str, ExpandedConnector] = {}
    for name, entry in data.items():
        if not isinstance(entry, dict):
            found[name] = ExpandedConnector(None, None, "")
            continue
        info = entry.get("info")
        config: dict[str, str] | None = None
        if isinstance(info, dict):
            with contextlib.suppress(ValidationError):
                config = _CONFIG.validate_python(info.get("config"))
        status: ConnectorStatus | None = None
        if isinstance(entry.get("status"), dict):
            with contextlib.suppress(ValidationError):
                status = _STATUS.validate_python(entry["status"])
        digest = hashlib.sha256(
            json.dumps([info and info.get("config"), entry.get("status")], sort_keys=True).encode()
        ).hexdigest()
        found[name] = ExpandedConnector(config, status, digest)
    return found


# --------------------------------------------------------------------------------------------------
# Bounded reading
# --------------------------------------------------------------------------------------------------

#: Output of one decompression step: a hostile answer is never inflated further than this past a cap.
_INFLATE_STEP: Final = 1 << 20
#: What we ask Connect for: Jetty's GzipHandler (when a worker enables it) speaks gzip.
_ACCEPT_ENCODING: Final = "gzip, deflate"


async def _decoded_parts(response: httpx.Response, limit: int, method: str, path: str) -> AsyncIterator[bytes]:
    """The answer's body, decoded, in parts; ``ConnectResponseTooLarge`` once past ``limit`` bytes.

    Decoded here rather than by httpx: its decoders inflate each network chunk whole, and one
    64 KiB chunk of a gzip bomb is 64 MiB (a 300 KB answer to ``GET /`` took 130 MiB). Here every
    step yields at most ``_INFLATE_STEP`` bytes and the count is checked after each.
    """
    if hasattr(response, "_content"):  # read already (an in-memory transport): only the cap to apply
        if len(response.content) > limit:
            raise ConnectResponseTooLarge(method=method, path=path, limit=limit)
        yield response.content
        return
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    if encoding in ("gzip", "x-gzip"):
        decompressor: Any = zlib.decompressobj(zlib.MAX_WBITS | 16)
    elif encoding == "deflate":
        decompressor = zlib.decompressobj()
    elif encoding in ("", "identity"):
        decompressor = None
    else:
        raise ConnectError(
            f"the answer uses Content-Encoding {encoding[:40]!r}, which was not asked for", method=method, path=path
        )
    size = received = 0
    async for raw in response.aiter_raw():
        # The wire bytes count too: endless empty deflate blocks inflate to nothing, and would
        # otherwise be read for as long as the server keeps sending.
        received += len(raw)
        if received > limit:
            raise ConnectResponseTooLarge(method=method, path=path, limit=limit)
        pending = raw
        while pending:
            if decompressor is None:
                out, pending = pending, b""
            else:
                try:
                    out = decompressor.decompress(pending, _INFLATE_STEP)
                except zlib.error as error:
                    raise ConnectError(
                        f"the answer is not valid {encoding} data ({error})", method=method, path=path
                    ) from error
                pending = decompressor.unconsumed_tail
                if decompressor.eof:
                    pending = b""
            size += len(out)
            if size > limit:
                raise ConnectResponseTooLarge(method=method, path=path, limit=limit)
            if out:
                yield out


async def _read_capped(response: httpx.Response, limit: int, method: str, path: str) -> None:
    """Read a streamed answer into ``response.content``, at most ``limit`` decoded bytes.

    httpx's own ``aread`` does the same join without a bound; setting ``_content`` is how it
    stores the body, so ``.json()``, ``.text`` and ``.content`` then work as usual. An error answer
    (not 2xx) is cut at the limit instead of refused: its status decides what happens next (a 500
    is retried), and only the first ``MAX_ERROR_TEXT`` characters of a non-JSON body are shown.
    """
    parts: list[bytes] = []
    try:
        async for part in _decoded_parts(response, limit, method, path):
            parts.append(part)
    except ConnectResponseTooLarge:
        if response.is_success:
            raise
    response._content = b"".join(parts)
