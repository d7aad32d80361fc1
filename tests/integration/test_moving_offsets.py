"""Offsets that move with the work (issue 34), on the real stack with both Kafka clusters.

* **Rename**: ``orders-v1`` reads a file to position P, is stopped, the file grows; ``kubectl
  connect-offsets copy orders-v1 orders-v2 --state running`` creates ``orders-v2`` from v1's spec,
  STOPPED, with v1's offsets (read once, pinned), then running: its first records in the topic are
  exactly P's successors (none again, none skipped); v1 is deleted.
* **Cluster migration**: the same between the stack's worker and a dedicated second worker whose
  Kafka is cluster B, declaratively (``spec.initialOffsets.fromConnector`` with a ``clusterRef``):
  the records it writes into B are exactly the lines after P.
* **Disaster recovery** through MirrorMaker 2 B -> A with checkpoints: on site B (the dedicated
  worker, Kafka B) a consumer group and a FileStreamSink connector consume ``t`` to offset N; more
  records follow; after ``kubectl connect-offsets failover-group`` the group on A, and a sink
  connector on A created with ``initialOffsets.fromMirror``, consume ``<b>.t`` from the translated
  offsets: every record from there on once, none skipped, and the records read again (counted) no
  more than MirrorMaker 2's documented lag (``offset.lag.max``, set to 10 here). Refused, with
  exit 1 naming the reason and nothing committed: the group while it has an active member on A
  (``ConsumerGroupActive``), and a group whose topic is not mirrored (``UntranslatablePartitions``,
  ``TopicNotReplicated``).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, TopicPartition
from kubernetes.client.exceptions import ApiException

from connect_offsets.clients.kafka_groups import decode_checkpoint
from connect_offsets.vocabulary import MIRRORS
from tests.conftest import OperatorProcess, wait_for
from tests.integration.connect_worker import DedicatedWorker
from tests.integration.kafka_records import committed, consume, drop_topics, produce
from tests.integration.support import (
    FILE_SINK,
    FILE_SOURCE,
    GROUP,
    VERSION,
    connect_get,
    connect_offsets,
    create_cluster,
    create_connector,
    create_mm2,
    get_connector,
    get_mm2,
    patch_connector,
    read_topic,
    wait_connect_state,
)

pytestmark = pytest.mark.local_stack

PLUGIN = str(Path(sys.executable).parent / "kubectl-connect_offsets")
STRINGS = {
    "key.converter": "org.apache.kafka.connect.storage.StringConverter",
    "value.converter": "org.apache.kafka.connect.storage.StringConverter",
}
#: MirrorSourceConnector's offset.lag.max here: the documented bound of records a translated group reads again.
LAG_MAX = 10


def plugin(stack: dict[str, Any], *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": stack["kubeconfig"]}
    return subprocess.run([PLUGIN, *args], capture_output=True, text=True, env=env, timeout=timeout)


@pytest.fixture(scope="module")
def site_b() -> Iterator[DedicatedWorker]:
    """A Connect worker of its own whose Kafka is cluster B: the other site, or the other Connect cluster."""
    worker = DedicatedWorker(heap="-Xmx512m", name="site-b", kafka="kafka-b")
    worker.start()
    try:
        yield worker
    finally:
        worker.stop()


def lines(path: Path, start: int, stop: int) -> None:
    with path.open("a") as handle:
        handle.writelines(f"line-{i}\n" for i in range(start, stop))


def source_spec(path: Path, topic: str, state: str = "running") -> dict[str, Any]:
    return {"class": FILE_SOURCE, "tasksMax": 1, "state": state, "config": {"file": str(path), "topic": topic}}


def encoded(start: int, stop: int) -> list[bytes]:
    """The records a FileStreamSource writes for those lines (the worker's JsonConverter, no schemas)."""
    return [json.dumps(f"line-{i}").encode() for i in range(start, stop)]


def at_position(connect: httpx.Client, name: str, path: Path) -> list[dict[str, Any]]:
    position = path.stat().st_size
    wanted = [{"partition": {"filename": str(path)}, "offset": {"position": position}}]
    wait_for(f"{name} at position {position}", lambda: connect_offsets(connect, name) == wanted, timeout=60)
    return wanted


def initial_applied(custom: Any, namespace: str, name: str, timeout: float = 120) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        initial = (get_connector(custom, namespace, name).get("status") or {}).get("initialOffsets") or {}
        return initial if initial.get("step") == "Applied" else None

    return wait_for(f"{name}: initial offsets applied", check, timeout=timeout)


def pinned_document(core: Any, namespace: str, name: str) -> list[dict[str, Any]]:
    offsets: list[dict[str, Any]] = json.loads(core.read_namespaced_config_map(name, namespace).data["offsets.json"])[
        "offsets"
    ]
    return offsets


@pytest.mark.timeout(300)
def test_rename_starts_where_the_old_connector_stopped(
    custom: Any,
    core: Any,
    namespace: str,
    operator: OperatorProcess,
    connect: httpx.Client,
    connect_url: str,
    stack: dict[str, Any],
    tmp_path: Path,
    unique: str,
) -> None:
    create_cluster(custom, namespace, connect_url)
    data, topic = tmp_path / "orders.txt", f"orders-{unique}"
    v1, v2 = f"orders-v1-{unique}", f"orders-v2-{unique}"
    lines(data, 0, 10)
    create_connector(custom, namespace, v1, source_spec(data, topic))
    assert read_topic(stack["kafka_a"], topic, 10) == encoded(0, 10)
    at_p = at_position(connect, v1, data)
    patch_connector(custom, namespace, v1, {"spec": {"state": "stopped"}})
    wait_connect_state(connect, v1, "STOPPED")
    lines(data, 10, 15)  # written while nothing reads the file

    result = plugin(stack, "copy", v1, v2, "-n", namespace, "--state", "running")
    assert result.returncode == 0, result.stderr
    assert f"from connector {v1}" in result.stdout and "applied 1 initial offset(s)" in result.stdout, result.stdout
    body = get_connector(custom, namespace, v2)
    assert body["spec"]["initialOffsets"] == {"fromConnector": {"name": v1}}
    assert body["spec"]["state"] == "running" and "listOffsets" not in body["spec"]
    initial = body["status"]["initialOffsets"]
    assert initial["source"] == f"connector {v1}" and initial["step"] == "Applied"
    assert pinned_document(core, namespace, initial["configMap"]) == at_p
    # v2's first records are P's successors: the topic holds each line once.
    assert read_topic(stack["kafka_a"], topic, 16, timeout=30) == encoded(0, 15)
    at_position(connect, v2, data)

    custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, "kafkaconnectors", v1)
    wait_for(f"{v1} deleted in Connect", lambda: connect.get(f"/connectors/{v1}").status_code == 404, timeout=60)
    assert read_topic(stack["kafka_a"], topic, 16, timeout=10) == encoded(0, 15)


@pytest.mark.timeout(420)
def test_a_connector_moves_to_another_connect_cluster_with_its_offsets(
    custom: Any,
    core: Any,
    namespace: str,
    operator: OperatorProcess,
    connect: httpx.Client,
    connect_url: str,
    stack: dict[str, Any],
    tmp_path: Path,
    unique: str,
    site_b: DedicatedWorker,
) -> None:
    create_cluster(custom, namespace, connect_url)
    create_cluster(custom, namespace, site_b.url, name="site-b")
    data, topic = tmp_path / "orders.txt", f"orders-{unique}"
    old, new = f"orders-{unique}", f"orders-b-{unique}"
    lines(data, 0, 10)
    create_connector(custom, namespace, old, source_spec(data, topic))
    assert read_topic(stack["kafka_a"], topic, 10) == encoded(0, 10)
    at_p = at_position(connect, old, data)
    patch_connector(custom, namespace, old, {"spec": {"state": "stopped"}})
    wait_connect_state(connect, old, "STOPPED")
    lines(data, 10, 15)

    spec = {
        **source_spec(data, topic),
        "initialOffsets": {"fromConnector": {"name": old, "clusterRef": {"name": "local"}}},
    }
    create_connector(custom, namespace, new, spec, cluster="site-b")
    initial = initial_applied(custom, namespace, new)
    assert initial["source"] == f"connector {old} on ConnectCluster local"
    assert f"from connector {old} on ConnectCluster local (pinned in ConfigMap" in initial["message"], initial
    assert pinned_document(core, namespace, initial["configMap"]) == at_p
    with httpx.Client(base_url=site_b.url, timeout=30) as other:
        wait_connect_state(other, new, "RUNNING")
        at_position(other, new, data)
    # On cluster B, through the other worker: exactly the lines written after P.
    assert read_topic(stack["kafka_b"], topic, 6, timeout=30) == encoded(10, 15)
    assert connect_get(connect, f"/connectors/{new}").status_code == 404  # nothing on the old worker


# --- disaster recovery -----------------------------------------------------------------------------


def checkpoints(bootstrap: str, topic: str) -> dict[tuple[str, str, int], tuple[int, int]]:
    """The newest checkpoint per (group, topic, partition) in MirrorMaker 2's checkpoints topic."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"probe-{uuid.uuid4().hex[:6]}"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        consumer.assign([TopicPartition(topic, 0, low)])
        found: dict[tuple[str, str, int], tuple[int, int]] = {}
        position = low
        while position < high:
            for message in consumer.consume(500, timeout=2):
                if message.error():
                    continue
                position = message.offset() + 1
                checkpoint = decode_checkpoint(message.key(), message.value())
                key = (checkpoint.group, checkpoint.topic, checkpoint.partition)
                found[key] = (checkpoint.upstream, checkpoint.downstream)
        return found
    finally:
        consumer.close()


@pytest.mark.timeout(600)
def test_failover_of_a_group_and_a_sink_connector_through_mirrormaker2_checkpoints(
    custom: Any,
    core: Any,
    namespace: str,
    operator: OperatorProcess,
    connect: httpx.Client,
    connect_url: str,
    stack: dict[str, Any],
    tmp_path: Path,
    unique: str,
    site_b: DedicatedWorker,
) -> None:
    kafka_a, kafka_b = stack["kafka_a"], stack["kafka_b"]
    b, a = f"b{unique}", f"a{unique}"  # the aliases: remote topics are named <b>.<topic> on A
    t, u = f"t-{unique}", f"u-{unique}"
    group, other_group, total, n = f"orders-app-{unique}", f"audit-{unique}", 100, 55
    sink_b, sink_a, mirror = f"sink-b-{unique}", f"sink-a-{unique}", f"dr-{unique}"
    create_cluster(custom, namespace, connect_url)  # the stack's worker: Kafka A, the DR site
    create_cluster(custom, namespace, site_b.url, name="site-b")
    try:
        # Site B: a consumer group and a FileStreamSink consume t to offset N, then stop; more follows.
        produce(kafka_b, t, 0, n)
        produce(kafka_b, u, 0, 5)
        assert consume(kafka_b, t, group, n) == [f"r-{i}" for i in range(n)]
        assert len(consume(kafka_b, u, other_group, 5)) == 5
        out_b, out_a = tmp_path / "out-b.txt", tmp_path / "out-a.txt"
        sink_spec = {"class": FILE_SINK, "tasksMax": 1, "config": {"file": str(out_b), "topics": t, **STRINGS}}
        create_connector(custom, namespace, sink_b, sink_spec, cluster="site-b")
        with httpx.Client(base_url=site_b.url, timeout=30) as other:
            wait_for(
                f"{sink_b} committed offset {n}",
                lambda: (
                    connect_offsets(other, sink_b)
                    == [{"partition": {"kafka_topic": t, "kafka_partition": 0}, "offset": {"kafka_offset": n}}]
                ),
                timeout=90,
            )
            patch_connector(custom, namespace, sink_b, {"spec": {"state": "stopped"}})
            wait_connect_state(other, sink_b, "STOPPED")
        assert out_b.read_text().splitlines() == [f"r-{i}" for i in range(n)]
        produce(kafka_b, t, n, total)

        # MirrorMaker 2 B -> A, on the worker whose Kafka is A, checkpointing every second; the sink
        # connector's group connect-<name> is excluded by default, so groups.exclude is set.
        create_mm2(
            custom,
            namespace,
            mirror,
            [{"alias": b, "bootstrapServers": kafka_b}, {"alias": a, "bootstrapServers": kafka_a}],
            [
                {
                    "sourceCluster": b,
                    "targetCluster": a,
                    "topicsPattern": t,
                    "sourceConnector": {
                        "config": {
                            "replication.factor": 1,
                            "offset-syncs.topic.replication.factor": 1,
                            "heartbeats.replication.enabled": False,  # B may hold others' heartbeats
                            "sync.topic.acls.enabled": False,
                            "refresh.topics.interval.seconds": 5,
                            "offset.lag.max": LAG_MAX,
                        }
                    },
                    "checkpointConnector": {
                        "config": {
                            "checkpoints.topic.replication.factor": 1,
                            "emit.checkpoints.interval.seconds": 1,
                            "refresh.groups.interval.seconds": 5,
                            "groups.exclude": "console-consumer-.*, __.*",
                        }
                    },
                }
            ],
        )
        remote, checkpoints_topic = f"{b}.{t}", f"{b}.checkpoints.internal"
        assert read_topic(kafka_a, remote, total, timeout=120) == [f"r-{i}".encode() for i in range(total)]
        sink_group = f"connect-{sink_b}"
        wait_for(
            "checkpoints of both groups at upstream offset N",
            lambda: all(
                checkpoints(kafka_a, checkpoints_topic).get((g, remote, 0), (None,))[0] == n
                for g in (group, sink_group)
            ),
            timeout=180,
            interval=2,
        )
        upstream, translated = checkpoints(kafka_a, checkpoints_topic)[(group, remote, 0)]

        # Refused, nothing committed: a group whose topic is not mirrored ...
        refused = plugin(stack, "failover-group", other_group, "--mirror", mirror, "-n", namespace)
        assert refused.returncode == 1, (refused.stdout, refused.stderr)
        assert "UntranslatablePartitions" in refused.stderr and f"{u}-0" in refused.stderr, refused.stderr
        assert "TopicNotReplicated" in refused.stderr
        assert committed(kafka_a, other_group) == {}
        # ... and the group while it has an active member on A.
        active = Consumer(
            {
                "bootstrap.servers": kafka_a,
                "group.id": group,
                "enable.auto.commit": False,
                "auto.offset.reset": "latest",
            }
        )
        try:
            active.subscribe([remote])
            wait_for(
                "the consumer joined", lambda: active.poll(0.5) is not None or bool(active.assignment()), timeout=60
            )
            refused = plugin(stack, "failover-group", group, "--mirror", mirror, "-n", namespace)
            assert refused.returncode == 1, (refused.stdout, refused.stderr)
            assert "ConsumerGroupActive" in refused.stderr, refused.stderr
            assert committed(kafka_a, group) == {}
        finally:
            active.close()

        # The dry run shows the translation; then the group fails over.
        preview = plugin(stack, "failover-group", group, "--mirror", mirror, "-n", namespace, "--dry-run")
        assert preview.returncode == 0, preview.stderr
        wanted = {"partition": {"kafka_topic": remote, "kafka_partition": 0}, "offset": {"kafka_offset": translated}}
        assert json.loads(preview.stdout)["offsets"] == [wanted], preview.stdout
        assert committed(kafka_a, group) == {}
        done = plugin(stack, "failover-group", group, "--mirror", mirror, "-n", namespace)
        assert done.returncode == 0, done.stderr
        assert committed(kafka_a, group) == {(remote, 0): translated}
        records = get_mm2(custom, namespace, mirror)["status"]["groupFailovers"]
        assert [(r["group"], r["result"], r.get("dryRun")) for r in records][-1] == (group, "Succeeded", None)

        # The group on A: every record from the translated offset on, once; re-read at most the documented lag.
        read_on_a = consume(kafka_a, remote, group, None)
        first = int(read_on_a[0].removeprefix("r-"))
        assert read_on_a == [f"r-{i}" for i in range(first, total)]  # none skipped, none twice
        again = upstream - first
        assert 0 <= again <= LAG_MAX, f"{again} records read again"
        print(
            f"group: committed {n} on B, translated {translated}, {again} record(s) read again on A (bound {LAG_MAX})"
        )

        # The sink connector fails over with its data: created on A from its group's checkpoints.
        sink_a_spec = {
            "class": FILE_SINK,
            "tasksMax": 1,
            "config": {"file": str(out_a), "topics": remote, **STRINGS},
            "initialOffsets": {"fromMirror": {"mirror": mirror, "sourceConnector": sink_b}},
        }
        create_connector(custom, namespace, sink_a, sink_a_spec)
        initial = initial_applied(custom, namespace, sink_a)
        assert f"the group of connector {sink_b} through the checkpoints" in initial["message"], initial
        pin = core.read_namespaced_config_map(initial["configMap"], namespace)
        assert pin.metadata.annotations[f"{GROUP}/pinned-from"].startswith(
            f"group {sink_group} through the checkpoints"
        )
        _, sink_translated = checkpoints(kafka_a, checkpoints_topic)[(sink_group, remote, 0)]
        wait_for("the DR sink wrote to the end", lambda: out_a.exists() and f"r-{total - 1}\n" in out_a.read_text(), 90)
        written = out_a.read_text().splitlines()
        start = int(written[0].removeprefix("r-"))
        assert start == sink_translated and written == [f"r-{i}" for i in range(start, total)]
        assert 0 <= n - start <= LAG_MAX
        print(
            f"sink: stopped at {n} on B, resumed at {start} on A, {n - start} record(s) written again (bound {LAG_MAX})"
        )
    finally:
        with contextlib.suppress(ApiException):
            custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, MIRRORS, mirror)
        wait_for(
            "the mirror's connectors deleted",
            lambda: not [c for c in connect.get("/connectors").json() if c.startswith(f"{b}->")],
            timeout=90,
        )
        drop_topics(kafka_a, [f"{b}.{t}", f"{b}.checkpoints.internal"])
        drop_topics(kafka_b, [t, u, f"mm2-offset-syncs.{a}.internal"])
