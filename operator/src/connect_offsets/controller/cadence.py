"""When a resource is checked again: the drift interval, each key's slot in it, and back-off.

Why apart from the controller: these are pure functions of a pass's outcome and the clock, read
(and tested) without workers, Leases or a queue.
"""

from __future__ import annotations

import zlib

from connect_offsets.controller.queue import Key
from connect_offsets.reconcile.settings import MAX_RETRY_DELAY_S, Outcome

__all__ = ["MIN_DRIFT_GAP", "ON_SLOT", "check_slot", "next_check_delay"]

#: A check that starts this near before its slot (a share of the drift interval) is the slot's
#: check: the next comes an interval later. A timer may fire a clock tick early.
ON_SLOT = 0.01

#: The shortest wait between two drift checks of one resource, as a share of the drift interval.
MIN_DRIFT_GAP = 0.2


def check_slot(key: Key, drift_interval: float) -> float:
    """Where in each drift interval this key's checks belong: a stable hash of the key, spread
    evenly over the interval (seconds from any multiple of the interval on the monotonic clock)."""
    plural, namespace, name = key
    return zlib.crc32(f"{plural}/{namespace}/{name}".encode()) / 2**32 * drift_interval


def next_check_delay(
    outcome: Outcome, failures: int, drift_interval: float, elapsed: float, to_slot: float | None = None
) -> float:
    """How long until a resource's next check (a wake-up may bring it sooner).

    After a transient failure: back-off (2 s ... ``MAX_RETRY_DELAY_S``). Otherwise the drift
    interval counted from the check's start, not its end: at 5,000 resources a check may wait
    seconds for the cluster's snapshot, and "an interval after the end" checked each resource only
    every ~2 intervals (bench_steady_state). ``MIN_DRIFT_GAP`` keeps a check slower than the
    interval from becoming a busy loop. A requeue the plan asked for can only shorten the wait.

    ``to_slot``: seconds from the check's start to the key's next slot (``check_slot``). The next
    check then comes at that slot, never later than one interval after the start, so every
    resource is still checked once per interval. Why: resources checked together stay together.
    1,000 created at once, or first checked when a slow cluster's listing arrived, were all due in
    the same 7 s of every interval (bench_fair_queue: 145-180 checks a second, then none), and
    another tenant's requests waited behind each burst. On their slots, they are due evenly over
    the interval. A key whose slot is nearer than ``MIN_DRIFT_GAP`` of the interval is checked
    once at that gap, and from there at its slot: one extra check, once.
    """
    if outcome.transient_error is not None:
        return float(min(2.0**failures, MAX_RETRY_DELAY_S))
    due = drift_interval
    if to_slot is not None and to_slot >= ON_SLOT * drift_interval:  # nearer: this check was the slot's
        due = max(to_slot, MIN_DRIFT_GAP * drift_interval)
    delay = max(due - elapsed, MIN_DRIFT_GAP * drift_interval)
    if outcome.requeue_after is not None:
        delay = min(delay, outcome.requeue_after)
    return delay
