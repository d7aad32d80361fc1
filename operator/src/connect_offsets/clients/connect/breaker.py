"""A circuit breaker for one Connect endpoint: a cluster that does not answer is asked once per
back-off period, not once per resource per pass.

Why: a ConnectCluster whose URL accepts connections and never answers (or answers 503 after 25 s)
made every pass of each of its resources wait the whole request time-out, holding the operator's
workers; one tenant's 150 resources on two dead URLs held them all, and every other tenant waited
(issue 45). The Kafka side has had the same remedy since the tenant pools (``clients.tenant_io``:
failures remembered, one attempt at a time while in doubt); this is its Connect counterpart:

* **Closed** (the cluster answers): requests go out side by side, as before.
* **Open** (after a time-out, a connection failure or a 502/503/504): for the back-off period every
  request is refused here, without any network call, with the failure that opened the breaker,
  made once when it opened (so status written from it is identical on every pass of the period).
* **Probing**: once the back-off has passed, exactly one request goes out; the others are still
  refused while it is in flight. Its answer closes the breaker (and ``on_recovered`` wakes the
  cluster's resources at once); its failure opens it again with the back-off doubled. An opening
  within ``max_backoff`` of the last closing doubles the last back-off too, so an endpoint that
  answers each probe and fails again at once (it flaps) is not asked every 2 s for ever.

Pure: no I/O, no Kubernetes, no knowledge of HTTP; the caller says what was a failure. The clock is
injectable so that tests count decisions instead of sleeping.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Generic, TypeVar

__all__ = ["FIRST_BACKOFF_S", "MAX_BACKOFF_S", "CircuitBreaker", "RememberedFailure", "Ticket"]

#: The first back-off. Short, because most failures of a Connect REST call are a worker restarting
#: or a rebalance, over in seconds; it equals the work queue's first retry delay, so a resource
#: that failed once is not held back longer than its own retry would hold it anyway.
FIRST_BACKOFF_S: Final = 2.0
#: The longest back-off: a dead cluster is asked once a minute (at most; a probe that times out
#: takes its own time-out on top), and one that comes back is noticed within a minute. It equals
#: the work queue's longest retry delay (``reconcile.settings.MAX_RETRY_DELAY_S``).
MAX_BACKOFF_S: Final = 60.0

E = TypeVar("E", bound=BaseException)


@dataclass(eq=False)
class Ticket:
    """A request let through: give it back with exactly one of ``succeeded``, ``failed`` or
    ``released``. ``epoch`` is the breaker's state when it was let through: a failure of a request
    that began before the breaker opened (or closed) again says nothing new about the cluster."""

    epoch: int
    probe: bool


@dataclass(frozen=True)
class RememberedFailure(Generic[E]):
    """A request not let through: ``error`` is the remembered failure (the same object for the
    whole back-off: raise a copy of it)."""

    error: E


@dataclass(frozen=True)
class _Open(Generic[E]):
    error: E
    backoff: float
    until: float


class CircuitBreaker(Generic[E]):
    """Closed, open or probing, per the module docstring. Not thread-safe: one event loop."""

    def __init__(
        self,
        *,
        first_backoff: float = FIRST_BACKOFF_S,
        max_backoff: float = MAX_BACKOFF_S,
        clock: Callable[[], float] = time.monotonic,
        on_recovered: Callable[[], None] | None = None,
    ) -> None:
        self.first_backoff = first_backoff
        self.max_backoff = max_backoff
        self._clock = clock
        self.on_recovered = on_recovered
        self._open: _Open[E] | None = None
        self._epoch = 0
        self._probe: Ticket | None = None
        #: The back-off of the last opening and when its breaker closed: an endpoint that answers
        #: its probe and fails again at once (one that flaps) keeps doubling its back-off.
        self._last_closed: tuple[float, float] | None = None
        #: Times the breaker opened (closed -> open, and a failed probe reopening it).
        self.openings = 0
        #: Requests refused without a network call.
        self.refusals = 0

    @property
    def is_open(self) -> bool:
        """Whether requests are being refused (open, or a probe in flight)."""
        return self._open is not None

    @property
    def backoff(self) -> float | None:
        """The current back-off (None: closed)."""
        return None if self._open is None else self._open.backoff

    def admit(self) -> Ticket | RememberedFailure[E]:
        """Let a request through (a ``Ticket``), or refuse it with the remembered failure."""
        opened = self._open
        if opened is None:
            return Ticket(self._epoch, probe=False)
        if self._probe is not None or self._clock() < opened.until:
            self.refusals += 1
            return RememberedFailure(opened.error)
        self._probe = Ticket(self._epoch, probe=True)
        return self._probe

    def succeeded(self, ticket: Ticket) -> bool:
        """The request was answered (any answer that is not a failure): the cluster is reachable.
        Closes an open breaker, calling ``on_recovered``; True when it did."""
        if ticket is self._probe:
            self._probe = None
        if self._open is None:
            return False
        self._last_closed = (self._open.backoff, self._clock())
        self._open, self._probe = None, None
        self._epoch += 1
        if self.on_recovered is not None:
            self.on_recovered()
        return True

    def failed(self, ticket: Ticket, remember: Callable[[float], E]) -> None:
        """The request timed out or could not connect (or a gateway said the cluster is not there).

        ``remember(backoff)`` makes the error later requests are refused with, once per opening.
        A failure of a request let through before the last change of state is not counted: while
        the breaker was closed, many requests may be under way, and their time-outs are one
        outage, not many (the back-off doubles only when a probe fails).
        """
        is_probe = ticket is self._probe
        if is_probe:
            self._probe = None
        if ticket.epoch != self._epoch:
            return
        if self._open is None:
            backoff = self.first_backoff
            if self._last_closed is not None:
                last, closed_at = self._last_closed
                if self._clock() - closed_at < self.max_backoff:
                    backoff = min(last * 2, self.max_backoff)  # failed again soon after: it flaps
        elif is_probe:
            backoff = min(self._open.backoff * 2, self.max_backoff)
        else:
            return  # cannot happen: while open only the probe is let through
        self._open = _Open(remember(backoff), backoff, self._clock() + backoff)
        self._epoch += 1
        self.openings += 1

    def released(self, ticket: Ticket) -> None:
        """The request ended without telling anything about the cluster (cancelled, refused by the
        fence before it was sent): a probe's turn passes to the next request."""
        if ticket is self._probe:
            self._probe = None
