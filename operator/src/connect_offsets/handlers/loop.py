"""The per-resource reconcile loop shared by the daemons of every kind."""

from __future__ import annotations

import asyncio
import contextlib
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

__all__ = ["note_change", "run_loop"]

log = logging.getLogger(__name__)


async def run_loop(
    state: OperatorState,
    waker: Waker,
    stopped: kopf.DaemonStopped,
    reconcile: Callable[[], Awaitable[Outcome]],
    logger: logging.Logger | kopf.Logger,
    kind: str,
) -> None:
    failures = 0
    while not stopped:
        waker.event.clear()
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
            delay = min(2.0**failures, MAX_RETRY_DELAY_S)
            logger.warning(f"transient failure, retrying in {delay:.0f}s: {outcome.transient_error}")
        else:
            failures = 0
            delay = state.drift_interval
            if outcome.requeue_after is not None:
                delay = min(delay, outcome.requeue_after)
        waker.configmaps = outcome.referenced_configmaps
        waker.connectors = outcome.connectors
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(waker.event.wait(), timeout=delay)


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
