"""In-memory stand-ins for what the operator talks to, shared by the unit tests.

* ``FakeKube`` — the ``KubernetesApi`` methods the reconcile layer and the offsets ConfigMap store
  call: ConfigMaps (with the API server's rules that matter: 1 MiB of values, merge-patch
  semantics, 409 on an existing name or a stale resourceVersion, label selectors), Secrets, our
  custom resources, status patches and Events. One namespace's worth of ConfigMaps: they are keyed
  by name only (``objects``), which every unit test so far needs.
* ``FakeConnect`` — a Kafka Connect worker's REST API as an ``httpx`` handler, mounted with respx:
  connectors with a config, a state and offsets, the checks Connect makes (offsets change only when
  STOPPED), and canned failures for chosen requests.
* ``FakeLeases`` — the API server's ``coordination.k8s.io`` Leases as ``LeaseKeeper`` reads and
  writes them (``clients.leases.LeaseApi``): resourceVersions, 409 and 404, a server that does
  not answer, lost answers; one ``LeaseServer`` behind the connections of several replicas. With
  ``FakeClock``, the monotonic clock a replica judges its Leases by, moved only by the test,
  and ``lease_keeper_for``, a controller working under them.

``FakeKube`` and ``FakeConnect`` may share a ``journal`` list: each appends what it was asked to
change, so a test can assert the order across the two (a backup ConfigMap written before the PATCH
that changes offsets).
"""

from __future__ import annotations

import base64
import copy
import json
import math
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote

import httpx
import respx

from connect_offsets.clients.credentials import CREDENTIALS_LABEL, Destination, check_secret_use
from connect_offsets.clients.kubernetes import (
    ConfigMapData,
    ConfigMapMeta,
    KubernetesError,
    KubernetesRejected,
    KubernetesUnavailable,
)
from connect_offsets.clients.leases import LeaseConflict, LeaseRecord, LeaseWrite
from connect_offsets.clients.offsets_configmaps import CONFIGMAP_MAX_BYTES, SHARD_LABEL
from connect_offsets.clients.resource_cache import ResourceCache
from connect_offsets.controller import Controller
from connect_offsets.controller.leases import LeaseKeeper, LeaseTimings, lease_name
from connect_offsets.vocabulary import MAX_QUOTED_TEXT


def matches(labels: dict[str, str], selector: str) -> bool:
    """A label selector of ``k=v``, ``k`` and ``!k`` terms, comma-separated (all must hold)."""
    for term in filter(None, (t.strip() for t in selector.split(","))):
        if term.startswith("!"):
            if term[1:] in labels:
                return False
        elif "=" in term:
            key, _, value = term.partition("=")
            if labels.get(key) != value:
                return False
        elif term not in labels:
            return False
    return True


def apply_merge_patch(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """``target`` with a JSON merge patch (RFC 7386) applied; neither argument is changed."""
    merged = copy.deepcopy(target)
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = apply_merge_patch(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


@dataclass
class Event:
    type: str
    reason: str
    message: str
    involved: str  # the resource's name


class FakeKube:
    """ConfigMaps, Secrets, custom resources and Events in dicts, with the API server's rules the
    operator relies on."""

    def __init__(self, journal: list[str] | None = None) -> None:
        self.objects: dict[str, dict[str, Any]] = {}  # ConfigMaps by name
        self.resources: dict[tuple[str, str, str], dict[str, Any]] = {}  # (plural, namespace, name)
        self.secrets: dict[str, dict[str, Any]] = {}  # name -> {"labels", "annotations", "data": {key: bytes}}
        #: Where each Secret's values were said to go (``get_secret_data(sent_to=...)``), by name.
        self.secret_destinations: dict[str, list[Destination]] = {}
        self.events: list[Event] = []
        self.status_patches: list[dict[str, Any]] = []
        self.journal = journal if journal is not None else []
        self.version = 0
        self.fail_create_after: int | None = None
        self.creates = 0
        #: What the operator's watch cache holds: each change to a resource is delivered at once,
        #: as a watch event would be, unless ``watch_paused`` (a watch lagging behind the API server).
        self.cache = ResourceCache()
        self.watch_paused = False
        self.resource_gets = 0  # GETs of our resources (the cache is meant to make them rare)

    def _deliver(self, plural: str, namespace: str, name: str) -> None:
        if not self.watch_paused:
            self.cache.observe(plural, namespace, name, self.resources.get((plural, namespace, name)))

    async def cached_resource(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        body = self.cache.get(plural, namespace, name)
        return body if body is not None else await self.fresh_resource(plural, namespace, name)

    async def fresh_resource(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        body = await self.get_resource(plural, namespace, name)
        self.cache.observe(plural, namespace, name, body, watched=False)
        return body

    def _bump(self) -> str:
        self.version += 1
        return str(self.version)

    @staticmethod
    def _check_size(obj: dict[str, Any]) -> None:
        size = sum(len(v.encode()) for v in obj.get("data", {}).values())
        size += sum(len(base64.b64decode(v)) for v in obj.get("binaryData", {}).values())
        if size > CONFIGMAP_MAX_BYTES:
            raise KubernetesRejected(f"create ConfigMap: 422 Too long: may not be more than {CONFIGMAP_MAX_BYTES}", 422)

    # ---- ConfigMaps ----------------------------------------------------------------------------

    async def get_configmap(self, namespace: str, name: str) -> ConfigMapData | None:
        return self._configmap_data(name)

    def _configmap_data(self, name: str) -> ConfigMapData | None:
        obj = self.objects.get(name)
        if obj is None:
            return None
        meta = obj["metadata"]
        return ConfigMapData(
            name=name,
            resource_version=meta["resourceVersion"],
            data=dict(obj.get("data", {})),
            binary_data={k: base64.b64decode(v) for k, v in obj.get("binaryData", {}).items()},
            labels=dict(meta.get("labels", {})),
            owner_references=copy.deepcopy(meta.get("ownerReferences", [])),
            uid=meta["uid"],
            annotations=dict(meta.get("annotations", {})),
        )

    async def create_configmap_uid(self, namespace: str, body: dict[str, Any]) -> str:
        self.creates += 1
        if self.fail_create_after is not None and self.creates > self.fail_create_after:
            raise KubernetesUnavailable("create ConfigMap: 503 etcd is unavailable", 503)
        name = body["metadata"]["name"]
        if name in self.objects:
            raise KubernetesUnavailable(f"create ConfigMap {namespace}/{name}: 409 already exists", 409)
        obj = copy.deepcopy(body)
        self._check_size(obj)
        obj["metadata"].setdefault("annotations", {})
        obj["metadata"].update(uid=str(uuid.uuid4()), resourceVersion=self._bump())
        self.objects[name] = obj
        self.journal.append(f"kube: create ConfigMap {name}")
        return str(obj["metadata"]["uid"])

    async def create_configmap(self, namespace: str, body: dict[str, Any]) -> None:
        await self.create_configmap_uid(namespace, body)

    async def patch_configmap(
        self, namespace: str, name: str, patch: dict[str, Any], *, resource_version: str | None = None
    ) -> ConfigMapData:
        if name not in self.objects:
            raise KubernetesRejected(f"patch ConfigMap {namespace}/{name}: 404 not found", 404)
        obj = copy.deepcopy(self.objects[name])
        if resource_version is not None and resource_version != obj["metadata"]["resourceVersion"]:
            raise KubernetesUnavailable(f"patch ConfigMap {namespace}/{name}: 409 the object has been modified", 409)
        for part in ("data", "binaryData"):
            for key, value in (patch.get(part) or {}).items():
                target = obj.setdefault(part, {})
                if value is None:
                    target.pop(key, None)
                else:
                    target[key] = value
        meta = patch.get("metadata", {})
        for part in ("labels", "annotations"):
            obj["metadata"].setdefault(part, {}).update(meta.get(part, {}))
        if "ownerReferences" in meta:
            obj["metadata"]["ownerReferences"] = meta["ownerReferences"]
        self._check_size(obj)
        obj["metadata"]["resourceVersion"] = self._bump()
        self.objects[name] = obj
        self.journal.append(f"kube: patch ConfigMap {name}")
        answer = self._configmap_data(name)
        assert answer is not None
        return answer

    async def write_configmap_key(
        self, namespace: str, name: str, key: str, value: str, *, labels: dict[str, str], owner: dict[str, Any]
    ) -> None:
        if name in self.objects:
            await self.patch_configmap(namespace, name, {"data": {key: value}})
            return
        body = {"metadata": {"name": name, "labels": labels, "ownerReferences": [owner]}, "data": {key: value}}
        await self.create_configmap(namespace, body)

    async def list_configmap_metadata(self, namespace: str | None, label_selector: str) -> list[ConfigMapMeta]:
        return [
            ConfigMapMeta(name, o["metadata"]["uid"], o["metadata"].get("labels", {}), o["metadata"]["annotations"])
            for name, o in self.objects.items()
            if matches(o["metadata"].get("labels", {}), label_selector)
        ]

    async def list_configmaps(self, namespace: str, label_selector: str) -> list[tuple[str, dict[str, str]]]:
        return [(m.name, dict(m.annotations)) for m in await self.list_configmap_metadata(namespace, label_selector)]

    async def delete_configmap(self, namespace: str, name: str) -> None:
        if self.objects.pop(name, None) is not None:
            self.journal.append(f"kube: delete ConfigMap {name}")

    def shards(self) -> list[str]:
        return sorted(n for n, o in self.objects.items() if SHARD_LABEL in o["metadata"].get("labels", {}))

    def configmaps_labelled(self, selector: str) -> dict[str, dict[str, Any]]:
        """The ConfigMaps a selector matches, by name (for assertions)."""
        return {n: o for n, o in self.objects.items() if matches(o["metadata"].get("labels", {}), selector)}

    # ---- Secrets -------------------------------------------------------------------------------

    def add_secret(
        self, name: str, data: dict[str, bytes], *, opted_in: bool = True, annotations: dict[str, str] | None = None
    ) -> None:
        self.secrets[name] = {
            "labels": {CREDENTIALS_LABEL: "true"} if opted_in else {},
            "annotations": annotations or {},
            "data": data,
        }

    async def get_secret_data(
        self, namespace: str, name: str, keys: Iterable[str], *, sent_to: Iterable[Destination]
    ) -> dict[str, str]:
        secret = self.secrets.get(name)
        if secret is None:
            raise KubernetesRejected(f"get Secret {namespace}/{name}: 404 not found", 404)
        check_secret_use(namespace, name, secret["labels"], secret["annotations"], sent_to)
        self.secret_destinations.setdefault(name, []).extend(sent_to)
        return {k: secret["data"][k].decode() for k in dict.fromkeys(keys) if k in secret["data"]}

    # ---- custom resources, status, Events ------------------------------------------------------

    def put_resource(self, plural: str, body: dict[str, Any]) -> dict[str, Any]:
        """Create or replace one of our resources (as ``kubectl apply`` would)."""
        obj = copy.deepcopy(body)
        meta = obj["metadata"]
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("generation", 1)
        meta.setdefault("annotations", {})
        meta["resourceVersion"] = self._bump()
        self.resources[(plural, meta["namespace"], meta["name"])] = obj
        self._deliver(plural, meta["namespace"], meta["name"])
        return obj

    def resource(self, plural: str, namespace: str, name: str) -> dict[str, Any]:
        return self.resources[(plural, namespace, name)]

    def annotate(self, plural: str, namespace: str, name: str, **annotations: str) -> None:
        """Set annotations the way a user does (``connector_offsets`` -> ``connect-offsets.io/connector-offsets``)."""
        obj = self.resources[(plural, namespace, name)]
        obj["metadata"]["annotations"].update(
            {f"connect-offsets.io/{k.replace('_', '-')}": v for k, v in annotations.items()}
        )
        obj["metadata"]["resourceVersion"] = self._bump()
        self._deliver(plural, namespace, name)

    async def get_resource(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        self.resource_gets += 1
        obj = self.resources.get((plural, namespace, name))
        return copy.deepcopy(obj) if obj is not None else None

    async def list_resources(
        self, plural: str, kind: str, namespace: str | None, label_selector: str
    ) -> list[dict[str, Any]]:
        found = [
            copy.deepcopy(o)
            for (p, ns, _), o in self.resources.items()
            if p == plural and namespace in (None, ns) and matches(o["metadata"].get("labels", {}), label_selector)
        ]
        return sorted(found, key=lambda b: (b["metadata"]["namespace"], b["metadata"]["name"]))

    async def patch_annotations_at(
        self, plural: str, namespace: str, name: str, annotations: dict[str, str | None], resource_version: str
    ) -> dict[str, Any]:
        obj = self.resources.get((plural, namespace, name))
        if obj is None:
            raise KubernetesRejected(f"annotate {plural} {namespace}/{name}: 404 not found", 404)
        if obj["metadata"]["resourceVersion"] != resource_version:
            raise KubernetesUnavailable(f"annotate {plural} {namespace}/{name}: 409 modified", 409)
        current = obj["metadata"]["annotations"]
        for key, value in annotations.items():
            if value is None:
                current.pop(key, None)
            else:
                current[key] = value
        obj["metadata"]["resourceVersion"] = self._bump()
        self.journal.append(f"kube: annotate {name} {sorted(annotations)}")
        self._deliver(plural, namespace, name)
        return copy.deepcopy(obj)

    async def remove_annotations(
        self,
        plural: str,
        namespace: str,
        name: str,
        expected: dict[str, str],
        *,
        set_also: dict[str, str] | None = None,
    ) -> list[str]:
        """As the API server applies the operator's value-guarded JSON patch: each annotation is
        removed only while it has the value expected (no resourceVersion guard), ``set_also`` set."""
        obj = self.resources.get((plural, namespace, name))
        if obj is None:
            return []
        current = obj["metadata"]["annotations"]
        keys = [key for key, value in expected.items() if current.get(key) == value]
        marks = {k: v for k, v in (set_also or {}).items() if current.get(k) != v}
        if not keys and not marks:
            return []
        for key in keys:
            current.pop(key)
        current.update(marks)
        obj["metadata"]["resourceVersion"] = self._bump()
        self.journal.append(f"kube: annotate {name} {sorted([*keys, *marks])}")
        self.cache.observe(plural, namespace, name, obj, watched=False)  # the patch's answer
        self._deliver(plural, namespace, name)
        return keys

    async def patch_status(
        self, plural: str, namespace: str, name: str, status: dict[str, Any]
    ) -> dict[str, Any] | None:
        """A JSON merge patch of status, as the API server applies it (RFC 7386: objects merged
        key by key at any depth, None removes a key, lists replaced whole), recorded in
        ``status_patches``; the whole resource is the answer."""
        obj = self.resources.get((plural, namespace, name))
        if obj is None:
            raise KubernetesRejected(f"patch status of {plural} {namespace}/{name}: 404 not found", 404)
        obj["status"] = apply_merge_patch(obj.get("status") or {}, status)
        obj["metadata"]["resourceVersion"] = self._bump()
        self.cache.observe(plural, namespace, name, obj, watched=False)  # the patch's answer
        self._deliver(plural, namespace, name)
        self.status_patches.append(copy.deepcopy(status))
        self.journal.append(f"kube: status {sorted(status)}")
        return copy.deepcopy(obj)

    async def post_event(self, *, involved: dict[str, Any], event_type: str, reason: str, message: str) -> None:
        self.events.append(Event(event_type, reason, message[:MAX_QUOTED_TEXT], involved["metadata"]["name"]))

    def reasons(self) -> list[str]:
        return [e.reason for e in self.events]


# --------------------------------------------------------------------------------------------------
# Kafka Connect
# --------------------------------------------------------------------------------------------------


@dataclass
class FakeConnector:
    config: dict[str, str]
    state: str = "RUNNING"  # RUNNING, PAUSED, STOPPED
    offsets: list[dict[str, Any]] = field(default_factory=list)  # [{"partition": ..., "offset": ...}]
    #: What its status still reports, and for how many more reads, after a state change (``status_lag``).
    reported: str = "RUNNING"
    lagging_reads: int = 0


@dataclass
class _Failure:
    method: str
    path: str
    skip: int  # matching requests still answered normally first
    answer: httpx.Response


@dataclass
class Sent:
    """One request Connect received."""

    method: str
    path: str
    body: Any = None

    def __str__(self) -> str:
        return f"{self.method} {self.path}"


class FakeConnect:
    """A Connect worker's REST API, enough for the reconcile layer; mount with ``install``."""

    def __init__(
        self, url: str = "http://connect.test:8083", version: str = "3.7.0", journal: list[str] | None = None
    ) -> None:
        self.url = url
        self.version = version
        self.connectors: dict[str, FakeConnector] = {}
        self.requests: list[Sent] = []
        self.journal = journal if journal is not None else []
        #: Canned answers for chosen requests (see ``fail``): used once each, in order.
        self.failures: list[_Failure] = []
        #: What ``GET /health`` answers (3.9+, KIP-1017): healthy, starting (503) or unhealthy (500).
        self.health = "healthy"
        #: After a stop, pause or resume, how many status reads (of the connector, or in a listing)
        #: still report the state before it: a real worker's status follows its target state late.
        self.status_lag = 0

    def install(self, router: respx.Router) -> None:
        router.route(url__startswith=self.url).mock(side_effect=self.handle)

    def fail(self, method: str, path: str, status: int, message: str, *, after: int = 0) -> None:
        """Answer one ``method path`` request with a Connect error: the next one, or the one after
        ``after`` more such requests were answered normally."""
        self.failures.append(_Failure(method, path, after, self._error(status, message)))

    def sent(self, method: str | None = None, suffix: str = "") -> list[Sent]:
        """The requests received, optionally of one method and ending with ``suffix``."""
        return [r for r in self.requests if (method is None or r.method == method) and r.path.endswith(suffix)]

    def changes(self) -> list[str]:
        """Every request but a GET, in order: what a test means by "sent to Connect"."""
        return [str(r) for r in self.requests if r.method != "GET"]

    @staticmethod
    def _error(status: int, message: str) -> httpx.Response:
        return httpx.Response(status, json={"error_code": status, "message": message})

    def handle(self, request: httpx.Request) -> httpx.Response:
        path = unquote(request.url.raw_path.decode().split("?")[0])
        body: Any = json.loads(request.content) if request.content else None
        self.requests.append(Sent(request.method, path, body))
        if request.method != "GET":
            self.journal.append(f"connect: {request.method} {path}")
        failure = next((f for f in self.failures if (f.method, f.path) == (request.method, path)), None)
        if failure is not None:
            if failure.skip == 0:
                self.failures.remove(failure)
                return failure.answer
            failure.skip -= 1
        if path == "/":
            return httpx.Response(200, json={"version": self.version, "commit": "fake", "kafka_cluster_id": "k1"})
        if path == "/connector-plugins":  # the ConnectCluster's probe lists the installed plugins
            classes = [
                "org.apache.kafka.connect.file.FileStreamSourceConnector",
                "org.apache.kafka.connect.file.FileStreamSinkConnector",
            ]
            kinds = ["source", "sink"]
            return httpx.Response(
                200,
                json=[{"class": c, "type": k, "version": self.version} for c, k in zip(classes, kinds, strict=True)],
            )
        if path == "/health":
            code = {"healthy": 200, "starting": 503, "unhealthy": 500}[self.health]
            return httpx.Response(code, json={"status": self.health, "message": f"Worker is {self.health}."})
        if path == "/connectors":
            if request.method == "POST":
                name = body["name"]
                if name in self.connectors:
                    return self._error(409, f"Connector {name} already exists")
                state = body.get("initial_state", "RUNNING")
                self.connectors[name] = FakeConnector(dict(body["config"]), state)
                return httpx.Response(201, json={"name": name, "config": body["config"], "tasks": []})
            expand = request.url.params.get_list("expand")
            if not expand:
                return httpx.Response(200, json=sorted(self.connectors))
            # KIP-465: every connector with the parts asked for, as a real worker answers it.
            answer: dict[str, Any] = {}
            for name, listed in sorted(self.connectors.items()):
                entry: dict[str, Any] = {}
                if "status" in expand:
                    entry["status"] = self._status(name, listed)
                if "info" in expand:
                    entry["info"] = {"name": name, "config": dict(listed.config), "tasks": [], "type": "source"}
                answer[name] = entry
            return httpx.Response(200, json=answer)
        if path.startswith("/connector-plugins/"):
            return httpx.Response(200, json={"name": "x", "error_count": 0, "groups": [], "configs": []})
        parts = path.split("/")  # "", "connectors", name, suffix...
        name, suffix = parts[2], "/".join(parts[3:])
        connector = self.connectors.get(name)
        if connector is None and not (suffix == "config" and request.method == "PUT"):
            return self._error(404, f"Connector {name} not found")
        return self._connector(request.method, name, suffix, connector, body)

    def _connector(
        self, method: str, name: str, suffix: str, connector: FakeConnector | None, body: Any
    ) -> httpx.Response:
        if suffix == "config" and method == "PUT":
            if connector is None:
                self.connectors[name] = FakeConnector(dict(body))
            else:
                connector.config = dict(body)
            return httpx.Response(200, json={"name": name, "config": body, "tasks": []})
        assert connector is not None
        if suffix == "" and method == "DELETE":
            del self.connectors[name]
            return httpx.Response(204)
        if suffix == "config":
            return httpx.Response(200, json=connector.config)
        if suffix == "status":
            return httpx.Response(200, json=self._status(name, connector))
        if suffix == "topics":
            return httpx.Response(200, json={name: {"topics": []}})
        if suffix in ("stop", "pause", "resume"):
            connector.reported = self._reported(connector)
            connector.lagging_reads = self.status_lag
            connector.state = {"stop": "STOPPED", "pause": "PAUSED", "resume": "RUNNING"}[suffix]
            return httpx.Response(202 if suffix != "stop" else 204)
        if suffix == "restart":
            return httpx.Response(204)
        if suffix == "offsets":
            return self._offsets(method, connector, body)
        return self._error(404, f"no resource {suffix}")

    @staticmethod
    def _reported(connector: FakeConnector) -> str:
        return connector.reported if connector.lagging_reads > 0 else connector.state

    def _status(self, name: str, connector: FakeConnector) -> dict[str, Any]:
        state = self._reported(connector)
        connector.lagging_reads = max(0, connector.lagging_reads - 1)
        tasks = [] if state == "STOPPED" else [{"id": 0, "state": state, "worker_id": "worker:8083"}]
        return {
            "name": name,
            "connector": {"state": state, "worker_id": "worker:8083"},
            "tasks": tasks,
            "type": "source",
        }

    def _offsets(self, method: str, connector: FakeConnector, body: Any) -> httpx.Response:
        if method == "GET":
            return httpx.Response(200, json={"offsets": copy.deepcopy(connector.offsets)})
        if connector.state != "STOPPED":
            return self._error(400, "Connectors must be in the STOPPED state before their offsets can be modified")
        if method == "DELETE":
            connector.offsets = []
            return httpx.Response(200, json={"message": "The offsets for this connector have been reset successfully"})
        for entry in body["offsets"]:
            kept = [o for o in connector.offsets if o["partition"] != entry["partition"]]
            connector.offsets = kept + ([copy.deepcopy(entry)] if entry["offset"] is not None else [])
        return httpx.Response(200, json={"message": "The offsets for this connector have been altered successfully"})


# --------------------------------------------------------------------------------------------------
# Leases, and the clock a replica judges them by
# --------------------------------------------------------------------------------------------------


@dataclass
class FakeClock:
    """A monotonic clock only the test moves: ``clock()`` reads it, ``clock.now += s`` moves it."""

    now: float = 0.0

    def __call__(self) -> float:
        return self.now


@dataclass(frozen=True)
class LeaseFault:
    """One Lease call's failure: ``written`` when the call took effect and only its answer was lost."""

    error: KubernetesError
    written: bool = False


@dataclass
class LeaseServer:
    """What the API server keeps of the Leases: each one's record, and what was last written into it."""

    records: dict[str, LeaseRecord] = field(default_factory=dict)
    written: dict[str, LeaseWrite] = field(default_factory=dict)
    version: int = 0


class FakeLeases:
    """One replica's connection to an in-memory API server's Leases (``clients.leases.LeaseApi``).

    As the API server does: every write gets a new resourceVersion, a create a new uid; a create of
    an existing name is 409; a replace or delete against a stale resourceVersion (or another uid)
    is 409; a delete of a missing Lease is 404, a replace of one creates it (Leases allow create on
    update, the stale resourceVersion ignored) unless it names a uid, then 409.
    ``down`` makes every call fail (the API server does not answer); ``failing`` makes the calls
    it names fail with 503 every time; ``fail`` queues one failure of the next such call (before
    it takes effect, or after: a lost answer). ``replica()`` is another replica's connection to the
    same server, with failures of its own. ``records`` is the server's: clearing it deletes every
    Lease behind the keepers' backs.
    """

    prefix = "connect-offsets"

    def __init__(self, server: LeaseServer | None = None) -> None:
        self.server = server if server is not None else LeaseServer()
        self.down = False
        self.failing: set[str] = set()
        self.faults: dict[str, list[LeaseFault]] = {}
        self.calls: list[str] = []

    @property
    def records(self) -> dict[str, LeaseRecord]:
        return self.server.records

    @property
    def writes(self) -> int:
        """Writes the API server took (resourceVersions handed out), the test's own included."""
        return self.server.version

    def replica(self) -> FakeLeases:
        return FakeLeases(self.server)

    def fail(self, call: str, error: KubernetesError, *, written: bool = False) -> None:
        self.faults.setdefault(call, []).append(LeaseFault(error, written))

    # --- what the keeper calls ---

    async def list(self) -> dict[str, LeaseRecord]:
        fault = self._enter("list")
        self._leave(fault)
        return dict(self.records)

    async def get(self, name: str) -> LeaseRecord | None:
        fault = self._enter("get")
        self._leave(fault)
        return self.records.get(name)

    async def create(self, name: str, cluster: str, write: LeaseWrite) -> LeaseRecord:
        fault = self._enter("create")
        if name in self.records:
            raise LeaseConflict(f"create Lease {name}: 409 AlreadyExists", 409)
        record = self.put(name, cluster, write)
        self._leave(fault)
        return record

    async def replace(self, record: LeaseRecord, write: LeaseWrite) -> LeaseRecord:
        fault = self._enter("replace")
        if record.name not in self.records:
            if record.uid:
                raise LeaseConflict(f"update Lease {record.name}: 409 Conflict (uid precondition)", 409)
            written = self.put(record.name, record.cluster, write)  # created on update
        else:
            self._match(record, "update")
            written = self.put(record.name, record.cluster, write)
        self._leave(fault)
        return written

    async def delete(self, record: LeaseRecord) -> None:
        fault = self._enter("delete")
        self._match(record, "delete")
        del self.records[record.name]
        self.server.written.pop(record.name, None)
        self._leave(fault)

    # --- the API server itself (seeding, writes behind the keepers' backs, reading) ---

    def put(self, name: str, cluster: str, write: LeaseWrite) -> LeaseRecord:
        """Store ``write`` under a new resourceVersion, whatever was there (the uid kept, a new one
        for a Lease made now)."""
        self.server.version += 1
        existing = self.records.get(name)
        record = LeaseRecord(
            name=name,
            holder=write.holder,
            duration_s=float(max(1, math.ceil(write.duration_s))),  # an integer, rounded up as LeaseApi does
            transitions=write.transitions,
            resource_version=str(self.server.version),
            cluster=cluster,
            uid=existing.uid if existing is not None else f"uid-{self.server.version}",
        )
        self.records[name] = record
        self.server.written[name] = write
        return record

    def overwrite(self, cluster: tuple[str, str], holder: str, transitions: int | None = None) -> LeaseRecord:
        """Another writer (a replica, a person) rewrites the Lease; by default a new term."""
        record = self.record(cluster)
        assert record is not None
        now = datetime.now(UTC)
        count = record.transitions + 1 if transitions is None else transitions
        return self.put(record.name, record.cluster, LeaseWrite(holder, LeaseTimings().duration, count, now, now))

    def seed_released(self, cluster: tuple[str, str], transitions: int = 0) -> LeaseRecord:
        """A Lease as a replica leaves it on release: no holder."""
        now = datetime.now(UTC)
        return self.put(lease_name(self.prefix, cluster), "/".join(cluster), LeaseWrite("", 1, transitions, now, now))

    def remove(self, cluster: tuple[str, str]) -> None:
        """``kubectl delete lease``."""
        name = lease_name(self.prefix, cluster)
        del self.records[name]
        self.server.written.pop(name, None)

    def record(self, cluster: tuple[str, str]) -> LeaseRecord | None:
        return self.records.get(lease_name(self.prefix, cluster))

    def written(self, cluster: tuple[str, str]) -> LeaseWrite:
        name = lease_name(self.prefix, cluster)
        assert name in self.records, f"no Lease {name}"
        return self.server.written[name]

    def holder(self, cluster: tuple[str, str]) -> str | None:
        record = self.record(cluster)
        return None if record is None else record.holder

    def _match(self, record: LeaseRecord, verb: str) -> None:
        current = self.records.get(record.name)
        if current is None:
            raise LeaseConflict(f"{verb} Lease {record.name}: 404 NotFound", 404)
        if current.resource_version != record.resource_version or (record.uid and record.uid != current.uid):
            raise LeaseConflict(f"{verb} Lease {record.name}: 409 Conflict", 409)

    def _enter(self, call: str) -> LeaseFault | None:
        self.calls.append(call)
        if self.down:
            raise KubernetesUnavailable(f"{call} Lease: ReadTimeoutError (the API server does not answer)")
        if call in self.failing:
            raise KubernetesUnavailable(f"{call} Lease: 503 Service Unavailable", 503)
        queued = self.faults.get(call)
        fault = queued.pop(0) if queued else None
        if fault is not None and not fault.written:
            raise fault.error
        return fault

    @staticmethod
    def _leave(fault: LeaseFault | None) -> None:
        if fault is not None:  # it was written; the caller never hears so
            raise fault.error


def lease_keeper_for(
    controller: Controller, store: FakeLeases, identity: str, *, clock: FakeClock, timings: LeaseTimings
) -> LeaseKeeper:
    """``controller`` works under ``store``'s Leases from now on: a real ``LeaseKeeper`` on
    ``clock``, wired as ``handlers/startup.py`` wires it (every callback the controller's)."""
    return controller.use_leases(
        lambda c: LeaseKeeper(
            store,
            identity,
            wanted=c.wanted_clusters,
            exists=c.cluster_exists,
            on_acquired=c.leases_acquired,
            on_lost=c.leases_lost,
            drain=c.drain,
            timings=timings,
            clock=clock,
        )
    )
