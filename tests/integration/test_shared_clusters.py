"""Issue 18 point 6: a Connect cluster shared by tenants, leftover offsets, ConfigMaps of others.

Real API server (with kube-controller-manager, so garbage collection is real), real Connect, and
the operator under the chart's ServiceAccount token for two tenant namespaces (plus a platform
namespace for the shared ConnectCluster). The adopt refusal is in test_shared_ownership.py; here:

* a shared ConnectCluster in the platform namespace: a namespace it does not list ->
  ClusterNotAllowed, a name without the ``{namespace}-`` prefix -> ConnectorNameNotAllowed, and
  nothing in Connect for either; a listed namespace with the prefix runs, reading the platform's
  ConnectCluster with the chart's RBAC, and ``kubectl get`` shows its Cluster as ``<platform>/shared``;
* B's ``initialOffsets`` never wipes the offsets A's deleted connector left (Connect's GET of the
  name before/after), A's own re-creation may;
* ``list`` and a dry-run alter into an application's existing ConfigMap keep its labels and add no
  owner reference; deleting the KafkaConnector leaves it in place, while the ConfigMap the operator
  created for another connector (the control) is garbage-collected.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import wait_for
from tests.integration.chart_install import chart_operator, tenant_namespaces
from tests.integration.support import (
    FILE_SOURCE,
    GROUP,
    VERSION,
    annotate,
    configmap_offsets,
    connect_get,
    connect_log,
    connect_offsets,
    connect_send,
    connector_config,
    create_cluster,
    file_source_spec,
    offsets_requests,
    seed_offsets,
    wait_annotation_removed,
    wait_condition,
    wait_connect_state,
)

LINE = 4  # json-encoded "aN" lines are 4 bytes + newline in the file source's position


def source_file(path: Path, lines: int = 10) -> Path:
    path.write_text("".join(f'"a{i}"\n' for i in range(lines)))
    return path


def create_connector(
    custom: Any,
    namespace: str,
    name: str,
    spec: dict[str, Any],
    labels: dict[str, str],
    annotations: dict[str, str] | None = None,
) -> None:
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "KafkaConnector",
        "metadata": {"name": name, "namespace": namespace, "labels": labels, "annotations": annotations or {}},
        "spec": spec,
    }
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "kafkaconnectors", body)


def delete_connector(custom: Any, namespace: str, name: str) -> None:
    custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, "kafkaconnectors", name)


def connect_config(connect: httpx.Client, name: str) -> dict[str, Any] | None:
    """The connector's config, or None if Connect has no such connector. Asked again while the
    shared worker answers "rebalance is expected" (``connect_get``): other work on the stack
    creates and deletes connectors all the time."""
    response = connect_get(connect, f"/connectors/{name}/config")
    if response.status_code == 404:
        return None
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def configmap_or_none(core: Any, namespace: str, name: str) -> Any:
    from kubernetes.client.exceptions import ApiException

    try:
        return core.read_namespaced_config_map(name, namespace)
    except ApiException as error:
        if error.status == 404:
            return None
        raise


@pytest.mark.local_stack
def test_shared_cluster_allows_listed_namespaces_and_prefixed_names(
    custom: Any,
    core: Any,
    namespace: str,
    stack: dict[str, Any],
    connect: httpx.Client,
    connect_url: str,
    tmp_path: Path,
    unique: str,
) -> None:
    # The platform namespace is watched too: the chart's Role there lets the operator read the
    # shared ConnectCluster (and its Secrets); tenants' Roles never see the platform's Secrets.
    with (
        tenant_namespaces(core, custom, namespace, count=3) as (tenant_a, tenant_b, platform),
        chart_operator(stack, core, custom, tmp_path, [tenant_a, tenant_b, platform]),
    ):
        create_cluster(
            custom,
            platform,
            connect_url,
            name="shared",
            allowedNamespaces=[tenant_a],
            connectorNamePrefix="{namespace}-",
        )
        shared = {f"{GROUP}/cluster": "shared", f"{GROUP}/cluster-namespace": platform}
        not_allowed, wrong_name, good = f"{tenant_b}-x-{unique}", f"x-{unique}", f"{tenant_a}-ok-{unique}"
        source = source_file(tmp_path / "s.txt")
        try:
            create_connector(custom, tenant_b, not_allowed, file_source_spec(source, not_allowed, "l"), shared)
            create_connector(custom, tenant_a, wrong_name, file_source_spec(source, wrong_name, "l"), shared)
            create_connector(custom, tenant_a, good, file_source_spec(source, good, "l"), shared)

            refused = wait_condition(custom, tenant_b, not_allowed, "Ready", status="False", reason="ClusterNotAllowed")
            assert f"ConnectCluster {platform}/shared" in refused["message"]
            assert f"namespace {tenant_b}" in refused["message"]
            named = wait_condition(
                custom, tenant_a, wrong_name, "Ready", status="False", reason="ConnectorNameNotAllowed"
            )
            assert f"start with '{tenant_a}-'" in named["message"] and wrong_name in named["message"]
            wait_condition(custom, tenant_a, good, "Ready", reason="ConnectorRunning", timeout=90)
            # kubectl get's Cluster column names the other namespace (issue 36: it showed "shared")
            shown = subprocess.run(
                [stack["kubectl"], "get", f"kafkaconnectors.{GROUP}", good, "-n", tenant_a],
                env={**os.environ, "KUBECONFIG": stack["kubeconfig"]},
                capture_output=True,
                text=True,
                check=True,
            ).stdout.splitlines()
            assert shown[1].split()[shown[0].split().index("CLUSTER")] == f"{platform}/shared", shown
            assert connect_config(connect, good) is not None
            assert connect_config(connect, not_allowed) is None
            assert connect_config(connect, wrong_name) is None
            assert not [n for n in connect_get(connect, "/connectors").json() if n in (not_allowed, wrong_name)]
        finally:
            for name in (not_allowed, wrong_name, good):
                connect_send(connect, "DELETE", f"/connectors/{name}")


@pytest.mark.local_stack
def test_list_into_an_apps_configmap_leaves_it_the_apps(
    custom: Any,
    core: Any,
    namespace: str,
    stack: dict[str, Any],
    connect: httpx.Client,
    connect_url: str,
    tmp_path: Path,
    unique: str,
) -> None:
    app_labels = {"app.kubernetes.io/managed-by": "helm", "app.kubernetes.io/name": "orders"}
    with (
        tenant_namespaces(core, custom, namespace) as (tenant_a, tenant_b),
        chart_operator(stack, core, custom, tmp_path, [tenant_a, tenant_b]),
    ):
        create_cluster(custom, tenant_a, connect_url)
        core.create_namespaced_config_map(
            tenant_a,
            {"metadata": {"name": "app-config", "labels": app_labels}, "data": {"app.properties": "x=1"}},
        )
        app_conn, own_conn = f"app-{unique}", f"own-{unique}"
        source = source_file(tmp_path / "l.txt")
        labels = {f"{GROUP}/cluster": "local"}
        try:
            create_connector(custom, tenant_a, app_conn, file_source_spec(source, app_conn, "app-config"), labels)
            create_connector(custom, tenant_a, own_conn, file_source_spec(source, own_conn, "own-list"), labels)
            for name in (app_conn, own_conn):
                wait_condition(custom, tenant_a, name, "Ready", reason="ConnectorRunning", timeout=90)
                wait_for(f"{name} offsets", lambda n=name: connect_offsets(connect, n))  # type: ignore[misc]
                annotate(custom, tenant_a, name, connector_offsets="list")
                wait_annotation_removed(custom, tenant_a, name)
            # A dry run writes its diff next to the listed document: into the app's ConfigMap too.
            annotate(custom, tenant_a, app_conn, connector_offsets="alter", dry_run="true")
            wait_annotation_removed(custom, tenant_a, app_conn)

            app_cm = core.read_namespaced_config_map("app-config", tenant_a)
            assert app_cm.metadata.labels == app_labels
            assert not app_cm.metadata.owner_references
            assert app_cm.data["app.properties"] == "x=1"
            assert "dry-run.json" in app_cm.data
            assert configmap_offsets(core, tenant_a, "app-config")["offsets"]
            own_cm = core.read_namespaced_config_map("own-list", tenant_a)
            assert [o.name for o in own_cm.metadata.owner_references] == [own_conn]
            assert own_cm.metadata.labels["app.kubernetes.io/managed-by"] == "connect-offsets-operator"

            delete_connector(custom, tenant_a, app_conn)
            delete_connector(custom, tenant_a, own_conn)
            # The control: garbage collection removes the operator's ConfigMap with its owner ...
            wait_for("own-list collected", lambda: configmap_or_none(core, tenant_a, "own-list") is None, 120)
            wait_for("connector deleted in Connect", lambda: connect_config(connect, app_conn) is None)
            time.sleep(5)  # ... and has had its chance at the app's ConfigMap too
            kept = configmap_or_none(core, tenant_a, "app-config")
            assert kept is not None and kept.metadata.labels == app_labels
            assert kept.data["app.properties"] == "x=1"
        finally:
            for name in (app_conn, own_conn):
                connect_send(connect, "DELETE", f"/connectors/{name}")


def stopped_offsets(connect: httpx.Client, name: str, config: dict[str, str]) -> list[dict[str, Any]]:
    """The offsets Connect holds for connector name ``name``: created STOPPED (nothing runs, so
    nothing is committed), read, deleted again; every request asked again while the shared worker
    rebalances for someone else (a 500 "rebalance is expected" is not an answer)."""
    created = connect_send(
        connect, "POST", "/connectors", json={"name": name, "config": config, "initial_state": "STOPPED"}
    )
    assert created.status_code == 201, created.text
    try:
        wait_connect_state(connect, name, "STOPPED")
        listed = connect_get(connect, f"/connectors/{name}/offsets")
        assert listed.status_code == 200, listed.text
        offsets: list[dict[str, Any]] = listed.json()["offsets"]
        return offsets
    finally:
        assert connect_send(connect, "DELETE", f"/connectors/{name}").status_code == 204


@pytest.mark.local_stack
def test_initial_offsets_never_wipe_another_namespaces_leftovers(
    custom: Any,
    core: Any,
    namespace: str,
    stack: dict[str, Any],
    connect: httpx.Client,
    connect_url: str,
    tmp_path: Path,
    unique: str,
) -> None:
    """A's connector is deleted (its offsets stay in Kafka); B's same-named connector with
    initialOffsets is refused and leaves them as they were; A's own re-creation may wipe them."""
    name = f"left-{unique}"
    source = source_file(tmp_path / "left.txt")
    labels = {f"{GROUP}/cluster": "local"}
    with (
        tenant_namespaces(core, custom, namespace) as (tenant_a, tenant_b),
        chart_operator(stack, core, custom, tmp_path, [tenant_a, tenant_b]),
    ):
        try:
            # Each tenant's seed names its own file (the file source's partition is its file).
            for ns, path in ((tenant_a, source), (tenant_b, tmp_path / "b.txt")):
                create_cluster(custom, ns, connect_url)
                seed = {"offsets": [{"partition": {"filename": str(path)}, "offset": {"position": 0}}]}
                core.create_namespaced_config_map(
                    ns, {"metadata": {"name": "seed"}, "data": {"offsets.json": json.dumps(seed)}}
                )
            create_connector(custom, tenant_a, name, file_source_spec(source, name, "a-list"), labels)
            wait_condition(custom, tenant_a, name, "Ready", reason="ConnectorRunning", timeout=90)
            wait_for("A's offsets", lambda: (connect_offsets(connect, name) or [{}])[0].get("offset"))
            config = {k: v for k, v in connector_config(connect, name).items() if k != "name"}
            delete_connector(custom, tenant_a, name)
            wait_for("A's connector deleted", lambda: connect_config(connect, name) is None)
            left_by_a = stopped_offsets(connect, name, config)
            assert left_by_a and left_by_a[0]["partition"] == {"filename": str(source)}

            spec_b = file_source_spec(tmp_path / "b.txt", f"{name}-b", "b-list")
            spec_b["initialOffsets"] = {"fromConfigMap": {"name": "seed"}}
            create_connector(custom, tenant_b, name, spec_b, labels)
            failed = wait_condition(
                custom, tenant_b, name, "Ready", status="False", reason="InitialOffsetsFailed", timeout=90
            )
            assert f"left by connector {name} of {tenant_a}/{name}" in failed["message"]
            assert "the half-created connector was deleted" in failed["message"]
            wait_for("B's half-created connector gone", lambda: connect_config(connect, name) is None)
            time.sleep(8)  # B's resource reconciled again: the failed request is not retried
            assert connect_config(connect, name) is None
            assert stopped_offsets(connect, name, config) == left_by_a

            # The same namespace may: A's new connector of that name wipes what A left.
            delete_connector(custom, tenant_b, name)
            spec_a = file_source_spec(source, name, "a-list")
            spec_a["initialOffsets"] = {"fromConfigMap": {"name": "seed"}}
            create_connector(custom, tenant_a, name, spec_a, labels)
            wait_condition(custom, tenant_a, name, "Ready", reason="ConnectorRunning", timeout=90)
            initial = (get_status(custom, tenant_a, name)).get("initialOffsets", {})
            assert initial.get("step") == "Applied", initial
            # A pass cut short after the wipe (Connect's log: DELETE 200, PATCH 500 "rebalance is
            # expected", PATCH 200) is finished by one that finds nothing left; the status still
            # tells the wipe (reconcile/initial.py records it at once).
            assert f"removed {len(left_by_a)} offset(s) left by an earlier connector" in initial["message"], (
                initial["message"],
                [(r.method, r.status) for r in offsets_requests(connect_log(stack), [name])],
            )
        finally:
            connect_send(connect, "DELETE", f"/connectors/{name}")


class RebalanceOnce:
    """A proxy in front of a Connect worker: the first ``method`` request to ``path`` is answered as
    Connect answers while its group rebalances (500 ``RebalanceNeededException``, nothing done, as
    Connect 4.3's offsets PATCH does when a rebalance is expected); everything else is forwarded."""

    def __init__(self, upstream: str, method: str, path: str) -> None:
        proxy = self
        self.refused: list[str] = []
        self.client = httpx.Client(base_url=upstream, timeout=60)
        lock = threading.Lock()  # one upstream client, one request at a time

        class Handler(BaseHTTPRequestHandler):
            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                if self.command == method and self.path == path and not proxy.refused:
                    proxy.refused.append(f"{self.command} {self.path}")
                    status = 500
                    data = b'{"error_code":500,"message":"Request cannot be completed because a rebalance is expected"}'
                else:
                    headers = {k: v for k, v in self.headers.items() if k.lower() in ("content-type", "accept")}
                    with lock:
                        answer = proxy.client.request(self.command, self.path, content=body, headers=headers)
                    status, data = answer.status_code, answer.content
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _forward

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def __enter__(self) -> RebalanceOnce:
        return self

    def __exit__(self, *_: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.client.close()


@pytest.mark.local_stack
def test_initial_offsets_report_a_wipe_whose_pass_was_interrupted(
    custom: Any,
    core: Any,
    namespace: str,
    stack: dict[str, Any],
    connect: httpx.Client,
    connect_url: str,
    operator: Any,
    tmp_path: Path,
    unique: str,
) -> None:
    """The wipe and the PATCH are two requests; a rebalance of the shared worker between them (every
    few seconds on a stack in use) interrupts the pass after the wipe. The status must still say what
    was wiped: it is the only record of it."""
    name = f"wiped-{unique}"
    source = source_file(tmp_path / "wiped.txt")
    config = {"connector.class": FILE_SOURCE, "tasks.max": "1", "file": str(source), "topic": name}
    # Leftovers of a hand-made connector of that name (no owner record: any namespace may wipe them).
    created = connect_send(
        connect, "POST", "/connectors", json={"name": name, "config": config, "initial_state": "STOPPED"}
    )
    assert created.status_code == 201, created.text
    try:
        wait_connect_state(connect, name, "STOPPED")
        seed_offsets(connect, name, [{"partition": {"filename": str(source)}, "offset": {"position": 20}}])
        assert connect_send(connect, "DELETE", f"/connectors/{name}").status_code == 204
        with RebalanceOnce(connect_url, "PATCH", f"/connectors/{name}/offsets") as proxy:
            create_cluster(custom, namespace, proxy.url)
            seed = {"offsets": [{"partition": {"filename": str(source)}, "offset": {"position": 0}}]}
            core.create_namespaced_config_map(
                namespace, {"metadata": {"name": "seed"}, "data": {"offsets.json": json.dumps(seed)}}
            )
            spec = file_source_spec(source, name, "list")
            spec["initialOffsets"] = {"fromConfigMap": {"name": "seed"}}
            create_connector(custom, namespace, name, spec, {f"{GROUP}/cluster": "local"})
            wait_condition(custom, namespace, name, "Ready", reason="ConnectorRunning", timeout=90)
            assert proxy.refused, "the operator's PATCH never came through the proxy"
        requests = [(r.method, r.status) for r in offsets_requests(connect_log(stack), [name])]
        assert ("DELETE", 200) in requests, requests  # the leftovers were wiped, by the interrupted pass
        initial = get_status(custom, namespace, name).get("initialOffsets", {})
        assert initial.get("step") == "Applied", initial
        assert "removed 1 offset(s) left by an earlier connector" in initial["message"], initial["message"]
    finally:
        connect_send(connect, "DELETE", f"/connectors/{name}")


def get_status(custom: Any, namespace: str, name: str) -> dict[str, Any]:
    body = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, "kafkaconnectors", name)
    return dict(body.get("status") or {})
