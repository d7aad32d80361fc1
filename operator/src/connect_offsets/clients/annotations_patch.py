"""JSON patches (RFC 6902) of a resource's annotations, guarded by their values, spelled byte for
byte the way the API server compares them.

Why a module of its own: the request removal is the write that decides whether a request runs
once (issue 30). Guarded by the object's resourceVersion it failed whenever another controller
patched labels at the same time, so it is guarded by the values it removes instead — and the API
server's ``test`` operation compares JSON bytes, which Python and Go spell differently.
"""

from __future__ import annotations

import json
from typing import Any

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

__all__ = ["PATCH_TIMEOUT_S", "annotations_patch", "finalizers_patch", "go_json_string", "send_json_patch"]

#: A value-guarded annotation patch waits this long for the API server (the client's other calls
#: use kopf's and the kubernetes client's defaults; this one is sent by hand).
PATCH_TIMEOUT_S = 30.0


#: Characters Go's encoding/json escapes as \\uXXXX and Python's json leaves as they are.
_GO_ESCAPED = "<>&\u2028\u2029"


def go_json_string(value: str) -> str:
    """``value`` as a JSON string encoded the way the API server's Go ``encoding/json`` does.

    Why: the API server applies a JSON patch to the object's JSON and its ``test`` operation
    compares bytes, so a test value must be spelled exactly as the stored one: non-ASCII as UTF-8
    (Python's default escapes it), and ``<``, ``>``, ``&``, U+2028, U+2029 escaped (Python leaves
    them) — e.g. ``east->west.MirrorSourceConnector`` is stored as ``east-\\u003ewest...``.
    """
    text = json.dumps(value, ensure_ascii=False)
    for char in _GO_ESCAPED:
        text = text.replace(char, f"\\u{ord(char):04x}")
    return text


def _pointer(key: str) -> str:
    """An annotation key as a JSON pointer segment under /metadata/annotations (RFC 6901)."""
    return "/metadata/annotations/" + key.replace("~", "~0").replace("/", "~1")


def finalizers_patch(finalizers: list[str], remove: set[str]) -> bytes:
    """A JSON patch removing each of ``remove`` from ``finalizers`` (the list as read), each by its
    index behind a ``test`` of its value: the API server refuses the whole patch (422) if the list
    changed since it was read, and nothing else is touched. Indices from the last, so each stays valid."""
    ops: list[str] = []
    for index in reversed([i for i, name in enumerate(finalizers) if name in remove]):
        path = json.dumps(f"/metadata/finalizers/{index}")
        ops.append(f'{{"op":"test","path":{path},"value":{go_json_string(finalizers[index])}}}')
        ops.append(f'{{"op":"remove","path":{path}}}')
    return ("[" + ",".join(ops) + "]").encode()


def annotations_patch(remove: dict[str, str], add: dict[str, str], *, has_annotations: bool) -> bytes:
    """A JSON patch (RFC 6902) that removes each of ``remove`` only if it still has its value (a
    ``test`` before each ``remove``), and sets each of ``add``; the bytes to send."""
    ops: list[str] = []
    if not has_annotations and add:
        ops.append('{"op":"add","path":"/metadata/annotations","value":{}}')
    for key, value in remove.items():
        path = json.dumps(_pointer(key))
        ops.append(f'{{"op":"test","path":{path},"value":{go_json_string(value)}}}')
        ops.append(f'{{"op":"remove","path":{path}}}')
    for key, value in add.items():
        ops.append(f'{{"op":"add","path":{json.dumps(_pointer(key))},"value":{go_json_string(value)}}}')
    return ("[" + ",".join(ops) + "]").encode()


def send_json_patch(api_client: client.ApiClient, path: str, patch: bytes) -> dict[str, Any]:
    """PATCH the object at ``path`` with a JSON patch sent byte for byte; its answer (blocking: the
    caller runs it in a thread). An error answer raises ``ApiException`` as the client's own calls do.

    Why not ``patch_namespaced_custom_object``: the client serialises the body itself with
    ``json.dumps``, whose escaping differs from Go's (``go_json_string``).
    """
    _, url, headers, _, _ = api_client.param_serialize(
        "PATCH",
        path,
        header_params={"Content-Type": "application/json-patch+json", "Accept": "application/json"},
        auth_settings=["BearerToken"],
    )
    response = api_client.rest_client.pool_manager.request(
        "PATCH", url, body=patch, headers=headers, timeout=urllib3.Timeout(total=PATCH_TIMEOUT_S)
    )
    if response.status >= 400:
        error = ApiException(status=response.status, reason=response.reason)
        error.body = response.data.decode(errors="replace")
        raise error
    answer: dict[str, Any] = json.loads(response.data)
    return answer
