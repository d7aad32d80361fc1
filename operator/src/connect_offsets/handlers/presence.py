"""This replica's presence under kopf peering: whether it is the active peer, so its workers run.

Why a daemon on the peering object: kopf pauses an operator in favour of a peer of higher priority
by stopping its watch streams and its daemons, and keeps that state to itself. The controller's
workers are not kopf's, so they learn it here: kopf runs this daemon (one per peering object it
serves) only in the active replica and stops it in a paused one.

Why without a finalizer: kopf gives every daemon one, so that it can stop the daemon before the
object goes. A stopped operator leaves it behind, and the peering object then blocks the deletion of
its namespace and of the peering CRD for good (a CRD deleted with ``--wait=false`` stayed
``Terminating``; test_shards). Nothing here needs to run before the object goes: kopf stops the
daemon when the object is deleted either way, and the workers then wait (``Presence.left``).
"""

from __future__ import annotations

import dataclasses
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

    _without_finalizer(presence)


def _without_finalizer(fn: Any) -> None:
    """kopf's ``daemon`` decorator always asks for a finalizer (``requires_finalizer=True``) and has
    no parameter for it: the registered handler is replaced by the same one without it (kopf then
    also removes the finalizer an earlier version left on the object)."""
    spawning = kopf.get_default_registry()._spawning
    spawning._handlers = [
        dataclasses.replace(h, requires_finalizer=False) if h.fn is fn else h for h in spawning._handlers
    ]
