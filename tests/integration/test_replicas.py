"""Several replicas as users run them (issue 44): Leases per ConnectCluster, fenced writes, one finalizer.

Every scenario counts what reached the shared Connect worker in its request log, per connector:
a stop, a ``PATCH``/``DELETE .../offsets``, a resume, a connector ``DELETE``, each exactly once.

* two shards, one with a standby: each cluster worked on by one replica, the standby takes over a
  killed replica's clusters, and each deletion runs its delete logic once;
* a replica frozen (SIGSTOP) right after alters with stop-connector were asked, then woken
  (SIGCONT) after the standby took over and finished them;
* a shard-count change 2 -> 3 with both generations running while resets and deletions with
  ``offsetsOnDelete: reset`` flow;
* the Leases deleted while alters are under way.

Short Lease timings (3 s / 2 s / 0.5 s) keep the scenarios within seconds; the chart's defaults
are client-go's (15 / 10 / 2).
"""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from connect_offsets.controller import FINALIZER, lease_name, owner_of
from tests.conftest import OperatorProcess, wait_for
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
from tests.integration.support import (
    GROUP,
    VERSION,
    annotate,
    connect_log,
    connector_absent,
    create_cluster,
    create_connector,
    file_source_spec,
    get_connector,
    request_lines,
    wait_annotation_removed,
    wait_condition,
)

LEASE_FLAGS = ["--leader-election", "--lease-duration", "3", "--renew-deadline", "2", "--retry-period", "0.5"]


def replica(stack: dict[str, Any], namespace: str, tmp_path: Path, name: str, *args: str) -> OperatorProcess:
    """An operator replica under Leases in the test's namespace, identified as ``name``."""
    return OperatorProcess(
        stack["kubeconfig"],
        namespace,
        tmp_path / f"{name}.log",
        extra_env={"POD_NAME": name},
        extra_args=[*LEASE_FLAGS, "--lease-namespace", namespace, *args],
    )


@pytest.fixture
def coordination(stack: dict[str, Any]) -> Any:
    from kubernetes import client, config

    return client.CoordinationV1Api(config.new_client_from_config(stack["kubeconfig"]))


@pytest.fixture
def replicas() -> Iterator[list[OperatorProcess]]:
    started: list[OperatorProcess] = []
    yield started
    for process in started:
        if process.process is not None:
            os.kill(process.process.pid, signal.SIGCONT)
        process.stop()


def running_connectors(
    custom: Any,
    core: Any,
    namespace: str,
    connect_url: str,
    tmp_path: Path,
    names: list[str],
    cluster: str | None = None,
    **spec: Any,
) -> None:
    """RUNNING file sources, on ``cluster`` or each on a ConnectCluster of its own, each with an
    offsets ConfigMap moving it back to line 8; Ready once all are."""
    if cluster is not None:
        create_cluster(custom, namespace, connect_url, name=cluster)
    for name in names:
        source = source_lines(tmp_path / f"{name}.txt")
        if cluster is None:
            create_cluster(custom, namespace, connect_url, name=f"c-{name}")
        body = file_source_spec(source, name, f"{name}-offsets")
        body.update(spec)
        create_connector(custom, namespace, name, body, cluster=cluster or f"c-{name}")
        data = {"offsets.json": position_doc(source, 8 * LINE)}
        core.create_namespaced_config_map(namespace, {"metadata": {"name": f"{name}-offsets"}, "data": data})
    for name in names:
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorRunning", timeout=120)


def pending(custom: Any, namespace: str, names: list[str]) -> bool:
    return any((get_connector(custom, namespace, n).get("status") or {}).get("pendingOffsetsOperation") for n in names)


def alters_under_way(custom: Any, namespace: str, names: list[str], stack: dict[str, Any]) -> tuple[Path, int]:
    """Four alters with stop-connector asked, and the first claim seen: (the worker's log, its
    request lines before them)."""
    log = connect_log(stack)
    seen = len(request_lines(log))
    for name in names:
        annotate(custom, namespace, name, connector_offsets="alter", stop_connector="true")
    assert wait_for("a claim", lambda: pending(custom, namespace, names), timeout=30, interval=0.05)
    return log, seen


def each_alter_once(custom: Any, namespace: str, names: list[str], log: Path, seen: int) -> None:
    """Every alter succeeded, and its stop, PATCH and resume reached Connect once."""
    once_each(
        writes(log, seen, set(names)),
        [w for n in names for w in stopped_changed_resumed(n, ("PATCH", f"/connectors/{n}/offsets"))],
    )
    for name in names:
        assert get_connector(custom, namespace, name)["status"]["lastOffsetsOperation"]["result"] == "Succeeded"


def test_each_cluster_is_worked_by_one_replica_and_a_killed_ones_are_taken_over(
    stack: dict[str, Any],
    custom: Any,
    coordination: Any,
    namespace: str,
    connect: httpx.Client,
    connect_url: str,
    tmp_path: Path,
    unique: str,
    replicas: list[OperatorProcess],
) -> None:
    """Two shards, shard 0 with two replicas: every cluster's Lease is held by a replica of its
    shard, every connector created by that replica only; SIGKILL one, and its clusters go to its
    sibling within a Lease duration; every deletion runs its delete logic once."""
    names = {f"c{i}": f"rs{i}-{unique}" for i in range(8)}
    owner = {cluster: owner_of((namespace, cluster), 2) for cluster in names}
    assert set(owner.values()) == {0, 1}, owner
    a, b, c = (
        replica(stack, namespace, tmp_path, pod, "--shard-count", "2", "--shard-index", index)
        for pod, index in (("a", "0"), ("b", "0"), ("c", "1"))
    )
    replicas.extend([a, b, c])
    for process in replicas:
        process.start()
    source = source_lines(tmp_path / "s.txt", 2)
    for cluster, name in names.items():
        create_cluster(custom, namespace, connect_url, name=cluster)
        create_connector(
            custom,
            namespace,
            name,
            file_source_spec(source, f"rs-{unique}", f"{name}-list", "stopped"),
            cluster=cluster,
        )
    for name in names.values():
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorStopped", timeout=120)
    held = holders(coordination, namespace)
    pods = {0: {"a", "b"}, 1: {"c"}}
    for cluster, name in names.items():
        holder = held[lease_name("connect-offsets", (namespace, cluster))]
        assert holder in pods[owner[cluster]], (cluster, holder)
        mine = replicas["abc".index(holder)]
        assert wait_for(
            f"{name} created by {holder}", lambda name=name, mine=mine: f"Created connector {name}" in mine.log()
        )
        for other in set("abc") - {holder}:
            assert name not in replicas["abc".index(other)].log(), (name, other)
        assert get_connector(custom, namespace, name)["metadata"]["finalizers"] == [FINALIZER]

    victim = next(p for p in "ab" if p in held.values())
    sibling = "b" if victim == "a" else "a"
    replicas["abc".index(victim)].kill()
    killed = time.monotonic()
    for name in names.values():
        annotate(custom, namespace, name, connector_offsets="list")
    for name in names.values():
        wait_annotation_removed(custom, namespace, name, timeout=60)
    took = time.monotonic() - killed
    after = holders(coordination, namespace)
    for cluster in names:
        lease = lease_name("connect-offsets", (namespace, cluster))
        if held[lease] == victim:
            assert after[lease] == sibling, (cluster, after[lease])
    print(f"\nthe killed replica's clusters were taken over; all lists answered {took:.1f}s after the SIGKILL")

    log = connect_log(stack)
    seen = len(request_lines(log))
    for name in names.values():
        custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, "kafkaconnectors", name)
    for name in names.values():
        assert wait_for(f"{name} gone", lambda name=name: connector_absent(custom, namespace, name), timeout=60)
    deleted = writes(log, seen, set(names.values()))
    assert deleted == Counter({("DELETE", f"/connectors/{name}"): 1 for name in names.values()}), deleted


def test_a_frozen_replica_woken_after_the_take_over_writes_nothing(
    stack: dict[str, Any],
    custom: Any,
    core: Any,
    coordination: Any,
    namespace: str,
    connect_url: str,
    tmp_path: Path,
    unique: str,
    replicas: list[OperatorProcess],
) -> None:
    """SIGSTOP of the replica holding the cluster right after four alters with stop-connector were
    asked (a long GC pause, a frozen node); the standby takes over and finishes them; SIGCONT: the
    woken replica's passes are fenced off, and every stop, PATCH and resume reached Connect once."""
    names = [f"fz{i}-{unique}" for i in range(4)]
    active = replica(stack, namespace, tmp_path, "active")
    standby = replica(stack, namespace, tmp_path, "standby")
    replicas.extend([active, standby])
    active.start()
    running_connectors(custom, core, namespace, connect_url, tmp_path, names, cluster="shared")
    assert set(holders(coordination, namespace).values()) == {"active"}
    standby.start()
    log, seen = alters_under_way(custom, namespace, names, stack)
    assert active.process is not None
    os.kill(active.process.pid, signal.SIGSTOP)
    frozen = time.monotonic()
    for name in names:
        wait_annotation_removed(custom, namespace, name, timeout=90)
    took = time.monotonic() - frozen
    assert set(holders(coordination, namespace).values()) == {"standby"}
    os.kill(active.process.pid, signal.SIGCONT)
    assert wait_for("the woken replica lost its Lease", lambda: "lost the Lease" in active.log(), timeout=20)
    time.sleep(3)  # what a woken replica would still send, it sends within this
    each_alter_once(custom, namespace, names, log, seen)
    for name in names:
        assert get_connector(custom, namespace, name)["status"]["claimedBy"].startswith("standby_")
    print(f"\nfrozen replica: the standby finished all {len(names)} alters {took:.1f}s after the SIGSTOP")


def test_a_shard_count_change_with_both_generations_running_writes_everything_once(
    stack: dict[str, Any],
    custom: Any,
    core: Any,
    namespace: str,
    connect_url: str,
    tmp_path: Path,
    unique: str,
    replicas: list[OperatorProcess],
) -> None:
    """2 -> 3 shards as a StatefulSet with Parallel pod management runs it: the new pods start
    while the old ones run, resets with stop-connector and deletions with offsetsOnDelete: reset
    are asked during the overlap, then the old pods stop. Every reset stops, resets and resumes
    once; every deletion resets and deletes once."""
    resets = [f"rz{i}-{unique}" for i in range(8)]
    deletions = [f"dz{i}-{unique}" for i in range(3)]
    old = [
        replica(stack, namespace, tmp_path, f"old{i}", "--shard-count", "2", "--shard-index", str(i)) for i in range(2)
    ]
    new = [
        replica(stack, namespace, tmp_path, f"new{i}", "--shard-count", "3", "--shard-index", str(i)) for i in range(3)
    ]
    replicas.extend([*old, *new])
    for process in old:
        process.start()
    running_connectors(custom, core, namespace, connect_url, tmp_path, resets)
    running_connectors(custom, core, namespace, connect_url, tmp_path, deletions, offsetsOnDelete="reset")
    moving = [n for n in resets + deletions if owner_of((namespace, f"c-{n}"), 2) != owner_of((namespace, f"c-{n}"), 3)]
    assert moving, "some clusters move to another shard (rendezvous hashing of these names)"
    for process in new:
        process.start()
    log = connect_log(stack)
    seen = len(request_lines(log))
    for name in resets:
        annotate(custom, namespace, name, connector_offsets="reset", stop_connector="true")
    for name in deletions:
        custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, "kafkaconnectors", name)
    time.sleep(2)  # both generations run while the requests are under way
    for process in old:
        process.stop()
    for name in resets:
        wait_annotation_removed(custom, namespace, name, timeout=120)
    for name in deletions:
        assert wait_for(f"{name} gone", lambda name=name: connector_absent(custom, namespace, name), timeout=120)
    resets_and_deletions_once(custom, namespace, log, seen, resets, deletions)
    print(f"\nshard change 2 -> 3: {len(moving)} of {len(resets + deletions)} clusters moved, every write once")


def test_deleted_leases_stop_their_holder_and_nothing_is_written_twice(
    stack: dict[str, Any],
    custom: Any,
    core: Any,
    coordination: Any,
    namespace: str,
    connect_url: str,
    tmp_path: Path,
    unique: str,
    replicas: list[OperatorProcess],
) -> None:
    """The Leases deleted (by hand, or a restore of etcd) while alters are under way: the holder
    stops at its next look, a Lease made again is worked under only a Lease duration later, and
    every stop, PATCH and resume reached Connect once."""
    names = [f"lz{i}-{unique}" for i in range(4)]
    first = replica(stack, namespace, tmp_path, "first")
    second = replica(stack, namespace, tmp_path, "second")
    replicas.extend([first, second])
    first.start()
    second.start()
    running_connectors(custom, core, namespace, connect_url, tmp_path, names, cluster="shared")
    log, seen = alters_under_way(custom, namespace, names, stack)
    coordination.delete_collection_namespaced_lease(namespace)
    for name in names:
        wait_annotation_removed(custom, namespace, name, timeout=90)
    each_alter_once(custom, namespace, names, log, seen)
    # The holder notices at its next look (a retry period): the alters may have ended before it.
    assert wait_for("the holder lost its Lease", lambda: "lost the Lease" in first.log() + second.log(), timeout=20)


def test_a_replica_the_api_server_stops_answering_stops_at_its_renew_deadline(
    stack: dict[str, Any],
    custom: Any,
    core: Any,
    coordination: Any,
    namespace: str,
    connect_url: str,
    tmp_path: Path,
    unique: str,
    replicas: list[OperatorProcess],
) -> None:
    """The holder's API server stops answering (a network partition, an overloaded API server:
    here a proxy in front of it that holds every request and watch event) right after four alters
    with stop-connector were asked, while Connect still answers it. It stops writing at its renew
    deadline; the standby takes over after a Lease duration and finishes them; when the answers
    come back, the held writes are refused (the claim changed): every stop, PATCH and resume reached
    Connect once."""
    from bench.kube_proxy import KubeProxy

    names = [f"pz{i}-{unique}" for i in range(4)]
    proxy = KubeProxy.for_kubeconfig(stack["kubeconfig"])
    proxy.start()
    try:
        cut_off = replica(stack, namespace, tmp_path, "cut")
        cut_off.kubeconfig = str(proxy.write_kubeconfig(tmp_path / "proxied-kubeconfig"))
        standby = replica(stack, namespace, tmp_path, "standby")
        replicas.extend([cut_off, standby])
        cut_off.start()
        running_connectors(custom, core, namespace, connect_url, tmp_path, names, cluster="shared")
        assert set(holders(coordination, namespace).values()) == {"cut"}
        standby.start()
        log, seen = alters_under_way(custom, namespace, names, stack)
        proxy.pause()
        for name in names:
            wait_annotation_removed(custom, namespace, name, timeout=90)
        assert set(holders(coordination, namespace).values()) == {"standby"}
        proxy.resume()
        assert wait_for("the cut-off replica lost its Lease", lambda: "lost the Lease" in cut_off.log(), timeout=20)
        time.sleep(3)  # what its held requests would still do, they do within this
        each_alter_once(custom, namespace, names, log, seen)
    finally:
        proxy.resume()
        for process in replicas:
            process.stop()
        proxy.stop()
