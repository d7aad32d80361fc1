"""kopf registrations for KafkaConnector (and the ConfigMaps they reference)."""

from __future__ import annotations

from typing import Any

import kopf

from connect_offsets.errors import TransientError
from connect_offsets.handlers.loop import note_change, run_loop
from connect_offsets.handlers.startup import OperatorState, state_of
from connect_offsets.reconcile.deletion import DeletionPending
from connect_offsets.vocabulary import (
    API_GROUP,
    API_VERSION,
    CONNECTORS,
)

__all__: list[str] = []

PLURAL = CONNECTORS
#: Deleting in Connect is retried this often before the finalizer is released anyway, so that an
#: unreachable or deleted Connect cluster cannot block namespace deletion forever.
DELETE_RETRIES = 8


@kopf.daemon(API_GROUP, API_VERSION, PLURAL, cancellation_timeout=10.0)
async def reconcile_connector(
    namespace: str | None, name: str, stopped: kopf.DaemonStopped, memo: Any, logger: kopf.Logger, **_: Any
) -> None:
    state = state_of(memo)
    namespace = namespace or ""
    waker = state.waker(PLURAL, namespace, name)
    await run_loop(
        state,
        waker,
        stopped,
        lambda: state.connectors.reconcile(namespace, name),
        logger,
        "KafkaConnector",
        lambda: state.kube.cache.request_view(PLURAL, namespace, name),
    )


@kopf.on.event(API_GROUP, API_VERSION, PLURAL)
async def connector_changed(type: str, namespace: str | None, name: str, body: kopf.Body, memo: Any, **_: Any) -> None:
    note_change(state_of(memo), PLURAL, namespace or "", name, body, type)


@kopf.on.event("", "v1", "configmaps")
async def configmap_changed(namespace: str | None, name: str, memo: Any, **_: Any) -> None:
    """A referenced ConfigMap changed: wake the resources that read it (a failed alter may now work)."""
    state = memo.get("state")
    if not isinstance(state, OperatorState):
        return
    for (_plural, ns, _resource), waker in list(state.wakers.items()):
        if ns == namespace and name in waker.configmaps:
            waker.event.set()


@kopf.on.delete(API_GROUP, API_VERSION, PLURAL, retries=DELETE_RETRIES, backoff=2.0)
async def delete_connector(
    namespace: str | None, name: str, body: kopf.Body, memo: Any, retry: int, logger: kopf.Logger, **_: Any
) -> None:
    state = state_of(memo)
    namespace = namespace or ""
    try:
        result = await state.connectors.delete(namespace, name, dict(body), give_up=retry >= DELETE_RETRIES - 1)
    except DeletionPending as error:  # the connector is stopping (offsetsOnDelete: reset)
        raise kopf.TemporaryError(f"deleting the connector in Connect: {error}", delay=error.delay) from error
    except TransientError as error:  # Connect unreachable, 5xx, 409
        raise kopf.TemporaryError(
            f"deleting the connector in Connect: {error}", delay=min(2 ** (retry + 1), 30)
        ) from error
    logger.info(result)
