"""kopf registrations for ConnectCluster."""

from __future__ import annotations

from typing import Any

import kopf

from connect_offsets.handlers.loop import run_loop
from connect_offsets.handlers.startup import state_of
from connect_offsets.vocabulary import (
    API_GROUP,
    API_VERSION,
    CLUSTERS,
    CONNECTORS,
    MIRRORS,
)

__all__: list[str] = []

PLURAL = CLUSTERS


@kopf.daemon(API_GROUP, API_VERSION, PLURAL, cancellation_timeout=10.0)
async def probe_cluster(
    namespace: str | None, name: str, stopped: kopf.DaemonStopped, memo: Any, logger: kopf.Logger, **_: Any
) -> None:
    state = state_of(memo)
    namespace = namespace or ""
    waker = state.waker(PLURAL, namespace, name)
    await run_loop(
        state, waker, stopped, lambda: state.cluster_service.reconcile(namespace, name), logger, "ConnectCluster"
    )


@kopf.on.event(API_GROUP, API_VERSION, PLURAL)
async def cluster_changed(type: str, namespace: str | None, name: str, body: kopf.Body, memo: Any, **_: Any) -> None:
    state = state_of(memo)
    namespace = namespace or ""
    state.kube.cache.observe(PLURAL, namespace, name, None if type == "DELETED" else body)
    seen = (body.get("metadata", {}).get("generation"),)
    waker = state.waker(PLURAL, namespace, name)
    if waker.seen != seen:
        waker.seen = seen
        waker.event.set()
        # Connectors of this cluster may have been waiting for it: wake them as well.
        for (plural, ns, _resource), other in list(state.wakers.items()):
            if plural in (CONNECTORS, MIRRORS) and ns == namespace:
                other.event.set()


@kopf.on.delete(API_GROUP, API_VERSION, PLURAL, optional=True)
async def forget_cluster(namespace: str | None, name: str, memo: Any, **_: Any) -> None:
    await state_of(memo).clusters.forget(namespace or "", name)
