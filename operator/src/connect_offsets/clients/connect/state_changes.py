"""The stops, pauses and resumes this client sent, per connector: so that a pass that reads the
old state while Connect's status still lags one does not send it again.

Why: ``PUT /stop`` and ``PUT /resume`` change the connector's *target* state (a record in the
config topic); its *status* follows once the workers acted on it, and no REST call reads the
target state. On the real stack the status lagged a resume by 20 ms to 0.9 s, and a pass woken
meanwhile (by its own status write) read STOPPED and resumed the connector a second time. The
planner leaves out a state change this client sent moments ago (``planning.lifecycle``).

A change whose outcome is unknown (the answer was lost, Connect's own "Request timed out" or
failed forward to its leader, a gateway's 502 or 504, the pass cancelled while it was on its way)
counts as sent: Connect may have applied it. One Connect refused (its answer says so), or that
never left (the circuit breaker, the fence, a refused connection), does not count.

Across replicas: another replica's record is in its memory, so a term that followed another
replica's (a Lease released at a rollout is taken within a retry period) treats every change as
possibly sent at the term's start (``inherited_term_age``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Literal

import httpx

from connect_offsets import fencing
from connect_offsets.clients.connect.errors import ConnectError, ConnectHTTPError

__all__ = ["StateChange", "StateChanges", "inherited_term_age", "maybe_applied"]

StateChange = Literal["stop", "pause", "resume"]

#: Failures of a request that certainly never reached Connect.
_NEVER_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
#: Connect's 500 when forwarding a request to the leader failed (``RestClient.httpRequest``; a
#: stop and an offsets change are forwarded since 3.5), and the causes that say the leader never
#: got it.
_FORWARD_FAILED = ("IO Error trying to forward REST request", "Error trying to forward REST request")
_LEADER_NOT_REACHED = (
    "java.net.ConnectException",
    "java.net.UnknownHostException",
    "java.net.NoRouteToHostException",
    "javax.net.ssl.SSLHandshakeException",
)


def maybe_applied(error: BaseException) -> bool:
    """Whether a state change that failed with ``error`` may still have been applied by Connect."""
    if isinstance(error, ConnectHTTPError):
        # Connect answered and refused it, except for the answers that say nobody knows: its own
        # 500 "Request timed out" (the herder had not finished; the change stays queued and is
        # applied later), its 500 for a request forwarded to the leader whose answer was lost
        # (unless the leader was never reached), and a gateway's 502 or 504.
        if error.status_code in (502, 504):
            return True
        if error.status_code != 500:
            return False
        message = error.message
        forwarded = message.startswith(_FORWARD_FAILED) and not any(cause in message for cause in _LEADER_NOT_REACHED)
        return forwarded or "timed out" in message.lower()
    if isinstance(error, ConnectError):
        return not error.remembered and not isinstance(error.__cause__, _NEVER_SENT)
    # FencedOff and the other errors of ours are raised before the request leaves; a cancellation
    # may have come while it was on its way.
    return isinstance(error, asyncio.CancelledError)


class StateChanges:
    """The last state change sent per connector, and when (monotonic seconds)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._sent: dict[str, tuple[StateChange, float]] = {}

    def sent(self, name: str, change: StateChange) -> None:
        self._sent[name] = (change, self._clock())

    def forget(self, name: str) -> None:
        """The connector was deleted or created: an earlier one's changes are not this one's."""
        self._sent.pop(name, None)

    def last(self, name: str) -> tuple[StateChange, float] | None:
        """The last change sent for ``name`` and how many seconds ago, or None."""
        entry = self._sent.get(name)
        if entry is None:
            return None
        change, at = entry
        return change, self._clock() - at


def inherited_term_age() -> float | None:
    """In a pass whose Lease term followed another replica's, seconds since it began (None
    otherwise): that replica kept no record we can read of the stops and resumes it sent last."""
    fence = fencing.current()
    if fence is None or fence.after_another is None:
        return None
    return fence.after_another()
