"""kopf registrations for KafkaMirrorMaker2: watch events go to the controller's work queue (the
resource's key, and its replication-lag key, which measures on its own interval and wakes the
resource's key when what status shows would change: the reconcile stays the one place that writes
status); deletion runs through kopf's finalizer."""

from __future__ import annotations

from typing import Any

import kopf

from connect_offsets.clients.connect import ConnectError
from connect_offsets.handlers.connectors import DELETE_RETRIES
from connect_offsets.handlers.startup import drop_stale_finalizers_after, state_of, this_shard
from connect_offsets.vocabulary import (
    API_GROUP,
    API_VERSION,
    MIRRORS,
)

__all__: list[str] = []

PLURAL = MIRRORS


@kopf.on.event(API_GROUP, API_VERSION, PLURAL)
async def mirrormaker2_changed(
    type: str, namespace: str | None, name: str, body: kopf.Body, memo: Any, **_: Any
) -> None:
    state_of(memo).controller.observe(PLURAL, namespace or "", name, None if type == "DELETED" else body)


@kopf.on.delete(API_GROUP, API_VERSION, PLURAL, retries=DELETE_RETRIES, backoff=2.0, when=this_shard(PLURAL))
async def delete_mirrormaker2(
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
    try:
        result = await state.mirrors.delete(namespace or "", name, dict(body), give_up=retry >= DELETE_RETRIES - 1)
    except ConnectError as error:
        raise kopf.TemporaryError(
            f"deleting connectors in Connect: {error}", delay=min(2 ** (retry + 1), 30)
        ) from error
    drop_stale_finalizers_after(patch)
    logger.info(result)
