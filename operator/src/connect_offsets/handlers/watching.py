"""What the operator watches, and where each kind's events go: the streams (``clients.watch``) feed
the controller's work queue and its indexes.

- KafkaConnector and KafkaMirrorMaker2: ``Controller.observe`` (the watch cache and the queue);
  deletion is the controller's (our finalizer).
- ConnectCluster: the same, and a changed cluster wakes the resources of its namespace that may
  have waited for it; a deleted one's connection and snapshot are dropped.
- ConfigMaps labelled ``connect-offsets.io/watch=true`` (the operator's list targets, and any a
  user labels): the resources that read one check again. The API server filters by the label, so
  no other ConfigMap of the watched namespaces is streamed to us (least privilege in what we see);
  referenced ConfigMaps without it are still read again on each drift pass.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from connect_offsets.clients.kubernetes import load_api_client
from connect_offsets.clients.watch import EventPump, Watched, WatchEvent, WatchStream
from connect_offsets.controller import Controller
from connect_offsets.reconcile.clusters import ClusterRegistry
from connect_offsets.vocabulary import (
    API_GROUP,
    API_VERSION,
    CLUSTERS,
    CONNECTORS,
    MIRRORS,
    WATCH_LABEL,
)

__all__ = ["WATCHED_KINDS", "Watching"]

log = logging.getLogger(__name__)

#: Metadata only: a ConfigMap's event only says which one changed (its readers look again), and
#: a tenant's ConfigMap of 1 MiB of ``<`` is 6 MiB of JSON to parse per event (attacker review F5).
CONFIGMAPS = Watched("", "v1", "configmaps", f"{WATCH_LABEL}=true", metadata_only=True)
#: ConnectClusters first: a resource's first check finds its cluster known.
WATCHED_KINDS: tuple[Watched, ...] = (
    Watched(API_GROUP, API_VERSION, CLUSTERS),
    Watched(API_GROUP, API_VERSION, CONNECTORS),
    Watched(API_GROUP, API_VERSION, MIRRORS),
    CONFIGMAPS,
)


class Watching:
    """Every stream of the operator (each kind, cluster-wide or in each of ``namespaces``) and the
    dispatch of their events, on the event loop."""

    def __init__(self, controller: Controller, clusters: ClusterRegistry, namespaces: Sequence[str] | None) -> None:
        self._controller = controller
        self._clusters = clusters
        self._scopes: list[str | None] = list(namespaces) if namespaces else [None]
        self._forgetting: set[asyncio.Task[None]] = set()
        self.streams: list[WatchStream] = []
        self._pump: EventPump | None = None

    def start(self) -> None:
        pump = self._pump = EventPump(asyncio.get_running_loop(), self.dispatch)
        # A connection for each stream, apart from the workers' pool: a watch holds its
        # connection for minutes.
        api_client = load_api_client(len(WATCHED_KINDS) * len(self._scopes))
        self.streams = [WatchStream(api_client, kind, scope, pump) for kind in WATCHED_KINDS for scope in self._scopes]
        for stream in self.streams:
            stream.start()
        log.info(
            "watching %s in %s",
            ", ".join(kind.plural for kind in WATCHED_KINDS),
            "all namespaces" if self._scopes == [None] else ", ".join(str(s) for s in self._scopes),
        )

    def stop(self) -> None:
        if self._pump is not None:
            self._pump.close()
        for stream in self.streams:
            stream.stop()

    def dispatch(self, event: WatchEvent) -> None:
        controller = self._controller
        plural = event.kind.plural
        if event.body is None and controller.kube.cache.holds_newer(plural, event.namespace, event.name, event.version):
            return  # the deletion of an earlier object of that name: the one held was created since
        if event.kind == CONFIGMAPS:
            controller.configmap_changed(event.namespace, event.name)
        elif plural == CLUSTERS:
            controller.observe_cluster(event.namespace, event.name, event.body)
            if event.body is None:
                task = asyncio.get_running_loop().create_task(self._clusters.forget(event.namespace, event.name))
                self._forgetting.add(task)
                task.add_done_callback(self._forgetting.discard)
        else:
            controller.observe(plural, event.namespace, event.name, event.body, owned=True)
