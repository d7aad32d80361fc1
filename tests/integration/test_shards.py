"""Shards (issue 35): ConnectClusters, and everything bound to them, spread over replicas by a stable
hash; each resource reconciled by exactly one shard; a shard's standby takes over from its active
replica (kopf peering per shard) while the other shard carries on.

Set-up: one namespace, eight ConnectClusters (all the stack's Connect worker, under eight names) and
one STOPPED KafkaConnector bound to each; shard 0 runs two replicas with peering
``shards-shard-0``, shard 1 one replica with ``shards-shard-1``. Which shard owns which cluster is
computed with the operator's own ``Shard.owns`` and compared with what the operators did.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest

from connect_offsets.controller import FINALIZER, Shard
from tests.conftest import OperatorProcess, wait_for
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
    install_peering_crds,
    request_lines,
    wait_annotation_removed,
    wait_condition,
)

CLUSTERS = 8
DELETE_REQUEST = re.compile(r'"DELETE (/connectors/[^/ ?"]+) HTTP/')


# The peering CRDs: one xdist worker with the other tests that install or delete them.
@pytest.mark.xdist_group("kopf-peering-crds")
def test_each_resource_is_reconciled_by_one_shard_and_a_standby_takes_over(
    stack: dict[str, Any],
    custom: Any,
    namespace: str,
    connect: httpx.Client,
    connect_url: str,
    tmp_path: Path,
    unique: str,
) -> None:
    install_peering_crds(stack)
    for index in range(2):
        custom.create_namespaced_custom_object(
            "kopf.dev",
            "v1",
            namespace,
            "kopfpeerings",
            {"apiVersion": "kopf.dev/v1", "kind": "KopfPeering", "metadata": {"name": f"shards-shard-{index}"}},
        )

    def replica(index: int, priority: int) -> OperatorProcess:
        args = ["--shard-count", "2", "--shard-index", str(index), "--peering", "shards", "--priority", str(priority)]
        return OperatorProcess(
            stack["kubeconfig"], namespace, tmp_path / f"shard-{index}-{priority}.log", extra_args=args
        )

    active, standby, other = replica(0, 100), replica(0, 10), replica(1, 100)
    source = tmp_path / "s.txt"
    source.write_text("a\nb\n")
    names = {f"c{i}": f"sh{i}-{unique}" for i in range(CLUSTERS)}  # cluster -> connector
    owner = {cluster: 0 if Shard(0, 2).owns((namespace, cluster)) else 1 for cluster in names}
    assert set(owner.values()) == {0, 1}, owner  # both shards have work (the hash of these names)
    active.start()
    time.sleep(2)  # the active peer of shard 0 registers first
    standby.start()
    other.start()
    try:
        for cluster, name in names.items():
            create_cluster(custom, namespace, connect_url, name=cluster)
            spec = file_source_spec(source, f"sh-{unique}", f"{name}-offsets", state="stopped")
            create_connector(custom, namespace, name, spec, cluster=cluster)
        for name in names.values():
            wait_condition(custom, namespace, name, "Ready", reason="ConnectorStopped", timeout=120)
        # The outcome is logged with its Event, after the status that says Ready (Events after status).
        replicas = {0: active, 1: other}
        for cluster, name in names.items():
            mine = replicas[owner[cluster]]
            assert wait_for(
                f"{name} created by shard {owner[cluster]}",
                lambda mine=mine, name=name: f"Created connector {name} in Connect" in mine.log(),
                timeout=10,
            ), (cluster, owner[cluster])
        for cluster, name in names.items():
            theirs = replicas[1 - owner[cluster]].log()
            assert name not in theirs, f"{name} ({cluster}) reconciled by shard {1 - owner[cluster]} too"
        assert "Created connector" not in standby.log()  # paused: kopf runs no presence daemon there

        active.kill()
        killed = time.monotonic()
        for name in names.values():
            annotate(custom, namespace, name, connector_offsets="list")
        for name in names.values():
            wait_annotation_removed(custom, namespace, name, timeout=90)
        took = time.monotonic() - killed
        for cluster, name in names.items():
            answering = standby if owner[cluster] == 0 else other
            assert wait_for(
                f"{name} answered by shard {owner[cluster]}",
                lambda answering=answering, name=name: f"{name}: list: wrote" in answering.log(),
                timeout=10,
            ), (cluster, owner[cluster])
        print(f"\nshard 0's standby took over; all {CLUSTERS} lists answered {took:.1f}s after the SIGKILL")

        # Deletion runs once, in the owning shard: each resource carries its owner's finalizer only
        # (kopf removes a finalizer no handler of its replica needs, so one shared name made the
        # other shard strip the owner's). A finalizer an unsharded operator left is not blocking:
        # the owner drops it once its delete logic has run.
        def finalizers(name: str) -> list[str]:
            return list(get_connector(custom, namespace, name)["metadata"].get("finalizers") or [])

        for cluster, name in names.items():
            ours = [f for f in finalizers(name) if f.startswith(FINALIZER)]
            assert ours == [f"{FINALIZER}-shard-{owner[cluster]}"], (cluster, ours)
        for shard in (0, 1):  # one resource of each shard gets the unsharded operator's finalizer
            name = next(n for c, n in names.items() if owner[c] == shard)
            rv = get_connector(custom, namespace, name)["metadata"]["resourceVersion"]
            patch = {"metadata": {"finalizers": [*finalizers(name), FINALIZER], "resourceVersion": rv}}
            custom.patch_namespaced_custom_object(GROUP, VERSION, namespace, "kafkaconnectors", name, patch)
        log = connect_log(stack)
        seen = len(request_lines(log))
        for name in names.values():
            custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, "kafkaconnectors", name)
        for name in names.values():
            assert wait_for(f"{name} gone", lambda name=name: connector_absent(custom, namespace, name), timeout=60)
        # Only this test's connectors: other tests share the stack's worker.
        deleted = {f"/connectors/{name}" for name in names.values()}
        sent = [m.group(1) for line in request_lines(log)[seen:] if (m := DELETE_REQUEST.search(line))]
        assert Counter(path for path in sent if path in deleted) == Counter(dict.fromkeys(deleted, 1)), sent
    finally:
        for process in (active, standby, other):
            process.stop()
        for name in names.values():
            connect.delete(f"/connectors/{name}")
    assert wait_for("operators stopped", lambda: all(p.process is None for p in (active, standby, other)))
    for index in range(2):
        # The presence daemon leaves no finalizer: stopped operators do not block the namespace's
        # (or the peering CRD's) deletion.
        peering = custom.get_namespaced_custom_object(
            "kopf.dev", "v1", namespace, "kopfpeerings", f"shards-shard-{index}"
        )
        assert not peering["metadata"].get("finalizers"), peering["metadata"]


def test_a_resource_deleted_before_its_owner_put_its_finalizer_on_is_deleted_once(
    stack: dict[str, Any],
    custom: Any,
    namespace: str,
    connect_url: str,
    tmp_path: Path,
    unique: str,
) -> None:
    """Sharding turned off (or on, or another count) while a resource was being deleted: it waits
    only on the finalizer of a shard count no replica uses any more, and a finalizer cannot be added
    once deletion has begun, so kopf never runs the owner's delete handler. The owner's controller
    runs the delete logic once and removes the stale finalizer (the resource would otherwise stay
    Terminating for good, and its namespace with it)."""
    name = f"orph-{unique}"
    source = tmp_path / "s.txt"
    source.write_text("a\n")
    create_cluster(custom, namespace, connect_url)
    create_connector(custom, namespace, name, file_source_spec(source, f"orph-{unique}", f"{name}-offsets", "stopped"))
    first = OperatorProcess(stack["kubeconfig"], namespace, tmp_path / "first.log")
    first.start()
    try:
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorStopped", timeout=120)
    finally:
        first.stop()
    # As a sharded operator (two shards) would have left it, then deleted with no operator running.
    rv = get_connector(custom, namespace, name)["metadata"]["resourceVersion"]
    stale = f"{FINALIZER}-shard-1"
    patch = {"metadata": {"finalizers": [stale], "resourceVersion": rv}}
    custom.patch_namespaced_custom_object(GROUP, VERSION, namespace, "kafkaconnectors", name, patch)
    custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, "kafkaconnectors", name)
    assert get_connector(custom, namespace, name)["metadata"]["deletionTimestamp"]
    log = connect_log(stack)
    seen = len(request_lines(log))
    second = OperatorProcess(stack["kubeconfig"], namespace, tmp_path / "second.log")  # unsharded
    second.start()
    try:
        assert wait_for(f"{name} gone", lambda: connector_absent(custom, namespace, name), timeout=60), second.log()[
            -3000:
        ]
        sent = [m.group(1) for line in request_lines(log)[seen:] if (m := DELETE_REQUEST.search(line))]
        assert sent.count(f"/connectors/{name}") == 1, sent  # the delete logic ran, once (others share the worker)
        assert "deleted before its owner's finalizer was on" in second.log()
    finally:
        second.stop()
