"""The replication lag monitor goes through the same binding checks as the reconcile (issue 31,
point 2): a KafkaMirrorMaker2 the reconcile refuses gets nothing read for it.

The operator runs as the chart installs it for two tenant namespaces and a platform namespace whose
ConnectCluster is shared (``allowedNamespaces``, ``connectorNamePrefix: "{namespace}-"``). Tenant A
mirrors Kafka B into Kafka A. Two resources then name A's connectors:

* tenant B's KafkaMirrorMaker2 with A's aliases (so A's connector names), its source cluster a
  listener on 127.0.0.2 that counts connections: ``ConnectorNameNotAllowed``;
* a second KafkaMirrorMaker2 in tenant A's own namespace with the same aliases and clusters:
  ``ConnectorOwnedElsewhere`` (the connector's owner key names the first resource).

Before the fix the lag monitor read A's connector's offsets for both with the platform's Connect,
connected to B's listener, and put A's lag into the twin's status and metrics; now: no
connection, no lag numbers in their status, no lag series.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import wait_for
from tests.integration.chart_install import chart_operator, tenant_namespaces
from tests.integration.hostile import CountingListener
from tests.integration.support import (
    GROUP,
    VERSION,
    condition,
    create_cluster,
    get_mm2,
    wait_connect_state,
    wait_mm2_condition,
)


def create_mirror(custom: Any, namespace: str, name: str, labels: dict[str, str], spec: dict[str, Any]) -> None:
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "KafkaMirrorMaker2",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": spec,
    }
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "kafkamirrormaker2s", body)


def mirror_spec(east: str, source: str, target: str, topic: str) -> dict[str, Any]:
    return {
        "clusters": [{"alias": east, "bootstrapServers": source}, {"alias": "west", "bootstrapServers": target}],
        "mirrors": [
            {
                "sourceCluster": east,
                "targetCluster": "west",
                "topicsPattern": topic,
                "sourceConnector": {
                    "state": "stopped",
                    "config": {
                        "replication.factor": 1,
                        "offset-syncs.topic.replication.factor": 1,
                        "heartbeats.replication.enabled": False,
                    },
                },
            }
        ],
        "replicationLag": {"intervalSeconds": 2},
    }


def lag_series(metrics_url: str, namespace: str, mirror: str | None = None) -> list[str]:
    """The lag series of a namespace (and of one KafkaMirrorMaker2 of it) on the operator's /metrics."""
    text = httpx.get(metrics_url, timeout=5).text
    return [
        f"{sample.name}{sample.labels}"
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.labels.get("namespace") == namespace
        and (mirror is None or sample.labels.get("mirror") == mirror)
        and sample.name in ("connect_offsets_mm2_replication_lag", "connect_offsets_mm2_mirror_lag")
    ]


@pytest.mark.local_stack
@pytest.mark.timeout(400)
def test_lag_monitor_reads_nothing_for_a_refused_mirror(
    custom: Any,
    core: Any,
    namespace: str,
    stack: dict[str, Any],
    connect: httpx.Client,
    connect_url: str,
    tmp_path: Path,
    unique: str,
) -> None:
    topic = f"lagbind-{unique}"
    admin = AdminClient({"bootstrap.servers": stack["kafka_b"]})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(30)
    with (
        CountingListener() as elsewhere,
        tenant_namespaces(core, custom, namespace, 3) as (tenant_a, tenant_b, platform),
        chart_operator(stack, core, custom, tmp_path, [tenant_a, tenant_b, platform]) as op,
    ):
        create_cluster(
            custom,
            platform,
            connect_url,
            name="shared",
            allowedNamespaces=[tenant_a, tenant_b],
            connectorNamePrefix="{namespace}-",
        )
        labels = {f"{GROUP}/cluster": "shared", f"{GROUP}/cluster-namespace": platform}
        east = f"{tenant_a}-east"
        connector = f"{east}->west.MirrorSourceConnector"
        create_mirror(custom, tenant_a, "mirror", labels, mirror_spec(east, stack["kafka_b"], stack["kafka_a"], topic))
        try:
            wait_connect_state(connect, connector, "STOPPED", timeout=90)
            wait_for(
                "A's lag measured",
                lambda: ((get_mm2(custom, tenant_a, "mirror").get("status") or {}).get("replicationLag") or {}).get(
                    "measuredAt"
                ),
            )
            hostile = mirror_spec(east, elsewhere.address, stack["kafka_a"], topic)
            create_mirror(custom, tenant_b, "copycat", labels, hostile)
            twin = mirror_spec(east, stack["kafka_b"], stack["kafka_a"], topic)
            create_mirror(custom, tenant_a, "twin", labels, twin)
            wait_mm2_condition(custom, tenant_b, "copycat", "Ready", "ConnectorNameNotAllowed", status="False")
            wait_mm2_condition(custom, tenant_a, "twin", "Ready", "ConnectorOwnedElsewhere", status="False")
            time.sleep(12)  # six lag intervals of the refused resources
            assert elsewhere.connections == 0, f"{elsewhere.connections} connections to {elsewhere.address}"
            for ns, name in ((tenant_b, "copycat"), (tenant_a, "twin")):
                lag = (get_mm2(custom, ns, name).get("status") or {}).get("replicationLag") or {}
                assert lag.get("total") is None and lag.get("measuredAt") is None, lag
                assert not [m for m in lag.get("mirrors") or [] if m.get("total") is not None], lag
            assert lag_series(op.metrics_url, tenant_b) == []
            assert lag_series(op.metrics_url, tenant_a, "twin") == []
            # tenant A's own resource is measured all along.
            assert lag_series(op.metrics_url, tenant_a, "mirror")
            assert condition(get_mm2(custom, tenant_a, "mirror"), "Ready") is not None
        finally:
            connect.delete(f"/connectors/{connector}")
