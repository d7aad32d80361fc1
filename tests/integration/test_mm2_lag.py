"""MirrorMaker 2 replication lag on the real stack: Kafka B is the source, Kafka A the target.

Covers: records produced while the MirrorSourceConnector is stopped show up as lag, per partition
as produced (whole backlog before any offset, ``end - (offset + 1)`` after); resuming brings the
lag to 0; status, the Prometheus endpoint and a direct computation from both clusters (Connect's
offsets + the source's watermarks) agree; ReplicationLagging goes True above the threshold and
False again; a source cluster that cannot be reached gives ReplicationLagging=Unknown, the status
keeps the last good numbers with their time and ``stale: true``, and the lag series disappear;
``kubectl connect-offsets lag NAME`` prints the status as a table.
"""

from __future__ import annotations

import copy
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from connect_offsets.tools.kubectl import main as plugin_main
from tests.conftest import OperatorProcess, wait_for
from tests.integration.support import (
    GROUP,
    VERSION,
    condition,
    connect_offsets,
    create_cluster,
    create_mm2,
    free_port,
    wait_connect_state,
)

PLURAL = "kafkamirrormaker2s"
PARTITIONS = 3
pytestmark = pytest.mark.xdist_group("mirrormaker2")  # runs MirrorMaker 2: see test_mirrormaker2.py


def get_mm2(custom: Any, namespace: str, name: str) -> dict[str, Any]:
    body: dict[str, Any] = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
    return body


def lag_status(custom: Any, namespace: str, name: str) -> dict[str, Any]:
    return dict((get_mm2(custom, namespace, name).get("status") or {}).get("replicationLag") or {})


def watermarks(bootstrap: str, topic: str) -> list[tuple[int, int]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"probe-{uuid.uuid4().hex[:6]}"})
    try:
        return [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in range(PARTITIONS)]
    finally:
        consumer.close()


def direct_lags(bootstrap: str, topic: str, offsets: list[dict[str, Any]]) -> list[int]:
    """The lag computed independently: source watermarks and Connect's offsets of the connector."""
    replicated = {
        o["partition"]["partition"]: o["offset"]["offset"] for o in offsets if o["partition"]["topic"] == topic
    }
    lags = []
    for partition, (low, high) in enumerate(watermarks(bootstrap, topic)):
        lags.append(high - (replicated[partition] + 1) if partition in replicated else high - low)
    return lags


def scrape_lags(port: int, namespace: str) -> tuple[dict[int, float], dict[str, float]]:
    """(per-partition lag, per-mirror gauges) of this namespace from the operator's /metrics."""
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    partitions: dict[int, float] = {}
    mirror: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.labels.get("namespace") != namespace:
                continue
            if sample.name == "connect_offsets_mm2_replication_lag":
                partitions[int(sample.labels["partition"])] = sample.value
            elif sample.name.startswith("connect_offsets_mm2_"):
                mirror[sample.name] = sample.value
    return partitions, mirror


def produce(bootstrap: str, topic: str, counts: dict[int, int]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for partition, count in counts.items():
        for i in range(count):
            producer.produce(topic, value=f"p{partition}-{i}".encode(), partition=partition)
    assert producer.flush(15) == 0


def test_replication_lag_status_metrics_and_condition(
    custom: Any,
    namespace: str,
    stack: dict[str, Any],
    connect: httpx.Client,
    connect_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    unique = uuid.uuid4().hex[:6]
    east, west = f"east{unique}", f"west{unique}"
    topic = f"lag-{unique}"
    source_name = f"{east}->{west}.MirrorSourceConnector"
    source, target = stack["kafka_b"], stack["kafka_a"]
    admin = AdminClient({"bootstrap.servers": source})
    admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)])[topic].result(30)
    port = free_port()
    operator = OperatorProcess(
        stack["kubeconfig"], namespace, tmp_path / "op.log", extra_args=["--metrics-port", str(port)]
    )
    operator.start()
    clusters = [{"alias": east, "bootstrapServers": source}, {"alias": west, "bootstrapServers": target}]
    mirrors = [
        {
            "sourceCluster": east,
            "targetCluster": west,
            "topicsPattern": topic,
            "sourceConnector": {
                "tasksMax": 1,
                "state": "stopped",
                "config": {
                    "replication.factor": 1,
                    "offset-syncs.topic.replication.factor": 1,
                    "sync.topic.acls.enabled": False,
                    "refresh.topics.interval.seconds": 5,
                    "heartbeats.replication.enabled": False,
                },
            },
        }
    ]
    name = "lagging"
    create_mm2(
        custom,
        namespace,
        name,
        clusters,
        mirrors,
        replicationLag={"intervalSeconds": 2, "threshold": 5, "forSeconds": 2},
    )

    def patch_spec(**spec: Any) -> None:
        custom.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name, {"spec": copy.deepcopy(spec)})

    def wait_lag(expected: list[int], what: str, timeout: float = 90) -> dict[str, Any]:
        def check() -> dict[str, Any] | None:
            status = lag_status(custom, namespace, name)
            per_partition, _ = scrape_lags(port, namespace)
            if (
                status.get("total") == sum(expected)
                and not status.get("stale")
                and per_partition == dict(enumerate(map(float, expected)))
            ):
                return status
            return None

        try:
            return wait_for(what, check, timeout=timeout)
        except AssertionError as error:
            raise AssertionError(f"{error}; status now {lag_status(custom, namespace, name)}") from None

    def lagging() -> dict[str, Any] | None:
        return condition(get_mm2(custom, namespace, name), "ReplicationLagging")

    try:
        create_cluster(custom, namespace, connect_url)
        wait_connect_state(connect, source_name, "STOPPED", timeout=90)

        # 1. nothing replicated yet: the whole backlog, per partition as produced
        produce(source, topic, {0: 4, 1: 7, 2: 2})
        status = wait_lag([4, 7, 2], "lag 4/7/2 with the connector stopped")
        assert connect_offsets(connect, source_name) == []
        assert direct_lags(source, topic, []) == [4, 7, 2]
        mirror = status["mirrors"][0]
        assert (mirror["sourceCluster"], mirror["targetCluster"], mirror["connector"]) == (east, west, source_name)
        assert status["worstPartition"] == {"topic": topic, "partition": 1, "lag": 7, "mirror": f"{east}->{west}"}
        assert (status["max"], mirror["partitions"]) == (7, PARTITIONS)
        found = wait_for("ReplicationLagging=True", lambda: (c := lagging()) and c["status"] == "True" and c)
        assert found["reason"] == "LagAboveThreshold" and "13 records behind (threshold 5)" in found["message"]
        # the kubectl plugin shows the same numbers
        code = plugin_main(["lag", name, "-n", namespace, "--kubeconfig", stack["kubeconfig"]])
        table = capsys.readouterr().out.splitlines()
        assert code == 0 and table[0].startswith("MIRROR")
        assert table[1].split()[:7] == [f"{east}->{west}", source_name, "3", "13", "7", f"{topic}/1", "(7)"]
        assert table[2].startswith("ReplicationLagging=True (LagAboveThreshold)")
        _, gauges = scrape_lags(port, namespace)
        assert gauges["connect_offsets_mm2_mirror_lag"] == 13 and gauges["connect_offsets_mm2_mirror_lag_max"] == 7
        assert gauges["connect_offsets_mm2_lag_stale"] == 0

        # 2. resume: MM2 catches up, the lag goes to 0 and the condition to False
        mirrors[0]["sourceConnector"]["state"] = "running"
        patch_spec(mirrors=mirrors)
        wait_lag([0, 0, 0], "lag 0 after resuming", timeout=120)
        wait_for("ReplicationLagging=False", lambda: (c := lagging()) and c["status"] == "False")
        offsets = connect_offsets(connect, source_name)
        assert direct_lags(source, topic, offsets) == [0, 0, 0]

        # 3. stopped again, more records: end - (offset + 1), equal to a direct computation
        mirrors[0]["sourceConnector"]["state"] = "stopped"
        patch_spec(mirrors=mirrors)
        wait_connect_state(connect, source_name, "STOPPED", timeout=90)
        # STOPPED is reported before the task has shut down; a task still polling would copy the
        # records produced next. Connect drops a stopped connector's tasks once they are gone.
        wait_for("no tasks left", lambda: connect.get(f"/connectors/{source_name}/tasks").json() == [])
        wait_for("no task status left", lambda: connect.get(f"/connectors/{source_name}/status").json()["tasks"] == [])
        produce(source, topic, {0: 1, 1: 3})
        status = wait_lag([1, 3, 0], "lag 1/3/0 after producing with the connector stopped")
        offsets = connect_offsets(connect, source_name)
        assert sorted(o["partition"]["partition"] for o in offsets) == [0, 1, 2]
        assert direct_lags(source, topic, offsets) == [1, 3, 0]
        good_time = datetime.fromisoformat(status["measuredAt"].replace("Z", "+00:00"))

        # 4. the source cluster cannot be reached: Unknown, the old numbers stale, no lag series
        dead = f"127.0.0.1:{free_port()}"
        patch_spec(clusters=[{"alias": east, "bootstrapServers": dead}, clusters[1]])
        unknown = wait_for(
            "ReplicationLagging=Unknown", lambda: (c := lagging()) and c["status"] == "Unknown" and c, timeout=90
        )
        assert unknown["reason"] == "ReplicationLagUnknown" and f"source cluster {east}" in unknown["message"]
        status = wait_for("stale status", lambda: (s := lag_status(custom, namespace, name)).get("stale") and s)
        assert status["total"] == 4 and status["mirrors"][0]["stale"] is True
        assert dead in status["message"]
        stale_time = datetime.fromisoformat(status["measuredAt"].replace("Z", "+00:00"))
        assert good_time <= stale_time  # the last good measurement, not the failed attempt
        _, gauges = wait_for("lag series removed", lambda: (m := scrape_lags(port, namespace)) and not m[0] and m)
        assert gauges["connect_offsets_mm2_lag_stale"] == 1
        assert "connect_offsets_mm2_mirror_lag" not in gauges
        # the time of the last good measurement (status has whole seconds)
        assert int(gauges["connect_offsets_mm2_lag_measurement_timestamp_seconds"]) == stale_time.timestamp()
        assert operator.process is not None and operator.process.poll() is None  # no crash
    finally:
        custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
        wait_for("MM2 connector removed", lambda: connect.get(f"/connectors/{source_name}").status_code == 404)
        operator.stop()
        admin.delete_topics([topic])
