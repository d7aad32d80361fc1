"""Which replica reconciles what: ConnectClusters, and everything bound to them, by rendezvous hashing.

Why by ConnectCluster (as Argo CD's application controller shards by cluster): the per-cluster
state — one Connect client, one connector snapshot, the cap on concurrent passes, the Lease
(``leases``) — then lives in exactly one replica, and a resource moves between shards only when its
ConnectCluster label changes. The hash is SHA-256, not Python's ``hash`` (salted per process), so
every replica agrees.

Why rendezvous (highest random weight) hashing, not the hash modulo the count: a change of the
shard count moves only the clusters the new shard wins, about 1/N of them. Modulo moved 131 of 200
clusters on 2 -> 3 (issue 44), and every move is a hand-over through a Lease.

Why one finalizer for every shard count: a shard's finalizer name (``-shard-INDEX``, before issue
44) changed meaning with the count, so after a resize a replica that no longer owned a resource
removed the finalizer its owner relied on, and a deletion in that window skipped its delete logic.
The controller now adds and removes the one ``FINALIZER`` itself, only while it holds the
resource's Lease; the old per-shard names are migrated (``stale_finalizers``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from connect_offsets.vocabulary import API_GROUP, cluster_of

__all__ = ["FINALIZER", "Shard", "awaiting_deletion", "cluster_of", "needs_finalizer", "stale_finalizers"]

#: The one finalizer of every KafkaConnector and KafkaMirrorMaker2 (the name an unsharded operator
#: has always used, so those need no migration).
FINALIZER = f"{API_GROUP}/finalizer"


@dataclass(frozen=True)
class Shard:
    """This replica's shard: ``index`` of ``count`` (one shard: everything)."""

    index: int = 0
    count: int = 1

    def __post_init__(self) -> None:
        if self.count < 1 or not 0 <= self.index < self.count:
            raise ValueError(f"shard index {self.index} is not within 0..{self.count - 1}")

    def owns(self, cluster: tuple[str, str]) -> bool:
        """Whether this shard wins ``cluster``: the shard whose index hashes highest with it."""
        if self.count == 1:
            return True
        return owner_of(cluster, self.count) == self.index

    def owns_resource(self, plural: str, namespace: str, name: str, labels: Mapping[str, str]) -> bool:
        return self.owns(cluster_of(plural, namespace, name, labels))


def owner_of(cluster: tuple[str, str], count: int) -> int:
    """The shard (of ``count``) that owns ``cluster``: rendezvous hashing."""

    def weight(index: int) -> int:
        digest = hashlib.sha256(f"{cluster[0]}/{cluster[1]}#{index}".encode()).digest()
        return int.from_bytes(digest[:8], "big")

    return max(range(count), key=weight)


def stale_finalizers(body: Mapping[str, Any]) -> list[str]:
    """Our finalizers on ``body`` other than ``FINALIZER``: the per-shard ones operators before
    issue 44 put on (``-shard-N``). No replica uses those names any more; the owner replaces them
    with ``FINALIZER`` (or, on a resource being deleted, runs its delete logic and removes them)."""
    finalizers = (body.get("metadata") or {}).get("finalizers") or []
    return [f for f in finalizers if f.startswith(f"{FINALIZER}-shard-")]


def needs_finalizer(body: Mapping[str, Any]) -> bool:
    """A live resource without ``FINALIZER``, or with stale ones to replace."""
    metadata = body.get("metadata") or {}
    if metadata.get("deletionTimestamp"):
        return False
    return FINALIZER not in (metadata.get("finalizers") or []) or bool(stale_finalizers(body))


def awaiting_deletion(body: Mapping[str, Any]) -> bool:
    """A resource being deleted that waits on one of our finalizers: its delete logic is ours to run."""
    metadata = body.get("metadata") or {}
    finalizers = metadata.get("finalizers") or []
    return bool(metadata.get("deletionTimestamp")) and (FINALIZER in finalizers or bool(stale_finalizers(body)))
