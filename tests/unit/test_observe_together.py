"""observe reads Connect and the documents to apply at once (issue 35), failing as if one after the other."""

from __future__ import annotations

import asyncio

import pytest

from connect_offsets.reconcile.observe import _together


async def test_both_results_and_both_run_at_once() -> None:
    started: list[str] = []
    gate = asyncio.Event()

    async def first() -> str:
        started.append("first")
        await gate.wait()
        return "connector"

    async def second() -> int:
        started.append("second")
        gate.set()  # first can only finish once second has started: they overlap
        return 7

    assert await asyncio.wait_for(_together(first(), second()), 5) == ("connector", 7)
    assert sorted(started) == ["first", "second"]


async def test_the_first_error_wins_and_the_second_is_cancelled() -> None:
    cancelled = asyncio.Event()

    async def first() -> str:
        await asyncio.sleep(0)
        raise LookupError("Connect refused")

    async def second() -> int:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return 7

    with pytest.raises(LookupError, match="Connect refused"):
        await _together(first(), second())
    assert cancelled.is_set()


async def test_the_second_error_reaches_the_caller_after_the_first_succeeds() -> None:
    async def first() -> str:
        return "connector"

    async def second() -> int:
        raise ValueError("the ConfigMap is corrupt")

    with pytest.raises(ValueError, match="corrupt"):
        await _together(first(), second())
