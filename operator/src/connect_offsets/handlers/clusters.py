"""kopf registrations for ConnectCluster: watch events go to the controller's work queue (the
cluster's own check: probe, Secrets, the connector snapshot each drift interval), and a changed
cluster wakes the resources of its namespace that may have waited for it."""

from __future__ import annotations

from typing import Any

import kopf

from connect_offsets.handlers.startup import state_of
from connect_offsets.vocabulary import (
    API_GROUP,
    API_VERSION,
    CLUSTERS,
)

__all__: list[str] = []

PLURAL = CLUSTERS


@kopf.on.event(API_GROUP, API_VERSION, PLURAL)
async def cluster_changed(type: str, namespace: str | None, name: str, body: kopf.Body, memo: Any, **_: Any) -> None:
    controller = state_of(memo).controller
    namespace = namespace or ""
    if controller.observe(PLURAL, namespace, name, None if type == "DELETED" else body):
        controller.cluster_changed(namespace)


@kopf.on.delete(API_GROUP, API_VERSION, PLURAL, optional=True)
async def forget_cluster(namespace: str | None, name: str, memo: Any, **_: Any) -> None:
    await state_of(memo).clusters.forget(namespace or "", name)
