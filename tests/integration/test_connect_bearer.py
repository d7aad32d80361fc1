"""Bearer authentication for real: a Connect worker whose REST API demands ``Authorization: Bearer``.

Issue 21, item 3. Until now ``authentication.type: bearer`` was proven by unit tests only (a mock
transport). Here a dedicated Connect worker (same jars as the stack's) loads a small REST extension
built with Maven (``hack/rest-bearer``, ``hack/build-rest-bearer.sh``) from its ``plugin.path``: every
request without the token in the worker's token file gets Connect's own 401 shape. The file is read
on each request, so rotating the token is rewriting it. The operator, given the token through an
opted-in Secret, must become Ready and carry out a real ``list``; when the worker's token rotates it
must say so in a clear ``Ready=False`` (no token text anywhere), and pick up the updated Secret by
itself, with no restart.
"""

from __future__ import annotations

import json
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import OperatorProcess, wait_for
from tests.integration.connect_worker import REPO, DedicatedWorker
from tests.integration.support import (
    GROUP,
    VERSION,
    annotate,
    condition,
    configmap_offsets,
    create_cluster,
    create_connector,
    file_source_spec,
    get_connector,
    wait_annotation_removed,
    watch_until,
)

# One xdist worker runs the module: its bearer-token worker is started once for all of its tests.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(300), pytest.mark.xdist_group("bearer-worker")]

EXTENSION = "io.connectoffsets.restbearer.BearerTokenRestExtension"
SECRET = "connect-token"


class BearerWorker:
    """A dedicated Connect worker whose REST API takes one bearer token, read from ``token_file``."""

    def __init__(self, directory: Path) -> None:
        # Builds the extension if its sources changed (cached otherwise); prints its plugin.path.
        built = subprocess.run(
            ["bash", str(REPO / "hack" / "build-rest-bearer.sh")], check=True, capture_output=True, text=True
        )
        plugin_dir = built.stdout.strip().splitlines()[-1]
        self.token_file = directory / "token"
        self.token = ""
        self.rotate()
        self.worker = DedicatedWorker(
            name="bearer",
            extra_props=(
                f"plugin.path={plugin_dir}",
                f"rest.extension.classes={EXTENSION}",
                f"rest.bearer.token.file={self.token_file}",
            ),
            probe_options={"headers": {"Authorization": f"Bearer {self.token}"}},
        )

    def rotate(self) -> str:
        """A new token on the worker; the old one is refused from the next request on."""
        self.token = secrets.token_urlsafe(24)
        self.token_file.write_text(self.token + "\n")
        return self.token

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.worker.url, headers={"Authorization": f"Bearer {self.token}"}, timeout=10)


@pytest.fixture(scope="module")
def bearer_worker(tmp_path_factory: pytest.TempPathFactory, stack: dict[str, Any]) -> Iterator[BearerWorker]:
    worker = BearerWorker(tmp_path_factory.mktemp("bearer"))
    worker.worker.start()
    yield worker
    worker.worker.stop()


def put_token(core: Any, namespace: str, token: str) -> None:
    body = {"metadata": {"name": SECRET, "labels": {f"{GROUP}/credentials": "true"}}, "stringData": {"token": token}}
    try:
        core.create_namespaced_secret(namespace, body)
    except Exception:
        core.replace_namespaced_secret(SECRET, namespace, body)


def ready_condition(custom: Any, namespace: str, status: str, timeout: float = 60) -> dict[str, Any]:
    def check(body: dict[str, Any]) -> dict[str, Any] | None:
        found = condition(body, "Ready")
        return found if found and found["status"] == status else None

    what = f"ConnectCluster Ready={status} in {namespace}"
    return watch_until(custom, namespace, "connectclusters", "local", what, check, timeout)


def listed_offsets(custom: Any, core: Any, namespace: str, name: str) -> list[dict[str, Any]]:
    """One real ``list`` by the operator: the annotation is handled and the ConfigMap written."""
    annotate(custom, namespace, name, connector_offsets="list")
    wait_annotation_removed(custom, namespace, name)
    offsets: list[dict[str, Any]] = configmap_offsets(core, namespace, "bearer-offsets")["offsets"]
    return offsets


def worker_offsets(worker: BearerWorker, name: str, wanted: int) -> list[dict[str, Any]]:
    """The worker's own answer, once the source committed ``wanted`` as its position."""

    def check() -> list[dict[str, Any]] | None:
        with worker.client() as client:
            answer = client.get(f"/connectors/{name}/offsets")
        offsets: list[dict[str, Any]] = answer.json()["offsets"] if answer.status_code == 200 else []
        return offsets if offsets and offsets[0]["offset"] == {"position": wanted} else None

    return wait_for(f"offset position {wanted} committed", check)


def test_the_worker_itself_demands_the_token(bearer_worker: BearerWorker) -> None:
    url = bearer_worker.worker.url
    refused = httpx.get(f"{url}/connectors", timeout=10)
    assert refused.status_code == 401
    assert refused.json() == {"error_code": 401, "message": "missing bearer token"}
    wrong = httpx.get(f"{url}/connectors", headers={"Authorization": "Bearer not-the-token"}, timeout=10)
    assert wrong.status_code == 401 and wrong.json()["message"] == "invalid bearer token"
    basic = httpx.get(f"{url}/connectors", auth=("admin", bearer_worker.token), timeout=10)
    assert basic.status_code == 401
    with bearer_worker.client() as client:
        assert client.get("/connectors").status_code == 200


def test_operator_lists_with_a_bearer_token_and_follows_its_rotation(
    bearer_worker: BearerWorker,
    operator: OperatorProcess,
    core: Any,
    custom: Any,
    namespace: str,
    tmp_path: Path,
) -> None:
    old_token = bearer_worker.token
    put_token(core, namespace, old_token)
    create_cluster(custom, namespace, bearer_worker.worker.url, authentication={"type": "bearer", "secretName": SECRET})
    ready = ready_condition(custom, namespace, "True")
    assert ready["reason"] == "Reachable", ready

    source = tmp_path / "in.txt"
    source.write_text("one\n")
    name = f"bearer-{namespace[-6:]}"
    create_connector(custom, namespace, name, file_source_spec(source, f"bearer-{namespace}", "bearer-offsets"))
    try:
        committed = worker_offsets(bearer_worker, name, 4)
        assert listed_offsets(custom, core, namespace, name) == committed

        # The worker's token rotates; the Secret still holds the old one.
        new_token = bearer_worker.rotate()
        refused = ready_condition(custom, namespace, "False")
        assert refused["reason"] == "Unauthorized", refused
        assert "401" in refused["message"] and "spec.authentication" in refused["message"], refused

        # The platform updates the Secret: the operator reads it again and builds a new client.
        put_token(core, namespace, new_token)
        ready = ready_condition(custom, namespace, "True", timeout=90)
        assert ready["reason"] == "Reachable", ready
        with source.open("a") as f:
            f.write("two\n")
        committed = worker_offsets(bearer_worker, name, 8)
        assert listed_offsets(custom, core, namespace, name) == committed
        assert operator.process is not None and operator.process.poll() is None  # never restarted

        texts = [operator.log(), json.dumps(get_connector(custom, namespace, name))]
        texts.append(
            json.dumps(custom.get_namespaced_custom_object(GROUP, VERSION, namespace, "connectclusters", "local"))
        )
        texts += [f"{e.reason} {e.message}" for e in core.list_namespaced_event(namespace).items]
        for text in texts:
            assert old_token not in text and new_token not in text
    finally:
        with bearer_worker.client() as client:
            client.delete(f"/connectors/{name}")
