"""The Kubernetes side: credentials as kubectl finds them, kubectl's connection flags, and API errors
as one line for the user.

kubectl's ``--request-timeout`` and ``--as``/``--as-group`` map onto the kubernetes client as far as
it allows: the timeout becomes the default ``_request_timeout`` of every call (urllib3's timeout
for one attempt; the client's few retries of a refused connection come on top), impersonation the
``Impersonate-User`` / ``Impersonate-Group`` headers. One ``--as-group`` only: the client sends each
header once. ``as``/``as-groups`` written in the kubeconfig's user entry are not read (kubectl reads
them; the Python client does not).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import os
import socket
import ssl
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from connect_offsets.clients.kubernetes import KubernetesApi, KubernetesError, KubernetesRejected, KubernetesUnavailable
from connect_offsets.errors import ConnectOffsetsError
from connect_offsets.tools.kubectl.common import EXIT_KUBE, Kind, PluginError
from connect_offsets.vocabulary import API_GROUP, API_VERSION


@dataclass(frozen=True)
class Connection:
    """How to reach the API server: kubectl's global flags."""

    kubeconfig: str | None = None
    context: str | None = None
    #: Seconds; 0 waits as long as the server and the OS let it (kubectl's default, ``--request-timeout 0``).
    request_timeout: float = 0.0
    as_user: str | None = None
    as_group: str | None = None


def is_conflict(error: KubernetesError) -> bool:
    return error.status == 409


def _causes(error: BaseException) -> Iterator[BaseException]:
    """The error and what caused it: ``__cause__``, ``__context__`` and urllib3's ``reason``."""
    seen: set[int] = set()
    todo: list[BaseException] = [error]
    while todo:
        current = todo.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        for nested in (current.__cause__, current.__context__, getattr(current, "reason", None)):
            if isinstance(nested, BaseException):
                todo.append(nested)


def connection_cause(error: BaseException) -> str | None:
    """Why the API server could not be reached, in a few words; None if it answered (an HTTP error).

    The whole chain is searched, most specific cause first: urllib3 wraps a refused connection
    in a ``NewConnectionError``, which is also a ``ConnectTimeoutError``.
    """
    import urllib3

    chain = list(_causes(error))

    def found(*types: type[BaseException]) -> BaseException | None:
        return next((cause for cause in chain if isinstance(cause, types)), None)

    if found(ConnectionRefusedError):
        return "connection refused"
    if found(socket.gaierror, urllib3.exceptions.NameResolutionError):
        return "the host name does not resolve"
    tls = found(ssl.SSLError, urllib3.exceptions.SSLError)
    if tls is not None:
        return f"TLS failed: {getattr(tls, 'reason', None) or tls}"
    if found(TimeoutError, urllib3.exceptions.TimeoutError):
        return "timed out (see --request-timeout)"
    if found(ConnectionResetError, urllib3.exceptions.ProtocolError):
        return "the connection was closed by the server"
    last = next((c for c in reversed(chain) if isinstance(c, OSError | urllib3.exceptions.HTTPError)), None)
    return None if last is None else str(last) or type(last).__name__


def kube_error(error: KubernetesError, host: str = "") -> PluginError:
    """One line for the user: the server and the cause when it could not be reached, else the API's answer."""
    if error.status is None:
        cause = connection_cause(error)
        if cause is not None:
            where = f" {host}" if host else ""
            return PluginError(f"cannot reach the API server{where}: {cause}", EXIT_KUBE, str(error))
    text = str(error)
    hint = ""
    if error.status == 403:
        hint = " (your Kubernetes user lacks a permission: see the README section 'kubectl plugin' for the RBAC rules)"
    elif error.status == 401:
        hint = " (the credentials in your kubeconfig were refused)"
    return PluginError(f"Kubernetes API: {text}{hint}", EXIT_KUBE)


def api_host(kube: KubernetesApi) -> str:
    """The API server's address, for messages."""
    return str(kube.core.api_client.configuration.host or "")


def configure(api_client: Any, connection: Connection) -> None:
    """Apply ``--request-timeout`` and ``--as``/``--as-group`` to a kubernetes ``ApiClient``."""
    if connection.as_user:
        api_client.set_default_header("Impersonate-User", connection.as_user)
    if connection.as_group:
        api_client.set_default_header("Impersonate-Group", connection.as_group)
    if connection.request_timeout > 0:
        rest = api_client.rest_client
        send = rest.request
        default = connection.request_timeout

        def request(*args: Any, **kwargs: Any) -> Any:
            if not kwargs.get("_request_timeout"):
                kwargs["_request_timeout"] = default
            return send(*args, **kwargs)

        rest.request = request


def load_kube(connection: Connection) -> tuple[KubernetesApi, str]:
    """Credentials as kubectl finds them; returns the API and the context's default namespace."""
    import logging

    import urllib3
    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    kubeconfig, context = connection.kubeconfig, connection.context
    in_cluster = (
        kubeconfig is None
        and context is None
        and not os.environ.get("KUBECONFIG")
        and not os.path.exists(os.path.expanduser("~/.kube/config"))
        and os.environ.get("KUBERNETES_SERVICE_HOST")
    )
    try:
        if in_cluster:
            config.load_incluster_config()  # type: ignore[no-untyped-call]
            api_client = client.ApiClient()
            namespace_file = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
            namespace = Path(namespace_file).read_text().strip() if os.path.exists(namespace_file) else "default"
        else:
            api_client = config.new_client_from_config(config_file=kubeconfig, context=context)  # type: ignore[no-untyped-call]
            contexts, active = config.list_kube_config_contexts(config_file=kubeconfig)  # type: ignore[no-untyped-call]
            chosen = next((c for c in contexts if c.get("name") == context), active) if context else active
            namespace = ((chosen or {}).get("context") or {}).get("namespace") or "default"
    except (ConfigException, OSError, TypeError, ValueError) as error:
        where = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
        raise PluginError(f"cannot load the kubeconfig ({where}): {error}", EXIT_KUBE) from error
    if not api_client.configuration.verify_ssl:
        # The kubeconfig asked for insecure-skip-tls-verify; kubectl does not warn on every call either.
        urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
    # urllib3 logs each retry of an unreachable server as a warning; the plugin reports it once, as one line.
    logging.getLogger("urllib3").setLevel(logging.ERROR)
    configure(api_client, connection)
    return KubernetesApi(api_client), namespace


#: How long one watch request may stay open before the API server ends it (it is then renewed).
WATCH_SECONDS = 290


class WatchFailed(ConnectOffsetsError):
    """The watch could not be (or stay) opened: e.g. RBAC without the ``watch`` verb. Callers poll instead."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


class ResourceWatch:
    """Changes of one custom resource from a resourceVersion on: ``(type, body)`` with type ADDED,
    MODIFIED or DELETED.

    Why a thread: the kubernetes client is synchronous and a watch blocks on its socket; one daemon
    thread per watched resource hands each event to the event loop, and ``stop`` shuts the socket
    (a daemon thread never holds up the exit). A watch the server ended (``WATCH_SECONDS``) is
    renewed from the last resourceVersion seen; one too old to resume (410 Gone) starts again from a
    fresh GET, whose body is delivered as a MODIFIED event so nothing is missed.
    """

    def __init__(
        self,
        kube: KubernetesApi,
        plural: str,
        namespace: str,
        name: str,
        resource_version: str,
        *,
        connect_timeout: float = 0.0,
    ) -> None:
        self._kube = kube
        self._where = (plural, namespace, name)
        self._resource_version = resource_version
        self._connect_timeout = connect_timeout or None
        self._queue: asyncio.Queue[tuple[str, dict[str, Any]] | BaseException] = asyncio.Queue()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped = threading.Event()
        self._watch: Any = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._thread = threading.Thread(target=self._read, name=f"watch {'/'.join(self._where)}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        if self._watch is not None:
            self._watch.stop()

    async def next(self, timeout: float) -> tuple[str, dict[str, Any]] | None:
        """The next event, or None after ``timeout`` seconds without one; raises WatchFailed."""
        try:
            item = await asyncio.wait_for(self._queue.get(), timeout)
        except TimeoutError:
            return None
        if isinstance(item, BaseException):
            raise WatchFailed(item)
        return item

    def _emit(self, item: tuple[str, dict[str, Any]] | BaseException) -> None:
        if self._stopped.is_set() or self._loop is None:
            return
        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody is waiting any more
            self._loop.call_soon_threadsafe(self._queue.put_nowait, item)

    def _read(self) -> None:
        from kubernetes import watch
        from kubernetes.client.exceptions import ApiException

        plural, namespace, name = self._where
        custom = self._kube.custom
        resource_version = self._resource_version
        while not self._stopped.is_set():
            self._watch = watch.Watch()  # type: ignore[no-untyped-call]
            try:
                for event in self._watch.stream(
                    custom.list_namespaced_custom_object,
                    API_GROUP,
                    API_VERSION,
                    namespace,
                    plural,
                    field_selector=f"metadata.name={name}",
                    resource_version=resource_version,
                    allow_watch_bookmarks=True,
                    timeout_seconds=WATCH_SECONDS,
                    deserialize=False,
                    # the client accepts no None in a (connect, read) pair: without --request-timeout, one total
                    _request_timeout=(
                        (self._connect_timeout, WATCH_SECONDS + 30) if self._connect_timeout else WATCH_SECONDS + 30
                    ),
                ):
                    body = event.get("object") or {}
                    resource_version = (body.get("metadata") or {}).get("resourceVersion") or resource_version
                    if event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                        self._emit((str(event["type"]), body))
            except ApiException as error:
                if error.status != 410:
                    self._emit(error)
                    return
                try:
                    fresh: Any = custom.get_namespaced_custom_object(API_GROUP, API_VERSION, namespace, plural, name)
                except ApiException as reread:
                    self._emit(("DELETED", {}) if reread.status == 404 else reread)
                    return
                except Exception as reread:  # the connection is gone: the caller falls back to GETs
                    self._emit(reread)
                    return
                resource_version = fresh["metadata"]["resourceVersion"]
                self._emit(("MODIFIED", fresh))
            except Exception as error:  # a lost connection, or stop() shutting the socket
                self._emit(error)
                return


# --- writes, and --dry-run=client|server ------------------------------------------------------------


async def call(what: str, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """A call the operator's client does not make (a dry-run write, a create or delete of a custom
    resource), with its errors as the client's: KubernetesUnavailable (409, 429, 5xx, no answer) or
    KubernetesRejected."""
    import urllib3
    from kubernetes.client.exceptions import ApiException

    try:
        return await asyncio.to_thread(func, *args, **kwargs)
    except ApiException as error:
        message = f"{what}: {error.status} {error.reason}"
        if error.status in (409, 429) or (error.status or 0) >= 500:
            raise KubernetesUnavailable(message, error.status) from error
        raise KubernetesRejected(message, error.status or 0) from error
    except (urllib3.exceptions.HTTPError, OSError) as error:
        raise KubernetesUnavailable(f"{what}: {type(error).__name__}") from error


#: The query parameter of a server-side dry run (the API server runs admission, validation and RBAC
#: and keeps nothing; https://kubernetes.io/docs/reference/using-api/api-concepts/#dry-run).
DRY_RUN_ALL = "All"


class Writes:
    """Every write the plugin makes to the cluster, under kubectl's ``--dry-run`` strategies.

    ``none``: made. ``server``: sent with ``dryRun=All``, so the API server answers as it would
    (admission, schema validation, RBAC) and keeps nothing. ``client``: nothing is sent; each write is
    only described. Reads are made in every strategy (as kubectl's client dry run reads the object
    it would patch). ``made`` lists each write, for the output of a dry run: ``verb`` (create, patch,
    annotate), ``kind``, ``namespace``, ``name`` and ``body`` (what is sent; a server dry run's create:
    the object as the API server answered).
    """

    def __init__(self, kube: KubernetesApi, strategy: str = "none") -> None:
        if strategy not in ("none", "client", "server"):
            raise ValueError(f"dry-run strategy {strategy!r}")
        self.kube = kube
        self.strategy = strategy
        self.made: list[dict[str, Any]] = []

    @property
    def dry(self) -> bool:
        return self.strategy != "none"

    def _record(self, verb: str, kind: str, namespace: str, name: str, body: Any) -> None:
        self.made.append({"verb": verb, "kind": kind, "namespace": namespace, "name": name, "body": body})

    async def configmap_key(
        self, namespace: str, name: str, key: str, value: str, *, labels: dict[str, str], owner: dict[str, Any]
    ) -> str:
        """Create the ConfigMap or set one key in it (``KubernetesApi.write_configmap_key``); its
        resourceVersion after the write ("" in a dry run: nothing was kept)."""
        if not self.dry:
            await self.kube.write_configmap_key(namespace, name, key, value, labels=labels, owner=owner)
            written = await self.kube.get_configmap(namespace, name)
            return written.resource_version if written else ""
        current = await self.kube.get_configmap(namespace, name)
        if current is None:
            body: dict[str, Any] = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": namespace, "labels": labels, "ownerReferences": [owner]},
                "data": {key: value},
            }
            if self.strategy == "server":
                await call(
                    f"create ConfigMap {namespace}/{name} (server dry run)",
                    self.kube.core.create_namespaced_config_map,
                    namespace,
                    body,
                    query=[("dryRun", DRY_RUN_ALL)],
                )
            self._record("create", "ConfigMap", namespace, name, body)
            return ""
        patch = {"metadata": {"resourceVersion": current.resource_version}, "data": {key: value}}
        if self.strategy == "server":
            await call(
                f"patch ConfigMap {namespace}/{name} (server dry run)",
                self.kube.core.patch_namespaced_config_map,
                name,
                namespace,
                patch,
                query=[("dryRun", DRY_RUN_ALL)],
            )
        self._record("patch", "ConfigMap", namespace, name, patch)
        return ""

    async def annotate(
        self,
        kind: Kind,
        namespace: str,
        name: str,
        annotations: dict[str, str | None],
        resource_version: str,
        body: dict[str, Any],
    ) -> dict[str, Any]:
        """Merge-patch annotations at ``resource_version`` (409 when the resource changed since);
        the resource after the patch (a dry run: as it would be, from ``body`` or the server)."""
        if not self.dry:
            return await self.kube.patch_annotations_at(kind.plural, namespace, name, annotations, resource_version)
        patch = {"metadata": {"resourceVersion": resource_version, "annotations": annotations}}
        self._record("annotate", kind.kind, namespace, name, patch)
        if self.strategy == "server":
            answer: dict[str, Any] = await call(
                f"annotate {kind.plural} {namespace}/{name} (server dry run)",
                self.kube.custom.patch_namespaced_custom_object,
                API_GROUP,
                API_VERSION,
                namespace,
                kind.plural,
                name,
                patch,
                dry_run=DRY_RUN_ALL,
                _content_type="application/merge-patch+json",
            )
            return answer
        after = copy.deepcopy(body)
        current = after["metadata"].setdefault("annotations", {})
        for key, value in annotations.items():
            if value is None:
                current.pop(key, None)
            else:
                current[key] = value
        return after

    async def create_resource(self, kind: Kind, namespace: str, manifest: dict[str, Any]) -> dict[str, Any]:
        """Create one of our custom resources; the object as created (a dry run: as it would be)."""
        name = str(manifest["metadata"]["name"])
        what = f"create {kind.kind} {namespace}/{name}"
        if self.strategy == "client":
            self._record("create", kind.kind, namespace, name, manifest)
            return manifest
        options: dict[str, Any] = {"dry_run": DRY_RUN_ALL} if self.dry else {}
        created: dict[str, Any] = await call(
            what + (" (server dry run)" if self.dry else ""),
            self.kube.custom.create_namespaced_custom_object,
            API_GROUP,
            API_VERSION,
            namespace,
            kind.plural,
            manifest,
            **options,
        )
        if self.dry:
            self._record("create", kind.kind, namespace, name, created)
        return created
