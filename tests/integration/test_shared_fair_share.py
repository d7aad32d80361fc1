"""One tenant cannot starve the others (issue 31, point 4).

The operator runs as the chart installs it for two tenant namespaces. Tenant A declares 40 mirrors
(two KafkaMirrorMaker2s, on a Connect worker of its own so that its connectors' rebalances disturb
nobody) whose source clusters are eight listeners on 127.0.0.2 that forward to Kafka B: the mirrors
pass the cluster-id check and their connectors are created. Then the listeners stop answering (a
broker that hangs): every lag measurement of A's mirrors holds a Kafka client until its timeout.
Tenant B meanwhile runs ``list`` requests on a KafkaConnector, back to back.

* Tenant B's lists keep completing: Kubernetes calls and planning have pools of their own, so they
  never queue behind tenant A's hanging Kafka clients (before, they waited for asyncio's default
  pool, which A's measurements held).
* Tenant network calls of one namespace run at most ``CONNECT_OFFSETS_TENANT_CALLS_PER_NAMESPACE``
  (4 here) at a time: the listeners never see more connections open at once.
* A failure is remembered: an address that did not answer is tried again once per back-off period
  (30 s at first), not on every round of every mirror.

Speed is measured in ``bench/bench_hostile_tenant.py`` (B's list p99 against B alone); here only
that B is served at all, and the two bounds above.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import wait_for
from tests.integration.chart_install import chart_operator, tenant_namespaces
from tests.integration.connect_worker import DedicatedWorker
from tests.integration.hostile import ConnectionTally, CountingListener, hostile_mirrors
from tests.integration.support import (
    annotate,
    create_cluster,
    create_connector,
    create_mm2,
    file_source_spec,
    wait_annotation_removed,
    wait_condition,
)

#: The per-namespace limit the test sets (the operator's default too).
PER_NAMESPACE = 4
LISTENERS = 8
MIRRORS_PER_RESOURCE = 20
#: Watched after the listeners stop answering; the first back-off period is 30 s.
WINDOW_S = 70.0
#: By then every address has failed once (10 s timeouts, four at a time); the rest of the window is
#: one back-off period.
SETTLED_S = 35.0
#: One attempt's connections: the first, and librdkafka's reconnect at the end of its 10 s timeout
#: (a loaded machine stretches the attempt, never to the 30 s back-off).
ATTEMPT_S = 15.0


def attempts_since(accepted: list[float], blackholed: float, since: float) -> int:
    """Attempts on one address that began at ``since`` or later: its connections after the brokers
    hung, those within ``ATTEMPT_S`` of an attempt's first connection counted with it."""
    starts: list[float] = []
    for at in sorted(t for t in accepted if t >= blackholed):
        if not starts or at - starts[-1] > ATTEMPT_S:
            starts.append(at)
    return sum(1 for at in starts if at >= since)


@pytest.mark.local_stack
@pytest.mark.timeout(600)
def test_a_tenant_with_hanging_brokers_does_not_starve_another(
    custom: Any,
    core: Any,
    namespace: str,
    stack: dict[str, Any],
    connect_url: str,
    tmp_path: Path,
    unique: str,
) -> None:
    tally = ConnectionTally()
    listeners = [CountingListener("slow-proxy", upstream=stack["kafka_b"], tally=tally) for _ in range(LISTENERS)]
    worker = DedicatedWorker(name="fair-share")
    worker.start()
    source = tmp_path / "b.txt"
    source.write_text("".join(f"line {i}\n" for i in range(10)))
    env = {"CONNECT_OFFSETS_TENANT_CALLS_PER_NAMESPACE": str(PER_NAMESPACE)}
    name = f"b-{unique}"
    try:
        with (
            tenant_namespaces(core, custom, namespace) as (tenant_a, tenant_b),
            chart_operator(stack, core, custom, tmp_path, [tenant_a, tenant_b], extra_env=env),
            httpx.Client(base_url=worker.url, timeout=30) as own,
        ):
            create_cluster(custom, tenant_a, worker.url)
            create_cluster(custom, tenant_b, connect_url)
            create_connector(custom, tenant_b, name, file_source_spec(source, name, f"{name}-offsets", state="stopped"))
            wait_condition(custom, tenant_b, name, "Ready", reason="ConnectorStopped", timeout=90)
            for prefix in ("a", "b"):
                clusters, mirrors = hostile_mirrors(listeners, stack["kafka_a"], prefix, MIRRORS_PER_RESOURCE)
                create_mm2(
                    custom, tenant_a, f"holes-{prefix}", clusters, mirrors, replicationLag={"intervalSeconds": 5}
                )
            wanted = 2 * MIRRORS_PER_RESOURCE
            wait_for(
                f"tenant A's {wanted} connectors created",
                lambda: len(own.get("/connectors").json()) == wanted,
                timeout=240,
                interval=2,
            )

            # The brokers stop answering.
            for listener in listeners:
                listener.mode = "blackhole"
            blackholed = time.monotonic()
            time.sleep(1)
            before = [listener.connections for listener in listeners]
            tally.restart()
            started = time.monotonic()
            lists: list[float] = []
            halfway: list[int] | None = None
            while time.monotonic() - started < WINDOW_S:
                if halfway is None and time.monotonic() - started >= SETTLED_S:
                    halfway = [listener.connections for listener in listeners]
                    halfway_at = time.monotonic()
                begun = time.monotonic()
                annotate(custom, tenant_b, name, connector_offsets="list")
                # Not a speed target (that is the benchmark's): a starved tenant waited minutes.
                wait_annotation_removed(custom, tenant_b, name, timeout=30)
                lists.append(time.monotonic() - begun)
                time.sleep(0.5)
            assert halfway is not None
            per_address = [listener.connections - b for listener, b in zip(listeners, before, strict=True)]
            later = [listener.connections - h for listener, h in zip(listeners, halfway, strict=True)]
            print(f"B's lists: {len(lists)}, slowest {max(lists):.2f} s; connections per address {per_address}")
            print(f"... of them after {SETTLED_S:.0f} s: {later}")
            print(f"peak connections open at once {tally.peak_open}, in all {tally.connections}")
            assert tally.connections > 0  # tenant A's mirrors were measured against the hanging brokers
            assert tally.peak_open <= PER_NAMESPACE, tally.peak_open
            # Once every address has failed (the calls in flight when it stopped answering), one
            # attempt per address per back-off period: a single retry in the rest of the window.
            # Counted in attempts, not connections: an attempt's client may reconnect at the end of
            # its timeout, and on a loaded machine once more (3 connections, one attempt, in CI).
            attempts = [attempts_since(listener.accepted, blackholed, halfway_at) for listener in listeners]
            print(f"... attempts per address after {SETTLED_S:.0f} s: {attempts}")
            assert max(attempts) <= 1, (attempts, later)
    finally:
        for listener in listeners:
            listener.close()
        worker.stop()
