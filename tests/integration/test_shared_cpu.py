"""One tenant cannot freeze the operator for the others (issue 18, point 3).

The operator runs as the chart installs it, for two tenant namespaces. While tenant A sends a
catastrophic ``topics.regex`` and then a large alter, a prober asks the operator's liveness endpoint
every 0.2 s with a 1 s timeout, and tenant B's requests keep completing. Before RE2, the hostile
pattern never finished (the health endpoint stopped answering, the pod was restarted and hung
again); before validation moved off the event loop, 300,000 entries blocked it 4.2 s.
"""

from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import wait_for
from tests.integration.chart_install import chart_operator, tenant_namespaces
from tests.integration.hostile import Prober
from tests.integration.support import (
    FILE_SINK,
    MONITORABLE_SOURCE,
    annotate,
    condition,
    connect_offsets,
    create_cluster,
    create_connector,
    delete_with_offsets,
    file_source_spec,
    get_connector,
    wait_annotation_removed,
    wait_condition,
)

HOSTILE_TOPIC = "a" * 40 + "!"
LARGE = 200_000


def list_completes(custom: Any, namespace: str, name: str) -> None:
    annotate(custom, namespace, name, connector_offsets="list")
    body = wait_annotation_removed(custom, namespace, name, timeout=60)
    assert body["status"]["lastOffsetsOperation"]["result"] == "Succeeded"


# Serial: a liveness probe with a 1 s timeout measures the operator's event loop, which the other
# tests' CPU load on two cores would slow down as much as the hostile tenant could.
@pytest.mark.serial
@pytest.mark.timeout(600)
def test_a_hostile_regex_and_a_large_alter_do_not_freeze_the_operator(
    custom: Any,
    core: Any,
    namespace: str,
    stack: dict[str, Any],
    connect: httpx.Client,
    connect_url: str,
    tmp_path: Path,
    unique: str,
) -> None:
    with (
        tenant_namespaces(core, custom, namespace) as (tenant_a, tenant_b),
        chart_operator(stack, core, custom, tmp_path, [tenant_a, tenant_b]) as installed,
    ):
        hostile, large, other = f"regex-{unique}", f"large-{unique}", f"calm-{unique}"
        for tenant in (tenant_a, tenant_b):
            create_cluster(custom, tenant, connect_url)
        source = tmp_path / "b.txt"
        source.write_text("one\ntwo\n")
        create_connector(custom, tenant_b, other, file_source_spec(source, other, "calm-offsets"))
        create_connector(
            custom,
            tenant_a,
            hostile,
            {
                "class": FILE_SINK,
                "tasksMax": 1,
                "state": "stopped",
                "config": {"topics.regex": "(a+)+", "file": str(tmp_path / "sink.txt")},
                "alterOffsets": {"fromConfigMap": {"name": "regex-offsets"}},
            },
        )
        create_connector(
            custom,
            tenant_a,
            large,
            {
                "class": MONITORABLE_SOURCE,
                "tasksMax": 1,
                "state": "stopped",
                "config": {"topic": f"{large}-topic"},
                "alterOffsets": {"fromConfigMap": {"name": "large-offsets"}},
            },
        )
        prober = Prober(installed.liveness_url)
        try:
            wait_condition(custom, tenant_b, other, "Ready", reason="ConnectorRunning", timeout=90)
            wait_for("tenant B's offsets committed", lambda: connect_offsets(connect, other))
            wait_condition(custom, tenant_a, hostile, "Ready", reason="ConnectorStopped", timeout=90)
            wait_condition(custom, tenant_a, large, "Ready", reason="ConnectorStopped", timeout=90)
            prober.start()

            # The catastrophic pattern: refused in milliseconds with the reason, nothing sent.
            entry = {"partition": {"kafka_topic": HOSTILE_TOPIC, "kafka_partition": 0}, "offset": {"kafka_offset": 5}}
            core.create_namespaced_config_map(
                tenant_a,
                {"metadata": {"name": "regex-offsets"}, "data": {"offsets.json": json.dumps({"offsets": [entry]})}},
            )
            annotate(custom, tenant_a, hostile, connector_offsets="alter")
            refused = wait_for(
                "the hostile-regex alter refused",
                lambda: condition(get_connector(custom, tenant_a, hostile), "OffsetsOperationFailed"),
                timeout=60,
            )
            assert refused["reason"] == "InvalidOffsets", refused
            assert f"topic {json.dumps(HOSTILE_TOPIC)} is not consumed" in refused["message"], refused
            assert connect_offsets(connect, hostile) == []
            list_completes(custom, tenant_b, other)

            # A large alter: validated and planned off the event loop.
            document = {
                "offsets": [
                    {"partition": {"file": f"/data/landing/batch-{i:07d}.csv"}, "offset": {"line": i % 97}}
                    for i in range(LARGE)
                ]
            }
            packed = base64.b64encode(gzip.compress(json.dumps(document).encode())).decode()
            core.create_namespaced_config_map(
                tenant_a, {"metadata": {"name": "large-offsets"}, "binaryData": {"offsets.json.gz": packed}}
            )
            annotate(custom, tenant_a, large, connector_offsets="alter")
            list_completes(custom, tenant_b, other)  # while the large alter is under way
            body = wait_annotation_removed(custom, tenant_a, large, timeout=300)
            assert body["status"]["lastOffsetsOperation"]["result"] == "Succeeded", body["status"]
            # The worker's GET takes its partition set from its offsets-topic reader, which may lag
            # the PATCH that just returned (see test_operator_large_offsets).
            wait_for(
                "the worker lists every altered partition",
                lambda: (
                    len(connect.get(f"/connectors/{large}/offsets", timeout=120).json().get("offsets", [])) == LARGE
                ),
                timeout=120,
                interval=1,
            )
        finally:
            prober.done.set()
            if prober.is_alive():
                prober.join(5)
            for name in (hostile, other):
                connect.delete(f"/connectors/{name}")
            delete_with_offsets(connect, large)
        assert len(prober.latencies) > 10
        assert prober.failures == [], (prober.failures, installed.operator.log()[-3000:])
        scraped = httpx.get(installed.metrics_url).text
        assert "connect_offsets_event_loop_lag_seconds " in scraped
        print(f"liveness: {len(prober.latencies)} probes, worst {max(prober.latencies):.3f} s")
