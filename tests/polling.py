"""Waiting on the event loop until something holds, for unit tests of background work."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

__all__ = ["until"]


async def until(condition: Callable[[], bool], timeout: float = 2.0) -> bool:
    """Whether ``condition`` held within ``timeout`` seconds (checked every 10 ms)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        if condition():
            return True
        await asyncio.sleep(0.01)
    return condition()
