"""The per-resource reconcile loop shared by the daemons of every kind."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import kopf

from connect_offsets import (
    metrics,
)
from connect_offsets.clients.kubernetes import KubernetesError
from connect_offsets.handlers.startup import OperatorState, Waker
from connect_offsets.reconcile.settings import MAX_RETRY_DELAY_S, Outcome
from connect_offsets.vocabulary import request_view

__all__ = ["next_check_delay", "note_change", "run_loop"]

log = logging.getLogger(__name__)

#: The shortest wait between two drift checks of one resource, as a share of the drift interval
#: (see ``next_check_delay``).
MIN_DRIFT_GAP = 0.2


def next_check_delay(outcome: Outcome, failures: int, drift_interval: float, elapsed: float) -> float:
    """How long a resource's loop waits before its next check (a waker event may end it sooner).

    After a transient failure: back-off (2 s ... ``MAX_RETRY_DELAY_S``). Otherwise the drift
    interval counted from the check's start, not its end: at 5,000 resources a check may wait
    seconds for the cluster's snapshot, and "an interval after the end" checked each resource only
    every ~2 intervals (bench_steady_state). ``MIN_DRIFT_GAP`` keeps a check slower than the
    interval from becoming a busy loop. A requeue the plan asked for can only shorten the wait.
    """
    if outcome.transient_error is not None:
        return min(2.0**failures, MAX_RETRY_DELAY_S)
    delay = max(drift_interval - elapsed, MIN_DRIFT_GAP * drift_interval)
    if outcome.requeue_after is not None:
        delay = min(delay, outcome.requeue_after)
    return delay


async def run_loop(
    state: OperatorState,
    waker: Waker,
    stopped: kopf.DaemonStopped,
    reconcile: Callable[[], Awaitable[Outcome]],
    logger: logging.Logger | kopf.Logger,
    kind: str,
    current_view: Callable[[], tuple[Any, ...] | None] = lambda: None,
) -> None:
    """One resource's checks, one at a time, until kopf stops the daemon.

    ``current_view`` is the request view of the resource's newest watched body. After a pass, a
    resource whose body already asks for something the pass did not account for (``Outcome.seen``)
    is checked again at once: its watch event may have arrived during the pass, or been coalesced
    with the echo of our own annotation removal into one event that looks like the last request
    (issue 30, the requests that waited for ever). Comparing levels, not counting events, is what
    makes a wake-up impossible to lose.
    """
    failures = 0
    loop = asyncio.get_running_loop()
    while not stopped:
        waker.event.clear()
        started = loop.time()
        try:
            outcome = await reconcile()
        except KubernetesError as error:
            outcome = Outcome(transient_error=str(error))
        except Exception:  # never let one resource kill its loop; log and back off
            logger.exception("reconcile failed unexpectedly")
            outcome = Outcome(transient_error="unexpected error")
        if outcome.transient_error is not None:
            metrics.RECONCILE_ERRORS.labels(kind).inc()
            failures += 1
        else:
            failures = 0
        delay = next_check_delay(outcome, failures, state.drift_interval, loop.time() - started)
        if outcome.transient_error is not None:
            logger.warning(f"transient failure, retrying in {delay:.0f}s: {outcome.transient_error}")
        waker.configmaps = outcome.referenced_configmaps
        waker.connectors = outcome.connectors
        if outcome.seen is not None:
            waker.seen = outcome.seen
            current = current_view()
            if current is not None and current != outcome.seen:
                delay = 0.0
        # A timer that sets the waker's event, not asyncio.wait_for: wait_for wraps the wait in a
        # task and, on timeout, cancels it and waits for the cancellation; with thousands of idle
        # resources that was half the event loop's time (py-spy on bench_steady_state at 5,000).
        # The loop does not need to tell a timeout from a wake-up: either way it checks again.
        timer = loop.call_later(delay, waker.event.set)
        try:
            await waker.event.wait()
        finally:
            timer.cancel()


def note_change(state: OperatorState, plural: str, namespace: str, name: str, body: Any, event_type: str) -> None:
    """Keep the latest body for the reconcile to read, and wake the resource's daemon when
    something that matters changed (not for our own status writes)."""
    state.kube.cache.observe(plural, namespace, name, None if event_type == "DELETED" else body)
    seen = request_view(body)
    waker = state.waker(plural, namespace, name)
    if event_type == "DELETED":
        state.wakers.pop((plural, namespace, name), None)
        waker.event.set()
    elif waker.seen != seen:
        waker.seen = seen
        waker.event.set()
