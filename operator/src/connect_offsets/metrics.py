"""Prometheus metrics of the operator, served by ``connect-offsets-operator --metrics-port``.

Why a module of its own: the service records outcomes where they happen (an offsets operation,
an auto-restart, a reconcile error), and the entry point only decides whether to serve them.
Connector states are a gauge computed at scrape time from the last state each reconcile saw, so
a deleted resource simply drops out.

Metrics (prefix ``connect_offsets_``):

* ``offsets_operations_total{kind, operation, result}``: list/alter/reset, Succeeded or Failed
* ``offsets_operation_duration_seconds{kind, operation}``: time of the Connect call and ConfigMap write
* ``connectors{kind, state}``: connectors by their state in Connect (``ABSENT`` when not created yet)
* ``reconcile_errors_total{kind}``: reconciles that ended in a transient error
* ``auto_restarts_total{kind}``: automatic restarts of failed connectors/tasks
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

__all__ = [
    "AUTO_RESTARTS",
    "OPERATIONS",
    "OPERATION_SECONDS",
    "RECONCILE_ERRORS",
    "REGISTRY",
    "forget_connector",
    "serve",
    "set_connector_state",
]

REGISTRY = CollectorRegistry()
OPERATIONS = Counter(
    "connect_offsets_offsets_operations",
    "Offsets operations by resource kind, operation and result.",
    ["kind", "operation", "result"],
    registry=REGISTRY,
)
OPERATION_SECONDS = Histogram(
    "connect_offsets_offsets_operation_duration_seconds",
    "Duration of offsets operations (Connect call and ConfigMap write).",
    ["kind", "operation"],
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 90),
    registry=REGISTRY,
)
RECONCILE_ERRORS = Counter(
    "connect_offsets_reconcile_errors", "Reconciles that ended in a transient error.", ["kind"], registry=REGISTRY
)
AUTO_RESTARTS = Counter(
    "connect_offsets_auto_restarts", "Automatic restarts of failed connectors or tasks.", ["kind"], registry=REGISTRY
)

_states: dict[tuple[str, str, str, str], str] = {}  # (kind, namespace, resource, connector) -> state


def set_connector_state(kind: str, namespace: str, resource: str, connector: str, state: str) -> None:
    _states[(kind, namespace, resource, connector)] = state


def forget_connector(kind: str, namespace: str, resource: str) -> None:
    for key in [k for k in _states if k[:3] == (kind, namespace, resource)]:
        del _states[key]


class _ConnectorStates(Collector):
    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "connect_offsets_connectors", "Managed connectors by their state in Connect.", labels=["kind", "state"]
        )
        for (kind, state), count in sorted(Tally((k[0], v) for k, v in _states.items()).items()):
            family.add_metric([kind, state], count)
        yield family


REGISTRY.register(_ConnectorStates())


def serve(port: int, address: str = "0.0.0.0") -> None:
    """Serve ``/metrics`` on a background thread."""
    start_http_server(port, addr=address, registry=REGISTRY)
