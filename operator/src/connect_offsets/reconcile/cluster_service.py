"""The ConnectCluster's own reconcile: probe ``GET /`` and the plugins, ask the worker's
``GET /health`` (3.9+), refresh the cluster's connector snapshot once per drift interval, measure
its connectors' progress from it (``progress.ProgressMonitor``), and report it all in status.

Why apart from ``clusters``: that module keeps the clients and the binding checks every resource
uses; this is one resource kind's pass, like ``connectors`` and ``mirrormaker2``.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from connect_offsets.clients.connect import ConnectClient, ConnectError, ConnectHTTPError, ConnectNotFound
from connect_offsets.clients.credentials import reflect
from connect_offsets.clients.kubernetes import KubernetesApi
from connect_offsets.models.connect import health_endpoint_supported, offsets_api_refusal
from connect_offsets.models.crds import ConnectClusterStatus
from connect_offsets.planning import ConditionSpec
from connect_offsets.progress import ProgressMonitor
from connect_offsets.reconcile.clusters import CONNECT_TOO_OLD, ClusterRegistry, ClusterUnusable
from connect_offsets.reconcile.settings import Outcome, now_utc
from connect_offsets.reconcile.status import write_status
from connect_offsets.vocabulary import CLUSTERS, MAX_QUOTED_TEXT

__all__ = [
    "CREDENTIALS_REFUSED",
    "HEALTH_REASONS",
    "MAX_PLUGINS_SHOWN",
    "MAX_SERVER_FIELD",
    "PROBE_EVERY_S",
    "ClusterService",
    "unreachable_condition",
]


#: Server info fields a Connect URL sends are echoed at most this long (a version is ~10 characters).
MAX_SERVER_FIELD = 256


#: Plugin classes listed in status (a real worker has a few dozen; a hostile URL may send millions).
MAX_PLUGINS_SHOWN = 500


#: ``GET /`` and the plugin list are asked again at least this often (and whenever the
#: ConnectCluster changes or the last pass failed); in between, the pass only refreshes the
#: connector snapshot, which also tells that the worker answers.
PROBE_EVERY_S = 300.0


@dataclass(frozen=True)
class _Probe:
    version: int | None  # the ConnectCluster's generation probed
    at: float
    conditions: list[ConditionSpec]
    status: ConnectClusterStatus  # what the probe found: version, commit, Kafka cluster id, plugins
    client: ConnectClient  # the client that probed (the snapshot's, when there is one, is newer)


#: Ready reasons while the worker's ``GET /health`` says it cannot serve requests yet (or now).
HEALTH_REASONS = {"starting": "WorkerStarting", "unhealthy": "WorkerUnhealthy"}


class ClusterService:
    """Probe a ConnectCluster (``GET /``, plugins), ask the worker's ``GET /health`` (3.9+), refresh
    its connector snapshot once per drift interval, measure its connectors' progress from it, and
    report it in status."""

    def __init__(self, kube: KubernetesApi, clusters: ClusterRegistry, progress: ProgressMonitor | None = None) -> None:
        self.kube = kube
        self.clusters = clusters
        self.progress = progress
        self._probes: dict[tuple[str, str], _Probe] = {}
        #: When a worker reporting 3.9+ answered GET /health 404 (asked again after PROBE_EVERY_S).
        self._no_health: dict[tuple[str, str], float] = {}
        #: The first listing a pass gave its worker back for: the pass that comes back reports how
        #: it failed rather than list again at once (attack review of issue 45, A).
        self._waited: dict[tuple[str, str], asyncio.Future[Any]] = {}

    async def reconcile(self, namespace: str, name: str) -> Outcome:
        body = await self.kube.cached_resource(CLUSTERS, namespace, name)
        if body is None or body["metadata"].get("deletionTimestamp"):
            self._probes.pop((namespace, name), None)
            self._waited.pop((namespace, name), None)
            if self.progress is not None:
                self.progress.forget_cluster(namespace, name)
            await self.clusters.forget(namespace, name)
            return Outcome()
        now = now_utc()
        outcome = Outcome()
        version = body["metadata"].get("generation")  # spec changes only, not our status writes
        probe = self._probes.get((namespace, name))
        try:
            if probe is None or probe.version != version or time.monotonic() - probe.at > PROBE_EVERY_S:
                probe = await self._probe(namespace, name, body)
            conditions, update = probe.conditions, probe.status
            if probe.conditions[0].status == "True":
                health = await self._health(namespace, name, probe)
                if health is not None and health[0] != "healthy":
                    # Reachable, but the worker says it cannot serve requests: offsets changes
                    # wait (reconcile/execute.py), and the worker is asked again next interval.
                    text = reflect(health[1], (), MAX_QUOTED_TEXT)
                    conditions = [ConditionSpec("Ready", "False", HEALTH_REASONS[health[0]], f"GET /health: {text}")]
                update = update.updated(ConnectClusterStatus(health=None if health is None else health[0]))
                snapshot = self.clusters.snapshot(namespace, name)
                listing = None
                waited = self._waited.pop((namespace, name), None)
                if waited is not None and waited.done() and not waited.cancelled() and snapshot is not None:
                    failure = waited.exception()
                    if isinstance(failure, ConnectError) and snapshot.usable and snapshot.connectors() is None:
                        raise failure  # reported below: Ready False, retried with back-off
                if snapshot is not None and conditions[0].status == "True":
                    # The endpoint's first listing takes Connect seconds (5,000 connectors: 7.7 s);
                    # this pass gives its worker back rather than wait, and comes back when the
                    # listing lands (bench_cold_start: a namespace's one worker share was this
                    # pass, and a `list` asked during a start waited behind it).
                    listing = snapshot.first_listing()
                    if listing is not None:
                        # Nothing written until it lands: Ready stays what it was (True only once
                        # the endpoint listed; a listing that fails says Unreachable, not True then False).
                        self._probes[(namespace, name)] = probe
                        self._waited[(namespace, name)] = listing
                        return Outcome(after=listing)
                if snapshot is not None and listing is None and conditions[0].status == "True":
                    # Several ConnectClusters may share the endpoint's snapshot: the first pass of
                    # an interval refreshes it, the others find it fresh.
                    await snapshot.refresh(older_than=self.clusters.drift_interval * 0.8)
                    taken = snapshot.connectors()
                    if self.progress is not None and taken is not None:
                        await self.progress.measure(namespace, name, snapshot.client, taken)
            self._probes[(namespace, name)] = probe
        except ClusterUnusable as error:
            self._probes.pop((namespace, name), None)
            conditions, update = (
                [ConditionSpec("Ready", "False", error.reason_or("InvalidConfiguration"), str(error))],
                None,
            )
        except ConnectError as error:
            self._probes.pop((namespace, name), None)  # probed again (Secrets re-read) on the retry
            conditions, update = [unreachable_condition(error, body.get("spec") or {})], None
            # Retried with back-off either way: no Secret is watched, so a fixed token is found by the retry.
            outcome.transient_error = str(error)
        await write_status(self.kube, CLUSTERS, body, conditions, now, update)
        return outcome

    async def _health(self, namespace: str, name: str, probe: _Probe) -> tuple[str, str] | None:
        """The worker's ``GET /health`` (KIP-1017) where it has one (3.9+), every pass: readiness
        from the worker's own word. None for older workers, whose readiness stays ``GET /``."""
        if probe.status.version is None or not health_endpoint_supported(probe.status.version):
            self.clusters.set_health(namespace, name, None)
            return None
        known = self.clusters.health(namespace, name)
        if (
            known is not None
            and known[0] == "healthy"
            and self.clusters.health_age(namespace, name) < self.clusters.drift_interval * 0.8
        ):
            # Another ConnectCluster naming the same endpoint asked this interval (as for the
            # snapshot); a worker not healthy is asked again by every pass, to see it recover.
            return known
        if time.monotonic() - self._no_health.get((namespace, name), float("-inf")) < PROBE_EVERY_S:
            return None
        snapshot = self.clusters.snapshot(namespace, name)
        client = snapshot.client if snapshot is not None else probe.client
        try:
            health = await client.worker_health()
        except ConnectNotFound:
            # A worker that reports 3.9+ without the endpoint (a proxy that routes only some paths,
            # a custom build): readiness stays GET /, and the endpoint is looked for again with the probe.
            self._no_health[(namespace, name)] = time.monotonic()
            self.clusters.set_health(namespace, name, None)
            return None
        self.clusters.set_health(namespace, name, health)
        return health

    async def _probe(self, namespace: str, name: str, body: dict[str, Any]) -> _Probe:
        """``GET /`` and the plugins, with the Secrets read again: a worker upgraded or a token
        rotated behind our back is noticed here."""
        client, info = await self.clusters.refresh(namespace, name)
        plugins = await client.connector_plugins()

        def echoed(text: str) -> str:
            # Whatever the URL answers is reflected capped and redacted (clients.credentials.reflect).
            return reflect(text, client.known_secrets, MAX_SERVER_FIELD)

        def maybe(text: str | None) -> str | None:
            return None if text is None else echoed(text)

        # A field the worker does not report (None) is removed from status.
        status = ConnectClusterStatus(
            version=maybe(info.version),
            commit=maybe(info.commit),
            kafka_cluster_id=maybe(info.kafka_cluster_id),
            connector_plugins=[echoed(p) for p in sorted(plugins)[:MAX_PLUGINS_SHOWN]],
        )
        url = reflect(str(body["spec"].get("url", "")))
        refusal = offsets_api_refusal(info.version)
        if refusal is not None:
            conditions = [ConditionSpec("Ready", "False", CONNECT_TOO_OLD, f"{refusal} ({url})")]
        else:
            conditions = [ConditionSpec("Ready", "True", "Reachable", f"Connect {status.version} answers at {url}")]
        return _Probe(body["metadata"].get("generation"), time.monotonic(), conditions, status, client)


#: Ready reasons when the worker refuses the credentials (401) or the identity (403): unlike
#: ``Unreachable`` they say the network is fine and ``spec.authentication`` is what to check.
CREDENTIALS_REFUSED: dict[int, str] = {401: "Unauthorized", 403: "Forbidden"}


def unreachable_condition(error: ConnectError, spec: dict[str, Any]) -> ConditionSpec:
    """The ConnectCluster's ``Ready=False`` for a failed probe; the message never holds credentials
    (``ConnectClient`` scrubs them from every error)."""
    reason = CREDENTIALS_REFUSED.get(error.status_code) if isinstance(error, ConnectHTTPError) else None
    if reason is None:
        return ConditionSpec("Ready", "False", "Unreachable", str(error)[:MAX_QUOTED_TEXT])
    auth = spec.get("authentication") or {}
    hint = (
        f"check spec.authentication (Secret {auth.get('secretName')})"
        if auth
        else "the worker demands credentials: set spec.authentication"
    )
    return ConditionSpec("Ready", "False", reason, f"{str(error)[:960]} ({hint})")
