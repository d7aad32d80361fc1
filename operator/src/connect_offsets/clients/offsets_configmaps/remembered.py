"""ConfigMaps as our own last write left them: the next write of the same one starts from here.

Why: writing an offsets document needs the ConfigMap as it is (the sizes of its other keys, whose
labels it carries, which form it holds). A GET before every write was the one API call of a `list`
request above the protocol floor (issue 35, ``bench/bench_latency.py``), and the answer to our own
patch already says all of it. It is only where a write starts: the write's patch carries the
remembered resourceVersion, so a change since then by anyone, or a deletion, fails that patch and
the write starts again from a read (``OffsetsConfigMapStore.write``). Bounded: small ConfigMaps
only, the most recently written.
"""

from __future__ import annotations

from collections import OrderedDict

from connect_offsets.clients.kubernetes import ConfigMapData

__all__ = ["RememberedConfigMaps"]


class RememberedConfigMaps:
    """``(namespace, name)`` → the ConfigMap our last write of it left, at most ``entries`` of them."""

    def __init__(self, entries: int = 128, payload_max: int = 64 * 1024) -> None:
        self.entries = entries
        self.payload_max = payload_max
        self._kept: OrderedDict[tuple[str, str], ConfigMapData] = OrderedDict()

    def take(self, namespace: str, name: str) -> ConfigMapData | None:
        """The remembered ConfigMap, forgotten here: a write that fails half-way leaves no guess."""
        return self._kept.pop((namespace, name), None)

    def keep(self, namespace: str, name: str, configmap: ConfigMapData) -> None:
        """Remember the answer to a write, unless it is large (its data would sit in memory)."""
        payload = sum(len(v) for v in configmap.data.values()) + sum(len(v) for v in configmap.binary_data.values())
        if payload > self.payload_max:
            self._kept.pop((namespace, name), None)
            return
        self._kept[(namespace, name)] = configmap
        self._kept.move_to_end((namespace, name))
        while len(self._kept) > self.entries:
            self._kept.popitem(last=False)

    def __len__(self) -> int:
        return len(self._kept)
