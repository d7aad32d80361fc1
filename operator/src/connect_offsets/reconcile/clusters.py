"""ConnectClusters: one long-lived Connect client per cluster, the binding checks, and the
ConnectCluster's own reconcile (probe ``GET /``, report what the cluster is).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from connect_offsets.clients.connect import (
    CircuitBreaker,
    ConnectAuth,
    ConnectClient,
    ConnectEndpoint,
    ConnectError,
)
from connect_offsets.clients.credentials import (
    PROVIDER_CLUSTER_NAMESPACES_ENV,
    CredentialsPolicy,
    CredentialsRefused,
    url_destination,
)
from connect_offsets.clients.kafka import librdkafka_config
from connect_offsets.clients.kubernetes import KubernetesApi, KubernetesRejected
from connect_offsets.clients.reference_policy import ReferenceRule
from connect_offsets.errors import TransientError, UserError
from connect_offsets.models.connect import ServerInfo, offsets_api_refusal
from connect_offsets.models.crds import (
    ConfigProviderSpec,
    ConfigProvidersSpec,
    ConnectClusterResource,
    ConnectClusterSpec,
)
from connect_offsets.planning import (
    BindingRefusal,
    ConnectorTarget,
    check_binding,
)
from connect_offsets.reconcile.settings import RETIRE_AFTER_S
from connect_offsets.reconcile.snapshots import ConnectorsSnapshot
from connect_offsets.reconcile.status import validation_text
from connect_offsets.vocabulary import (
    CLUSTER_LABEL,
    CLUSTER_NAMESPACE_LABEL,
    CLUSTERS,
    java_string,
)

log = logging.getLogger(__name__)


#: Ready reason when the worker predates the offsets REST API (``models.connect.offsets_api_refusal``).
CONNECT_TOO_OLD = "ConnectTooOld"


class ClusterUnusable(UserError):
    """The ConnectCluster is missing, invalid, or its credentials cannot be read or may not be sent.

    ``reason``: set when a credentials rule refused (SecretNotOptedIn, PlaintextCredentials,
    HostNotAllowed ...), the Ready reason on the ConnectCluster and on the resources that use it.
    ``invalid_spec``: the ConnectCluster itself fails validation.
    """

    def __init__(self, message: str, reason: str | None = None, *, invalid_spec: bool = False) -> None:
        super().__init__(message)
        self.reason = reason
        self.invalid_spec = invalid_spec

    def reason_or(self, default: str) -> str:
        return self.reason or ("InvalidSpec" if self.invalid_spec else default)


class ClusterBindingRefused(ClusterUnusable):
    """The ConnectCluster does not allow this resource (namespace or connector names)."""

    def __init__(self, refusal: BindingRefusal) -> None:
        super().__init__(refusal.message)
        self.reason = refusal.reason


#: How long a Connect cluster's ``GET /`` answer (version, Kafka cluster id) is trusted.
SERVER_INFO_TTL_S = 60.0


#: How long a resolved endpoint (the Secrets it read) is reused while the ConnectCluster is
#: unchanged. The ConnectCluster's own probe re-reads them (and after any failure), so a rotated
#: Secret is picked up within this long without a Secret read per resource per pass.
ENDPOINT_TTL_S = 60.0

#: A resource's pass takes a new snapshot itself only when the last one is this many drift
#: intervals old: normally the ConnectCluster's pass refreshes it once per interval, and the
#: margin keeps the two from both asking in the same interval.
SNAPSHOT_MAX_AGE_INTERVALS = 1.5

#: Told which connectors changed behind the operator's back (by a snapshot refresh).
#: (the ConnectClusters naming the endpoint, the connectors that changed in its snapshot).
ConnectorsChanged = Callable[[set[tuple[str, str]], set[str]], None]

#: Told which ConnectClusters ((namespace, name) keys) answer again after their Connect endpoint's
#: circuit breaker was open: their resources are woken at once rather than at their next retry.
ClustersRecovered = Callable[[set[tuple[str, str]]], None]

#: Makes the circuit breaker of a new Connect connection (None: no breaker, every request goes out).
BreakerFactory = Callable[[], CircuitBreaker[ConnectError] | None]


@dataclass
class _Connection:
    """One Connect endpoint (URL, credentials, TLS): its client, connector snapshot and ``GET /``.

    Shared by every ConnectCluster that resolves to the same endpoint: on a platform, each team's
    namespace often has its own ConnectCluster naming the one shared Connect cluster, and one
    snapshot per endpoint keeps the cost per Connect cluster rather than per tenant. Sharing is
    safe because the endpoint includes the credentials: what one may read, the others may too.
    The client's circuit breaker is per endpoint too: a dead Connect cluster is asked once per
    back-off however many ConnectClusters name it, and its recovery wakes all of them.
    """

    client: ConnectClient
    snapshot: ConnectorsSnapshot
    users: set[tuple[str, str]] = field(default_factory=set)
    info: ServerInfo | None = None
    info_at: float = 0.0
    #: The worker's last ``GET /health`` answer (3.9+): (healthy | starting | unhealthy, message),
    #: and when it came (monotonic): ConnectClusters sharing the endpoint share the answer.
    health: tuple[str, str] | None = None
    health_at: float = float("-inf")


@dataclass
class _Entry:
    fingerprint: str
    connection: _Connection
    cluster_version: int | None = None  # the ConnectCluster's generation the endpoint was built from
    endpoint_at: float = 0.0
    provider: ConfigProviderSpec | None = None  # spec.configProvider, as of cluster_version
    allowed_providers: ConfigProvidersSpec | None = None  # spec.configProviders, as of cluster_version

    @property
    def client(self) -> ConnectClient:
        return self.connection.client


class ClusterRegistry:
    """One long-lived ``ConnectClient`` per ConnectCluster, rebuilt when its spec or Secrets change."""

    def __init__(
        self,
        kube: KubernetesApi,
        policy: CredentialsPolicy | None = None,
        *,
        drift_interval: float = 30.0,
        on_change: ConnectorsChanged | None = None,
        on_recovered: ClustersRecovered | None = None,
        new_breaker: BreakerFactory = CircuitBreaker,
        hold_snapshots: Callable[[], bool] = lambda: False,
        clock: Callable[[], float] = time.monotonic,
        state_clock: Callable[[], float] | None = None,
    ) -> None:
        """``on_change``, ``hold_snapshots`` (its ``hold``): see ``ConnectorsSnapshot``. ``on_recovered``:
        called (on the event loop, from inside the request that got the answer; it must not block)
        with the ConnectClusters using a Connect connection when its circuit breaker closes after
        being open (the first answer after a time-out, a refused connection or a 502/503/504): their
        resources failed at once meanwhile and wait in back-off, so the caller wakes them.
        ``new_breaker``: makes each connection's circuit breaker (None from it: none). ``clock``:
        each connection's snapshot ages by it, and its client's ``state_changes`` (or by ``state_clock``)."""
        self._kube = kube
        self.drift_interval = drift_interval
        self._on_change = on_change
        self._on_recovered = on_recovered
        self._new_breaker = new_breaker
        self._hold_snapshots = hold_snapshots
        self._clock = clock
        self._state_clock = state_clock or clock
        #: Where credentials may go (opt-in label, TLS only, host allow-list): see clients.credentials.
        self.policy = policy if policy is not None else CredentialsPolicy.from_env()
        self._entries: dict[tuple[str, str], _Entry] = {}
        self._connections: dict[str, _Connection] = {}  # by endpoint fingerprint
        self._lock = asyncio.Lock()

    async def endpoint(self, namespace: str, spec: ConnectClusterSpec) -> ConnectEndpoint:
        """The endpoint to reach, once the policy allows it: refused before any Secret is read or
        anything is sent (ClusterUnusable with the policy's reason)."""
        auth: ConnectAuth | None = None
        insecure = spec.tls is not None and spec.tls.insecure_skip_verify
        try:
            client_key = spec.tls is not None and spec.tls.client_certificate is not None
            self.policy.check_connect_url(
                spec.url, credentials=spec.authentication is not None or client_key, insecure_skip_verify=insecure
            )
            connect = [url_destination("spec.url", spec.url)]
            if spec.authentication is not None:
                a = spec.authentication
                wanted = [a.username_key, a.password_key] if a.type == "basic" else [a.token_key]
                data = await self._kube.get_secret_data(namespace, a.secret_name, wanted, sent_to=connect)
                missing = [k for k in wanted if k not in data]
                if missing:
                    raise ClusterUnusable(f"Secret {a.secret_name} has no key(s) {', '.join(missing)}")
                if a.type == "basic":
                    auth = ConnectAuth(
                        kind="basic", username=data[a.username_key], password=data[a.password_key], token=None
                    )
                else:
                    auth = ConnectAuth(kind="bearer", username=None, password=None, token=data[a.token_key])
            ca_pem = cert_pem = key_pem = None
            if spec.tls is not None:
                if spec.tls.ca is not None:
                    ca_pem = await self._read_key_ref(namespace, spec.tls.ca.secret, spec.tls.ca.config_map)
                if spec.tls.client_certificate is not None:
                    cc = spec.tls.client_certificate
                    data = await self._kube.get_secret_data(
                        namespace, cc.secret_name, [cc.cert_key, cc.key_key], sent_to=connect
                    )
                    if cc.cert_key not in data or cc.key_key not in data:
                        raise ClusterUnusable(f"Secret {cc.secret_name} needs keys {cc.cert_key} and {cc.key_key}")
                    cert_pem, key_pem = data[cc.cert_key], data[cc.key_key]
        except KubernetesRejected as error:
            raise ClusterUnusable(str(error)) from error
        except CredentialsRefused as error:
            raise ClusterUnusable(str(error), error.reason) from error
        return ConnectEndpoint(
            url=spec.url,
            auth=auth,
            ca_pem=ca_pem,
            client_cert_pem=cert_pem,
            client_key_pem=key_pem,
            insecure_skip_verify=spec.tls.insecure_skip_verify if spec.tls else False,
            timeout_seconds=spec.request_timeout_seconds,
        )

    async def _read_key_ref(self, namespace: str, secret: Any, config_map: Any) -> str:
        if secret is not None:
            # A CA bundle is trust, not a credential: it is never sent anywhere.
            data = await self._kube.get_secret_data(namespace, secret.name, [secret.key], sent_to=())
            ref = secret
        else:
            cm = await self._kube.get_configmap(namespace, config_map.name)
            if cm is None:
                raise ClusterUnusable(f"ConfigMap {config_map.name} does not exist")
            data, ref = cm.data, config_map
        if ref.key not in data:
            raise ClusterUnusable(f"{ref.name} has no key {ref.key}")
        value: str = data[ref.key]
        return value

    async def _build(self, namespace: str, name: str, spec: ConnectClusterSpec, version: int | None) -> _Entry:
        """Resolve the endpoint (reads its Secrets); keep the connection when nothing in it changed."""
        endpoint = await self.endpoint(namespace, spec)
        fingerprint = hashlib.sha256(repr(_endpoint_key(endpoint)).encode()).hexdigest()
        key = (namespace, name)
        async with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry.fingerprint != fingerprint:
                if entry is not None:
                    self._release(key, entry)
                connection = self._connections.get(fingerprint)
                if connection is None:
                    breaker = self._new_breaker()
                    client = ConnectClient(endpoint, breaker=breaker, state_clock=self._state_clock)
                    max_age = self.drift_interval * SNAPSHOT_MAX_AGE_INTERVALS
                    snapshot = ConnectorsSnapshot(client, max_age, hold=self._hold_snapshots, clock=self._clock)
                    connection = _Connection(client, snapshot)
                    # Changes wake only the resources of the ConnectClusters naming this endpoint:
                    # another tenant's connector of the same name on its own Connect is not theirs.
                    connection.snapshot.on_change = functools.partial(self._changed, connection)
                    if breaker is not None:
                        breaker.on_recovered = functools.partial(self._recovered, connection)
                    self._connections[fingerprint] = connection
                connection.users.add(key)
                entry = _Entry(fingerprint, connection)
                self._entries[key] = entry
            entry.cluster_version, entry.endpoint_at = version, time.monotonic()
        return entry

    def _recovered(self, connection: _Connection) -> None:
        """A connection's breaker closed after being open: tell ``on_recovered`` who uses it. Its
        failure is logged, never raised into the request that got the answer."""
        if self._on_recovered is None or not connection.users:
            return
        try:
            self._on_recovered(set(connection.users))
        except Exception:
            log.exception("on_recovered failed for ConnectClusters %s", sorted(connection.users))

    def _changed(self, connection: _Connection, names: set[str]) -> None:
        if self._on_change is not None and connection.users:
            self._on_change(set(connection.users), names)

    def _release(self, key: tuple[str, str], entry: _Entry) -> None:
        connection = entry.connection
        connection.users.discard(key)
        if not connection.users:
            self._connections.pop(entry.fingerprint, None)
            self._retire(connection.client)

    def is_current(self, namespace: str, name: str, client: ConnectClient) -> bool:
        """Whether ``client`` is still the cluster's client, built from its current spec and
        within ``ENDPOINT_TTL_S`` (else a full pass resolves the cluster again)."""
        entry = self._entries.get((namespace, name))
        if entry is None or entry.client is not client:
            return False
        body_generation = self._kube.cache.generation(CLUSTERS, namespace, name)
        return entry.cluster_version == body_generation and time.monotonic() - entry.endpoint_at <= ENDPOINT_TTL_S

    def config_provider(self, namespace: str, name: str) -> ConfigProviderSpec | None:
        """``spec.configProvider`` of a ConnectCluster whose client was resolved (``client_for``)."""
        entry = self._entries.get((namespace, name))
        return None if entry is None else entry.provider

    def reference_rule(self, namespace: str, name: str, for_namespace: str) -> ReferenceRule:
        """What the connector configs of a resource in ``for_namespace`` may refer to
        (``spec.configProviders`` and ``spec.configProvider`` of a resolved ConnectCluster); nothing
        for a cluster not resolved."""
        entry = self._entries.get((namespace, name))
        where = f"ConnectCluster {namespace}/{name}"
        if entry is None:
            return ReferenceRule(where=where)
        allowed = entry.allowed_providers.allowed if entry.allowed_providers is not None else []
        if self.policy.honours_config_providers(namespace):
            return ReferenceRule.for_namespace(for_namespace, allowed, entry.provider, where)
        # Neither list is the platform's word here: a tenant may write this ConnectCluster.
        return ReferenceRule.for_namespace(
            for_namespace,
            [],
            None,
            where,
            f"its spec.configProviders is not honoured: {not_honoured()}"
            if allowed
            else "spec.configProviders.allowed is empty",
        )

    def in_doubt(self, namespace: str, name: str) -> bool:
        """Whether the Connect endpoint of a resolved ConnectCluster is unreachable now: its circuit
        breaker open (or its probe under way). The work queue then runs its resources one at a
        time (``controller.queue``): they fail at once anyway, and a probe holds one worker."""
        entry = self._entries.get((namespace, name))
        if entry is None:
            return False
        breaker = entry.connection.client.breaker
        return breaker is not None and breaker.is_open

    def health(self, namespace: str, name: str) -> tuple[str, str] | None:
        """The worker's last ``GET /health`` answer for a resolved ConnectCluster (None: not asked,
        or a worker older than 3.9)."""
        entry = self._entries.get((namespace, name))
        return None if entry is None else entry.connection.health

    def set_health(self, namespace: str, name: str, health: tuple[str, str] | None) -> None:
        entry = self._entries.get((namespace, name))
        if entry is not None:
            entry.connection.health, entry.connection.health_at = health, time.monotonic()

    def health_age(self, namespace: str, name: str) -> float:
        """Seconds since the endpoint's worker last answered ``GET /health`` (inf: never asked)."""
        entry = self._entries.get((namespace, name))
        return float("inf") if entry is None else time.monotonic() - entry.connection.health_at

    def snapshot(self, namespace: str, name: str) -> ConnectorsSnapshot | None:
        """The connector snapshot of a ConnectCluster whose client was resolved (``client_for``)."""
        entry = self._entries.get((namespace, name))
        return None if entry is None else entry.connection.snapshot

    def current_snapshot(self, namespace: str, name: str) -> ConnectorsSnapshot | None:
        """``snapshot``, only while its endpoint was built from the ConnectCluster the watch cache
        holds now (same generation, not being deleted): a check woken because its cluster was
        deleted or moved must see that in a pass, not wait for the old endpoint's listing."""
        entry = self._entries.get((namespace, name))
        meta = (self._kube.cache.peek(CLUSTERS, namespace, name) or {}).get("metadata")
        if entry is None or meta is None or meta.get("deletionTimestamp"):
            return None
        return entry.connection.snapshot if meta.get("generation") == entry.cluster_version else None

    async def client_for(
        self,
        namespace: str,
        name: str,
        *,
        for_namespace: str | None = None,
        connector_names: Sequence[str] = (),
        force_endpoint: bool = False,
    ) -> tuple[ConnectClient, ServerInfo]:
        """The client for a ConnectCluster, probing ``GET /`` when (re)built and every
        ``SERVER_INFO_TTL_S`` (the same URL may come to serve workers on another Kafka cluster,
        which decides where MirrorMaker 2 connectors write).

        ``for_namespace``: the namespace of the resource that wants it; the cluster's
        ``allowedNamespaces`` and ``connectorNamePrefix`` are checked (``connector_names``)
        before its credentials are read, and a refusal raises ``ClusterBindingRefused``.
        The endpoint (and the Secrets it reads) is reused for ``ENDPOINT_TTL_S`` while the
        ConnectCluster is unchanged; ``force_endpoint`` reads them again.
        """
        body = await self._kube.cached_resource(CLUSTERS, namespace, name)
        if body is None:
            raise ClusterUnusable(f"ConnectCluster {name} not found in namespace {namespace}")
        try:
            cluster = ConnectClusterResource.model_validate(body)
        except ValidationError as error:
            raise ClusterUnusable(
                f"ConnectCluster {name} is invalid: {validation_text(error)}", invalid_spec=True
            ) from error
        if for_namespace is not None:
            refusal = check_binding(cluster.spec, namespace, name, for_namespace, list(connector_names))
            if refusal is not None:
                raise ClusterBindingRefused(refusal)
        version = body["metadata"].get("generation")  # spec changes only, not our status writes
        entry = self._entries.get((namespace, name))
        if (
            force_endpoint
            or entry is None
            or entry.cluster_version != version
            or time.monotonic() - entry.endpoint_at > ENDPOINT_TTL_S
        ):
            entry = await self._build(namespace, name, cluster.spec, version)
        entry.provider, entry.allowed_providers = cluster.spec.config_provider, cluster.spec.config_providers
        connection = entry.connection
        if connection.info is None:
            connection.info = await connection.client.server_info()
            connection.info_at = time.monotonic()
        elif time.monotonic() - connection.info_at > SERVER_INFO_TTL_S:
            # At most one refresh per TTL, answered or not: while Connect is frozen, every pass
            # re-asking would queue a GET / per pass on the worker (test_faults counts them).
            connection.info_at = time.monotonic()
            with contextlib.suppress(ConnectError):
                connection.info = await connection.client.server_info()
        return connection.client, connection.info

    async def kafka_config(self, namespace: str, name: str) -> dict[str, Any]:
        """librdkafka settings for a ConnectCluster's ``spec.kafka`` (secrets resolved); ClusterUnusable if absent."""
        body = await self._kube.cached_resource(CLUSTERS, namespace, name)
        if body is None:
            raise ClusterUnusable(f"ConnectCluster {name} not found in namespace {namespace}")
        try:
            kafka = ConnectClusterResource.model_validate(body).spec.kafka
        except ValidationError as error:
            raise ClusterUnusable(f"ConnectCluster {name} is invalid: {validation_text(error)}") from error
        if kafka is None:
            # The callers say what needed it (seeking a sink to a time, sink progress): one message, two uses.
            raise ClusterUnusable(f"ConnectCluster {name} has no spec.kafka")
        java = {k: java_string(v) for k, v in kafka.config.items() if v is not None}
        try:
            brokers = self.policy.check_kafka(
                f"ConnectCluster {name} spec.kafka",
                kafka.bootstrap_servers,
                java,
                credentials=bool(kafka.secret_config),
            )
            for key, ref in kafka.secret_config.items():
                data = await self._kube.get_secret_data(namespace, ref.name, [ref.key], sent_to=brokers)
                if ref.key not in data:
                    raise ClusterUnusable(
                        f"ConnectCluster {name} spec.kafka.secretConfig.{key}: Secret {ref.name} has no key {ref.key}"
                    )
                java[key] = data[ref.key]
        except CredentialsRefused as error:
            raise ClusterUnusable(str(error), error.reason) from error
        except KubernetesRejected as error:
            raise ClusterUnusable(f"ConnectCluster {name} spec.kafka.secretConfig: {error}") from error
        return librdkafka_config(kafka.bootstrap_servers, java)

    async def refresh(self, namespace: str, name: str) -> tuple[ConnectClient, ServerInfo]:
        """Like ``client_for``, but reads the Secrets and asks ``GET /`` again (a rotated token, a
        worker upgraded behind our back)."""
        client, _ = await self.client_for(namespace, name, force_endpoint=True)
        info = await client.server_info()
        entry = self._entries.get((namespace, name))
        if entry is not None and entry.client is client:
            entry.connection.info, entry.connection.info_at = info, time.monotonic()
        return client, info

    def _retire(self, client: ConnectClient) -> None:
        # Other reconciles may still be using the old client: close it later, not now.
        loop = asyncio.get_running_loop()
        loop.call_later(RETIRE_AFTER_S, lambda: loop.create_task(client.aclose()))

    async def forget(self, namespace: str, name: str) -> None:
        async with self._lock:
            entry = self._entries.pop((namespace, name), None)
            if entry is not None:
                self._release((namespace, name), entry)

    async def aclose(self) -> None:
        async with self._lock:
            connections, self._connections, self._entries = list(self._connections.values()), {}, {}
        for connection in connections:
            await connection.client.aclose()


def _endpoint_key(endpoint: ConnectEndpoint) -> tuple[Any, ...]:
    auth = endpoint.auth
    return (
        endpoint.url,
        (auth.kind, auth.username, auth.password, auth.token) if auth else None,
        endpoint.ca_pem,
        endpoint.client_cert_pem,
        endpoint.client_key_pem,
        endpoint.insecure_skip_verify,
        endpoint.timeout_seconds,
    )


def cluster_ref(namespace: str, labels: dict[str, str]) -> tuple[str, str]:
    """(namespace, name) of the ConnectCluster a resource's labels name: ``connect-offsets.io/cluster``,
    in ``connect-offsets.io/cluster-namespace`` if set, else in the resource's own namespace."""
    cluster_name = labels.get(CLUSTER_LABEL)
    if not cluster_name:
        raise ClusterUnusable(f"label {CLUSTER_LABEL}: <ConnectCluster name> is missing")
    return labels.get(CLUSTER_NAMESPACE_LABEL) or namespace, cluster_name


def cluster_display(namespace: str, labels: dict[str, str]) -> str | None:
    """``status.cluster`` (the Cluster column): the ConnectCluster's name, with its namespace when
    that is not the resource's own; None without the label."""
    if not labels.get(CLUSTER_LABEL):
        return None
    cluster_namespace, cluster_name = cluster_ref(namespace, labels)
    return cluster_name if cluster_namespace == namespace else f"{cluster_namespace}/{cluster_name}"


async def resolve_cluster(
    clusters: ClusterRegistry, namespace: str, labels: dict[str, str], connector_names: Sequence[str] = ()
) -> tuple[ConnectClient, ServerInfo]:
    """The Connect client for a resource's ``connect-offsets.io/cluster`` label (and the optional
    ``connect-offsets.io/cluster-namespace``), once the cluster allows this namespace and these
    connector names (``ClusterBindingRefused`` otherwise)."""
    cluster_namespace, cluster_name = cluster_ref(namespace, labels)
    try:
        client, info = await clusters.client_for(
            cluster_namespace, cluster_name, for_namespace=namespace, connector_names=connector_names
        )
    except ConnectError as error:
        raise ClusterUnreachable(f"Connect cluster {cluster_name} unreachable: {error}") from error
    # A worker older than 3.6 answers every offsets call 404/405: a user error, never a retry loop.
    refusal = offsets_api_refusal(info.version)
    if refusal is not None:
        raise ClusterUnusable(f"ConnectCluster {cluster_name}: {refusal}", CONNECT_TOO_OLD)
    return client, info


def not_honoured() -> str:
    """Why a ConnectCluster's ``spec.configProviders`` or ``spec.configProvider`` is not used."""
    return (
        f"the operator trusts config providers only on ConnectClusters in the namespaces of "
        f"{PROVIDER_CLUSTER_NAMESPACES_ENV} (the chart's configProviders.clusterNamespaces): a tenant may write "
        "a ConnectCluster of its own, and a provider reads what the workers can"
    )


def check_connector_config(
    clusters: ClusterRegistry, cluster: tuple[str, str], namespace: str, target: ConnectorTarget
) -> None:
    """A KafkaConnector's final config through the connector config policy
    (``CredentialsPolicy.check_connector_config``) before anything is sent to Connect: reserved
    keys, Kafka addresses outside the allow-list, config provider references the cluster does not
    allow ``namespace``. ClusterUnusable with the policy's reason."""
    try:
        clusters.policy.check_connector_config(
            target.config,
            field="spec.config",
            tenant_keys=target.tenant_keys,
            mirror=False,
            references=clusters.reference_rule(*cluster, namespace),
        )
    except CredentialsRefused as error:
        raise ClusterUnusable(str(error), error.reason) from error


async def mirror_connect(
    clusters: ClusterRegistry, namespace: str, labels: dict[str, str], connector_names: Sequence[str]
) -> tuple[ConnectClient, Callable[[str], Awaitable[dict[str, str] | None]], ReferenceRule]:
    """For the lag monitor: the Connect client of a resource's cluster, through the same binding
    checks as its reconcile (``resolve_cluster``: namespace, connector names), a reader of a
    connector's config (for its owner key) from the cluster's snapshot, and the config provider
    references its connectors' configs may hold (so a mirror the reconcile refuses is refused here too)."""
    client, _ = await resolve_cluster(clusters, namespace, labels, connector_names)
    cluster = cluster_ref(namespace, labels)
    snapshot = clusters.snapshot(*cluster)

    async def config_of(name: str) -> dict[str, str] | None:
        if snapshot is None:
            return await client.get_connector_config(name)
        return (await snapshot.read(name)).config

    return client, config_of, clusters.reference_rule(*cluster, namespace)


class ClusterUnreachable(TransientError):
    """The ConnectCluster is configured but Connect does not answer (transient)."""
