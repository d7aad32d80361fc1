"""Give the memory a burst has freed back to the operating system (glibc's ``malloc_trim``).

Why: CPython hands every allocation above 512 bytes to the C allocator: the JSON text of watch
events and list answers, the strings in resource bodies, Connect's answers. glibc keeps what is
freed for reuse and gives memory back to the OS only from the top of its heap, so after a burst
(the first pass over 10,000 resources, a shard's take-over) the freed memory stays in the process.
Measured (bench/bench_shards.py, an active replica at 5,800 resources): RSS 769 MiB, of which
511 MiB was free in malloc's heap; one ``malloc_trim(0)`` took 24 ms and left RSS at 264 MiB.
Without it the chart's memory limit has to be sized for the burst forever.

``malloc_trim`` runs in a thread: ctypes releases the GIL for the call, so the event loop goes on,
but its own allocations wait for the heap's lock while a trim walks it. So a trim runs only when
RSS has grown by ``TRIM_GROWTH_BYTES`` since the last one left it: after a burst, not every
interval of a steady operator. Where the C library has no ``malloc_trim`` (musl, macOS) nothing runs.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import os
from collections.abc import Callable

__all__ = ["TRIM_GROWTH_BYTES", "TRIM_INTERVAL_S", "malloc_trim", "resident_bytes", "return_freed_memory"]

log = logging.getLogger(__name__)

#: Often enough that a burst's garbage does not pile up into a higher peak; a trim with little to
#: give back costs well under a millisecond.
TRIM_INTERVAL_S = 10.0

#: RSS growth since the last trim that makes the next one worth its pause.
TRIM_GROWTH_BYTES = 32 * 1024 * 1024


def resident_bytes() -> int | None:
    """This process's RSS (``/proc/self/statm``), or None where there is no /proc."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def malloc_trim() -> Callable[[], int] | None:
    """glibc's ``malloc_trim(0)`` (1: memory was returned), or None where the C library has none."""
    try:
        libc = ctypes.CDLL(None)  # the symbols the process already has, libc's among them
    except OSError:
        return None
    function = getattr(libc, "malloc_trim", None)
    if function is None:
        return None
    function.argtypes = [ctypes.c_size_t]
    function.restype = ctypes.c_int

    def trim() -> int:
        return int(function(0))

    return trim


async def return_freed_memory(
    interval: float = TRIM_INTERVAL_S,
    trim: Callable[[], int] | None = None,
    rss: Callable[[], int | None] = resident_bytes,
) -> None:
    """Run forever on the operator's loop: every ``interval`` seconds, trim in a thread if RSS
    grew by ``TRIM_GROWTH_BYTES`` since the last trim (always, where RSS cannot be read).
    ``interval`` 0 or less turns it off (``CONNECT_OFFSETS_MEMORY_TRIM_INTERVAL``)."""
    if interval <= 0:
        return
    trim = trim if trim is not None else malloc_trim()
    if trim is None:
        log.info("this C library has no malloc_trim: freed memory is left to the allocator")
        return
    left: int | None = None  # RSS right after the last trim
    while True:
        await asyncio.sleep(interval)
        now = rss()
        if now is not None and left is not None and now - left < TRIM_GROWTH_BYTES:
            continue
        await asyncio.to_thread(trim)
        left = rss()
