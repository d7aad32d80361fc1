"""Async client for the Kafka Connect REST API.

Why this module looks the way it does
-------------------------------------

* **One long-lived ``httpx.AsyncClient`` per Connect cluster.**  A :class:`ConnectClient` owns one
  connection pool, one TLS context and one set of credentials, built once from a
  :class:`ConnectEndpoint`.  Callers keep the client for as long as the cluster is referenced and call
  :meth:`ConnectClient.aclose` (or use ``async with``) when they are done.  Building a TLS context per
  request would be slow and would re-read key material every time.

* **Errors are mapped to a small, documented tree** so that callers (the reconciler, the CLI) decide
  *retry later* versus *permanent failure* by class, or simply by :attr:`ConnectError.retryable`,
  without ever looking at httpx exceptions or raw status codes::

    ConnectError                 base; .message is Connect's own message verbatim when there is one
    ├── ConnectUnavailable       transport failure: connection refused, DNS, TLS, timeouts; also a 404
    │                            without Connect's JSON error body: a worker that is still starting
    │                            serves Jetty's HTML 404 for every path for a few seconds  (retryable)
    └── ConnectHTTPError         Connect answered with an error status;
        │                        .status_code, .error_code, .message, .method, .path
        ├── ConnectServerError   5xx (retryable).  Connect's own 90 s request timeout comes back as
        │                        500 "Request timed out..."; .is_request_timeout is then true
        ├── ConnectConflict      409: rebalance in progress / stale config / already exists (retryable)
        ├── ConnectNotFound      404
        └── ConnectBadRequest    any other 4xx (400, 401, 403, 405, 422, 429 ...); only 429 is retryable

  A plain :class:`ConnectError` (neither subclass) means Connect answered 2xx with a body we could not
  understand, or httpx failed in a non-transport way (e.g. a redirect loop).  It is not retryable.

  ``str(error)`` reads like ``PATCH /connectors/x/offsets: 400 Connectors must be in the STOPPED
  state ...``: method, path (as sent, URL-quoted), status and Connect's message verbatim.  Original
  httpx exceptions are chained with ``raise ... from e``.

* **Credentials never leak.**  Request headers are never put in exception text or logs, the reprs of
  :class:`ConnectAuth` and :class:`ConnectEndpoint` mask secrets, and as a last line of defence any
  occurrence of the configured password/token in a message is replaced by ``***``.  Log lines are DEBUG
  and carry method, path and status only.

* **Connector names are URL-quoted** with ``quote(name, safe="")``: MirrorMaker 2 names such as
  ``east->west.MirrorSourceConnector`` contain ``>``, and names may contain ``/``.

* **Large alters are chunked.**  :meth:`ConnectClient.alter_offsets_chunked` sends one document as
  several bounded PATCH requests (``models.chunking`` decides the boundaries, deterministically), so no
  request runs into Connect's fixed 90 s timeout.  A failing chunk raises the usual error class (so
  retry decisions are unchanged) with :attr:`ConnectError.chunk_failure` set and the chunk story
  appended to ``str(error)``; ``error.message`` stays Connect's message verbatim.

* **Offsets documents pass through untouched.**  :meth:`ConnectClient.get_offsets` returns Connect's JSON
  exactly as parsed and :meth:`ConnectClient.get_offsets_raw` the raw bytes; interpretation belongs to the
  models and the planner, not to the transport.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import inspect
import io
import json
import logging
import os
import ssl
import tempfile
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Final, Literal, Self, TypeVar
from urllib.parse import quote, unquote, urlsplit, urlunsplit

import certifi
import httpx
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from connect_offsets import __version__
from connect_offsets.clients.credentials import reflect
from connect_offsets.clients.limits import MAX_SMALL_RESPONSE_BYTES, max_document_bytes
from connect_offsets.errors import ConnectOffsetsError, TransientError, UserError
from connect_offsets.models.connect import (
    ConnectorStatus,
    RuntimeState,
    ServerInfo,
    TaskState,
    parse_version,
    supports_initial_state,
)
from connect_offsets.offsets.chunking import (
    ChunkFailure,
    ChunkLimits,
    ChunkPlan,
    ChunkProgress,
    ChunkResume,
    EntrySource,
    document_entries,
    iter_chunks,
    plan_chunks,
)

__all__ = [
    "ChunkedAlterResult",
    "ConnectAuth",
    "ConnectBadRequest",
    "ConnectClient",
    "ConnectConflict",
    "ConnectEndpoint",
    "ConnectError",
    "ConnectHTTPError",
    "ConnectNotFound",
    "ConnectResponseTooLarge",
    "ConnectServerError",
    "ConnectUnavailable",
    "ConnectorStatus",
    "RuntimeState",
    "ServerInfo",
    "TaskState",
    "build_ssl_context",
    "parse_version",
    "supports_initial_state",
]

_log = logging.getLogger(__name__)

#: Non-JSON error bodies (HTML from a proxy, plain text) are cut to this many characters.
MAX_ERROR_TEXT: Final = 512
_MASK: Final = "***"
#: Secrets shorter than this are not scrubbed from messages (it would mangle ordinary text).
_MIN_SCRUB_LEN: Final = 4
_USER_AGENT: Final = f"connect-offsets-operator/{__version__}"
_NOT_CONNECT_404: Final = (
    "404 without Connect's JSON error body: the worker is still starting (REST resources not yet "
    "initialised) or the URL does not point at the Connect REST API"
)

_T = TypeVar("_T")
_StateT = TypeVar("_StateT", bound=RuntimeState)
#: Traces are redacted, not shortened, here (status size is bounded where status is built); this
#: only bounds the redaction work on a hostile body.
_MAX_TRACE_BYTES: Final = 256 * 1024


# --------------------------------------------------------------------------------------------------
# Exceptions
# --------------------------------------------------------------------------------------------------


class ConnectError(ConnectOffsetsError):
    """Base of every error raised by :class:`ConnectClient`.

    ``message`` is Connect's own message verbatim when Connect sent one, otherwise our description.
    ``method`` and ``path`` identify the request (path as sent, URL-quoted, without query string).
    ``chunk_failure`` is set when the request was one chunk of :meth:`ConnectClient.alter_offsets_chunked`.
    """

    chunk_failure: ChunkFailure | None = None

    def __init__(self, message: str, *, method: str | None = None, path: str | None = None) -> None:
        self.message = message
        self.method = method
        self.path = path
        super().__init__(self._render())

    def _render(self) -> str:
        if self.method and self.path:
            return self._with_chunks(f"{self.method} {self.path}: {self.message}")
        return self._with_chunks(self.message)

    def _with_chunks(self, text: str) -> str:
        return f"{text} [{self.chunk_failure.render()}]" if self.chunk_failure is not None else text

    @property
    def retryable(self) -> bool:
        """True when the same request may succeed later without any change on our side."""
        return False


class ConnectUnavailable(ConnectError, TransientError):
    """Connect could not be reached: connection refused, DNS, TLS handshake, timeouts."""

    @property
    def retryable(self) -> bool:
        return True


class ConnectHTTPError(ConnectError):
    """Connect answered with a non-2xx status."""

    def __init__(
        self,
        *,
        method: str,
        path: str,
        status_code: int,
        message: str,
        error_code: int | None = None,
    ) -> None:
        self.status_code = status_code
        self.error_code = error_code
        super().__init__(message, method=method, path=path)

    def _render(self) -> str:
        return self._with_chunks(f"{self.method} {self.path}: {self.status_code} {self.message}")

    @property
    def retryable(self) -> bool:
        return self.status_code == httpx.codes.TOO_MANY_REQUESTS


class ConnectServerError(ConnectHTTPError):
    """5xx. Includes Connect's own request timeout (500 "Request timed out")."""

    @property
    def retryable(self) -> bool:
        return True

    @property
    def is_request_timeout(self) -> bool:
        """Connect gave up waiting for the herder (default 90 s); the operation may still complete."""
        return self.message.startswith("Request timed out")


class ConnectConflict(ConnectHTTPError):
    """409: a rebalance is in progress, the config is stale, or the connector already exists."""

    @property
    def retryable(self) -> bool:
        return True

    @property
    def already_exists(self) -> bool:
        """True for the 409 of ``POST /connectors`` when the name is taken."""
        return "already exists" in self.message


class ConnectNotFound(ConnectHTTPError):
    """404: no such connector / task / endpoint."""


class ConnectBadRequest(ConnectHTTPError):
    """Any other 4xx: 400, 401, 403, 405, 422, 429 ... Only 429 is retryable."""


class ConnectResponseTooLarge(ConnectError, UserError):
    """The answer grew past its cap while being read (decoded): a hostile or broken server.

    Not retryable: the same URL would send the same thing; the ConnectCluster must change.
    """

    def __init__(self, *, method: str, path: str, limit: int) -> None:
        self.limit = limit
        super().__init__(
            f"the answer is larger than {limit} bytes (decoded); refused before parsing "
            "(is spec.url a Kafka Connect REST API?)",
            method=method,
            path=path,
        )


def _with_chunk_failure(error: ConnectError, failure: ChunkFailure) -> ConnectError:
    """The same error (same class, so retry decisions are unchanged), telling which chunks were applied."""
    clone = type(error).__new__(type(error))
    clone.__dict__.update(error.__dict__)
    clone.chunk_failure = failure
    Exception.__init__(clone, clone._render())
    return clone


def _is_connect_error_body(response: httpx.Response) -> bool:
    """Connect's own errors are JSON ``{"error_code": ..., "message": ...}`` (ConnectExceptionMapper)."""
    try:
        body = response.json()
    except ValueError:
        return False
    return isinstance(body, dict) and "error_code" in body


def _error_class(status_code: int) -> type[ConnectHTTPError]:
    if status_code >= 500:
        return ConnectServerError
    if status_code == 404:
        return ConnectNotFound
    if status_code == 409:
        return ConnectConflict
    if 400 <= status_code < 500:
        return ConnectBadRequest
    return ConnectHTTPError  # 1xx/3xx: we never follow redirects


# --------------------------------------------------------------------------------------------------
# Endpoint configuration
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, repr=False)
class ConnectAuth:
    """Credentials for one Connect cluster. ``repr`` masks the password/token."""

    kind: Literal["basic", "bearer"]
    username: str | None = None
    password: str | None = None
    token: str | None = None

    def __post_init__(self) -> None:
        if self.kind == "basic":
            if self.username is None or self.password is None:
                raise ValueError("basic auth needs username and password")
        elif self.kind == "bearer":
            if not self.token:
                raise ValueError("bearer auth needs a token")
        else:
            raise ValueError(f"unknown auth kind {self.kind!r}; expected 'basic' or 'bearer'")

    @classmethod
    def basic(cls, username: str, password: str) -> ConnectAuth:
        return cls(kind="basic", username=username, password=password)

    @classmethod
    def bearer(cls, token: str) -> ConnectAuth:
        return cls(kind="bearer", token=token)

    def __repr__(self) -> str:
        if self.kind == "basic":
            password = _MASK if self.password is not None else "None"
            return f"ConnectAuth(kind='basic', username={self.username!r}, password={password})"
        token = _MASK if self.token is not None else "None"
        return f"ConnectAuth(kind={self.kind!r}, token={token})"


@dataclass(frozen=True, repr=False)
class ConnectEndpoint:
    """Where and how to reach one Connect cluster.

    ``ca_pem``: PEM text of the CA bundle that signs Connect's certificate; it *replaces* the default
    (certifi) trust store.  ``client_cert_pem``/``client_key_pem``: PEM text for mutual TLS (the key may
    also be appended to the certificate PEM).  Encrypted keys are not supported.
    """

    url: str
    auth: ConnectAuth | None = None
    ca_pem: str | None = None
    client_cert_pem: str | None = None
    client_key_pem: str | None = None
    insecure_skip_verify: bool = False
    timeout_seconds: float = 30.0

    def __post_init__(self) -> None:
        if not self.url.startswith(("http://", "https://")):
            raise ValueError(f"Connect URL must start with http:// or https://: {_redact_url(self.url)!r}")
        if not self.timeout_seconds > 0:
            raise ValueError("timeout_seconds must be > 0")
        if self.client_key_pem and not self.client_cert_pem:
            raise ValueError("client_key_pem given without client_cert_pem")

    def __repr__(self) -> str:
        return (
            f"ConnectEndpoint(url={_redact_url(self.url)!r}, auth={self.auth!r}, "
            f"ca_pem={_presence(self.ca_pem)}, client_cert_pem={_presence(self.client_cert_pem)}, "
            f"client_key_pem={_MASK if self.client_key_pem else None}, "
            f"insecure_skip_verify={self.insecure_skip_verify!r}, timeout_seconds={self.timeout_seconds!r})"
        )


def _presence(value: str | None) -> str:
    return "<set>" if value else "None"


def _redact_url(url: str) -> str:
    """Mask the password of ``scheme://user:password@host`` URLs."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        userinfo, _, hostport = parts.netloc.rpartition("@")
        user = userinfo.split(":", 1)[0]
        return urlunsplit(parts._replace(netloc=f"{user}:{_MASK}@{hostport}"))
    except ValueError:
        return "<unparsable url>"


def _secrets_of(endpoint: ConnectEndpoint) -> tuple[str, ...]:
    secrets: list[str] = []
    auth = endpoint.auth
    if auth is not None:
        if auth.password:
            secrets.append(auth.password)
            basic = f"{auth.username or ''}:{auth.password}".encode()
            secrets.append(base64.b64encode(basic).decode("ascii"))
        if auth.token:
            secrets.append(auth.token)
    if endpoint.client_key_pem:
        secrets.append(endpoint.client_key_pem.strip())
    try:
        url_password = urlsplit(endpoint.url).password
    except ValueError:
        url_password = None
    if url_password:
        secrets.append(url_password)
    # Longest first so that a secret containing another is masked whole.
    return tuple(sorted({s for s in secrets if len(s) >= _MIN_SCRUB_LEN}, key=len, reverse=True))


# --------------------------------------------------------------------------------------------------
# TLS
# --------------------------------------------------------------------------------------------------


def build_ssl_context(endpoint: ConnectEndpoint) -> ssl.SSLContext:
    """Build the TLS context for ``endpoint``. Raises ``ValueError`` for unusable PEM material.

    Client certificate and key are written to a private temporary directory (files mode 0600) only for
    the duration of ``load_cert_chain`` -- the ``ssl`` module cannot load them from memory.
    """
    try:
        if endpoint.ca_pem:
            ctx = ssl.create_default_context(cadata=endpoint.ca_pem)
        else:
            ctx = ssl.create_default_context(cafile=certifi.where())
    except ssl.SSLError as e:
        raise ValueError(f"invalid ca_pem: {e.reason or e}") from e
    if endpoint.client_cert_pem:
        _load_client_cert(ctx, endpoint.client_cert_pem, endpoint.client_key_pem)
    if endpoint.insecure_skip_verify:
        ctx.check_hostname = False  # must come before verify_mode = CERT_NONE
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


def _load_client_cert(ctx: ssl.SSLContext, cert_pem: str, key_pem: str | None) -> None:
    with tempfile.TemporaryDirectory(prefix="connect-offsets-tls-") as tmp:  # mkdtemp: mode 0700
        cert_path = os.path.join(tmp, "tls.crt")
        _write_private(cert_path, cert_pem)
        key_path: str | None = None
        if key_pem:
            key_path = os.path.join(tmp, "tls.key")
            _write_private(key_path, key_pem)
        try:
            ctx.load_cert_chain(cert_path, key_path, password=_refuse_password)
        except ssl.SSLError as e:
            raise ValueError(f"invalid client certificate or key: {e.reason or e}") from e


def _write_private(path: str, text: str) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)


def _refuse_password() -> str:
    # Without a callback OpenSSL would prompt on the terminal for an encrypted key.
    raise ValueError("encrypted client keys are not supported")


class _BearerAuth(httpx.Auth):
    def __init__(self, token: str) -> None:
        self._header = f"Bearer {token}"

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = self._header
        yield request

    def __repr__(self) -> str:
        return f"_BearerAuth(token={_MASK})"


def _httpx_auth(auth: ConnectAuth | None) -> httpx.Auth | None:
    if auth is None:
        return None
    if auth.kind == "basic":
        return httpx.BasicAuth(auth.username or "", auth.password or "")
    return _BearerAuth(auth.token or "")


# --------------------------------------------------------------------------------------------------
# Response models
# --------------------------------------------------------------------------------------------------


class _PluginInfo(BaseModel):
    model_config = ConfigDict(extra="ignore")

    class_: str = Field(alias="class")


class _TopicsEntry(BaseModel):
    model_config = ConfigDict(extra="ignore")

    topics: list[str] = Field(default_factory=list)


class _MessageBody(BaseModel):
    model_config = ConfigDict(extra="ignore")

    message: str = ""


_SERVER_INFO: Final = TypeAdapter(ServerInfo)
_STATUS: Final = TypeAdapter(ConnectorStatus)
_PLUGINS: Final = TypeAdapter(list[_PluginInfo])
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


#: ``GET /connectors?expand=...`` lists every connector of the cluster with its config and status;
#: 5,000 connectors are ~15 MiB. Past this the snapshot is refused and connectors are read one by one.
MAX_SNAPSHOT_BYTES: Final = 64 * 1024 * 1024


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


#: Called after each applied chunk; may be a coroutine function (e.g. to write status).
ChunkCallback = Callable[[ChunkProgress], Awaitable[None] | None]


# --------------------------------------------------------------------------------------------------
# Client
# --------------------------------------------------------------------------------------------------


def _connector_path(name: str, *suffix: str) -> str:
    if not name:
        raise ValueError("connector name must not be empty")
    return "/".join(("/connectors", quote(name, safe=""), *suffix))


def _bool_param(value: bool) -> str:
    return "true" if value else "false"


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


#: TLS alerts a worker with ``ssl.client.auth=required`` sends when it refuses the client's
#: certificate (or its absence). OpenSSL's wording names neither side; the hint says what to check.
_CLIENT_CERTIFICATE_ALERTS: Final = ("ALERT_BAD_CERTIFICATE", "ALERT_CERTIFICATE_REQUIRED", "ALERT_UNKNOWN_CA")
_CLIENT_CERTIFICATE_HINT: Final = (
    "the Connect worker refused the client certificate, or its absence: check spec.tls.clientCertificate"
)


class ConnectClient:
    """Async client for one Kafka Connect cluster. Create once, reuse, :meth:`aclose` at the end."""

    def __init__(self, endpoint: ConnectEndpoint, *, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self._endpoint = endpoint
        self._secrets = _secrets_of(endpoint)
        #: Counts the writes this client sent (before and after each): a snapshot taken at or
        #: before a connector's last write may predate it (``last_write``, ``write_seq``).
        self._write_seq = 0
        self._last_write: dict[str, int] = {}
        self._client = httpx.AsyncClient(
            base_url=endpoint.url,
            # No deadline for waiting on a pooled connection: the pool is this operator's own queue
            # (one client serves every resource of the cluster). With a deadline, a thousand
            # resources on a busy worker turned queueing into PoolTimeouts, reported as an outage
            # with back-off. Connecting, reading and writing keep the request timeout.
            timeout=httpx.Timeout(endpoint.timeout_seconds, pool=None),
            auth=_httpx_auth(endpoint.auth),
            verify=build_ssl_context(endpoint),
            transport=transport,
            follow_redirects=False,
            headers={"Accept": "application/json", "Accept-Encoding": _ACCEPT_ENCODING, "User-Agent": _USER_AGENT},
        )

    @property
    def endpoint(self) -> ConnectEndpoint:
        return self._endpoint

    @property
    def known_secrets(self) -> tuple[str, ...]:
        """The credential values this client holds, for :func:`credentials.reflect` by its callers."""
        return self._secrets

    def also_redact(self, values: Iterable[str]) -> None:
        """Mask these values too in this client's messages: credentials sent inside request bodies
        (MirrorMaker 2 ``secretConfig`` values in connector configs) that Connect may echo in errors.
        Over-masking is harmless, so values are only ever added."""
        merged = set(self._secrets) | {v for v in values if len(v) >= _MIN_SCRUB_LEN}
        if len(merged) != len(self._secrets):
            self._secrets = tuple(sorted(merged, key=len, reverse=True))

    def __repr__(self) -> str:
        return f"ConnectClient({self._endpoint!r})"

    @property
    def write_seq(self) -> int:
        """The sequence number of this client's latest write (0: none yet)."""
        return self._write_seq

    def last_write(self, name: str) -> int:
        """The sequence number of the latest write to this connector (sent or answered), 0 if none."""
        return self._last_write.get(name, 0)

    def _note_write(self, method: str, path: str, json_body: Any) -> None:
        if method == "GET":
            return
        name: str | None = None
        if path.startswith("/connectors/"):
            name = unquote(path.split("/")[2])
        elif path == "/connectors" and isinstance(json_body, dict) and isinstance(json_body.get("name"), str):
            name = json_body["name"]
        if name is not None:
            self._write_seq += 1
            self._last_write[name] = self._write_seq

    async def aclose(self) -> None:
        await self._client.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # ---- cluster -------------------------------------------------------------------------------

    async def server_info(self) -> ServerInfo:
        return await self._get_model("/", _SERVER_INFO)

    async def connector_plugins(self) -> list[str]:
        """Connector plugin classes (``connectorsOnly=true``: no transforms/converters/predicates)."""
        plugins = await self._get_model("/connector-plugins", _PLUGINS, params={"connectorsOnly": "true"})
        return [p.class_ for p in plugins]

    async def validate_config(self, config: dict[str, str]) -> list[str]:
        """``PUT /connector-plugins/{class}/config/validate``: the problems, as ``key: message`` lines.

        Empty when Connect accepts the config. Used before creating a connector whose creation has
        further steps (initial offsets), so a config error never leaves a half-created connector.
        """
        plugin = quote(config.get("connector.class", ""), safe="")
        response = await self._request("PUT", f"/connector-plugins/{plugin}/config/validate", json_body=config)
        assert response is not None
        body = self._validate(_JSON_OBJECT, self._parse_json("PUT", "validate", response), "PUT", "validate")
        problems: list[str] = []
        for item in body.get("configs") or []:
            value = item.get("value") if isinstance(item, dict) else None
            if isinstance(value, dict):
                problems += [f"{value.get('name')}: {error}" for error in value.get("errors") or []]
        if not problems and body.get("error_count"):
            problems.append(f"Connect reports {body['error_count']} config error(s)")
        return problems

    async def list_connectors(self) -> list[str]:
        return await self._get_model("/connectors", _STR_LIST)

    async def list_connectors_expanded(self) -> dict[str, ExpandedConnector]:
        """Every connector with its config and status in one call (KIP-465, Connect 2.3+).

        Failure traces are redacted of this client's credentials, as in ``get_connector_status``.
        """
        path = "/connectors"
        params = httpx.QueryParams([("expand", "status"), ("expand", "info")])
        response = await self._request("GET", path, params=params, limit=MAX_SNAPSHOT_BYTES)
        assert response is not None
        try:
            found = await asyncio.to_thread(_expanded, response.content)
        except ValueError as e:
            raise ConnectError(f"unexpected response: {e}", method="GET", path=path) from None
        if not self._secrets:
            return found
        return {
            name: ExpandedConnector(
                entry.config,
                None
                if entry.status is None
                else entry.status.model_copy(
                    update={
                        "connector": self._redact_trace(entry.status.connector),
                        "tasks": [self._redact_trace(task) for task in entry.status.tasks],
                    }
                ),
                entry.digest,
            )
            for name, entry in found.items()
        }

    # ---- connectors ----------------------------------------------------------------------------

    async def get_connector_config(self, name: str) -> dict[str, str] | None:
        """The connector's config, or ``None`` if it does not exist."""
        return await self._get_model_or_none(_connector_path(name, "config"), _CONFIG)

    async def get_connector_status(self, name: str) -> ConnectorStatus | None:
        """The connector's status, or ``None`` if it does not exist. Failure traces are redacted of
        this client's credentials (they go into status); their size is the caller's to bound."""
        status = await self._get_model_or_none(_connector_path(name, "status"), _STATUS)
        if status is None or not self._secrets:
            return status
        return status.model_copy(
            update={
                "connector": self._redact_trace(status.connector),
                "tasks": [self._redact_trace(task) for task in status.tasks],
            }
        )

    def _redact_trace(self, state: _StateT) -> _StateT:
        if not state.trace:
            return state
        return state.model_copy(update={"trace": reflect(state.trace, self._secrets, _MAX_TRACE_BYTES)})

    async def create_connector(self, name: str, config: dict[str, str], initial_state: str | None = None) -> None:
        """``POST /connectors``. A taken name raises :class:`ConnectConflict` (``already_exists``).

        ``initial_state`` (RUNNING, PAUSED, STOPPED) needs Connect >= 3.7, see
        :func:`supports_initial_state`; it is only sent when given.
        """
        body: dict[str, Any] = {"name": name, "config": config}
        if initial_state is not None:
            body["initial_state"] = initial_state
        await self._request("POST", "/connectors", json_body=body)

    async def put_connector_config(self, name: str, config: dict[str, str]) -> None:
        """Create or update (``PUT /connectors/{name}/config``)."""
        await self._request("PUT", _connector_path(name, "config"), json_body=config)

    async def delete_connector(self, name: str) -> bool:
        """Delete; ``False`` if there was no such connector."""
        response = await self._request("DELETE", _connector_path(name), not_found_ok=True)
        return response is not None

    async def stop_connector(self, name: str) -> None:
        await self._request("PUT", _connector_path(name, "stop"))

    async def pause_connector(self, name: str) -> None:
        await self._request("PUT", _connector_path(name, "pause"))

    async def resume_connector(self, name: str) -> None:
        await self._request("PUT", _connector_path(name, "resume"))

    async def restart_connector(self, name: str, *, include_tasks: bool = False, only_failed: bool = False) -> None:
        params = {"includeTasks": _bool_param(include_tasks), "onlyFailed": _bool_param(only_failed)}
        await self._request("POST", _connector_path(name, "restart"), params=params)

    async def restart_task(self, name: str, task_id: int) -> None:
        await self._request("POST", _connector_path(name, "tasks", str(int(task_id)), "restart"))

    async def get_connector_topics(self, name: str) -> list[str]:
        """Active topics (``GET /connectors/{name}/topics``)."""
        entries = await self._get_model(_connector_path(name, "topics"), _TOPICS)
        entry = entries.get(name)
        if entry is None and len(entries) == 1:
            entry = next(iter(entries.values()))
        return list(entry.topics) if entry is not None else []

    # ---- offsets -------------------------------------------------------------------------------

    async def get_offsets(self, name: str) -> dict[str, Any]:
        """``GET /connectors/{name}/offsets``, parsed but otherwise exactly as Connect returned it."""
        return await self._get_model(_connector_path(name, "offsets"), _JSON_OBJECT, limit=max_document_bytes())

    async def get_offsets_raw(self, name: str) -> bytes:
        """``GET /connectors/{name}/offsets``, the raw response body.

        Streamed into one buffer: a million partitions are about 100 MB, and collecting the
        body as parts and joining them (what ``response.content`` does) would briefly hold it twice.
        """
        path = _connector_path(name, "offsets")
        try:
            async with self._client.stream("GET", path) as response:
                _log.debug("GET %s -> %d", path, response.status_code)
                if not response.is_success:
                    await _read_capped(response, MAX_SMALL_RESPONSE_BYTES, "GET", path)
                    if response.status_code == httpx.codes.NOT_FOUND and not _is_connect_error_body(response):
                        raise ConnectUnavailable(_NOT_CONNECT_404, method="GET", path=path)
                    raise self._error_from_response("GET", path, response)
                buffer = io.BytesIO()
                async for part in _decoded_parts(response, max_document_bytes(), "GET", path):
                    buffer.write(part)
                return buffer.getvalue()  # hands over the buffer without a copy
        except (httpx.TransportError, ssl.SSLError) as e:
            raise ConnectUnavailable(self._describe(e), method="GET", path=path) from e
        except httpx.HTTPError as e:
            raise ConnectError(self._describe(e), method="GET", path=path) from e

    async def alter_offsets(self, name: str, document: dict[str, Any]) -> str:
        """``PATCH /connectors/{name}/offsets``; returns Connect's ``message``. Connector must be STOPPED."""
        return await self._message("PATCH", _connector_path(name, "offsets"), json_body=document)

    async def alter_offsets_chunked(
        self,
        name: str,
        document: bytes | str | EntrySource,
        *,
        limits: ChunkLimits | None = None,
        plan: ChunkPlan | None = None,
        resume: ChunkResume | None = None,
        on_chunk_done: ChunkCallback | None = None,
    ) -> ChunkedAlterResult:
        """``PATCH /connectors/{name}/offsets`` in bounded chunks, in document order.

        ``document``: the offsets document as JSON (bytes or text), or an entry source (e.g.
        ``offsets.chunking.restore_entries``). ``plan``: boundaries already computed with
        ``plan_chunks`` from the same source (else computed here, in a thread). ``resume``: the
        progress of an earlier attempt; it continues where that stopped if the plan has the same
        fingerprint, else starts over (re-sending a chunk is harmless: PATCH only overwrites).
        ``on_chunk_done`` gets a :class:`ChunkProgress` after every applied chunk.

        On failure, raises the error of the failed request with ``chunk_failure`` telling which
        chunks were applied and where a retry resumes. A document that fits one chunk is one PATCH.
        """
        # Text is encoded a slice at a time as it is parsed: no second copy of a 100 MB document.
        source = document_entries(document) if isinstance(document, bytes | bytearray | str) else document
        if plan is None:
            plan = await asyncio.to_thread(plan_chunks, source, limits)
        start = resume.start_for(plan) if resume is not None else 0
        path = _connector_path(name, "offsets")
        chunks = iter_chunks(source, plan, start)
        message = ""
        done_partitions = plan.spans[start].start if start < len(plan) else plan.entries
        for index in range(start, len(plan)):
            chunk = await asyncio.to_thread(next, chunks)
            try:
                message = await self._message("PATCH", path, content=chunk.body)
            except ConnectError as error:
                failure = ChunkFailure(
                    fingerprint=plan.fingerprint,
                    failed_chunk=index,
                    chunks=len(plan),
                    partitions_applied=chunk.span.start,
                    partitions=plan.entries,
                    failed_description=plan.describe(index),
                )
                _log.debug("chunked alter of %s stopped: %s", name, failure.render())
                raise _with_chunk_failure(error, failure) from error
            done_partitions = chunk.span.end
            del chunk
            if on_chunk_done is not None:
                outcome = on_chunk_done(
                    ChunkProgress(plan.fingerprint, index, len(plan), done_partitions, plan.entries, message)
                )
                if inspect.isawaitable(outcome):
                    await outcome
        return ChunkedAlterResult(message, len(plan), plan.entries, plan.fingerprint, start)

    async def reset_offsets(self, name: str) -> str:
        """``DELETE /connectors/{name}/offsets``; returns Connect's ``message``. Connector must be STOPPED."""
        return await self._message("DELETE", _connector_path(name, "offsets"))

    # ---- plumbing ------------------------------------------------------------------------------

    async def _message(self, method: str, path: str, *, json_body: Any = None, content: bytes | None = None) -> str:
        response = await self._request(method, path, json_body=json_body, content=content)
        assert response is not None
        if not response.content:
            return ""
        return self._validate(_MESSAGE, self._parse_json(method, path, response), method, path).message

    async def _get_model(
        self,
        path: str,
        adapter: TypeAdapter[_T],
        *,
        params: Mapping[str, str] | None = None,
        limit: int = MAX_SMALL_RESPONSE_BYTES,
    ) -> _T:
        response = await self._request("GET", path, params=params, limit=limit)
        assert response is not None
        return self._validate(adapter, self._parse_json("GET", path, response), "GET", path)

    async def _get_model_or_none(self, path: str, adapter: TypeAdapter[_T]) -> _T | None:
        response = await self._request("GET", path, not_found_ok=True)
        if response is None:
            return None
        return self._validate(adapter, self._parse_json("GET", path, response), "GET", path)

    async def _request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        json_body: Any = None,
        content: bytes | None = None,
        not_found_ok: bool = False,
        limit: int = MAX_SMALL_RESPONSE_BYTES,
    ) -> httpx.Response | None:
        """Send one request. Returns the 2xx response, ``None`` for a tolerated 404, else raises.

        ``content``: a body already serialised as JSON (chunks), sent as is. ``limit``: the most
        bytes of the (decoded) answer read before ``ConnectResponseTooLarge``; whoever controls the
        URL controls the answer, and a gzip body of 300 KB can decode to 300 MB.
        """
        headers = {"Content-Type": "application/json"} if content is not None else None
        self._note_write(method, path, json_body)
        try:
            request = self._client.build_request(
                method, path, params=params, json=json_body, content=content, headers=headers
            )
            response = await self._client.send(request, stream=True)
            try:
                await _read_capped(response, limit, method, path)
            finally:
                await response.aclose()
        except (httpx.TransportError, ssl.SSLError) as e:
            # ssl.SSLError: with TLS 1.3 a worker refuses our client certificate *after* the
            # handshake, as an alert on the first read, which httpx does not wrap.
            _log.debug("%s %s -> %s", method, path, type(e).__name__)
            raise ConnectUnavailable(self._describe(e), method=method, path=path) from e
        except httpx.HTTPError as e:  # TooManyRedirects, DecodingError, ...
            _log.debug("%s %s -> %s", method, path, type(e).__name__)
            raise ConnectError(self._describe(e), method=method, path=path) from e
        finally:
            # Answered or not: a snapshot begun while it was in flight may predate it.
            self._note_write(method, path, json_body)
        _log.debug("%s %s -> %d", method, path, response.status_code)
        if response.is_success:
            return response
        if response.status_code == httpx.codes.NOT_FOUND and not _is_connect_error_body(response):
            # Not Connect's answer about a connector: the worker's REST resources are not there yet
            # (start-up) or the URL is not Connect's. "Absent" would make callers create or forget it.
            _log.debug("%s %s -> 404 without Connect's error body", method, path)
            raise ConnectUnavailable(_NOT_CONNECT_404, method=method, path=path)
        if not_found_ok and response.status_code == httpx.codes.NOT_FOUND:
            return None
        raise self._error_from_response(method, path, response)

    def _describe(self, e: Exception) -> str:
        text = str(e)
        described = f"{type(e).__name__}: {text}" if text else type(e).__name__
        if any(alert in text for alert in _CLIENT_CERTIFICATE_ALERTS):
            described += f" ({_CLIENT_CERTIFICATE_HINT})"
        return self._scrub(described)

    def _error_from_response(self, method: str, path: str, response: httpx.Response) -> ConnectHTTPError:
        status = response.status_code
        message: str | None = None
        error_code: int | None = None
        try:
            body = response.json()
        except ValueError:
            body = None
        if isinstance(body, dict):
            if isinstance(body.get("message"), str):
                message = body["message"]
            code = body.get("error_code")
            if isinstance(code, int) and not isinstance(code, bool):
                error_code = code
        if message is None:
            text = response.text.strip()
            message = text[:MAX_ERROR_TEXT] if text else httpx.codes.get_reason_phrase(status)
        cls = _error_class(status)
        return cls(method=method, path=path, status_code=status, message=self._scrub(message), error_code=error_code)

    def _parse_json(self, method: str, path: str, response: httpx.Response) -> Any:
        try:
            return response.json()
        except ValueError as e:
            raise ConnectError(
                f"{response.status_code} response body is not valid JSON", method=method, path=path
            ) from e

    def _validate(self, adapter: TypeAdapter[_T], data: Any, method: str, path: str) -> _T:
        try:
            return adapter.validate_python(data)
        except ValidationError as e:
            # Not chained and no input values: response bodies (configs!) may hold secrets.
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}"
                for err in e.errors(include_input=False)[:5]
            )
            raise ConnectError(f"unexpected response: {problems}", method=method, path=path) from None

    def _scrub(self, text: str) -> str:
        """Text from (or about) the Connect URL, as it may appear in status and Events: capped, and
        redacted of this client's credentials and of URL user info (one helper for every writer)."""
        return reflect(text, self._secrets)
