"""kopf registrations for KafkaMirrorMaker2: watch events go to the controller's work queue (the
resource's key, and its replication-lag key, which measures on its own interval and wakes the
resource's key when what status shows would change: the reconcile stays the one place that writes
status). Deletion is the controller's (``controller.core``, our finalizer)."""

from __future__ import annotations

from typing import Any

import kopf

from connect_offsets.handlers.startup import state_of
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
