"""Benchmark: two shards at 10,000 KafkaConnectors, and one shard's fail-over (issue 35).

What it shows, with nothing changing on the resources (drift interval 30 s):

* each resource is reconciled by exactly one shard. Shards own ConnectClusters (and everything bound
  to them) by a stable hash (``controller/sharding.py``); the benchmark computes with the operator's
  own ``Shard.owns`` how many resources each shard owns, then reads every replica's ``/metrics`` at
  both ends of a window of whole drift intervals: the increment of
  ``connect_offsets_resource_checks_total{kind="KafkaConnector"}`` (one per resource per check)
  must be (resources its shard owns) x (intervals in the window) for the active replica of each
  shard, within the window's edges, and 0 for each standby; ``connect_offsets_connectors{kind=
  "KafkaConnector"}`` (the distinct resources a replica has reconciled, over all states) must be
  exactly what its shard owns: a replica that had reconciled a resource of the other shard would
  count more. The operator exports nothing per resource; these two counts are the evidence;
* fail-over: shard 0's active replica is SIGKILLed. Reported: when its peering records (one
  KopfPeering ``bench-shards-shard-0`` per namespace) expire (``lastseen`` + lifetime, read right
  after the kill: kopf's standby cannot take over earlier), when kopf resumed the standby (the
  take-over; target: within the peering timeout, ``CONNECT_OFFSETS_PEERING_LIFETIME``, 15 s,
  counted as kopf does from the dead replica's last record, plus 1 s for kopf's re-read), when its
  first snapshot listing of the worker was sent and answered, when its checks counter first moves
  (target: within 2 s of that answer: every check needs a snapshot, and Connect's listing takes
  seconds at thousands of connectors), and when it has reconciled every resource of shard 0.
  Standbys that resume while their active replica lives (two active replicas of one shard) are
  counted from their logs (target 0). Meanwhile
  shard 1's active replica's checks per resource per interval over the same window length from the
  kill, beside its steady value (unaffected: at least 90 % of it), and shard 1's standby stays at 0.
  A last window, one drift interval after the take-over, shows shard 0 back to one check per
  resource per interval;
* each replica's CPU (% of one core, /proc/<pid>/stat) per window, its peak RSS (VmHWM, start-up
  included) and steady RSS (largest VmRSS sampled every 2 s in the steady window);
* the operator's writes to Connect (PUT/POST/DELETE in the worker's request log) over the whole
  run, fail-over included: 0, the seeding matched their config.

Set-up on the real local stack: 5 namespaces of 10 ConnectClusters each (50 clusters: the hash
spreads clusters, so both shards need many), the resources spread evenly over them; STOPPED
FileStreamSource KafkaConnectors created with no operator running. One dedicated Connect worker per
shard, which every ConnectCluster of that shard names (one worker holding all 10,000 took 55-86 s
to answer each replica's snapshot listing, longer than the drift interval, so that run measured
Connect), each (tests/integration/connect_worker.py, ``-Xmx2g`` above 5,000 connectors) seeded before
it starts with its connectors exactly as the operator would create them (``desired_config``, target
state STOPPED), as bench/bench_steady_state.py does, so the operators have nothing to write.
Replicas as users run them (``connect-offsets-operator -n NS1 ... -n NS5 --shard-count 2
--shard-index I --peering bench-shards --priority P --metrics-port PORT``), two per shard: an active
(priority 100, started first, and the standby only once its peering records are there) and a
standby (priority 10). The KopfPeerings (two per namespace: namespaced peering is per namespace) are
created by the benchmark, the peering CRDs installed as the tests do (``install_peering_crds``).
The steady window starts once every resource is Ready (ConnectorStopped), both active replicas'
CPU has settled, and one more drift interval has passed.

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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.conftest import OperatorProcess, delete_namespace, install_crds, stack_info, wait_for  # noqa: E402
from tests.integration.connect_worker import DedicatedWorker  # noqa: E402
from tests.integration.support import (  # noqa: E402
    GROUP,
    VERSION,
    create_cluster,
    file_source_spec,
    free_port,
    install_peering_crds,
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

from bench.report import cpu_seconds, machine, write_section  # noqa: E402
from connect_offsets.controller import Shard  # noqa: E402
from connect_offsets.models.crds import KafkaConnectorResource  # noqa: E402
from connect_offsets.planning.targets import desired_config  # noqa: E402

WINDOW = float(sys.argv[1]) if len(sys.argv) > 1 else 120.0
MODE = sys.argv[2] if len(sys.argv) > 2 else "full"
MODES = {"full": 10000, "small": 400}
if MODE not in MODES:
    sys.exit(f"mode must be one of {', '.join(MODES)}, not {MODE!r}")
COUNT = MODES[MODE]
NAMESPACES, CLUSTERS_PER_NAMESPACE = 5, 10
#: The drift interval (CONNECT_OFFSETS_DRIFT_INTERVAL) and the peering lifetime
#: (CONNECT_OFFSETS_PEERING_LIFETIME, the operator's default) of every replica.
INTERVAL, LIFETIME = 30.0, 15
PEERING, SHARDS = "bench-shards", 2
PRIORITIES = {"active": 100, "standby": 10}
CONNECTORS_METRIC = "connect_offsets_connectors"
#: Shard 1's checks per resource per interval during the fail-over, as a share of its steady value.
UNAFFECTED = 0.9
TAKEOVER_TIMEOUT = 1800.0
#: Issue 35: the standby takes over within the peering timeout. kopf resumes it once the dead
#: replica's last record has expired: it sleeps until then and re-reads its peering (its own
#: PATCH, then the watch event), which this allows.
RESUME_SLACK = 1.0
#: A check needs a snapshot of the worker, and a taken-over shard has none: its first check comes
#: one listing (Connect's time, which grows with its connectors) after the resume, and within this
#: of that listing's answer.
CHECK_SLACK = 2.0


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
    def clusters(self) -> list[tuple[str, str]]:
        return [(ns, f"c{c:02d}") for ns in self.namespaces for c in range(CLUSTERS_PER_NAMESPACE)]

    @property
    def connectors(self) -> list[tuple[str, str, str]]:
        """(namespace, cluster, name), the same number on every cluster."""
        clusters = self.clusters
        if self.count % len(clusters):
            raise ValueError(f"{self.count} resources do not spread evenly over {len(clusters)} clusters")
        per = self.count // len(clusters)
        return [
            (ns, cluster, f"sh-{self.unique}-{n}{cluster}-{i:04d}")
            for n, ns in enumerate(self.namespaces)
            for cluster in (c for c_ns, c in clusters if c_ns == ns)
            for i in range(per)
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
        return next(i for i in range(SHARDS) if Shard(i, SHARDS).owns((namespace, cluster)))

    def owned(self) -> dict[int, tuple[int, int]]:
        """Shard -> (its ConnectClusters, its KafkaConnectors)."""
        clusters = [self.shard_of(ns, c) for ns, c in self.clusters]
        connectors = [self.shard_of(ns, c) for ns, c, _ in self.connectors]
        return {i: (clusters.count(i), connectors.count(i)) for i in range(SHARDS)}

    def connect_configs(self, shard: int) -> dict[str, dict[str, str]]:
        """The connectors of ``shard``'s ConnectClusters, each config exactly as the operator would
        create it (``desired_config``)."""
        return {
            name: desired_config(KafkaConnectorResource.model_validate(self.body(ns, cluster, name)))
            for ns, cluster, name in self.connectors
            if self.shard_of(ns, cluster) == shard
        }


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


@dataclass
class Replica:
    shard: int
    role: str  # active | standby
    port: int
    op: OperatorProcess
    pid: int = 0
    peak: float | None = None  # VmHWM, read before the process ends

    @property
    def label(self) -> str:
        return f"shard {self.shard} {self.role}"

    @property
    def priority(self) -> int:
        return PRIORITIES[self.role]

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
        for role, priority in PRIORITIES.items():
            port = free_port()
            args = [
                *(a for ns in namespaces[1:] for a in ("-n", ns)),
                *("--shard-count", str(SHARDS), "--shard-index", str(shard)),
                *("--peering", PEERING, "--priority", str(priority), "--metrics-port", str(port)),
            ]
            op = OperatorProcess(
                kubeconfig,
                namespaces[0],
                layout.work / f"shard-{shard}-{role}.log",
                extra_env={
                    "CONNECT_OFFSETS_DRIFT_INTERVAL": f"{INTERVAL:g}",
                    "CONNECT_OFFSETS_PEERING_LIFETIME": str(LIFETIME),
                },
                extra_args=args,
            )
            replicas.append(Replica(shard, role, port, op))
    return replicas


def peering_name(shard: int) -> str:
    return f"{PEERING}-shard-{shard}"


def peers(custom: Any, namespace: str, shard: int) -> dict[str, dict[str, Any]]:
    """The KopfPeering's records: identity -> {priority, lifetime, lastseen}."""
    body = custom.get_namespaced_custom_object("kopf.dev", "v1", namespace, "kopfpeerings", peering_name(shard))
    return dict(body.get("status") or {})


def peering_objects(custom: Any, namespace: str) -> list[str]:
    """The KopfPeerings left in a namespace (none once it is gone)."""
    from kubernetes import client

    try:
        items = custom.list_namespaced_custom_object("kopf.dev", "v1", namespace, "kopfpeerings")["items"]
    except client.ApiException:
        return []
    return [str(i["metadata"]["name"]) for i in items]


def expiry(custom: Any, namespaces: list[str], shard: int, priority: int, at: float) -> float | None:
    """Seconds from ``at`` (epoch) until the last of the peer's records (one per namespace) expires."""
    deadlines = []
    for namespace in namespaces:
        for record in peers(custom, namespace, shard).values():
            if isinstance(record, dict) and record.get("priority") == priority and record.get("lastseen"):
                seen = datetime.datetime.fromisoformat(record["lastseen"]).timestamp()
                deadlines.append(seen + float(record.get("lifetime", LIFETIME)))
    return max(deadlines) - at if len(deadlines) == len(namespaces) else None


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

    def per_interval(self, label: str, owned: int) -> float:
        """Checks per owned resource per drift interval."""
        return self.checks[label] / (owned * self.seconds / INTERVAL) if owned else 0.0


def measure(
    replicas: list[Replica],
    seconds: float,
    begin: Callable[[], None] | None = None,
    tick: float = 2.0,
    on_tick: Callable[[float], None] | None = None,
) -> Window:
    """Every replica's counters and CPU at both ends of ``seconds``; ``begin`` runs once the first
    ends are read, and the window starts when it returns."""
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
    elapsed = time.monotonic() - started
    after = {r.label: r.scrape() for r in replicas}
    cpu = {r.label: (cpu_seconds(r.pid) - cpu_before[r.label]) / elapsed * 100 for r in replicas}
    checks, reconciled = {}, {}
    for label in before:
        first, last = before[label], after[label]
        if first is None or last is None:
            raise RuntimeError(f"{label}: /metrics did not answer")
        checks[label], reconciled[label] = last.checks - first.checks, last.reconciled
    return Window(elapsed, checks, reconciled, cpu, rss)


_LOGGED_AT = re.compile(rb"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]", re.MULTILINE)


def _logged_at(line: bytes) -> float | None:
    """Epoch seconds of a log line's ``[YYYY-mm-dd HH:MM:SS,mmm]`` prefix (kopf's and log4j's, UTC)."""
    found = _LOGGED_AT.match(line)
    if found is None:
        return None
    stamp = datetime.datetime.strptime(found.group(1).decode(), "%Y-%m-%d %H:%M:%S,%f")
    return stamp.replace(tzinfo=datetime.UTC).timestamp()


def resumed_at(log: Path, since: float) -> float | None:
    """When kopf last logged resuming after a pause at or after ``since`` (epoch): the standby's
    take-over begins there (it resumes once the last of the dead peer's records has expired)."""
    times = [
        at
        for line in log.read_bytes().splitlines()
        if b"Resuming operations after the pause" in line and (at := _logged_at(line)) is not None and at >= since
    ]
    return max(times) if times else None


def false_resumes(log: Path, until: float) -> int:
    """How often a standby resumed before ``until`` (epoch): kopf resumes a standby when its active
    peer's record looks expired, so before the kill each one is a moment of two active replicas."""
    return sum(
        1
        for line in log.read_bytes().splitlines()
        if b"Resuming operations after the pause" in line and (at := _logged_at(line)) is not None and at < until
    )


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


def fail_over(
    custom: Any, layout: Layout, replicas: dict[str, Replica], owned: dict[int, int], worker_log: Path
) -> dict[str, Any]:
    """SIGKILL shard 0's active replica; when its standby takes over, and where that time goes
    (kopf's resume, the first snapshot listing); shard 1 meanwhile."""
    killed, standby = replicas["shard 0 active"], replicas["shard 0 standby"]
    survivors = [r for r in replicas.values() if r is not killed]
    base = standby.scrape()
    if base is None:
        raise RuntimeError("shard 0's standby: /metrics did not answer")
    found: dict[str, float] = {}

    log_start = worker_log.stat().st_size
    epoch: dict[str, float] = {}

    def kill() -> None:
        killed.stop(kill=True)
        found["killed"], at = time.monotonic(), time.time()
        epoch["killed"] = at
        # Read after the kill: the records are final, and the standby cleans them only once expired.
        left = expiry(custom, layout.namespaces, 0, killed.priority, at)
        if left is not None:
            found["expiry"] = left

    def watch(now: float) -> None:
        if "all" in found:
            return
        current = standby.scrape()
        if current is None:
            return
        if "first" not in found and current.checks > base.checks:
            found["first"] = now - found["killed"]
        if current.reconciled >= owned[0]:
            found["all"] = now - found["killed"]

    window = measure(survivors, WINDOW, begin=kill, tick=0.5, on_tick=watch)
    deadline = found["killed"] + TAKEOVER_TIMEOUT
    while "all" not in found and time.monotonic() < deadline:
        watch(time.monotonic())
        time.sleep(0.5)
    # Where the take-over's time went: kopf's resume, then the first listing of shard 0's worker
    # (every check waits for a snapshot) after it.
    found["standby_checks_before"] = base.checks + sum(
        scraped.checks
        for r in replicas.values()
        if r.role == "standby" and r is not standby and (scraped := r.scrape()) is not None
    )
    found["false_resumes"] = {
        label: false_resumes(r.op.log_path, epoch["killed"]) for label, r in replicas.items() if r.role == "standby"
    }
    resumed = resumed_at(standby.op.log_path, epoch["killed"])
    if resumed is not None:
        found["resumed"] = resumed - epoch["killed"]
        after = [(sent, done) for sent, done in timed_listings(worker_log, log_start) if done >= resumed]
        if after:
            found["listing_sent"], found["listing_answered"] = (t - epoch["killed"] for t in after[0])
    print({"fail-over": found, "checks": window.checks, "cpu": window.cpu}, flush=True)
    return {"window": window, **{k: v for k, v in found.items() if k != "killed"}}


def cleanup(custom: Any, core: Any, namespaces: list[str]) -> list[str]:
    """With the operators stopped: KopfPeerings, finalizers, namespaces; what is left after 10 minutes."""
    from kubernetes import client

    for namespace in namespaces:
        try:
            for shard in range(SHARDS):
                with contextlib.suppress(client.ApiException):
                    custom.delete_namespaced_custom_object(
                        "kopf.dev", "v1", namespace, "kopfpeerings", peering_name(shard)
                    )
            items = custom.list_namespaced_custom_object(GROUP, VERSION, namespace, "kafkaconnectors")["items"]
            names = [i["metadata"]["name"] for i in items if i["metadata"].get("finalizers")]
            in_parallel(
                lambda i, names=names, namespace=namespace: custom.patch_namespaced_custom_object(
                    GROUP, VERSION, namespace, "kafkaconnectors", names[i], {"metadata": {"finalizers": None}}
                ),
                range(len(names)),
            )
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

    peerings = [ns for ns in namespaces if peering_objects(custom, ns)]
    if peerings:
        print(f"KopfPeerings left in {peerings}", flush=True)

    with contextlib.suppress(AssertionError):
        wait_for("the namespaces deleted", lambda: not left(), timeout=600, interval=5)
    return left()


def main() -> int:
    import urllib3
    from kubernetes import client, config

    urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
    began = time.monotonic()
    info = stack_info()
    install_crds(info)
    install_peering_crds(info)
    configuration = client.Configuration()
    config.load_kube_config(config_file=info["kubeconfig"], client_configuration=configuration)
    configuration.connection_pool_maxsize = 16
    api = client.ApiClient(configuration)
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
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
    try:
        started = time.monotonic()
        for namespace in layout.namespaces:
            core.create_namespace({"metadata": {"name": namespace}})
            created.append(namespace)
            for shard in range(SHARDS):
                body = {"apiVersion": "kopf.dev/v1", "kind": "KopfPeering", "metadata": {"name": peering_name(shard)}}
                custom.create_namespaced_custom_object("kopf.dev", "v1", namespace, "kopfpeerings", body)
        for namespace, cluster in layout.clusters:
            create_cluster(custom, namespace, workers[layout.shard_of(namespace, cluster)].url, name=cluster)
        connectors = layout.connectors
        in_parallel(
            lambda i: custom.create_namespaced_custom_object(
                GROUP, VERSION, connectors[i][0], "kafkaconnectors", layout.body(*connectors[i])
            ),
            range(len(connectors)),
        )
        result["created"] = time.monotonic() - started
        started = time.monotonic()

        def seed_and_start(shard: int) -> None:
            time.sleep(3 * shard)  # each start rewrites the log4j file the JVMs read
            workers[shard].seed_stopped_connectors(layout.connect_configs(shard))
            workers[shard].start(timeout=900)

        in_parallel(seed_and_start, range(SHARDS))
        result["worker_start"] = time.monotonic() - started
        print(result, flush=True)

        started = time.monotonic()
        for shard in range(SHARDS):
            replicas[f"shard {shard} active"].start()
        for shard in range(SHARDS):
            # The standby starts once the active's records are there: it then starts paused.
            wait_for(
                f"shard {shard}'s active replica in its peerings",
                lambda shard=shard: all(
                    any(p.get("priority") == PRIORITIES["active"] for p in peers(custom, ns, shard).values())
                    for ns in layout.namespaces
                ),
                timeout=120,
                interval=0.5,
            )
            replicas[f"shard {shard} standby"].start()
        wait_for(
            f"{COUNT} connectors Ready",
            lambda: ready_count(custom, layout.namespaces) == COUNT,
            timeout=1800,
            interval=10 if COUNT > 1000 else 2,
        )
        result["ready"] = time.monotonic() - started
        for shard in range(SHARDS):
            settle(replicas[f"shard {shard} active"].pid, INTERVAL)
        result["settled"] = time.monotonic() - started
        time.sleep(INTERVAL)  # one more drift interval: the start-up burst is over
        print(result, flush=True)

        log_starts = [worker.log.stat().st_size for worker in workers]
        result["steady"] = measure(list(replicas.values()), WINDOW)
        result["listings"] = [
            took
            for worker, start in zip(workers, log_starts, strict=True)
            for took in listings(worker.log, start, worker.log.stat().st_size)
        ]
        print({"steady": result["steady"]}, flush=True)
        result["failover"] = fail_over(custom, layout, replicas, owned, workers[0].log)
        if "all" in result["failover"]:
            time.sleep(INTERVAL)  # the new active's first passes are over
            alive = [r for r in replicas.values() if r.op.process is not None]
            result["after"] = measure(alive, WINDOW)
            print({"after": result["after"]}, flush=True)
        for replica in replicas.values():
            if replica.op.process is not None:
                replica.record_peak()
        writes = [rest_calls(worker.log, 0, worker.log.stat().st_size) for worker in workers]
        result["writes"] = sum(v for each in writes for k, v in each.items() if not k.startswith("GET"))
        result["worker_peak"] = sum(worker.rss_mib() or 0 for worker in workers)
    finally:
        # Standbys first: a standby outliving its active replica would take over for a moment.
        for replica in sorted(replicas.values(), key=lambda r: r.role != "standby"):
            replica.stop()
        for worker in workers:
            worker.stop()
        left = cleanup(custom, core, created)
        stray = [r.label for r in replicas.values() if r.op.process is not None]
        print(f"clean-up: namespaces left {left or 'none'}; replicas running {stray or 'none'}", flush=True)
    result["duration"] = time.monotonic() - began
    result["peaks"] = {label: r.peak for label, r in replicas.items()}
    report(result, owned)
    return 0


def verdict(ok: bool) -> str:
    return "met" if ok else "**missed**"


def mib(value: float | None) -> str:
    return "—" if value is None else f"{value:.0f}"


def report(result: dict[str, Any], owned: dict[int, int]) -> None:
    steady: Window = result["steady"]
    failover: dict[str, Any] = result["failover"]
    during: Window = failover["window"]
    after: Window | None = result.get("after")
    intervals = steady.seconds / INTERVAL
    low, high = (intervals - 1) / intervals, (intervals + 1) / intervals

    def shard_of(label: str) -> int:
        return int(label.split()[1])

    rows, one_shard = [], True
    for label in steady.checks:
        shard, active = shard_of(label), label.endswith("active")
        want = owned[shard] if active else 0
        ratio = steady.per_interval(label, owned[shard])
        ok = steady.reconciled[label] == want and (low <= ratio <= high if active else steady.checks[label] == 0)
        one_shard = one_shard and ok
        rows.append(
            f"| {label} | {PRIORITIES[label.split()[2]]} | {owned[shard]:,} | {steady.reconciled[label]:,.0f} "
            f"| {steady.checks[label]:,.0f} | {want * intervals:,.0f} | {ratio:.2f} | {steady.cpu[label]:.1f} % "
            f"| {mib(result['peaks'][label])} | {steady.rss[label]:.0f} |"
        )
    total = sum(steady.checks.values()) / (COUNT * intervals)
    one_shard = one_shard and low <= total <= high

    first, all_done, expires = failover.get("first"), failover.get("all"), failover.get("expiry")
    took = "never" if first is None else f"{first:.1f} s"
    reaction = "" if first is None or expires is None else f", {first - expires:.1f} s after that expiry"
    resumed, answered = failover.get("resumed"), failover.get("listing_answered")
    resumed_in_time = verdict(resumed is not None and expires is not None and resumed <= expires + RESUME_SLACK)
    checked_in_time = verdict(first is not None and answered is not None and first <= answered + CHECK_SLACK)
    no_second_active = verdict(
        sum((failover.get("false_resumes") or {}).values()) == 0 and failover.get("standby_checks_before", 0) == 0
    )
    resumes = ", ".join(f"{label} {n}" for label, n in (failover.get("false_resumes") or {}).items()) or "—"
    secs = {
        k: "—" if failover.get(k) is None else f"{failover[k]:.1f} s"
        for k in ("resumed", "listing_sent", "listing_answered")
    }
    before_1, during_1 = (
        steady.per_interval("shard 1 active", owned[1]),
        during.per_interval("shard 1 active", owned[1]),
    )
    standby_1 = during.checks["shard 1 standby"]
    cpu_during = ", ".join(f"{label} {cpu:.1f} %" for label, cpu in during.cpu.items())
    if after is None:
        after_line = "- After the take-over: not measured (the standby never reconciled all of shard 0)."
    else:
        rates = ", ".join(f"{label} {after.per_interval(label, owned[shard_of(label)]):.2f}" for label in after.checks)
        after_line = (
            f"- After the take-over ({after.seconds:.0f} s from one drift interval after it), checks per resource\n"
            f"  per interval: {rates}; shard 0's former standby has reconciled "
            f"{after.reconciled['shard 0 standby']:,.0f} distinct resources of {owned[0]:,}."
        )
    split, clusters = result["split"], NAMESPACES * CLUSTERS_PER_NAMESPACE
    took_ms: list[float] = result["listings"]
    listed = (
        f"{len(took_ms)}, median {statistics.median(took_ms):.2f} s, max {max(took_ms):.2f} s" if took_ms else "none"
    )
    body = f"""
## Shards: {COUNT:,} KafkaConnectors over two shards, and one shard's fail-over (issue 35)

`.venv/bin/python bench/bench_shards.py {WINDOW:g} {MODE}` — {machine()}; load average at the end
{os.getloadavg()[0]:.1f}; {result["duration"] / 60:.0f} min in all.

Set-up: {COUNT:,} STOPPED FileStreamSource connectors, {COUNT // clusters} on each of {clusters} ConnectClusters
({NAMESPACES} namespaces of {CLUSTERS_PER_NAMESPACE}); the ConnectClusters of each shard name a dedicated
Connect worker of the shard's own, seeded with its connectors as the operator creates them (one
worker for all 10,000 took 55-86 s per snapshot listing, longer than the interval); drift interval
{INTERVAL:g} s, peering lifetime {LIFETIME} s (the default). Two shards (`--shard-count 2`), each
with an active replica (priority 100) and a standby (priority 10) on the shard's own peering
(`{PEERING}-shard-I`, a KopfPeering in each namespace). The hash gave shard 0 {split[0][0]} clusters
and {owned[0]:,} resources, shard 1 {split[1][0]} clusters and {owned[1]:,} resources. Resources
created in {result["created"]:.0f} s; workers seeded and all connectors STOPPED in
{result["worker_start"]:.0f} s (workers' peak RSS {mib(result.get("worker_peak"))} MiB in all); every
resource Ready {result["ready"]:.0f} s after the replicas
started, their CPU settled at {result["settled"]:.0f} s.

Steady window: {steady.seconds:.0f} s ({intervals:.1f} drift intervals). Checks: the increment of
`{CHECKS_METRIC}{{kind="KafkaConnector"}}`; expected: its shard's resources x intervals for an
active replica, 0 for a standby. Reconciled: `{CONNECTORS_METRIC}{{kind="KafkaConnector"}}` over all
states, the distinct resources the replica has reconciled since it started. CPU: % of one core over
the window. Peak RSS: VmHWM at the end of the replica's life (start-up included; shard 0's standby's
includes its time as the active replica after the fail-over); steady RSS: the largest VmRSS sampled.

| Replica | Priority | Its shard's resources | Reconciled | Checks | Expected \
| Checks per resource per interval | CPU | Peak RSS (MiB) | Steady RSS (MiB) |
|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|
{chr(10).join(rows)}

- Each resource reconciled by exactly one shard: each active replica reconciled exactly its shard's
  resources, each checked {low:.2f} to {high:.2f} times per interval (the window's edges); the standbys
  nothing; all replicas together {total:.2f} checks per resource per interval: {verdict(one_shard)}.
- Fail-over, shard 0's active replica SIGKILLed at 0 s: the last of its {NAMESPACES} peering records
  (one per namespace; kopf's pause is the operator's, so the standby resumes after the last) expired
  at {"—" if expires is None else f"{expires:.1f} s"}; shard 0's standby checked its first resource at {took}{reaction},
  and had reconciled all {owned[0]:,} of shard 0 at {"—" if all_done is None else f"{all_done:.1f} s"}.
  Where the time went (from the kill): kopf resumed the standby at {secs["resumed"]} (its log);
  its first snapshot listing of shard 0's worker was sent at {secs["listing_sent"]} and answered at
  {secs["listing_answered"]} (the worker's request log; every check waits for a snapshot).
  Targets: the standby takes over within the peering timeout, i.e. kopf resumes it at most
  {RESUME_SLACK:g} s after the last record expired: {resumed_in_time}; its first check at most {CHECK_SLACK:g} s
  after the answer to its first listing: {checked_in_time}.
- Shard 1 unaffected: its active replica's checks per resource per interval {before_1:.2f} in the
  steady window, {during_1:.2f} over the {during.seconds:.0f} s from the kill (target ≥ {UNAFFECTED:.0%} of the
  steady value: {verdict(during_1 >= UNAFFECTED * before_1)}); its standby {standby_1:,.0f} checks \
({verdict(standby_1 == 0)}). CPU over
  that window: {cpu_during}.
{after_line}
- Standbys before the kill (a standby that resumes while its active replica lives makes two active
  replicas of one shard): kopf resumed them {resumes} times, and they had made
  {failover.get("standby_checks_before", 0):,.0f} checks (target 0 and 0: {no_second_active}).
- Connect's snapshot listings (`GET /connectors?expand=status&expand=info`, every connector of the
  worker: one per replica per interval, shared by the ConnectClusters naming it) in the steady
  window: {listed}.
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
