"""A tenant's dead Connect clusters cost the other tenants nothing; a user's request goes ahead of
the checks (issue 45, "Done when").

The operator runs as the chart installs it. Two scenarios:

**Dead Connect clusters** (one operator, watched once for the two tests that read it, the
``dead_connect`` fixture): tenant A has two ConnectClusters whose URLs do not answer, one a
listener that accepts and never replies (a black hole), one an HTTP server that answers 503 "no
healthy upstream" after ``GATEWAY_DELAY_S`` (a gateway with nothing behind it); A puts
``A_CONNECTORS`` KafkaConnectors on them, each annotated ``list``. Tenant B has one STOPPED
FileStreamSource KafkaConnector on the stack's worker. Once both dead endpoints' circuit breakers
are open (``connect_offsets_connect_unreachable_endpoints``), B asks ``list`` back to back for
``WINDOW_S`` while the two dead endpoints count what they receive.

* ``test_b_is_answered_while_a_connect_clusters_are_dead``: every one of B's lists completes
  (annotation removed, result Succeeded) while A's requests stay open, and A's resources say why,
  with the error the dead endpoint gave (a read time-out; the gateway's 503 and its text).
* ``test_a_dead_connect_cluster_is_called_at_most_once_per_backoff``: after its breaker opened, a
  dead endpoint receives at most one request per back-off period (the breaker's own
  ``FIRST_BACKOFF_S``, doubling to ``MAX_BACKOFF_S``), whatever the number of resources on it.

**A request ahead of a backlog** (``test_a_user_request_overtakes_a_backlog_of_checks``): an
operator with 2 workers, and both allowed to serve one ConnectCluster (``--cluster-workers 2``: the
cap per cluster must not be what lets the request through). While it is stopped, one namespace
gets ``BACKLOG`` new KafkaConnectors on the same ConnectCluster (their first checks after the
start are background work; they name a connector class no worker has, so each check asks Connect,
is refused and writes its status, and nothing is created) and its one resource on the stack's
worker is annotated ``list``; that resource's name sorts last, so in arrival order it would wait
for every check. The operator starts: the request is answered while more than half of the
backlog has not been looked at yet (counted from the resources' status right after the answer),
and the backlog is then checked in full (not starved). Behaviour, not speed: a queue without
priorities answers after all ``BACKLOG`` checks.

Speed is measured in ``bench/bench_hostile_tenant.py dead-connect`` (B's list p50 / p99 against B
alone); here only that B is served at all, and the bounds above.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client

from connect_offsets.clients.connect.breaker import FIRST_BACKOFF_S, MAX_BACKOFF_S
from tests.conftest import delete_leftover_connectors, delete_namespace, wait_for
from tests.integration.chart_install import chart_operator
from tests.integration.hostile import ELSEWHERE, CountingListener
from tests.integration.support import (
    GROUP,
    VERSION,
    annotate,
    annotation,
    create_cluster,
    create_connector,
    file_source_spec,
    wait_annotation_removed,
    wait_condition,
)

pytestmark = pytest.mark.local_stack
#: The two tests reading the ``dead_connect`` fixture run in one process (it is built once).
DEAD_CONNECT_GROUP = pytest.mark.xdist_group("dead-connect")

#: Tenant A's KafkaConnectors, half on each dead ConnectCluster, each with a ``list`` request.
A_CONNECTORS = 40
#: How late the gateway answers its 503 (the issue's is 25 s; shorter keeps the test short).
GATEWAY_DELAY_S = 12.0
#: The black hole's ``spec.requestTimeoutSeconds``: what one request to it costs.
HOLE_TIMEOUT_S = 10
#: How long B lists (and the dead endpoints are counted) once both breakers are open.
WINDOW_S = 45.0
#: New resources waiting for their first check when the request is made.
BACKLOG = 200
#: The gateway's answer, quoted back in A's conditions.
GATEWAY_TEXT = "no healthy upstream"


def most_probes(window: float) -> int:
    """The most requests a breaker lets through in any ``window`` seconds once it is open: one
    probe per back-off period, the periods ``FIRST_BACKOFF_S`` doubling to ``MAX_BACKOFF_S`` (the
    densest stretch is right after it opened; a probe's own duration only spaces them further),
    plus one for a probe already due as the window begins."""
    probes, elapsed, backoff = 1, 0.0, FIRST_BACKOFF_S
    while elapsed + backoff <= window:
        elapsed += backoff
        probes += 1
        backoff = min(backoff * 2, MAX_BACKOFF_S)
    return probes


class SlowGateway:
    """An HTTP server on ``ELSEWHERE`` answering every request 503 ``GATEWAY_TEXT`` after ``delay``
    seconds (a gateway whose Connect is gone); ``requests``: when each request arrived."""

    def __init__(self, delay: float) -> None:
        gateway = self
        self.requests: list[float] = []
        self._lock = threading.Lock()
        self._stopped = threading.Event()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _answer(self) -> None:
                with gateway._lock:
                    gateway.requests.append(time.monotonic())
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                gateway._stopped.wait(delay)
                body = GATEWAY_TEXT.encode()
                self.send_response(503)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                with contextlib.suppress(OSError):
                    self.wfile.write(body)

            do_GET = do_PUT = do_POST = do_PATCH = do_DELETE = _answer

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer((ELSEWHERE, 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://{ELSEWHERE}:{self.server.server_address[1]}"

    def since(self, moment: float) -> int:
        with self._lock:
            return sum(1 for at in self.requests if at >= moment)

    def close(self) -> None:
        self._stopped.set()
        self.server.shutdown()
        self.server.server_close()


def scrape(metrics_url: str, name: str) -> float:
    """One sample of the operator's /metrics (0 when absent: a counter not yet incremented)."""
    for line in httpx.get(metrics_url, timeout=5).text.splitlines():
        if line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def conditions_text(body: dict[str, Any]) -> str:
    return " | ".join(
        f"{c['type']}={c['status']} {c.get('reason')}: {c.get('message')}"
        for c in (body.get("status") or {}).get("conditions", [])
    )


@dataclass
class DeadConnect:
    """What the dead-Connect scenario saw (the ``dead_connect`` fixture)."""

    #: B's lists during the window: (seconds, result of lastOffsetsOperation).
    b_lists: list[tuple[float, str]] = field(default_factory=list)
    #: A's resources at the end of the window: name -> (list annotation still there, conditions).
    a_hole: dict[str, tuple[bool, str]] = field(default_factory=dict)
    a_gateway: dict[str, tuple[bool, str]] = field(default_factory=dict)
    #: Requests each dead endpoint received during the window.
    hole_requests: int = 0
    gateway_requests: int = 0
    #: Received before the window (the first passes, before the breakers knew).
    hole_before: int = 0
    gateway_before: int = 0
    window: float = 0.0
    #: The operator's breaker metrics at the end of the window.
    openings: float = 0.0
    refused: float = 0.0
    unreachable: float = 0.0


def _names(prefix: str, count: int) -> list[str]:
    return [f"{prefix}-{i:03d}" for i in range(count)]


@pytest.fixture(scope="module")
def dead_connect(
    stack: dict[str, Any], kube: Any, connect_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DeadConnect]:
    core: Any = client.CoreV1Api(kube)
    custom: Any = client.CustomObjectsApi(kube)
    tmp_path = tmp_path_factory.mktemp("dead-connect")
    run = uuid.uuid4().hex[:6]
    tenant_a, tenant_b = f"t-dead-connect-{run}-a", f"t-dead-connect-{run}-b"
    seen = DeadConnect()
    hole = CountingListener("blackhole")
    gateway = SlowGateway(GATEWAY_DELAY_S)
    for ns in (tenant_a, tenant_b):
        core.create_namespace({"metadata": {"name": ns}})
    try:
        with chart_operator(stack, core, custom, tmp_path, [tenant_a, tenant_b]) as op:
            create_cluster(custom, tenant_b, connect_url)
            source = tmp_path / "b.txt"
            source.write_text("".join(f"line {i}\n" for i in range(10)))
            calm = f"calm-{run}"
            create_connector(custom, tenant_b, calm, file_source_spec(source, calm, f"{calm}-offsets", state="stopped"))
            wait_condition(custom, tenant_b, calm, "Ready", reason="ConnectorStopped", timeout=90)

            create_cluster(
                custom, tenant_a, f"http://{hole.address}", name="hole", requestTimeoutSeconds=HOLE_TIMEOUT_S
            )
            create_cluster(custom, tenant_a, gateway.url, name="gateway", requestTimeoutSeconds=60)
            half = A_CONNECTORS // 2
            for cluster in ("hole", "gateway"):
                for name in _names(cluster, half):
                    spec = file_source_spec(source, f"{name}-{run}", f"{name}-offsets", state="stopped")
                    spec["config"]["file"] = str(tmp_path / f"{name}.txt")
                    create_connector(
                        custom,
                        tenant_a,
                        name,
                        spec,
                        cluster=cluster,
                        annotations={f"{GROUP}/connector-offsets": "list"},
                    )
            wait_for(
                "both dead endpoints' circuit breakers open",
                lambda: scrape(op.metrics_url, "connect_offsets_connect_unreachable_endpoints") >= 2,
                timeout=GATEWAY_DELAY_S + HOLE_TIMEOUT_S + 60,
                interval=0.5,
            )
            started = time.monotonic()
            seen.hole_before, seen.gateway_before = hole.connections, len(gateway.requests)
            while time.monotonic() - started < WINDOW_S:
                begun = time.monotonic()
                annotate(custom, tenant_b, calm, connector_offsets="list")
                # Not a speed target (the bench's): B waited for A's time-outs, 25 s a list, before.
                body = wait_annotation_removed(custom, tenant_b, calm, timeout=30)
                last = (body.get("status") or {}).get("lastOffsetsOperation") or {}
                seen.b_lists.append((time.monotonic() - begun, f"{last.get('operation')} {last.get('result')}"))
                time.sleep(0.5)
            seen.window = time.monotonic() - started
            seen.hole_requests = sum(1 for at in hole.accepted if at >= started)
            seen.gateway_requests = gateway.since(started)
            seen.openings = scrape(op.metrics_url, "connect_offsets_connect_breaker_openings_total")
            seen.refused = scrape(op.metrics_url, "connect_offsets_connect_requests_refused_total")
            seen.unreachable = scrape(op.metrics_url, "connect_offsets_connect_unreachable_endpoints")
            for cluster, into in (("hole", seen.a_hole), ("gateway", seen.a_gateway)):
                for name in _names(cluster, half):
                    body = custom.get_namespaced_custom_object(GROUP, VERSION, tenant_a, "kafkaconnectors", name)
                    into[name] = (annotation(body, "connector-offsets") == "list", conditions_text(body))
            print(
                f"B's lists: {len(seen.b_lists)}, slowest {max(s for s, _ in seen.b_lists):.2f} s; "
                f"requests to the black hole {seen.hole_before} before the window, {seen.hole_requests} in it; "
                f"to the gateway {seen.gateway_before} before, {seen.gateway_requests} in it "
                f"({seen.window:.0f} s, at most {most_probes(seen.window)} each); breaker openings "
                f"{seen.openings:.0f}, refused {seen.refused:.0f}, unreachable endpoints {seen.unreachable:.0f}"
            )
        yield seen
    finally:
        hole.close()
        gateway.close()
        delete_leftover_connectors(custom, tenant_b)
        for ns in (tenant_a, tenant_b):
            delete_namespace(core, custom, ns)


@DEAD_CONNECT_GROUP
def test_b_is_answered_while_a_connect_clusters_are_dead(dead_connect: DeadConnect) -> None:
    seen = dead_connect
    assert len(seen.b_lists) >= 3, seen.b_lists  # several lists in a row, each answered within 30 s
    assert all(result == "list Succeeded" for _, result in seen.b_lists), seen.b_lists
    # A's requests were still open (failing) all along: B was answered while A's clusters were dead.
    assert all(pending for pending, _ in [*seen.a_hole.values(), *seen.a_gateway.values()]), (
        seen.a_hole,
        seen.a_gateway,
    )
    # Each of A's resources says its cluster is unreachable, with what the endpoint did.
    for name, (_, text) in seen.a_hole.items():
        assert "Connect cluster hole unreachable" in text and "Timeout" in text, (name, text)
    for name, (_, text) in seen.a_gateway.items():
        assert "Connect cluster gateway unreachable" in text and f"503 {GATEWAY_TEXT}" in text, (name, text)
    assert seen.unreachable == 2  # the two dead endpoints (B's is fine)


@DEAD_CONNECT_GROUP
def test_a_dead_connect_cluster_is_called_at_most_once_per_backoff(dead_connect: DeadConnect) -> None:
    seen = dead_connect
    bound = most_probes(seen.window)
    # Before the breakers opened, the first passes went out side by side: A's resources did call.
    assert seen.hole_before > 0 and seen.gateway_before > 0
    assert seen.hole_requests <= bound, (seen.hole_requests, bound)
    assert seen.gateway_requests <= bound, (seen.gateway_requests, bound)
    # A's 40 resources kept asking meanwhile (their requests stay open): refused without a call.
    assert seen.refused > seen.hole_requests + seen.gateway_requests


def test_a_user_request_overtakes_a_backlog_of_checks(
    stack: dict[str, Any], core: Any, custom: Any, namespace: str, connect_url: str, tmp_path: Path
) -> None:
    with chart_operator(stack, core, custom, tmp_path, [namespace], start=False) as op:
        op.operator.extra_args += ["--workers", "2", "--cluster-workers", "2"]
        op.operator.start()
        create_cluster(custom, namespace, connect_url)
        source = tmp_path / "asked.txt"
        source.write_text("one\n")
        # Sorts after every name of the backlog: a queue in arrival order would take it last.
        asked = f"zz-asked-{uuid.uuid4().hex[:6]}"
        create_connector(custom, namespace, asked, file_source_spec(source, asked, f"{asked}-offsets", state="stopped"))
        wait_condition(custom, namespace, asked, "Ready", reason="ConnectorStopped", timeout=90)
        op.operator.stop()

        # While the operator is down: the backlog (first checks after a start are background
        # work), in the same namespace and on the same ConnectCluster as the request, so that
        # neither the share per namespace nor the cap per cluster sets them apart. Their
        # connectors would be created in Connect, so they name a class no worker has: each check
        # asks Connect and is refused (no connector, no rebalance), then writes its status.
        spec = {"class": "org.example.NoSuchConnector", "tasksMax": 1, "state": "stopped", "config": {}}
        backlog = _names(f"backlog-{uuid.uuid4().hex[:6]}", BACKLOG)
        for name in backlog:
            create_connector(custom, namespace, name, spec)
        annotate(custom, namespace, asked, connector_offsets="list")

        op.operator.start()
        body = wait_annotation_removed(custom, namespace, asked, timeout=120)
        items = custom.list_namespaced_custom_object(GROUP, VERSION, namespace, "kafkaconnectors")["items"]
        checked = [i["metadata"]["name"] for i in items if i["metadata"]["name"] in backlog and i.get("status")]
        last = body["status"]["lastOffsetsOperation"]
        print(f"answered with {len(checked)} of the {BACKLOG} checks of the backlog done")
        assert last["operation"] == "list" and last["result"] == "Succeeded", last
        # Answered before most of the backlog was looked at: taken ahead of it. In arrival order it
        # would have been taken after all of it (its name sorts last).
        assert len(checked) < BACKLOG // 2, len(checked)
        # ... and the backlog is not starved: every resource is checked in the end.
        wait_for(
            "every resource of the backlog checked",
            lambda: all(
                i.get("status")
                for i in custom.list_namespaced_custom_object(GROUP, VERSION, namespace, "kafkaconnectors")["items"]
            ),
            timeout=120,
            interval=1,
        )
        urgent = wait_for(
            "an urgent take in the metrics",
            lambda: scrape(op.metrics_url, 'connect_offsets_workqueue_taken_total{priority="urgent"}'),
            timeout=10,
        )
        assert urgent >= 1
