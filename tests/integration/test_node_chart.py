"""The Helm chart as users run it (issue 47): ``helm install`` on the stack's node, where the
operator runs as the chart's Pods under kubelet, probes, a Deployment or StatefulSets, Leases.

What each test asserts is what a user sees: the Pods' phase and readiness from the API server, the
running Pod spec and the runtime spec containerd gave runc (non-root, read-only root filesystem,
resources, the ServiceAccount token), ConfigMaps written, and every write that reached the shared
Connect worker, counted per connector in its request log (tests/integration/connect_writes.py): a
stop, a ``PATCH``/``DELETE .../offsets``, a resume, a connector ``DELETE``, each exactly once.
These are the Pod counterparts of test_replicas.py, which proves the same with processes.

The Pods reach Connect through the node gateway (10.244.0.1:18083); they cannot reach Kafka (it
advertises 127.0.0.1), so only Connect REST features run here: list, alter, reset, stop, delete.
One xdist group: one worker sets the node up once (hack/stack.py up node, the image built and
imported) and runs the scenarios in order, each in a namespace of its own. A node these tests
started is stopped after them (``stack.py down node``); one that ran before is left running.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import delete_leftover_connectors, delete_namespace, wait_for
from tests.integration.connect_writes import (
    LINE,
    holders,
    once_each,
    position_doc,
    source_lines,
    stopped_changed_resumed,
    writes,
)
from tests.integration.node_pods import Node, Release, assert_runs_as_the_chart_says, start_node, stop_node
from tests.integration.support import (
    annotate,
    configmap_offsets,
    connect_log,
    connect_offsets,
    create_cluster,
    create_connector,
    file_source_spec,
    get_connector,
    offsets_requests,
    request_lines,
    wait_annotation_removed,
    wait_condition,
)

pytestmark = [pytest.mark.xdist_group("node"), pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def node(stack: dict[str, Any]) -> Iterator[Node]:
    started = start_node()
    print("\nnode set-up: " + ", ".join(f"{step} {seconds:.1f}s" for step, seconds in started.costs.items()))
    yield started
    stop_node(started)


@pytest.fixture
def release(node: Node, core: Any, custom: Any, request: pytest.FixtureRequest) -> Iterator[Release]:
    """The chart's release in a namespace of its own; uninstalled (and its Pods gone) afterwards."""
    prefix = "nc-" + request.node.name.removeprefix("test_")[:20].replace("_", "-").strip("-")
    installed = Release(node, node.namespace(prefix))
    yield installed
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        print(f"---- operator pods of {installed.namespace} ----\n{installed.logs()}")
    if installed.installed():
        installed.uninstall()
    delete_leftover_connectors(custom, installed.namespace)
    delete_namespace(core, custom, installed.namespace)


@pytest.fixture
def connect(stack: dict[str, Any]) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=stack["connect_url"], timeout=30) as client:
        yield client


def running_connector(custom: Any, core: Any, release: Release, tmp_path: Path, name: str, **spec: Any) -> Path:
    """A RUNNING file source through the release's Pods on its own ConnectCluster (``c-<name>``),
    with an offsets ConfigMap (``<name>-offsets``) moving it back to line 8. Returns its file."""
    namespace = release.namespace
    source = source_lines(tmp_path / f"{name}.txt")
    create_cluster(custom, namespace, release.node.connect_url, name=f"c-{name}")
    body = file_source_spec(source, name, f"{name}-offsets")
    body.update(spec)
    create_connector(custom, namespace, name, body, cluster=f"c-{name}")
    data = {"offsets.json": position_doc(source, 8 * LINE)}
    core.create_namespaced_config_map(namespace, {"metadata": {"name": f"{name}-offsets"}, "data": data})
    return source


def test_a_default_install_is_ready_through_its_probes_and_serves_list_alter_and_reset(
    node: Node,
    release: Release,
    stack: dict[str, Any],
    custom: Any,
    core: Any,
    connect: httpx.Client,
    tmp_path: Path,
    unique: str,
) -> None:
    """``helm install`` with the chart's defaults (and only what the node needs): one Pod, Ready
    through its own probes, running as the chart declares; a list, an alter with stop-connector and
    a reset run through it, each reaching Connect once."""
    began = time.monotonic()
    release.install()
    [pod] = release.wait_ready(1)
    ready_after = time.monotonic() - began
    assert_runs_as_the_chart_says(node, pod)

    namespace, name = release.namespace, f"nd-{unique}"
    source = running_connector(custom, core, release, tmp_path, name)
    wait_condition(custom, namespace, name, "Ready", reason="ConnectorRunning", timeout=120)
    assert set(holders(node.coordination(), namespace).values()) == {pod.metadata.name}
    wait_for("offsets committed", lambda: connect_offsets(connect, name), timeout=60)
    log = connect_log(stack)

    seen = len(offsets_requests(log, {name}))
    annotate(custom, namespace, name, connector_offsets="list")
    wait_annotation_removed(custom, namespace, name)
    listed = configmap_offsets(core, namespace, f"{name}-offsets")
    assert listed["offsets"] and listed["offsets"][0]["partition"] == {"filename": str(source)}, listed
    assert listed["offsets"][0]["offset"]["position"] > 0, listed
    asked = offsets_requests(log, {name})[seen:]
    assert [(r.method, r.status) for r in asked] == [("GET", 200)], asked

    core.patch_namespaced_config_map(
        f"{name}-offsets", namespace, {"data": {"offsets.json": position_doc(source, 8 * LINE)}}
    )
    for operation, change in (("alter", "PATCH"), ("reset", "DELETE")):
        seen = len(request_lines(log))
        annotate(custom, namespace, name, connector_offsets=operation, stop_connector="true")
        wait_annotation_removed(custom, namespace, name)
        expected = stopped_changed_resumed(name, (change, f"/connectors/{name}/offsets"))
        once_each(writes(log, seen, {name}), expected)
        last = get_connector(custom, namespace, name)["status"]["lastOffsetsOperation"]
        assert last["result"] == "Succeeded", last

    [after] = release.wait_ready(1)
    assert after.metadata.uid == pod.metadata.uid and after.status.container_statuses[0].restart_count == 0
    print(f"\ndefault install: Pod Ready {ready_after:.1f}s after helm install")
