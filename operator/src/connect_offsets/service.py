"""Reconcile services: gather observed state, ask the planner, act, write status once.

Driven by a thin layer of kopf handlers (``connect_offsets.handlers``), but importing no kopf, so
the same code runs in tests and tools. One reconcile of a KafkaConnector:

1. read the resource fresh from the API (never act on a stale body: an annotation we already
   handled must not run twice);
2. resolve its ConnectCluster into a long-lived Connect client;
3. observe the connector in Connect (config, status, and the ConfigMap an alter reads);
4. ``planning.plan_connector`` decides; we execute its actions in order;
5. ``write_status`` patches status only if it changed, and Events record each outcome.

Errors decide what happens next (``Outcome``): transient ones (Connect unreachable, 5xx, 409)
come back with a retry delay; permanent ones are recorded and wait for a change.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import ValidationError

from connect_offsets import API_GROUP, API_VERSION
from connect_offsets.clients.connect import (
    ConnectAuth,
    ConnectClient,
    ConnectEndpoint,
    ConnectError,
    ConnectHTTPError,
)
from connect_offsets.clients.kubernetes import KubernetesApi, KubernetesError, KubernetesRejected
from connect_offsets.models.connect import ConnectorStatus, ServerInfo, supports_initial_state
from connect_offsets.models.crds import (
    Condition,
    ConnectClusterResource,
    ConnectClusterSpec,
    KafkaConnectorResource,
    OffsetsOperationStatus,
)
from connect_offsets.planning import (
    ANNOTATION_OFFSETS,
    OWNER_CONFIG_KEY,
    Action,
    ConditionSpec,
    Observed,
    OffsetsConfigMap,
    Plan,
    plan_connector,
)

__all__ = [
    "CLUSTER_LABEL",
    "ClusterRegistry",
    "ClusterService",
    "ConnectorService",
    "Outcome",
    "merge_conditions",
]

log = logging.getLogger(__name__)

CLUSTER_LABEL = f"{API_GROUP}/cluster"
CONNECTORS = "kafkaconnectors"
CLUSTERS = "connectclusters"
#: Back-off for transient failures: 2, 4, 8 ... seconds, capped so recovery is noticed quickly.
MAX_RETRY_DELAY_S = 60.0
#: A replaced Connect client is closed this long after its replacement, once requests drain.
RETIRE_AFTER_S = 300.0


def now_utc() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


def iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Outcome:
    """What the caller (a kopf daemon) should do next."""

    requeue_after: float | None = None
    transient_error: str | None = None
    referenced_configmaps: set[str] = field(default_factory=set)


class ClusterUnusable(Exception):
    """The ConnectCluster is missing, invalid, or its credentials cannot be read."""


# --- Connect clients per ConnectCluster ---------------------------------------------------


@dataclass
class _Entry:
    fingerprint: str
    client: ConnectClient
    info: ServerInfo | None = None


class ClusterRegistry:
    """One long-lived ``ConnectClient`` per ConnectCluster, rebuilt when its spec or Secrets change."""

    def __init__(self, kube: KubernetesApi) -> None:
        self._kube = kube
        self._entries: dict[tuple[str, str], _Entry] = {}
        self._lock = asyncio.Lock()

    async def endpoint(self, namespace: str, spec: ConnectClusterSpec) -> ConnectEndpoint:
        auth: ConnectAuth | None = None
        try:
            if spec.authentication is not None:
                a = spec.authentication
                data = await self._kube.get_secret_data(namespace, a.secret_name)
                wanted = [a.username_key, a.password_key] if a.type == "basic" else [a.token_key]
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
                    data = await self._kube.get_secret_data(namespace, cc.secret_name)
                    if cc.cert_key not in data or cc.key_key not in data:
                        raise ClusterUnusable(f"Secret {cc.secret_name} needs keys {cc.cert_key} and {cc.key_key}")
                    cert_pem, key_pem = data[cc.cert_key], data[cc.key_key]
        except KubernetesRejected as error:
            raise ClusterUnusable(str(error)) from error
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
            data = await self._kube.get_secret_data(namespace, secret.name)
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

    async def client_for(self, namespace: str, name: str) -> tuple[ConnectClient, ServerInfo]:
        """The client for a ConnectCluster, probing ``GET /`` once per (re)built client."""
        body = await self._kube.get_resource(CLUSTERS, namespace, name)
        if body is None:
            raise ClusterUnusable(f"ConnectCluster {name} not found in namespace {namespace}")
        try:
            cluster = ConnectClusterResource.model_validate(body)
        except ValidationError as error:
            raise ClusterUnusable(f"ConnectCluster {name} is invalid: {_validation_text(error)}") from error
        endpoint = await self.endpoint(namespace, cluster.spec)
        fingerprint = hashlib.sha256(repr(_endpoint_key(endpoint)).encode()).hexdigest()
        async with self._lock:
            entry = self._entries.get((namespace, name))
            if entry is None or entry.fingerprint != fingerprint:
                if entry is not None:
                    self._retire(entry.client)
                entry = _Entry(fingerprint, ConnectClient(endpoint))
                self._entries[(namespace, name)] = entry
        if entry.info is None:
            entry.info = await entry.client.server_info()
        return entry.client, entry.info

    async def refresh(self, namespace: str, name: str) -> tuple[ConnectClient, ServerInfo]:
        """Like ``client_for``, but asks ``GET /`` again (a worker may have been upgraded)."""
        client, _ = await self.client_for(namespace, name)
        info = await client.server_info()
        entry = self._entries.get((namespace, name))
        if entry is not None and entry.client is client:
            entry.info = info
        return client, info

    def _retire(self, client: ConnectClient) -> None:
        # Other reconciles may still be using the old client: close it later, not now.
        loop = asyncio.get_running_loop()
        loop.call_later(RETIRE_AFTER_S, lambda: loop.create_task(client.aclose()))

    async def forget(self, namespace: str, name: str) -> None:
        async with self._lock:
            entry = self._entries.pop((namespace, name), None)
        if entry is not None:
            self._retire(entry.client)

    async def aclose(self) -> None:
        async with self._lock:
            entries, self._entries = list(self._entries.values()), {}
        for entry in entries:
            await entry.client.aclose()


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


def _validation_text(error: ValidationError) -> str:
    parts = []
    for item in error.errors()[:5]:
        path = ".".join(str(p) for p in item["loc"])
        parts.append(f"{path}: {item['msg']}")
    return "; ".join(parts)


# --- status -------------------------------------------------------------------------------


def merge_conditions(
    previous: list[Condition], wanted: list[ConditionSpec], generation: int, now: str
) -> list[dict[str, Any]]:
    """Conditions per API conventions: keep lastTransitionTime unless the status flips."""
    by_type = {c.type: c for c in previous}
    merged: list[dict[str, Any]] = []
    seen: set[str] = set()
    for spec in wanted:
        if spec.type in seen:
            continue
        seen.add(spec.type)
        old = by_type.get(spec.type)
        transition = old.last_transition_time if old is not None and old.status == spec.status else now
        merged.append(
            {
                "type": spec.type,
                "status": spec.status,
                "reason": spec.reason,
                "message": spec.message,
                "lastTransitionTime": transition,
                "observedGeneration": generation,
            }
        )
    return merged


def _strip_times(status: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(status, sort_keys=True))  # type: ignore[no-any-return]


# --- KafkaConnector -----------------------------------------------------------------------


class ConnectorService:
    def __init__(self, kube: KubernetesApi, clusters: ClusterRegistry) -> None:
        self.kube = kube
        self.clusters = clusters

    async def reconcile(self, namespace: str, name: str) -> Outcome:
        body = await self.kube.get_resource(CONNECTORS, namespace, name)
        if body is None or body["metadata"].get("deletionTimestamp"):
            return Outcome()
        now = now_utc()
        try:
            resource = KafkaConnectorResource.model_validate(body)
        except ValidationError as error:
            await self._write_status(
                body, None, [ConditionSpec("Ready", "False", "InvalidSpec", _validation_text(error))], now
            )
            return Outcome()

        outcome = Outcome(referenced_configmaps=_referenced_configmaps(resource))
        cluster_name = resource.metadata.labels.get(CLUSTER_LABEL)
        client: ConnectClient | None = None
        observed: Observed
        try:
            if not cluster_name:
                raise ClusterUnusable(f"label {CLUSTER_LABEL}: <ConnectCluster name> is missing")
            client, info = await self.clusters.client_for(namespace, cluster_name)
            observed = await self._observe(resource, client, info, now)
        except ClusterUnusable as error:
            observed = Observed(now, str(error), False, None, None)
            outcome.requeue_after = 30.0
        except ConnectError as error:
            observed = Observed(now, f"Connect cluster {cluster_name} unreachable: {error}", False, None, None)
            outcome.transient_error = str(error)

        plan = plan_connector(resource, observed)
        extra_status: dict[str, Any] = {}
        conditions = list(plan.conditions)
        if client is not None and observed.cluster_error is None:
            try:
                await self._execute(resource, body, client, plan, extra_status, conditions, now)
            except ConnectError as error:
                outcome.transient_error = str(error)
                conditions = [c for c in conditions if c.type != "Ready"]
                conditions.insert(0, ConditionSpec("Ready", "False", "ConnectError", str(error)[:1024]))
            if observed.status is not None:
                extra_status["connectorStatus"] = observed.status.model_dump(exclude_none=True)
                extra_status["tasksMax"] = resource.spec.tasks_max
            try:
                if observed.config is not None:
                    topics = await client.get_connector_topics(resource.connector_name)
                    extra_status["topics"] = sorted(topics)
            except ConnectError:
                pass  # topic tracking may be disabled on the worker (topic.tracking.enable=false)
        if plan.auto_restart is not None:
            extra_status["autoRestart"] = plan.auto_restart.model_dump(by_alias=True, exclude_none=True)
        await self._write_status(body, resource, conditions, now, extra_status)
        outcome.requeue_after = plan.requeue_after if outcome.requeue_after is None else outcome.requeue_after
        return outcome

    async def _observe(
        self, resource: KafkaConnectorResource, client: ConnectClient, info: ServerInfo, now: datetime
    ) -> Observed:
        name = resource.connector_name
        config = await client.get_connector_config(name)
        status = await client.get_connector_status(name) if config is not None else None
        configmap: OffsetsConfigMap | None = None
        if resource.metadata.annotations.get(ANNOTATION_OFFSETS) == "alter" and resource.spec.alter_offsets:
            cm_name = resource.spec.alter_offsets.from_config_map.name
            cm = await self.kube.get_configmap(resource.metadata.namespace, cm_name)
            configmap = (
                OffsetsConfigMap(cm_name, True, cm.resource_version, cm.data)
                if cm is not None
                else OffsetsConfigMap(cm_name, False)
            )
        return Observed(
            now=now,
            cluster_error=None,
            supports_initial_state=supports_initial_state(info.version),
            config=config,
            status=ConnectorStatus.model_validate(status.model_dump()) if status is not None else None,
            alter_configmap=configmap,
        )

    async def _execute(
        self,
        resource: KafkaConnectorResource,
        body: dict[str, Any],
        client: ConnectClient,
        plan: Plan,
        extra_status: dict[str, Any],
        conditions: list[ConditionSpec],
        now: datetime,
    ) -> None:
        ns = resource.metadata.namespace
        offsets_ops = {"list_offsets": "list", "alter_offsets": "alter", "reset_offsets": "reset"}
        if plan.offsets_refusal is not None:
            reason, message, permanent = plan.offsets_refusal
            if permanent and reason != "Unchanged":
                extra_status["lastOffsetsOperation"] = self._op_status(
                    resource.metadata.annotations.get(ANNOTATION_OFFSETS, ""), "Failed", message, plan, now, reason
                )
                await self._event(body, "Warning", "OffsetsOperationFailed", message)
        for action in plan.actions:
            if action.kind in offsets_ops:
                operation = offsets_ops[action.kind]
                try:
                    message = await self._offsets_action(resource, body, client, action)
                except ConnectHTTPError as error:
                    if error.retryable:
                        raise
                    text = f"{operation} failed: Connect answered {error.status_code}: {error.message}"
                    extra_status["lastOffsetsOperation"] = self._op_status(
                        operation, "Failed", text, plan, now, "ConnectRejected"
                    )
                    conditions.append(ConditionSpec("OffsetsOperationFailed", "True", "ConnectRejected", text))
                    await self._event(body, "Warning", "OffsetsOperationFailed", text)
                    return
                except OffsetsRequestInvalid as error:
                    text = f"{operation} refused: {error}"
                    extra_status["lastOffsetsOperation"] = self._op_status(
                        operation, "Failed", text, plan, now, error.reason
                    )
                    conditions.append(ConditionSpec("OffsetsOperationFailed", "True", error.reason, text))
                    await self._event(body, "Warning", "OffsetsOperationFailed", text)
                    return
                extra_status["lastOffsetsOperation"] = self._op_status(operation, "Succeeded", message, plan, now)
                await self._event(body, "Normal", "OffsetsOperationSucceeded", message)
            elif action.kind == "remove_annotation":
                assert action.annotation is not None and action.annotation_value is not None
                await self.kube.remove_annotation(
                    CONNECTORS, ns, resource.metadata.name, action.annotation, action.annotation_value
                )
            else:
                await self._lifecycle_action(resource, body, client, action)

    async def _offsets_action(
        self, resource: KafkaConnectorResource, body: dict[str, Any], client: ConnectClient, action: Action
    ) -> str:
        name = resource.connector_name
        if action.kind == "list_offsets":
            assert action.configmap is not None
            offsets = await client.get_offsets(name)
            text = json.dumps(offsets, indent=2, ensure_ascii=False) + "\n"
            try:
                await self.kube.write_configmap_key(
                    resource.metadata.namespace,
                    action.configmap,
                    "offsets.json",
                    text,
                    labels=self._labels(resource),
                    owner=_owner_reference(body),
                )
            except KubernetesRejected as error:
                raise OffsetsRequestInvalid("ConfigMapWriteFailed", str(error)) from error
            count = len(offsets.get("offsets", []))
            return f"list: wrote {count} partition offset(s) to ConfigMap {action.configmap} (key offsets.json)"
        if action.kind == "alter_offsets":
            assert action.offsets_json is not None
            try:
                document = json.loads(action.offsets_json)
            except ValueError as error:
                raise OffsetsRequestInvalid("InvalidOffsets", f"offsets.json is not valid JSON: {error}") from error
            message = await client.alter_offsets(name, document)
            return f"alter: {message}"
        message = await client.reset_offsets(name)
        return f"reset: {message}"

    async def _lifecycle_action(
        self, resource: KafkaConnectorResource, body: dict[str, Any], client: ConnectClient, action: Action
    ) -> None:
        name = resource.connector_name
        if action.kind == "create":
            assert action.config is not None
            await client.create_connector(name, action.config, initial_state=action.initial_state)
            if action.initial_state is None and resource.spec.state.value != "running":
                # Workers before 3.7 have no initial_state: create, then move to the desired state.
                if resource.spec.state.value == "stopped":
                    await client.stop_connector(name)
                else:
                    await client.pause_connector(name)
            await self._event(body, "Normal", "ConnectorCreated", f"Created connector {name} in Connect")
        elif action.kind == "update_config":
            assert action.config is not None
            await client.put_connector_config(name, action.config)
            await self._event(body, "Normal", "ConnectorConfigUpdated", f"Updated the config of connector {name}")
        elif action.kind == "stop":
            await client.stop_connector(name)
        elif action.kind == "pause":
            await client.pause_connector(name)
        elif action.kind == "resume":
            await client.resume_connector(name)
        elif action.kind == "restart":
            await client.restart_connector(name, include_tasks=action.include_tasks, only_failed=action.only_failed)
            reason = "ConnectorAutoRestarted" if action.automatic else "ConnectorRestarted"
            await self._event(
                body,
                "Normal",
                reason,
                f"Restarted connector {name} (includeTasks={action.include_tasks}, onlyFailed={action.only_failed})",
            )
        elif action.kind == "restart_task":
            assert action.task_id is not None
            await client.restart_task(name, action.task_id)
            await self._event(body, "Normal", "TaskRestarted", f"Restarted task {action.task_id} of {name}")

    def _op_status(
        self,
        operation: str,
        result: Literal["Succeeded", "Failed"],
        message: str,
        plan: Plan,
        now: datetime,
        reason: str = "",
    ) -> dict[str, Any]:
        return OffsetsOperationStatus(
            operation=operation,
            result=result,
            reason=reason,
            time=iso(now),
            message=message[:2048],
            request=plan.offsets_request,
        ).model_dump(by_alias=True, exclude_none=True)

    @staticmethod
    def _labels(resource: KafkaConnectorResource) -> dict[str, str]:
        return {
            "app.kubernetes.io/managed-by": "connect-offsets-operator",
            f"{API_GROUP}/kind": "KafkaConnector",
            f"{API_GROUP}/name": resource.metadata.name,
            CLUSTER_LABEL: resource.metadata.labels.get(CLUSTER_LABEL, ""),
        }

    async def _event(self, body: dict[str, Any], event_type: str, reason: str, message: str) -> None:
        log.info("%s/%s %s: %s", body["metadata"]["namespace"], body["metadata"]["name"], reason, message)
        await self.kube.post_event(involved=body, event_type=event_type, reason=reason, message=message)

    async def _write_status(
        self,
        body: dict[str, Any],
        resource: KafkaConnectorResource | None,
        conditions: list[ConditionSpec],
        now: datetime,
        extra: dict[str, Any] | None = None,
    ) -> None:
        """The one place that writes KafkaConnector status; a no-op when nothing changed."""
        await write_status(self.kube, CONNECTORS, body, conditions, now, extra or {})

    async def delete(self, namespace: str, name: str, body: dict[str, Any], *, give_up: bool) -> str:
        """Delete the connector in Connect if this resource owns it. Returns what happened."""
        try:
            resource = KafkaConnectorResource.model_validate(body)
        except ValidationError:
            return "resource invalid; nothing to delete in Connect"
        cluster_name = resource.metadata.labels.get(CLUSTER_LABEL)
        if not cluster_name:
            return "no ConnectCluster label; nothing to delete"
        try:
            client, _ = await self.clusters.client_for(namespace, cluster_name)
            config = await client.get_connector_config(resource.connector_name)
            if config is None:
                return "connector already absent from Connect"
            if config.get(OWNER_CONFIG_KEY) != f"{namespace}/{name}":
                return "connector is owned by someone else; left in place"
            await client.delete_connector(resource.connector_name)
            return f"deleted connector {resource.connector_name} (its offsets stay in Kafka)"
        except ClusterUnusable as error:
            await self._event(body, "Warning", "ConnectorNotDeleted", f"Could not delete in Connect: {error}")
            return f"could not delete in Connect: {error}"
        except ConnectError as error:
            if give_up:
                await self._event(body, "Warning", "ConnectorNotDeleted", f"Gave up deleting in Connect: {error}")
                return f"gave up: {error}"
            raise


class OffsetsRequestInvalid(Exception):
    """An offsets request that cannot succeed as given (bad ConfigMap content, ConfigMap write refused)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def _owner_reference(body: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": body.get("apiVersion", f"{API_GROUP}/{API_VERSION}"),
        "kind": body.get("kind", "KafkaConnector"),
        "name": body["metadata"]["name"],
        "uid": body["metadata"]["uid"],
        "controller": False,
        "blockOwnerDeletion": False,
    }


def _referenced_configmaps(resource: KafkaConnectorResource) -> set[str]:
    names = set()
    if resource.spec.alter_offsets:
        names.add(resource.spec.alter_offsets.from_config_map.name)
    return names


async def write_status(
    kube: KubernetesApi,
    plural: str,
    body: dict[str, Any],
    conditions: list[ConditionSpec],
    now: datetime,
    extra: dict[str, Any],
) -> None:
    """Write status only if it differs from what the resource already has."""
    old: dict[str, Any] = body.get("status") or {}
    previous = [Condition.model_validate(c) for c in old.get("conditions", []) if isinstance(c, dict)]
    generation = int(body["metadata"].get("generation", 0))
    new = dict(old)
    new.update({k: v for k, v in extra.items() if v is not None})
    new["conditions"] = merge_conditions(previous, conditions, generation, iso(now))
    new["observedGeneration"] = generation
    if _strip_times(new) == _strip_times(old):
        return
    # Conditions that disappeared must be removed: a merge patch of the list replaces it whole.
    try:
        await kube.patch_status(plural, body["metadata"]["namespace"], body["metadata"]["name"], new)
    except KubernetesError as error:
        log.warning("status not written: %s", error)
        raise


# --- ConnectCluster -----------------------------------------------------------------------


class ClusterService:
    """Probe a ConnectCluster (``GET /``, plugins) and report it in status."""

    def __init__(self, kube: KubernetesApi, clusters: ClusterRegistry) -> None:
        self.kube = kube
        self.clusters = clusters

    async def reconcile(self, namespace: str, name: str) -> Outcome:
        body = await self.kube.get_resource(CLUSTERS, namespace, name)
        if body is None or body["metadata"].get("deletionTimestamp"):
            await self.clusters.forget(namespace, name)
            return Outcome()
        now = now_utc()
        extra: dict[str, Any] = {}
        outcome = Outcome()
        try:
            # A fresh probe every time: a worker upgraded behind our back must be noticed.
            client, info = await self.clusters.refresh(namespace, name)
            plugins = await client.connector_plugins()
            extra = {
                "version": info.version,
                "commit": info.commit,
                "kafkaClusterId": info.kafka_cluster_id,
                "connectorPlugins": sorted(plugins),
            }
            conditions = [
                ConditionSpec("Ready", "True", "Reachable", f"Connect {info.version} answers at {body['spec']['url']}")
            ]
        except ClusterUnusable as error:
            conditions = [ConditionSpec("Ready", "False", "InvalidConfiguration", str(error))]
        except ConnectError as error:
            conditions = [ConditionSpec("Ready", "False", "Unreachable", str(error)[:1024])]
            outcome.transient_error = str(error)
        await write_status(self.kube, CLUSTERS, body, conditions, now, extra)
        return outcome
