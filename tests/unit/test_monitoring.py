"""Unit tests of the chart's monitoring: the Prometheus alert rules and the Grafana dashboard.

Static, no cluster: ``promtool`` and ``helm`` as ``make go-tools`` builds them
(``$CONNECT_OFFSETS_CACHE/bin``, default ``~/.cache/connect-offsets/bin``).

Covers:
* ``promtool check rules`` on ``charts/connect-offsets-operator/files/alerts.yaml`` and
  ``promtool test rules`` on ``tests/prometheus/alerts_test.yaml``; every alert has a test where it
  fires and one where nothing fires, a severity, a summary and a description, and a row in the docs;
* the chart: ``metrics.prometheusRule.enabled`` renders a PrometheusRule whose spec is exactly
  ``files/alerts.yaml``; ``metrics.grafanaDashboard.enabled`` a ConfigMap labelled
  ``grafana_dashboard: "1"`` holding exactly ``files/dashboard.json``; neither by default nor
  without metrics; the schema stays closed;
* the dashboard: valid JSON, unique panel ids, panels on the 24-column grid without overlaps,
  every query on the ``$datasource`` variable, every variable it uses defined;
* every metric the alerts and the dashboard query is in the operator's registry (the integration
  test ``test_monitoring_metrics.py`` proves the same against a running operator's ``/metrics``).
"""

from __future__ import annotations

import json
import re
import subprocess
from typing import Any

import pytest
import yaml
from prometheus_client import generate_latest

from connect_offsets import metrics
from tests.chart import CHART, go_tool, objects, one, render, run_helm
from tests.monitoring import (
    ALERTS,
    ALERTS_TEST,
    DASHBOARD,
    REPO,
    alert_rules,
    dashboard,
    dashboard_panels,
    dashboard_queries,
    queried_metrics,
    unknown_metrics,
)

pytestmark = pytest.mark.unit

SEVERITIES = {"info", "warning", "critical"}
DASHBOARD_KEY = "connect-offsets-operator.json"


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([go_tool("promtool"), *args], cwd=REPO, capture_output=True, text=True, check=False)


# --- alert rules ---------------------------------------------------------------------------------


def test_promtool_checks_the_rules() -> None:
    result = promtool("check", "rules", str(ALERTS))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(alert_rules())} rules found" in result.stdout + result.stderr


def test_promtool_unit_tests_of_the_rules_pass() -> None:
    result = promtool("test", "rules", str(ALERTS_TEST))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout + result.stderr


def test_every_alert_is_tested_firing_and_quiet() -> None:
    cases = [case for test in yaml.safe_load(ALERTS_TEST.read_text())["tests"] for case in test["alert_rule_test"]]
    names = [rule["alert"] for rule in alert_rules()]
    assert len(names) == len(set(names)), names
    for name in names:
        fired = [case for case in cases if case["alertname"] == name and case.get("exp_alerts")]
        quiet = [case for case in cases if case["alertname"] == name and not case.get("exp_alerts")]
        assert fired, f"{name}: no test where it fires"
        assert quiet, f"{name}: no test where it stays quiet"
    assert {case["alertname"] for case in cases} <= set(names), "a test names an alert that does not exist"


@pytest.mark.parametrize("rule", alert_rules(), ids=lambda rule: str(rule["alert"]))
def test_every_alert_has_severity_summary_and_description(rule: dict[str, Any]) -> None:
    assert re.fullmatch(r"ConnectOffsets[A-Z][A-Za-z]+", rule["alert"])
    assert rule["labels"]["severity"] in SEVERITIES
    assert rule["annotations"]["summary"].strip() and rule["annotations"]["description"].strip()


def test_the_docs_list_every_alert() -> None:
    reference = (REPO / "docs" / "reference.md").read_text()
    for rule in alert_rules():
        assert f"| `{rule['alert']}` |" in reference, f"{rule['alert']} missing from docs/reference.md#alerts"


# --- the chart -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "values",
    [(), ("metrics.enabled=false", "metrics.prometheusRule.enabled=true", "metrics.grafanaDashboard.enabled=true")],
    ids=["defaults", "metrics-disabled"],
)
def test_no_rule_or_dashboard_by_default_nor_without_metrics(values: tuple[str, ...]) -> None:
    docs = render(*values)
    assert not objects(docs, "PrometheusRule")
    assert not objects(docs, "ConfigMap")


def test_prometheus_rule_ships_the_tested_rules() -> None:
    docs = render("metrics.prometheusRule.enabled=true", "metrics.prometheusRule.labels.release=prom")
    rule = one(docs, "PrometheusRule")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["metadata"]["namespace"] == "connect-offsets"
    assert rule["metadata"]["labels"]["release"] == "prom"
    assert rule["metadata"]["labels"]["app.kubernetes.io/part-of"] == "connect-offsets-operator"
    assert rule["spec"] == yaml.safe_load(ALERTS.read_text())


def test_grafana_dashboard_config_map() -> None:
    docs = render(
        "metrics.grafanaDashboard.enabled=true",
        "metrics.grafanaDashboard.namespace=monitoring",
        "metrics.grafanaDashboard.labels.team=kafka",
        "metrics.grafanaDashboard.annotations.grafana_folder=Kafka",
    )
    config_map = one(docs, "ConfigMap")
    meta = config_map["metadata"]
    assert meta["name"] == "connect-offsets-operator-dashboard"
    assert meta["namespace"] == "monitoring"
    assert meta["labels"]["grafana_dashboard"] == "1" and meta["labels"]["team"] == "kafka"
    assert meta["annotations"] == {"grafana_folder": "Kafka"}
    assert list(config_map["data"]) == [DASHBOARD_KEY]
    assert json.loads(config_map["data"][DASHBOARD_KEY]) == dashboard()
    default_namespace = one(render("metrics.grafanaDashboard.enabled=true"), "ConfigMap")["metadata"]
    assert default_namespace["namespace"] == "connect-offsets" and "annotations" not in default_namespace


@pytest.mark.parametrize(
    "value",
    [
        "metrics.prometheusRule.unknown=1",
        "metrics.grafanaDashboard.unknown=1",
        "metrics.grafanaDashboard.namespace=Bad_NS",
    ],
)
def test_schema_rejects_bad_monitoring_values(value: str) -> None:
    result = run_helm("template", "connect-offsets-operator", str(CHART), "--set", value)
    assert result.returncode != 0 and "schema" in result.stderr, f"--set {value} was accepted"


def test_schema_of_the_monitoring_values_is_closed() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())["properties"]["metrics"]["properties"]
    for key in ("prometheusRule", "grafanaDashboard"):
        assert schema[key]["additionalProperties"] is False, key


# --- the dashboard -------------------------------------------------------------------------------


def test_dashboard_is_valid_and_laid_out_on_the_grid() -> None:
    board = json.loads(DASHBOARD.read_text())
    assert board["uid"] == "connect-offsets-operator" and board["title"]
    panels = dashboard_panels(board)
    ids = [panel["id"] for panel in panels]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    cells: dict[tuple[int, int], str] = {}
    for panel in panels:
        pos = panel["gridPos"]
        assert pos["x"] >= 0 and pos["w"] >= 1 and pos["x"] + pos["w"] <= 24, panel["title"]
        for x in range(pos["x"], pos["x"] + pos["w"]):
            for y in range(pos["y"], pos["y"] + pos["h"]):
                assert (x, y) not in cells, f"{panel['title']!r} overlaps {cells[(x, y)]!r}"
                cells[(x, y)] = panel["title"]
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        ref_ids = [target["refId"] for target in panel["targets"]]
        assert ref_ids and len(ref_ids) == len(set(ref_ids)), panel["title"]
        assert panel.get("description"), f"{panel['title']!r} has no description"


def test_dashboard_panels_cover_the_issue() -> None:
    """Operations, their duration, connector states, auto-restarts, MM2 lag per partition and in
    total, reconcile errors and event-loop lag each have a panel."""
    queries = "\n".join(dashboard_queries(dashboard()).values())
    for metric in (
        "connect_offsets_offsets_operations_total",
        "connect_offsets_offsets_operation_duration_seconds_bucket",
        "connect_offsets_connectors",
        "connect_offsets_auto_restarts_total",
        "connect_offsets_mm2_replication_lag",
        "connect_offsets_mm2_mirror_lag",
        "connect_offsets_reconcile_errors_total",
        "connect_offsets_event_loop_lag_seconds",
    ):
        assert re.search(rf"\b{metric}\b", queries), metric


def test_dashboard_variables_are_defined() -> None:
    board = dashboard()
    defined = {variable["name"] for variable in board["templating"]["list"]}
    used = set(re.findall(r"\$(\w+)", json.dumps(board["panels"]) + json.dumps(board["templating"])))
    builtin = {name for name in used if name.startswith("__")}
    assert used - builtin <= defined, sorted(used - builtin - defined)


# --- the metrics they query ----------------------------------------------------------------------


def test_alerts_and_dashboard_query_only_metrics_the_operator_registers() -> None:
    assert len(queried_metrics()) >= 10
    assert unknown_metrics(generate_latest(metrics.REGISTRY).decode()) == {}


def test_a_scrape_while_passes_change_connector_states_never_fails() -> None:
    """The metrics server's thread collects while the event loop's passes add and forget states:
    the collector reads a snapshot (bench_cold_start's restart: "dictionary changed size during
    iteration" failed two scrapes). Many scrapes against a writer that never stops."""
    import threading

    from connect_offsets.controller import measure_pauses

    measure_pauses()  # as the operator runs: a Python callback on every collection
    stop = threading.Event()
    failures: list[BaseException] = []

    def scrape() -> None:
        while not stop.is_set():
            try:
                generate_latest(metrics.REGISTRY)
            except BaseException as error:  # the failure is the finding
                failures.append(error)
                return

    scraper = threading.Thread(target=scrape)
    scraper.start()
    try:
        for i in range(30_000):
            metrics.set_connector_state("KafkaConnector", "race", f"r{i}", f"r{i}", "RUNNING")
            if i % 1000 == 0:
                metrics.forget_connector("KafkaConnector", "race", f"r{i - 3}")
    finally:
        stop.set()
        scraper.join()
        for i in range(30_000):
            metrics._states.pop(("KafkaConnector", "race", f"r{i}", f"r{i}"), None)
    assert failures == []
