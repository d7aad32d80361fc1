"""Benchmark: what an idle operator costs with 1,000, 5,000 and 20,000 KafkaConnectors (issues 10, 20 and 35).

What it shows, for each phase (a resource count and a drift interval, ``CONNECT_OFFSETS_DRIFT_INTERVAL``
30 s and 5 s), with nothing changing:

* Kubernetes API calls per minute, watch requests apart from the others (target: <= 10/min apart
  from watches). Counted by a proxy between the operator and the API server (bench/kube_proxy.py),
  so they are exactly the operator's requests, though other engineers share the API server;
* Connect REST calls per minute from the workers' request logs (the operator's user agent, summed
  over the workers), and the calls per ConnectCluster per drift interval without the ``/topics``
  refreshes (target: <= 2 per cluster per drift interval + topics refreshes, i.e. one snapshot
  ``GET /connectors?expand=status&expand=info`` and one probe). Every namespace has its own
  ConnectCluster, naming its namespace's worker (one worker for up to 5,000 resources), so
  "clusters" is the number of ConnectCluster resources;
* the operator's CPU (% of one core, from /proc/<pid>/stat over the window) and RSS: peak (VmHWM,
  start-up included) and steady (the largest VmRSS sampled every 2 s in the window). Targets at
  5,000 at 30 s: CPU <= 3 % and peak RSS <= 250 MiB; at 20,000: peak RSS <= 600 MiB;
* whether every resource is still checked each drift interval: the operator's counter
  ``connect_offsets_resource_checks_total{kind="KafkaConnector"}`` (one per resource per check, work
  found or not) read from its ``/metrics`` at both ends of the window, divided by resources x drift
  intervals in the window ("not available" from an operator without that counter). Met when at least
  (intervals - 1) / intervals: the window's edges cut one interval.

Two more measurements, after a phase's idle window (so they do not disturb it):

* repair (largest resource count, its shortest drift interval: 5 s, or 30 s where it runs only 30 s):
  a connector deleted behind the operator's back (``DELETE /connectors/<name>`` on its worker), then
  ``GET /connectors/<name>`` polled until 200 again; 5 connectors spread over the resources (and
  so over the workers), one at a time, spaced apart. Target: drift interval + 2 s;
* a burst of 100 ``list`` annotations (smallest resource count, 30 s): ``connect-offsets.io/connector-offsets=list``
  with a fresh ``connect-offsets.io/request-id`` PATCHed on 100 different resources at once; each is done
  on the watch event in which the annotation is gone and ``status.lastOffsetsOperation`` carries its
  request id and ``Succeeded`` (as bench/bench_latency.py detects it). Reported: all done or not,
  p50 / p99 / max from the PATCH to that event.

Set-up on the real local stack. Resources live in namespaces of 200, 800, 4,000, 5,000, 5,000 and 5,000
(a resource count uses the first namespaces that add up to it: 1,000 = 200 + 800, 5,000 adds the
4,000, 20,000 the three 5,000s), each with a ConnectCluster; the KafkaConnectors are STOPPED
FileStreamSource connectors, created in parallel with the operator not running. Connect: dedicated
workers per resource count (tests/integration/connect_worker.py: each its own Connect group and
topics, so its request log holds only our calls, and the shared worker is spared), whose config
topics are seeded before they start with their connectors exactly as the operator would create them
(the config from the operator's own ``desired_config``, owner key included, target state STOPPED, no
tasks): creating 1,000 through REST took 438 s of rebalances, 5,000 would take hours. The operator
must find nothing to change: the report gives its writes to Connect (PUT/POST/DELETE) from its start
to the end of the phase, which should be 0.

Workers: namespaces go whole, in order, to one worker until the next would pass
``BENCH_CONNECTORS_PER_WORKER`` connectors (5,000; 200 in mode ``multi-small``), then to a new
worker. 1,000 and 5,000 fit one worker, as they always did; 20,000 gets four: {a, b, c} (the 5,000
of the 5,000 mode), {d}, {e}, {f}. One worker holding 20,000 took 5 min 5 s to answer
``GET /connectors?expand=status&expand=info``, so that run measured Connect, not the operator.
Every ConnectCluster names its namespace's worker (the operator shares one snapshot between the
ConnectClusters naming one URL, so each worker is listed once per drift interval). The workers
of a count are seeded and started in parallel (a 3 s stagger: the JVMs share one log4j file that
each start rewrites), each with ``-Xmx1g`` (``-Xmx2g`` above 5,000 connectors). REST calls are
read from every worker's request log and summed.

Drift intervals: 30 s and 5 s when one worker holds the resources; 30 s only when they need several
(20,000, ``multi-small``), unless ``BENCH_INTERVALS`` says otherwise. Issue 35's targets at 20,000
(peak RSS <= 600 MiB, every resource checked once per interval) are at 30 s; at 5 s the operator
would have to check 4,000 resources a second and each worker list its 5,000 connectors every 5 s,
while one worker alone takes 5-8 s to answer that listing on this machine (bench/README.md): four
of them on two cores would be measured, not the operator, as in the one-worker 20,000 run. When a
count runs only one interval, the burst and the repairs both follow its window (repair target:
that interval + 2 s).

Phases, each with a fresh operator (``connect-offsets-operator -n A [-n B ...] --leader-election
--lease-namespace A --metrics-port P``, its kubeconfig pointing at the counting proxy): for each
resource count, 30 s then 5 s. Each phase waits until every resource is Ready (ConnectorStopped),
then until the operator's CPU has settled (below 10 % or level over two consecutive intervals),
then one more drift interval, and measures for WINDOW seconds.

Leases (issue 44): the operator runs with ``--leader-election``, as the chart always runs it, one
replica holding every ConnectCluster's Lease (in the first namespace, default timings); its Lease
requests (a LIST per tick, 2.0-2.4 s, and a renewal of each held Lease every third tick) are
counted apart from the other API calls: issue 20's target is about the work on resources, and the
Leases' cost is a function of the clusters (bench/bench_leases.py). A fresh operator works under the
Leases it makes only one lease duration (15 s) after making them, so Ready comes that much later
than without. ``BENCH_LEADER_ELECTION=off`` runs the operator without Leases, as before issue 44.

Run: ``make bench BENCH=steady_state`` or ``.venv/bin/python bench/bench_steady_state.py [window_s] [mode]``;
mode ``full`` (default: 1,000 then 5,000), ``1000``, ``5000``, ``20000`` (four workers of 5,000;
its own section of bench/README.md, ``steady_state_20000``, so the 1,000/5,000 results stay),
``scale`` (5,000 then 20,000), ``small`` (200 resources, every measurement once, a smoke run:
printed only, bench/README.md is not written) or ``multi-small`` (the 20,000 mode's code path at 400
resources: 2 namespaces of 200, one worker each, 30 s only; printed only).

``BENCH_PYSPY=/path/to/py-spy`` also profiles each phase's window (``profile_window``).
``BENCH_LEADER_ELECTION=off``: the operator without ``--leader-election`` (default on).

Mode ``progress`` (issue 33; ``progress-small``: 200 resources, printed only): 5,000 resources whose
ConnectClusters have ``spec.kafka`` (the stack's cluster A), at a 30 s drift interval, two phases with
everything else equal: progress on (the default) and off (``CONNECT_OFFSETS_PROGRESS=off``), each
with its CPU, RSS, REST calls and the Kafka requests of progress (the operator's
``connect_offsets_progress_kafka_requests_total`` over the window, per cluster per interval).
The connectors are STOPPED, as in the other modes: 5,000 RUNNING sink connectors mean 5,000 sink
tasks and consumers on one worker, more than this machine holds; what a round costs with 5,000
RUNNING sinks is measured by bench/bench_progress.py.
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.conftest import OperatorProcess, delete_namespace, wait_for  # noqa: E402
from tests.integration.connect_worker import DedicatedWorker  # noqa: E402
from tests.integration.support import (  # noqa: E402
    GROUP,
    VERSION,
    condition,
    create_cluster,
    file_source_spec,
    free_port,
)

from bench.bench_leases import MEAN_TICK, expected_renewal_gap  # noqa: E402
from bench.kube_proxy import KubeProxy  # noqa: E402
from bench.report import cpu_seconds, machine, stack_api, write_section  # noqa: E402
from connect_offsets.models.crds import KafkaConnectorResource  # noqa: E402
from connect_offsets.planning.targets import desired_config  # noqa: E402

WINDOW = float(sys.argv[1]) if len(sys.argv) > 1 else 120.0
MODE = sys.argv[2] if len(sys.argv) > 2 else "full"
MODES = {
    "full": [1000, 5000],
    "1000": [1000],
    "5000": [5000],
    "20000": [20000],
    "scale": [5000, 20000],
    "small": [200],
    "multi-small": [400],
    "progress": [5000],
    "progress-small": [200],
}
PROGRESS_MODE = MODE.startswith("progress")
if MODE not in MODES:
    sys.exit(f"mode must be one of {', '.join(MODES)}, not {MODE!r}")
COUNTS = MODES[MODE]
#: Smoke runs: printed only, bench/README.md is left as it is.
SMOKE_MODES = ("small", "multi-small", "progress-small")
#: Namespaces and their resources; a resource count uses the first ones that add up to it (1,000 and
#: 5,000 as before issue 35's 20,000 run; 20,000 adds three namespaces of 5,000, one worker each).
LAYOUT: tuple[tuple[str, int], ...] = (
    (("a", 200), ("b", 200))
    if MODE == "multi-small"
    else (("a", 200), ("b", 800), ("c", 4000), ("d", 5000), ("e", 5000), ("f", 5000))
)
#: At most this many connectors per dedicated worker: namespaces go to workers whole, in LAYOUT order.
PER_WORKER = int(os.environ.get("BENCH_CONNECTORS_PER_WORKER", "200" if MODE == "multi-small" else "5000"))


def intervals_for(workers: int) -> tuple[float, ...]:
    """Drift intervals of a resource count: 30 s and 5 s on one worker, 30 s only on several (the
    module's docstring says why), ``BENCH_INTERVALS`` (e.g. "30" or "30,5") whatever the count."""
    if PROGRESS_MODE:
        return (30.0,)
    default = "30,5" if workers == 1 else "30"
    return tuple(float(i) for i in os.environ.get("BENCH_INTERVALS", default).split(","))


#: Progress phases: CONNECT_OFFSETS_PROGRESS of the operator (the progress modes run both).
PROGRESS_PHASES = ("on", "off") if PROGRESS_MODE else ("on",)
PROGRESS_METRIC = "connect_offsets_progress_kafka_requests_total"
BURST, REPAIRS = 100, 5
#: The operator under Leases (``--leader-election``), as the chart runs it; "off" as before issue 44.
LEADER_ELECTION = os.environ.get("BENCH_LEADER_ELECTION", "on") != "off"
ANNOTATION = f"{GROUP}/connector-offsets"
CHECKS_METRIC = "connect_offsets_resource_checks_total"
#: Targets of issue 20 (API, REST) and of issue 35 (the work queue): CPU and peak RSS at 5,000 at a
#: 30 s interval, RSS at 20,000.
API_TARGET, REST_TARGET, CPU_TARGET, RSS_TARGET, AT = 10.0, 2.0, 3.0, 250.0, 5000
RSS_TARGET_20000, CHECKS_TARGET_20000 = 600.0, 1.0
#: The same benchmark at commit 72f1244 (a kopf daemon per resource), for the side by side.
BEFORE = {
    (1000, 30.0): "1.3 %, 182 MiB",
    (1000, 5.0): "3.9 %, 160 MiB",
    (5000, 30.0): "5.9 %, 433 MiB",
    (5000, 5.0): "19.9 %, 361 MiB",
}
T = TypeVar("T")


def in_parallel(func: Callable[[int], T], indexes: Iterable[int], workers: int = 16) -> list[T]:
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(func, indexes))


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))]


def proc_status(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/{pid}/status")


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


def progress_requests(port: int) -> float | None:
    """Sum of ``connect_offsets_progress_kafka_requests_total`` (all kinds), None if not exported."""
    try:
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    except httpx.HTTPError:
        return None
    values = re.findall(rf"^{PROGRESS_METRIC}\{{[^}}]*\}} (\S+)$", text, re.M)
    return sum(float(v) for v in values) if PROGRESS_METRIC in text else None


def resource_checks(port: int) -> float | None:
    """``connect_offsets_resource_checks_total{kind="KafkaConnector"}``, or None if not exported."""
    try:
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    except httpx.HTTPError:
        return None
    found = re.search(rf'^{CHECKS_METRIC}\{{[^}}]*kind="KafkaConnector"[^}}]*\}} (\S+)$', text, re.M)
    return float(found.group(1)) if found else None


def ready_count(custom: Any, namespaces: list[str]) -> int:
    count = 0
    for namespace in namespaces:
        for item in custom.list_namespaced_custom_object(GROUP, VERSION, namespace, "kafkaconnectors")["items"]:
            found = condition(item, "Ready")
            count += bool(found and found["status"] == "True" and found["reason"] == "ConnectorStopped")
    return count


class Resources:
    """The benchmark's namespaces, ConnectClusters and KafkaConnectors, created as resource counts need them."""

    def __init__(
        self,
        custom: Any,
        core: Any,
        unique: str,
        work: Path,
        kafka: str | None = None,
        *,
        layout: tuple[tuple[str, int], ...] | None = None,
        per_worker: int | None = None,
        prefix: str = "bench-steady",
    ) -> None:
        self.custom, self.core, self.unique, self.work = custom, core, unique, work
        self.kafka = kafka  # the ConnectClusters' spec.kafka.bootstrapServers (progress modes)
        # Other benchmarks (bench_cold_start) bring their own layout and namespace prefix.
        self.layout = LAYOUT if layout is None else layout
        self.per_worker = PER_WORKER if per_worker is None else per_worker
        self.prefix = prefix
        self.namespaces: dict[str, list[str]] = {}  # namespace -> its KafkaConnector names

    def namespaces_for(self, count: int) -> list[str]:
        chosen, total = [], 0
        for letter, size in self.layout:
            if total >= count:
                break
            chosen.append(f"{self.prefix}-{letter}-{self.unique}")
            total += size
        if total != count:
            raise ValueError(f"{count} resources: the namespaces hold {', '.join(str(s) for _, s in self.layout)}")
        return chosen

    def body(self, namespace: str, name: str) -> dict[str, Any]:
        return {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "KafkaConnector",
            "metadata": {"name": name, "namespace": namespace, "labels": {f"{GROUP}/cluster": "local"}},
            "spec": file_source_spec(
                self.work / f"{name}.txt", f"st-{self.unique}", f"{name}-offsets", state="stopped"
            ),
        }

    def worker_groups(self, count: int) -> list[list[str]]:
        """``count``'s namespaces by dedicated worker: whole, in order, a new worker when the next
        namespace would take the current one past ``PER_WORKER`` connectors."""
        sizes = dict(self.layout)
        groups: list[list[str]] = []
        held = 0
        for namespace in self.namespaces_for(count):
            size = sizes[self.letter(namespace)]
            if not groups or held + size > self.per_worker:
                groups.append([])
                held = 0
            groups[-1].append(namespace)
            held += size
        return groups

    def letter(self, namespace: str) -> str:
        return namespace.removeprefix(f"{self.prefix}-").split("-", 1)[0]

    def ensure(self, count: int, urls: dict[str, str]) -> float:
        """Namespaces, ConnectClusters (each pointing at ``urls[namespace]``, its worker) and
        KafkaConnectors for ``count``; seconds taken."""
        started = time.monotonic()
        for namespace, (letter, size) in zip(self.namespaces_for(count), self.layout, strict=False):
            url = urls[namespace]
            if namespace in self.namespaces:
                patch = {"spec": {"url": url}}
                self.custom.patch_namespaced_custom_object(GROUP, VERSION, namespace, "connectclusters", "local", patch)
                continue
            self.core.create_namespace({"metadata": {"name": namespace}})
            if self.kafka is None:
                create_cluster(self.custom, namespace, url)
            else:
                create_cluster(self.custom, namespace, url, kafka={"bootstrapServers": self.kafka})
            names = [f"st-{self.unique}-{letter}{i:04d}" for i in range(size)]

            def create(i: int, ns: str = namespace, names: list[str] = names) -> None:
                self.custom.create_namespaced_custom_object(
                    GROUP, VERSION, ns, "kafkaconnectors", self.body(ns, names[i])
                )

            in_parallel(create, range(size))
            self.namespaces[namespace] = names
        return time.monotonic() - started

    def connect_configs(self, namespaces: list[str]) -> dict[str, dict[str, str]]:
        """The connectors of ``namespaces``, each config exactly as the operator would create it
        (``desired_config``)."""
        return {
            name: desired_config(KafkaConnectorResource.model_validate(self.body(namespace, name)))
            for namespace in namespaces
            for name in self.namespaces[namespace]
        }

    def names(self, count: int) -> list[tuple[str, str]]:
        return [(ns, name) for ns in self.namespaces_for(count) for name in self.namespaces[ns]]

    def cleanup(self) -> None:
        """With the operator stopped: drop finalizers (the worker and its connectors go as a whole), delete."""
        from kubernetes import client

        for namespace in self.namespaces:
            try:
                items = self.custom.list_namespaced_custom_object(GROUP, VERSION, namespace, "kafkaconnectors")
                names = [i["metadata"]["name"] for i in items["items"] if i["metadata"].get("finalizers")]

                def release(i: int, names: list[str] = names, namespace: str = namespace) -> None:
                    patch = {"metadata": {"finalizers": None}}
                    self.custom.patch_namespaced_custom_object(
                        GROUP, VERSION, namespace, "kafkaconnectors", names[i], patch
                    )

                in_parallel(release, range(len(names)))
                delete_namespace(self.core, self.custom, namespace)
            except client.ApiException as error:
                print(f"cleanup of {namespace}: {error.status} {error.reason}")


class Workers:
    """The dedicated Connect workers of one resource count, each with the namespaces bound to it."""

    def __init__(self, count: int, groups: list[list[str]], sizes: list[int]) -> None:
        self.groups, self.sizes = groups, sizes
        several = len(groups) > 1
        self.workers = [
            DedicatedWorker(heap=self.heap(size), name=f"steady{count}-{index}" if several else f"steady{count}")
            for index, size in enumerate(sizes)
        ]
        self.start_seconds: list[float | None] = [None] * len(groups)

    @staticmethod
    def heap(size: int) -> str:
        return "-Xmx2g" if size > 5000 else "-Xmx1g"

    def __len__(self) -> int:
        return len(self.workers)

    def urls(self) -> dict[str, str]:
        """Namespace -> the URL of its worker."""
        return {ns: worker.url for worker, group in zip(self.workers, self.groups, strict=True) for ns in group}

    def start(self, resources: Resources, timeout: float = 900, stagger: float = 3.0) -> float:
        """Seed every worker's config topic with its namespaces' connectors and start it, all in
        parallel (``stagger`` seconds apart: each start rewrites the log4j file the JVMs read);
        seconds until the last one listed all its connectors STOPPED."""
        began = time.monotonic()

        def seed_and_start(index: int) -> None:
            time.sleep(index * stagger)
            started = time.monotonic()
            worker = self.workers[index]
            worker.seed_stopped_connectors(resources.connect_configs(self.groups[index]))
            worker.start(timeout=timeout)
            self.start_seconds[index] = time.monotonic() - started
            print(
                f"worker {index} ({worker.url}, {self.sizes[index]:,} connectors): "
                f"started in {self.start_seconds[index]:.0f} s, RSS {worker.rss_mib('VmRSS') or 0:.0f} MiB",
                flush=True,
            )

        in_parallel(seed_and_start, range(len(self.workers)), workers=len(self.workers))
        return time.monotonic() - began

    def log_offsets(self) -> list[int]:
        return [worker.log.stat().st_size if worker.log.exists() else 0 for worker in self.workers]

    def rest_since(self, offsets: list[int]) -> tuple[Counter[str], list[int]]:
        """The operator's requests in every worker's log since ``offsets``: summed by method and
        path shape, and each worker's total."""
        total: Counter[str] = Counter()
        each: list[int] = []
        for worker, start in zip(self.workers, offsets, strict=True):
            calls = rest_calls(worker.log, start, worker.log.stat().st_size)
            total.update(calls)
            each.append(sum(calls.values()))
        return total, each

    def url_of(self, namespace: str) -> str:
        return self.urls()[namespace]

    def peaks(self) -> list[float | None]:
        return [worker.rss_mib() for worker in self.workers]

    def stop(self) -> None:
        for worker in self.workers:
            try:
                worker.stop()
            except Exception as error:  # the others are stopped all the same
                print(f"stopping worker {worker.url}: {error}", flush=True)


class NamespaceWatch:
    """Every KafkaConnector event of one namespace from ``resource_version`` on, stamped on arrival."""

    def __init__(self, custom: Any, namespace: str, resource_version: str, on_event: Callable[..., None]) -> None:
        self.custom, self.namespace, self.rv, self.on_event = custom, namespace, resource_version, on_event
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from kubernetes import watch

        while not self._stop.is_set():
            stream = watch.Watch()  # type: ignore[no-untyped-call]
            try:
                for event in stream.stream(  # type: ignore[no-untyped-call]
                    self.custom.list_namespaced_custom_object,
                    GROUP,
                    VERSION,
                    self.namespace,
                    "kafkaconnectors",
                    resource_version=self.rv,
                    timeout_seconds=30,
                ):
                    arrived = time.monotonic()
                    body = event["object"]
                    self.rv = body["metadata"]["resourceVersion"]
                    self.on_event(arrived, body)
                    if self._stop.is_set():
                        stream.stop()  # type: ignore[no-untyped-call]
            except Exception as error:  # an expired resource version ends the measurement as not done
                print(f"watch of {self.namespace} ended: {error}", flush=True)
                return

    def stop(self) -> None:
        self._stop.set()


def list_burst(custom: Any, targets: list[tuple[str, str]], timeout: float = 300) -> dict[str, Any]:
    """``list`` on every target at once; seconds from each PATCH to the watch event showing it done."""
    lock = threading.Lock()
    pending: dict[str, tuple[float, int, str]] = {}  # name -> (patched at, patched rv, request id)
    done: dict[str, float] = {}
    failed: dict[str, Any] = {}
    early: dict[str, list[tuple[float, dict[str, Any]]]] = {}  # events that beat their PATCH's reply
    sent: list[float] = []

    def judge(name: str, arrived: float, body: dict[str, Any]) -> None:
        started, rv, request_id = pending[name]
        meta = body["metadata"]
        if int(meta["resourceVersion"]) <= rv or ANNOTATION in (meta.get("annotations") or {}):
            return
        last = (body.get("status") or {}).get("lastOffsetsOperation") or {}
        if last.get("requestId") == request_id and last.get("result") == "Succeeded":
            done[name] = arrived - started
        else:
            failed[name] = last
        del pending[name]

    def on_event(arrived: float, body: dict[str, Any]) -> None:
        name = body["metadata"]["name"]
        with lock:
            if name in pending:
                judge(name, arrived, body)
            elif name in wanted and name not in done and name not in failed:
                early.setdefault(name, []).append((arrived, body))

    wanted = {name for _, name in targets}
    watches = []
    for namespace in sorted({ns for ns, _ in targets}):
        rv = custom.list_namespaced_custom_object(GROUP, VERSION, namespace, "kafkaconnectors", limit=1)["metadata"]
        watches.append(NamespaceWatch(custom, namespace, rv["resourceVersion"], on_event))
    time.sleep(1)  # the watches are established

    def annotate(i: int) -> None:
        namespace, name = targets[i]
        request_id = f"burst-{i}-{uuid.uuid4().hex[:6]}"
        patch = {"metadata": {"annotations": {ANNOTATION: "list", f"{GROUP}/request-id": request_id}}}
        started = time.monotonic()
        patched = custom.patch_namespaced_custom_object(GROUP, VERSION, namespace, "kafkaconnectors", name, patch)
        with lock:
            sent.append(time.monotonic())
            pending[name] = (started, int(patched["metadata"]["resourceVersion"]), request_id)
            for arrived, body in early.pop(name, []):
                if name in pending:
                    judge(name, arrived, body)

    began = time.monotonic()
    in_parallel(annotate, range(len(targets)), workers=len(targets))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with lock:
            if len(done) + len(failed) == len(targets):
                break
        time.sleep(0.2)
    for w in watches:
        w.stop()
    with lock:
        return {
            "requested": len(targets),
            "times": list(done.values()),
            "failed": dict(failed),
            "patched_in": max(sent, default=began) - began,
            "missing": len(targets) - len(done) - len(failed),
        }


def repairs(targets: list[tuple[str, str]], spacing: float) -> list[float | None]:
    """For each (worker URL, connector name): DELETE the connector on its worker, then seconds until
    ``GET /connectors/<name>`` is 200 again."""
    results: list[float | None] = []
    for url, name in targets:
        with httpx.Client(base_url=url, timeout=30) as connect:
            started = time.monotonic()
            connect.delete(f"/connectors/{name}").raise_for_status()
            seen_gone = False
            took: float | None = None
            while time.monotonic() - started < 120:
                code = connect.get(f"/connectors/{name}").status_code
                seen_gone = seen_gone or code == 404
                if code == 200 and seen_gone:
                    took = time.monotonic() - started
                    break
                time.sleep(0.1)
        results.append(took)
        print(f"repair of {name} on {url}: {took if took is None else round(took, 2)} s", flush=True)
        time.sleep(spacing)
    return results


def profile_window(pid: int, output: Path) -> subprocess.Popen[bytes] | None:
    """With ``BENCH_PYSPY`` naming a py-spy binary: a profile of the operator over the window
    (100 Hz, native frames, so the garbage collector shows as ``gc_collect_main``), raw
    flamegraph lines in ``output``. py-spy samples from outside the process: its short pauses stop
    the operator, they add nothing to its CPU time, so the window's CPU figure stays comparable."""
    binary = os.environ.get("BENCH_PYSPY")
    if not binary:
        return None
    command = [binary, "record", "-r", "100", "-d", str(int(WINDOW)), "--native", "-f", "raw", "-o", str(output)]
    print(f"profiling the window into {output}", flush=True)
    return subprocess.Popen([*command, "--pid", str(pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def settle(pid: int, interval: float, limit: float = 600) -> float:
    """Wait until the operator's CPU is below 10 % or level over two consecutive windows; seconds waited."""
    started, window = time.monotonic(), max(interval, 10.0)
    previous: float | None = None
    while time.monotonic() - started < limit:
        before = cpu_seconds(pid)
        time.sleep(window)
        used = (cpu_seconds(pid) - before) / window * 100
        if used < 10 or (previous is not None and abs(used - previous) <= max(5.0, 0.25 * previous)):
            break
        previous = used
    return time.monotonic() - started


def run_phase(
    count: int,
    interval: float,
    namespaces: list[str],
    workers: Workers,
    proxy: KubeProxy,
    kubeconfig: str,
    custom: Any,
    work: Path,
    extras: list[Callable[[], dict[str, Any]]],
    progress: str = "on",
) -> dict[str, Any]:
    """One operator over ``namespaces`` (their ConnectClusters naming ``workers``), measured over
    WINDOW once settled; then ``extras`` (the burst, the repairs), each adding to the result."""
    port = free_port()
    op = OperatorProcess(
        kubeconfig,
        namespaces[0],
        work / f"operator-{count}-{interval:.0f}-progress-{progress}.log",
        extra_env={
            "CONNECT_OFFSETS_DRIFT_INTERVAL": f"{interval:g}",
            "CONNECT_OFFSETS_PROGRESS": progress,
            "POD_NAME": f"steady-{count}-{interval:g}",
        },
        extra_args=[
            *(a for ns in namespaces[1:] for a in ("-n", ns)),
            *(("--leader-election", "--lease-namespace", namespaces[0]) if LEADER_ELECTION else ()),
            "--metrics-port",
            str(port),
        ],
    )
    log_at_start, api_at_start = workers.log_offsets(), proxy.snapshot()
    started = time.monotonic()
    op.start()
    assert op.process is not None
    pid = op.process.pid
    try:
        wait_for(
            f"{count} connectors Ready",
            lambda: ready_count(custom, namespaces) == count,
            timeout=1800,
            interval=5,
        )
        ready = time.monotonic() - started
        settled = ready + settle(pid, interval)
        time.sleep(interval)  # one more drift interval: the start-up burst is over
        api_before, log_start = proxy.snapshot(), workers.log_offsets()
        checks_before, kafka_before = resource_checks(port), progress_requests(port)
        profiler = profile_window(pid, work / f"pyspy-{count}-{interval:.0f}-progress-{progress}.txt")
        cpu_before, window_start = cpu_seconds(pid), time.monotonic()
        samples: list[float] = []
        while time.monotonic() - window_start < WINDOW:
            samples.append(proc_status(pid, "VmRSS"))
            time.sleep(2)
        elapsed = time.monotonic() - window_start
        cpu = (cpu_seconds(pid) - cpu_before) / elapsed * 100
        if profiler is not None:
            profiler.wait()
        checks_after, kafka_after = resource_checks(port), progress_requests(port)
        api_now = proxy.snapshot()
        api = api_now - api_before
        rest, rest_each = workers.rest_since(log_start)
        peak = proc_status(pid, "VmHWM")
        result: dict[str, Any] = {
            "count": count,
            "interval": interval,
            "progress": progress,
            "kafka": None if kafka_before is None or kafka_after is None else kafka_after - kafka_before,
            "clusters": len(namespaces),
            "workers": len(workers),
            "window": elapsed,
            "ready": ready,
            "settled": settled,
            "peak": peak,
            "steady": max(samples),
            "cpu": cpu,
            "api": {k: v * 60 / elapsed for k, v in api.items() if v},
            "rest": {k: v * 60 / elapsed for k, v in rest.items() if v},
            "rest_per_worker": [v * 60 / elapsed for v in rest_each],  # all kinds, per minute
            "watches_since_start": sum(v for k, v in (api_now - api_at_start).items() if k.startswith("watch ")),
            "checks": (
                None
                if checks_before is None or checks_after is None
                else (checks_after - checks_before) / (count * elapsed / interval)
            ),
        }
        writes, _ = workers.rest_since(log_at_start)  # before any repair
        result["writes"] = sum(v for k, v in writes.items() if not k.startswith("GET"))
        print({k: v for k, v in result.items() if k not in ("api", "rest")}, flush=True)
        for extra in extras:
            result.update(extra())
        return result
    finally:
        op.stop()


def main() -> int:
    from kubernetes import client

    info, api = stack_api(BURST)
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    unique = uuid.uuid4().hex[:6]
    work = Path(os.environ.get("TMPDIR", "/tmp")) / f"bench-steady-{unique}"
    work.mkdir(parents=True)
    resources = Resources(custom, core, unique, work, info["kafka_a"] if PROGRESS_MODE else None)
    proxy = KubeProxy.for_kubeconfig(info["kubeconfig"])
    results: list[dict[str, Any]] = []
    setups: list[dict[str, Any]] = []
    try:
        proxy.start()
        kubeconfig = str(proxy.write_kubeconfig(work / "proxy-kubeconfig.json"))
        for count in COUNTS:
            groups = resources.worker_groups(count)
            sizes = [sum(dict(LAYOUT)[resources.letter(ns)] for ns in group) for group in groups]
            workers = Workers(count, groups, sizes)
            setup: dict[str, Any] = {
                "count": count,
                "workers": [
                    {
                        "namespaces": [resources.letter(ns) for ns in group],
                        "connectors": size,
                        "heap": Workers.heap(size),
                    }
                    for group, size in zip(groups, sizes, strict=True)
                ],
            }
            setups.append(setup)
            try:
                setup["created"] = resources.ensure(count, workers.urls())
                setup["worker_start"] = workers.start(resources)
                for each, took in zip(setup["workers"], workers.start_seconds, strict=True):
                    each["start"] = took
                print(setup, flush=True)
                namespaces = resources.namespaces_for(count)
                everything = resources.names(count)
                intervals = intervals_for(len(workers))
                for interval in intervals:
                    extras: list[Callable[[], dict[str, Any]]] = []
                    if count == COUNTS[0] and interval == max(intervals):

                        def burst(everything: list[tuple[str, str]] = everything) -> dict[str, Any]:
                            step = len(everything) // BURST
                            return {"burst": list_burst(custom, everything[::step][:BURST])}

                        extras.append(burst)
                    if count == COUNTS[-1] and interval == min(intervals):

                        def repair(
                            everything: list[tuple[str, str]] = everything,
                            workers: Workers = workers,
                            interval: float = interval,
                        ) -> dict[str, Any]:
                            step = len(everything) // REPAIRS
                            chosen = everything[step // 2 :: step][:REPAIRS]
                            targets = [(workers.url_of(ns), name) for ns, name in chosen]
                            return {"repairs": repairs(targets, spacing=2 * interval + 5)}

                        extras.append(repair)
                    if PROGRESS_MODE:
                        extras = []  # the burst and the repairs are the other modes' measurements
                    for progress in PROGRESS_PHASES:
                        results.append(
                            run_phase(
                                count, interval, namespaces, workers, proxy, kubeconfig, custom, work, extras, progress
                            )
                        )
            finally:
                for each, peak in zip(setup["workers"], workers.peaks(), strict=True):
                    each["peak"] = peak
                workers.stop()
    finally:
        resources.cleanup()
        proxy.stop()
    if PROGRESS_MODE:
        report_progress(results)
    else:
        report(results, setups)
    return 0


PROGRESS_HEADER = (
    "| Progress | Resources | Drift interval | Clusters | Kafka requests per cluster per interval "
    "| REST per cluster per interval | API calls/min (no watches, no Leases) | CPU | Peak RSS (MiB) | Steady RSS (MiB) "
    "| Writes |"
)


def report_progress(results: list[dict[str, Any]]) -> None:
    """The progress modes' section: the same resources with progress on and off."""
    rows = []
    for r in results:
        rest_total = sum(r["rest"].values())
        topics = sum(v for k, v in r["rest"].items() if k.endswith("/topics"))
        per_cluster = (rest_total - topics) / 60 * r["interval"] / r["clusters"]
        intervals = r["window"] / r["interval"]
        kafka = "not exported" if r["kafka"] is None else f"{r['kafka'] / intervals / r['clusters']:.2f}"
        api_other = sum(v for k, v in r["api"].items() if not k.startswith("watch ") and not is_lease(k))
        rows.append(
            f"| {r['progress']} | {r['count']:,} | {r['interval']:g} s | {r['clusters']} | {kafka} | {per_cluster:.2f} "
            f"| {api_other:,.1f} | {r['cpu']:.1f} % | {r['peak']:.0f} | {r['steady']:.0f} | {r['writes']} |"
        )
    on = next((r for r in results if r["progress"] == "on"), None)
    off = next((r for r in results if r["progress"] == "off"), None)
    delta = (
        f"progress on costs {on['cpu'] - off['cpu']:+.1f} points of CPU and "
        f"{on['peak'] - off['peak']:+.0f} MiB of peak RSS"
        if on is not None and off is not None
        else "one phase only"
    )
    body = f"""
## Steady state with progress on and off: 5,000 KafkaConnectors (issue 33)

`.venv/bin/python bench/bench_steady_state.py 120 progress` — {machine()}; load average at the end
{os.getloadavg()[0]:.1f} (other engineers' tests share the machine).

The steady-state set-up above (5,000 STOPPED connectors seeded on a dedicated worker, 3 ConnectClusters
naming it), each ConnectCluster with `spec.kafka` (the stack's cluster A); one operator per phase,
`CONNECT_OFFSETS_PROGRESS` on (the default) or `off`, measured over {WINDOW:.0f} s after it settled.
Kafka requests: `{PROGRESS_METRIC}` over the window / (clusters x drift intervals); REST per
cluster per interval leaves `/topics` out (it includes `GET /health`, asked each interval either way).

{PROGRESS_HEADER}
|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|
{chr(10).join(rows)}

{delta}. Target (issue 33): at most 2 extra Kafka requests per cluster per interval. With STOPPED
connectors nothing is measured (0 here): the cost of a round over 5,000 RUNNING sinks is
bench/bench_progress.py's section.
"""
    if MODE == "progress-small":
        print("(progress-small mode: a smoke run, bench/README.md left as it is)")
    else:
        write_section("steady_state_progress", body)
    print(body)


def verdict(ok: bool) -> str:
    return "met" if ok else "**missed**"


def is_lease(kind: str) -> bool:
    """A Lease request among the proxy's counts (``list leases``, ``update leases``, ...)."""
    return kind.endswith(" leases")


def lease_line(r: dict[str, Any]) -> str:
    """The phase's Lease requests per minute beside what the timings predict: a LIST per tick
    (2.0-2.4 s), a renewal of each held Lease every third tick (bench/bench_leases.py)."""
    calls = {k.split()[0]: v for k, v in r["api"].items() if is_lease(k)}
    if not calls:
        return "Leases: none (no `--leader-election`)"
    _, gap, _ = expected_renewal_gap()
    return (
        f"Leases {sum(calls.values()):,.1f}/min apart from that ("
        + ", ".join(f"{verb} {n:,.1f}" for verb, n in sorted(calls.items()))
        + f"; expected: list {60 / MEAN_TICK:.1f}, update {r['clusters']} clusters x 60 / {gap:.1f} s = "
        f"{r['clusters'] * 60 / gap:.1f})"
    )


def report(results: list[dict[str, Any]], setups: list[dict[str, Any]]) -> None:
    rows, verdicts, details, extras = [], [], [], []
    for r in results:
        label = f"{r['count']:,} at {r['interval']:g} s"
        watches = sum(v for k, v in r["api"].items() if k.startswith("watch "))
        api_other = sum(v for k, v in r["api"].items() if not k.startswith("watch ") and not is_lease(k))
        leases = sum(v for k, v in r["api"].items() if is_lease(k))
        rest_total = sum(r["rest"].values())
        topics = sum(v for k, v in r["rest"].items() if k.endswith("/topics"))
        per_cluster = (rest_total - topics) / 60 * r["interval"] / r["clusters"]
        checks = "not available" if r["checks"] is None else f"{r['checks']:.2f}"
        rows.append(
            f"| {r['count']:,} | {r['interval']:g} s | {r['clusters']} | {api_other:,.1f} | {leases:,.1f} "
            f"| {watches:,.1f} ({r['watches_since_start']} since start) "
            f"| {rest_total:,.1f} | {per_cluster:,.2f} | {topics:,.1f} | {r['cpu']:.1f} % | {r['peak']:.0f} "
            f"| {r['steady']:.0f} | {checks} | {r['writes']} | {r['ready']:.0f} / {r['settled']:.0f} |"
        )
        line = [
            f"API {api_other:,.1f}/min apart from watches and Leases ≤ {API_TARGET:g}: "
            + verdict(api_other <= API_TARGET),
            lease_line(r),
            f"REST {per_cluster:,.2f} per cluster per interval "
            f"({per_cluster * r['clusters'] / r.get('workers', 1):,.2f} per worker, {r.get('workers', 1)} "
            f"worker{'s' if r.get('workers', 1) > 1 else ''}) ≤ {REST_TARGET:g}: "
            + verdict(per_cluster <= REST_TARGET),
        ]
        if r["count"] == AT and r["interval"] == 30.0:
            line.append(f"CPU {r['cpu']:.1f} % ≤ {CPU_TARGET:g} %: {verdict(r['cpu'] <= CPU_TARGET)}")
            line.append(
                f"peak RSS {r['peak']:.0f} MiB (steady {r['steady']:.0f}) ≤ {RSS_TARGET:g}: "
                + verdict(r["peak"] <= RSS_TARGET)
            )
        elif r["count"] >= 20000:
            line.append(
                f"peak RSS {r['peak']:.0f} MiB (steady {r['steady']:.0f}) ≤ {RSS_TARGET_20000:g}: "
                + verdict(r["peak"] <= RSS_TARGET_20000)
            )
        before = BEFORE.get((r["count"], r["interval"]))
        if before is not None:
            line.append(f"before the work queue (72f1244): {before}")
        if r["checks"] is None:
            line.append("every resource checked each interval: not available (no resource-checks counter)")
        else:
            intervals = r["window"] / r["interval"]
            floor = (intervals - 1) / intervals
            ok = r["checks"] >= floor
            if r["count"] >= 20000:  # issue 35's target at 20,000, the same edge allowance
                line.append(
                    f"checks per resource per interval {r['checks']:.2f} (target {CHECKS_TARGET_20000:.2f}, "
                    f"≥ {floor:.2f} over {intervals:.1f} intervals: the window's edges cut one): {verdict(ok)}"
                )
            else:
                line.append(f"checks per resource per interval {r['checks']:.2f}: {verdict(ok)}")
        verdicts.append(f"- {label}: " + "; ".join(line))
        details.append(
            f"- {label} — API: "
            + ", ".join(f"{k} {v:,.1f}" for k, v in sorted(r["api"].items(), key=lambda kv: -kv[1]))
            + "; REST: "
            + ", ".join(f"{k} {v:,.1f}" for k, v in sorted(r["rest"].items(), key=lambda kv: -kv[1]))
            + (
                "; REST by worker: " + ", ".join(f"{v:,.1f}" for v in r["rest_per_worker"])
                if len(r.get("rest_per_worker", [])) > 1
                else ""
            )
        )
        if "burst" in r:
            b = r["burst"]
            times = b["times"]
            spread = (
                f"p50 {pct(times, 50):.2f} s, p99 {pct(times, 99):.2f} s, max {max(times):.2f} s "
                f"(mean {statistics.mean(times):.2f} s)"
                if times
                else "none done"
            )
            all_done = len(times) == b["requested"]
            extras.append(
                f"- {b['requested']} `list` annotations on {b['requested']} resources at once ({label}; PATCHes "
                f"sent within {b['patched_in']:.2f} s): {'all done' if all_done else '**not all done**'} "
                f"({len(times)} succeeded, {len(b['failed'])} failed, {b['missing']} not done in time); {spread}."
                + (f" First failures: {list(b['failed'].items())[:3]}" if b["failed"] else "")
            )
        if "repairs" in r:
            took = r["repairs"]
            done = [t for t in took if t is not None]
            target = r["interval"] + 2
            worst = max(done) if len(done) == len(took) and done else None
            extras.append(
                f"- Repair of a connector deleted behind the operator's back ({label}; `DELETE` on its worker, "
                f"then `GET` until 200): "
                + ", ".join("not repaired in 120 s" if t is None else f"{t:.1f} s" for t in took)
                + f"; max {'—' if worst is None else f'{worst:.1f} s'} ≤ {target:g} s: "
                + verdict(worst is not None and worst <= target)
                + "."
            )
    setup_lines = [setup_line(s) for s in setups]
    several = any(len(s.get("workers", [])) > 1 for s in setups)
    command = (
        "make bench BENCH=steady_state"
        if len(sys.argv) == 1
        else ".venv/bin/python bench/bench_steady_state.py " + " ".join(sys.argv[1:])
    )
    sizes = ", ".join(f"{size:,}" for _, size in LAYOUT)
    connect = (
        f"dedicated Connect workers per resource count (each its own group and topics; namespaces go to "
        f"workers whole, at most {PER_WORKER:,} connectors a worker), each config topic seeded before it starts "
        "with its connectors exactly as the operator creates them; one ConnectCluster per namespace "
        f"({sizes} resources), naming its namespace's worker"
        if several
        else "a dedicated Connect worker per resource count, its config topic seeded before it starts with each "
        "connector exactly as the operator creates it; one ConnectCluster per namespace "
        f"({sizes} resources), all naming that worker"
    )
    section = "steady_state_20000" if MODE == "20000" else "steady_state"
    leases = (
        "`--leader-election` (the chart's default since issue 44: the Leases of the ConnectClusters in the "
        "first namespace, default timings)"
        if LEADER_ELECTION
        else "without `--leader-election` (`BENCH_LEADER_ELECTION=off`)"
    )
    body = f"""
## Steady state: idle KafkaConnectors, {" and ".join(f"{c:,}" for c in COUNTS)} (issues 10, 20 and 35)

`{command}` — {machine()}; load average at the end {os.getloadavg()[0]:.1f}
(other engineers' tests share the machine).

STOPPED FileStreamSource connectors on {connect}; one operator per
phase, {leases}, nothing changing, measured over {WINDOW:.0f} s after it settled. API: the operator's
requests through a counting proxy, watch requests and Lease requests apart (a watch stays open: "since
start" counts those the operator opened from its start to the window's end). REST: the operator's lines
in the workers' request logs, summed over the workers; "per cluster per interval" leaves `/topics`
refreshes out. Checks: increments of `{CHECKS_METRIC}{{kind="KafkaConnector"}}` / (resources x drift
intervals in the window).
Writes: the operator's PUT/POST/DELETE to Connect from its start to the window's end (0: seeding
matched its config).
Ready / settled: seconds from the operator's start until every resource was Ready, and until its CPU settled.

| Resources | Drift interval | Clusters | API calls/min (no watches, no Leases) | Lease calls/min \
| Watch requests/min \
| REST calls/min | REST per cluster per interval | Topics refreshes/min | CPU | Peak RSS (MiB) \
| Steady RSS (MiB) | Checks | Writes | Ready / settled (s) |
|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|
{chr(10).join(rows)}

Targets (issue 20: API ≤ {API_TARGET:g}/min apart from watches (and, since issue 44, Leases); REST ≤
{REST_TARGET:g} per cluster per drift interval + topics refreshes; every resource checked each interval.
Issue 35: CPU ≤ {CPU_TARGET:g} % and peak RSS ≤ {RSS_TARGET:g} MiB at {AT:,} at 30 s; peak RSS ≤
{RSS_TARGET_20000:g} MiB and checks {CHECKS_TARGET_20000:.2f} at 20,000; the numbers of the operator before the
work queue, a kopf daemon per resource, beside them):

{chr(10).join(verdicts)}

{chr(10).join(extras)}

Set-up:

{chr(10).join(setup_lines)}

Calls per minute by kind:

{chr(10).join(details)}
"""
    if MODE in SMOKE_MODES:
        print(f"({MODE} mode: a smoke run, bench/README.md left as it is)")
    else:
        write_section(section, body)
    print(body)


def setup_line(setup: dict[str, Any]) -> str:
    """One resource count's set-up: its workers (namespaces, connectors, heap), how long they took to
    start (together and each) and their peak RSS."""
    workers = setup.get("workers", [])

    def mib(value: float | None) -> str:
        return "?" if value is None else f"{value:.0f}"

    def secs(value: float | None) -> str:
        return "?" if value is None else f"{value:.0f} s"

    head = (
        f"- {setup['count']:,}: {len(workers)} Connect worker{'s' if len(workers) != 1 else ''}; "
        f"resources created in {setup.get('created', 0):.0f} s; "
    )
    if len(workers) <= 1:
        peak = workers[0].get("peak") if workers else None
        return head + (
            f"worker seeded and all connectors STOPPED in {setup.get('worker_start', 0):.0f} s; "
            f"worker peak RSS {mib(peak)} MiB"
        )
    each = "; ".join(
        f"{'+'.join(w['namespaces'])}: {w['connectors']:,} connectors, {w['heap']}, STOPPED in "
        f"{secs(w.get('start'))}, peak RSS {mib(w.get('peak'))} MiB"
        for w in workers
    )
    total = sum(w.get("peak") or 0 for w in workers)
    return head + (
        f"workers seeded and started in parallel, all connectors STOPPED in {setup.get('worker_start', 0):.0f} s; "
        f"workers' peak RSS {total:,.0f} MiB in all ({each})"
    )


if __name__ == "__main__":
    sys.exit(main())
