"""Where each kind's watch events go (handlers/watching.py): resources to the controller's watch
cache and queue, a ConnectCluster's change (and deletion) to the resources of its namespace, a
deleted ConnectCluster's connection dropped, a labelled ConfigMap to the resources that read it."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from connect_offsets.clients.resource_cache import ResourceCache
from connect_offsets.clients.watch import WatchEvent
from connect_offsets.handlers.watching import CONFIGMAPS, WATCHED_KINDS, Watching
from connect_offsets.vocabulary import API_VERSION, CLUSTERS, CONNECTORS, MIRRORS, WATCH_LABEL

pytestmark = pytest.mark.unit

KINDS = {kind.plural: kind for kind in WATCHED_KINDS}


class RecordingController:
    def __init__(self, queued: bool = True) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.queued = queued
        self.kube = SimpleNamespace(cache=ResourceCache())

    def observe(self, plural: str, namespace: str, name: str, body: Any, owned: bool = False) -> bool:
        self.calls.append(("observe", plural, namespace, name, body is not None))
        return self.queued and body is not None

    def observe_cluster(self, namespace: str, name: str, body: Any) -> None:
        self.calls.append(("observe_cluster", namespace, name, body is not None))

    def configmap_changed(self, namespace: str, name: str) -> None:
        self.calls.append(("configmap_changed", namespace, name))


class RecordingClusters:
    def __init__(self) -> None:
        self.forgotten: list[tuple[str, str]] = []

    async def forget(self, namespace: str, name: str) -> None:
        self.forgotten.append((namespace, name))


def event(plural: str, kind: str, name: str, *, deleted: bool = False) -> WatchEvent:
    watched = CONFIGMAPS if plural == "configmaps" else KINDS[plural]
    body = None if deleted else {"metadata": {"name": name, "namespace": "team-a"}}
    return WatchEvent(watched, kind, "team-a", name, body)  # type: ignore[arg-type]


def dispatch(events: list[WatchEvent], controller: RecordingController) -> RecordingClusters:
    clusters = RecordingClusters()

    async def run() -> None:
        watching = Watching(controller, clusters, None)  # type: ignore[arg-type]
        for item in events:
            watching.dispatch(item)
        await asyncio.sleep(0)

    asyncio.run(run())
    return clusters


def test_the_watched_kinds_are_ours_at_the_served_version_and_labelled_configmaps() -> None:
    assert [kind.plural for kind in WATCHED_KINDS] == [CLUSTERS, CONNECTORS, MIRRORS, "configmaps"]
    assert all(kind.version == API_VERSION for kind in WATCHED_KINDS if kind.plural != "configmaps")
    assert CONFIGMAPS.label_selector == f"{WATCH_LABEL}=true"


def test_resources_go_to_the_controller() -> None:
    controller = RecordingController()
    dispatch(
        [
            event(CONNECTORS, "ADDED", "c1"),
            event(MIRRORS, "MODIFIED", "m1"),
            event(CONNECTORS, "DELETED", "c1", deleted=True),
        ],
        controller,
    )
    assert controller.calls == [
        ("observe", CONNECTORS, "team-a", "c1", True),
        ("observe", MIRRORS, "team-a", "m1", True),
        ("observe", CONNECTORS, "team-a", "c1", False),
    ]


def test_cluster_events_go_to_the_controller_and_a_deleted_one_is_forgotten() -> None:
    controller = RecordingController()
    clusters = dispatch(
        [event(CLUSTERS, "MODIFIED", "east"), event(CLUSTERS, "DELETED", "east", deleted=True)], controller
    )
    assert controller.calls == [
        ("observe_cluster", "team-a", "east", True),
        ("observe_cluster", "team-a", "east", False),
    ]
    assert clusters.forgotten == [("team-a", "east")]


def test_a_deletion_older_than_the_body_held_is_not_applied() -> None:
    """A replayed DELETED of an object since created again (its version older than the one held)
    must not drop the new one; a deletion a new listing inferred (no version) always applies."""
    controller = RecordingController()
    controller.kube.cache.observe(CONNECTORS, "team-a", "c1", {"metadata": {"name": "c1", "resourceVersion": "13"}})
    old = WatchEvent(KINDS[CONNECTORS], "DELETED", "team-a", "c1", None, "12")
    inferred = WatchEvent(KINDS[CONNECTORS], "DELETED", "team-a", "c1", None, "")
    dispatch([old, inferred], controller)
    assert controller.calls == [("observe", CONNECTORS, "team-a", "c1", False)]


def test_a_labelled_configmap_wakes_its_readers() -> None:
    controller = RecordingController()
    dispatch([event("configmaps", "MODIFIED", "c1-offsets")], controller)
    assert controller.calls == [("configmap_changed", "team-a", "c1-offsets")]
