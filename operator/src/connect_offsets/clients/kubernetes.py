"""The Kubernetes API, as the operator uses it: ConfigMaps, Secrets, our resources, Events.

Why a wrapper: the official ``kubernetes`` client is synchronous and the operator runs every pass on one
event loop, so each call goes through a thread of its own pool (one per worker, ``KUBE_THREADS`` at least) here and
nowhere else. Errors are mapped to two classes that say whether retrying can help. Secret values are
returned to the caller and never logged or put into exception text. Over 600 lines because every
call of the operator's objects is here, one short method each, behind the one error mapping and
the one fenced write path (``_write``); the patch builders are in ``annotations_patch``, Leases
(their own threads) in ``leases``.

Error tree::

    KubernetesError            base
    ├── KubernetesUnavailable  transport failures, 5xx, 429, conflicts: retry later
    └── KubernetesRejected     other 4xx (forbidden, invalid): retrying the same call won't help
"""

from __future__ import annotations

import asyncio
import base64
import contextvars
import functools
import json
import logging
from collections.abc import Awaitable, Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from connect_offsets import fencing
from connect_offsets.clients.annotations_patch import annotations_patch, finalizers_patch, send_json_patch
from connect_offsets.clients.credentials import CredentialsRefused, Destination, check_secret_use
from connect_offsets.clients.kubernetes_core import CoreApi, event_body
from connect_offsets.clients.resource_cache import ResourceCache
from connect_offsets.errors import ConnectOffsetsError, TransientError, UserError
from connect_offsets.vocabulary import API_GROUP, API_VERSION, LABEL_VALUE_MAX, MAX_QUOTED_TEXT, label_value

__all__ = [
    "CONFLICT_ATTEMPTS",
    "LABEL_VALUE_MAX",
    "ConfigMapData",
    "ConfigMapMeta",
    "KubernetesApi",
    "KubernetesError",
    "KubernetesRejected",
    "KubernetesUnavailable",
    "label_value",
    "load_api_client",
    "retry_on_conflict",
]

log = logging.getLogger(__name__)
T = TypeVar("T")
JsonObject = dict[str, Any]


#: Kubernetes calls get threads of their own (the client is synchronous): a tenant's Kafka calls
#: (clients/tenant_io.py) or a large plan never make them queue. At least this many; the operator
#: gives as many as it has workers (``--workers``), each waiting on at most one call at a time.
KUBE_THREADS = 8
#: Connections the client keeps beyond one per calling thread: the Leases' four (clients/leases.py).
#: The client's default (cpu count x 5: 10 on 2 cores) is fewer than the threads: urllib3 then
#: opens a connection per call past it and throws it away afterwards (a TLS handshake each, at a
#: start's busiest).
LEASE_CONNECTIONS = 4


class KubernetesError(ConnectOffsetsError):
    """A Kubernetes API call failed; the message has the verb, object and the API's reason.

    ``status`` is the API server's HTTP status when it answered (None: it did not), so callers
    test ``error.status == 409`` instead of reading the message.
    """

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status

    @property
    def retryable(self) -> bool:
        return True


class KubernetesUnavailable(KubernetesError, TransientError):
    """The API server did not answer, or answered 5xx/429."""


class KubernetesRejected(KubernetesError, UserError):
    """The API server refused the call (4xx): RBAC, a quota, validation, a missing object."""

    status: int

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message, status)

    @property
    def retryable(self) -> bool:
        return False


#: How often a read-then-write at the resourceVersion read is tried before a conflict is given up on.
CONFLICT_ATTEMPTS = 5


async def retry_on_conflict(what: str, attempt: Callable[[], Awaitable[T]], attempts: int = CONFLICT_ATTEMPTS) -> T:
    """Optimistic concurrency: run ``attempt`` (read the object, then write at the resourceVersion it
    read) again while the API server answers 409, someone having changed the object meanwhile.

    Any other error reaches the caller at once. After ``attempts`` conflicts, KubernetesUnavailable
    naming ``what``: a later pass may find the object quiet.
    """
    for _ in range(attempts):
        try:
            return await attempt()
        except KubernetesUnavailable as error:
            if error.status != 409:
                raise
    raise KubernetesUnavailable(f"{what}: kept conflicting with other writers")


@dataclass(frozen=True)
class ConfigMapData:
    name: str
    resource_version: str
    data: dict[str, str]
    binary_data: dict[str, bytes]
    labels: dict[str, str]
    owner_references: list[dict[str, Any]]
    uid: str = ""
    annotations: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ConfigMapMeta:
    """A ConfigMap's metadata only (from a metadata-only list: no data is transferred)."""

    name: str
    uid: str
    labels: dict[str, str]
    annotations: dict[str, str]
    namespace: str = ""


#: Ask the API server for metadata only: listing ConfigMaps that each hold ~1 MB would otherwise
#: transfer (and parse) every one of them just to read names and annotations.
_METADATA_LIST_ACCEPT = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"


def load_api_client(threads: int = KUBE_THREADS) -> client.ApiClient:
    """In-cluster credentials when running in a Pod, else ``$KUBECONFIG`` / ``~/.kube/config``;
    a connection for each of ``threads`` calling threads and the Leases'."""
    try:
        config.load_incluster_config()  # type: ignore[no-untyped-call]
    except config.ConfigException:
        config.load_kube_config()  # type: ignore[no-untyped-call]
    configuration = client.Configuration.get_default_copy()
    wanted = threads + LEASE_CONNECTIONS
    configuration.connection_pool_maxsize = max(configuration.connection_pool_maxsize, wanted)
    return client.ApiClient(configuration)


def _describe(error: ApiException) -> str:
    try:
        return str(json.loads(error.body or "{}").get("message") or error.reason)
    except (ValueError, TypeError):
        return str(error.reason)


class KubernetesApi:
    """Async facade over the synchronous client; one instance per operator process."""

    def __init__(self, api_client: client.ApiClient, threads: int = KUBE_THREADS) -> None:
        self._client = api_client
        self._pool = ThreadPoolExecutor(max_workers=max(KUBE_THREADS, threads), thread_name_prefix="kube")
        #: The client itself, for the modules with calls of their own (``clients.leases``).
        self.api_client = api_client
        self.core = CoreApi(api_client)
        self.custom = client.CustomObjectsApi(api_client)
        #: Our resources as the watch stream and our own writes last showed them (fed by the handlers).
        self.cache = ResourceCache()

    async def _call(self, what: str, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        try:
            call = functools.partial(contextvars.copy_context().run, func, *args, **kwargs)
            return await asyncio.get_running_loop().run_in_executor(self._pool, call)
        except ApiException as error:
            message = f"{what}: {error.status} {_describe(error)}"
            if error.status in (409, 429) or (error.status or 0) >= 500:
                raise KubernetesUnavailable(message, error.status) from error
            raise KubernetesRejected(message, error.status or 0) from error
        except (urllib3.exceptions.HTTPError, OSError) as error:
            raise KubernetesUnavailable(f"{what}: {type(error).__name__}") from error

    async def _write(self, what: str, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """A write: refused before it is sent once the running pass's Lease term has ended (``fencing``)."""
        fencing.check(what)
        return await self._call(what, func, *args, **kwargs)

    # --- ConfigMaps -------------------------------------------------------------------

    async def get_configmap(self, namespace: str, name: str) -> ConfigMapData | None:
        try:
            obj = await self._call(
                f"get ConfigMap {namespace}/{name}", self.core.read_namespaced_config_map, name, namespace
            )
        except KubernetesRejected as error:
            if error.status == 404:
                return None
            raise
        return self._configmap_data(name, obj)

    def _configmap_data(self, name: str, obj: Any) -> ConfigMapData:
        meta = obj.metadata or client.V1ObjectMeta()
        owners: list[dict[str, Any]] = [
            self._client.sanitize_for_serialization(r)  # type: ignore[no-untyped-call]
            for r in meta.owner_references or []
        ]
        return ConfigMapData(
            name=name,
            resource_version=meta.resource_version or "",
            data=dict(obj.data or {}),
            binary_data={k: base64.b64decode(v) for k, v in (obj.binary_data or {}).items()},
            labels=dict(meta.labels or {}),
            owner_references=owners,
            uid=meta.uid or "",
            annotations=dict(meta.annotations or {}),
        )

    async def write_configmap_key(
        self,
        namespace: str,
        name: str,
        key: str,
        value: str,
        *,
        labels: dict[str, str],
        owner: dict[str, Any],
    ) -> None:
        """Create the ConfigMap (with ``labels`` and ``owner``) or set one key in it.

        An existing ConfigMap keeps its other keys and its metadata untouched: it may be an
        application's, and an owner reference would let garbage collection delete it with the
        caller's resource (and the caller's labels would overwrite the app's ``managed-by``).
        """

        async def attempt() -> None:
            current = await self.get_configmap(namespace, name)
            if current is None:
                body = {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {
                        "name": name,
                        "namespace": namespace,
                        "labels": labels,
                        "ownerReferences": [owner],
                    },
                    "data": {key: value},
                }
                await self._write(
                    f"create ConfigMap {namespace}/{name}", self.core.create_namespaced_config_map, namespace, body
                )
                return
            patch = {"metadata": {"resourceVersion": current.resource_version}, "data": {key: value}}
            await self._write(
                f"patch ConfigMap {namespace}/{name}", self.core.patch_namespaced_config_map, name, namespace, patch
            )

        # Created or changed by someone else meanwhile: read again and write at the new version.
        await retry_on_conflict(f"patch ConfigMap {namespace}/{name}", attempt)

    async def create_configmap(self, namespace: str, body: dict[str, Any]) -> None:
        await self._write(
            f"create ConfigMap {namespace}/{body['metadata']['name']}",
            self.core.create_namespaced_config_map,
            namespace,
            body,
        )

    async def create_configmap_uid(self, namespace: str, body: dict[str, Any]) -> str:
        """Create a ConfigMap; returns its uid (for owner references to it). 409 if it exists."""
        created = await self._write(
            f"create ConfigMap {namespace}/{body['metadata']['name']}",
            self.core.create_namespaced_config_map,
            namespace,
            body,
        )
        return str(created.metadata.uid if created.metadata is not None else "")

    async def patch_configmap(
        self, namespace: str, name: str, patch: dict[str, Any], *, resource_version: str | None = None
    ) -> ConfigMapData:
        """JSON merge patch (RFC 7386: ``None`` deletes a key); returns the API server's answer.
        With ``resource_version``, a concurrent change fails (KubernetesUnavailable, 409)."""
        if resource_version is not None:
            patch = {**patch, "metadata": {**patch.get("metadata", {}), "resourceVersion": resource_version}}
        obj = await self._write(
            f"patch ConfigMap {namespace}/{name}",
            self.core.patch_namespaced_config_map,
            name,
            namespace,
            patch,
            _content_type="application/merge-patch+json",
        )
        return self._configmap_data(name, obj)

    async def list_configmap_metadata(self, namespace: str | None, label_selector: str) -> list[ConfigMapMeta]:
        """Metadata of the ConfigMaps matching a label selector, without their data.
        ``namespace=None``: in every namespace (needs a cluster-wide list permission)."""
        # _preload_content=False: the raw urllib3 response, not the (mistyped) V1ConfigMapList.
        options: dict[str, Any] = {
            "label_selector": label_selector,
            "_preload_content": False,
            "_headers": {"Accept": _METADATA_LIST_ACCEPT},
        }
        if namespace is None:
            response: Any = await self._call(
                "list ConfigMaps in all namespaces", self.core.list_config_map_for_all_namespaces, **options
            )
        else:
            response = await self._call(
                f"list ConfigMaps in {namespace}", self.core.list_namespaced_config_map, namespace, **options
            )
        try:
            items = json.loads(response.data).get("items") or []
        except (ValueError, AttributeError) as error:
            raise KubernetesUnavailable(f"list ConfigMaps in {namespace}: unreadable response") from error
        result: list[ConfigMapMeta] = []
        for item in items:
            meta = item.get("metadata") or {}
            if meta.get("name"):
                result.append(
                    ConfigMapMeta(
                        name=meta["name"],
                        uid=meta.get("uid", ""),
                        labels=dict(meta.get("labels") or {}),
                        annotations=dict(meta.get("annotations") or {}),
                        namespace=str(meta.get("namespace") or ""),
                    )
                )
        return result

    async def list_configmaps(self, namespace: str, label_selector: str) -> list[tuple[str, dict[str, str]]]:
        """(name, annotations) of the ConfigMaps matching a label selector."""
        result = await self._call(
            f"list ConfigMaps in {namespace}",
            self.core.list_namespaced_config_map,
            namespace,
            label_selector=label_selector,
        )
        return [
            (item.metadata.name, dict(item.metadata.annotations or {}))
            for item in result.items
            if item.metadata is not None and item.metadata.name is not None
        ]

    async def delete_configmap(self, namespace: str, name: str) -> None:
        try:
            await self._write(
                f"delete ConfigMap {namespace}/{name}", self.core.delete_namespaced_config_map, name, namespace
            )
        except KubernetesRejected as error:
            if error.status != 404:
                raise

    # --- Secrets ----------------------------------------------------------------------

    async def get_secret_data(
        self, namespace: str, name: str, keys: Iterable[str], *, sent_to: Iterable[Destination]
    ) -> dict[str, str]:
        """The wanted ``keys`` of a Secret whose owner lets them go to ``sent_to``, decoded as UTF-8.

        Only Secrets labelled ``connect-offsets.io/credentials=true`` are used, and only towards the
        hosts of their ``connect-offsets.io/allowed-hosts`` annotation when they have one
        (``credentials.check_secret_use``): the label and the annotation are how the Secret's owner
        says the operator may send it, and where (whoever names it in a resource may not be allowed
        to read it). Every caller says where the values will go, so no reader can skip the check.
        Only the keys asked for are decoded, so a Secret that also holds binary data (a Strimzi
        KafkaUser Secret has ``user.p12``) works. A wanted key the Secret lacks is absent from the
        result (the caller says which setting needed it).

        Raises KubernetesRejected(404) if the Secret is missing, CredentialsRefused (reason
        ``SecretNotOptedIn``, ``SecretHostNotAllowed`` or ``SecretKeyNotText``) otherwise.
        """
        obj = await self._call(f"get Secret {namespace}/{name}", self.core.read_namespaced_secret, name, namespace)
        meta = obj.metadata if obj.metadata is not None else client.V1ObjectMeta()
        check_secret_use(namespace, name, meta.labels or {}, meta.annotations or {}, sent_to)
        data = obj.data or {}
        values: dict[str, str] = {}
        for key in dict.fromkeys(keys):
            if key not in data:
                continue
            raw = base64.b64decode(data[key])
            try:
                values[key] = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                # Position only: the offending bytes are part of the secret.
                raise CredentialsRefused(
                    "SecretKeyNotText",
                    f"Secret {name} key {key} is not UTF-8 text (invalid byte at position {error.start}); "
                    "this setting needs text (e.g. PEM or a password), not binary data",
                ) from None
        return values

    # --- our resources ----------------------------------------------------------------

    async def get_resource(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            obj: Any = await self._call(
                f"get {plural} {namespace}/{name}",
                self.custom.get_namespaced_custom_object,
                API_GROUP,
                API_VERSION,
                namespace,
                plural,
                name,
            )
        except KubernetesRejected as error:
            if error.status == 404:
                return None
            raise
        resource: dict[str, Any] = obj
        return resource

    async def cached_resource(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        """The resource as the watch stream last showed it (a copy); a GET only when no event has
        brought it yet (the first pass may start before its event is handled)."""
        body = self.cache.get(plural, namespace, name)
        if body is not None:
            return body
        return await self.fresh_resource(plural, namespace, name)

    async def fresh_resource(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        """A GET, for where freshness decides something; the answer also refreshes the cache."""
        body = await self.get_resource(plural, namespace, name)
        self.cache.observe(plural, namespace, name, body, watched=False)
        return body

    async def list_resources(
        self, plural: str, kind: str, namespace: str | None, label_selector: str
    ) -> list[dict[str, Any]]:
        """Our custom resources of one plural matching a label selector (every namespace when
        ``namespace`` is None), sorted by namespace and name, each with its ``kind`` and ``apiVersion``."""
        where = "" if namespace is None else f" in {namespace}"
        if namespace is None:
            result: Any = await self._call(
                f"list {plural} -l {label_selector}",
                self.custom.list_cluster_custom_object,
                API_GROUP,
                API_VERSION,
                plural,
                label_selector=label_selector,
            )
        else:
            result = await self._call(
                f"list {plural} -l {label_selector}{where}",
                self.custom.list_namespaced_custom_object,
                API_GROUP,
                API_VERSION,
                namespace,
                plural,
                label_selector=label_selector,
            )
        items: list[dict[str, Any]] = result.get("items", [])
        for item in items:
            item.setdefault("kind", kind)
            item.setdefault("apiVersion", f"{API_GROUP}/{API_VERSION}")
        return sorted(items, key=lambda b: (b["metadata"]["namespace"], b["metadata"]["name"]))

    async def patch_annotations_at(
        self, plural: str, namespace: str, name: str, annotations: dict[str, str | None], resource_version: str
    ) -> dict[str, Any]:
        """Merge-patch annotations only if the resource is still at ``resource_version``: the API
        server answers 409 (``KubernetesUnavailable`` with ``status == 409``) when it changed since."""
        patch = {"metadata": {"resourceVersion": resource_version, "annotations": annotations}}
        result: Any = await self._write(
            f"annotate {plural} {namespace}/{name}",
            self.custom.patch_namespaced_custom_object,
            API_GROUP,
            API_VERSION,
            namespace,
            plural,
            name,
            patch,
            _content_type="application/merge-patch+json",
        )
        body: dict[str, Any] = result
        self.cache.observe(plural, namespace, name, body, watched=False)
        return body

    async def remove_annotations(
        self,
        plural: str,
        namespace: str,
        name: str,
        expected: dict[str, str],
        *,
        set_also: dict[str, str] | None = None,
    ) -> list[str]:
        """Remove, in one patch, the annotations that still have the values we acted on, and set
        ``set_also`` (the handled-request marker) in the same patch.

        Returns the keys removed; one the user changed or removed meanwhile stays (their new
        request). One patch, so a watcher never sees half of a request's annotations gone.

        Guarded by the annotations' values (a JSON patch ``test`` of each), not by the object's
        resourceVersion: another controller patching labels or other annotations all the time must
        not make the removal fail (issue 30 measured seven runs of one reset that way). A failed
        ``test`` (someone changed the value) makes the API server refuse the whole patch; the
        object is read again and the keys that still match are tried. 404: nothing to do.
        """
        what = ", ".join(expected) or ", ".join(set_also or {})

        def removal(body: dict[str, Any]) -> tuple[bytes, list[str]] | None:
            current = body["metadata"].get("annotations") or {}
            keys = [key for key, value in expected.items() if current.get(key) == value]
            marks = {k: v for k, v in (set_also or {}).items() if current.get(k) != v}
            if not keys and not marks:
                return None
            patch = annotations_patch({key: expected[key] for key in keys}, marks, has_annotations=bool(current))
            return patch, keys

        removed = await self._guarded_json_patch(
            f"remove annotations {what} from {plural} {namespace}/{name}", plural, namespace, name, removal
        )
        return removed or []

    async def remove_finalizers(self, plural: str, namespace: str, name: str, remove: set[str]) -> None:
        """Remove those of ``remove`` still there, each guarded (``finalizers_patch``); 404: done."""

        def removal(body: dict[str, Any]) -> tuple[bytes, None] | None:
            held = list(body["metadata"].get("finalizers") or [])
            return (finalizers_patch(held, remove), None) if remove.intersection(held) else None

        what = f"remove finalizers {', '.join(sorted(remove))} from {plural} {namespace}/{name}"
        await self._guarded_json_patch(what, plural, namespace, name, removal)

    async def replace_finalizers(self, plural: str, namespace: str, name: str, add: str, remove: set[str]) -> None:
        """Put ``add`` on a live resource and take ``remove`` off, in one JSON patch guarded by the
        resourceVersion it was built from (a ``test``: a finalizer list cannot be tested for what
        it lacks). Nothing on a resource being deleted: a finalizer cannot be added then."""

        def change(body: dict[str, Any]) -> tuple[bytes, None] | None:
            metadata = body["metadata"]
            held = list(metadata.get("finalizers") or [])
            wanted = [f for f in held if f not in remove]
            if add not in wanted:
                wanted.append(add)
            if metadata.get("deletionTimestamp") or wanted == held:
                return None
            ops = [
                {"op": "test", "path": "/metadata/resourceVersion", "value": metadata.get("resourceVersion")},
                {"op": "add", "path": "/metadata/finalizers", "value": wanted},
            ]
            return json.dumps(ops).encode(), None

        await self._guarded_json_patch(
            f"set finalizer {add} on {plural} {namespace}/{name}", plural, namespace, name, change
        )

    async def _guarded_json_patch(
        self,
        what: str,
        plural: str,
        namespace: str,
        name: str,
        build: Callable[[dict[str, Any]], tuple[bytes, T] | None],
    ) -> T | None:
        """Send the JSON patch ``build`` makes from the resource; its ``test`` operations guard it.

        The first read is the cache's; a failed ``test`` (422: what the patch was built from
        changed since) reads the resource fresh and builds again. ``build`` answers None when
        nothing is left to do; a missing resource (None read, or 404) is done as well. Returns
        what ``build`` returned beside the patch that was applied, or None if none was.
        """
        path = f"/apis/{API_GROUP}/{API_VERSION}/namespaces/{namespace}/{plural}/{name}"
        for attempt in range(CONFLICT_ATTEMPTS):
            body = await (self.cached_resource if attempt == 0 else self.fresh_resource)(plural, namespace, name)
            built = build(body) if body is not None else None
            if built is None:
                return None
            patch, result = built
            try:
                answer = await self._write(what, send_json_patch, self._client, path, patch)
            except KubernetesRejected as error:
                if error.status == 404:
                    return None
                if error.status == 422:
                    continue
                raise
            self.cache.observe(plural, namespace, name, answer, watched=False)
            return result
        raise KubernetesUnavailable(f"{what}: what the patch tests kept changing")

    async def patch_status(
        self, plural: str, namespace: str, name: str, status: JsonObject, *, resource_version: str | None = None
    ) -> JsonObject | None:
        """Merge-patch the status subresource; the answer (the whole resource, returned) refreshes the
        cache, so the next pass compares against what it wrote even before the watch event arrives.
        ``resource_version``: written only if the resource is still at that version (else 409, a
        ``KubernetesUnavailable`` with ``status == 409``): a fenced pass's writes (``fencing``)."""
        body: JsonObject = {"status": status}
        if resource_version is not None:
            body["metadata"] = {"resourceVersion": resource_version}
        result: Any = await self._write(
            f"patch status of {plural} {namespace}/{name}",
            self.custom.patch_namespaced_custom_object_status,
            API_GROUP,
            API_VERSION,
            namespace,
            plural,
            name,
            body,
        )
        if not isinstance(result, dict):
            return None
        self.cache.observe(plural, namespace, name, result, watched=False)
        return result

    async def post_event(
        self,
        *,
        involved: dict[str, Any],
        event_type: str,
        reason: str,
        message: str,
    ) -> None:
        """Post a core/v1 Event. Best effort: an Event that cannot be written is logged, not raised."""
        meta = involved["metadata"]
        body = event_body(involved, event_type, reason, message[:MAX_QUOTED_TEXT], datetime.now(UTC))
        try:
            await self._write(
                f"create Event for {meta['name']}", self.core.create_namespaced_event, meta["namespace"], body
            )
        except KubernetesError as error:
            log.warning("could not post Event %s: %s", reason, error)
