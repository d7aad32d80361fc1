"""kopf registrations for KafkaMirrorMaker2.

Two daemons per resource: the reconcile loop, and the replication lag monitor
(``connect_offsets.lag``), which measures on its own interval and only wakes the reconcile when
what the status shows would change — the reconcile is the one place that writes status.
"""

from __future__ import annotations

from typing import Any

import kopf

from connect_offsets.clients.connect import ConnectError
from connect_offsets.handlers.connectors import DELETE_RETRIES
from connect_offsets.handlers.loop import note_change, run_loop
from connect_offsets.handlers.startup import state_of
from connect_offsets.vocabulary import (
    API_GROUP,
    API_VERSION,
    MIRRORS,
)

__all__: list[str] = []

PLURAL = MIRRORS


@kopf.daemon(API_GROUP, API_VERSION, PLURAL, cancellation_timeout=10.0)
async def reconcile_mirrormaker2(
    namespace: str | None, name: str, stopped: kopf.DaemonStopped, memo: Any, logger: kopf.Logger, **_: Any
) -> None:
    state = state_of(memo)
    namespace = namespace or ""
    waker = state.waker(PLURAL, namespace, name)
    await run_loop(
        state,
        waker,
        stopped,
        lambda: state.mirrors.reconcile(namespace, name),
        logger,
        "KafkaMirrorMaker2",
        lambda: state.kube.cache.request_view(PLURAL, namespace, name),
    )


@kopf.daemon(API_GROUP, API_VERSION, PLURAL, id="replication-lag", cancellation_timeout=10.0)
async def monitor_replication_lag(
    namespace: str | None, name: str, body: kopf.Body, stopped: kopf.DaemonStopped, memo: Any, **_: Any
) -> None:
    state = state_of(memo)
    namespace = namespace or ""
    try:
        while not stopped:
            tick = await state.lag.measure(body)  # kopf keeps ``body`` current: no extra API read
            if tick.changed:
                state.waker(PLURAL, namespace, name).event.set()
            await stopped.wait(tick.delay)
    finally:
        state.lag.forget(namespace, name)


@kopf.on.event(API_GROUP, API_VERSION, PLURAL)
async def mirrormaker2_changed(
    type: str, namespace: str | None, name: str, body: kopf.Body, memo: Any, **_: Any
) -> None:
    note_change(state_of(memo), PLURAL, namespace or "", name, body, type)


@kopf.on.delete(API_GROUP, API_VERSION, PLURAL, retries=DELETE_RETRIES, backoff=2.0)
async def delete_mirrormaker2(
    namespace: str | None, name: str, body: kopf.Body, memo: Any, retry: int, logger: kopf.Logger, **_: Any
) -> None:
    state = state_of(memo)
    try:
        result = await state.mirrors.delete(namespace or "", name, dict(body), give_up=retry >= DELETE_RETRIES - 1)
    except ConnectError as error:
        raise kopf.TemporaryError(
            f"deleting connectors in Connect: {error}", delay=min(2 ** (retry + 1), 30)
        ) from error
    logger.info(result)
