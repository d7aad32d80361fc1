"""Owner records a tenant cannot forge (issue 31, point 5).

Connect keeps a deleted connector's offsets; ``spec.initialOffsets`` wipes such leftovers only when
the last resource that created the name was of the same namespace, which the operator records when
it creates a connector. Those records used to be ConfigMaps in the tenants' own namespaces, so any
tenant could write one: tenant B made tenant A's ``initialOffsets`` fail at will.

The operator runs as the chart installs it for two tenant namespaces; tenant B acts with an
identity of its own (a ServiceAccount that may write ConfigMaps and the operator's resources in its
namespace, as a team is usually given). B writes a record claiming A's connector name, newer than anything, where it can
(its namespace), and cannot write one where the operator keeps them now (the release namespace:
403). A's re-created connector with ``initialOffsets`` still wipes A's own leftovers.

Records are keyed by the Connect cluster (its Kafka cluster id, from ``GET /``) and the connector
name (issue 43): tenant B creating a connector of A's name on a Connect cluster of its own used to
rewrite A's record, and A's ``initialOffsets`` was then refused. The stack's Connect clusters all
use Kafka cluster A, so B's "own" cluster is the ``connect-aux`` worker (its own group and offsets
topic) behind a small proxy reporting another Kafka cluster id, as a worker on another Kafka cluster
would.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.conftest import REPO, wait_for
from tests.integration.chart_install import chart_operator, run, sa_kubeconfig, tenant_namespaces
from tests.integration.support import (
    GROUP,
    VERSION,
    connect_offsets,
    create_cluster,
    create_connector,
    file_source_spec,
    wait_condition,
)


def tenant_identity(stack: dict[str, Any], core: Any, namespace: str, tmp_path: Path) -> client.ApiClient:
    """A client acting as a team member of ``namespace``: a ServiceAccount that may do everything
    with ConfigMaps and the operator's resources there (what ``edit`` grants; the stack runs no
    ClusterRole aggregation, so its ``edit`` is empty)."""
    from kubernetes import config

    core.create_namespaced_service_account(namespace, {"metadata": {"name": "team"}})
    rbac = client.RbacAuthorizationV1Api(core.api_client)
    rbac.create_namespaced_role(
        namespace,
        {
            "metadata": {"name": "team"},
            "rules": [
                {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]},
                {"apiGroups": [GROUP], "resources": ["*"], "verbs": ["*"]},
            ],
        },
    )
    rbac.create_namespaced_role_binding(
        namespace,
        {
            "metadata": {"name": "team"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "team"},
            "subjects": [{"kind": "ServiceAccount", "name": "team", "namespace": namespace}],
        },
    )
    env = {**os.environ, "KUBECONFIG": stack["kubeconfig"]}
    token = run([stack["kubectl"], "create", "token", "team", "-n", namespace, "--duration", "1h"], env).strip()
    path = sa_kubeconfig(tmp_path / f"{namespace}-team-kubeconfig", stack["apiserver"], token)
    return config.new_client_from_config(config_file=str(path))


def forged_record(connector: str, owner: str) -> dict[str, Any]:
    """A record as the operator wrote them before (label: the name's hash), claiming ``owner``."""
    digest = hashlib.sha256(connector.encode()).hexdigest()[:16]
    return {
        "metadata": {
            "name": f"connect-offsets-owner-{digest}",
            "labels": {"app.kubernetes.io/managed-by": "connect-offsets-operator", f"{GROUP}/last-owner-of": digest},
            "annotations": {
                f"{GROUP}/connector": connector,
                f"{GROUP}/owner": owner,
                f"{GROUP}/time": "2999-01-01T00:00:00+00:00",
            },
        }
    }


def initial_outcome(custom: Any, namespace: str, name: str) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        body = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, "kafkaconnectors", name)
        initial: dict[str, Any] = (body.get("status") or {}).get("initialOffsets") or {}
        return initial if initial.get("step") in ("Applied", "Failed") else None

    return wait_for(f"{namespace}/{name}: initial offsets applied or refused", done, timeout=90)


@pytest.mark.local_stack
@pytest.mark.timeout(400)
def test_another_namespace_cannot_forge_an_owner_record(
    custom: Any,
    core: Any,
    namespace: str,
    stack: dict[str, Any],
    connect: httpx.Client,
    connect_url: str,
    tmp_path: Path,
    unique: str,
) -> None:
    name = f"owned-{unique}"
    source = tmp_path / "a.txt"
    source.write_text("".join(f"line {i}\n" for i in range(10)))
    with (
        tenant_namespaces(core, custom, namespace) as (tenant_a, tenant_b),
        chart_operator(stack, core, custom, tmp_path, [tenant_a, tenant_b]) as op,
    ):
        team_b = client.CoreV1Api(tenant_identity(stack, core, tenant_b, tmp_path))
        try:
            for tenant in (tenant_a, tenant_b):
                create_cluster(custom, tenant, connect_url)
            seed = {"offsets": [{"partition": {"filename": str(source)}, "offset": {"position": 0}}]}
            core.create_namespaced_config_map(
                tenant_a, {"metadata": {"name": "seed"}, "data": {"offsets.json": json.dumps(seed)}}
            )
            create_connector(custom, tenant_a, name, file_source_spec(source, name, "a-list"))
            wait_condition(custom, tenant_a, name, "Ready", reason="ConnectorRunning", timeout=90)
            wait_for("A's offsets", lambda: (connect_offsets(connect, name) or [{}])[0].get("offset"))
            custom.delete_namespaced_custom_object(GROUP, VERSION, tenant_a, "kafkaconnectors", name)
            wait_for("A's connector deleted", lambda: connect.get(f"/connectors/{name}").status_code == 404)

            # Tenant B forges a record where it can write, claiming the name for itself (the new
            # RoleBinding may take a moment to reach the API server's authorizer) ...
            def forge() -> bool:
                team_b.create_namespaced_config_map(tenant_b, forged_record(name, f"{tenant_b}/evil"))
                return True

            wait_for("tenant B's record forged in its namespace", forge, timeout=30)
            # ... and cannot write where the operator keeps its records.
            with pytest.raises(ApiException) as refused:
                team_b.create_namespaced_config_map(op.release_namespace, forged_record(name, f"{tenant_b}/evil"))
            assert refused.value.status == 403

            spec = file_source_spec(source, name, "a-list")
            spec["initialOffsets"] = {"fromConfigMap": {"name": "seed"}}
            create_connector(custom, tenant_a, name, spec)
            initial = initial_outcome(custom, tenant_a, name)
            assert initial["step"] == "Applied", initial["message"]
            assert "offset(s) left by an earlier connector" in initial["message"]
            wait_condition(custom, tenant_a, name, "Ready", reason="ConnectorRunning", timeout=60)
        finally:
            connect.delete(f"/connectors/{name}")


OTHER_KAFKA = "another-kafka-cluster-id"


def record_name(cluster: str, connector: str) -> str:
    """The operator's record of ``connector`` on the Connect cluster of Kafka cluster ``cluster``."""
    return f"connect-offsets-owner-{hashlib.sha256(f'{cluster}/{connector}'.encode()).hexdigest()[:16]}"


@contextlib.contextmanager
def reporting_another_kafka(upstream: str) -> Iterator[str]:
    """An HTTP proxy on 127.0.0.1 to the worker at ``upstream`` whose ``GET /`` reports the Kafka
    cluster id ``OTHER_KAFKA``: what a Connect cluster on another Kafka cluster answers."""

    class Handler(BaseHTTPRequestHandler):
        def _forward(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            headers = {k: v for k, v in self.headers.items() if k.lower() in ("content-type", "accept")}
            answer = httpx.request(self.command, upstream + self.path, content=body, headers=headers, timeout=60)
            data = answer.content
            if self.command == "GET" and self.path == "/" and answer.status_code == 200:
                data = json.dumps({**answer.json(), "kafka_cluster_id": OTHER_KAFKA}).encode()
            self.send_response(answer.status_code)
            self.send_header("Content-Type", answer.headers.get("content-type", "application/json"))
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _forward

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.local_stack
@pytest.mark.timeout(400)
def test_a_same_named_connector_on_another_connect_cluster_keeps_the_owner_record(
    custom: Any,
    core: Any,
    namespace: str,
    stack: dict[str, Any],
    connect: httpx.Client,
    connect_url: str,
    tmp_path: Path,
    unique: str,
) -> None:
    subprocess.run([sys.executable, str(REPO / "hack" / "stack.py"), "up", "connect-aux"], check=True)
    aux_url = str(stack["connect_aux_url"])
    name = f"keyed-{unique}"
    cluster_id = connect.get("/").json()["kafka_cluster_id"]
    source_a, source_b = tmp_path / "a.txt", tmp_path / "b.txt"
    for source in (source_a, source_b):
        source.write_text("".join(f"line {i}\n" for i in range(10)))
    with (
        tenant_namespaces(core, custom, namespace) as (tenant_a, tenant_b),
        chart_operator(stack, core, custom, tmp_path, [tenant_a, tenant_b]) as op,
        reporting_another_kafka(aux_url) as own_cluster,
        httpx.Client(base_url=aux_url, timeout=30) as aux,
    ):
        try:
            create_cluster(custom, tenant_a, connect_url)
            create_cluster(custom, tenant_b, own_cluster)
            seed = {"offsets": [{"partition": {"filename": str(source_a)}, "offset": {"position": 0}}]}
            core.create_namespaced_config_map(
                tenant_a, {"metadata": {"name": "seed"}, "data": {"offsets.json": json.dumps(seed)}}
            )
            create_connector(custom, tenant_a, name, file_source_spec(source_a, name, "a-list"))
            wait_condition(custom, tenant_a, name, "Ready", reason="ConnectorRunning", timeout=90)
            wait_for("A's offsets", lambda: (connect_offsets(connect, name) or [{}])[0].get("offset"))
            custom.delete_namespaced_custom_object(GROUP, VERSION, tenant_a, "kafkaconnectors", name)
            wait_for("A's connector deleted", lambda: connect.get(f"/connectors/{name}").status_code == 404)
            mine = core.read_namespaced_config_map(record_name(cluster_id, name), op.release_namespace)
            assert mine.metadata.annotations[f"{GROUP}/kafka-cluster-id"] == cluster_id
            assert mine.metadata.annotations[f"{GROUP}/owner"] == f"{tenant_a}/{name}"

            # Tenant B creates a connector of A's name on its own Connect cluster ...
            create_connector(custom, tenant_b, name, file_source_spec(source_b, f"{name}-b", "b-list"))
            wait_condition(custom, tenant_b, name, "Ready", reason="ConnectorRunning", timeout=90)
            theirs = core.read_namespaced_config_map(record_name(OTHER_KAFKA, name), op.release_namespace)
            assert theirs.metadata.annotations[f"{GROUP}/owner"] == f"{tenant_b}/{name}"
            # ... which records B's connector there, and leaves A's record as it was.
            mine = core.read_namespaced_config_map(record_name(cluster_id, name), op.release_namespace)
            assert mine.metadata.annotations[f"{GROUP}/owner"] == f"{tenant_a}/{name}"

            spec = file_source_spec(source_a, name, "a-list")
            spec["initialOffsets"] = {"fromConfigMap": {"name": "seed"}}
            create_connector(custom, tenant_a, name, spec)
            initial = initial_outcome(custom, tenant_a, name)
            assert initial["step"] == "Applied", initial["message"]
            assert "offset(s) left by an earlier connector" in initial["message"]
            wait_condition(custom, tenant_a, name, "Ready", reason="ConnectorRunning", timeout=60)
        finally:
            connect.delete(f"/connectors/{name}")
            aux.delete(f"/connectors/{name}")
