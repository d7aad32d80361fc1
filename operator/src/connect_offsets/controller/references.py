"""What each key's last pass read, indexed the other way round: which keys read a ConfigMap, which
declare a Connect connector.

Why an index: a ConfigMap event and a cluster snapshot's changed connectors each wake the keys that
depend on them. Found by scanning every key, each such event cost O(resources): at a restart over
20,000 KafkaConnectors, the initial listing of a few hundred ConfigMaps (lists, backups) scanned
20,000 keys per ConfigMap and took 5 % of the event loop while the backlog of first checks ran
(bench/bench_cold_start.py). Kept here, each lookup costs what it finds.
"""

from __future__ import annotations

from typing import TypeVar

from connect_offsets.controller.queue import Key

__all__ = ["References"]

T = TypeVar("T")


class References:
    """key -> (ConfigMaps read, connectors declared), and both inverse maps."""

    def __init__(self) -> None:
        self._of: dict[Key, tuple[frozenset[str], frozenset[str]]] = {}
        #: (namespace, ConfigMap) -> the keys that read it (a resource reads its own namespace's).
        self._readers: dict[tuple[str, str], set[Key]] = {}
        #: connector name -> the keys that declare it.
        self._declaring: dict[str, set[Key]] = {}

    def record(self, key: Key, configmaps: set[str], connectors: set[str]) -> None:
        """What ``key``'s last pass read and declared (replacing what the pass before recorded)."""
        new = (frozenset(configmaps), frozenset(connectors))
        if self._of.get(key) == new:
            return
        self.forget(key)
        self._of[key] = new
        for name in new[0]:
            self._readers.setdefault((key[1], name), set()).add(key)
        for name in new[1]:
            self._declaring.setdefault(name, set()).add(key)

    def forget(self, key: Key) -> None:
        old = self._of.pop(key, None)
        if old is None:
            return
        for name in old[0]:
            _discard(self._readers, (key[1], name), key)
        for name in old[1]:
            _discard(self._declaring, name, key)

    def readers(self, namespace: str, configmap: str) -> list[Key]:
        """The keys whose last pass read ConfigMap ``namespace/configmap``."""
        return list(self._readers.get((namespace, configmap), ()))

    def declaring(self, connectors: set[str]) -> list[Key]:
        """The keys whose last pass declared any of ``connectors`` (each once)."""
        found: dict[Key, None] = {}
        for name in connectors:
            found.update(dict.fromkeys(self._declaring.get(name, ())))
        return list(found)


def _discard(index: dict[T, set[Key]], at: T, key: Key) -> None:
    keys = index.get(at)
    if keys is not None:
        keys.discard(key)
        if not keys:
            del index[at]
