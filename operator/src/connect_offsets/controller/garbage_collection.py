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

The pauses are measured (``connect_offsets_gc_pause_seconds``, by generation), so an operator with
many resources can see how long the collector holds the event loop.
"""

from __future__ import annotations

import gc
import time
from typing import Any

from connect_offsets import metrics

__all__ = ["freeze_long_lived", "measure_pauses"]


def freeze_long_lived() -> int:
    """Collect start-up's garbage, then freeze what is left; the number of objects frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


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
