"""Tenants cannot take over each other's connectors or ConfigMaps (issue 18, points 6 and 8).

Two tenant namespaces share one Connect cluster; the operator runs as the chart installs it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes.client.exceptions import ApiException

from tests.conftest import wait_for
from tests.integration.chart_install import chart_operator, tenant_namespaces
from tests.integration.support import (
    GROUP,
    VERSION,
    annotate,
    annotation,
    condition,
    connect_offsets,
    create_cluster,
    create_connector,
    file_source_spec,
    get_connector,
    wait_annotation_removed,
    wait_condition,
)


@pytest.mark.timeout(400)
def test_adopt_and_list_never_take_what_another_owns(
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
        tenant_namespaces(core, custom, namespace) as (tenant_a, tenant_b),
        chart_operator(stack, core, custom, tmp_path, [tenant_a, tenant_b]),
    ):
        shared, own = f"shared-{unique}", f"own-{unique}"
        source = tmp_path / "a.txt"
        source.write_text("one\ntwo\nthree\n")
        for tenant in (tenant_a, tenant_b):
            create_cluster(custom, tenant, connect_url)
        # The app's ConfigMap, managed by someone else, that tenant A lists into.
        app_labels = {"app.kubernetes.io/managed-by": "argocd", "app": "orders"}
        core.create_namespaced_config_map(
            tenant_a, {"metadata": {"name": "app-config", "labels": app_labels}, "data": {"setting": "x"}}
        )
        create_connector(custom, tenant_a, shared, file_source_spec(source, shared, "app-config"))
        create_connector(custom, tenant_a, own, file_source_spec(source, own, "own-offsets"))
        try:
            wait_condition(custom, tenant_a, shared, "Ready", reason="ConnectorRunning", timeout=90)
            wait_condition(custom, tenant_a, own, "Ready", reason="ConnectorRunning", timeout=90)
            wait_for("A's offsets committed", lambda: connect_offsets(connect, shared))
            before = connect_offsets(connect, shared)

            # Tenant B names the same connector, asks to adopt it and to reset its offsets.
            create_connector(
                custom,
                tenant_b,
                shared,
                file_source_spec(source, shared, "b-offsets", state="stopped"),
                annotations={f"{GROUP}/adopt": "true", f"{GROUP}/connector-offsets": "reset"},
            )
            refused = wait_condition(
                custom, tenant_b, shared, "Ready", status="False", reason="ConnectorOwnedElsewhere", timeout=60
            )
            assert f"managed by {tenant_a}/{shared}" in refused["message"], refused
            time.sleep(6)  # more than one drift interval: nothing happens later either
            assert connect.get(f"/connectors/{shared}/status").json()["connector"]["state"] == "RUNNING"
            assert connect_offsets(connect, shared) == before
            assert annotation(get_connector(custom, tenant_b, shared), "connector-offsets") == "reset"
            assert condition(get_connector(custom, tenant_a, shared), "Ready")["reason"] == "ConnectorRunning"  # type: ignore[index]

            # list into the app's ConfigMap: the document only; its labels and lifetime stay the app's.
            annotate(custom, tenant_a, shared, connector_offsets="list")
            wait_annotation_removed(custom, tenant_a, shared)
            app = core.read_namespaced_config_map("app-config", tenant_a)
            assert "offsets.json" in app.data and app.data["setting"] == "x"
            assert app.metadata.labels == app_labels
            assert not app.metadata.owner_references
            # Control: a ConfigMap the operator creates is its resource's, and watched.
            annotate(custom, tenant_a, own, connector_offsets="list")
            wait_annotation_removed(custom, tenant_a, own)
            created = core.read_namespaced_config_map("own-offsets", tenant_a)
            assert [o.name for o in created.metadata.owner_references] == [own]
            assert created.metadata.labels[f"{GROUP}/watch"] == "true"

            # Deleting the resources: the garbage collector takes the operator's ConfigMap only.
            for name in (shared, own):
                custom.delete_namespaced_custom_object(GROUP, VERSION, tenant_a, "kafkaconnectors", name)

            def collected() -> bool:
                try:
                    core.read_namespaced_config_map("own-offsets", tenant_a)
                except ApiException as error:
                    return error.status == 404
                return False

            wait_for("the operator's ConfigMap garbage-collected with its resource", collected, timeout=90)
            assert core.read_namespaced_config_map("app-config", tenant_a).data["setting"] == "x"
        finally:
            for name in (shared, own):
                connect.delete(f"/connectors/{name}")
