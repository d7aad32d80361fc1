"""Benchmark: one namespace's slow Connect cluster does not hold the workers another needs (issue 35).

Set-up on the real local stack, one operator as users run it (``-n A -n B``, default workers, drift
interval 30 s):

* namespace A: ``A_RESOURCES`` STOPPED KafkaConnectors bound to ConnectCluster ``slow``, whose URL is a
  proxy that answers every request of a dedicated Connect worker ``SLOW_S`` seconds late (the worker's
  config topic seeded with the connectors exactly as the operator creates them, as
  bench_steady_state.py does, so nothing has to be created through the slow path);
* namespace B: one STOPPED KafkaConnector on the stack's worker.

Phases: tenant B's ``list`` requests back to back for ``PHASE_S`` alone; then again while A's
resources are checked through the slow cluster (they are created just before); then B's drift repair
(its connector deleted in Connect behind the operator's back, seconds until it is back). Recorded:
B's list latency p50 / p99 / max per phase, the queue's depth and the workers the slow cluster holds
(from ``/metrics``). Targets: B's p99 with A within 1.5x of B alone; B's repair within one drift
interval (plus the snapshot's refresh).

Run: ``make bench BENCH=fair_queue`` (or ``.venv/bin/python bench/bench_fair_queue.py``).
"""

from __future__ import annotations

import asyncio
import os
import re
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import httpx
from aiohttp import web

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.conftest import OperatorProcess, delete_namespace, install_crds, stack_info, wait_for  # noqa: E402
from tests.integration.connect_worker import DedicatedWorker, free_port  # noqa: E402
from tests.integration.support import (  # noqa: E402
    GROUP,
    VERSION,
    ask_request,
    create_cluster,
    create_connector,
    file_source_spec,
    wait_answered,
    wait_condition,
)

from bench.report import machine, write_section  # noqa: E402
from connect_offsets.models.crds import KafkaConnectorResource  # noqa: E402
from connect_offsets.planning.targets import desired_config  # noqa: E402

A_RESOURCES = int(os.environ.get("BENCH_FAIR_RESOURCES", "1000"))
SLOW_S = float(os.environ.get("BENCH_FAIR_SLOW_S", "20"))
PHASE_S = float(os.environ.get("BENCH_FAIR_PHASE_S", "90"))
DRIFT_S = 30.0
TARGET = 1.5


class SlowProxy(threading.Thread):
    """Forwards every request to ``upstream`` and answers ``delay`` seconds late."""

    def __init__(self, upstream: str, delay: float) -> None:
        super().__init__(daemon=True)
        self.upstream, self.delay, self.port = upstream, delay, free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.requests = 0
        self.ready = threading.Event()
        self.loop = asyncio.new_event_loop()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.requests += 1
        await asyncio.sleep(self.delay)
        async with (
            aiohttp.ClientSession() as session,
            session.request(
                request.method,
                self.upstream + request.rel_url.path_qs,
                data=await request.read(),
                headers={"Content-Type": request.headers.get("Content-Type", "application/json")},
            ) as answer,
        ):
            return web.Response(status=answer.status, body=await answer.read(), content_type=answer.content_type)

    def run(self) -> None:
        asyncio.set_event_loop(self.loop)
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        runner = web.AppRunner(app)
        self.loop.run_until_complete(runner.setup())
        self.loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", self.port).start())
        self.ready.set()
        self.loop.run_forever()


def b_lists(custom: Any, namespace: str, name: str, seconds: float) -> list[float]:
    """B's lists back to back for ``seconds``: each one's latency (taken on the watch event)."""
    took: list[float] = []
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        asked, version = ask_request(custom, namespace, name)
        took.append(wait_answered(custom, namespace, name, version, timeout=300) - asked)
    return took


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))]


def metric(url: str, name: str, labels: str = "") -> float:
    text = httpx.get(url).text
    found = re.search(rf"^{name}(\{{{labels}[^}}]*\}})? (\S+)$", text, re.M)
    return float(found.group(2)) if found else 0.0


def main() -> int:
    from kubernetes import client, config

    info = stack_info()
    install_crds(info)
    api = config.new_client_from_config(config_file=info["kubeconfig"])
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    connect = httpx.Client(base_url=info["connect_url"], timeout=30)
    unique = uuid.uuid4().hex[:6]
    ns_a, ns_b = f"bench-fair-a-{unique}", f"bench-fair-b-{unique}"
    work = Path(tempfile.mkdtemp(prefix="bench-fair-"))
    source = work / "src.txt"
    source.write_text("a\nb\n")
    names = [f"fa-{unique}-{i:04d}" for i in range(A_RESOURCES)]

    def body(name: str) -> dict[str, Any]:
        return {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "KafkaConnector",
            "metadata": {"name": name, "namespace": ns_a, "labels": {f"{GROUP}/cluster": "slow"}},
            "spec": file_source_spec(source, f"fa-{unique}", f"{name}-offsets", state="stopped"),
        }

    worker = DedicatedWorker(heap="-Xmx1g", name="fair")
    worker.seed_stopped_connectors({n: desired_config(KafkaConnectorResource.model_validate(body(n))) for n in names})
    worker.start()
    proxy = SlowProxy(worker.url, SLOW_S)
    proxy.start()
    proxy.ready.wait()
    metrics_port = free_port()
    metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
    for namespace in (ns_a, ns_b):
        core.create_namespace({"metadata": {"name": namespace}})
    operator = OperatorProcess(
        info["kubeconfig"],
        ns_a,
        work / "operator.log",
        {"CONNECT_OFFSETS_DRIFT_INTERVAL": str(DRIFT_S)},
        ["-n", ns_b, "--metrics-port", str(metrics_port)],
    )
    b_name = f"fb-{unique}"
    phases: dict[str, list[float]] = {}
    held: list[float] = []
    try:
        operator.start()
        create_cluster(custom, ns_b, info["connect_url"])
        create_connector(
            custom, ns_b, b_name, file_source_spec(source, f"fb-{unique}", f"{b_name}-offsets", state="stopped")
        )
        wait_condition(custom, ns_b, b_name, "Ready", reason="ConnectorStopped", timeout=120)
        phases["B alone"] = b_lists(custom, ns_b, b_name, PHASE_S)

        create_cluster(custom, ns_a, proxy.url, name="slow")
        for name in names:
            custom.create_namespaced_custom_object(GROUP, VERSION, ns_a, "kafkaconnectors", body(name))
        time.sleep(SLOW_S)  # A's passes are under way, each waiting on the slow cluster

        def sample() -> None:
            while not stop.is_set():
                held.append(metric(metrics_url, "connect_offsets_workqueue_in_flight"))
                time.sleep(1)

        stop = threading.Event()
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        phases["B while A's cluster answers 20 s late"] = b_lists(custom, ns_b, b_name, PHASE_S)
        stop.set()
        sampler.join(5)
        depth = metric(metrics_url, "connect_offsets_workqueue_depth", 'kind="KafkaConnector"')

        assert connect.delete(f"/connectors/{b_name}").status_code in (200, 204)
        deleted = time.monotonic()
        wait_for("B's connector repaired", lambda: connect.get(f"/connectors/{b_name}").status_code == 200, 300, 0.2)
        repair = time.monotonic() - deleted
    finally:
        operator.stop()
        worker.stop()
        connect.delete(f"/connectors/{b_name}")
        for namespace in (ns_a, ns_b):
            items = custom.list_namespaced_custom_object(GROUP, VERSION, namespace, "kafkaconnectors")["items"]
            for item in items:
                if item["metadata"].get("finalizers"):
                    custom.patch_namespaced_custom_object(
                        GROUP,
                        VERSION,
                        namespace,
                        "kafkaconnectors",
                        item["metadata"]["name"],
                        {"metadata": {"finalizers": None}},
                    )
            delete_namespace(core, custom, namespace)

    alone = pct(phases["B alone"], 99)
    rows = [
        f"| {phase} | {len(took)} | {statistics.median(took) * 1000:.0f} | {pct(took, 99) * 1000:.0f} "
        f"| {max(took) * 1000:.0f} | {pct(took, 99) / alone:.2f}x |"
        for phase, took in phases.items()
    ]
    during = pct(phases["B while A's cluster answers 20 s late"], 99)
    body_text = f"""## Fair share of the workers: a slow Connect cluster next to a quick one (issue 35)

`make bench BENCH=fair_queue` — {machine()}; load average at the end {os.getloadavg()[0]:.1f}.

One operator (`-n A -n B`, 8 workers, a Connect cluster may hold 4, drift interval {DRIFT_S:.0f} s).
Namespace A: {A_RESOURCES:,} STOPPED KafkaConnectors on ConnectCluster `slow`, a proxy answering every
request of a dedicated worker {SLOW_S:.0f} s late ({proxy.requests:,} requests reached it). Namespace B: one
STOPPED KafkaConnector on the stack's worker, `list` requests back to back for {PHASE_S:.0f} s per phase,
each timed from its PATCH to the watch event that shows the answer.

| Phase | B's lists | p50 (ms) | p99 (ms) | max (ms) | p99 / alone |
|---|---:|---:|---:|---:|---:|
{chr(10).join(rows)}

While A's cluster was slow: passes in flight (all kinds) at most {max(held, default=0):.0f} of 8, on
average {statistics.mean(held) if held else 0:.1f}; KafkaConnector keys still waiting at the end {depth:.0f}.
B's connector, deleted behind the operator's back: back in Connect after {repair:.1f} s.

Targets: B's p99 with A ≤ {TARGET}x alone: {"met" if during <= TARGET * alone else "**missed**"}
({during / alone:.2f}x); repair within one drift interval plus the snapshot's refresh
({DRIFT_S * 1.5:.0f} s): {"met" if repair <= DRIFT_S * 1.5 else "**missed**"} ({repair:.1f} s).
"""
    write_section("fair_queue", body_text)
    print(body_text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
