"""A fenced write's body with its last byte held until the fence's last look (``fencing.LastLook``).

Why: Connect acts on a request once its last byte arrived. A body of megabytes (an offsets chunk
may be 4 MiB) is written as fast as the worker reads it; a replica frozen meanwhile (SIGSTOP, a GC
pause) keeps the rest in its memory and, woken after another replica took its Lease over, would
complete the request then. Sent in slices, the body's last byte goes only after the look says
this term still holds: a request cut short there is one the worker never acts on.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx

from connect_offsets.fencing import LastLook

__all__ = ["LastByteHeld"]

#: Slices the size of asyncio's transport high-water mark: after each, anyio waits while the
#: buffer is above that mark, so at the last look at most about 80 KiB is still unsent.
_SLICE = 64 * 1024


class LastByteHeld(httpx.AsyncByteStream):
    """``body`` in slices, its last byte sent only after ``look()`` passed (``FencedOff`` else)."""

    def __init__(self, body: bytes, look: LastLook) -> None:
        self._body = body
        self._look = look

    async def __aiter__(self) -> AsyncIterator[bytes]:
        body = self._body
        view = memoryview(body)[:-1]
        for start in range(0, len(view), _SLICE):
            yield bytes(view[start : start + _SLICE])
        self._look()
        yield body[-1:]
