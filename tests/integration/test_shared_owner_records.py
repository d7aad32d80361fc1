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
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.conftest import wait_for
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

            def initial_done() -> dict[str, Any] | None:
                body = custom.get_namespaced_custom_object(GROUP, VERSION, tenant_a, "kafkaconnectors", name)
                initial: dict[str, Any] = (body.get("status") or {}).get("initialOffsets") or {}
                return initial if initial.get("step") in ("Applied", "Failed") else None

            initial = wait_for("A's initial offsets applied or refused", initial_done, timeout=90)
            assert initial["step"] == "Applied", initial["message"]
            assert "offset(s) left by an earlier connector" in initial["message"]
            wait_condition(custom, tenant_a, name, "Ready", reason="ConnectorRunning", timeout=60)
        finally:
            connect.delete(f"/connectors/{name}")
