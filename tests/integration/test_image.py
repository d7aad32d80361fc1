"""The operator image itself (operator/Dockerfile, built by hack/build-image.sh): the process runs in
the image's root filesystem, under the image's non-root user, and manages a connector.

Marked ``image`` (make test-image): ``make test`` and ``make integration`` do not select it (a cold
build takes about two minutes and needs podman and root for the debootstrapped base). The image is
built (or found up to date in podman's layer cache) by ``hack/build-image.sh``; the chart is
installed with that image as its repository, and the image runs the way the chart's Deployment
would run it (no kubelet here: ``podman run`` is the pod): the chart's ServiceAccount token, its
environment and arguments, a read-only root filesystem with a scratch /tmp, host network to reach
the local stack on 127.0.0.1.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client

from tests.conftest import REPO, OperatorProcess, wait_for
from tests.integration.chart_install import chart_operator
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

pytestmark = [pytest.mark.image, pytest.mark.timeout(900)]

BUILD = ["bash", str(REPO / "hack" / "build-image.sh")]
#: Where the ServiceAccount's kubeconfig is mounted in the container.
KUBECONFIG_IN_IMAGE = "/etc/connect-offsets/kubeconfig"


@pytest.fixture(scope="module")
def image() -> tuple[str, list[str]]:
    """The image reference hack/build-image.sh built, and the extra podman arguments this host needs."""
    built = subprocess.run(BUILD, capture_output=True, text=True)
    assert built.returncode == 0, f"hack/build-image.sh failed:\n{built.stderr[-6000:]}"
    reference = built.stdout.strip().splitlines()[-1]
    engine = subprocess.run([*BUILD, "--podman-args"], check=True, capture_output=True, text=True).stdout.split()
    return reference, engine


class ContainerOperator:
    """An ``OperatorProcess``'s kubeconfig, environment and arguments, run from the image with podman."""

    def __init__(self, process: OperatorProcess, reference: str, engine: list[str]):
        self.process = process
        self.reference = reference
        self.engine = engine
        self.name = f"connect-offsets-test-{uuid.uuid4().hex[:8]}"
        self.log_path = process.log_path
        self.popen: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        kubeconfig = Path(self.process.kubeconfig)
        kubeconfig.chmod(0o644)  # the container's user (65532) reads it through the bind mount
        env = {
            # What OperatorProcess.start sets for every integration test's operator, then the chart's.
            "CONNECT_OFFSETS_DRIFT_INTERVAL": "5",
            "CONNECT_OFFSETS_ALLOW_PLAINTEXT_CREDENTIALS": "true",
            **self.process.extra_env,
            "KUBECONFIG": KUBECONFIG_IN_IMAGE,
        }
        command = ["podman", "run", "--rm", "--name", self.name, "--network", "host", *self.engine]
        command += ["--read-only", "--read-only-tmpfs=false", "--tmpfs", "/tmp"]
        command += ["-v", f"{kubeconfig}:{KUBECONFIG_IN_IMAGE}:ro"]
        command += [a for key, value in env.items() for a in ("-e", f"{key}={value}")]
        command += [self.reference, "-n", self.process.namespace, *self.process.extra_args]
        log = self.log_path.open("ab")
        self.popen = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)

    def host_pid(self) -> int:
        """The container's main process as the host kernel sees it."""

        def running() -> int | None:
            assert self.popen is not None and self.popen.poll() is None, self.log()[-3000:]
            out = subprocess.run(
                ["podman", "inspect", "--format", "{{.State.Pid}}", self.name], capture_output=True, text=True
            ).stdout.strip()
            return int(out) if out.isdigit() and int(out) > 0 else None

        return wait_for(f"container {self.name} running", running, timeout=60)

    def stop(self) -> None:
        if self.popen is not None:
            subprocess.run(["podman", "stop", "-t", "15", self.name], capture_output=True)
            try:
                self.popen.wait(timeout=30)
            except subprocess.TimeoutExpired:
                subprocess.run(["podman", "rm", "-f", self.name], capture_output=True)
                self.popen.wait()
            self.popen = None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


@pytest.fixture
def container_operator(
    image: tuple[str, list[str]], stack: dict[str, Any], core: Any, custom: Any, tmp_path: Path, namespace: str
) -> Iterator[tuple[ContainerOperator, Any]]:
    """The chart installed with the built image as its repository (default tag: the appVersion), and
    the image run with the chart's identity, environment and arguments. Yields the container and the
    chart's Deployment container spec."""
    reference, engine = image
    repository = reference.rsplit(":", 1)[0]
    with chart_operator(
        stack, core, custom, tmp_path, [namespace], values=[f"image.repository={repository}"], start=False
    ) as installed:
        deployment = client.AppsV1Api(core.api_client).list_namespaced_deployment(installed.release_namespace)
        spec = deployment.items[0].spec.template.spec.containers[0]
        container = ContainerOperator(installed.operator, reference, engine)
        container.start()
        try:
            yield container, spec
        finally:
            container.stop()


def test_operator_runs_from_the_image(
    container_operator: tuple[ContainerOperator, Any],
    image: tuple[str, list[str]],
    custom: Any,
    core: Any,
    namespace: str,
    connect: httpx.Client,
    connect_url: str,
    tmp_path: Path,
    unique: str,
) -> None:
    container, spec = container_operator
    reference, _ = image
    # `helm install` with only image.repository set pulls exactly what the build tagged.
    assert spec.image == reference, (spec.image, reference)

    # The process: in the image's root filesystem, as the image's user (no --user was given).
    pid = container.host_pid()
    status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    assert status["Uid"].split() == ["65532"] * 4, status["Uid"]
    assert status["Gid"].split() == ["65532"] * 4, status["Gid"]
    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    assert any(part.endswith(b"/opt/venv/bin/connect-offsets-operator") for part in cmdline), cmdline
    rootfs = Path(f"/proc/{pid}/root")
    assert "connect-offsets:x:65532:65532:" in (rootfs / "etc" / "passwd").read_text()
    assert (rootfs / "opt" / "venv" / "bin" / "connect-offsets-operator").is_file()

    # One list and one alter, driven by the annotation.
    source = tmp_path / "s.txt"
    source.write_text("alpha\nbeta\n")
    name = f"image-{unique}"
    try:
        create_cluster(custom, namespace, connect_url)
        create_connector(custom, namespace, name, file_source_spec(source, name, "image-offsets"))
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorRunning", timeout=120)
        wait_for("offsets committed", lambda: connect_offsets(connect, name))
        annotate(custom, namespace, name, connector_offsets="list")
        wait_annotation_removed(custom, namespace, name)
        listed = configmap_offsets(core, namespace, "image-offsets")
        assert listed["offsets"] == connect_offsets(connect, name), listed
        assert listed["offsets"][0]["offset"]["position"] > 0, listed

        patch_connector(custom, namespace, name, {"spec": {"state": "stopped"}})
        listed["offsets"][0]["offset"]["position"] = 6
        core.patch_namespaced_config_map("image-offsets", namespace, {"data": {"offsets.json": json.dumps(listed)}})
        annotate(custom, namespace, name, connector_offsets="alter")
        wait_annotation_removed(custom, namespace, name)
        assert connect_offsets(connect, name)[0]["offset"] == {"position": 6}
        assert "forbidden" not in container.log().lower(), container.log()[-3000:]
    except BaseException:
        print("---- operator (container) log, tail ----")
        print(container.log()[-8000:])
        raise
    finally:
        connect.delete(f"/connectors/{name}")
