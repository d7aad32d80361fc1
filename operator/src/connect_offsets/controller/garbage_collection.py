"""Keep the garbage collector's full collections short: the long-lived objects are frozen out of them.

Why: a full (generation 2) collection walks every object the collector tracks, and the event loop
stands still while it does. About 100,000 of those objects are the operator's code and its
libraries (modules, classes, functions, pydantic's schemas, the kubernetes client's models), alive
for as long as the process. bench_fair_queue measured full collections of 65-190 ms in the
operator while one tenant's 1,000 resources were cached, each one added whole to the latency of
whatever another tenant's pass was waiting for. ``gc.freeze()`` at the end of start-up moves what
is alive then (about 94,000 objects) into the permanent generation, which later collections skip;
the objects of resources, passes and answers are still collected. The same benchmark then measured
full collections of 18-40 ms on average.

What freezing costs: a cycle among the frozen objects that becomes garbage later is never
collected. Start-up's garbage is collected first, and what is alive at the end of start-up is the
process's own machinery, kept until it exits.

While the start's backlog of first checks runs (``first_checks``), the collector is in a start-up
mode (``relax_for_start``): young collections every ``START_THRESHOLDS[0]`` allocations instead of
700, full ones practically never. Why: the start reads every resource into the watch cache, and
what it reads stays; each young collection walked those survivors again, and full collections came
as the tracked objects grew by a quarter. bench_cold_start's profile of a restart over 20,000
KafkaConnectors had 24 % of the event loop's time in the collector. When the backlog is done
(``settle_after_start``), start-up's garbage is collected once and what is alive (the cache of
every resource) is frozen like the machinery before it; the default thresholds return. Should the
backlog never end (a pass that never finishes), ``START_MODE_LIMIT_S`` ends the mode anyway.

The pauses are measured (``connect_offsets_gc_pause_seconds``, by generation), so an operator with
many resources can see how long the collector holds the event loop.
"""

from __future__ import annotations

import gc
import time
from typing import Any

from connect_offsets import metrics

__all__ = ["START_MODE_LIMIT_S", "freeze_long_lived", "measure_pauses", "relax_for_start", "settle_after_start"]

#: Thresholds of the start-up mode: (young, middle, old) as ``gc.set_threshold`` takes them.
START_THRESHOLDS = (50_000, 50, 1_000)
#: The start-up mode ends this long after it began, the backlog done or not.
START_MODE_LIMIT_S = 600.0
_saved_thresholds: tuple[int, int, int] | None = None


def freeze_long_lived() -> int:
    """Collect start-up's garbage, then freeze what is left; the number of objects frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def relax_for_start() -> None:
    """Enter the start-up mode (once; again only after ``settle_after_start``)."""
    global _saved_thresholds
    if _saved_thresholds is None:
        _saved_thresholds = gc.get_threshold()
        gc.set_threshold(*START_THRESHOLDS)


def settle_after_start() -> int:
    """Leave the start-up mode: collect, freeze what is alive, restore the thresholds; the number of
    objects frozen in all (0, nothing done: not in the mode)."""
    global _saved_thresholds
    if _saved_thresholds is None:
        return 0
    saved, _saved_thresholds = _saved_thresholds, None
    frozen = freeze_long_lived()
    gc.set_threshold(*saved)
    return frozen


#: The histogram's series, looked up once: a young collection runs every few hundred allocations.
_PAUSES = {generation: metrics.GC_PAUSE_SECONDS.labels(str(generation)) for generation in range(3)}


class _CollectionTimer:
    """Times each collection from its "start" to its "stop" callback. Collections never nest (the
    collector does not run while it runs), so one start time is all the state there is."""

    def __init__(self) -> None:
        self.started: float | None = None

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self.started = time.perf_counter()
        elif self.started is not None:
            paused, self.started = time.perf_counter() - self.started, None
            series = _PAUSES.get(info.get("generation", -1))
            if series is not None:
                series.observe(paused)


_time_collection = _CollectionTimer()


def measure_pauses() -> None:
    """Time every collection into ``connect_offsets_gc_pause_seconds`` (installed once)."""
    if _time_collection not in gc.callbacks:
        gc.callbacks.append(_time_collection)
