"""The Connect REST client itself: one :class:`ConnectClient` per Connect cluster.

Separate so that the class a newcomer looks for is alone in its room: requests, error mapping of
answers, chunked alters and write bookkeeping. Errors, endpoint/TLS configuration and response
reading live next door (``errors``, ``endpoint``, ``responses``); the package docstring says why
the client looks the way it does.

About 700 lines, over the package's 600: every request (plain, streamed, chunk of an alter) passes
through the one place here that maps answers to errors and tells the circuit breaker how it ended;
splitting that place would split the error mapping from the decision it feeds.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import io
import logging
import ssl
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from types import TracebackType
from typing import Any, Final, Self, TypeVar
from urllib.parse import quote, unquote

import httpx
from pydantic import TypeAdapter, ValidationError

from connect_offsets import __version__, fencing, metrics
from connect_offsets.clients.connect.breaker import CircuitBreaker, Ticket
from connect_offsets.clients.connect.endpoint import (
    _CLIENT_CERTIFICATE_ALERTS,
    _CLIENT_CERTIFICATE_HINT,
    _MIN_SCRUB_LEN,
    ConnectEndpoint,
    _httpx_auth,
    _secrets_of,
    build_ssl_context,
)
from connect_offsets.clients.connect.errors import (
    ConnectError,
    ConnectHTTPError,
    ConnectUnavailable,
    _is_connect_error_body,
    _with_chunk_failure,
    error_from_answer,
)
from connect_offsets.clients.connect.fenced_body import LastByteHeld
from connect_offsets.clients.connect.outages import admit, deadline, settle
from connect_offsets.clients.connect.plugins import InstalledPlugins
from connect_offsets.clients.connect.responses import (
    _ACCEPT_ENCODING,
    _ALL_PLUGINS,
    _CONFIG,
    _JSON_OBJECT,
    _MESSAGE,
    _PLUGINS,
    _SERVER_INFO,
    _STATUS,
    _STR_LIST,
    _TOPICS,
    _WORKER_HEALTH,
    ChunkedAlterResult,
    ExpandedConnector,
    PluginInfo,
    _decoded_parts,
    _expanded_unless_same,
    _read_capped,
)
from connect_offsets.clients.connect.state_changes import StateChange, StateChanges, maybe_applied
from connect_offsets.clients.credentials import reflect
from connect_offsets.clients.limits import MAX_SMALL_RESPONSE_BYTES, max_document_bytes
from connect_offsets.models.connect import ConnectorStatus, RuntimeState, ServerInfo
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

# The package's name, as before the split into modules: log lines keep the logger name they had.
_log = logging.getLogger("connect_offsets.clients.connect")

_USER_AGENT: Final = f"connect-offsets-operator/{__version__}"
_NOT_CONNECT_404: Final = (
    "404 without Connect's JSON error body: the worker is still starting (REST resources not yet "
    "initialised) or the URL does not point at the Connect REST API"
)

_T = TypeVar("_T")

#: The message of a resumed chunk found already in Connect (``alter_offsets_chunked(in_place=...)``).
ALREADY_IN_PLACE = "already in Connect (sent by an earlier attempt); not sent again"
_StateT = TypeVar("_StateT", bound=RuntimeState)
#: Traces are redacted, not shortened, here (status size is bounded where status is built); this
#: only bounds the redaction work on a hostile body.
_MAX_TRACE_BYTES: Final = 256 * 1024

#: ``GET /connectors?expand=...`` lists every connector of the cluster with its config and status;
#: 5,000 connectors are ~15 MiB. Past this the snapshot is refused and connectors are read one by one.
MAX_SNAPSHOT_BYTES: Final = 64 * 1024 * 1024

#: The most a connection may take to be made, whatever ``spec.requestTimeoutSeconds`` says: a
#: worker that is up accepts in milliseconds, and a URL that does not accept (a black hole, a host
#: that is down) should cost seconds, not the whole request time-out (issue 45).
CONNECT_TIMEOUT_S: Final = 5.0

#: Called after each applied chunk; may be a coroutine function (e.g. to write status).
ChunkCallback = Callable[[ChunkProgress], Awaitable[None] | None]


def _connector_path(name: str, *suffix: str) -> str:
    if not name:
        raise ValueError("connector name must not be empty")
    return "/".join(("/connectors", quote(name, safe=""), *suffix))


def _bool_param(value: bool) -> str:
    return "true" if value else "false"


class ConnectClient:
    """Async client for one Kafka Connect cluster. Create once, reuse, :meth:`aclose` at the end.

    ``breaker``: the circuit breaker of this connection (``clients.connect.breaker``); with one,
    a cluster that timed out, refused the connection or answered 502/503/504 is not asked again
    for a back-off period: every request fails at once with that failure, marked remembered.
    Without (the command line tools, single-step tests), every request goes out.
    ``state_clock``: the monotonic clock ``state_changes`` ages the stops and resumes sent by.
    """

    def __init__(
        self,
        endpoint: ConnectEndpoint,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        breaker: CircuitBreaker[ConnectError] | None = None,
        state_clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._endpoint = endpoint
        self._breaker = breaker
        if breaker is not None:
            metrics.watch_connect_breaker(breaker)
        self._secrets = _secrets_of(endpoint)
        #: Counts the writes this client sent (before and after each): a snapshot taken at or
        #: before a connector's last write may predate it (``last_write``, ``write_seq``).
        self._write_seq = 0
        self._last_write: dict[str, int] = {}
        #: The last snapshot answer's sha256 and parse (``_expanded_unless_same``).
        self._last_listing: tuple[str, dict[str, ExpandedConnector]] | None = None
        #: The stops, pauses and resumes sent per connector: Connect's status lags them.
        self.state_changes = StateChanges(state_clock)
        #: Every installed plugin and version, asked once per cluster (``spec.version``'s check).
        self.installed_plugins = InstalledPlugins(self.plugin_versions)
        self._client = httpx.AsyncClient(
            base_url=endpoint.url,
            # No deadline for waiting on a pooled connection: the pool is this operator's own queue
            # (one client serves every resource of the cluster). With a deadline, a thousand
            # resources on a busy worker turned queueing into PoolTimeouts, reported as an outage
            # with back-off. Reading and writing keep the request timeout; connecting gets at most
            # CONNECT_TIMEOUT_S, so that a URL that does not accept fails in seconds.
            timeout=httpx.Timeout(
                endpoint.timeout_seconds, connect=min(CONNECT_TIMEOUT_S, endpoint.timeout_seconds), pool=None
            ),
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
    def breaker(self) -> CircuitBreaker[ConnectError] | None:
        return self._breaker

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

    async def worker_health(self) -> tuple[str, str]:
        """``GET /health`` (KIP-1017, Kafka Connect 3.9+): ``("healthy" | "starting" | "unhealthy",
        the worker's message)``. The worker answers 200 healthy, 503 starting, 500 unhealthy; a
        worker without the endpoint (older than 3.9) answers 404 (``ConnectNotFound``)."""
        path = "/health"
        try:
            # A starting worker's 503 is its answer to this question, not a gateway's: it does
            # not open the circuit breaker (a time-out here still does).
            answer = await self._get_model(path, _WORKER_HEALTH, gateway_answers=False)
        except ConnectHTTPError as error:
            state = {503: "starting", 500: "unhealthy"}.get(error.status_code)
            if state is None or error.remembered:
                raise
            return state, error.message
        return answer.status, answer.message

    async def connector_plugins(self) -> list[str]:
        """Connector plugin classes (``connectorsOnly=true``: no transforms/converters/predicates)."""
        plugins = await self._get_model("/connector-plugins", _PLUGINS, params={"connectorsOnly": "true"})
        return [p.class_ for p in plugins]

    async def plugin_versions(self) -> list[PluginInfo]:
        """``GET /connector-plugins?connectorsOnly=false``: every installed plugin (connectors,
        converters, header converters, transformations, predicates), one entry per installed
        version of a class (Kafka Connect 4.1+, KIP-891). Cached per cluster by
        ``installed_plugins``; ask that instead."""
        plugins = await self._get_model("/connector-plugins", _ALL_PLUGINS, params={"connectorsOnly": "false"})
        return [PluginInfo(p.class_, p.type, p.version) for p in plugins]

    async def validate_config(self, config: dict[str, str]) -> list[str]:
        """``PUT /connector-plugins/{class}/config/validate``: the problems, as ``key: message`` lines.

        Empty when Connect accepts the config. Used before creating a connector whose creation has
        further steps (initial offsets), so a config error never leaves a half-created connector.
        Each message is redacted and capped like every other answer (``_scrub``): a plugin's
        validator may quote the values it refuses, credentials included.
        """
        plugin = quote(config.get("connector.class", ""), safe="")
        response = await self._request("PUT", f"/connector-plugins/{plugin}/config/validate", json_body=config)
        assert response is not None
        body = self._validate(_JSON_OBJECT, self._parse_json("PUT", "validate", response), "PUT", "validate")
        problems: list[str] = []
        for item in body.get("configs") or []:
            value = item.get("value") if isinstance(item, dict) else None
            if isinstance(value, dict):
                problems += [self._scrub(f"{value.get('name')}: {error}") for error in value.get("errors") or []]
        if not problems and body.get("error_count"):
            problems.append(f"Connect reports {self._scrub(str(body['error_count']))} config error(s)")
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
            self._last_listing = await asyncio.to_thread(_expanded_unless_same, response.content, self._last_listing)
            found = self._last_listing[1]
        except (ValueError, RecursionError) as e:  # RecursionError: JSON nested deeper than Python parses
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
        self.state_changes.forget(name)
        body: dict[str, Any] = {"name": name, "config": config}
        if initial_state is not None:
            body["initial_state"] = initial_state
        await self._request("POST", "/connectors", json_body=body)

    async def put_connector_config(self, name: str, config: dict[str, str]) -> None:
        """Create or update (``PUT /connectors/{name}/config``)."""
        await self._request("PUT", _connector_path(name, "config"), json_body=config)

    async def delete_connector(self, name: str) -> bool:
        """Delete; ``False`` if there was no such connector."""
        self.state_changes.forget(name)
        response = await self._request("DELETE", _connector_path(name), not_found_ok=True)
        return response is not None

    async def stop_connector(self, name: str) -> None:
        await self._change_state(name, "stop")

    async def pause_connector(self, name: str) -> None:
        await self._change_state(name, "pause")

    async def resume_connector(self, name: str) -> None:
        await self._change_state(name, "resume")

    async def _change_state(self, name: str, change: StateChange) -> None:
        """``PUT .../stop|pause|resume``, noted in ``state_changes`` once Connect may have it."""
        try:
            await self._request("PUT", _connector_path(name, change))
        except BaseException as error:
            if maybe_applied(error):
                self.state_changes.sent(name, change)
            raise
        self.state_changes.sent(name, change)

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
        ticket = self._admit("GET", path)
        try:
            async with self._deadline("GET", path):
                body = await self._get_raw(path)
        except BaseException as error:
            self._settle(ticket, error, method="GET", path=path)
            raise
        self._settle(ticket, None)
        return body

    async def _get_raw(self, path: str) -> bytes:
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
        in_place: Callable[[bytes], Awaitable[bool]] | None = None,
    ) -> ChunkedAlterResult:
        """``PATCH /connectors/{name}/offsets`` in bounded chunks, in document order.

        ``document``: the offsets document as JSON (bytes or text), or an entry source (e.g.
        ``offsets.chunking.restore_entries``). ``plan``: boundaries already computed with
        ``plan_chunks`` from the same source (else computed here, in a thread). ``resume``: the
        progress of an earlier attempt; it continues where that stopped if the plan has the same
        fingerprint, else starts over (re-sending a chunk is harmless: PATCH only overwrites).
        ``on_chunk_done`` gets a :class:`ChunkProgress` after every applied chunk. ``in_place``:
        asked, when resuming, whether Connect already holds the first chunk to send (an earlier
        attempt sent it, then died or timed out before its progress was recorded); True skips it,
        so no chunk is applied twice.

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
        message = ALREADY_IN_PLACE  # unless a chunk is left to send
        done_partitions = plan.spans[start].start if start < len(plan) else plan.entries
        for index in range(start, len(plan)):
            chunk = await asyncio.to_thread(next, chunks)
            try:
                if index == start and resume is not None and in_place is not None and await in_place(chunk.body):
                    message = ALREADY_IN_PLACE
                else:
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
        gateway_answers: bool = True,
    ) -> _T:
        response = await self._request("GET", path, params=params, limit=limit, gateway_answers=gateway_answers)
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
        gateway_answers: bool = True,
    ) -> httpx.Response | None:
        """Send one request. Returns the 2xx response, ``None`` for a tolerated 404, else raises.

        ``content``: a body already serialised as JSON (chunks), sent as is. ``limit``: the most
        bytes of the (decoded) answer read before ``ConnectResponseTooLarge``; whoever controls the
        URL controls the answer, and a gzip body of 300 KB can decode to 300 MB.
        ``gateway_answers``: whether a 502/503/504 answer opens the circuit breaker (see
        ``BREAKER_STATUSES``); False where such a status is an answer of the worker's own.

        The breaker is asked first, before the fence: a request it refuses sends nothing, so it
        needs no claim on the resource (a claim is a status write; 150 resources of a dead cluster
        would each write one per pass for nothing), and it is not a write (``_note_write``).
        """
        ticket = self._admit(method, path)
        try:
            async with self._deadline(method, path):
                response = await self._send(
                    method,
                    path,
                    params=params,
                    json_body=json_body,
                    content=content,
                    not_found_ok=not_found_ok,
                    limit=limit,
                )
        except BaseException as error:
            self._settle(ticket, error, method=method, path=path, gateway_answers=gateway_answers)
            raise
        self._settle(ticket, None)
        return response

    def _deadline(self, method: str, path: str) -> contextlib.AbstractAsyncContextManager[None]:
        return deadline(self._endpoint.timeout_seconds, method, path)

    def _admit(self, method: str, path: str) -> Ticket | None:
        return admit(self._breaker, method, path)

    def _settle(
        self,
        ticket: Ticket | None,
        error: BaseException | None,
        *,
        method: str = "GET",
        path: str = "/",
        gateway_answers: bool = True,
    ) -> None:
        where = self._scrub(self._endpoint.url)
        settle(self._breaker, ticket, error, where, method=method, path=path, gateway_answers=gateway_answers)

    async def _send(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None,
        json_body: Any,
        content: bytes | None,
        not_found_ok: bool,
        limit: int,
    ) -> httpx.Response | None:
        headers = {"Content-Type": "application/json"} if content is not None else None
        extensions: dict[str, Any] = {}
        last_look: fencing.LastLook | None = None
        if method != "GET":
            # Under a Lease, a write goes out only in the term the pass began in (``fencing``):
            # checked before, and once more when its first byte and its body's last are about to leave.
            await fencing.before_write(f"{method} {path}")
            last_look = fencing.at_the_wire(f"{method} {path}")
            if last_look is not None:
                extensions["trace"] = last_look.trace
        self._note_write(method, path, json_body)
        try:
            request = self._client.build_request(
                method, path, params=params, json=json_body, content=content, headers=headers, extensions=extensions
            )
            if last_look is not None and request.content:
                request.stream = LastByteHeld(request.content, last_look)  # Content-Length stays
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
        return error_from_answer(method, path, response, scrub=self._scrub)

    def _parse_json(self, method: str, path: str, response: httpx.Response) -> Any:
        try:
            return response.json()
        except (ValueError, RecursionError) as e:
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
