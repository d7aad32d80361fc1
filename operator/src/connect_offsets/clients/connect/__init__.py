"""Async client for the Kafka Connect REST API.

Why this package looks the way it does
--------------------------------------

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

* **A dead cluster fails fast.**  Connecting gets at most ``CONNECT_TIMEOUT_S`` (5 s), apart from
  the request time-out.  With a :class:`CircuitBreaker` (the operator gives one to each connection),
  a time-out, a refused connection or a 502/503/504 makes the cluster unreachable for a back-off
  (2 s, doubling to 60 s, reset by any answer): every request fails at once, without a network
  call, with that same error (same class, its message ending ``(remembered: ...)``, the same text for
  the whole back-off, ``.remembered`` true); then one request at a time probes it.

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

The package, one module per job (each says what it holds; later ones never import earlier ones):

``client``     :class:`ConnectClient`: requests, answers mapped to errors, chunked alters
``plugins``    :class:`InstalledPlugins`: the installed plugins and versions, asked once per cluster
``breaker``    :class:`CircuitBreaker`: a cluster that times out is asked once per back-off
``responses``  bounded (gzip-bomb-safe) body reading, response models, the expand snapshot's parsing
``endpoint``   :class:`ConnectEndpoint`, :class:`ConnectAuth`: URL, credentials, TLS, redaction
``errors``     the error tree above

Import from the package (``from connect_offsets.clients.connect import ConnectClient``); the module
names are for finding the code. Patch a module-level value where it is read (e.g.
``connect_offsets.clients.connect.client.MAX_SNAPSHOT_BYTES``), not on the package.
"""

from __future__ import annotations

from connect_offsets.clients.connect.breaker import CircuitBreaker
from connect_offsets.clients.connect.client import ConnectClient
from connect_offsets.clients.connect.endpoint import ConnectAuth, ConnectEndpoint, build_ssl_context

# MAX_ERROR_TEXT: a limit, not an API name (so not in __all__); the tests read it from here.
from connect_offsets.clients.connect.errors import MAX_ERROR_TEXT as MAX_ERROR_TEXT
from connect_offsets.clients.connect.errors import (
    ConnectBadRequest,
    ConnectConflict,
    ConnectError,
    ConnectHTTPError,
    ConnectNotFound,
    ConnectResponseTooLarge,
    ConnectServerError,
    ConnectUnavailable,
)
from connect_offsets.clients.connect.plugins import InstalledPlugins
from connect_offsets.clients.connect.responses import ChunkedAlterResult, ExpandedConnector, PluginInfo
from connect_offsets.models.connect import (
    ConnectorStatus,
    RuntimeState,
    ServerInfo,
    TaskState,
    parse_version,
    supports_initial_state,
)

__all__ = [
    "ChunkedAlterResult",
    "CircuitBreaker",
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
    "ExpandedConnector",
    "InstalledPlugins",
    "PluginInfo",
    "RuntimeState",
    "ServerInfo",
    "TaskState",
    "build_ssl_context",
    "parse_version",
    "supports_initial_state",
]
