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
from connect_offsets.vocabulary import (
    API_GROUP,
)

__all__ = ["is_kopf_bookkeeping", "note_change", "run_loop"]

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
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(waker.event.wait(), timeout=delay)


def note_change(state: OperatorState, plural: str, namespace: str, name: str, body: Any, event_type: str) -> None:
    """Wake a resource's daemon when something that matters changed (not for our own status writes)."""
    meta = body.get("metadata", {})
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if not is_kopf_bookkeeping(k)}
    seen = (
        meta.get("generation"),
        tuple(sorted(annotations.items())),
        tuple(sorted((meta.get("labels") or {}).items())),
        meta.get("deletionTimestamp"),
    )
    waker = state.waker(plural, namespace, name)
    if event_type == "DELETED":
        state.wakers.pop((plural, namespace, name), None)
        waker.event.set()
    elif waker.seen != seen:
        waker.seen = seen
        waker.event.set()


def is_kopf_bookkeeping(key: str) -> bool:
    """kopf's own annotations under our prefix (progress, diff-base) do not change the request."""
    return key.startswith(f"{API_GROUP}/") and (
        key.endswith(("last-handled-configuration", "kopf-managed")) or "." in key.split("/", 1)[1]
    )
