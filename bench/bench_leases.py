"""Benchmark: what the Leases cost the API server, 200 ConnectClusters and two replicas (issue 44).

With ``--leader-election`` (the chart's default) a replica works on a ConnectCluster only while it
holds the cluster's Lease (``controller/leases.py``): one Lease per ConnectCluster, renewed by its
holder, and one label-selected LIST of the operator's Leases per replica per tick. What it shows,
nothing else changing, over a window of WINDOW seconds:

* the Lease requests of each replica by verb (``create``, ``update``, ``list``, ``delete``), counted
  by a proxy between that replica and the API server (bench/kube_proxy.py: one proxy per replica,
  so each count is exactly that replica's requests), per second;
* the writes the API server stored: MODIFIED events of a watch on the Leases' namespace (one per
  successful create or update, whoever sent it), per second, and the gaps between two renewals of
  one Lease;
* the expected figures, from the operator's own timings (``LeaseTimings``, the defaults: lease
  duration 15 s, renew deadline 10 s, retry period 2 s): a held Lease is renewed once it is
  ``renew_every`` old (max(retry period, renew deadline / 2) = 5 s), which a replica checks once per
  tick, and ticks come every retry period x U(1.0, 1.2), 2.0-2.4 s (plus the tick's own work). So
  ``clusters / renew_every`` (40/s at 200) bounds the writes; the renewal itself comes at the first
  tick at least 5 s after the last one: the third (6.0-7.2 s, 6.6 s on average, ``clusters / 6.6 s``,
  30/s at 200) when the ticks do no work, the second when their work (the LIST, the renewals through
  the Lease client's two threads) makes them longer than 2.5 s, so between those two. Lists: one per
  replica per tick, ``replicas / 2.2 s``;
* each replica's CPU over the window (the Leases and the idle ConnectCluster passes together), and
  whether any Lease changed hands in it (``leaseTransitions``: target 0).

Set-up on the real local stack: one namespace with CLUSTERS ConnectClusters, all naming the stack's
shared Connect worker (each is probed once at start and every 5 minutes: GETs only), no connectors;
the Leases in the same namespace. Two replicas as the chart runs them (``connect-offsets-operator -n
NS --leader-election --lease-namespace NS --metrics-port P``, ``$POD_NAME`` ``leases-a`` and
``leases-b``, drift interval 30 s), started together. Neither finds a Lease, so each creates the
ones it wants after one lease duration; the window starts once every Lease is held and two more
lease durations have passed.

Run: ``make bench BENCH=leases`` or ``.venv/bin/python bench/bench_leases.py [window_s] [mode]``;
window default 120 s (18 renewals of each Lease); mode ``full`` (default: 200 ConnectClusters, writes its section of
bench/README.md) or ``small`` (20 ConnectClusters, printed only).
"""

from __future__ import annotations

import datetime
import itertools
import math
import os
import statistics
import sys
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.conftest import OperatorProcess, delete_namespace, wait_for  # noqa: E402
from tests.integration.support import create_cluster, free_port  # noqa: E402

from bench.kube_proxy import KubeProxy  # noqa: E402
from bench.report import cpu_seconds, machine, stack_api, write_section  # noqa: E402
from connect_offsets.clients.leases import CLUSTER_ANNOTATION, LEASE_LABEL  # noqa: E402
from connect_offsets.controller import LeaseTimings  # noqa: E402

MODES = {"full": 200, "small": 20}
REPLICAS = ("leases-a", "leases-b")
#: The operator's Lease prefix (``--lease-prefix``'s default): the Leases' label value.
PREFIX = "connect-offsets"
#: The timings every replica runs with: the operator's defaults (the chart's).
TIMINGS = LeaseTimings()
#: A replica's mean tick: the retry period x U(1.0, 1.2) (``LeaseKeeper.run``), its work left out.
MEAN_TICK = TIMINGS.retry_period * 1.1
INTERVAL = 30.0


def renewal_ticks(timings: LeaseTimings = TIMINGS) -> tuple[int, int]:
    """How many ticks after a renewal the next comes, at the shortest and longest tick: the first
    tick at which the Lease is ``renew_every`` old."""
    shortest, longest = timings.retry_period, timings.retry_period * 1.2
    return math.ceil(timings.renew_every / longest), math.ceil(timings.renew_every / shortest)


def expected_renewal_gap(timings: LeaseTimings = TIMINGS) -> tuple[float, float, float]:
    """(shortest, mean, longest) seconds between two renewals of one Lease, ticks' own work left out."""
    few, many = renewal_ticks(timings)
    shortest = few * timings.retry_period
    longest = many * timings.retry_period * 1.2
    ticks = math.ceil(timings.renew_every / MEAN_TICK)
    return shortest, ticks * MEAN_TICK, longest


@dataclass(frozen=True)
class LeaseRow:
    """One Lease as read: who holds it (the ``$POD_NAME`` part of the identity), its term, and its
    timestamps (epoch seconds, written by the holder from its clock: the same machine here)."""

    name: str
    cluster: str
    holder: str
    identity: str
    transitions: int
    renewed: float | None
    acquired: float | None


def _epoch(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, datetime.datetime):
        return value.timestamp()
    return datetime.datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()


def lease_rows(coordination: Any, namespace: str) -> dict[str, LeaseRow]:
    """The operator's Leases in ``namespace``, by name."""
    answer = coordination.list_namespaced_lease(namespace, label_selector=f"{LEASE_LABEL}={PREFIX}")
    rows = {}
    for lease in answer.items:
        spec = lease.spec
        identity = str(spec.holder_identity or "")
        rows[lease.metadata.name] = LeaseRow(
            name=str(lease.metadata.name),
            cluster=str((lease.metadata.annotations or {}).get(CLUSTER_ANNOTATION, "")),
            holder=identity.rsplit("_", 1)[0],
            identity=identity,
            transitions=int(spec.lease_transitions or 0),
            renewed=_epoch(spec.renew_time),
            acquired=_epoch(spec.acquire_time),
        )
    return rows


@dataclass
class LeaseWatch:
    """Every Lease event of one namespace from now on, stamped on arrival (a thread of its own)."""

    coordination: Any
    namespace: str
    counts: Counter[str] = field(default_factory=Counter)
    #: Lease name -> monotonic arrival times of its MODIFIED events.
    modified: dict[str, list[float]] = field(default_factory=dict)
    #: The last error that ended the watch, and how often it was started again after one (the
    #: events between are not counted).
    error: str | None = None
    restarts: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        answer = self.coordination.list_namespaced_lease(self.namespace, limit=1)
        self._rv = str(answer.metadata.resource_version)
        self._thread = threading.Thread(target=self._run, name="lease-watch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from kubernetes import watch

        while not self._stop.is_set():
            stream = watch.Watch()  # type: ignore[no-untyped-call]
            try:
                for event in stream.stream(  # type: ignore[no-untyped-call]
                    self.coordination.list_namespaced_lease,
                    self.namespace,
                    resource_version=self._rv,
                    timeout_seconds=30,
                ):
                    arrived = time.monotonic()
                    lease = event["object"]
                    self._rv = str(lease.metadata.resource_version)
                    with self._lock:
                        self.counts[str(event["type"])] += 1
                        if event["type"] == "MODIFIED":
                            self.modified.setdefault(str(lease.metadata.name), []).append(arrived)
                    if self._stop.is_set():
                        stream.stop()  # type: ignore[no-untyped-call]
            except Exception as error:  # the API server restarted, or the version expired: watch on
                self.error = f"{type(error).__name__}: {error}"  # from now, and say events were missed
                self.restarts += 1
                time.sleep(1)
                try:
                    answer = self.coordination.list_namespaced_lease(self.namespace, limit=1)
                    self._rv = str(answer.metadata.resource_version)
                except Exception:  # still down: the next attempt lists again
                    continue

    def snapshot(self) -> tuple[Counter[str], dict[str, list[float]]]:
        with self._lock:
            return Counter(self.counts), {name: list(times) for name, times in self.modified.items()}

    def stop(self) -> None:
        self._stop.set()


def renewal_gaps(modified: dict[str, list[float]], start: float, end: float) -> list[float]:
    """Seconds between consecutive MODIFIED events of each Lease, both inside [start, end]."""
    gaps: list[float] = []
    for times in modified.values():
        inside = [t for t in times if start <= t <= end]
        gaps.extend(b - a for a, b in itertools.pairwise(inside))
    return gaps


def lease_calls(counts: Counter[str]) -> Counter[str]:
    """The Lease requests among a proxy's counts, by verb (``update``, ``list``, ...)."""
    return Counter({kind.split()[0]: n for kind, n in counts.items() if kind.endswith(" leases")})


@dataclass
class Replica:
    name: str
    port: int
    proxy: KubeProxy
    op: OperatorProcess
    pid: int = 0


def main() -> int:
    from kubernetes import client

    window = float(sys.argv[1]) if len(sys.argv) > 1 else 120.0
    mode = sys.argv[2] if len(sys.argv) > 2 else "full"
    if mode not in MODES:
        sys.exit(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    clusters = MODES[mode]
    began = time.monotonic()
    info, api = stack_api(16)
    core, custom, coordination = client.CoreV1Api(api), client.CustomObjectsApi(api), client.CoordinationV1Api(api)
    unique = uuid.uuid4().hex[:6]
    namespace = f"bench-leases-{unique}"
    work = Path(os.environ.get("TMPDIR", "/tmp")) / namespace
    work.mkdir(parents=True)
    replicas: list[Replica] = []
    result: dict[str, Any] = {"clusters": clusters, "window": window, "mode": mode}
    watcher = LeaseWatch(coordination, namespace)
    try:
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
        for index in range(clusters):
            create_cluster(custom, namespace, info["connect_url"], name=f"c{index:03d}")
        for name in REPLICAS:
            proxy = KubeProxy.for_kubeconfig(info["kubeconfig"])
            proxy.start()
            kubeconfig = str(proxy.write_kubeconfig(work / f"{name}-kubeconfig.json"))
            port = free_port()
            op = OperatorProcess(
                kubeconfig,
                namespace,
                work / f"{name}.log",
                extra_env={"POD_NAME": name, "CONNECT_OFFSETS_DRIFT_INTERVAL": f"{INTERVAL:g}"},
                extra_args=["--leader-election", "--lease-namespace", namespace, "--metrics-port", str(port)],
            )
            replicas.append(Replica(name, port, proxy, op))
        started = time.monotonic()
        for replica in replicas:
            replica.op.start()
            assert replica.op.process is not None
            replica.pid = replica.op.process.pid
        wait_for(
            f"{clusters} Leases held",
            lambda: sum(bool(r.holder) for r in lease_rows(coordination, namespace).values()) == clusters,
            timeout=300,
            interval=0.5,
        )
        result["held_after"] = time.monotonic() - started
        time.sleep(2 * TIMINGS.duration)  # the start-up (first passes, probes) is over
        watcher.start()
        time.sleep(2)  # the watch is established
        before_rows = lease_rows(coordination, namespace)
        before_calls = {r.name: r.proxy.snapshot() for r in replicas}
        before_cpu = {r.name: cpu_seconds(r.pid) for r in replicas}
        window_start = time.monotonic()
        time.sleep(window)
        window_end = time.monotonic()
        elapsed = window_end - window_start
        after_calls = {r.name: r.proxy.snapshot() for r in replicas}
        cpu = {r.name: (cpu_seconds(r.pid) - before_cpu[r.name]) / elapsed * 100 for r in replicas}
        after_rows = lease_rows(coordination, namespace)
        events, modified = watcher.snapshot()
        inside = sum(1 for times in modified.values() for t in times if window_start <= t <= window_end)
        per_replica = {}
        for r in replicas:
            delta = after_calls[r.name] - before_calls[r.name]
            leases = lease_calls(delta)
            per_replica[r.name] = {
                "held": sum(1 for row in after_rows.values() if row.holder == r.name),
                "leases": {verb: n / elapsed for verb, n in leases.items()},
                "other": sum(n for kind, n in delta.items() if not kind.endswith(" leases")) / elapsed,
                "other_kinds": {k: n for k, n in delta.items() if not k.endswith(" leases")},
                "creates": lease_calls(after_calls[r.name]).get("create", 0),
                "cpu": cpu[r.name],
            }
        result.update(
            elapsed=elapsed,
            replicas=per_replica,
            modified=inside / elapsed,
            events=dict(events),
            watch_error=watcher.error,
            watch_restarts=watcher.restarts,
            gaps=renewal_gaps(modified, window_start, window_end),
            transitions=sum(r.transitions for r in after_rows.values())
            - sum(r.transitions for r in before_rows.values()),
            moved=sum(
                1 for name, row in after_rows.items() if name in before_rows and before_rows[name].holder != row.holder
            ),
        )
        print({k: v for k, v in result.items() if k != "gaps"}, flush=True)
    finally:
        watcher.stop()
        for replica in replicas:
            replica.op.stop()
        for replica in replicas:
            replica.proxy.stop()
        try:
            delete_namespace(core, custom, namespace)
        except client.ApiException as error:
            print(f"clean-up of {namespace}: {error.status} {error.reason}", flush=True)
    result["duration"] = time.monotonic() - began
    report(result)
    return 0


def report(result: dict[str, Any]) -> None:
    clusters, elapsed = result["clusters"], result["elapsed"]
    replicas: dict[str, dict[str, Any]] = result["replicas"]
    shortest, mean_gap, longest_gap = expected_renewal_gap()
    bound = clusters / TIMINGS.renew_every
    expected = clusters / mean_gap
    lists_expected = len(replicas) / MEAN_TICK
    rows = []
    totals: Counter[str] = Counter()
    for name, r in replicas.items():
        leases: dict[str, float] = r["leases"]
        totals.update(leases)
        rows.append(
            f"| {name} | {r['held']} | {leases.get('update', 0):.2f} | {leases.get('list', 0):.2f} "
            f"| {leases.get('create', 0) + leases.get('delete', 0):.2f} | {r['creates']} | {r['other']:.2f} "
            f"| {r['cpu']:.1f} % |"
        )
    held = sum(r["held"] for r in replicas.values())
    creates = sum(r["creates"] for r in replicas.values())
    other = sum(r["other"] for r in replicas.values())
    rows.append(
        f"| both | {held} | {totals['update']:.2f} | {totals['list']:.2f} "
        f"| {totals['create'] + totals['delete']:.2f} | {creates} | {other:.2f} "
        f"| {sum(r['cpu'] for r in replicas.values()):.1f} % |"
    )
    gaps: list[float] = result["gaps"]
    spread = (
        f"median {statistics.median(gaps):.2f} s, min {min(gaps):.2f} s, max {max(gaps):.2f} s ({len(gaps):,} gaps): "
        f"{clusters} / {statistics.mean(gaps):.2f} s (their mean) = **{clusters / statistics.mean(gaps):.1f}/s**"
        if gaps
        else "none seen"
    )
    kinds = Counter[str]()
    for r in replicas.values():
        kinds.update(r["other_kinds"])
    other_kinds = ", ".join(f"{k} {n / elapsed:.2f}" for k, n in kinds.most_common()) or "none"
    few, many = renewal_ticks()
    longest = TIMINGS.retry_period * 1.2
    ticks_no_work = few if few == many else f"{few}-{many}"
    holder_ticks = [1 / r["leases"]["list"] for r in replicas.values() if r["held"] and r["leases"].get("list")]
    holder_tick = ", ".join(f"{tick:.2f} s (1 / its LIST rate)" for tick in holder_ticks) or "—"
    holder_expected = (
        "; ".join(
            f"every {math.ceil(TIMINGS.renew_every / tick)} ticks, "
            f"{clusters} / {math.ceil(TIMINGS.renew_every / tick) * tick:.2f} s = "
            f"{clusters / (math.ceil(TIMINGS.renew_every / tick) * tick):.1f}/s"
            for tick in holder_ticks
        )
        or "—"
    )
    watch_note = (
        f" (the watch was interrupted {result['watch_restarts']} times, events missed: {result['watch_error']})"
        if result.get("watch_error")
        else ""
    )
    body = f"""
## Lease cost: {clusters:,} ConnectClusters, two replicas (issue 44)

`.venv/bin/python bench/bench_leases.py {result["window"]:g} {result["mode"]}` — {machine()}; load average at the
end {os.getloadavg()[0]:.1f}; {result["duration"] / 60:.0f} min in all.

Set-up: one namespace with {clusters:,} ConnectClusters naming the stack's shared worker, no connectors;
two replicas (`--leader-election`, the default timings: lease duration {TIMINGS.duration:g} s, renew
deadline {TIMINGS.renew_deadline:g} s, retry period {TIMINGS.retry_period:g} s, so renew_every
{TIMINGS.renew_every:g} s), started together; every Lease held {result["held_after"]:.0f} s after
the start (a replica works under a Lease it made only one lease duration after making it). Window: {elapsed:.0f} s,
from two lease durations after that. Requests: each replica's, counted by a proxy of its own, per
second; held: Leases it holds at the window's end; creates since start: its Lease POSTs from its
start (some answered 409: the other replica was first). CPU: % of one core over the window (the
Leases and the idle ConnectCluster passes together).

| Replica | Leases held | Lease updates/s | Lease lists/s | Lease creates + deletes/s \
| Creates since start | Other API calls/s | CPU |
|---|---:|---:|---:|---:|---:|---:|---:|
{chr(10).join(rows)}

- Lease writes stored (MODIFIED events of a watch on the namespace): {result["modified"]:.1f}/s over the
  window{watch_note}; the replicas' updates {totals["update"]:.1f}/s. Renewals come in bursts (the Leases a replica
  acquired in one tick are renewed together), so a window counts whole bursts: the rate is better read
  from the gaps between two renewals of one Lease: {spread}.
- Bound: clusters / renew_every = {clusters} / {TIMINGS.renew_every:g} s = **{bound:.0f}/s** (the figure in
  `controller/leases.py`). A Lease is renewed at the holder's first tick at which it is
  {TIMINGS.renew_every:g} s old, and ticks come every retry period x U(1.0, 1.2) =
  {TIMINGS.retry_period:g}-{longest:g} s plus the tick's own work (the LIST, and the renewals through the
  Lease client's two threads). With no work that is every {ticks_no_work} ticks,
  {shortest:.1f}-{longest_gap:.1f} s apart, {mean_gap:.1f} s on average: clusters / {mean_gap:.1f} s =
  {expected:.1f}/s. With the holder's measured mean tick, {holder_tick}: {holder_expected} (ticks that vary
  around 2.5 s mix renewals every second and every third tick).
- Lease lists: one label-selected LIST per replica per tick: expected replicas / {MEAN_TICK:.1f} s =
  {lists_expected:.2f}/s, measured {totals["list"]:.2f}/s (each returns every Lease of the prefix: {clusters:,}
  objects).
- Leases that changed hands in the window: {result["moved"]} (leaseTransitions +{result["transitions"]}; target 0).
- Other API calls of both replicas in the window: {other_kinds}.
"""
    if result["mode"] == "full":
        write_section("leases", body)
    else:
        print("(small mode: a smoke run, bench/README.md left as it is)")
    print(body)


if __name__ == "__main__":
    sys.exit(main())
