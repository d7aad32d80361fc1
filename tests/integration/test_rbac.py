"""The chart's RBAC is enough and not too much, proven on the RBAC-enabled API server.

Installs the chart with helm (watching one namespace), takes its ServiceAccount's token, runs the
operator out-of-cluster with it, and drives list -> stop -> alter -> reset on a FileStreamSource
connector. The same identity is then denied what it must not do: read Secrets in a namespace it
does not watch, list Secrets where it only gets them, delete Deployments.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client, config

from tests.conftest import REPO, OperatorProcess, delete_namespace, wait_for
from tests.integration.chart_install import run, sa_kubeconfig
from tests.integration.support import (
    annotate,
    configmap_offsets,
    connect_offsets,
    create_cluster,
    create_connector,
    file_source_spec,
    patch_connector,
    wait_annotation_removed,
    wait_condition,
)


def test_chart_service_account_runs_the_flows_and_nothing_more(
    custom: Any,
    core: Any,
    namespace: str,
    stack: dict[str, Any],
    connect: httpx.Client,
    connect_url: str,
    tmp_path: Path,
    unique: str,
) -> None:
    env = {**os.environ, "KUBECONFIG": stack["kubeconfig"]}
    release = f"rbac-{unique}"
    release_ns, other_ns = f"{namespace}-op"[:63], f"{namespace}-x"[:63]
    core.create_namespace({"metadata": {"name": other_ns}})
    core.create_namespaced_secret(other_ns, {"metadata": {"name": "not-yours"}, "stringData": {"k": "v"}})
    run(
        [
            stack["helm"],
            "install",
            release,
            str(REPO / "charts" / "connect-offsets-operator"),
            "-n",
            release_ns,
            "--create-namespace",
            "--skip-crds",
            "--set",
            f"watchNamespaces={{{namespace}}}",
        ],
        env,
    )
    try:
        service_account = f"{release}-connect-offsets-operator"
        token = run(
            [stack["kubectl"], "create", "token", service_account, "-n", release_ns, "--duration", "1h"], env
        ).strip()
        kubeconfig = sa_kubeconfig(tmp_path / "sa-kubeconfig", stack["apiserver"], token)

        # What it must not do.
        sa_api = config.new_client_from_config(config_file=str(kubeconfig))
        sa_core, sa_apps = client.CoreV1Api(sa_api), client.AppsV1Api(sa_api)
        for denied in (
            lambda: sa_core.read_namespaced_secret("not-yours", other_ns),
            lambda: sa_core.list_namespaced_secret(namespace),
            lambda: sa_apps.delete_namespaced_deployment(service_account, release_ns),
            lambda: sa_core.read_namespaced_config_map("anything", other_ns),
        ):
            with pytest.raises(client.exceptions.ApiException) as caught:
                denied()
            assert caught.value.status == 403

        # What it must do: the core flows, with only this identity.
        operator = OperatorProcess(str(kubeconfig), namespace, tmp_path / "op.log")
        source = tmp_path / "s.txt"
        source.write_text("alpha\nbeta\n")
        name = f"rbac-{unique}"
        operator.start()
        try:
            create_cluster(custom, namespace, connect_url)
            create_connector(custom, namespace, name, file_source_spec(source, name, "rbac-offsets"))
            wait_condition(custom, namespace, name, "Ready", reason="ConnectorRunning")
            wait_for("offsets committed", lambda: connect_offsets(connect, name))
            annotate(custom, namespace, name, connector_offsets="list")
            wait_annotation_removed(custom, namespace, name)
            listed = configmap_offsets(core, namespace, "rbac-offsets")
            patch_connector(custom, namespace, name, {"spec": {"state": "stopped"}})
            listed["offsets"][0]["offset"]["position"] = 6
            core.patch_namespaced_config_map("rbac-offsets", namespace, {"data": {"offsets.json": json.dumps(listed)}})
            annotate(custom, namespace, name, connector_offsets="alter")
            wait_annotation_removed(custom, namespace, name)
            assert connect_offsets(connect, name)[0]["offset"] == {"position": 6}
            annotate(custom, namespace, name, connector_offsets="reset")
            wait_annotation_removed(custom, namespace, name)
            assert connect_offsets(connect, name) == []
            assert "forbidden" not in operator.log().lower(), operator.log()[-3000:]
        finally:
            operator.stop()
            connect.delete(f"/connectors/{name}")
    finally:
        subprocess.run([stack["helm"], "uninstall", release, "-n", release_ns], env=env, capture_output=True)
        for leftover in (other_ns, release_ns):
            delete_namespace(core, custom, leftover)


# Its clean-up deletes the kopfpeerings CRD that test_ha's operators need: one xdist worker runs both.
@pytest.mark.xdist_group("kopf-peering-crds")
def test_rendered_chart_applies_server_side(stack: dict[str, Any], namespace: str, unique: str) -> None:
    """`helm template` output (peering and ServiceMonitor off: no such CRDs here) applies cleanly."""
    env = {**os.environ, "KUBECONFIG": stack["kubeconfig"]}
    release = f"tpl-{unique}"
    rendered = run(
        [
            stack["helm"],
            "template",
            release,
            str(REPO / "charts" / "connect-offsets-operator"),
            "--namespace",
            namespace,
            "--set",
            "replicaCount=2",
            "--set",
            "peering.createCRDs=true",
        ],
        env,
    )
    assert "kind: Deployment" in rendered and "kind: ClusterRole" in rendered
    apply = subprocess.run(
        [stack["kubectl"], "apply", "--server-side", "-f", "-"], input=rendered, env=env, capture_output=True, text=True
    )
    try:
        # The peering object is a post-install hook whose CRD comes in the same document stream:
        # apply once more when the first pass raced the CRD's establishment.
        if apply.returncode != 0 and "no matches for kind" in apply.stderr:
            apply = subprocess.run(
                [stack["kubectl"], "apply", "--server-side", "-f", "-"],
                input=rendered,
                env=env,
                capture_output=True,
                text=True,
            )
        assert apply.returncode == 0, apply.stderr
        assert "serverside-applied" in apply.stdout
    finally:
        subprocess.run(
            [stack["kubectl"], "delete", "--ignore-not-found", "--wait=false", "-f", "-"],
            input=rendered,
            env=env,
            capture_output=True,
            text=True,
        )
