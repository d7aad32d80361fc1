"""Benchmark: two shards at 10,000 KafkaConnectors under Leases, and one replica's fail-over (issues 35 and 44).

What it shows, with nothing changing on the resources (drift interval 30 s):

* each resource is reconciled by exactly one replica: the holder of its ConnectCluster's Lease.
  Shards own ConnectClusters (and everything bound to them) by rendezvous hashing
  (``controller/sharding.py``, ``owner_of``); within a shard, a replica works on a cluster only while
  it holds the cluster's Lease (``controller/leases.py``), so the two replicas of a shard share its
  clusters between them, each cluster's Lease held by one of them (whichever took it first: nothing
  balances them). The benchmark reads who holds each Lease (``holderIdentity``, whose first part is
  the replica's ``$POD_NAME``) and computes how many resources each replica's Leases cover, then
  reads every replica's ``/metrics`` at both ends of a window of whole drift intervals: the
  increment of ``connect_offsets_resource_checks_total{kind="KafkaConnector"}`` (one per resource per
  check) must be (resources of the clusters it holds) x (intervals in the window), within the
  window's edges, and 0 for a replica that holds nothing; ``connect_offsets_connectors{kind=
  "KafkaConnector"}`` (the distinct resources a replica has reconciled, over all states) must be
  exactly what its Leases cover: a replica that had reconciled a resource of a cluster it does not
  hold would count more. No Lease may change hands in the window (``leaseTransitions``). The
  operator exports nothing per resource; these counts are the evidence;
* fail-over: the replica of shard 0 that holds the most of shard 0's Leases is SIGKILLed. Reported:
  when each of its Leases was taken over by its sibling (the sibling's ``acquireTime``), counted
  from the kill and from the dead holder's last renewal (its ``renewTime``, read right after the
  kill: both stamps come from the replicas' clocks, the same machine's here); targets from the
  operator's timings (``takeover_bounds``): never before one lease duration after the last renewal
  (a replica waits that long, on its own clock, after it last saw the record change), and at most
  the duration plus two of the survivor's longest ticks after it; then when the sibling first
  reconciled one of the dead replica's resources and when it had reconciled every resource of
  shard 0, and the first snapshot listing of shard 0's worker answered after the first take-over
  (the dead replica listed it no more). Meanwhile shard 1's checks per resource per interval over
  the same window length from the kill, beside its steady value (unaffected: at least 90 % of it),
  and shard 1's Leases stay where they were. A last window, one drift interval after the last
  take-over, shows every resource back to one check per interval, by the new holders;
* each replica's CPU (% of one core, /proc/<pid>/stat) per window, its peak RSS (VmHWM, start-up
  included) and steady RSS (largest VmRSS sampled every 2 s in the steady window);
* the Lease writes the API server stored in the steady window (MODIFIED events of a watch on the
  Leases' namespace; bench/bench_leases.py explains the expected rate);
* the operator's writes to Connect (PUT/POST/DELETE in the workers' request logs) over the whole
  run, fail-over included: 0, the seeding matched their config.

Set-up on the real local stack: 5 namespaces of 10 ConnectClusters each (50 clusters: the hash
spreads clusters, so both shards need many), the resources spread evenly over them; STOPPED
FileStreamSource KafkaConnectors created with no operator running. One dedicated Connect worker per
shard, which every ConnectCluster of that shard names (one worker holding all 10,000 took 55-86 s
to answer each replica's snapshot listing, longer than the drift interval, so that run measured
Connect), each (tests/integration/connect_worker.py, ``-Xmx2g`` above 5,000 connectors) seeded before
it starts with its connectors exactly as the operator would create them (``desired_config``, target
state STOPPED), as bench/bench_steady_state.py does, so the operators have nothing to write.
Replicas as the chart runs them (``connect-offsets-operator -n NS1 ... -n NS5 --shard-count 2
--shard-index I --leader-election --lease-namespace L --metrics-port PORT``, ``$POD_NAME``
``shardI-a`` / ``shardI-b``, the default Lease timings), two per shard, all four started together
(a StatefulSet with ``Parallel`` pod management); the Leases in a namespace of their own, ``L``.
The steady window starts once every Lease is held, every resource is Ready (ConnectorStopped), every
replica's CPU has settled, and one more drift interval has passed.

Run: ``make bench BENCH=shards`` or ``.venv/bin/python bench/bench_shards.py [window_s] [mode]``;
window default 120 s (4 drift intervals; the fail-over window has the same length); mode ``full``
(default: 10,000 resources, writes its section of bench/README.md; wants the machine to itself) or
``small`` (400 resources, a smoke run: printed only).
"""

from __future__ import annotations

import contextlib
import datetime
import os
import re
import statistics
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.conftest import OperatorProcess, delete_namespace, wait_for  # noqa: E402
from tests.integration.connect_worker import DedicatedWorker  # noqa: E402
from tests.integration.support import (  # noqa: E402
    GROUP,
    VERSION,
    create_cluster,
    file_source_spec,
    free_port,
)

# bench_steady_state reads its own command line when it is imported: it is shown none.
_ARGV, sys.argv = sys.argv, sys.argv[:1]
from bench.bench_steady_state import (  # noqa: E402
    CHECKS_METRIC,
    in_parallel,
    proc_status,
    ready_count,
    rest_calls,
    settle,
)

sys.argv = _ARGV

from bench.bench_leases import PREFIX, TIMINGS, LeaseRow, LeaseWatch, expected_renewal_gap, lease_rows  # noqa: E402
from bench.report import cpu_seconds, machine, stack_api, write_section  # noqa: E402
from connect_offsets.controller import LeaseTimings, lease_name, owner_of  # noqa: E402
from connect_offsets.models.crds import KafkaConnectorResource  # noqa: E402
from connect_offsets.planning.targets import desired_config  # noqa: E402

WINDOW = float(sys.argv[1]) if len(sys.argv) > 1 else 120.0
MODE = sys.argv[2] if len(sys.argv) > 2 else "full"
MODES = {"full": 10000, "small": 400}
if MODE not in MODES:
    sys.exit(f"mode must be one of {', '.join(MODES)}, not {MODE!r}")
COUNT = MODES[MODE]
NAMESPACES, CLUSTERS_PER_NAMESPACE = 5, 10
#: The drift interval (CONNECT_OFFSETS_DRIFT_INTERVAL) of every replica.
INTERVAL = 30.0
SHARDS = 2
#: The replicas of each shard, by name: their ``$POD_NAME`` is ``shard<I>-<name>``.
SIBLINGS = ("a", "b")
CONNECTORS_METRIC = "connect_offsets_connectors"
#: Shard 1's checks per resource per interval during the fail-over, as a share of its steady value.
UNAFFECTED = 0.9
TAKEOVER_TIMEOUT = 1800.0
#: A tick's own work (the LIST, the renewals through the Lease client's two threads) lengthens it
#: beyond the sleep; the upper bound of a take-over allows this much of it.
TICK_WORK = 0.5


def takeover_bounds(timings: LeaseTimings = TIMINGS) -> tuple[float, float]:
    """Seconds from a dead holder's last renewal (the ``renewTime`` it wrote) to the take-over of
    that Lease by a replica that wants it, ticks' own work left out.

    The survivor ticks every retry period x U(1.0, 1.2) (2.0-2.4 s). It first sees the last record
    at its first tick after the write (at most one longest tick later), and takes the Lease over at
    its first tick once it has seen that record unchanged for the record's duration (so within one
    longest tick after the duration). Earliest: the duration; latest: the duration + two longest
    ticks, 15 + 2.4 + 2.4 = 19.8 s with the defaults. From the kill, the last renewal was at most one
    renewal gap earlier (``expected_renewal_gap``: every third tick, at most 7.2 s), so the take-over
    comes 15 - 7.2 = 7.8 s to 19.8 s after the kill."""
    longest_tick = timings.retry_period * 1.2
    return timings.duration, timings.duration + 2 * longest_tick


@dataclass(frozen=True)
class Layout:
    """Namespaces, ConnectClusters and KafkaConnectors of one run, and which shard owns what."""

    unique: str
    count: int
    work: Path

    @property
    def namespaces(self) -> list[str]:
        return [f"bench-shards-{n}-{self.unique}" for n in range(NAMESPACES)]

    @property
    def leases(self) -> str:
        """The namespace of every replica's Leases (no resource of the benchmark lives there)."""
        return f"bench-shards-leases-{self.unique}"

    @property
    def clusters(self) -> list[tuple[str, str]]:
        return [(ns, f"c{c:02d}") for ns in self.namespaces for c in range(CLUSTERS_PER_NAMESPACE)]

    @property
    def per_cluster(self) -> int:
        return self.count // len(self.clusters)

    @property
    def connectors(self) -> list[tuple[str, str, str]]:
        """(namespace, cluster, name), the same number on every cluster."""
        clusters = self.clusters
        if self.count % len(clusters):
            raise ValueError(f"{self.count} resources do not spread evenly over {len(clusters)} clusters")
        return [
            (ns, cluster, f"sh-{self.unique}-{n}{cluster}-{i:04d}")
            for n, ns in enumerate(self.namespaces)
            for cluster in (c for c_ns, c in clusters if c_ns == ns)
            for i in range(self.per_cluster)
        ]

    def body(self, namespace: str, cluster: str, name: str) -> dict[str, Any]:
        return {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "KafkaConnector",
            "metadata": {"name": name, "namespace": namespace, "labels": {f"{GROUP}/cluster": cluster}},
            "spec": file_source_spec(
                self.work / f"{name}.txt", f"sh-{self.unique}", f"{name}-offsets", state="stopped"
            ),
        }

    @staticmethod
    def shard_of(namespace: str, cluster: str) -> int:
        return owner_of((namespace, cluster), SHARDS)

    def owned(self) -> dict[int, tuple[int, int]]:
        """Shard -> (its ConnectClusters, its KafkaConnectors)."""
        clusters = [self.shard_of(ns, c) for ns, c in self.clusters]
        connectors = [self.shard_of(ns, c) for ns, c, _ in self.connectors]
        return {i: (clusters.count(i), connectors.count(i)) for i in range(SHARDS)}

    def lease_of(self, cluster: tuple[str, str]) -> str:
        return lease_name(PREFIX, cluster)

    def connect_configs(self, shard: int) -> dict[str, dict[str, str]]:
        """The connectors of ``shard``'s ConnectClusters, each config exactly as the operator would
        create it (``desired_config``)."""
        return {
            name: desired_config(KafkaConnectorResource.model_validate(self.body(ns, cluster, name)))
            for ns, cluster, name in self.connectors
            if self.shard_of(ns, cluster) == shard
        }


@dataclass(frozen=True)
class Holders:
    """Who holds each ConnectCluster's Lease (the holder's ``$POD_NAME``; "" when nobody)."""

    by_cluster: dict[tuple[str, str], str]
    rows: dict[str, LeaseRow]

    @classmethod
    def read(cls, coordination: Any, layout: Layout) -> Holders:
        rows = lease_rows(coordination, layout.leases)
        by_cluster = {}
        for cluster in layout.clusters:
            row = rows.get(layout.lease_of(cluster))
            by_cluster[cluster] = "" if row is None else row.holder
        return cls(by_cluster, rows)

    def clusters_of(self, pod: str) -> list[tuple[str, str]]:
        return [cluster for cluster, holder in self.by_cluster.items() if holder == pod]

    def resources_of(self, pod: str, layout: Layout) -> int:
        return len(self.clusters_of(pod)) * layout.per_cluster

    def transitions(self) -> int:
        return sum(row.transitions for row in self.rows.values())

    def all_held(self, layout: Layout) -> bool:
        """Every cluster's Lease held, by a replica of the cluster's shard."""
        return all(
            holder.startswith(f"shard{layout.shard_of(*cluster)}-") for cluster, holder in self.by_cluster.items()
        )


@dataclass(frozen=True)
class Scrape:
    """One replica's ``/metrics``, KafkaConnectors only."""

    checks: float  # connect_offsets_resource_checks_total: passes, work found or not
    reconciled: float  # connect_offsets_connectors over all states: distinct resources reconciled


def scrape(port: int) -> Scrape | None:
    try:
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    except httpx.HTTPError:
        return None

    def total(metric: str) -> float:
        found = re.findall(rf'^{metric}\{{[^}}]*kind="KafkaConnector"[^}}]*\}} (\S+)$', text, re.M)
        return sum(float(v) for v in found)  # a counter with no child yet: 0

    return Scrape(total(CHECKS_METRIC), total(CONNECTORS_METRIC))


def pod_name(shard: int, name: str) -> str:
    """A replica's ``$POD_NAME``: the first part of its Lease identity."""
    return f"shard{shard}-{name}"


@dataclass
class Replica:
    shard: int
    name: str  # a | b
    port: int
    op: OperatorProcess
    pid: int = 0
    peak: float | None = None  # VmHWM, read before the process ends

    @property
    def label(self) -> str:
        return f"shard {self.shard} {self.name}"

    @property
    def pod(self) -> str:
        return pod_name(self.shard, self.name)

    def start(self) -> None:
        self.op.start()
        assert self.op.process is not None
        self.pid = self.op.process.pid

    def scrape(self) -> Scrape | None:
        return scrape(self.port)

    def record_peak(self) -> None:
        with contextlib.suppress(OSError, RuntimeError):
            self.peak = proc_status(self.pid, "VmHWM")

    def stop(self, kill: bool = False) -> None:
        if self.op.process is not None:
            self.record_peak()
        if kill:
            self.op.kill()
        else:
            self.op.stop()


def replicas_for(layout: Layout, kubeconfig: str) -> list[Replica]:
    namespaces = layout.namespaces
    replicas = []
    for shard in range(SHARDS):
        for name in SIBLINGS:
            port = free_port()
            args = [
                *(a for ns in namespaces[1:] for a in ("-n", ns)),
                *("--shard-count", str(SHARDS), "--shard-index", str(shard)),
                *("--leader-election", "--lease-namespace", layout.leases, "--metrics-port", str(port)),
            ]
            op = OperatorProcess(
                kubeconfig,
                namespaces[0],
                layout.work / f"shard-{shard}-{name}.log",
                extra_env={"CONNECT_OFFSETS_DRIFT_INTERVAL": f"{INTERVAL:g}", "POD_NAME": pod_name(shard, name)},
                extra_args=args,
            )
            replicas.append(Replica(shard, name, port, op))
    return replicas


def listings(log: Path, start: int, end: int) -> list[float]:
    """Seconds Connect took for each of the operator's snapshot listings (``GET /connectors?expand=...``)
    between two byte offsets of the worker's request log (its last field: the request's milliseconds)."""
    pattern = re.compile(
        r'"GET /connectors\?expand=\S+ HTTP/[\d.]+" 200 \S+ "[^"]*" "connect-offsets-operator[^"]*" (\d+)'
    )
    with log.open("rb") as handle:
        handle.seek(start)
        text = handle.read(end - start).decode(errors="replace")
    return [int(found.group(1)) / 1000 for found in pattern.finditer(text)]


@dataclass
class Window:
    seconds: float
    checks: dict[str, float]  # replica -> increment of its checks counter
    reconciled: dict[str, float]  # replica -> distinct resources reconciled, at the end
    cpu: dict[str, float]  # replica -> % of one core
    rss: dict[str, float]  # replica -> largest VmRSS sampled
    #: Who held each Lease at both ends, and the Lease writes stored in between (MODIFIED events).
    holders_before: Holders | None = None
    holders_after: Holders | None = None
    lease_writes: int = 0

    def per_interval(self, label: str, owned: int) -> float:
        """Checks per owned resource per drift interval."""
        return self.checks[label] / (owned * self.seconds / INTERVAL) if owned else 0.0

    def moved(self) -> int:
        """Leases whose holder changed between the window's ends."""
        if self.holders_before is None or self.holders_after is None:
            return 0
        before, after = self.holders_before.by_cluster, self.holders_after.by_cluster
        return sum(1 for cluster, holder in after.items() if before.get(cluster) != holder)


def measure(
    replicas: list[Replica],
    seconds: float,
    begin: Callable[[], None] | None = None,
    tick: float = 2.0,
    on_tick: Callable[[float], None] | None = None,
    leases: tuple[Any, Layout, LeaseWatch] | None = None,
) -> Window:
    """Every replica's counters and CPU at both ends of ``seconds``; ``begin`` runs once the first
    ends are read, and the window starts when it returns. ``leases``: (the coordination API, the
    layout, the watch) to read the Leases' holders at both ends and count the writes between."""
    holders_before = None if leases is None else Holders.read(leases[0], leases[1])
    before = {r.label: r.scrape() for r in replicas}
    cpu_before = {r.label: cpu_seconds(r.pid) for r in replicas}
    if begin is not None:
        begin()
    started = time.monotonic()
    rss = dict.fromkeys(before, 0.0)
    while time.monotonic() - started < seconds:
        for r in replicas:
            rss[r.label] = max(rss[r.label], proc_status(r.pid, "VmRSS"))
        if on_tick is not None:
            on_tick(time.monotonic())
        time.sleep(tick)
    ended = time.monotonic()
    elapsed = ended - started
    after = {r.label: r.scrape() for r in replicas}
    cpu = {r.label: (cpu_seconds(r.pid) - cpu_before[r.label]) / elapsed * 100 for r in replicas}
    checks, reconciled = {}, {}
    for label in before:
        first, last = before[label], after[label]
        if first is None or last is None:
            raise RuntimeError(f"{label}: /metrics did not answer")
        checks[label], reconciled[label] = last.checks - first.checks, last.reconciled
    window = Window(elapsed, checks, reconciled, cpu, rss)
    if leases is not None:
        coordination, layout, watch = leases
        window.holders_before, window.holders_after = holders_before, Holders.read(coordination, layout)
        _, modified = watch.snapshot()
        window.lease_writes = sum(1 for times in modified.values() for t in times if started <= t <= ended)
    return window


_LOGGED_AT = re.compile(rb"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]", re.MULTILINE)


def _logged_at(line: bytes) -> float | None:
    """Epoch seconds of a log line's ``[YYYY-mm-dd HH:MM:SS,mmm]`` prefix (log4j's, UTC)."""
    found = _LOGGED_AT.match(line)
    if found is None:
        return None
    stamp = datetime.datetime.strptime(found.group(1).decode(), "%Y-%m-%d %H:%M:%S,%f")
    return stamp.replace(tzinfo=datetime.UTC).timestamp()


def timed_listings(log: Path, start: int) -> list[tuple[float, float]]:
    """(sent, answered) epoch seconds of each snapshot listing in the worker's request log from
    byte ``start``: log4j stamps the line when the answer is done, and its last field is the
    request's milliseconds."""
    pattern = re.compile(
        rb'"GET /connectors\?expand=\S+ HTTP/[\d.]+" 200 \S+ "[^"]*" "connect-offsets-operator[^"]*" (\d+)'
    )
    with log.open("rb") as handle:
        handle.seek(start)
        lines = handle.read().splitlines()
    timed = []
    for line in lines:
        found, at = pattern.search(line), _logged_at(line)
        if found is not None and at is not None:
            timed.append((at - int(found.group(1)) / 1000, at))
    return timed


def claims(custom: Any, layout: Layout) -> Counter[str]:
    """``status.claimedBy`` (``identity/term`` of the Lease term whose pass last wrote the
    resource's status, issue 44's fencing) of every KafkaConnector, counted by ``$POD_NAME/term``."""
    found: Counter[str] = Counter()
    for namespace in layout.namespaces:
        for item in custom.list_namespaced_custom_object(GROUP, VERSION, namespace, "kafkaconnectors")["items"]:
            claim = str((item.get("status") or {}).get("claimedBy") or "")
            identity, _, term = claim.rpartition("/")
            found[f"{identity.rsplit('_', 1)[0]}/{term}" if claim else "none"] += 1
    return found


def fail_over(
    custom: Any,
    coordination: Any,
    layout: Layout,
    replicas: dict[str, Replica],
    owned: dict[int, int],
    worker_log: Path,
    watch: LeaseWatch,
) -> dict[str, Any]:
    """SIGKILL the replica of shard 0 that holds the most of its Leases; when its sibling takes
    each of them over (from the Leases' own stamps), when it has reconciled all of shard 0; shard 1
    meanwhile."""
    holders = Holders.read(coordination, layout)
    shard_0 = [r for r in replicas.values() if r.shard == 0]
    killed = max(shard_0, key=lambda r: len(holders.clusters_of(r.pod)))
    survivor = next(r for r in shard_0 if r is not killed)
    survivors = [r for r in replicas.values() if r is not killed]
    base = survivor.scrape()
    if base is None:
        raise RuntimeError(f"{survivor.label}: /metrics did not answer")
    victims = holders.clusters_of(killed.pod)
    names = {layout.lease_of(cluster) for cluster in victims}
    found: dict[str, Any] = {
        "killed_label": killed.label,
        "survivor_label": survivor.label,
        "victims": len(victims),
        "survivor_held_before": len(holders.clusters_of(survivor.pod)),
        "base_reconciled": base.reconciled,
    }
    log_start = worker_log.stat().st_size
    clock: dict[str, float] = {}
    taken: dict[str, float] = {}  # Lease -> monotonic time the benchmark first saw it taken over
    last_renewal: dict[str, float | None] = {}  # Lease -> epoch of the dead holder's last renewal

    def kill() -> None:
        killed.stop(kill=True)
        clock["killed"], clock["killed_epoch"] = time.monotonic(), time.time()
        # Read after the kill (a renewal in flight has landed by then): the dead holder's last
        # renewTime of each Lease, which it writes no more.
        time.sleep(0.2)
        rows = lease_rows(coordination, layout.leases)
        last_renewal.update({name: rows[name].renewed for name in names if name in rows})

    def watch_leases(now: float) -> None:
        if len(taken) == len(names):
            return
        rows = lease_rows(coordination, layout.leases)
        for name in names - set(taken):
            row = rows.get(name)
            if row is not None and row.holder and row.holder != killed.pod:
                taken[name] = now

    def on_tick(now: float) -> None:
        watch_leases(now)
        if "all" in found:
            return
        current = survivor.scrape()
        if current is None:
            return
        if "first" not in found and current.reconciled > base.reconciled:
            found["first"] = now - clock["killed"]
        if current.reconciled >= owned[0]:
            found["all"] = now - clock["killed"]

    window = measure(survivors, WINDOW, begin=kill, tick=0.5, on_tick=on_tick, leases=(coordination, layout, watch))
    deadline = clock["killed"] + TAKEOVER_TIMEOUT
    while ("all" not in found or len(taken) < len(names)) and time.monotonic() < deadline:
        on_tick(time.monotonic())
        time.sleep(0.5)
    # The take-overs from the Leases' own stamps: the dead holder's last renewTime (it writes no
    # more) and the survivor's acquireTime, both from the replicas' clocks (the same machine).
    rows = lease_rows(coordination, layout.leases)
    takeovers: list[dict[str, Any]] = []
    for name in sorted(names):
        row = rows.get(name)
        if row is None or row.holder != survivor.pod or row.acquired is None:
            continue
        renewed = last_renewal.get(name)
        takeovers.append(
            {
                "from_kill": row.acquired - clock["killed_epoch"],
                "from_renewal": None if renewed is None else row.acquired - renewed,
                "seen": taken[name] - clock["killed"] if name in taken else None,
            }
        )
    found["takeovers"] = takeovers
    found["last_renewal_before_kill"] = [
        clock["killed_epoch"] - renewed for renewed in last_renewal.values() if renewed is not None
    ]
    if takeovers:
        first_taken = min(float(t["from_kill"]) for t in takeovers)
        after = [
            (sent, done)
            for sent, done in timed_listings(worker_log, log_start)
            if done >= clock["killed_epoch"] + first_taken
        ]
        if after:
            found["listing_sent"], found["listing_answered"] = (t - clock["killed_epoch"] for t in after[0])
    others = {c: h for c, h in holders.by_cluster.items() if c not in victims}
    now_held = Holders.read(coordination, layout).by_cluster
    found["others_moved"] = sum(1 for c, h in others.items() if now_held.get(c) != h)
    # A pass under a new term writes its claim with its status, and every pass writes status: so
    # each resource the survivor took over costs a status write, whether anything else changed.
    survivor_terms = {row.transitions for name, row in rows.items() if name in names}
    found["claims"] = claims(custom, layout)
    found["claimed_by_survivor"] = sum(
        n for claim, n in found["claims"].items() if claim in {f"{survivor.pod}/{t}" for t in survivor_terms}
    )
    print({"fail-over": found}, flush=True)
    print({"checks": window.checks, "cpu": window.cpu}, flush=True)
    return {"window": window, "killed": killed, "survivor": survivor, **found}


def cleanup(custom: Any, core: Any, namespaces: list[str]) -> list[str]:
    """With the operators stopped: finalizers, namespaces (the Leases' with them); what is left after 10 minutes."""
    from kubernetes import client

    for namespace in namespaces:
        try:
            items = custom.list_namespaced_custom_object(GROUP, VERSION, namespace, "kafkaconnectors")["items"]
            names = [i["metadata"]["name"] for i in items if i["metadata"].get("finalizers")]

            def release(i: int, names: list[str] = names, namespace: str = namespace) -> None:
                patch = {"metadata": {"finalizers": None}}
                custom.patch_namespaced_custom_object(GROUP, VERSION, namespace, "kafkaconnectors", names[i], patch)

            in_parallel(release, range(len(names)))
            delete_namespace(core, custom, namespace)
        except client.ApiException as error:
            if error.status != 404:
                print(f"cleanup of {namespace}: {error.status} {error.reason}", flush=True)

    def left() -> list[str]:
        remaining = []
        for namespace in namespaces:
            try:
                core.read_namespace(namespace)
                remaining.append(namespace)
            except client.ApiException as error:
                if error.status != 404:
                    remaining.append(namespace)
        return remaining

    with contextlib.suppress(AssertionError):
        wait_for("the namespaces deleted", lambda: not left(), timeout=600, interval=5)
    return left()


def main() -> int:
    from kubernetes import client

    began = time.monotonic()
    info, api = stack_api(16)
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    coordination = client.CoordinationV1Api(api)
    unique = uuid.uuid4().hex[:6]
    work = Path(os.environ.get("TMPDIR", "/tmp")) / f"bench-shards-{unique}"
    work.mkdir(parents=True)
    layout = Layout(unique, COUNT, work)
    split = layout.owned()
    if any(connectors == 0 for _, connectors in split.values()):
        raise RuntimeError(f"one shard owns nothing: {split}")  # 50 clusters: about 1 in 10**15
    owned = {shard: connectors for shard, (_, connectors) in split.items()}
    print({"resources": COUNT, "split": split, "work": str(work)}, flush=True)
    # One worker per shard, its ConnectClusters all naming it: one worker holding all 10,000
    # connectors took 55-86 s to answer each replica's snapshot listing, longer than the interval,
    # so that run measured Connect (as the one-worker 20,000 steady-state run did).
    workers = [
        DedicatedWorker(heap="-Xmx2g" if owned[shard] > 5000 else "-Xmx1g", name=f"shards{COUNT}-{shard}")
        for shard in range(SHARDS)
    ]
    replicas = {r.label: r for r in replicas_for(layout, info["kubeconfig"])}
    result: dict[str, Any] = {"split": split}
    created: list[str] = []
    watch = LeaseWatch(coordination, layout.leases)
    try:
        started = time.monotonic()
        for namespace in [*layout.namespaces, layout.leases]:
            core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
            created.append(namespace)
        for namespace, cluster in layout.clusters:
            create_cluster(custom, namespace, workers[layout.shard_of(namespace, cluster)].url, name=cluster)
        connectors = layout.connectors

        def create(i: int) -> None:
            namespace, cluster, name = connectors[i]
            custom.create_namespaced_custom_object(
                GROUP, VERSION, namespace, "kafkaconnectors", layout.body(namespace, cluster, name)
            )

        in_parallel(create, range(len(connectors)))
        result["created"] = time.monotonic() - started
        started = time.monotonic()

        def seed_and_start(shard: int) -> None:
            time.sleep(3 * shard)  # each start rewrites the log4j file the JVMs read
            workers[shard].seed_stopped_connectors(layout.connect_configs(shard))
            workers[shard].start(timeout=900)

        in_parallel(seed_and_start, range(SHARDS))
        result["worker_start"] = time.monotonic() - started
        print(result, flush=True)

        watch.start()
        started = time.monotonic()
        for replica in replicas.values():  # together, as a StatefulSet with Parallel pod management
            replica.start()
        wait_for(
            "every Lease held by a replica of its cluster's shard",
            lambda: Holders.read(coordination, layout).all_held(layout),
            timeout=300,
            interval=0.5,
        )
        result["held"] = time.monotonic() - started
        wait_for(
            f"{COUNT} connectors Ready",
            lambda: ready_count(custom, layout.namespaces) == COUNT,
            timeout=1800,
            interval=10 if COUNT > 1000 else 2,
        )
        result["ready"] = time.monotonic() - started
        for replica in replicas.values():
            settle(replica.pid, INTERVAL)
        result["settled"] = time.monotonic() - started
        time.sleep(INTERVAL)  # one more drift interval: the start-up burst is over
        print(result, flush=True)

        log_starts = [worker.log.stat().st_size for worker in workers]
        result["steady"] = measure(list(replicas.values()), WINDOW, leases=(coordination, layout, watch))
        result["listings"] = [
            took
            for worker, start in zip(workers, log_starts, strict=True)
            for took in listings(worker.log, start, worker.log.stat().st_size)
        ]
        print({"steady": result["steady"]}, flush=True)
        result["failover"] = fail_over(custom, coordination, layout, replicas, owned, workers[0].log, watch)
        if "all" in result["failover"]:
            time.sleep(INTERVAL)  # the survivor's first passes over what it took over are over
            alive = [r for r in replicas.values() if r.op.process is not None]
            result["after"] = measure(alive, WINDOW, leases=(coordination, layout, watch))
            print({"after": result["after"]}, flush=True)
        for replica in replicas.values():
            if replica.op.process is not None:
                replica.record_peak()
        writes = [rest_calls(worker.log, 0, worker.log.stat().st_size) for worker in workers]
        result["writes"] = sum(v for each in writes for k, v in each.items() if not k.startswith("GET"))
        result["worker_peak"] = sum(worker.rss_mib() or 0 for worker in workers)
    finally:
        watch.stop()
        for replica in replicas.values():
            replica.stop()
        for worker in workers:
            worker.stop()
        left = cleanup(custom, core, created)
        stray = [r.label for r in replicas.values() if r.op.process is not None]
        print(f"clean-up: namespaces left {left or 'none'}; replicas running {stray or 'none'}", flush=True)
    result["duration"] = time.monotonic() - began
    result["watch_restarts"] = watch.restarts
    result["peaks"] = {label: r.peak for label, r in replicas.items()}
    report(result, owned, layout)
    return 0


def verdict(ok: bool) -> str:
    return "met" if ok else "**missed**"


def mib(value: float | None) -> str:
    return "—" if value is None else f"{value:.0f}"


def secs(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f} s"


def span(values: list[float]) -> str:
    """ "a-b s" of some seconds, or the one value."""
    if not values:
        return "—"
    low, high = min(values), max(values)
    return f"{low:.1f} s" if round(low, 1) == round(high, 1) else f"{low:.1f}-{high:.1f} s"


def report(result: dict[str, Any], owned: dict[int, int], layout: Layout) -> None:
    steady: Window = result["steady"]
    failover: dict[str, Any] = result["failover"]
    during: Window = failover["window"]
    after: Window | None = result.get("after")
    intervals = steady.seconds / INTERVAL
    low, high = (intervals - 1) / intervals, (intervals + 1) / intervals
    held = steady.holders_before
    assert held is not None
    pods = {f"shard {shard} {name}": pod_name(shard, name) for shard in range(SHARDS) for name in SIBLINGS}

    def shard_of(label: str) -> int:
        return int(label.split()[1])

    def judged(window: Window, label: str, holders: Holders) -> tuple[int, int, float | None, bool]:
        """(clusters held, their resources, checks per resource per interval, as expected)."""
        clusters = len(holders.clusters_of(pods[label]))
        resources = clusters * layout.per_cluster
        spans = window.seconds / INTERVAL
        lo, hi = (spans - 1) / spans, (spans + 1) / spans
        if resources == 0:
            return clusters, resources, None, window.checks[label] == 0 and window.reconciled[label] == 0
        ratio = window.per_interval(label, resources)
        return clusters, resources, ratio, window.reconciled[label] == resources and lo <= ratio <= hi

    rows, one_holder = [], True
    for label in steady.checks:
        shard = shard_of(label)
        clusters, resources, ratio, ok = judged(steady, label, held)
        one_holder = one_holder and ok
        rows.append(
            f"| {label} | `{pods[label]}` | {layout.owned()[shard][0]} / {owned[shard]:,} | {clusters} "
            f"| {resources:,} | {steady.reconciled[label]:,.0f} | {steady.checks[label]:,.0f} "
            f"| {resources * intervals:,.0f} | {'—' if ratio is None else f'{ratio:.2f}'} "
            f"| {steady.cpu[label]:.1f} % | {mib(result['peaks'][label])} | {steady.rss[label]:.0f} |"
        )
    total = sum(steady.checks.values()) / (COUNT * intervals)
    one_holder = one_holder and low <= total <= high and steady.moved() == 0

    killed: Replica = failover["killed"]
    survivor: Replica = failover["survivor"]
    takeovers: list[dict[str, Any]] = failover.get("takeovers", [])
    from_kill = [t["from_kill"] for t in takeovers]
    from_renewal = [t["from_renewal"] for t in takeovers if t["from_renewal"] is not None]
    seen = [t["seen"] for t in takeovers if t["seen"] is not None]
    earliest, latest = takeover_bounds()
    renewal_gap = expected_renewal_gap()[2]
    all_taken = len(takeovers) == failover["victims"]
    safe = bool(from_renewal) and min(from_renewal) >= earliest
    live = all_taken and bool(from_renewal) and max(from_renewal) <= latest + TICK_WORK
    all_done, first = failover.get("all"), failover.get("first")
    before_1 = sum(steady.checks[f"shard 1 {n}"] for n in SIBLINGS) / (owned[1] * intervals)
    during_1 = sum(during.checks[f"shard 1 {n}"] for n in SIBLINGS) / (owned[1] * during.seconds / INTERVAL)
    cpu_during = ", ".join(f"{label} {cpu:.1f} %" for label, cpu in during.cpu.items())
    if after is None or after.holders_before is None:
        after_line = f"- After the take-over: not measured ({survivor.label} never reconciled all of shard 0)."
    else:
        parts, fine = [], True
        for label in after.checks:
            clusters, resources, ratio, ok = judged(after, label, after.holders_before)
            fine = fine and ok
            parts.append(
                f"{label} {clusters} Leases, {resources:,} resources, "
                + ("0 checks" if ratio is None else f"{ratio:.2f}")
            )
        after_line = (
            f"- After the take-over ({after.seconds:.0f} s from one drift interval after it), checks per resource\n"
            f"  per interval by holder: {'; '.join(parts)}; Leases moved in the window {after.moved()}: "
            f"{verdict(fine and after.moved() == 0)}."
        )
    split, clusters = result["split"], NAMESPACES * CLUSTERS_PER_NAMESPACE
    took_ms: list[float] = result["listings"]
    listed = (
        f"{len(took_ms)}, median {statistics.median(took_ms):.2f} s, max {max(took_ms):.2f} s" if took_ms else "none"
    )
    shortest_gap, mean_gap, _ = expected_renewal_gap()
    writes_rate = steady.lease_writes / steady.seconds
    watch_note = (
        f" (the watch was interrupted {result['watch_restarts']} times during the run, events missed)"
        if result.get("watch_restarts")
        else ""
    )
    sharing = "; ".join(
        f"shard {shard}: "
        + ", ".join(
            f"`{pod}` {len(held.clusters_of(pod))}" for pod in pods.values() if pod.startswith(f"shard{shard}-")
        )
        for shard in range(SHARDS)
    )
    before_kill = failover.get("last_renewal_before_kill") or []
    claimed = failover.get("claimed_by_survivor", 0)
    longest_tick = TIMINGS.retry_period * 1.2
    others_moved = failover.get("others_moved", 0)
    body = f"""
## Shards under Leases: {COUNT:,} KafkaConnectors, two shards of two replicas, a replica's fail-over (issue 44)

`.venv/bin/python bench/bench_shards.py {WINDOW:g} {MODE}` — {machine()}; load average at the end
{os.getloadavg()[0]:.1f}; {result["duration"] / 60:.0f} min in all.

Set-up: {COUNT:,} STOPPED FileStreamSource connectors, {layout.per_cluster} on each of {clusters} ConnectClusters
({NAMESPACES} namespaces of {CLUSTERS_PER_NAMESPACE}); the ConnectClusters of each shard name a dedicated
Connect worker of the shard's own, seeded with its connectors as the operator creates them; drift
interval {INTERVAL:g} s. Two shards (`--shard-count 2`), each with two replicas (`$POD_NAME` `shardI-a`
and `shardI-b`), all four with `--leader-election` and the default Lease timings (duration
{TIMINGS.duration:g} s, renew deadline {TIMINGS.renew_deadline:g} s, retry period {TIMINGS.retry_period:g} s), the
Leases in a namespace of their own, all four started together. The hash gave shard 0 {split[0][0]}
clusters and {owned[0]:,} resources, shard 1 {split[1][0]} clusters and {owned[1]:,} resources; the Leases
were held by {sharing} ({result["held"]:.0f} s after the start: a replica works under a Lease it
made only one lease duration after making it). Resources created in {result["created"]:.0f} s; workers seeded and all
connectors STOPPED in {result["worker_start"]:.0f} s (workers' peak RSS {mib(result.get("worker_peak"))} MiB in
all); every resource Ready {result["ready"]:.0f} s after the replicas started, their CPU settled at
{result["settled"]:.0f} s.

Steady window: {steady.seconds:.0f} s ({intervals:.1f} drift intervals). Leases held: the ConnectClusters whose
Lease names the replica at the window's start (`holderIdentity`); their resources: what it should
check. Checks: the increment of `{CHECKS_METRIC}{{kind="KafkaConnector"}}`; expected: those resources x
intervals. Reconciled: `{CONNECTORS_METRIC}{{kind="KafkaConnector"}}` over all states, the distinct
resources the replica has reconciled since it started. CPU: % of one core over the window. Peak RSS:
VmHWM at the end of the replica's life (start-up included; the survivor's includes its time after
the take-over); steady RSS: the largest VmRSS sampled.

| Replica | `$POD_NAME` | Its shard's clusters / resources | Leases held | Their resources | Reconciled \
| Checks | Expected | Checks per resource per interval | CPU | Peak RSS (MiB) | Steady RSS (MiB) |
|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|
{chr(10).join(rows)}

- Each resource reconciled by exactly one replica, the holder of its cluster's Lease: each replica
  reconciled exactly the resources of the clusters it holds, each checked {low:.2f} to {high:.2f} times per
  interval (the window's edges), a replica holding nothing checked nothing; all replicas together
  {total:.2f} checks per resource per interval; Leases that changed hands in the window
  {steady.moved()}: {verdict(one_holder)}.
- Lease writes stored in the steady window (MODIFIED events of a watch on the Leases' namespace):
  {writes_rate:.1f}/s for {clusters} Leases{watch_note}; expected {clusters} / {mean_gap:.1f} s =
  {clusters / mean_gap:.1f}/s, at most {clusters} / {TIMINGS.renew_every:g} s =
  {clusters / TIMINGS.renew_every:.0f}/s (bench_leases' section).
- Fail-over: {killed.label} (`{killed.pod}`, {failover["victims"]} of shard 0's Leases; its sibling held
  {failover["survivor_held_before"]}) SIGKILLed at 0 s. Its last renewals were {span(before_kill)} before the
  kill. {survivor.label} took over {len(takeovers)} of its {failover["victims"]} Leases at {span(from_kill)} after
  the kill (its `acquireTime`; the benchmark, polling every 0.5 s, saw them change hands at
  {span(seen)}), i.e. {span(from_renewal)} after each Lease's last renewal. Expected, from the timings: the
  survivor first sees the last record at its next tick (ticks every {TIMINGS.retry_period:g}-{longest_tick:g} s) and
  takes over at its first tick once it has seen that record unchanged for the lease duration:
  {earliest:g} to {latest:.1f} s after the last renewal (duration + two longest ticks), and since a holder
  renews every third tick ({shortest_gap:.1f}-{renewal_gap:.1f} s), {earliest - renewal_gap:.1f} to {latest:.1f} s after
  the kill. Targets: never before {earliest:g} s after the last renewal (no replica works on a cluster
  before the dead holder's Lease ran out): {verdict(safe)}; every Lease within {latest:.1f} s (+ {TICK_WORK:g} s
  for the ticks' own work) of it: {verdict(live)}.
- {survivor.label} reconciled its first resource of the dead replica's clusters at {secs(first)} and had
  reconciled all {owned[0]:,} of shard 0 at {secs(all_done)} (its `{CONNECTORS_METRIC}`); {claimed:,} resources then
  carried its claim (`status.claimedBy` naming its new term: a claim alone is never written since
  8e19beb, so an idle take-over writes no status; before, one status write each). The first snapshot
  listing of shard 0's worker after the first take-over was sent at {secs(failover.get("listing_sent"))} and
  answered at {secs(failover.get("listing_answered"))} (the worker's request log; only the survivor lists it
  now).
- Shard 1 unaffected: its checks per resource per interval (both replicas) {before_1:.2f} in the
  steady window, {during_1:.2f} over the {during.seconds:.0f} s from the kill (target ≥ {UNAFFECTED:.0%} of the
  steady value: {verdict(during_1 >= UNAFFECTED * before_1)}); Leases other than the dead replica's that
  changed hands by the end of the take-over: {others_moved} ({verdict(others_moved == 0)}).
  CPU over that window: {cpu_during}.
{after_line}
- Connect's snapshot listings (`GET /connectors?expand=status&expand=info`, every connector of the
  worker: one per replica holding any of the worker's clusters per interval, shared by the
  ConnectClusters naming it) in the steady window: {listed}.
- Writes to Connect (PUT/POST/DELETE) by any replica over the whole run, fail-over included:
  {result["writes"]}.
"""
    if MODE == "full":
        write_section("shards", body)
    else:
        print(f"({MODE} mode: a smoke run, bench/README.md left as it is)")
    print(body)


if __name__ == "__main__":
    sys.exit(main())
