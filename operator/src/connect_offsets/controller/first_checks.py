"""The first check of each resource this replica works on: how many still wait for theirs, and one
call when none does.

Why: after a start (or a Lease taken over) every resource is queued for a check at once, and until
each has had its pass, the operator has not looked at it: a connector deleted behind its back
is not yet repaired, a status not yet written. Users see the backlog shrink
(``connect_offsets_unchecked_resources``) and one log line when it is done, with how long it took.
The start-up's garbage-collector mode ends there too (``garbage_collection.settle_after_start``):
what is alive then is the watch cache of every resource, long-lived, frozen out of later full
collections.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from connect_offsets import metrics
from connect_offsets.controller.queue import Key

__all__ = ["FirstChecks"]


class FirstChecks:
    """Keys queued on first sight whose pass has not ended yet; ``on_all_checked(count, seconds)``
    each time the last of a wave (keys first seen while none waited) has had its pass."""

    def __init__(
        self,
        on_all_checked: Callable[[int, float], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.on_all_checked = on_all_checked
        self._clock = clock
        #: Waiting key -> the term of its wait: a pass begun before the key waited again (a Lease
        #: lost, then taken back while the old pass was still ending) does not end the new wait.
        self._waiting: dict[Key, int] = {}
        self._terms = 0
        self._wave_started = 0.0
        self._wave_checked = 0

    def waiting(self, key: Key) -> None:
        """``key`` was queued on first sight: it waits for its first check."""
        if not self._waiting:
            self._wave_started, self._wave_checked = self._clock(), 0
        self._terms += 1
        self._waiting[key] = self._terms
        metrics.UNCHECKED_RESOURCES.set(len(self._waiting))

    def term(self, key: Key) -> int | None:
        """The term of ``key``'s wait now (None: not waiting); a pass takes it when it starts."""
        return self._waiting.get(key)

    def checked(self, key: Key, term: int | None) -> None:
        """A pass of ``key`` that started in wait ``term`` ended (whatever its outcome)."""
        if term is not None and self._waiting.get(key) == term:
            self._wave_checked += 1
            self._leave(key)

    def discard(self, key: Key) -> None:
        """``key`` is gone, or no longer this replica's: it waits for nothing here."""
        if key in self._waiting:
            self._leave(key)

    def _leave(self, key: Key) -> None:
        del self._waiting[key]
        metrics.UNCHECKED_RESOURCES.set(len(self._waiting))
        if not self._waiting and self._wave_checked and self.on_all_checked is not None:
            self.on_all_checked(self._wave_checked, self._clock() - self._wave_started)

    def __len__(self) -> int:
        return len(self._waiting)
