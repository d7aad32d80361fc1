"""Benchmark: an operator starting over 20,000 KafkaConnectors on 20 ConnectClusters (issue 45, item 4).

Two phases, each a fresh operator process (``--leader-election``, as the chart runs it, holding
every ConnectCluster's Lease):

* **first start**: the resources have never been seen (no status, no finalizer): every one needs its
  finalizer and its first status. Measured: seconds from the operator's start until every resource
  is Ready (``ConnectorStopped``), from a watch of every namespace (no LIST of 20,000 every few
  seconds beside the operator).
* **restart**: the first operator is stopped (SIGTERM) and a new one started over the same
  resources, every one already Ready and finalized, as after an upgrade or a crash. Measured:
  seconds until every resource had its first check (``connect_offsets_unchecked_resources`` 0 after
  the work queue's ``adds`` reached the resource count, read from ``/metrics`` every 0.5 s).

Target (issue 45): all Ready within 90 s of the start. In both phases, a ``list`` is asked every
``PROBE_EVERY`` seconds from the moment the operator is working (its first key added to the work
queue: it is up, and holds the Leases) until the phase ends, each on a resource of the next
namespace (``connect-offsets.io/connector-offsets=list`` with a fresh request id): seconds from the
PATCH to the watch event in which the annotation is gone and ``status.lastOffsetsOperation`` carries
the request id and ``Succeeded``. Target: p99 <= 2 s.

Also: the operator's CPU seconds and peak RSS (VmHWM) per phase.

Set-up: as bench_steady_state.py's 20,000 mode (its ``Resources`` and ``Workers``): STOPPED
FileStreamSource connectors seeded into dedicated Connect workers' config topics (5 namespaces of
1,000 per worker, four workers), one ConnectCluster per namespace naming its worker, resources
created with the operator not running.

Run: ``make bench BENCH=cold_start`` or ``.venv/bin/python bench/bench_cold_start.py [mode]``; mode
``full`` (20,000: 20 namespaces of 1,000) or ``small`` (2,000: 4 namespaces of 500, one worker;
printed only). ``BENCH_OPERATOR_ARGS``: more arguments for the operator (e.g. ``--workers 16``).
``BENCH_PYSPY=/path/to/py-spy``: a profile of each phase's first 90 s.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.conftest import OperatorProcess  # noqa: E402
from tests.integration.support import GROUP, VERSION, condition, free_port  # noqa: E402

# bench_steady_state reads its own command line when it is imported: it is shown none.
_ARGV, sys.argv = sys.argv, sys.argv[:1]
from bench.bench_steady_state import NamespaceWatch, Resources, Workers, pct, proc_status  # noqa: E402

sys.argv = _ARGV

from bench.report import cpu_seconds, machine, stack_api, write_section  # noqa: E402

MODE = sys.argv[1] if len(sys.argv) > 1 else "full"
LAYOUTS = {
    "full": tuple((f"n{i:02d}", 1000) for i in range(20)),
    "small": tuple((f"n{i:02d}", 500) for i in range(4)),
}
if MODE not in LAYOUTS:
    sys.exit(f"mode must be one of {', '.join(LAYOUTS)}, not {MODE!r}")
LAYOUT = LAYOUTS[MODE]
COUNT = sum(size for _, size in LAYOUT)
PER_WORKER = 5000
READY_TARGET, LIST_P99_TARGET = 90.0, 2.0
PROBE_EVERY = 1.0
ANNOTATION = f"{GROUP}/connector-offsets"
DRIFT_INTERVAL = 30.0
PHASE_TIMEOUT = 1200.0


def queue_gauges(port: int) -> dict[str, float] | None:
    """The work queue's depth (all kinds), in-flight and adds (all kinds) from ``/metrics``."""
    try:
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    except httpx.HTTPError:
        return None

    def total(name: str) -> float:
        return sum(float(v) for v in re.findall(rf"^{name}(?:\{{[^}}]*\}})? (\S+)$", text, re.M))

    def by_generation(name: str) -> float:
        return sum(float(v) for v in re.findall(rf'^{name}\{{generation="2"\}} (\S+)$', text, re.M))

    return {
        "depth": total("connect_offsets_workqueue_depth"),
        "in_flight": total("connect_offsets_workqueue_in_flight"),
        "adds": total("connect_offsets_workqueue_adds_total"),
        "unchecked": total("connect_offsets_unchecked_resources"),
        # Why a list waits (printed, not tabled): the event loop's worst timer delay of the last
        # window, and the full collections' count and time so far.
        "loop_lag": total("connect_offsets_event_loop_lag_seconds"),
        "full_gcs": by_generation("connect_offsets_gc_pause_seconds_count"),
        "full_gc_seconds": by_generation("connect_offsets_gc_pause_seconds_sum"),
    }


class Fleet:
    """Every resource's readiness and every ``list`` probe's outcome, from one watch per namespace."""

    def __init__(self, custom: Any, namespaces: list[str]) -> None:
        self.custom = custom
        self.lock = threading.Lock()
        self.ready: set[tuple[str, str]] = set()
        self.probes: dict[tuple[str, str], tuple[float, int, str]] = {}  # -> (patched at, rv, request id)
        self.early: dict[tuple[str, str], list[tuple[float, dict[str, Any]]]] = {}
        self.answered: list[tuple[float, float]] = []  # (asked at, seconds) of each done probe
        self.failed: list[dict[str, Any]] = []
        self.watches = []
        for namespace in namespaces:
            listing = custom.list_namespaced_custom_object(GROUP, VERSION, namespace, "kafkaconnectors")
            for item in listing["items"]:
                self._note(item)
            rv = listing["metadata"]["resourceVersion"]
            self.watches.append(NamespaceWatch(custom, namespace, rv, self._on_event))

    def _note(self, body: dict[str, Any]) -> None:
        key = (body["metadata"]["namespace"], body["metadata"]["name"])
        found = condition(body, "Ready")
        if found and found["status"] == "True" and found["reason"] == "ConnectorStopped":
            self.ready.add(key)
        else:
            self.ready.discard(key)

    def _judge(self, key: tuple[str, str], arrived: float, body: dict[str, Any]) -> None:
        started, rv, request_id = self.probes[key]
        meta = body["metadata"]
        if int(meta["resourceVersion"]) <= rv or ANNOTATION in (meta.get("annotations") or {}):
            return
        last = (body.get("status") or {}).get("lastOffsetsOperation") or {}
        if last.get("requestId") == request_id and last.get("result") == "Succeeded":
            self.answered.append((started, arrived - started))
        else:
            self.failed.append(last)
        del self.probes[key]

    def _on_event(self, arrived: float, body: dict[str, Any]) -> None:
        key = (body["metadata"]["namespace"], body["metadata"]["name"])
        with self.lock:
            self._note(body)
            if key in self.probes:
                self._judge(key, arrived, body)
            else:
                self.early.setdefault(key, []).append((arrived, body))
                del self.early[key][:-4]

    def ask_list(self, namespace: str, name: str) -> None:
        key = (namespace, name)
        request_id = f"cold-{uuid.uuid4().hex[:8]}"
        patch = {"metadata": {"annotations": {ANNOTATION: "list", f"{GROUP}/request-id": request_id}}}
        with self.lock:
            self.early.pop(key, None)
        started = time.monotonic()
        patched = self.custom.patch_namespaced_custom_object(GROUP, VERSION, namespace, "kafkaconnectors", name, patch)
        with self.lock:
            self.probes[key] = (started, int(patched["metadata"]["resourceVersion"]), request_id)
            for arrived, body in self.early.pop(key, []):
                if key in self.probes:
                    self._judge(key, arrived, body)

    def ready_count(self) -> int:
        with self.lock:
            return len(self.ready)

    def stop(self) -> None:
        for watch in self.watches:
            watch.stop()


class Prober:
    """A ``list`` every PROBE_EVERY seconds, each on a resource of the next namespace, until stopped."""

    def __init__(self, fleet: Fleet, targets: list[tuple[str, str]], ready: Callable[[], bool]) -> None:
        self.fleet, self.targets, self.ready = fleet, targets, ready
        self.stopped = threading.Event()
        self.asked: list[float] = []
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _run(self) -> None:
        while not self.ready():  # the operator is up and working: its backlog has begun
            if self.stopped.wait(0.2):
                return
        for namespace, name in self.targets:
            if self.stopped.wait(PROBE_EVERY):
                return
            self.asked.append(time.monotonic())
            threading.Thread(target=self.fleet.ask_list, args=(namespace, name), daemon=True).start()

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join()


def probe_targets(resources: Resources, namespaces: list[str], phase: int) -> list[tuple[str, str]]:
    """One resource per namespace in turn, a different one in each phase and each round."""
    rounds = int(PHASE_TIMEOUT / PROBE_EVERY) // len(namespaces) + 1
    return [
        (ns, resources.namespaces[ns][(phase * 97 + r * 13 + 7) % len(resources.namespaces[ns])])
        for r in range(rounds)
        for ns in namespaces
    ]


def run_phase(
    name: str, namespaces: list[str], resources: Resources, kubeconfig: str, custom: Any, work: Path, phase: int
) -> dict[str, Any]:
    port = free_port()
    op = OperatorProcess(
        kubeconfig,
        namespaces[0],
        work / f"operator-{name}.log",
        extra_env={"CONNECT_OFFSETS_DRIFT_INTERVAL": f"{DRIFT_INTERVAL:g}", "POD_NAME": f"cold-{name}"},
        extra_args=[
            *(a for ns in namespaces[1:] for a in ("-n", ns)),
            "--leader-election",
            "--lease-namespace",
            namespaces[0],
            "--metrics-port",
            str(port),
            *shlex.split(os.environ.get("BENCH_OPERATOR_ARGS", "")),
        ],
    )
    fleet = Fleet(custom, namespaces)

    def working() -> bool:
        gauges = queue_gauges(port)
        return gauges is not None and gauges["adds"] > 0

    prober = Prober(fleet, probe_targets(resources, namespaces, phase), working)
    already_ready = fleet.ready_count()
    started = time.monotonic()
    op.start()
    assert op.process is not None
    pid = op.process.pid
    profiler = None
    if os.environ.get("BENCH_PYSPY"):
        output = work / f"pyspy-{name}.txt"
        command = [os.environ["BENCH_PYSPY"], "record", "-r", "100", "-d", "90", "--native", "-f", "raw"]
        profiler = subprocess.Popen(
            [*command, "-o", str(output), "--pid", str(pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        print(f"profiling the first 90 s into {output}", flush=True)
    prober.start()
    done_at: float | None = None
    peak_depth = peak_lag = 0.0
    gauges: dict[str, float] | None = None
    try:
        while time.monotonic() - started < PHASE_TIMEOUT:
            time.sleep(0.5)
            gauges = queue_gauges(port) or gauges
            if gauges is not None:
                peak_lag = max(peak_lag, gauges["loop_lag"])
            if phase == 0:
                if fleet.ready_count() == COUNT:
                    done_at = time.monotonic() - started
                    break
                continue
            if gauges is None:
                continue
            peak_depth = max(peak_depth, gauges["depth"])
            if gauges["adds"] >= COUNT and gauges["unchecked"] == 0:
                done_at = time.monotonic() - started
                break
        prober.stop()
        asked_during = len(prober.asked)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with fleet.lock:
                if len(fleet.answered) + len(fleet.failed) >= asked_during:
                    break
            time.sleep(0.2)
        cpu = cpu_seconds(pid)
        peak = proc_status(pid, "VmHWM")
        with fleet.lock:
            answered = list(fleet.answered)
            failed = list(fleet.failed)
        times = [seconds for _, seconds in answered]
        result = {
            "phase": name,
            "ready_before": already_ready,
            "done": done_at,
            "cpu": cpu,
            "peak": peak,
            "asked": asked_during,
            "answered": len(times),
            "failed": len(failed),
            "p50": pct(times, 50) if times else None,
            "p99": pct(times, 99) if times else None,
            "max": max(times, default=None),
            "peak_depth": peak_depth,
            "peak_loop_lag": peak_lag,
            "full_gcs": None if gauges is None else gauges["full_gcs"],
            "full_gc_seconds": None if gauges is None else round(gauges["full_gc_seconds"], 2),
            # (asked, seconds after the operator's start; took, seconds) of every list answered
            "list_times": sorted((round(asked - started, 1), round(took, 2)) for asked, took in answered),
        }
        print(result, flush=True)
        if failed:
            print(f"failed lists: {failed[:3]}", flush=True)
        return result
    finally:
        if profiler is not None:
            profiler.wait()
        fleet.stop()
        op.stop()


def report(results: list[dict[str, Any]], setup: dict[str, Any]) -> str:
    extra = os.environ.get("BENCH_OPERATOR_ARGS", "")
    lines = [
        "## Cold start: 20,000 KafkaConnectors on 20 ConnectClusters (issue 45)",
        "",
        f"`.venv/bin/python bench/bench_cold_start.py {MODE}` — {machine()}; load average at the end "
        f"{os.getloadavg()[0]:.1f}.",
        "",
        f"{COUNT:,} STOPPED FileStreamSource connectors in {len(LAYOUT)} namespaces of {LAYOUT[0][1]:,}, one "
        f"ConnectCluster each, on {setup['workers']} dedicated Connect workers (seeded config topics, "
        f"{PER_WORKER:,} connectors a worker); the operator with `--leader-election` holding every "
        f"cluster's Lease, drift interval {DRIFT_INTERVAL:g} s{f', `{extra}`' if extra else ''}. First start: "
        "no resource has a status or a finalizer; done when every one is Ready (watched). Restart: a new "
        "operator over the same, all Ready; done when every resource had its first check "
        "(`connect_offsets_unchecked_resources` 0 after the queue's adds reached the count). A `list` asked every "
        f"{PROBE_EVERY:g} s from the operator's first queued key (up, holding its Leases) until done, each on the "
        "next namespace.",
        "",
        "| Phase | Done after (s) | Target | Lists asked / answered / failed | List p50 / p99 / max (s) | "
        "Target p99 | CPU (s) | Peak RSS (MiB) |",
        "|---|---:|---:|---|---|---:|---:|---:|",
    ]
    for r in results:
        done = "not done" if r["done"] is None else f"{r['done']:.1f}"
        met = r["done"] is not None and r["done"] <= READY_TARGET
        lists = "-" if r["p50"] is None else f"{r['p50']:.2f} / {r['p99']:.2f} / {r['max']:.2f}"
        list_met = r["p99"] is not None and r["p99"] <= LIST_P99_TARGET and r["answered"] == r["asked"]
        lines.append(
            f"| {r['phase']} | {done} | ≤ {READY_TARGET:g}: {'met' if met else '**missed**'} | "
            f"{r['asked']} / {r['answered']} / {r['failed']} | {lists} | "
            f"≤ {LIST_P99_TARGET:g}: {'met' if list_met else '**missed**'} | {r['cpu']:.0f} | {r['peak']:.0f} |"
        )
    lines += [
        "",
        f"Set-up: resources created in {setup['created']:.0f} s; workers seeded and started in "
        f"{setup['worker_start']:.0f} s.",
    ]
    return "\n".join(lines)


def main() -> int:
    from kubernetes import client

    info, api = stack_api(32)
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    unique = uuid.uuid4().hex[:6]
    work = Path(os.environ.get("TMPDIR", "/tmp")) / f"bench-cold-{unique}"
    work.mkdir(parents=True)
    resources = Resources(custom, core, unique, work, layout=LAYOUT, per_worker=PER_WORKER, prefix="bench-cold")
    groups = resources.worker_groups(COUNT)
    sizes = [sum(dict(LAYOUT)[resources.letter(ns)] for ns in group) for group in groups]
    workers = Workers(COUNT, groups, sizes)
    results: list[dict[str, Any]] = []
    setup: dict[str, Any] = {"workers": len(workers)}
    try:
        setup["created"] = resources.ensure(COUNT, workers.urls())
        setup["worker_start"] = workers.start(resources)
        print(setup, flush=True)
        namespaces = resources.namespaces_for(COUNT)
        for phase, name in enumerate(("first start", "restart")):
            results.append(run_phase(name, namespaces, resources, info["kubeconfig"], custom, work, phase))
    finally:
        workers.stop()
        resources.cleanup()
    text = report(results, setup)
    print(text)
    if MODE == "full":
        write_section("cold_start", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
