"""The operator's Prometheus and health endpoints, scraped during a real list operation.

Covers: operations by kind/operation/result, the duration histogram, connectors by Connect state.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from tests.conftest import OperatorProcess, wait_for
from tests.integration.support import (
    annotate,
    connect_offsets,
    create_cluster,
    create_connector,
    file_source_spec,
    free_port,
    wait_annotation_removed,
    wait_condition,
)


def test_metrics_endpoint_reports_operations_and_states(
    custom: Any,
    namespace: str,
    stack: dict[str, Any],
    connect: httpx.Client,
    connect_url: str,
    tmp_path: Path,
    unique: str,
) -> None:
    port, health_port = free_port(), free_port()
    operator = OperatorProcess(
        stack["kubeconfig"],
        namespace,
        tmp_path / "op.log",
        extra_args=[
            "--metrics-port",
            str(port),
            "--log-format",
            "json",
            "--liveness",
            f"http://127.0.0.1:{health_port}/healthz",
        ],
    )
    operator.start()
    source = tmp_path / "s.txt"
    source.write_text("m\n")
    name = f"metrics-{unique}"
    try:
        create_cluster(custom, namespace, connect_url)
        create_connector(custom, namespace, name, file_source_spec(source, name, "m-offsets"))
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorRunning")
        wait_for("offsets committed", lambda: connect_offsets(connect, name))
        annotate(custom, namespace, name, connector_offsets="list")
        wait_annotation_removed(custom, namespace, name)

        def scrape() -> str | None:
            text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
            return text if 'connect_offsets_connectors{kind="KafkaConnector",state="RUNNING"} 1.0' in text else None

        text = wait_for("metrics with the running connector", scrape)
        assert (
            'connect_offsets_offsets_operations_total{kind="KafkaConnector",operation="list",result="Succeeded"} 1.0'
        ) in text
        assert (
            'connect_offsets_offsets_operation_duration_seconds_count{kind="KafkaConnector",operation="list"} 1.0'
            in text
        )
        # kopf's health endpoint, which the chart's probes use
        health = wait_for(
            "the health endpoint", lambda: httpx.get(f"http://127.0.0.1:{health_port}/healthz", timeout=5)
        )
        assert health.status_code == 200
        # JSON log lines, one object per line
        assert any(line.startswith("{") and '"message"' in line for line in operator.log().splitlines())
    finally:
        operator.stop()
        connect.delete(f"/connectors/{name}")
