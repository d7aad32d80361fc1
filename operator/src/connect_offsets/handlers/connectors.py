"""kopf registrations for KafkaConnector (and the ConfigMaps they reference): watch events go to the
controller's work queue; deletion runs through kopf's finalizer."""

from __future__ import annotations

from typing import Any

import kopf

from connect_offsets.clients.connect import ConnectError
from connect_offsets.controller import DELETE_ATTEMPTS
from connect_offsets.errors import TransientError
from connect_offsets.handlers.startup import OperatorState, drop_stale_finalizers_after, state_of, this_shard
from connect_offsets.reconcile.deletion import DeletionPending
from connect_offsets.vocabulary import (
    API_GROUP,
    API_VERSION,
    CONNECTORS,
)

__all__: list[str] = []

PLURAL = CONNECTORS
#: Deleting in Connect is retried this often before the finalizer is released anyway, so that an
#: unreachable or deleted Connect cluster cannot block namespace deletion forever (as many as the
#: controller's attempts at a deletion kopf does not run, ``controller.DELETE_ATTEMPTS``).
DELETE_RETRIES = DELETE_ATTEMPTS


@kopf.on.event(API_GROUP, API_VERSION, PLURAL)
async def connector_changed(type: str, namespace: str | None, name: str, body: kopf.Body, memo: Any, **_: Any) -> None:
    state_of(memo).controller.observe(PLURAL, namespace or "", name, None if type == "DELETED" else body)


@kopf.on.event("", "v1", "configmaps")
async def configmap_changed(namespace: str | None, name: str, memo: Any, **_: Any) -> None:
    """A referenced ConfigMap changed: the resources that read it check again (a failed alter may now work)."""
    state = memo.get("state")
    if isinstance(state, OperatorState):
        state.controller.configmap_changed(namespace or "", name)


@kopf.on.delete(API_GROUP, API_VERSION, PLURAL, retries=DELETE_RETRIES, backoff=2.0, when=this_shard(PLURAL))
async def delete_connector(
    namespace: str | None,
    name: str,
    body: kopf.Body,
    memo: Any,
    retry: int,
    logger: kopf.Logger,
    patch: kopf.Patch,
    **_: Any,
) -> None:
    state = state_of(memo)
    namespace = namespace or ""
    try:
        result = await state.connectors.delete(namespace, name, dict(body), give_up=retry >= DELETE_RETRIES - 1)
    except DeletionPending as error:  # the connector is stopping (offsetsOnDelete: reset)
        raise kopf.TemporaryError(f"deleting the connector in Connect: {error}", delay=error.delay) from error
    except (ConnectError, TransientError) as error:  # Connect unreachable, 5xx, 409
        raise kopf.TemporaryError(
            f"deleting the connector in Connect: {error}", delay=min(2 ** (retry + 1), 30)
        ) from error
    drop_stale_finalizers_after(patch)
    logger.info(result)
