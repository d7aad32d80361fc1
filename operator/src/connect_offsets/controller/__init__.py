"""The controller core: one work queue for every key, a bounded pool of workers, shards.

Between the watch streams (``handlers/watching.py``, which only feed it watch events) and the reconcile layer
(``reconcile/``, one pass per key). ``queue`` (dedup, delays, back-off, fairness across namespaces,
a cap per Connect cluster) -> ``sharding`` (which replica takes which ConnectCluster) and ``core``
(the workers, what wakes which key, our finalizer) and ``leases`` (which replica works on which
ConnectCluster now, and the fence of each pass); ``memory`` gives what a burst
freed back to the OS, and ``garbage_collection`` keeps the collector's pauses short. See
docs/architecture.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from connect_offsets.controller.core import (
    DELETE_ATTEMPTS,
    LAG,
    Controller,
    Deletions,
    next_check_delay,
)
from connect_offsets.controller.garbage_collection import (
    START_MODE_LIMIT_S,
    freeze_long_lived,
    measure_pauses,
    relax_for_start,
    settle_after_start,
)
from connect_offsets.controller.leases import LeaseKeeper, LeaseTimings, lease_name
from connect_offsets.controller.memory import TRIM_INTERVAL_S, return_freed_memory
from connect_offsets.controller.queue import Key, WorkQueue
from connect_offsets.controller.sharding import FINALIZER, Shard, awaiting_deletion, cluster_of, owner_of

__all__ = [
    "DEFAULT_WORKERS",
    "DELETE_ATTEMPTS",
    "FINALIZER",
    "LAG",
    "START_MODE_LIMIT_S",
    "TRIM_INTERVAL_S",
    "Controller",
    "ControllerSettings",
    "Deletions",
    "Key",
    "LeaseKeeper",
    "LeaseSettings",
    "LeaseTimings",
    "Shard",
    "WorkQueue",
    "awaiting_deletion",
    "cluster_of",
    "freeze_long_lived",
    "lease_name",
    "measure_pauses",
    "next_check_delay",
    "owner_of",
    "relax_for_start",
    "return_freed_memory",
    "settle_after_start",
]

#: Workers by default: passes mostly wait for Connect and the API server, so more than the 2 cores
#: the operator is sized for; few enough that the Kubernetes pool (8 threads) is not a queue of its own.
DEFAULT_WORKERS = 8


@dataclass(frozen=True)
class LeaseSettings:
    """Where this replica's Leases live, who it is, and client-go's three timings."""

    namespace: str
    identity: str
    prefix: str = "connect-offsets"
    timings: LeaseTimings = field(default_factory=LeaseTimings)


@dataclass(frozen=True)
class ControllerSettings:
    """How many workers, how many of them one Connect cluster may hold, this replica's shard, and
    whether it works under Leases (then only on the ConnectClusters whose Lease it holds)."""

    workers: int = DEFAULT_WORKERS
    cluster_workers: int | None = None  # default: half the workers
    shard: Shard = field(default_factory=Shard)
    leases: LeaseSettings | None = None
