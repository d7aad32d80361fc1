"""The errors of the Connect client: one small tree that callers decide *retry* or *give up* by.

Separate because every caller (the reconciler, the lag monitor, the CLI) imports these classes
without needing the client, and because the HTTP status -> class mapping is a contract of its own
(drawn in the package docstring, :mod:`connect_offsets.clients.connect`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import httpx

from connect_offsets.errors import ConnectOffsetsError, TransientError, UserError
from connect_offsets.offsets.chunking import ChunkFailure

#: Non-JSON error bodies (HTML from a proxy, plain text) are cut to this many characters.
MAX_ERROR_TEXT: Final = 512


class ConnectError(ConnectOffsetsError):
    """Base of every error raised by :class:`ConnectClient`.

    ``message`` is Connect's own message verbatim when Connect sent one, otherwise our description.
    ``method`` and ``path`` identify the request (path as sent, URL-quoted, without query string).
    ``chunk_failure`` is set when the request was one chunk of :meth:`ConnectClient.alter_offsets_chunked`.
    """

    chunk_failure: ChunkFailure | None = None
    #: True when the request was not sent: the circuit breaker refused it with the failure that
    #: opened it (``message`` then ends saying so; ``clients.connect.breaker``).
    remembered: bool = False

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

    @property
    def is_rebalance(self) -> bool:
        """The herder refused for now: "Request cannot be completed because a rebalance is expected"
        (``RebalanceNeededException``, answered as a 500); nothing was done, the same request passes later."""
        return "rebalance is expected" in self.message


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
    """Any other 4xx: 400, 401, 403, 405, 422, 429 ... Retryable: 429, and an offsets change refused
    because the connector is not STOPPED (``not_stopped``)."""

    @property
    def not_stopped(self) -> bool:
        """An offsets change refused because the connector is not STOPPED in Connect's config,
        though its status still said STOPPED when the operator read it: someone resumed it just
        before (the status follows the target state a moment later). Nothing was changed; a pass
        from fresh reads plans again, with a stop first (clean-clone CI run 10:
        test_a_connector_resumed_by_someone_else_right_before_an_alter_is_changed_safely)."""
        return self.status_code == httpx.codes.BAD_REQUEST and "must be in the STOPPED state" in self.message

    @property
    def retryable(self) -> bool:
        return super().retryable or self.not_stopped


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


def _remembered(error: ConnectError, text: str) -> ConnectError:
    """The same error (same class, status and request, so callers treat it as they treat the real
    failure), its message followed by ``text`` (the circuit breaker saying it is remembered)."""
    clone = _copy(error)
    clone.message = f"{error.message} {text}"
    clone.remembered = True
    Exception.__init__(clone, clone._render())
    return clone


def _readdressed(error: ConnectError, method: str, path: str) -> ConnectError:
    """A fresh copy of a remembered failure, as the failure of ``method path``: the text of the
    failure (the transport's or a gateway's words, the same for the whole back-off) without the
    request that met it, which may have been another tenant's."""
    clone = _copy(error)
    clone.method, clone.path = method, path
    Exception.__init__(clone, clone._render())
    return clone


def _copy(error: ConnectError) -> ConnectError:
    """A fresh copy to raise: one object raised by many requests would collect their tracebacks
    (and the frames they hold) and chain them to each other."""
    clone = type(error).__new__(type(error))
    clone.__dict__.update(error.__dict__)
    Exception.__init__(clone, *error.args)
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


def error_from_answer(
    method: str, path: str, response: httpx.Response, *, scrub: Callable[[str], str]
) -> ConnectHTTPError:
    """The error of a non-2xx answer: Connect's own ``message`` and ``error_code`` when its body has
    them, else the body's first ``MAX_ERROR_TEXT`` characters (or the reason phrase); ``scrub``
    masks the client's credentials in the message."""
    status = response.status_code
    message: str | None = None
    error_code: int | None = None
    try:
        body = response.json()
    except (ValueError, RecursionError):
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
    return cls(method=method, path=path, status_code=status, message=scrub(message), error_code=error_code)
