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

from connect_offsets.vocabulary import CLUSTER_LABEL, CLUSTER_NAMESPACE_LABEL, CLUSTERS

__all__ = ["Shard", "cluster_of"]


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
