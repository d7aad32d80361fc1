"""How a Connect request's ending is told to the endpoint's circuit breaker (``breaker``): which
failures say the cluster is not there, the whole request's deadline, and the refusal of a request
while the breaker is open.

Why apart from the client: the client sends requests and maps answers to errors; what counts as
an outage is a policy of its own (issue 45, sharpened by an attacker: a tenant's slow connector
path must not close an endpoint other tenants share), and a newcomer changing it looks here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import AsyncIterator
from typing import Final

import httpx

from connect_offsets import metrics
from connect_offsets.clients.connect.breaker import CircuitBreaker, RememberedFailure, Ticket
from connect_offsets.clients.connect.errors import (
    ConnectError,
    ConnectHTTPError,
    ConnectUnavailable,
    _readdressed,
    _remembered,
)

__all__ = ["BREAKER_STATUSES", "REQUEST_DEADLINE_TIME_OUTS", "admit", "deadline", "settle"]

# The client's logger name: log lines keep the name they had.
_log = logging.getLogger("connect_offsets.clients.connect")

#: Answers of a gateway in front of Connect saying there is nothing behind it (502 Bad Gateway,
#: 503 Service Unavailable, 504 Gateway Timeout): a failure of the cluster, for the circuit
#: breaker, like a time-out. Every other answer (404, 409, 400, Connect's own 500s) says it is there.
BREAKER_STATUSES: Final = frozenset({502, 503, 504})

#: A whole request (connecting, sending, every read of the answer) ends after this many request
#: time-outs: httpx's read time-out counts per read, so an answer trickled one byte at a time
#: never timed out, and held a worker for good (an attacker's test, issue 45).
REQUEST_DEADLINE_TIME_OUTS: Final = 4


def _cluster_wide(method: str, path: str) -> bool:
    """Whether a request reads the cluster as a whole (``GET /``, the connector listing, plugins,
    health), the same for every tenant of the endpoint. Only such a request's slow answer says the
    cluster is not there: one tenant can make Connect slow on its own connector's paths (a config
    whose validation waits for an unreachable database), and that must not open the breaker every
    tenant of the endpoint shares."""
    return method == "GET" and not path.startswith("/connectors/") and "/validate" not in path


def _is_outage(error: BaseException, *, method: str = "GET", path: str = "/", gateway_answers: bool = True) -> bool:
    """Whether a request's error says the cluster is not there (opens the circuit breaker): no
    connection could be made (refused, reset, DNS, TLS, the connect time-out), a cluster-wide
    request got no complete answer in time (``_cluster_wide``), or a gateway answered 502/503/504.
    Not the 404 of a worker still starting (``_NOT_CONNECT_404``): that is an answer, at once, and
    it raises ``ConnectUnavailable`` without a transport error behind it."""
    if isinstance(error, ConnectUnavailable):
        cause = error.__cause__
        if isinstance(cause, httpx.ReadTimeout | httpx.WriteTimeout | TimeoutError):
            return _cluster_wide(method, path)
        return isinstance(cause, httpx.TransportError | ssl.SSLError)
    return gateway_answers and isinstance(error, ConnectHTTPError) and error.status_code in BREAKER_STATUSES


def _remembered_text(backoff: float) -> str:
    """What a remembered failure adds to the real one: the same words for the whole back-off, so
    status written from it does not change on every pass."""
    return f"(remembered: Connect is not asked again for {backoff:.0f} s, then one request at a time until it answers)"


@contextlib.asynccontextmanager
async def deadline(timeout_seconds: float, method: str, path: str) -> AsyncIterator[None]:
    """The whole request within ``REQUEST_DEADLINE_TIME_OUTS`` request time-outs, else
    ``ConnectUnavailable`` (from a ``TimeoutError``, an outage as a read time-out is)."""
    seconds = timeout_seconds * REQUEST_DEADLINE_TIME_OUTS
    try:
        async with asyncio.timeout(seconds):
            yield
    except TimeoutError as e:
        _log.debug("%s %s -> no complete answer within %.0f s", method, path, seconds)
        raise ConnectUnavailable(
            f"no complete answer within {seconds:.0f} s ({REQUEST_DEADLINE_TIME_OUTS} request time-outs)",
            method=method,
            path=path,
        ) from e


def admit(breaker: CircuitBreaker[ConnectError] | None, method: str, path: str) -> Ticket | None:
    """The breaker's ticket for this request (None: no breaker), or its remembered failure
    raised, a fresh copy each time, without any network call."""
    if breaker is None:
        return None
    decision = breaker.admit()
    if isinstance(decision, RememberedFailure):
        metrics.CONNECT_REQUESTS_REFUSED.inc()
        _log.debug("%s %s -> refused by the circuit breaker", method, path)
        # Addressed to this request, not to the one that failed: that may have been another
        # tenant's, on its own connector's path.
        raise _readdressed(decision.error, method, path)
    return decision


def settle(
    breaker: CircuitBreaker[ConnectError] | None,
    ticket: Ticket | None,
    error: BaseException | None,
    where: str,
    *,
    method: str = "GET",
    path: str = "/",
    gateway_answers: bool = True,
) -> None:
    """Tell the breaker how the request ended: answered, failed (time-out, no connection,
    502/503/504), or neither (cancelled, fenced off before it was sent, a connector path's
    time-out). ``where``: the endpoint's URL, scrubbed, for the log."""
    if ticket is None or breaker is None:
        return
    if error is None:
        breaker.succeeded(ticket)
    elif _is_outage(error, method=method, path=path, gateway_answers=gateway_answers):
        assert isinstance(error, ConnectError)
        before = breaker.openings
        breaker.failed(ticket, lambda backoff: _remembered(error, _remembered_text(backoff)))
        if breaker.openings != before:
            metrics.CONNECT_BREAKER_OPENINGS.inc()
            _log.info("Connect at %s unreachable, not asked again for %.0f s: %s", where, breaker.backoff or 0.0, error)
    elif isinstance(error, ConnectUnavailable) and isinstance(error.__cause__, httpx.TransportError | TimeoutError):
        # No answer, but not one that says the cluster is down (a slow connector path): it
        # tells nothing. Counted as an answer it closed an open breaker and woke every resource
        # of the cluster at each time-out (test_faults' frozen worker retried every 2 s).
        breaker.released(ticket)
    elif isinstance(error, ConnectError):
        breaker.succeeded(ticket)  # an answer, if not a good one: the cluster is there
    else:
        breaker.released(ticket)
