"""This replica's presence under kopf peering: whether it is the active peer, so its workers run.

Why a daemon on the peering object: kopf pauses an operator in favour of a peer of higher priority
by stopping its watch streams and its daemons, and keeps that state to itself. The controller's
workers are not kopf's, so they learn it here: kopf runs this daemon (one per peering object it
serves) only in the active replica and stops it in a paused one. It adds its finalizer to the
peering object, which a running operator removes when the object is deleted.
"""

from __future__ import annotations

from typing import Any

import kopf

from connect_offsets.handlers.startup import state_of

__all__ = ["register"]


def register(peering: str, clusterwide: bool) -> None:
    """Register the presence daemon for the peering object named ``peering`` (before kopf starts)."""
    plural = "clusterkopfpeerings" if clusterwide else "kopfpeerings"

    def ours(name: str, **_: Any) -> bool:
        return name == peering

    @kopf.daemon("kopf.dev", "v1", plural, id="presence", when=ours, cancellation_timeout=5.0)
    async def presence(stopped: kopf.DaemonStopped, memo: Any, logger: kopf.Logger, **_: Any) -> None:
        controller = state_of(memo).controller
        controller.presence.arrived()
        logger.info("active peer: workers run")
        try:
            await stopped.wait()
        finally:
            controller.presence.left()
            logger.info("paused (or stopping): workers wait")
