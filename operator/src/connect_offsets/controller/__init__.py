"""The controller core: one work queue for every key, a bounded pool of workers, shards.

Between the kopf handlers (``handlers/``, which only feed it watch events) and the reconcile layer
(``reconcile/``, one pass per key). ``queue`` (dedup, delays, back-off, fairness across namespaces,
a cap per Connect cluster) -> ``sharding`` (which replica takes which ConnectCluster) and ``core``
(the workers, what wakes which key, presence under kopf peering); ``memory`` gives what a burst
freed back to the OS, and ``garbage_collection`` keeps the collector's pauses short. See
docs/architecture.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from connect_offsets.controller.core import (
    DELETE_ATTEMPTS,
    LAG,
    Controller,
    OrphanedDeletions,
    Presence,
    next_check_delay,
)
from connect_offsets.controller.garbage_collection import freeze_long_lived, measure_pauses
from connect_offsets.controller.memory import TRIM_INTERVAL_S, return_freed_memory
from connect_offsets.controller.queue import Key, WorkQueue
from connect_offsets.controller.sharding import FINALIZER, Shard, cluster_of, drop_stale_finalizers, orphaned_deletion

__all__ = [
    "DEFAULT_WORKERS",
    "DELETE_ATTEMPTS",
    "FINALIZER",
    "LAG",
    "TRIM_INTERVAL_S",
    "Controller",
    "ControllerSettings",
    "Key",
    "OrphanedDeletions",
    "Presence",
    "Shard",
    "WorkQueue",
    "cluster_of",
    "drop_stale_finalizers",
    "freeze_long_lived",
    "measure_pauses",
    "next_check_delay",
    "orphaned_deletion",
    "return_freed_memory",
]

#: Workers by default: passes mostly wait for Connect and the API server, so more than the 2 cores
#: the operator is sized for; few enough that the Kubernetes pool (8 threads) is not a queue of its own.
DEFAULT_WORKERS = 8


@dataclass(frozen=True)
class ControllerSettings:
    """How many workers, how many of them one Connect cluster may hold, this replica's shard, and
    whether it runs under kopf peering (then it works only while it is the active peer)."""

    workers: int = DEFAULT_WORKERS
    cluster_workers: int | None = None  # default: half the workers
    shard: Shard = field(default_factory=Shard)
    peering: str | None = None
