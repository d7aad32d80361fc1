"""The metric names the chart's alert rules and Grafana dashboard query, and the names an exposition
exports: shared by the unit tests (against the operator's registry in-process) and the integration
test (against ``/metrics`` of an operator running on the stack).

Why a module of its own: both tiers must extract names exactly the same way, or the integration
test would prove something else than the unit test checks.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
CHART_FILES = REPO / "charts" / "connect-offsets-operator" / "files"
ALERTS = CHART_FILES / "alerts.yaml"
DASHBOARD = CHART_FILES / "dashboard.json"
ALERTS_TEST = REPO / "tests" / "prometheus" / "alerts_test.yaml"

#: A metric name of the operator inside a PromQL expression (label values never start this way).
METRIC_NAME = re.compile(r"\bconnect_offsets_[A-Za-z0-9_]+")
#: Sample names each exposition TYPE adds to its family name (prometheus_client's text format
#: already names a counter's family ``..._total``).
TYPE_SUFFIXES = {
    "counter": ("",),
    "gauge": ("",),
    "untyped": ("",),
    "histogram": ("_bucket", "_sum", "_count"),
    "summary": ("", "_sum", "_count"),
}


def alert_rules() -> list[dict[str, Any]]:
    """Every alerting rule of ``files/alerts.yaml``, in file order."""
    groups = yaml.safe_load(ALERTS.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


def dashboard() -> dict[str, Any]:
    result: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return result


def dashboard_panels(board: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel, rows' nested panels included (a collapsed row keeps its panels inside)."""
    found: list[dict[str, Any]] = []
    for panel in board.get("panels", []):
        found.append(panel)
        found.extend(panel.get("panels", []))
    return found


def dashboard_queries(board: dict[str, Any]) -> dict[str, str]:
    """Every PromQL text of the dashboard: where (panel title or variable) -> query."""
    queries: dict[str, str] = {}
    for panel in dashboard_panels(board):
        for target in panel.get("targets", []):
            queries[f"panel {panel['title']!r} {target['refId']}"] = target["expr"]
    for variable in board.get("templating", {}).get("list", []):
        if variable.get("type") == "query":
            query = variable["query"]
            queries[f"variable ${variable['name']}"] = query["query"] if isinstance(query, dict) else query
    return queries


def queried_metrics() -> dict[str, set[str]]:
    """Metric name -> where the alerts and the dashboard use it."""
    uses: dict[str, set[str]] = {}
    sources = {f"alert {rule['alert']}": rule["expr"] for rule in alert_rules()}
    sources.update(dashboard_queries(dashboard()))
    for where, expr in sources.items():
        for name in METRIC_NAME.findall(expr):
            uses.setdefault(name, set()).add(where)
    return uses


def exported_names(exposition: str) -> set[str]:
    """Every sample name a Prometheus text exposition can carry: from each ``# TYPE`` line (a
    labelled family without samples yet still has one) and from the sample lines themselves."""
    names: set[str] = set()
    for line in exposition.splitlines():
        if line.startswith("# TYPE "):
            _, _, family, kind = line.split(maxsplit=3)
            names.update(family + suffix for suffix in TYPE_SUFFIXES.get(kind.strip(), ("",)))
        elif line and not line.startswith("#"):
            names.add(re.split(r"[{ ]", line, maxsplit=1)[0])
    return names


def unknown_metrics(exposition: str) -> dict[str, set[str]]:
    """The queried metric names the exposition does not export, with where each is used."""
    exported = exported_names(exposition)
    return {name: where for name, where in queried_metrics().items() if name not in exported}
