"""The chart's RBAC is enough and not too much, proven on the RBAC-enabled API server.

Installs the chart with helm (watching one namespace), takes its ServiceAccount's token, runs the
operator out-of-cluster with it and the chart's leader-election arguments (its Leases in the
release namespace, as the pod's would be), and drives list -> stop -> alter -> reset on a
FileStreamSource connector. The same identity may create, read, update and delete a Lease in the
release namespace, and is denied what it must not do: Leases anywhere else (a tenant namespace,
another namespace, kube-system) and patching them, reading Secrets in a namespace it does not
watch, listing Secrets where it only gets them, deleting Deployments.
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


def lease_flags(apps: Any, namespace: str) -> list[str]:
    """The chart Deployment's leader-election arguments (``--leader-election`` and the Lease flags)."""
    [deployment] = apps.list_namespaced_deployment(namespace).items
    args = list(deployment.spec.template.spec.containers[0].args)
    flags = ["--leader-election"] if "--leader-election" in args else []
    for flag in ("--lease-prefix", "--lease-duration", "--renew-deadline", "--retry-period"):
        if flag in args:
            flags += [flag, args[args.index(flag) + 1]]
    return flags


def assert_lease_rights(sa_api: Any, release_ns: str, elsewhere: list[str], unique: str) -> None:
    """Leases: create, read, list, update (PUT) and delete in the release namespace; no patch there
    (the operator never patches a Lease), and nothing at all in any other namespace."""
    leases = client.CoordinationV1Api(sa_api)
    name = f"rbac-probe-{unique}"

    def body(holder: str) -> dict[str, Any]:
        return {"metadata": {"name": name}, "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15}}

    created = leases.create_namespaced_lease(release_ns, body("probe-1"))
    try:
        assert name in [lease.metadata.name for lease in leases.list_namespaced_lease(release_ns).items]
        created.spec.holder_identity = "probe-2"
        leases.replace_namespaced_lease(name, release_ns, created)
        assert leases.read_namespaced_lease(name, release_ns).spec.holder_identity == "probe-2"
        with pytest.raises(client.exceptions.ApiException) as caught:
            leases.patch_namespaced_lease(name, release_ns, {"spec": {"holderIdentity": "probe-3"}})
        assert caught.value.status == 403
    finally:
        leases.delete_namespaced_lease(name, release_ns)
    with pytest.raises(client.exceptions.ApiException) as caught:
        leases.read_namespaced_lease(name, release_ns)
    assert caught.value.status == 404  # deleted (and readable: a 404, not a 403)
    for namespace in [*elsewhere, "kube-system"]:
        for verb, call, args in (
            ("create", leases.create_namespaced_lease, (namespace, body("probe"))),
            ("update", leases.replace_namespaced_lease, (name, namespace, body("probe"))),
            ("delete", leases.delete_namespaced_lease, (name, namespace)),
            ("list", leases.list_namespaced_lease, (namespace,)),
        ):
            with pytest.raises(client.exceptions.ApiException) as caught:
                call(*args)
            assert caught.value.status == 403, (verb, namespace)


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
        # Leases in the release namespace only (the chart's Role <fullname>-leases).
        assert_lease_rights(sa_api, release_ns, [namespace, other_ns], unique)

        # What it must do: the core flows, with only this identity, holding the ConnectCluster's
        # Lease in the release namespace as the chart's pod does ($POD_NAMESPACE, $POD_NAME from
        # the downward API there).
        flags = lease_flags(client.AppsV1Api(core.api_client), release_ns)
        assert flags[0] == "--leader-election" and "--lease-prefix" in flags, flags
        prefix = flags[flags.index("--lease-prefix") + 1]
        operator = OperatorProcess(
            str(kubeconfig),
            namespace,
            tmp_path / "op.log",
            extra_env={"POD_NAMESPACE": release_ns, "POD_NAME": f"{service_account}-0"},
            extra_args=flags,
        )
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
            held = client.CoordinationV1Api(core.api_client).list_namespaced_lease(
                release_ns, label_selector=f"connect-offsets.io/lease-of={prefix}"
            )
            holders = [lease.spec.holder_identity or "" for lease in held.items]
            assert len(holders) == 1 and holders[0].startswith(f"{service_account}-0"), holders
            assert "forbidden" not in operator.log().lower(), operator.log()[-3000:]
        finally:
            operator.stop()
            connect.delete(f"/connectors/{name}")
        # Stopping released the Lease (an update, or a delete): that too was allowed.
        assert "forbidden" not in operator.log().lower(), operator.log()[-3000:]
    finally:
        subprocess.run([stack["helm"], "uninstall", release, "-n", release_ns], env=env, capture_output=True)
        for leftover in (other_ns, release_ns):
            delete_namespace(core, custom, leftover)


def test_rendered_chart_applies_server_side(stack: dict[str, Any], namespace: str, unique: str) -> None:
    """`helm template` output (two replicas; ServiceMonitor off: no such CRD here) applies cleanly,
    the Lease Role and RoleBinding included."""
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
        ],
        env,
    )
    assert "kind: Deployment" in rendered and "kind: ClusterRole" in rendered
    assert f"name: {release}-connect-offsets-operator-leases" in rendered
    assert "kopf.dev" not in rendered
    apply = subprocess.run(
        [stack["kubectl"], "apply", "--server-side", "-f", "-"], input=rendered, env=env, capture_output=True, text=True
    )
    try:
        assert apply.returncode == 0, apply.stderr
        assert "serverside-applied" in apply.stdout
        assert f"role.rbac.authorization.k8s.io/{release}-connect-offsets-operator-leases serverside-applied" in (
            apply.stdout
        )
    finally:
        subprocess.run(
            [stack["kubectl"], "delete", "--ignore-not-found", "--wait=false", "-f", "-"],
            input=rendered,
            env=env,
            capture_output=True,
            text=True,
        )
