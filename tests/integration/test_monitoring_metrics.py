"""The chart's alert rules and Grafana dashboard query only metrics a running operator exports.

Covers: every metric name in ``charts/connect-offsets-operator/files/alerts.yaml`` and
``files/dashboard.json`` is served on ``/metrics`` of the operator started on the stack (a family
counts as exported from its ``# TYPE`` line, as Prometheus would find it once it has samples).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from tests.conftest import OperatorProcess, wait_for
from tests.integration.support import free_port
from tests.monitoring import exported_names, queried_metrics, unknown_metrics


def test_alerts_and_dashboard_query_metrics_the_operator_serves(
    namespace: str, stack: dict[str, Any], tmp_path: Path
) -> None:
    port = free_port()
    operator = OperatorProcess(
        stack["kubeconfig"], namespace, tmp_path / "op.log", extra_args=["--metrics-port", str(port)]
    )
    operator.start()
    try:

        def scrape() -> str | None:
            text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
            # The event-loop probe runs from the operator's startup handler: the loop is up.
            return text if "connect_offsets_event_loop_lag_probe_seconds_count" in text else None

        text = wait_for("the operator's /metrics", scrape)
        assert set(queried_metrics()) & exported_names(text), "no queried metric found at all"
        assert unknown_metrics(text) == {}, operator.log()[-4000:]
    finally:
        operator.stop()
