"""The few core/v1 calls of the operator and its tools: ConfigMaps, Secrets, Events.

Why not ``kubernetes.client.CoreV1Api``: its module is 4.4 MB of generated code for every core/v1
endpoint, and importing it costs ~0.55 s of CPU, paid again by every operator start and by every
CLI and plugin command before it does anything (issue 32 measured ~150 such processes per
``make test``); each of its methods also validates its arguments with pydantic on every call.
:class:`CoreApi` keeps CoreV1Api's method names, signatures and results for the calls made here,
so callers and test fakes are unchanged, and sends them through the same ``ApiClient``: the same
authentication, TLS, REST client (which also turns a JSON patch of an object into a strategic
merge patch), error (``ApiException``) and deserialization into the same V1 models.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from connect_offsets.vocabulary import API_GROUP, API_VERSION

__all__ = ["CoreApi", "event_body"]

#: The Accept header CoreV1Api sends (``select_header_accept`` picks the JSON one of its list).
_ACCEPT = "application/json"
#: CoreV1Api's default Content-Type of a PATCH (the first JSON type of its list); the REST client
#: sends a body that is not a list as a strategic merge patch instead.
_PATCH_CONTENT_TYPE = "application/json-patch+json"

_CONFIGMAPS = "/api/v1/namespaces/{namespace}/configmaps"
_CONFIGMAP = "/api/v1/namespaces/{namespace}/configmaps/{name}"


class CoreApi:
    """CoreV1Api's ConfigMap, Secret and Event calls used by this package (same names and
    arguments; ``_content_type``, ``_headers``, ``_preload_content`` and ``_request_timeout`` as
    there)."""

    def __init__(self, api_client: client.ApiClient) -> None:
        # Any, as CoreV1Api's: the kubernetes client has no type hints (its callers close it, read
        # its configuration, and tests reach its REST client).
        self.api_client: Any = api_client

    # --- ConfigMaps ---------------------------------------------------------------------

    def read_namespaced_config_map(self, name: str, namespace: str, **options: Any) -> Any:
        return self._call("GET", _CONFIGMAP, {"namespace": namespace, "name": name}, "V1ConfigMap", **options)

    def create_namespaced_config_map(self, namespace: str, body: Any, **options: Any) -> Any:
        path = {"namespace": namespace}
        return self._call("POST", _CONFIGMAPS, path, "V1ConfigMap", body=body, **options)

    def patch_namespaced_config_map(self, name: str, namespace: str, body: Any, **options: Any) -> Any:
        options.setdefault("_content_type", _PATCH_CONTENT_TYPE)
        path = {"namespace": namespace, "name": name}
        return self._call("PATCH", _CONFIGMAP, path, "V1ConfigMap", body=body, **options)

    def delete_namespaced_config_map(self, name: str, namespace: str, **options: Any) -> Any:
        return self._call("DELETE", _CONFIGMAP, {"namespace": namespace, "name": name}, "V1Status", **options)

    def list_namespaced_config_map(self, namespace: str, label_selector: str | None = None, **options: Any) -> Any:
        query = [("labelSelector", label_selector)] if label_selector is not None else []
        return self._call("GET", _CONFIGMAPS, {"namespace": namespace}, "V1ConfigMapList", query=query, **options)

    def list_config_map_for_all_namespaces(self, label_selector: str | None = None, **options: Any) -> Any:
        query = [("labelSelector", label_selector)] if label_selector is not None else []
        return self._call("GET", "/api/v1/configmaps", {}, "V1ConfigMapList", query=query, **options)

    # --- Secrets and Events -------------------------------------------------------------

    def read_namespaced_secret(self, name: str, namespace: str, **options: Any) -> Any:
        path = {"namespace": namespace, "name": name}
        return self._call("GET", "/api/v1/namespaces/{namespace}/secrets/{name}", path, "V1Secret", **options)

    def create_namespaced_event(self, namespace: str, body: Any, **options: Any) -> Any:
        path = {"namespace": namespace}
        return self._call("POST", "/api/v1/namespaces/{namespace}/events", path, "CoreV1Event", body=body, **options)

    # --- the request --------------------------------------------------------------------

    def _call(
        self,
        method: str,
        resource_path: str,
        path_params: dict[str, str],
        response_type: str,
        *,
        query: list[tuple[str, str]] | None = None,
        body: Any = None,
        _content_type: str | None = None,
        _headers: dict[str, str] | None = None,
        _preload_content: bool = True,
        _request_timeout: Any = None,
    ) -> Any:
        """The request as CoreV1Api builds it; its result as CoreV1Api returns it (the model, or
        with ``_preload_content=False`` the raw urllib3 response of a 2xx answer)."""
        headers = dict(_headers or {})
        headers.setdefault("Accept", _ACCEPT)
        if _content_type is not None:  # else the REST client sends a body as application/json
            headers["Content-Type"] = _content_type
        request = self.api_client.param_serialize(
            method=method,
            resource_path=resource_path,
            path_params=path_params,
            query_params=query or [],
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        response = self.api_client.call_api(*request, _request_timeout=_request_timeout)
        if not _preload_content:
            if not 200 <= response.status <= 299:
                response.read()
                raise ApiException.from_response(http_resp=response, body=None, data=None)
            return response.response
        response.read()
        # Raises ApiException for an answer other than 2xx, with the body the server sent.
        types = {"200": response_type, "201": response_type, "202": response_type}
        return self.api_client.response_deserialize(response, types).data


def event_body(involved: dict[str, Any], event_type: str, reason: str, message: str, now: datetime) -> dict[str, Any]:
    """A core/v1 Event about ``involved`` (a custom resource's body), from this operator."""
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    meta = involved["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
        "involvedObject": {
            "apiVersion": involved.get("apiVersion", f"{API_GROUP}/{API_VERSION}"),
            "kind": involved.get("kind", ""),
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta.get("uid", ""),
        },
        "type": event_type,
        "reason": reason,
        "message": message,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
        "source": {"component": "connect-offsets-operator"},
        "reportingComponent": "connect-offsets-operator",
    }
