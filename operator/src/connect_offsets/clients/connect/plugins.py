"""The plugins a Connect cluster has installed, asked once per cluster rather than once per pass.

Why a cache of its own: ``spec.version`` is checked against ``GET
/connector-plugins?connectorsOnly=false`` before a connector's config is sent (issue 49 item 4,
``planning.plugin_versions``), and every full pass of every resource with a version asks. Plugins
change only when the workers restart, so one answer per Connect cluster is trusted for minutes:
each :class:`~connect_offsets.clients.connect.ConnectClient` (one per endpoint, shared by every
ConnectCluster naming it, like its connector snapshot) holds one :class:`InstalledPlugins`, and
passes that arrive while it is asking wait for that one answer instead of asking again.

A failed listing is not a refusal: the caller gets None and leaves the version to Connect's own
answer; the failure is remembered for ``FAILURE_BACKOFF_S`` so that a proxy refusing the path does
not cost a request per pass.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Final

from connect_offsets.clients.connect.errors import ConnectError
from connect_offsets.clients.connect.responses import PluginInfo

_log = logging.getLogger("connect_offsets.clients.connect")

#: After a failed listing, how long callers get None without a new request.
FAILURE_BACKOFF_S: Final = 30.0


def now() -> float:
    """The clock of the listing's age (monotonic; a test moves it)."""
    return time.monotonic()


class InstalledPlugins:
    """One Connect cluster's installed plugins, read through ``fetch`` at most once per ``max_age``
    a caller accepts (single flight: concurrent callers share one request)."""

    def __init__(self, fetch: Callable[[], Awaitable[list[PluginInfo]]]) -> None:
        self._fetch = fetch
        self._plugins: list[PluginInfo] | None = None
        self._at = float("-inf")  # monotonic time of the last answer
        self._failed_at = float("-inf")
        self._lock = asyncio.Lock()

    def age(self) -> float:
        """Seconds since the last answer (inf: none yet)."""
        return now() - self._at

    async def get(self, *, max_age: float) -> list[PluginInfo] | None:
        """The plugins as answered at most ``max_age`` seconds ago (asking now if the last answer
        is older); None when the listing failed (now, or within ``FAILURE_BACKOFF_S``)."""
        if self._plugins is not None and self.age() <= max_age:
            return self._plugins
        async with self._lock:
            if self._plugins is not None and self.age() <= max_age:
                return self._plugins  # answered while this caller waited for the lock
            if now() - self._failed_at < FAILURE_BACKOFF_S:
                return None
            try:
                self._plugins = await self._fetch()
            except ConnectError as error:
                self._failed_at = now()
                _log.debug("plugin listing failed, versions left to Connect: %s", error)
                return None
            self._at = now()
            return self._plugins
