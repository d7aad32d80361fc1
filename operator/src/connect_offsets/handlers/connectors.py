"""kopf registrations for KafkaConnector (and the ConfigMaps they reference): watch events go to the
controller's work queue. Deletion is the controller's (``controller.core``, our finalizer)."""

from __future__ import annotations

from typing import Any

import kopf

from connect_offsets.handlers.startup import OperatorState, state_of
from connect_offsets.vocabulary import (
    API_GROUP,
    API_VERSION,
    CONNECTORS,
)

__all__: list[str] = []

PLURAL = CONNECTORS


@kopf.on.event(API_GROUP, API_VERSION, PLURAL)
async def connector_changed(type: str, namespace: str | None, name: str, body: kopf.Body, memo: Any, **_: Any) -> None:
    state_of(memo).controller.observe(PLURAL, namespace or "", name, None if type == "DELETED" else body)


@kopf.on.event("", "v1", "configmaps")
async def configmap_changed(namespace: str | None, name: str, memo: Any, **_: Any) -> None:
    """A referenced ConfigMap changed: the resources that read it check again (a failed alter may now work)."""
    state = memo.get("state")
    if isinstance(state, OperatorState):
        state.controller.configmap_changed(namespace or "", name)
