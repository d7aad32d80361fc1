"""Freed memory is given back to the OS (controller/memory.py): off the event loop, after RSS grew,
and not at all where it is turned off (``CONNECT_OFFSETS_MEMORY_TRIM_INTERVAL=0``) or the C library
has no malloc_trim."""

from __future__ import annotations

import asyncio
import re
import threading

import kopf
import pytest

from connect_offsets.controller.memory import TRIM_GROWTH_BYTES, malloc_trim, resident_bytes, return_freed_memory
from connect_offsets.handlers.startup import _env_float
from tests.polling import until

pytestmark = pytest.mark.unit


async def test_trims_periodically_in_a_thread() -> None:
    loop_thread = threading.get_ident()
    threads: list[int] = []

    def trim() -> int:
        threads.append(threading.get_ident())
        return 1

    # RSS unknown (no /proc): a trim every interval.
    task = asyncio.create_task(return_freed_memory(0.01, trim, rss=lambda: None))
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


async def test_a_steady_process_is_not_trimmed_again_until_it_grows() -> None:
    """A trim pauses the loop's allocations while it walks the heap: after the first one, another
    only once RSS has grown by TRIM_GROWTH_BYTES (a burst), not every interval."""
    trims: list[int] = []
    resident = [500 << 20]

    def trim() -> int:
        trims.append(resident[0])
        resident[0] = 200 << 20  # what the trim gave back
        return 1

    task = asyncio.create_task(return_freed_memory(0.01, trim, rss=lambda: resident[0]))
    try:
        assert await until(lambda: len(trims) == 1)
        await asyncio.sleep(0.1)
        assert len(trims) == 1  # steady at 200 MiB: nothing to do
        resident[0] = (200 << 20) + TRIM_GROWTH_BYTES - 1
        await asyncio.sleep(0.1)
        assert len(trims) == 1
        resident[0] = (200 << 20) + TRIM_GROWTH_BYTES  # a burst
        assert await until(lambda: len(trims) == 2)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


def test_resident_bytes_reads_this_process() -> None:
    found = resident_bytes()
    assert found is not None and found > 10 << 20


@pytest.mark.parametrize(("raw", "expected"), [(None, 10.0), ("", 10.0), ("0", 0.0), ("2.5", 2.5)])
def test_the_trim_interval_setting_accepts_zero_as_off(
    monkeypatch: pytest.MonkeyPatch, raw: str | None, expected: float
) -> None:
    if raw is None:
        monkeypatch.delenv("X_TRIM", raising=False)
    else:
        monkeypatch.setenv("X_TRIM", raw)
    assert _env_float("X_TRIM", 10.0, zero_allowed=True) == expected


@pytest.mark.parametrize(
    ("raw", "zero_allowed", "message"),
    [
        ("0", False, "X_TRIM must be > 0, got 0"),
        ("-1", True, "X_TRIM must be >= 0, got -1"),
        ("soon", True, "X_TRIM='soon' is not a number"),
    ],
)
def test_a_bad_interval_setting_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, raw: str, zero_allowed: bool, message: str
) -> None:
    monkeypatch.setenv("X_TRIM", raw)
    with pytest.raises(kopf.PermanentError, match=re.escape(message)):
        _env_float("X_TRIM", 10.0, zero_allowed=zero_allowed)
