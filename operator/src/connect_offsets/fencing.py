"""Fencing: a pass writes only while its replica holds the Lease it began under, in the same term.

Why: a Lease tells a replica when it may *start* work on a ConnectCluster; it cannot stop work
already running in a replica that was frozen (a long GC pause, SIGSTOP, a frozen node) and wakes
after another replica took the Lease over. Tried on the real stack, such a replica repeated the
stops and resumes the other had done (issue 44). So every write a pass makes is fenced:

* **locally, before the write**: the Lease of the pass's ConnectCluster must still be held, in the
  term (``leaseTransitions``) the pass began in, and renewed less than the renew deadline ago on
  this replica's monotonic clock (which counts the time the process was stopped);
  ``FencedOff`` otherwise, and the pass ends before the write;
* **on the resource, as the claim**: the first status change of a pass (or its first Connect
  write) records ``status.claimedBy`` (the holder's identity and term) with a resourceVersion
  precondition, and every later status write is conditional the same way
  (``reconcile/status.py``); a replica whose claim was taken over finds the resource changed, and
  ``FencedOff`` ends its pass before any Connect call. ``before_write`` makes that claim before the
  first Connect write of a pass, so a step that writes to Connect before any status write is
  covered too, and refuses a Connect write once the watch shows another replica's claim (a
  replica whose clock ran slow, so that its term still looked valid to it); and a claim replaces
  another replica's only after the API server's Lease confirms this term (``confirm``), so such a
  replica cannot take a resource back from the new holder either.

* **at the wire** (``at_the_wire``): the local checks run once more when the HTTP client is about
  to write the request's first byte, after it got a connection, and again before the last byte
  of a body. Why: between ``before_write`` and that moment a request awaits a pooled connection
  or a TCP connect; a replica frozen there (seen on the real stack: 1 of 4 SIGSTOP runs) sent its
  stale ``PUT /stop`` the moment it woke, after the new holder had finished the alter and resumed
  the connector. And Connect acts on a request only once it is whole: a frozen replica's half-sent
  body of megabytes would be completed on waking, so its last byte waits for a look of its own.

What no fence closes: a replica frozen between a last look and the socket taking the byte after
it. For the first byte that is synchronous code (microseconds). For a body's last byte it is as
long as the kernel takes to accept what is still in the event loop's transport buffer at the look
(up to about 80 KiB: a slice above the 16 KiB low-water mark), which is as fast as the worker reads:
milliseconds on a LAN, longer for a worker slow to read. Connect accepts no fencing token, so a
write already on its way cannot be refused by anyone.

Why a context variable: the fence belongs to the running pass (Go code passes a ``context.Context``
for the same reason), and the writes it guards are in every layer below the controller: Connect,
Kafka, and Kubernetes clients. Tasks a pass starts inherit it. Outside a fenced pass (one replica
without Leases, the CLI, unit tests of single steps) there is no fence and nothing is checked.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from connect_offsets.errors import ConnectOffsetsError

__all__ = ["Fence", "FencedOff", "LastLook", "acting_under", "at_the_wire", "before_write", "check", "current"]


class FencedOff(ConnectOffsetsError):
    """This replica no longer holds the Lease (or the resource's claim) the pass began under: the
    pass ends here, with nothing more written. Neither transient nor the user's to fix: the key
    belongs to another replica now, and nothing is retried here."""


@dataclass
class Fence:
    """The Lease term one pass runs under."""

    #: What ``status.claimedBy`` says while this term holds the resource: ``identity/term``.
    holder: str
    #: Whether the term is still held and renewed in time (the Lease keeper's answer, no I/O).
    valid: Callable[[], bool]
    #: Writes the resource's claim (set by the reconcile layer at the start of its pass).
    claim: Callable[[], Awaitable[None]] | None = None
    #: Whether this pass's resource is known to be claimed by ``holder`` (read or written).
    claimed: bool = False
    #: The ``claimedBy`` the pass read: a conditional write succeeds while it is still this (or ours).
    read_holder: str | None = field(default=None)
    #: The ConnectCluster (namespace, name) whose Lease this is: a resource bound to another one
    #: since (its label changed) is not this pass's to write for any more.
    cluster: tuple[str, str] | None = field(default=None)
    #: The resourceVersion the pass's next conditional status write is made against.
    resource_version: str | None = field(default=None)
    #: Whether the watch cache still shows the resource claimed by this term or the one the
    #: pass read (no I/O): another replica's claim, once watched, ends the pass.
    still_claimed: Callable[[], bool] | None = field(default=None)
    #: Whether the API server's Lease still names this term (one read; ``True``: not from the
    #: cache of the last retry period): asked before a claim replaces another replica's, so that a
    #: replica whose clock ran slow does not take back a resource the new holder claimed, and before
    #: a pass's first Connect write (``before_write``).
    confirm: Callable[[bool], Awaitable[bool]] | None = field(default=None)
    #: Whether this pass wrote its claim and had the Lease confirm its term before its first
    #: Connect write (``before_write``): later writes of the pass only check the term locally.
    confirmed_for_writes: bool = False
    #: Seconds since this term began, when it followed another term of the Lease (released at a
    #: rollout and taken within a retry period, or expired); None when the Lease was new. The
    #: stops and resumes the other holder sent last may not show in Connect's status yet.
    after_another: Callable[[], float] | None = field(default=None)

    def check(self, what: str) -> None:
        if not self.valid():
            raise FencedOff(f"not written, this replica's Lease term {self.holder} has ended: {what}")


_CURRENT: ContextVar[Fence | None] = ContextVar("connect_offsets_fence", default=None)


def current() -> Fence | None:
    """The fence of the running pass, or None when it runs unfenced."""
    return _CURRENT.get()


@contextlib.contextmanager
def acting_under(fence: Fence | None) -> Iterator[None]:
    """Run the block (and the tasks it starts) under ``fence``."""
    token = _CURRENT.set(fence)
    try:
        yield
    finally:
        _CURRENT.reset(token)


def check(what: str) -> None:
    """The local check before a Kubernetes or Kafka write: ``FencedOff`` once the term has ended."""
    fence = _CURRENT.get()
    if fence is not None:
        fence.check(what)


async def before_write(what: str) -> None:
    """Before a write to Connect (or Kafka): the term must hold, and the resource must be claimed
    by it *in this pass*, confirmed by the API server.

    Why not trust a claim the pass only read: a new holder no longer writes its claim into idle
    resources (a take-over of 20,000 cost 20,000 status writes), so a stale replica - one whose
    clock ran slow, so that its ended term still looked valid to it - can read its own old claim
    on a resource the new holder has not touched. So the first Connect write of every pass first
    writes the claim as a conditional status write (refused if the resource changed since the
    pass read it, a relabel included), then asks the API server's Lease, uncached, whether this
    term still holds it. One status write and one Lease read per pass that writes to Connect.
    """
    fence = _CURRENT.get()
    if fence is None:
        return
    fence.check(what)
    if fence.still_claimed is not None and not fence.still_claimed():
        raise FencedOff(f"not written, another replica claimed the resource: {what}")
    if fence.confirmed_for_writes:
        return
    if fence.claim is not None:
        await fence.claim()
        fence.claimed = True
    if fence.confirm is not None and not await fence.confirm(True):
        raise FencedOff(f"not written, the Lease is no longer held by {fence.holder}: {what}")
    fence.confirmed_for_writes = True
    fence.check(what)


#: httpcore's trace event fired right before a request's headers are written (HTTP/1.1 and 2):
#: from here to the socket write there is no await (httpcore and anyio, checked at their source).
_HEADERS_GO_OUT = "send_request_headers.started"


@dataclass(frozen=True)
class LastLook:
    """The local checks of a fenced pass, made once more at the wire (``at_the_wire``)."""

    fence: Fence
    what: str

    def __call__(self) -> None:
        """``FencedOff`` unless the term still holds and no other replica's claim is watched."""
        self.fence.check(self.what)
        if self.fence.still_claimed is not None and not self.fence.still_claimed():
            raise FencedOff(f"not written, another replica claimed the resource: {self.what}")

    async def trace(self, event: str, info: dict[str, Any]) -> None:
        """An httpcore ``trace`` callback: the look right before the request's first byte."""
        if event.endswith(_HEADERS_GO_OUT):
            self()


def at_the_wire(what: str) -> LastLook | None:
    """The last look of a write in a fenced pass (None outside one): before its first byte (its
    ``trace``) and, for a request with a body, before the body's last byte (the Connect client's
    ``LastByteHeld``): Connect acts on a request once it is whole, and a body of megabytes is
    still on its way for as long as the worker takes to read it."""
    fence = _CURRENT.get()
    return None if fence is None else LastLook(fence, what)
