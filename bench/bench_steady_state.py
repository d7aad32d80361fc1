"""Benchmark: the operator at rest with 200 and 1,000 KafkaConnectors (issue 10).

What it shows: what an idle operator costs — its memory (RSS) and the Kubernetes API and Connect
REST calls it makes per minute when nothing changes. Targets: <= 250 MiB RSS at 1,000 resources;
idle calls bounded by the drift interval (``CONNECT_OFFSETS_DRIFT_INTERVAL``).

Set-up on the real local stack: a dedicated Connect worker (tests/integration/connect_worker.py:
own group and topics, so its request log holds only the operator's calls and the shared worker is
spared 1,000 connectors); two namespaces with 200 and 800 KafkaConnectors (FileStreamSource,
``state: stopped``, so no task runs) and a ConnectCluster each. The operator runs as users run it
(``connect-offsets-operator -n A [-n B]``), its kubeconfig pointing at a counting proxy
(bench/kube_proxy.py) that counts every API request it makes, kopf's watches included.

Phases, each with a fresh operator: 1,000 resources at the default 30 s drift interval (this first
phase also creates the connectors in Connect), 1,000 at the tests' 5 s, then 200 at 30 s and 5 s.
Each phase waits until every resource is Ready and one more drift interval has passed, then
measures for WINDOW seconds: RSS sampled from /proc every 2 s, API calls from the proxy, REST calls
from the worker's request log, the operator's CPU time from /proc/<pid>/stat.

Run: ``make bench BENCH=steady_state`` (or ``.venv/bin/python bench/bench_steady_state.py [window_s] [small]``;
``small`` runs only the 200-resource phases).
"""

from __future__ import annotations

import os
import re
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.conftest import OperatorProcess, delete_namespace, stack_info, wait_for  # noqa: E402
from tests.integration.connect_worker import DedicatedWorker  # noqa: E402
from tests.integration.support import GROUP, VERSION, condition, create_cluster, file_source_spec  # noqa: E402

from bench.kube_proxy import KubeProxy  # noqa: E402
from bench.report import machine, write_section  # noqa: E402

WINDOW = float(sys.argv[1]) if len(sys.argv) > 1 else 120.0
SMALL, LARGE = 200, 1000
#: ``small``: only the 200-resource phases (creating 1,000 connectors takes the worker many minutes).
ONLY_SMALL = len(sys.argv) > 2 and sys.argv[2] == "small"
#: Per idle reconcile of one KafkaConnector: GET the resource and its ConnectCluster (API); GET the
#: connector's config, status and topics (REST). No write when nothing changed.
API_PER_PASS, REST_PER_PASS = 2, 3
T = TypeVar("T")


def in_parallel(func: Callable[[int], T], indexes: Iterable[int], workers: int = 8) -> list[T]:
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(func, indexes))


def proc_status(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/{pid}/status")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rest_calls(log: Path, start: int, end: int) -> Counter[str]:
    """The operator's requests in the worker's log between two byte offsets, by method and path shape."""
    pattern = re.compile(r'"(\w+) (/[^ ?]*)[^ ]* HTTP/[\d.]+" \d+ \S+ "[^"]*" "connect-offsets-operator')
    counts: Counter[str] = Counter()
    with log.open("rb") as handle:
        handle.seek(start)
        for raw in handle.read(end - start).decode(errors="replace").splitlines():
            found = pattern.search(raw)
            if found:
                shape = re.sub(r"^/connectors/[^/]+", "/connectors/{c}", found.group(2))
                counts[f"{found.group(1)} {shape}"] += 1
    return counts


def ready_count(custom: Any, namespaces: list[str]) -> int:
    count = 0
    for namespace in namespaces:
        for item in custom.list_namespaced_custom_object(GROUP, VERSION, namespace, "kafkaconnectors")["items"]:
            found = condition(item, "Ready")
            count += bool(found and found["status"] == "True" and found["reason"] == "ConnectorStopped")
    return count


def main() -> int:
    from kubernetes import client, config

    info = stack_info()
    api = config.new_client_from_config(config_file=info["kubeconfig"])
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    unique = uuid.uuid4().hex[:6]
    small_ns, rest_ns = f"bench-steady-a-{unique}", f"bench-steady-b-{unique}"
    work = Path(os.environ.get("TMPDIR", "/tmp")) / f"bench-steady-{unique}"
    work.mkdir(parents=True)
    worker = DedicatedWorker(heap="-Xmx1g", name="steady")
    proxy = KubeProxy.for_kubeconfig(info["kubeconfig"])
    results: list[dict[str, Any]] = []
    created_in = 0.0
    try:
        worker.start()
        proxy.start()
        kubeconfig = str(proxy.write_kubeconfig(work / "proxy-kubeconfig.json"))
        for namespace in (small_ns, rest_ns):
            core.create_namespace({"metadata": {"name": namespace}})
            create_cluster(custom, namespace, worker.url)

        def create(i: int) -> None:
            namespace = small_ns if i < SMALL else rest_ns
            name = f"st-{unique}-{i:04d}"
            body = {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "KafkaConnector",
                "metadata": {"name": name, "namespace": namespace, "labels": {f"{GROUP}/cluster": "local"}},
                "spec": file_source_spec(work / f"{name}.txt", f"st-{unique}", f"{name}-offsets", state="stopped"),
            }
            custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "kafkaconnectors", body)

        in_parallel(create, range(SMALL if ONLY_SMALL else LARGE))
        phases = [(LARGE, [small_ns, rest_ns]), (SMALL, [small_ns])]
        for count, namespaces in phases[1:] if ONLY_SMALL else phases:
            for interval in (30.0, 5.0):
                args = [a for ns in namespaces[1:] for a in ("-n", ns)]
                op = OperatorProcess(
                    kubeconfig,
                    namespaces[0],
                    work / f"operator-{count}-{interval:.0f}.log",
                    extra_env={"CONNECT_OFFSETS_DRIFT_INTERVAL": f"{interval:g}"},
                    extra_args=args,
                )
                started = time.monotonic()
                op.start()
                assert op.process is not None
                pid = op.process.pid
                try:
                    wait_for(
                        f"{count} connectors Ready",
                        lambda namespaces=namespaces, count=count: ready_count(custom, namespaces) == count,
                        timeout=1200,
                        interval=5,
                    )
                    settled = time.monotonic() - started
                    if not results:
                        created_in = settled
                    time.sleep(interval + 5)  # one more drift interval: the start-up burst is over
                    api_before, log_start = proxy.snapshot(), worker.log.stat().st_size
                    cpu_before, window_start = cpu_seconds(pid), time.monotonic()
                    samples: list[float] = []
                    while time.monotonic() - window_start < WINDOW:
                        samples.append(proc_status(pid, "VmRSS"))
                        time.sleep(2)
                    minutes = (time.monotonic() - window_start) / 60
                    api = proxy.snapshot() - api_before
                    rest = rest_calls(worker.log, log_start, worker.log.stat().st_size)
                    results.append(
                        {
                            "count": count,
                            "interval": interval,
                            "settled": settled,
                            "peak": proc_status(pid, "VmHWM"),
                            "steady": max(samples),
                            "cpu": (cpu_seconds(pid) - cpu_before) / (minutes * 60) * 100,
                            "api": {k: v / minutes for k, v in api.items() if v},
                            "rest": {k: v / minutes for k, v in rest.items() if v},
                        }
                    )
                    print(results[-1], flush=True)
                finally:
                    op.stop()
    finally:
        # The operator is stopped: drop finalizers (the worker and its connectors go as a whole).
        for namespace in (small_ns, rest_ns):
            try:
                items = custom.list_namespaced_custom_object(GROUP, VERSION, namespace, "kafkaconnectors")["items"]
                in_parallel(
                    lambda i, items=items, namespace=namespace: custom.patch_namespaced_custom_object(
                        GROUP,
                        VERSION,
                        namespace,
                        "kafkaconnectors",
                        items[i]["metadata"]["name"],
                        {"metadata": {"finalizers": None}},
                    ),
                    range(len(items)),
                )
                delete_namespace(core, custom, namespace)
            except client.ApiException as error:
                print(f"cleanup of {namespace}: {error.status} {error.reason}")
        worker_peak = worker.rss_mib()
        worker.stop()
        proxy.stop()
    report(results, created_in, worker_peak)
    return 0


def report(results: list[dict[str, Any]], created_in: float, worker_peak: float | None) -> None:
    rows, details = [], []
    for r in results:
        passes = r["count"] * 60 / r["interval"]  # the most passes per minute the drift interval allows
        api_total, rest_total = sum(r["api"].values()), sum(r["rest"].values())
        rows.append(
            f"| {r['count']:,} | {r['interval']:g} s | {r['peak']:.0f} | {r['steady']:.0f} | {r['cpu']:.0f} % "
            f"| {api_total:,.0f} | {API_PER_PASS * passes:,.0f} | {rest_total:,.0f} | {REST_PER_PASS * passes:,.0f} "
            f"| {rest_total / REST_PER_PASS / passes:.2f} |"
        )
        details.append(
            f"- {r['count']:,} at {r['interval']:g} s — API: "
            + ", ".join(f"{k} {v:,.1f}" for k, v in sorted(r["api"].items(), key=lambda kv: -kv[1]))
            + "; REST: "
            + ", ".join(f"{k} {v:,.1f}" for k, v in sorted(r["rest"].items(), key=lambda kv: -kv[1]))
        )
    at_large = [r for r in results if r["count"] == LARGE]
    worst = max((r["peak"] for r in at_large), default=float("nan"))
    body = f"""
## Steady state: 200 and 1,000 idle KafkaConnectors (issue 10)

`make bench BENCH=steady_state` — {machine()}; load average at the end {os.getloadavg()[0]:.1f}
(other engineers' tests share the machine).

STOPPED FileStreamSource connectors on a dedicated Connect worker (peak RSS
{worker_peak or 0:.0f} MiB), one operator per phase, nothing changing. The first phase created the
connectors in Connect and had every resource Ready after {created_in:.0f} s.
Measured over {WINDOW:.0f} s per phase after everything settled. API calls: every request the
operator sent (a counting proxy between it and the API server, kopf's watches included); REST calls:
the operator's lines in the worker's request log. "Bound" = what the drift interval allows: one idle
pass per resource per interval, {API_PER_PASS} API calls (GET the resource, GET its ConnectCluster) and
{REST_PER_PASS} REST calls (GET config, status, topics) per pass, no writes. "Passes/bound" = passes
made / passes allowed (REST calls / {REST_PER_PASS}); below 1 because each pass itself takes time
before the next interval starts.

| Resources | Drift interval | Peak RSS (MiB) | Steady RSS (MiB) | CPU | API calls/min | Bound \
| REST calls/min | Bound | Passes/bound |
|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|
{chr(10).join(rows)}

Target RSS ≤ 250 MiB at 1,000: {
        ("met" if worst <= 250 else "missed") + f" (peak {worst:.0f} MiB, start-up included)"
        if at_large
        else "not measured in this run (200 only)"
    }.
Calls per minute by kind:

{chr(10).join(details)}
"""
    write_section("steady_state", body)
    print(body)


if __name__ == "__main__":
    sys.exit(main())
