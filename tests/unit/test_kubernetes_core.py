"""CoreApi (clients/kubernetes_core.py) against the kubernetes client's own CoreV1Api.

Why: CoreApi replaces CoreV1Api for the operator's few core/v1 calls (CoreV1Api's module costs
~0.55 s of CPU to import, in every process). The promise is "the same requests, the same results",
so every method is driven through both, on one ApiClient whose connection pool is replaced by a
recorder, and the requests (method, URL, headers, body, timeout) and results are compared.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from connect_offsets.clients.kubernetes_core import CoreApi

pytestmark = pytest.mark.unit

CONFIGMAP = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "cm", "namespace": "ns", "uid": "u-1", "resourceVersion": "7", "labels": {"a": "b"}},
    "data": {"offsets.json": "{}"},
}
LISTED = {"apiVersion": "v1", "kind": "ConfigMapList", "metadata": {"resourceVersion": "9"}, "items": [CONFIGMAP]}
SECRET = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "ns"}, "data": {"k": "dg=="}}
STATUS = {"apiVersion": "v1", "kind": "Status", "status": "Success"}
EVENT = {
    "apiVersion": "v1",
    "kind": "Event",
    "metadata": {"name": "e", "namespace": "ns"},
    "involvedObject": {"kind": "KafkaConnector", "name": "c", "namespace": "ns"},
    "reason": "OffsetsDryRun",
}


class Recorder:
    """Stands in for urllib3's pool manager: records each request, answers ``status``/``body``."""

    def __init__(self, status: int, body: Any) -> None:
        self.status, self.body = status, body
        self.sent: list[dict[str, Any]] = []

    def request(self, method: str, url: str, **options: Any) -> urllib3.HTTPResponse:
        self.sent.append({"method": method, "url": url, **options})
        return urllib3.HTTPResponse(
            body=json.dumps(self.body).encode(),
            status=self.status,
            headers={"content-type": "application/json"},
            preload_content=False,
        )


def api_client(recorder: Recorder) -> client.ApiClient:
    configuration = client.Configuration()
    configuration.host = "https://kube.example:6443"
    configuration.api_key = {"BearerToken": "the-token"}
    configuration.api_key_prefix = {"BearerToken": "Bearer"}
    api = client.ApiClient(configuration)
    api.rest_client.pool_manager = recorder
    return api


# (method name, positional arguments, keyword arguments, answer)
CALLS: list[tuple[str, tuple[Any, ...], dict[str, Any], Any]] = [
    ("read_namespaced_config_map", ("cm", "ns"), {}, CONFIGMAP),
    ("read_namespaced_config_map", ("cm", "ns"), {"_request_timeout": (1, 30)}, CONFIGMAP),
    ("create_namespaced_config_map", ("ns", CONFIGMAP), {}, CONFIGMAP),
    ("patch_namespaced_config_map", ("cm", "ns", {"data": {"k": None}}), {}, CONFIGMAP),
    (
        "patch_namespaced_config_map",
        ("cm", "ns", {"data": {"k": "v"}}),
        {"_content_type": "application/merge-patch+json"},
        CONFIGMAP,
    ),
    ("patch_namespaced_config_map", ("cm", "ns", [{"op": "remove", "path": "/data/k"}]), {}, CONFIGMAP),
    ("delete_namespaced_config_map", ("cm", "ns"), {}, STATUS),
    ("list_namespaced_config_map", ("ns",), {"label_selector": "a=b,c!=d"}, LISTED),
    ("list_namespaced_config_map", ("ns",), {}, LISTED),
    ("list_config_map_for_all_namespaces", (), {"label_selector": "a=b"}, LISTED),
    ("read_namespaced_secret", ("s", "ns"), {}, SECRET),
    ("create_namespaced_event", ("ns", EVENT), {}, EVENT),
]


def drive(api_class: Any, name: str, args: tuple[Any, ...], options: dict[str, Any], answer: Any) -> tuple[Any, Any]:
    recorder = Recorder(200, answer)
    result = getattr(api_class(api_client(recorder)), name)(*args, **options)
    (sent,) = recorder.sent
    # The same JSON (CoreV1Api re-serializes a body through its model: other key order), the same
    # timeout (urllib3's Timeout has no equality of its own).
    sent["body"] = json.loads(sent["body"]) if sent.get("body") else None
    sent["timeout"] = repr(sent["timeout"])
    return sent, client.ApiClient().sanitize_for_serialization(result)


@pytest.mark.parametrize(("name", "args", "options", "answer"), CALLS, ids=[f"{c[0]}-{i}" for i, c in enumerate(CALLS)])
def test_each_call_sends_and_returns_what_core_v1_api_does(
    name: str, args: tuple[Any, ...], options: dict[str, Any], answer: Any
) -> None:
    ours = drive(CoreApi, name, args, options, answer)
    theirs = drive(client.CoreV1Api, name, args, options, answer)
    assert ours == theirs
    sent, result = ours
    assert sent["headers"]["authorization"] == "Bearer the-token"
    assert result == answer  # the same V1 model, back to the JSON it was read from


def test_a_metadata_only_list_returns_the_raw_response_as_core_v1_api_does() -> None:
    options = {
        "label_selector": "a=b",
        "_preload_content": False,
        "_headers": {"Accept": "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"},
    }
    for api_class in (CoreApi, client.CoreV1Api):
        recorder = Recorder(200, LISTED)
        raw = api_class(api_client(recorder)).list_namespaced_config_map("ns", **options)
        assert json.loads(raw.data) == LISTED
        assert recorder.sent[0]["headers"]["Accept"] == options["_headers"]["Accept"]  # type: ignore[index]


@pytest.mark.parametrize("preload", [True, False])
def test_an_error_answer_raises_the_same_api_exception(preload: bool) -> None:
    refusal = {"kind": "Status", "status": "Failure", "message": 'configmaps "cm" is forbidden', "code": 403}
    raised = []
    for api_class in (CoreApi, client.CoreV1Api):
        with pytest.raises(ApiException) as caught:
            api_class(api_client(Recorder(403, refusal))).read_namespaced_config_map(
                "cm", "ns", _preload_content=preload
            )
        raised.append((caught.value.status, json.loads(caught.value.body)))
    assert raised[0] == raised[1] == (403, refusal)


def test_the_module_does_not_import_core_v1_api() -> None:
    """The point of CoreApi: importing the operator's clients leaves CoreV1Api's module unloaded."""
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "from kubernetes import client\n"
        "import connect_offsets.clients.kubernetes as k\n"
        "k.KubernetesApi(client.ApiClient())\n"
        "print('kubernetes.client.api.core_v1_api' in sys.modules)\n"
    )
    answer = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert answer.stdout.strip() == "False"
