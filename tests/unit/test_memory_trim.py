"""Freed memory is given back to the OS (controller/memory.py): off the event loop, periodically,
and not at all where it is turned off or the C library has no malloc_trim."""

from __future__ import annotations

import asyncio
import threading

import pytest

from connect_offsets.controller.memory import malloc_trim, return_freed_memory

pytestmark = pytest.mark.unit


async def test_trims_periodically_in_a_thread() -> None:
    loop_thread = threading.get_ident()
    threads: list[int] = []

    def trim() -> int:
        threads.append(threading.get_ident())
        return 1

    task = asyncio.create_task(return_freed_memory(0.01, trim))
    for _ in range(200):
        await asyncio.sleep(0.01)
        if len(threads) >= 3:
            break
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert len(threads) >= 3
    assert loop_thread not in threads  # the loop never waits for a trim


async def test_interval_zero_turns_it_off() -> None:
    calls: list[int] = []
    await asyncio.wait_for(return_freed_memory(0, lambda: calls.append(1) or 1), timeout=1)
    assert calls == []


async def test_without_malloc_trim_nothing_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("connect_offsets.controller.memory.malloc_trim", lambda: None)
    # Returns at once instead of looping forever.
    await asyncio.wait_for(return_freed_memory(0.01), timeout=1)


def test_glibc_trim_is_found_and_runs() -> None:
    trim = malloc_trim()
    assert trim is not None  # this machine's Python runs on glibc
    assert trim() in (0, 1)
