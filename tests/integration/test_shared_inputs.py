"""Input the API server accepts must not wedge a resource (issue 18, point 7), under the chart's RBAC.

A KafkaConnector named with 100 characters (a valid name; a label value holds 63) used to fail every
backup and list forever; a ConfigMap name that is not a DNS subdomain is now refused by the API
server itself, naming the field.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes.client.exceptions import ApiException

from connect_offsets.clients.kubernetes import label_value
from tests.conftest import wait_for
from tests.integration.chart_install import chart_operator, tenant_namespaces
from tests.integration.support import (
    annotate,
    annotation,
    configmap_offsets,
    connect_log,
    connect_offsets,
    create_cluster,
    create_connector,
    file_source_spec,
    get_connector,
    offsets_requests,
    patch_connector,
    wait_annotation_removed,
    wait_condition,
)


@pytest.mark.timeout(400)
def test_a_long_resource_name_lists_alters_and_backs_up(
    custom: Any,
    core: Any,
    namespace: str,
    stack: dict[str, Any],
    connect: httpx.Client,
    connect_url: str,
    tmp_path: Path,
    unique: str,
) -> None:
    with (
        tenant_namespaces(core, custom, namespace) as (tenant, other),
        chart_operator(stack, core, custom, tmp_path, [tenant, other]),
    ):
        name = f"long-{unique}-" + "x" * (100 - len(unique) - 6)
        assert len(name) == 100
        source = tmp_path / "s.txt"
        source.write_text("alpha\nbeta\n")
        create_cluster(custom, tenant, connect_url)
        create_connector(custom, tenant, name, file_source_spec(source, name[:60], "long-offsets"))
        try:
            wait_condition(custom, tenant, name, "Ready", reason="ConnectorRunning", timeout=90)
            wait_for("offsets committed", lambda: connect_offsets(connect, name))
            annotate(custom, tenant, name, connector_offsets="list")
            body = wait_annotation_removed(custom, tenant, name)
            assert body["status"]["lastOffsetsOperation"]["result"] == "Succeeded", body["status"]
            listed = configmap_offsets(core, tenant, "long-offsets")
            written = core.read_namespaced_config_map("long-offsets", tenant)
            assert written.metadata.labels["connect-offsets.io/name"] == label_value(name) != name

            patch_connector(custom, tenant, name, {"spec": {"state": "stopped"}})
            wait_condition(custom, tenant, name, "Ready", reason="ConnectorStopped", timeout=90)
            listed["offsets"][0]["offset"]["position"] = 6
            core.patch_namespaced_config_map("long-offsets", tenant, {"data": {"offsets.json": json.dumps(listed)}})
            annotate(custom, tenant, name, connector_offsets="alter")
            body = wait_annotation_removed(custom, tenant, name, timeout=90)
            last = body["status"]["lastOffsetsOperation"]
            assert last["result"] == "Succeeded" and last["backup"], last
            assert connect_offsets(connect, name)[0]["offset"] == {"position": 6}
            backups = core.list_namespaced_config_map(
                tenant, label_selector=f"connect-offsets.io/backup-of={label_value(name)}"
            ).items
            assert [b.metadata.name for b in backups] == [last["backup"]]
            assert backups[0].metadata.annotations["connect-offsets.io/connector"] == name
        finally:
            connect.delete(f"/connectors/{name}")


def test_the_api_server_refuses_a_configmap_name_that_is_not_a_dns_subdomain(
    custom: Any, namespace: str, tmp_path: Path, unique: str
) -> None:
    spec = file_source_spec(tmp_path / "s.txt", "t", "Bad_Name")
    spec["alterOffsets"] = {"fromConfigMap": {"name": "../other"}}
    with pytest.raises(ApiException) as refused:
        create_connector(custom, namespace, f"badname-{unique}", spec)
    assert refused.value.status == 422
    body = refused.value.body if isinstance(refused.value.body, str) else refused.value.body.decode()
    assert "spec.listOffsets.toConfigMap.name" in body and "spec.alterOffsets.fromConfigMap.name" in body, body


@pytest.mark.local_stack  # reads the local worker's request log
@pytest.mark.timeout(300)
def test_only_configmaps_labelled_for_the_watch_wake_a_resource(
    custom: Any,
    core: Any,
    namespace: str,
    stack: dict[str, Any],
    connect: httpx.Client,
    connect_url: str,
    tmp_path: Path,
    unique: str,
) -> None:
    """The ConfigMap watch carries a server-side label selector: the API server streams only the
    ConfigMaps labelled ``connect-offsets.io/watch=true``, not every ConfigMap of every tenant.

    Seen from outside: fixing an unlabelled ConfigMap wakes nothing (with the drift pass an hour
    away), and labelling it — which brings it into the watch — wakes the resource at once.
    Without the selector, the fix itself would have woken it.
    """
    with (
        tenant_namespaces(core, custom, namespace) as (tenant, other),
        chart_operator(
            stack, core, custom, tmp_path, [tenant, other], extra_env={"CONNECT_OFFSETS_DRIFT_INTERVAL": "3600"}
        ),
    ):
        name = f"watch-{unique}"
        source = tmp_path / "s.txt"
        source.write_text("alpha\nbeta\n")
        feed = "feed"
        good = {"offsets": [{"partition": {"filename": str(source)}, "offset": {"position": 7}}]}
        core.create_namespaced_config_map(
            tenant, {"metadata": {"name": feed}, "data": {"offsets.json": json.dumps(good)[:-3]}}
        )
        create_cluster(custom, tenant, connect_url)
        create_connector(custom, tenant, name, file_source_spec(source, name, feed, state="stopped"))
        try:
            wait_condition(custom, tenant, name, "Ready", reason="ConnectorStopped", timeout=90)
            annotate(custom, tenant, name, connector_offsets="alter")
            failed = wait_condition(custom, tenant, name, "OffsetsOperationFailed", timeout=60)
            assert "not valid JSON" in failed["message"], failed

            core.patch_namespaced_config_map(feed, tenant, {"data": {"offsets.json": json.dumps(good)}})
            time.sleep(15)  # a woken resource runs the alter within a second or two
            body = get_connector(custom, tenant, name)
            assert annotation(body, "connector-offsets") == "alter", "an unlabelled ConfigMap woke the resource"
            assert [r for r in offsets_requests(connect_log(stack), {name}) if r.method != "GET"] == []

            core.patch_namespaced_config_map(
                feed, tenant, {"metadata": {"labels": {"connect-offsets.io/watch": "true"}}}
            )
            body = wait_annotation_removed(custom, tenant, name, timeout=30)
            assert body["status"]["lastOffsetsOperation"]["result"] == "Succeeded", body["status"]
            assert connect_offsets(connect, name)[0]["offset"] == {"position": 7}
        finally:
            connect.delete(f"/connectors/{name}")
