"""Operator start-up and shutdown: kopf settings, shared clients, the typed memo."""

from __future__ import annotations

import asyncio
import functools
import logging
import os
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import kopf

from connect_offsets import (
    metrics,
)
from connect_offsets.clients.credentials import CredentialsPolicy
from connect_offsets.clients.kubernetes import KubernetesApi, load_api_client
from connect_offsets.clients.leases import LeaseApi
from connect_offsets.clients.tenant_io import tenant_network
from connect_offsets.controller import (
    START_MODE_LIMIT_S,
    TRIM_INTERVAL_S,
    Controller,
    ControllerSettings,
    Deletions,
    LeaseKeeper,
    freeze_long_lived,
    measure_pauses,
    relax_for_start,
    return_freed_memory,
    settle_after_start,
)
from connect_offsets.handlers.watching import Watching
from connect_offsets.lag import LagMonitor, LagRegistry, MirrorSecrets
from connect_offsets.progress import ProgressMonitor, ProgressRegistry, progress_enabled
from connect_offsets.reconcile import settings as settings_of_reconcile
from connect_offsets.reconcile.cluster_service import ClusterService
from connect_offsets.reconcile.clusters import ClusterRegistry, mirror_connect
from connect_offsets.reconcile.connectors import ConnectorService
from connect_offsets.reconcile.mirrormaker2 import MirrorMaker2Service
from connect_offsets.reconcile.snapshots import START_HOLD_MAX_S
from connect_offsets.vocabulary import (
    CLUSTERS,
    CONNECTORS,
    MIRRORS,
)

__all__ = ["CONTROLLER_SETTINGS", "OperatorState", "state_of"]

log = logging.getLogger(__name__)

#: Threads for planning and other CPU work: Python holds the GIL for most of it, so more would
#: only queue there.
PLANNING_THREADS = 4


def _env_float(name: str, default: float, *, zero_allowed: bool = False) -> float:
    """The number in environment variable ``name``; > 0 (≥ 0 with ``zero_allowed``, where 0 means off)."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError as error:
        raise kopf.PermanentError(f"{name}={raw!r} is not a number") from error
    if value < 0 or (value == 0 and not zero_allowed):
        raise kopf.PermanentError(f"{name} must be {'>= 0' if zero_allowed else '> 0'}, got {raw}")
    return value


@dataclass
class OperatorState:
    kube: KubernetesApi
    clusters: ClusterRegistry
    connectors: ConnectorService
    cluster_service: ClusterService
    mirrors: MirrorMaker2Service
    lag: LagMonitor
    controller: Controller


#: Set by the entry point (``handlers/main.py``) before kopf starts: the worker pool, this
#: replica's shard and its Leases.
CONTROLLER_SETTINGS = ControllerSettings()


def state_of(memo: Any) -> OperatorState:
    state = memo.get("state")
    if not isinstance(state, OperatorState):
        raise kopf.TemporaryError("operator not started yet", delay=1)
    return state


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    # Our service posts its own Events with Connect's messages; kopf's would only repeat them.
    settings.posting.level = logging.WARNING
    settings.networking.request_timeout = 60
    try:
        # Where credentials may go; a malformed setting stops the operator rather than being guessed.
        policy = CredentialsPolicy.from_env()
    except ValueError as error:
        raise kopf.PermanentError(str(error)) from error
    # A thread (and a connection) for each worker: a pass waits on one Kubernetes call at a time.
    threads = CONTROLLER_SETTINGS.workers
    kube = KubernetesApi(load_api_client(threads), threads=threads)
    drift_interval = _env_float("CONNECT_OFFSETS_DRIFT_INTERVAL", 30.0)
    # The controller is made below; the snapshot's wake-ups need it, so they go through this cell.
    controller_cell: list[Controller] = []

    def connectors_changed(clusters: set[tuple[str, str]], names: set[str]) -> None:
        for controller in controller_cell:
            controller.connectors_changed(clusters, names)

    def clusters_recovered(clusters: set[tuple[str, str]]) -> None:
        for controller in controller_cell:
            controller.cluster_recovered(clusters)

    # This process's start under way (its first wave of first checks, START_HOLD_MAX_S at most):
    # snapshots are not refreshed meanwhile. Only the start, and bounded: a wave a tenant could keep
    # going (a resource created before its last one's first check ended) must not slow everyone's
    # drift detection for longer (attack review of issue 45, helper-37 F3).
    start_under_way = [True]

    def starting() -> bool:
        return start_under_way[0]

    clusters = ClusterRegistry(
        kube,
        policy,
        drift_interval=drift_interval,
        on_change=connectors_changed,
        on_recovered=clusters_recovered,
        hold_snapshots=starting,
    )

    # Planning and other CPU work (asyncio.to_thread) get the loop's default pool, bounded and of
    # their own: Kubernetes calls and tenants' Kafka calls have theirs (clients/kubernetes.py,
    # clients/tenant_io.py), so none of the three waits behind another.
    asyncio.get_running_loop().set_default_executor(
        ThreadPoolExecutor(max_workers=PLANNING_THREADS, thread_name_prefix="planning")
    )
    # The lag monitor measures, the MM2 service reports: one registry between them.
    lag = LagRegistry()
    # ... and one reader of the mirrors' secretConfig values between them and the KafkaConnectors that
    # start from a mirror's checkpoints (reused for a minute).
    mirror_secrets = MirrorSecrets(kube, policy)

    def wake_connector(namespace: str, name: str) -> None:
        # Its progress would show something new: its own pass writes it (the one status writer).
        for controller in controller_cell:
            controller.wake(CONNECTORS, namespace, name)

    # The ConnectCluster's pass measures, the KafkaConnector's reports: one registry between them.
    # CONNECT_OFFSETS_PROGRESS=off turns it off operator-wide (no Kafka calls, no status.progress).
    progress: ProgressRegistry | None = ProgressRegistry() if progress_enabled() else None
    progress_monitor = (
        ProgressMonitor(kube, progress, clusters.kafka_config, wake_connector) if progress is not None else None
    )
    connectors = ConnectorService(kube, clusters, progress, secrets=mirror_secrets)
    cluster_service = ClusterService(kube, clusters, progress_monitor)
    mirrors = MirrorMaker2Service(kube, clusters, lag, mirror_secrets)
    monitor = LagMonitor(kube, lag, functools.partial(mirror_connect, clusters), policy, mirror_secrets)

    async def measure_lag(body: Mapping[str, Any]) -> tuple[float, bool]:
        tick = await monitor.measure(body)
        return tick.delay, tick.changed

    async def run_deletion(plural: str, namespace: str, name: str, body: dict[str, Any], give_up: bool) -> str:
        service = connectors if plural == CONNECTORS else mirrors
        return await service.delete(namespace, name, body, give_up=give_up)

    chosen = CONTROLLER_SETTINGS
    controller = Controller(
        kube,
        {CONNECTORS: connectors.reconcile, MIRRORS: mirrors.reconcile, CLUSTERS: cluster_service.reconcile},
        drift_interval=drift_interval,
        workers=chosen.workers,
        cluster_workers=chosen.cluster_workers,
        shard=chosen.shard,
        measure_lag=measure_lag,
        forget_lag=monitor.forget,
        deletions=Deletions(run=run_deletion, release=kube.remove_finalizers),
    )
    if chosen.leases is not None:
        lease_settings = chosen.leases
        store = LeaseApi(kube.api_client, lease_settings.namespace, lease_settings.prefix)
        controller.use_leases(
            lambda c: LeaseKeeper(
                store,
                lease_settings.identity,
                wanted=c.wanted_clusters,
                exists=c.cluster_exists,
                on_acquired=c.leases_acquired,
                on_lost=c.leases_lost,
                drain=c.drain,
                timings=lease_settings.timings,
            )
        )
    controller.cluster_in_doubt = lambda cluster: clusters.in_doubt(*cluster)
    controller.first_listing = connectors.first_listing
    tenant_network().on_recovered = lambda namespace, _address: controller.kafka_recovered(namespace)
    controller_cell.append(controller)
    memo["state"] = OperatorState(
        kube=kube,
        clusters=clusters,
        connectors=connectors,
        cluster_service=cluster_service,
        mirrors=mirrors,
        lag=monitor,
        controller=controller,
    )
    controller.start()
    # Kept in memo: a task only referenced by the loop may be garbage-collected mid-run.
    memo["event_loop_lag"] = asyncio.create_task(metrics.measure_event_loop_lag(), name="event-loop-lag")
    memo["memory_trim"] = asyncio.create_task(
        return_freed_memory(_env_float("CONNECT_OFFSETS_MEMORY_TRIM_INTERVAL", TRIM_INTERVAL_S, zero_allowed=True)),
        name="memory-trim",
    )
    measure_pauses()
    log.info("froze %d long-lived objects out of the garbage collector's full collections", freeze_long_lived())
    # The backlog of first checks runs with the collector in its start-up mode (garbage_collection).
    relax_for_start()

    def all_checked(count: int, seconds: float) -> None:
        start_under_way[0] = False
        frozen = settle_after_start()
        log.info(
            "first check of %d resource(s) done %.1f s after the first was queued%s",
            count,
            seconds,
            f"; start-up over, {frozen} objects frozen" if frozen else "",
        )

    controller.first_checks.on_all_checked = all_checked
    asyncio.get_running_loop().call_later(START_MODE_LIMIT_S, settle_after_start)
    asyncio.get_running_loop().call_later(START_HOLD_MAX_S, start_under_way.__setitem__, 0, False)
    # Last: every event the streams hand over finds the controller and its services ready.
    watching = Watching(controller, clusters, settings_of_reconcile.WATCHED_NAMESPACES)
    memo["watching"] = watching
    watching.start()


@kopf.on.cleanup()
async def close(memo: kopf.Memo, **_: Any) -> None:
    for task in (memo.get("event_loop_lag"), memo.get("memory_trim")):
        if isinstance(task, asyncio.Task):
            task.cancel()
    watching = memo.get("watching")
    if isinstance(watching, Watching):
        watching.stop()
    state = memo.get("state")
    if isinstance(state, OperatorState):
        await state.controller.stop()
        await state.clusters.aclose()
