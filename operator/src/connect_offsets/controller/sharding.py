"""Which replica reconciles what: ConnectClusters, and everything bound to them, by a stable hash.

Why by ConnectCluster (as Argo CD's application controller shards by cluster): the per-cluster
state — one Connect client, one connector snapshot, the cap on concurrent passes — then lives in
exactly one replica, and a resource moves between shards only when its ConnectCluster label
changes. The hash is SHA-256, not Python's ``hash`` (salted per process), so every replica agrees.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from connect_offsets.vocabulary import API_GROUP, CLUSTER_LABEL, CLUSTER_NAMESPACE_LABEL, CLUSTERS

__all__ = ["FINALIZER", "Shard", "cluster_of", "drop_stale_finalizers", "orphaned_deletion", "stale_finalizers"]

#: The finalizer of an operator that is not sharded; a shard's is this with ``-shard-INDEX``.
FINALIZER = f"{API_GROUP}/finalizer"


def cluster_of(plural: str, namespace: str, name: str, labels: Mapping[str, str]) -> tuple[str, str]:
    """The ConnectCluster (namespace, name) a resource is bound to; a ConnectCluster is its own.
    A resource without the cluster label is bound to ``(namespace, "")``: it lands in one shard,
    which reports that the label is missing."""
    if plural == CLUSTERS:
        return namespace, name
    return labels.get(CLUSTER_NAMESPACE_LABEL) or namespace, labels.get(CLUSTER_LABEL, "")


@dataclass(frozen=True)
class Shard:
    """This replica's shard: ``index`` of ``count`` (one shard: everything)."""

    index: int = 0
    count: int = 1

    def __post_init__(self) -> None:
        if self.count < 1 or not 0 <= self.index < self.count:
            raise ValueError(f"shard index {self.index} is not within 0..{self.count - 1}")

    def owns(self, cluster: tuple[str, str]) -> bool:
        if self.count == 1:
            return True
        digest = hashlib.sha256(f"{cluster[0]}/{cluster[1]}".encode()).digest()
        return int.from_bytes(digest[:8], "big") % self.count == self.index

    @property
    def finalizer(self) -> str:
        """This shard's finalizer. Why one per shard: kopf puts its finalizer on every resource a
        delete handler matches and removes it from every resource none matches. With one name for
        all shards, each shard's replica ran the delete logic of every resource (twice with two
        shards); with the handlers filtered by shard, a shard would remove the finalizer the owner
        put on. Own names let each shard add and remove only its own."""
        return FINALIZER if self.count == 1 else f"{FINALIZER}-shard-{self.index}"

    def owns_resource(self, plural: str, namespace: str, name: str, labels: Mapping[str, str]) -> bool:
        return self.owns(cluster_of(plural, namespace, name, labels))


def stale_finalizers(body: Mapping[str, Any], keep: str) -> list[str]:
    """Our finalizers on ``body`` other than ``keep``: those an operator with another shard count
    put on (``FINALIZER`` before sharding was turned on, a ``-shard-N`` one after it was turned
    off). No replica uses those names any more, so each would block the resource's deletion for
    good; the owner removes them once its delete logic has run."""
    finalizers = (body.get("metadata") or {}).get("finalizers") or []
    return [f for f in finalizers if f != keep and (f == FINALIZER or f.startswith(f"{FINALIZER}-shard-"))]


def drop_stale_finalizers(body: dict[str, Any], keep: str) -> None:
    """Remove ``stale_finalizers`` from ``body`` (a kopf patch function of the delete handlers)."""
    finalizers = body.get("metadata", {}).get("finalizers", [])
    for finalizer in stale_finalizers(body, keep):
        finalizers.remove(finalizer)


def orphaned_deletion(body: Mapping[str, Any], keep: str) -> bool:
    """A resource being deleted that waits only on our stale finalizers, not on ``keep``: kopf runs
    delete handlers for its own finalizer only, so nobody would run the delete logic or release
    the resource (it was deleted before its owner, after a change of the shard count, added
    ``keep``; a finalizer cannot be added once deletion has begun)."""
    metadata = body.get("metadata") or {}
    finalizers = metadata.get("finalizers") or []
    return bool(metadata.get("deletionTimestamp")) and keep not in finalizers and bool(stale_finalizers(body, keep))
