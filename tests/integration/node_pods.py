"""The chart installed with ``helm`` on the stack's node, and its Pods as the API server and the
node's runtime show them (tests/integration/test_node_chart.py; docs/development.md#the-node).

The node is started by ``hack/stack.py up node`` and the operator image built by
``hack/build-image.sh`` and imported into the node's containerd (``stack.py node-image``, skipped
when containerd already has the very image). Pods are created through the node's API server; the
tests read them through it too (logs come from kubelet, which only that one reaches).
"""

from __future__ import annotations

import json
import re
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import httpx
import yaml
from kubernetes import client, config

from tests.conftest import REPO, STACK, stack_info, wait_for

CHART = REPO / "charts" / "connect-offsets-operator"
BUILD = ["bash", str(REPO / "hack" / "build-image.sh")]
#: The node's components (hack/stack.py GROUPS["node"]).
NODE_COMPONENTS = ("containerd", "node-apiserver", "node-controllers", "kube-scheduler", "kubelet", "kube-proxy")
#: The shared Connect worker as a Pod reaches it: the node gateway on the bridge's address.
CONNECT_PORT = 18083
#: The chart's user and group (values.yaml podSecurityContext).
CHART_USER = 65532


def run(cmd: list[str], timeout: float = 300) -> str:
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"{' '.join(cmd)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
    return result.stdout


@dataclass
class Node:
    """The running node, the image its containerd holds, and clients of its API server."""

    info: dict[str, Any]
    repository: str
    tag: str
    #: The node was not running before the tests started it (so they stop it again).
    started: bool
    api: client.ApiClient = field(repr=False)
    #: Wall seconds of each set-up step (up node, image build, image import).
    costs: dict[str, float] = field(default_factory=dict)

    @property
    def kubeconfig(self) -> str:
        return str(self.info["node_kubeconfig"])

    @property
    def connect_url(self) -> str:
        return f"http://{self.info['node_ip']}:{CONNECT_PORT}"

    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api)

    def apps(self) -> client.AppsV1Api:
        return client.AppsV1Api(self.api)

    def coordination(self) -> client.CoordinationV1Api:
        return client.CoordinationV1Api(self.api)

    def crictl(self, *args: str) -> str:
        return run([self.info["crictl"], f"--runtime-endpoint={self.info['containerd_endpoint']}", *args])

    def kubectl(self, *args: str) -> str:
        return run([self.info["kubectl"], f"--kubeconfig={self.kubeconfig}", *args])

    def ctr(self, *args: str) -> str:
        socket = self.info["containerd_endpoint"].removeprefix("unix://")
        return run(["ctr", "--address", socket, "--namespace", "k8s.io", *args])

    def tag_image(self, tag: str) -> None:
        """The same image under a second tag in the node's containerd (a new release's tag)."""
        self.ctr("images", "tag", "--force", f"{self.repository}:{self.tag}", f"{self.repository}:{tag}")

    def namespace(self, prefix: str) -> str:
        """A new namespace the node's Pods can run in (``stack.py node-namespace``)."""
        name = f"{prefix}-{uuid.uuid4().hex[:6]}"
        run([*STACK, "node-namespace", name])
        return name


def image_id(node_info: dict[str, Any], reference: str) -> str | None:
    """The image's id (its config digest) in the node's containerd, None when it has none."""
    endpoint = f"--runtime-endpoint={node_info['containerd_endpoint']}"
    result = subprocess.run(
        [node_info["crictl"], endpoint, "inspecti", "-o", "json", reference],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        return None
    found: str = json.loads(result.stdout)["status"]["id"]
    return found.removeprefix("sha256:")


def start_node() -> Node:
    """``up node`` (a no-op when it runs) beside the image's build (a no-op when nothing changed),
    then the image into containerd (only when containerd's copy is not that build). A node this
    started is stopped again if a step fails."""
    costs: dict[str, float] = {}
    before = stack_info()["running"]
    started = not all(before[name] for name in NODE_COMPONENTS)
    try:
        began = time.monotonic()
        up = subprocess.Popen([*STACK, "up", "node"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            reference = run(BUILD, timeout=900).strip().splitlines()[-1]
            costs["image build"] = time.monotonic() - began
        finally:
            output, _ = up.communicate(timeout=300)
        costs["up node (beside the build)"] = time.monotonic() - began
        assert up.returncode == 0, f"stack.py up node failed ({up.returncode}):\n{output}"
        info = stack_info()
        began = time.monotonic()
        built = run(["podman", "image", "inspect", "--format", "{{.Id}}", reference]).strip()
        if image_id(info, reference) != built:
            run([*STACK, "node-image", reference])
        costs["image import"] = time.monotonic() - began
    except BaseException:
        if started:
            subprocess.run([*STACK, "down", "node"], capture_output=True, timeout=300)
        raise
    repository, tag = reference.rsplit(":", 1)
    api = config.new_client_from_config(config_file=str(info["node_kubeconfig"]))  # type: ignore[no-untyped-call]
    return Node(info, repository, tag, started, api, costs)


def stop_node(node: Node) -> None:
    """The node as it was found: stopped again when the tests started it."""
    if node.started:
        run([*STACK, "down", "node"])


class Release:
    """One ``helm install`` of the chart in a namespace of its own, watching only that namespace,
    with the values the node needs (the local image, never pulled; the node's taint tolerated)."""

    def __init__(self, node: Node, namespace: str, name: str = "offsets") -> None:
        self.node = node
        self.namespace = namespace
        self.name = name
        self.values: list[str] = []

    @property
    def fullname(self) -> str:
        return f"{self.name}-connect-offsets-operator"

    def node_values(self, tag: str | None = None) -> list[str]:
        toleration = self.node.info["node_toleration"]
        return [
            f"image.repository={self.node.repository}",
            f"image.tag={tag or self.node.tag}",
            "image.pullPolicy=Never",
            f"watchNamespaces={{{self.namespace}}}",
            f"tolerations[0].key={toleration['key']},tolerations[0].operator=Exists",
        ]

    def helm_run(self, *args: str) -> str:
        """``helm`` on the node's API server, in the release's namespace."""
        return run([self.node.info["helm"], "--kubeconfig", self.node.kubeconfig, "-n", self.namespace, *args])

    def helm(self, command: str, *values: str, tag: str | None = None) -> str:
        args = [command, self.name, str(CHART), "--skip-crds"]
        for value in [*self.node_values(tag), *values]:
            args += ["--set", value]
        return self.helm_run(*args)

    def install(self, *values: str) -> None:
        self.values = list(values)
        self.helm("install", *values)

    def upgrade(self, *values: str, tag: str | None = None) -> None:
        self.values = list(values)
        self.helm("upgrade", *values, tag=tag)

    def uninstall(self) -> None:
        """``helm uninstall --wait --cascade foreground``: returns once every resource of the
        release, the Pods included, is gone from the API (nothing left on a finalizer)."""
        self.helm_run("uninstall", self.name, "--wait", "--cascade", "foreground", "--timeout", "120s")

    def installed(self) -> bool:
        listed = self.helm_run("list", "-q")
        return self.name in listed.split()

    def manifest(self) -> list[dict[str, Any]]:
        """The release's resources as helm recorded them."""
        out = self.helm_run("get", "manifest", self.name)
        return [doc for doc in yaml.safe_load_all(out) if doc]

    def pods(self) -> list[Any]:
        selector = f"app.kubernetes.io/instance={self.name}"
        pods: list[Any] = self.node.core().list_namespaced_pod(self.namespace, label_selector=selector).items
        return pods

    def wait_pods(self, what: str, check: Callable[[list[Any]], bool], timeout: float = 120) -> list[Any]:
        """The release's Pods once ``check`` holds for them (polled from the API server)."""
        found: list[Any] = []

        def done() -> bool:
            found[:] = self.pods()
            return check(found)

        try:
            wait_for(what, done, timeout=timeout, interval=0.2)
        except AssertionError as error:
            raise AssertionError(f"{error}; pods: {describe(found)}") from None
        return found

    def wait_ready(self, count: int, timeout: float = 120, image_tag: str | None = None) -> list[Any]:
        """Exactly ``count`` Pods, all Running and Ready (and none terminating), of ``image_tag``."""
        tag = image_tag or self.node.tag

        def ready(pods: list[Any]) -> bool:
            return len(pods) == count and all(
                is_ready(p) and p.metadata.deletion_timestamp is None and p.spec.containers[0].image.endswith(f":{tag}")
                for p in pods
            )

        return self.wait_pods(f"{count} Ready pod(s) of {self.name} in {self.namespace}", ready, timeout)

    def log(self, pod: str, previous: bool = False) -> str:
        """A Pod's operator log, from kubelet (through the node's API server)."""
        try:
            text: str = self.node.core().read_namespaced_pod_log(pod, self.namespace, previous=previous)
        except client.exceptions.ApiException as error:
            return f"<no log of {pod}: {error.status} {error.reason}>"
        return text

    def logs(self) -> str:
        return "\n".join(f"---- {p.metadata.name}\n{self.log(p.metadata.name)[-6000:]}" for p in self.pods())


def is_ready(pod: Any) -> bool:
    conditions = {c.type: c.status for c in pod.status.conditions or []}
    return bool(pod.status.phase == "Running" and conditions.get("Ready") == "True")


def describe(pods: list[Any]) -> list[str]:
    return [
        f"{p.metadata.name} {p.status.phase} ready={is_ready(p)} "
        f"deleting={p.metadata.deletion_timestamp is not None} image={p.spec.containers[0].image}"
        for p in pods
    ]


def container_id(pod: Any) -> str:
    """The operator container's id in containerd (``containerd://<id>`` in the Pod's status)."""
    status = pod.status.container_statuses[0]
    found: str = status.container_id
    return found.split("://", 1)[1]


PROBE_TOTAL = re.compile(r"^prober_probe_total\{(?P<labels>[^}]*)\} (?P<value>[0-9.e+]+)$", re.M)


def probes(node: Node, pod: Any) -> Counter[tuple[str, str]]:
    """The probes kubelet ran on the Pod's container so far, by (type, result): its own
    ``prober_probe_total`` counter (kubelet's /metrics/probes, through the node's API server)."""
    text = node.kubectl("get", "--raw", f"/api/v1/nodes/{node.info['node_name']}/proxy/metrics/probes")
    found: Counter[tuple[str, str]] = Counter()
    for match in PROBE_TOTAL.finditer(text):
        labels = dict(re.findall(r'(\w+)="([^"]*)"', match.group("labels")))
        if labels.get("pod_uid") == pod.metadata.uid:
            found[(labels["probe_type"], labels["result"])] += int(float(match.group("value")))
    return found


def ready_since(pod: Any) -> datetime:
    found: datetime = next(c.last_transition_time for c in pod.status.conditions if c.type == "Ready")
    return found


def assert_runs_as_the_chart_says(node: Node, pod: Any) -> None:
    """The running Pod as the chart declares it, and as the runtime really started it: non-root,
    read-only root filesystem, no privilege escalation or capabilities, its resources, its
    ServiceAccount token; Ready through its probes (kubelet counted successful readiness probes
    of it, the container started before it became Ready, and kopf's health endpoint answers on the
    Pod's IP)."""
    security = pod.spec.security_context
    assert security.run_as_non_root is True and security.run_as_user == CHART_USER, security
    container = pod.spec.containers[0]
    context = container.security_context
    assert context.read_only_root_filesystem is True, context
    assert context.allow_privilege_escalation is False, context
    assert context.capabilities.drop == ["ALL"], context
    for probe in (container.readiness_probe, container.liveness_probe):
        assert probe.http_get.path == "/healthz" and probe.http_get.port == "health", probe
    limits = container.resources.limits
    assert limits == {"cpu": "1", "memory": "2Gi"}, limits

    inspected = json.loads(node.crictl("inspect", "-o", "json", container_id(pod)))
    spec = inspected["info"]["runtimeSpec"]
    assert spec["process"]["user"]["uid"] == CHART_USER and spec["process"]["user"]["gid"] == CHART_USER, spec[
        "process"
    ]["user"]
    assert spec["root"]["readonly"] is True, spec["root"]
    assert spec["process"]["noNewPrivileges"] is True
    assert not spec["process"]["capabilities"].get("effective"), spec["process"]["capabilities"]
    assert spec["linux"]["resources"]["memory"]["limit"] == 2 * 1024**3, spec["linux"]["resources"]
    mounts = {m["destination"] for m in spec["mounts"]}
    assert "/var/run/secrets/kubernetes.io/serviceaccount" in mounts and "/tmp" in mounts, sorted(mounts)

    status = pod.status.container_statuses[0]
    assert status.ready and status.restart_count == 0, status
    assert ready_since(pod) >= status.state.running.started_at, (ready_since(pod), status.state.running.started_at)
    ran = probes(node, pod)
    assert ran[("Readiness", "successful")] >= 1, ran
    port = next(p.container_port for p in container.ports if p.name == "health")
    health = httpx.get(f"http://{pod.status.pod_ip}:{port}/healthz", timeout=5)
    assert health.status_code == 200, health.text
