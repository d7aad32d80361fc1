"""The Helm chart as users run it (issue 47): ``helm install`` on the stack's node, where the
operator runs as the chart's Pods under kubelet, probes, a Deployment or StatefulSets, Leases.

What each test asserts is what a user sees: the Pods' phase and readiness from the API server, the
running Pod spec and the runtime spec containerd gave runc (non-root, read-only root filesystem,
resources, the ServiceAccount token), ConfigMaps written, and every write that reached the shared
Connect worker, counted per connector in its request log (tests/integration/connect_writes.py): a
stop, a ``PATCH``/``DELETE .../offsets``, a resume, a connector ``DELETE``, each exactly once.
A drain's eviction goes through the chart's PodDisruptionBudget. These are the Pod counterparts of
test_replicas.py, which proves the same with processes.

The Pods reach Connect and Kafka through the node gateway on the node's address (10.244.0.1:18083
for Connect; the brokers' PODS listeners, which advertise that address, for Kafka: hack/stack.py
``kafka_properties``), so the Pod's Kafka client runs too: a sink's lag and a seek to a time.
One xdist group: one worker sets the node up once (hack/stack.py up node, the image built and
imported) and runs the scenarios in order, each in a namespace of its own. A node these tests
started is stopped after them (``stack.py down node``); one that ran before is left running.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kubernetes import client

from connect_offsets.controller import owner_of
from tests.conftest import delete_leftover_connectors, delete_namespace, wait_for
from tests.integration.connect_writes import (
    LINE,
    holders,
    once_each,
    position_doc,
    resets_and_deletions_once,
    source_lines,
    stopped_changed_resumed,
    writes,
)
from tests.integration.node_pods import (
    Node,
    Release,
    assert_runs_as_the_chart_says,
    container_id,
    probes,
    start_node,
    stop_node,
)
from tests.integration.support import (
    FILE_SINK,
    GROUP,
    VERSION,
    annotate,
    configmap_offsets,
    connect_log,
    connect_offsets,
    connector_absent,
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

#: Lease timings for every scenario but the first (which keeps the chart's 15 / 10 / 2 s): a
#: ConnectCluster's new Lease is worked under only one lease duration after it is made, and a dead holder's is
#: taken over after one, so the defaults would add 15 s to every new cluster and every take-over.
SHORT_LEASES = "leaderElection.leaseDuration=5,leaderElection.renewDeadline=3,leaderElection.retryPeriod=1"
#: The sink's records carry 2023 times: record i at BASE_MS + i seconds.
BASE_MS = 1_700_000_000_000


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
    with httpx.Client(base_url=stack["connect_url"], timeout=30) as http:
        yield http


def running_connector(
    custom: Any, core: Any, release: Release, tmp_path: Path, name: str, cluster: str | None = None, **spec: Any
) -> Path:
    """A RUNNING file source through the release's Pods, on ``cluster`` (created beforehand) or on
    a ConnectCluster of its own (``c-<name>``), with an offsets ConfigMap (``<name>-offsets``)
    moving it back to line 8. Returns its file."""
    namespace = release.namespace
    source = source_lines(tmp_path / f"{name}.txt")
    if cluster is None:
        cluster = f"c-{name}"
        create_cluster(custom, namespace, release.node.connect_url, name=cluster)
    body = file_source_spec(source, name, f"{name}-offsets")
    body.update(spec)
    create_connector(custom, namespace, name, body, cluster=cluster)
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
    # The chart's metrics Service, routed by kube-proxy to the Pod: the three operations counted.
    selector = "app.kubernetes.io/component=metrics"
    services: list[Any] = node.core().list_namespaced_service(namespace, label_selector=selector).items
    [service] = services
    port = service.spec.ports[0].port
    scraped = httpx.get(f"http://{service.spec.cluster_ip}:{port}/metrics", timeout=10)
    assert scraped.status_code == 200, scraped.text[:500]
    for operation in ("list", "alter", "reset"):
        labels = f'kind="KafkaConnector",operation="{operation}",result="Succeeded"'
        counted = f"connect_offsets_offsets_operations_total{{{labels}}} 1.0"
        assert counted in scraped.text, [line for line in scraped.text.splitlines() if "operations_total" in line]
    ran = dict(probes(node, after))
    print(f"\ndefault install: Pod Ready {ready_after:.1f}s after helm install; kubelet's probes of it: {ran}")


def timed_records(bootstrap: str, topic: str, count: int) -> None:
    """``count`` JSON records on one partition of a new topic, record i stamped BASE_MS + i s (kept
    for ever: 2023 stamps would fall to the broker's 7-day retention mid-test)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new_topic = NewTopic(topic, num_partitions=1, replication_factor=1, config={"retention.ms": "-1"})
    admin.create_topics([new_topic])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        producer.produce(topic, value=json.dumps(f"r{i}").encode(), timestamp=BASE_MS + i * 1000)
    assert producer.flush(30) == 0


def test_a_sink_through_the_pods_kafka_listener_reports_its_lag_and_seeks_to_a_time(
    node: Node,
    release: Release,
    stack: dict[str, Any],
    custom: Any,
    core: Any,
    connect: httpx.Client,
    tmp_path: Path,
    unique: str,
) -> None:
    """The Pod's own Kafka client, on the brokers' PODS listener (the node's address, through the
    node gateway): a RUNNING sink's lag in status (Progressing True, lag 0 once it has read all),
    and a seek to a time with stop-connector that moves it back to record 3 of 6, which the sink
    then writes again, its stop, PATCH and resume each reaching Connect once. The lag is measured
    each drift interval: 5 s here (``driftIntervalSeconds``, as a user may set it), not 30."""
    release.install(SHORT_LEASES, "driftIntervalSeconds=5")
    release.wait_ready(1)
    namespace, name = release.namespace, f"nk-{unique}"
    topic, out = f"nodeseek-{unique}", tmp_path / "sink.txt"
    timed_records(stack["kafka_a"], topic, 6)
    create_cluster(custom, namespace, node.connect_url, name="k", kafka={"bootstrapServers": stack["kafka_a_pods"]})
    sink = {
        "class": FILE_SINK,
        "config": {"topics": topic, "file": str(out)},
        "listOffsets": {"toConfigMap": {"name": f"{name}-offsets"}},
    }
    create_connector(custom, namespace, name, sink, cluster="k")
    wait_for(
        "the sink wrote all 6 records", lambda: out.exists() and len(out.read_text().splitlines()) == 6, timeout=120
    )
    # Lag read by the Pod from Kafka: the consumer group's committed offset against the end offset.
    wait_for(
        "lag 0 in status",
        lambda: (get_connector(custom, namespace, name).get("status") or {}).get("progress", {}).get("totalLag") == 0,
        timeout=120,
    )
    condition = wait_condition(custom, namespace, name, "Progressing", status="True", timeout=60)
    assert condition["reason"] in ("UpToDate", "Advancing"), condition

    log = connect_log(stack)
    seen = len(request_lines(log))
    when = datetime.fromtimestamp((BASE_MS + 3000) / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    annotate(custom, namespace, name, connector_offsets="alter", seek_to=when, stop_connector="true")
    body = wait_annotation_removed(custom, namespace, name, timeout=120)
    last = body["status"]["lastOffsetsOperation"]
    assert last["result"] == "Succeeded", last
    once_each(writes(log, seen, {name}), stopped_changed_resumed(name, ("PATCH", f"/connectors/{name}/offsets")))
    wait_for("records 3..5 written again", lambda: len(out.read_text().splitlines()) == 9, timeout=120)
    assert out.read_text().splitlines()[6:] == ["r3", "r4", "r5"]  # nothing else written again
    connect.delete(f"/connectors/{name}")


def running_on_one_cluster(custom: Any, core: Any, release: Release, tmp_path: Path, names: list[str]) -> None:
    """RUNNING file sources on one ConnectCluster (``shared``), Ready once all are."""
    create_cluster(custom, release.namespace, release.node.connect_url, name="shared")
    for name in names:
        running_connector(custom, core, release, tmp_path, name, cluster="shared")
    for name in names:
        wait_condition(custom, release.namespace, name, "Ready", reason="ConnectorRunning", timeout=120)


def wait_absent(custom: Any, namespace: str, name: str, timeout: float) -> None:
    assert wait_for(f"{name} gone", lambda: connector_absent(custom, namespace, name), timeout=timeout)


def pending(custom: Any, namespace: str, names: list[str]) -> bool:
    return any((get_connector(custom, namespace, n).get("status") or {}).get("pendingOffsetsOperation") for n in names)


def alters_under_way(custom: Any, namespace: str, names: list[str], log: Path) -> int:
    """Alters with stop-connector asked of ``names``, and the first claim seen; the worker's
    request lines before them."""
    seen = len(request_lines(log))
    for name in names:
        annotate(custom, namespace, name, connector_offsets="alter", stop_connector="true")
    assert wait_for("a claim", lambda: pending(custom, namespace, names), timeout=30, interval=0.05)
    return seen


def each_alter_once(custom: Any, namespace: str, names: list[str], log: Path, seen: int) -> None:
    """Every alter succeeded, and its stop, PATCH and resume reached Connect once."""
    once_each(
        writes(log, seen, set(names)),
        [w for n in names for w in stopped_changed_resumed(n, ("PATCH", f"/connectors/{n}/offsets"))],
    )
    for name in names:
        last = get_connector(custom, namespace, name)["status"]["lastOffsetsOperation"]
        assert last["result"] == "Succeeded", (name, last)


def task_status(node: Node, container: str) -> str:
    """The container's task status in containerd (RUNNING, PAUSED, ...)."""
    for line in node.ctr("task", "ls").splitlines():
        words = line.split()
        if words and words[0] == container:
            return words[-1]
    return "absent"


def the_leader(release: Release, pods: list[Any]) -> tuple[Any, Any]:
    """(the Pod holding the namespace's one ConnectCluster Lease, the other Pod)."""
    held = set(holders(release.node.coordination(), release.namespace).values())
    assert len(held) == 1, held
    [leader] = [p for p in pods if p.metadata.name in held]
    [other] = [p for p in pods if p.metadata.name not in held]
    return leader, other


def test_uninstall_leaves_nothing_on_a_finalizer_and_a_reinstall_serves_what_was_asked_meanwhile(
    node: Node,
    release: Release,
    stack: dict[str, Any],
    custom: Any,
    core: Any,
    tmp_path: Path,
    unique: str,
) -> None:
    """``helm uninstall`` removes every resource of the release, its Pod included, and nothing
    waits on a finalizer; the user's resources stay as they were. An alter asked and a connector
    deleted while no operator runs are served once the chart is installed again: the alter's stop,
    PATCH and resume and the connector's DELETE reach Connect once."""
    release.install(SHORT_LEASES)
    release.wait_ready(1)
    namespace = release.namespace
    kept, deleted = f"nk-{unique}", f"nx-{unique}"
    for name in (kept, deleted):
        running_connector(custom, core, release, tmp_path, name)
    for name in (kept, deleted):
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorRunning", timeout=120)
    resources = [f"{doc['kind'].lower()}/{doc['metadata']['name']}" for doc in release.manifest()]
    assert "deployment/" + release.fullname in resources, resources

    began = time.monotonic()
    release.uninstall()  # --wait --cascade foreground
    uninstalled = time.monotonic() - began

    def left() -> str:
        return str(node.kubectl("get", *resources, "-n", namespace, "--ignore-not-found", "-o", "name")).strip()

    # helm's wait can end while the garbage collector still deletes a foreground deletion's
    # dependents (the Deployment stays until its ReplicaSet and Pod are gone): seen in CI under
    # load, the Deployment listed right after helm returned. Gone soon after, without anyone's help.
    assert wait_for("the release's objects gone", lambda: left() == "", timeout=60, interval=0.5), left()
    assert wait_for("the release's Pods gone", lambda: release.pods() == [], timeout=60, interval=0.5)
    for name in (kept, deleted):
        body = get_connector(custom, namespace, name)
        assert body["metadata"].get("deletionTimestamp") is None, body["metadata"]

    log = connect_log(stack)
    seen = len(request_lines(log))
    annotate(custom, namespace, kept, connector_offsets="alter", stop_connector="true")
    custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, "kafkaconnectors", deleted)
    # No operator: the deletion waits on the operator's finalizer, as it should, until it is back.
    assert get_connector(custom, namespace, deleted)["metadata"]["deletionTimestamp"]

    began = time.monotonic()
    release.install(SHORT_LEASES)
    [pod] = release.wait_ready(1)
    wait_annotation_removed(custom, namespace, kept, timeout=120)
    wait_absent(custom, namespace, deleted, timeout=120)
    served = time.monotonic() - began
    expected = [
        *stopped_changed_resumed(kept, ("PATCH", f"/connectors/{kept}/offsets")),
        ("DELETE", f"/connectors/{deleted}"),
    ]
    once_each(writes(log, seen, {kept, deleted}), expected)
    last = get_connector(custom, namespace, kept)["status"]["lastOffsetsOperation"]
    assert last["result"] == "Succeeded", last
    assert set(holders(node.coordination(), namespace).values()) == {pod.metadata.name}
    assert_runs_as_the_chart_says(node, release.wait_ready(1)[0])
    print(f"\nuninstall --wait {uninstalled:.1f}s; reinstalled and both served {served:.1f}s after helm install")


def two_replicas_mid_alters(
    release: Release, stack: dict[str, Any], custom: Any, core: Any, tmp_path: Path, names: list[str]
) -> tuple[list[Any], Any, Any, Path, int]:
    """``replicaCount: 2`` with short Lease timings, ``names`` RUNNING on one ConnectCluster, and an
    alter with stop-connector asked on each: (both Pods, the Lease holder, the other, Connect's
    request log, its line count before the alters)."""
    release.install("replicaCount=2", SHORT_LEASES)
    pods = release.wait_ready(2)
    running_on_one_cluster(custom, core, release, tmp_path, names)
    leader, other = the_leader(release, pods)
    log = connect_log(stack)
    seen = alters_under_way(custom, release.namespace, names, log)
    return pods, leader, other, log, seen


def test_two_replicas_the_leader_pod_deleted_mid_operation_every_write_once(
    node: Node,
    release: Release,
    stack: dict[str, Any],
    custom: Any,
    core: Any,
    tmp_path: Path,
    unique: str,
) -> None:
    """``replicaCount: 2``: the Pod holding the cluster's Lease is force-deleted (``kubectl delete
    pod --grace-period=0 --force``) right after four alters with stop-connector were asked. The
    other Pod finishes them, the Deployment replaces the deleted one, and every stop, PATCH and
    resume reached Connect once."""
    namespace = release.namespace
    names = [f"nk{i}-{unique}" for i in range(4)]
    _pods, leader, other, log, seen = two_replicas_mid_alters(release, stack, custom, core, tmp_path, names)
    killed_container = container_id(leader)
    node.kubectl("delete", "pod", leader.metadata.name, "-n", namespace, "--grace-period=0", "--force")
    deleted = time.monotonic()
    for name in names:
        wait_annotation_removed(custom, namespace, name, timeout=120)
    took = time.monotonic() - deleted
    # The API forgets a force-deleted Pod at once; kubelet stops its container afterwards. Counted
    # once it has: whatever the deleted Pod still sent is in Connect's log by then.
    wait_for("the deleted Pod's container stopped", lambda: task_status(node, killed_container) != "RUNNING")
    gone = time.monotonic() - deleted
    each_alter_once(custom, namespace, names, log, seen)
    after = release.wait_ready(2)
    running = {p.metadata.name for p in after}
    assert leader.metadata.name not in running, running
    # The one writer after the deletion: the other Pod, or the Deployment's new one if it won the
    # Lease first; never the deleted Pod, and the same one for every alter it took over.
    [holder] = set(holders(node.coordination(), namespace).values())
    assert holder in running, (holder, running)
    claims = {get_connector(custom, namespace, name)["status"]["claimedBy"].split("_")[0] for name in names}
    assert claims <= {leader.metadata.name, holder}, claims
    for pod in after:
        assert_runs_as_the_chart_says(node, pod)
    print(
        f"\nleader Pod deleted: {'the other' if holder == other.metadata.name else 'its replacement'} finished "
        f"all {len(names)} alters {took:.1f}s after the deletion; claims by {sorted(claims)}; the deleted "
        f"Pod's container stopped within {gone:.1f}s"
    )


def test_two_replicas_the_leader_evicted_as_a_node_drain_does_mid_operation_every_write_once(
    node: Node,
    release: Release,
    stack: dict[str, Any],
    custom: Any,
    core: Any,
    tmp_path: Path,
    unique: str,
) -> None:
    """A node drain's eviction (the Eviction API, as ``kubectl drain`` calls it), governed by the
    chart's PodDisruptionBudget (``minAvailable: 1`` of ``replicaCount: 2``): the Pod holding the
    cluster's Lease is evicted right after four alters with stop-connector were asked, and stops
    gracefully (SIGTERM, its passes drained, its Lease released); a second eviction meanwhile is
    refused by the budget (429), so a Pod is always there to take over. Every stop, PATCH and
    resume reached Connect once."""
    namespace = release.namespace
    names = [f"ne{i}-{unique}" for i in range(4)]
    policy = client.PolicyV1Api(node.api)

    def allowed() -> int | None:
        [budget] = policy.list_namespaced_pod_disruption_budget(namespace).items
        return None if budget.status is None else budget.status.disruptions_allowed

    _pods, leader, other, log, seen = two_replicas_mid_alters(release, stack, custom, core, tmp_path, names)
    assert wait_for("the budget allows one eviction", lambda: allowed() == 1, timeout=60)
    evicted_container = container_id(leader)
    node.core().create_namespaced_pod_eviction(
        leader.metadata.name,
        namespace,
        client.V1Eviction(metadata=client.V1ObjectMeta(name=leader.metadata.name, namespace=namespace)),
    )
    evicted = time.monotonic()
    with pytest.raises(client.ApiException) as refused:  # the drain's next eviction waits: 429
        node.core().create_namespaced_pod_eviction(
            other.metadata.name,
            namespace,
            client.V1Eviction(metadata=client.V1ObjectMeta(name=other.metadata.name, namespace=namespace)),
        )
    assert refused.value.status == 429 and "disruption budget" in str(refused.value.body), refused.value.body
    for name in names:
        wait_annotation_removed(custom, namespace, name, timeout=120)
    took = time.monotonic() - evicted
    # Graceful: the Pod leaves the API once kubelet has stopped its container (a drain's wait).
    wait_for("the evicted Pod gone", lambda: leader.metadata.name not in {p.metadata.name for p in release.pods()})
    assert task_status(node, evicted_container) != "RUNNING"
    each_alter_once(custom, namespace, names, log, seen)
    after = release.wait_ready(2)
    running = {p.metadata.name for p in after}
    [holder] = set(holders(node.coordination(), namespace).values())
    assert holder in running and leader.metadata.name not in running, (holder, running)
    for pod in after:
        assert_runs_as_the_chart_says(node, pod)
    print(f"\nleader evicted: all {len(names)} alters finished {took:.1f}s after the eviction; Lease held by {holder}")


def test_two_replicas_a_frozen_leader_woken_after_the_take_over_writes_nothing(
    node: Node,
    release: Release,
    stack: dict[str, Any],
    custom: Any,
    core: Any,
    tmp_path: Path,
    unique: str,
) -> None:
    """``replicaCount: 2``: the container of the Pod holding the cluster's Lease is frozen (``ctr
    task pause``: the cgroup freezer, as a long GC pause or a stalled node) right after four alters
    with stop-connector were asked; the other Pod takes the Lease over when it expires and finishes
    them; thawed, the woken Pod finds its Lease lost and writes nothing: every stop, PATCH and
    resume reached Connect once. The woken Pod is not restarted."""
    namespace = release.namespace
    names = [f"nf{i}-{unique}" for i in range(4)]
    pods, leader, other, log, seen = two_replicas_mid_alters(release, stack, custom, core, tmp_path, names)
    frozen_container = container_id(leader)
    lost_before = release.log(leader.metadata.name).count("lost the Lease")
    node.ctr("task", "pause", frozen_container)
    frozen = time.monotonic()
    try:
        assert task_status(node, frozen_container) == "PAUSED"
        for name in names:
            wait_annotation_removed(custom, namespace, name, timeout=120)
        took = time.monotonic() - frozen
        assert set(holders(node.coordination(), namespace).values()) == {other.metadata.name}
    finally:
        node.ctr("task", "resume", frozen_container)
    thawed = time.monotonic()
    assert wait_for(
        "the woken Pod lost its Lease",
        lambda: release.log(leader.metadata.name).count("lost the Lease") > lost_before,
        timeout=60,
        interval=0.5,
    )
    woke = time.monotonic() - thawed
    each_alter_once(custom, namespace, names, log, seen)
    for name in names:
        assert get_connector(custom, namespace, name)["status"]["claimedBy"].startswith(f"{other.metadata.name}_")
    after = release.wait_ready(2)
    assert {p.metadata.uid for p in after} == {p.metadata.uid for p in pods}
    for pod in after:
        assert_runs_as_the_chart_says(node, pod)  # restartCount 0: its liveness probe never failed it
    each_alter_once(custom, namespace, names, log, seen)
    print(
        f"\nfrozen leader: the other Pod finished all {len(names)} alters {took:.1f}s after the freeze; "
        f"thawed, it saw its Lease lost {woke:.1f}s later"
    )


def test_helm_upgrade_to_a_new_image_tag_while_alters_flow_serves_each_once(
    node: Node,
    release: Release,
    stack: dict[str, Any],
    custom: Any,
    core: Any,
    tmp_path: Path,
    unique: str,
) -> None:
    """``helm upgrade`` to a new image tag (the same image tagged again in the node's containerd)
    while alters with stop-connector are asked: before the upgrade, while the new Pod starts beside
    the old one, and while the old one stops. The rolling update hands the Lease over; every
    alter's stop, PATCH and resume reached Connect once, and one Pod of the new tag runs."""
    release.install(SHORT_LEASES)
    [old] = release.wait_ready(1)
    namespace = release.namespace
    names = [f"nu{i}-{unique}" for i in range(6)]
    running_on_one_cluster(custom, core, release, tmp_path, names)
    new_tag = f"{node.tag}-next"
    node.tag_image(new_tag)
    log = connect_log(stack)
    seen = len(request_lines(log))

    def ask(batch: list[str]) -> None:
        for name in batch:
            annotate(custom, namespace, name, connector_offsets="alter", stop_connector="true")

    began = time.monotonic()
    ask(names[:2])
    release.upgrade(SHORT_LEASES, tag=new_tag)
    release.wait_pods("the new Pod created", lambda pods: any(p.metadata.uid != old.metadata.uid for p in pods))
    ask(names[2:4])
    release.wait_pods(
        "the old Pod stopping",
        lambda pods: all(p.metadata.uid != old.metadata.uid or p.metadata.deletion_timestamp for p in pods),
    )
    ask(names[4:])
    for name in names:
        wait_annotation_removed(custom, namespace, name, timeout=120)
    took = time.monotonic() - began
    each_alter_once(custom, namespace, names, log, seen)
    [new] = release.wait_ready(1, image_tag=new_tag)
    assert new.spec.containers[0].image == f"{node.repository}:{new_tag}"
    assert_runs_as_the_chart_says(node, new)
    assert set(holders(node.coordination(), namespace).values()) == {new.metadata.name}
    print(f"\nupgrade to {new_tag}: all {len(names)} alters served once, {took:.1f}s from the first")


def test_shards_2_to_3_by_helm_upgrade_while_resets_and_deletions_flow_serves_each_once(
    node: Node,
    release: Release,
    stack: dict[str, Any],
    custom: Any,
    core: Any,
    tmp_path: Path,
    unique: str,
) -> None:
    """``sharding.shards`` 2 -> 3 by ``helm upgrade`` (the real-Pod counterpart of test_replicas'
    shard change): resets with stop-connector and deletions with ``offsetsOnDelete: reset`` are
    asked while the two StatefulSets roll to the new count and the third one starts. Every reset
    stops, resets and resumes once; every deletion resets and deletes once."""
    release.install("sharding.shards=2", SHORT_LEASES)
    release.wait_ready(2)
    namespace = release.namespace
    resets = [f"rz{i}-{unique}" for i in range(8)]
    deletions = [f"dz{i}-{unique}" for i in range(3)]
    for name in resets:
        running_connector(custom, core, release, tmp_path, name)
    for name in deletions:
        running_connector(custom, core, release, tmp_path, name, offsetsOnDelete="reset")
    for name in resets + deletions:
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorRunning", timeout=120)
    moving = [n for n in resets + deletions if owner_of((namespace, f"c-{n}"), 2) != owner_of((namespace, f"c-{n}"), 3)]
    assert moving, "some clusters move to another shard (rendezvous hashing of these names)"
    log = connect_log(stack)
    seen = len(request_lines(log))

    began = time.monotonic()
    release.upgrade("sharding.shards=3", SHORT_LEASES)
    for name in resets:
        annotate(custom, namespace, name, connector_offsets="reset", stop_connector="true")
    for name in deletions:
        custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, "kafkaconnectors", name)
    for name in resets:
        wait_annotation_removed(custom, namespace, name, timeout=180)
    for name in deletions:
        wait_absent(custom, namespace, name, timeout=180)
    took = time.monotonic() - began
    resets_and_deletions_once(custom, namespace, log, seen, resets, deletions)
    pods = release.wait_ready(3, timeout=180)
    shards = sorted(p.metadata.labels["connect-offsets.io/shard"] for p in pods)
    assert shards == ["0", "1", "2"], shards
    for pod in pods:
        args = pod.spec.containers[0].args
        assert args[args.index("--shard-count") + 1] == "3", args
        assert_runs_as_the_chart_says(node, pod)
    print(f"\nshards 2 -> 3: {len(moving)} of {len(resets + deletions)} clusters moved, every write once, {took:.1f}s")
