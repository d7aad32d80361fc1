"""The latest body of every resource the operator watches, kept from the watch stream.

Why: the watch streams (``clients/watch.py``) already bring every KafkaConnector, KafkaMirrorMaker2
and ConnectCluster body to us. Reading them again with a GET on every pass made the idle cost one or
two API calls per resource per drift interval (3,785 calls/min at 1,000 connectors). Like
controller-runtime's informer cache, reads come from here and writes go to the API server; a GET is
left only where freshness decides something (``KubernetesApi.fresh_resource``, before a destructive
offsets change) and as the fallback for a resource no event has brought yet.

Bodies are stored and handed out as deep copies: a pass mutates the body it holds (the status it
wrote), and a watch event must not change a body half-way through someone's pass.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Mapping
from typing import Any

from connect_offsets.vocabulary import request_view

__all__ = ["ResourceCache", "copy_tree"]

_Key = tuple[str, str, str]

#: A body no watch event has confirmed (read with a GET, or the answer to our write) is trusted this
#: long: a resource in a namespace this operator does not watch (a ConnectCluster named with
#: ``cluster-namespace``) is then read again at most this often instead of never.
UNWATCHED_TTL_S = 30.0


_ATOMS = frozenset({str, int, float, bool, type(None)})


def copy_tree(value: Any) -> Any:
    """A deep copy of a JSON tree (dicts, lists, atoms), anything else deep-copied.

    Why not ``copy.deepcopy`` alone: its memo (shared and cyclic parts, which a parsed JSON body
    cannot have) made it 57 us for a typical KafkaConnector, against 10 us here; every watch event
    and every pass copies a body (a standby taking over 4,200 resources spent 7 % of its CPU here).
    """
    kind = type(value)
    if kind is dict:
        return {key: copy_tree(item) for key, item in value.items()}
    if kind is list:
        return [copy_tree(item) for item in value]
    if kind in _ATOMS:
        return value
    return copy.deepcopy(value)


def _version(body: Mapping[str, Any]) -> int | None:
    raw = (body.get("metadata") or {}).get("resourceVersion")
    return int(raw) if isinstance(raw, str) and raw.isdigit() else None


class ResourceCache:
    """``(plural, namespace, name)`` → the newest body seen, from watch events and our own writes."""

    def __init__(self) -> None:
        self._bodies: dict[_Key, dict[str, Any]] = {}
        self._expires: dict[_Key, float] = {}  # bodies no watch event has brought yet

    def observe(
        self,
        plural: str,
        namespace: str,
        name: str,
        body: Mapping[str, Any] | None,
        *,
        watched: bool = True,
        owned: bool = False,
    ) -> None:
        """A body from a watch event (``watched``) or from a GET or the answer to our own write;
        ``None``: deleted. ``owned``: the caller hands the body over (a watch stream's, parsed for
        this event and held by no one else), so it is kept without a copy: a copy of a tenant's
        deeply nested config doubled the event's cost on the loop (attacker review F1).

        An older body never replaces a newer one: the answer to our status patch may arrive
        before the watch event of a change made just before it. resourceVersion is opaque by
        API convention, so versions are only compared when both are the integers etcd issues;
        otherwise the body that arrived last wins.
        """
        key = (plural, namespace, name)
        if body is None:
            self._bodies.pop(key, None)
            self._expires.pop(key, None)
            return
        current = self._bodies.get(key)
        if current is not None:
            new_version, old_version = _version(body), _version(current)
            if new_version is not None and old_version is not None and new_version < old_version:
                return
        kept = dict(body)
        # managedFields are half of a typical body and nothing here reads them: at 5,000
        # resources that is ~25 MiB of the operator's memory (bench_steady_state).
        metadata = kept.get("metadata")
        if isinstance(metadata, Mapping) and "managedFields" in metadata:
            kept["metadata"] = {k: v for k, v in metadata.items() if k != "managedFields"}
        self._bodies[key] = kept if owned else copy_tree(kept)
        if watched:
            self._expires.pop(key, None)
        elif current is None or key in self._expires:
            self._expires[key] = time.monotonic() + UNWATCHED_TTL_S

    def get(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        """A copy of the newest body, or ``None`` if no event or write has brought it (or a body
        no watch confirms is past ``UNWATCHED_TTL_S``)."""
        key = (plural, namespace, name)
        body = self._bodies.get(key)
        expires = self._expires.get(key)
        if body is None or (expires is not None and time.monotonic() > expires):
            return None
        copied: dict[str, Any] = copy_tree(body)
        return copied

    def holds_newer(self, plural: str, namespace: str, name: str, version: str) -> bool:
        """Whether the body held is newer than ``version`` (both etcd's integers): a deletion of
        that version is an old one (the object was created again since)."""
        current = self._bodies.get((plural, namespace, name))
        held = None if current is None else _version(current)
        return held is not None and version.isdigit() and held > int(version)

    def peek(self, plural: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        """The cached body itself, not a copy, for read-only looks at many resources at once (the
        progress monitor checks thousands per interval): the caller must not change it."""
        key = (plural, namespace, name)
        expires = self._expires.get(key)
        if expires is not None and time.monotonic() > expires:
            return None
        return self._bodies.get(key)

    def resource_version(self, plural: str, namespace: str, name: str) -> str | None:
        """The cached body's resourceVersion without copying it (the idle check compares it)."""
        body = self._bodies.get((plural, namespace, name))
        return None if body is None else (body.get("metadata") or {}).get("resourceVersion")

    def request_view(self, plural: str, namespace: str, name: str) -> tuple[Any, ...] | None:
        """``vocabulary.request_view`` of the cached body without copying it (None: not cached)."""
        body = self._bodies.get((plural, namespace, name))
        return None if body is None else request_view(body)

    def labels(self, plural: str, namespace: str, name: str) -> Mapping[str, str] | None:
        """The cached body's labels without copying them (None: not cached); read only."""
        body = self._bodies.get((plural, namespace, name))
        if body is None:
            return None
        labels = (body.get("metadata") or {}).get("labels")
        return labels if isinstance(labels, Mapping) else {}

    def generation(self, plural: str, namespace: str, name: str) -> int | None:
        body = self._bodies.get((plural, namespace, name))
        return None if body is None else (body.get("metadata") or {}).get("generation")

    def __len__(self) -> int:
        return len(self._bodies)
