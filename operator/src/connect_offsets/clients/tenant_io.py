"""Calls to hosts a tenant chooses (the Kafka brokers of its mirrors and ConnectClusters), kept from
starving everyone else.

Why: such a call is a synchronous Kafka client holding a thread for up to its whole timeout (10 to
25 s against a host that accepts connections and never answers), and a tenant chooses how many
there are (a KafkaMirrorMaker2 has up to 100 mirrors, each checked and measured). When they shared
asyncio's default pool with every Kubernetes call and all planning, one tenant's black-holed
mirrors made every other tenant's requests wait minutes. So:

* **A pool of their own** (``TENANT_IO_THREADS``): Kubernetes calls (``clients.kubernetes``) and
  planning (the event loop's default executor, sized at start-up) have theirs, so neither ever
  queues behind a tenant's hanging client.
* **A limit per namespace** (``CONNECT_OFFSETS_TENANT_CALLS_PER_NAMESPACE``, default 4): a
  namespace's calls wait on its own semaphore before they take a thread, so one namespace holds at
  most that many of the pool's threads and the others keep theirs.
* **Failures remembered** per namespace and address: once a call to an address fails, the
  namespace's next calls to it fail at once with the same message until a back-off has passed (30 s,
  doubling up to 5 min, reset by a success), so an unreachable host costs one attempt per back-off
  period, not one per mirror per pass. Per namespace, so that a tenant's failures (a wrong password
  on the platform's brokers) never hold back another tenant's calls to the same brokers.
* **One attempt at a time while an address is in doubt**: until it has answered (first use, or
  after a failure) a namespace sends one call to it and its other calls wait for that one's outcome,
  so forty mirrors of one hanging broker are one attempt, not forty at once.
* **A recovery wakes the namespace** (``on_recovered``): the first answer of an address whose
  failure was remembered is told, so the resources that failed meanwhile (waiting in back-off, up
  to a minute) check again at once (issue 45).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import logging
import os
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Final, TypeVar

from connect_offsets.errors import TransientError

__all__ = [
    "CALLS_PER_NAMESPACE_ENV",
    "DEFAULT_CALLS_PER_NAMESPACE",
    "FIRST_BACKOFF_S",
    "MAX_BACKOFF_S",
    "TENANT_IO_THREADS",
    "TenantNetwork",
    "address_key",
    "tenant_network",
]

log = logging.getLogger(__name__)
T = TypeVar("T")

CALLS_PER_NAMESPACE_ENV: Final = "CONNECT_OFFSETS_TENANT_CALLS_PER_NAMESPACE"
DEFAULT_CALLS_PER_NAMESPACE: Final = 4
#: Threads for all tenants' calls together: four namespaces at their limit leave the rest room.
TENANT_IO_THREADS: Final = 16
FIRST_BACKOFF_S: Final = 30.0
MAX_BACKOFF_S: Final = 300.0
#: Remembered failures are forgotten after this long without a new one (bounds the table).
_FORGET_AFTER_S: Final = 2 * MAX_BACKOFF_S


def address_key(bootstrap_servers: str) -> str:
    """One spelling of a bootstrap list: hosts lowercased, sorted, without blanks."""
    return ",".join(sorted({h.strip().lower() for h in bootstrap_servers.split(",") if h.strip()}))


@dataclass
class _Failure:
    error: TransientError
    backoff: float
    until: float


class TenantNetwork:
    """The pool, the per-namespace limits and the remembered failures of tenants' network calls."""

    def __init__(
        self,
        *,
        threads: int = TENANT_IO_THREADS,
        per_namespace: int = DEFAULT_CALLS_PER_NAMESPACE,
        first_backoff: float = FIRST_BACKOFF_S,
        max_backoff: float = MAX_BACKOFF_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.per_namespace = per_namespace
        self.first_backoff = first_backoff
        self.max_backoff = max_backoff
        self._clock = clock
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="tenant-io")
        self._limits: dict[str, asyncio.Semaphore] = {}
        self._failures: dict[tuple[str, str], _Failure] = {}
        #: When each (namespace, address) last answered: while that is recent, calls run side by side.
        self._answered: dict[tuple[str, str], float] = {}
        #: The one call in flight to an address in doubt, which the others wait for.
        self._trying: dict[tuple[str, str], asyncio.Future[None]] = {}
        #: Told (namespace, address) when an address whose failure was remembered answers again;
        #: called on the event loop, it must not block.
        self.on_recovered: Callable[[str, str], None] | None = None

    @classmethod
    def from_env(cls) -> TenantNetwork:
        raw = os.environ.get(CALLS_PER_NAMESPACE_ENV, "").strip()
        per_namespace = DEFAULT_CALLS_PER_NAMESPACE
        if raw:
            if raw.isdigit() and int(raw) > 0:
                per_namespace = int(raw)
            else:
                log.warning("%s=%r is not a positive integer; using %d", CALLS_PER_NAMESPACE_ENV, raw, per_namespace)
        return cls(per_namespace=per_namespace)

    def remembered(self, namespace: str, address: str) -> TransientError | None:
        """The failure a call from ``namespace`` to ``address`` would get now without asking, if any."""
        failure = self._failures.get((namespace, address))
        if failure is None or self._clock() >= failure.until:
            return None
        return failure.error

    async def run(
        self,
        namespace: str,
        address: str,
        call: Callable[[], T],
        remember: Callable[[TransientError, float], TransientError],
    ) -> T:
        """Run the blocking ``call`` (to ``address``, for a resource of ``namespace``) in the tenant
        pool, within the namespace's limit, unless a failure of that address is remembered.

        A ``TransientError`` the call raises is remembered; ``remember(error, backoff)`` makes the
        error later calls get instead (the same text, saying it is remembered), kept identical for
        the whole back-off so that status written from it does not change on every pass.
        """
        key = (namespace, address)
        while True:
            known = self.remembered(namespace, address)
            if known is not None:
                raise known
            trying = self._trying.get(key)
            if trying is None:
                break
            await asyncio.shield(trying)  # its outcome decides: remembered failure, or go ahead
        in_doubt = self._clock() - self._answered.get(key, float("-inf")) > self.max_backoff
        attempt: asyncio.Future[None] | None = None
        if in_doubt:
            attempt = asyncio.get_running_loop().create_future()
            self._trying[key] = attempt
        try:
            return await self._run(namespace, address, call, remember)
        finally:
            if attempt is not None:
                self._trying.pop(key, None)
                attempt.set_result(None)

    async def _run(
        self,
        namespace: str,
        address: str,
        call: Callable[[], T],
        remember: Callable[[TransientError, float], TransientError],
    ) -> T:
        limit = self._limits.setdefault(namespace, asyncio.Semaphore(self.per_namespace))
        async with limit:
            known = self.remembered(namespace, address)  # another call may have failed meanwhile
            if known is not None:
                raise known
            context = contextvars.copy_context()
            loop = asyncio.get_running_loop()
            future = loop.run_in_executor(self._pool, functools.partial(context.run, _released, call))
            try:
                result = await asyncio.shield(future)
            except asyncio.CancelledError:
                # The thread goes on, and a write it sent lands whenever Kafka answers: a pass
                # cancelled (its Lease lost) ends only once it did, however often it is cancelled
                # meanwhile, so that the Lease is released after our last write, not before it
                # (issue 44; ``Controller.drain`` lets the Lease expire if that takes too long).
                while not future.done():
                    with contextlib.suppress(asyncio.CancelledError):
                        await asyncio.wait([future])
                raise
            except TransientError as error:
                self._fail(namespace, address, error, remember)
                raise
        recovered = self._failures.pop((namespace, address), None) is not None
        self._answered[(namespace, address)] = self._clock()
        if recovered and self.on_recovered is not None:
            try:
                self.on_recovered(namespace, address)
            except Exception:  # a wake-up that failed must not fail the call that succeeded
                log.exception("waking the resources of %s after %s answered again", namespace, address)
        return result

    def _fail(
        self,
        namespace: str,
        address: str,
        error: TransientError,
        remember: Callable[[TransientError, float], TransientError],
    ) -> None:
        now = self._clock()
        self._failures = {k: f for k, f in self._failures.items() if now - f.until < _FORGET_AFTER_S}
        previous = self._failures.get((namespace, address))
        backoff = self.first_backoff if previous is None else min(previous.backoff * 2, self.max_backoff)
        self._failures[(namespace, address)] = _Failure(remember(error, backoff), backoff, now + backoff)
        self._answered.pop((namespace, address), None)  # in doubt again: the next attempt goes alone


def _released(call: Callable[[], T]) -> T:
    """``call()``; when it raises, the locals of its frames (a Kafka client and its connections)
    are released here and now, not whenever the error is dropped: a failed call must not keep its
    connection open past the namespace's limit."""
    try:
        return call()
    except BaseException as error:
        seen: set[int] = set()
        chained: BaseException | None = error
        while chained is not None and id(chained) not in seen:
            seen.add(id(chained))
            traceback.clear_frames(chained.__traceback__)
            chained = chained.__cause__ or chained.__context__
        raise


_NETWORK: TenantNetwork | None = None


def tenant_network() -> TenantNetwork:
    """The operator's one ``TenantNetwork`` (made on first use, from the environment)."""
    global _NETWORK
    if _NETWORK is None:
        _NETWORK = TenantNetwork.from_env()
    return _NETWORK
