"""The operator as a platform team installs it: the chart's RBAC, ServiceAccount token and settings.

``chart_operator`` installs the Helm chart for a set of tenant namespaces, takes its ServiceAccount's
token, and runs the ``connect-offsets-operator`` entry point out of cluster with that identity and
with exactly the environment and namespace arguments the chart's Deployment declares (no kubelet
runs here, so the Deployment's pod never starts; the process is the pod). Tests of multi-tenant
behaviour use it so that what they prove holds under the permissions users really grant.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client, config

from tests.conftest import REPO, OperatorProcess, delete_namespace
from tests.integration.support import free_port

CHART = REPO / "charts" / "connect-offsets-operator"


def run(cmd: list[str], env: dict[str, str]) -> str:
    result = subprocess.run(cmd, env=env, capture_output=True, text=True)
    assert result.returncode == 0, f"{' '.join(cmd)} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


@dataclass
class ChartOperator:
    """A running operator under the chart's identity, and what a test needs to reach it."""

    release: str
    release_namespace: str
    service_account: str
    kubeconfig: Path
    operator: OperatorProcess
    #: ``http://127.0.0.1:<port>/healthz``: the chart's liveness endpoint, on a free local port.
    liveness_url: str
    #: ``http://127.0.0.1:<port>/metrics``.
    metrics_url: str
    #: The environment the chart's Deployment sets (name -> value).
    chart_env: dict[str, str]

    def api(self) -> client.ApiClient:
        """A kubernetes client with the operator's own identity (to show what it may not do)."""
        return config.new_client_from_config(config_file=str(self.kubeconfig))


def sa_kubeconfig(path: Path, server: str, token: str) -> Path:
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "sa",
                "clusters": [{"name": "stack", "cluster": {"server": server, "insecure-skip-tls-verify": True}}],
                "users": [{"name": "sa", "user": {"token": token}}],
                "contexts": [{"name": "sa", "context": {"cluster": "stack", "user": "sa"}}],
            }
        )
    )
    return path


def _deployment_container(apps: Any, namespace: str) -> Any:
    deployments = apps.list_namespaced_deployment(namespace).items
    assert len(deployments) == 1, [d.metadata.name for d in deployments]
    return deployments[0].spec.template.spec.containers[0]


@contextlib.contextmanager
def chart_operator(
    stack: dict[str, Any],
    core: Any,
    custom: Any,
    tmp_path: Path,
    namespaces: list[str],
    *,
    values: list[str] | None = None,
    string_values: list[str] | None = None,
    extra_env: dict[str, str] | None = None,
    start: bool = True,
) -> Iterator[ChartOperator]:
    """Install the chart watching ``namespaces`` and run the operator with its ServiceAccount token.

    ``values`` are extra ``--set`` arguments (``string_values``: ``--set-string``, e.g. env values);
    ``extra_env`` is added to (or overrides) the chart's
    environment, for settings a test turns on. The drift interval is shortened to 5 s, as for every
    integration test's operator. The release and its
    namespace are removed afterwards; the tenant namespaces belong to the caller.
    """
    env = {**os.environ, "KUBECONFIG": stack["kubeconfig"]}
    release = f"mt-{uuid.uuid4().hex[:8]}"
    release_ns = f"{release}-op"
    args = [stack["helm"], "install", release, str(CHART), "-n", release_ns, "--create-namespace", "--skip-crds"]
    args += ["--set", "watchNamespaces={" + ",".join(namespaces) + "}"]
    # The local stack has no TLS, so credentials go over http: the chart's own setting, as a platform
    # team would set it (a test's ``values`` come later and may turn it off).
    args += ["--set", "credentials.allowPlaintext=true"]
    for value in values or []:
        args += ["--set", value]
    for value in string_values or []:
        args += ["--set-string", value]
    run(args, env)
    operator: OperatorProcess | None = None
    try:
        service_account = f"{release}-connect-offsets-operator"
        token = run(
            [stack["kubectl"], "create", "token", service_account, "-n", release_ns, "--duration", "2h"], env
        ).strip()
        kubeconfig = sa_kubeconfig(tmp_path / f"{release}-kubeconfig", stack["apiserver"], token)
        container = _deployment_container(client.AppsV1Api(core.api_client), release_ns)
        chart_env = {e.name: e.value for e in container.env or [] if e.value is not None}
        chart_args = list(container.args or [])
        watched = [chart_args[i + 1] for i, a in enumerate(chart_args) if a == "-n"]
        assert watched == namespaces, chart_args
        health, metrics_port = free_port(), free_port()
        # The chart's Leases as its pods hold them (the downward API's pod name and namespace), on
        # timings shortened like the drift interval: a Lease the replica makes is worked under only
        # one Lease duration later, which would otherwise add 15 s to every test's first reconcile.
        leases = [
            a for i, a in enumerate(chart_args) if a == "--leader-election" or chart_args[i - 1] == "--lease-prefix"
        ]
        assert leases[0] == "--leader-election", chart_args
        downward = {"POD_NAME": f"{release}-0", "POD_NAMESPACE": release_ns}
        operator = OperatorProcess(
            str(kubeconfig),
            namespaces[0],
            tmp_path / f"{release}-operator.log",
            extra_env={**chart_env, **downward, "CONNECT_OFFSETS_DRIFT_INTERVAL": "5", **(extra_env or {})},
            extra_args=[
                *[a for n in namespaces[1:] for a in ("-n", n)],
                "--leader-election",
                "--lease-prefix",
                leases[-1],
                *("--lease-duration", "3", "--renew-deadline", "2", "--retry-period", "0.5"),
                "--liveness",
                f"http://127.0.0.1:{health}/healthz",
                "--metrics-port",
                str(metrics_port),
            ],
        )
        if start:
            operator.start()
        yield ChartOperator(
            release=release,
            release_namespace=release_ns,
            service_account=service_account,
            kubeconfig=kubeconfig,
            operator=operator,
            liveness_url=f"http://127.0.0.1:{health}/healthz",
            metrics_url=f"http://127.0.0.1:{metrics_port}/metrics",
            chart_env=chart_env,
        )
    finally:
        if operator is not None:
            operator.stop()
        subprocess.run([stack["helm"], "uninstall", release, "-n", release_ns], env=env, capture_output=True)
        delete_namespace(core, custom, release_ns)


@contextlib.contextmanager
def tenant_namespaces(core: Any, custom: Any, base: str, count: int = 2) -> Iterator[list[str]]:
    """``count`` extra namespaces named after a test's own (``<base>-a``, ``-b`` ...), removed afterwards."""
    names = [f"{base[:58]}-{chr(ord('a') + i)}" for i in range(count)]
    for name in names:
        core.create_namespace({"metadata": {"name": name}})
    try:
        yield names
    finally:
        for name in names:
            delete_namespace(core, custom, name)


def set_configmap_verb(core: Any, role_name: str, namespace: str, verb: str, *, granted: bool) -> None:
    """What a platform team does to the chart's Role in one tenant namespace: take a ConfigMap verb
    away, or give it back."""
    rbac = client.RbacAuthorizationV1Api(core.api_client)
    role = rbac.read_namespaced_role(role_name, namespace)
    for rule in role.rules:
        if "configmaps" in rule.resources:
            rule.verbs = [v for v in rule.verbs if v != verb] + ([verb] if granted else [])
    rbac.replace_namespaced_role(role_name, namespace, role)
