"""Benchmark: what one progress round costs with 5,000 RUNNING sink KafkaConnectors on one ConnectCluster
(issue 33).

Why in-process: 5,000 RUNNING sink connectors on a real worker mean 5,000 sink tasks and consumers,
more than this machine holds next to the stack. The monitor only sees Connect through the cluster's
snapshot, so this drives the operator's own ``progress.ProgressMonitor`` with a snapshot listing 5,000
RUNNING sink connectors (as ``GET /connectors?expand=status&expand=info`` would) and the 5,000
KafkaConnector bodies in its watch cache, against the stack's real Kafka (cluster A): 50 topics of 4
partitions, every sink consuming one of them, its consumer group without commits (as a sink that
has read nothing yet).

Rounds, one per drift interval in the operator (here back to back):

* round 1, cold: the topic list, one batched ListOffsets, and every group read once;
* rounds 2-6, idle (nothing produced): what an idle cluster costs per interval (target: at most 2
  Kafka requests);
* rounds 7-11, busy: before each, one record into one of the 50 topics; the groups of the sinks on
  it are read from then on (records wait for them), the others are not.

Per round: the Kafka requests by kind (``connect_offsets_progress_kafka_requests_total``), wall
seconds, CPU seconds of this process (the round's own work and librdkafka's threads), and the
registry's memory (RSS before and after the first round).

Run: ``make bench BENCH=progress`` or ``.venv/bin/python bench/bench_progress.py [connectors]``.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from tests.conftest import stack_info  # noqa: E402

from bench.report import machine, write_section  # noqa: E402
from connect_offsets import metrics  # noqa: E402
from connect_offsets.clients.connect import ExpandedConnector  # noqa: E402
from connect_offsets.clients.resource_cache import ResourceCache  # noqa: E402
from connect_offsets.models.connect import ConnectorStatus  # noqa: E402
from connect_offsets.progress import ProgressMonitor, ProgressRegistry  # noqa: E402
from connect_offsets.vocabulary import API_GROUP, CONNECTORS, OWNER_CONFIG_KEY  # noqa: E402

COUNT = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
TOPICS, PARTITIONS = 50, 4
SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"
NAMESPACE = "bench-progress"
TARGET = 2.0


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def requests_so_far() -> dict[str, float]:
    return {
        kind: metrics.REGISTRY.get_sample_value("connect_offsets_progress_kafka_requests_total", {"request": kind})
        or 0.0
        for kind in ("metadata", "list_offsets", "group_offsets")
    }


async def run(bootstrap: str, unique: str) -> tuple[list[dict[str, Any]], float, float]:
    topics = [f"bench-progress-{unique}-{i}" for i in range(TOPICS)]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics(
        [NewTopic(t, num_partitions=PARTITIONS, replication_factor=1) for t in topics], operation_timeout=60
    ).values():
        future.result()
    # New topics answer ListOffsets only once their leaders are elected; a round before that fails,
    # and the tenant pool remembers the failure for its back-off (30 s).
    probe = Producer({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        metadata = probe.list_topics(timeout=10)
        if all(t in metadata.topics and metadata.topics[t].error is None for t in topics):
            break
        time.sleep(0.5)
    cache = ResourceCache()
    snapshot: dict[str, ExpandedConnector] = {}
    for i in range(COUNT):
        name = f"sink-{unique}-{i:05d}"
        body = {
            "apiVersion": f"{API_GROUP}/v1beta1",
            "kind": "KafkaConnector",
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": {f"{API_GROUP}/cluster": "local"}},
            "spec": {"class": SINK, "config": {"topics": topics[i % TOPICS], "file": "/dev/null"}},
        }
        cache.observe(CONNECTORS, NAMESPACE, name, body)
        config = {"connector.class": SINK, "topics": topics[i % TOPICS], OWNER_CONFIG_KEY: f"{NAMESPACE}/{name}"}
        status = ConnectorStatus.model_validate({"name": name, "connector": {"state": "RUNNING"}, "type": "sink"})
        snapshot[name] = ExpandedConnector(config, status, name)

    async def settings(namespace: str, name: str) -> dict[str, Any]:
        return {"bootstrap.servers": bootstrap}

    registry = ProgressRegistry()
    monitor = ProgressMonitor(SimpleNamespace(cache=cache), registry, settings)  # type: ignore[arg-type]
    producer = Producer({"bootstrap.servers": bootstrap})
    rounds: list[dict[str, Any]] = []
    rss_before = rss_mib()
    rss_after = rss_before
    for number in range(1, 12):
        phase = "cold" if number == 1 else "idle" if number <= 6 else "busy"
        if phase == "busy":
            producer.produce(topics[number % TOPICS], value=b'"x"', partition=0)
            producer.flush(10)
        before, cpu, wall = requests_so_far(), time.process_time(), time.monotonic()
        await monitor.measure(NAMESPACE, "local", None, snapshot)  # type: ignore[arg-type]
        wall, cpu = time.monotonic() - wall, time.process_time() - cpu
        after = requests_so_far()
        made = {k: int(after[k] - before[k]) for k in after}
        waiting = sum(1 for k in registry.resources() if (p := registry.get(*k)) and p.lag and p.lag.total)
        rounds.append({"round": number, "phase": phase, "requests": made, "wall": wall, "cpu": cpu, "waiting": waiting})
        print(rounds[-1], flush=True)
        if number == 1:
            rss_after = rss_mib()
    measured = [k for k in registry.resources() if (p := registry.get(*k)) and p.measured_at is not None]
    assert len(measured) == COUNT, f"{len(measured)} of {COUNT} measured"
    for future in admin.delete_topics(topics, operation_timeout=60).values():
        future.result()
    return rounds, rss_before, rss_after


HEADER = (
    "| Round | Phase | Metadata | ListOffsets | ListConsumerGroupOffsets | Kafka requests "
    "| Sinks with records waiting | Wall (s) | CPU (s) |"
)


def main() -> int:
    info = stack_info()
    unique = uuid.uuid4().hex[:6]
    rounds, rss_before, rss_after = asyncio.run(run(info["kafka_a"], unique))
    rows = [
        f"| {r['round']} | {r['phase']} | {r['requests']['metadata']} | {r['requests']['list_offsets']} "
        f"| {r['requests']['group_offsets']} | {sum(r['requests'].values())} | {r['waiting']} | {r['wall']:.2f} "
        f"| {r['cpu']:.2f} |"
        for r in rounds
    ]
    idle = [sum(r["requests"].values()) for r in rounds if r["phase"] == "idle"]
    worst = max(idle)
    body = f"""
## Progress: one round over {COUNT:,} RUNNING sink connectors (issue 33)

`make bench BENCH=progress` — {machine()}; load average at the end {os.getloadavg()[0]:.1f}
(other engineers' tests share the machine).

The operator's `ProgressMonitor` in-process, fed the snapshot a worker running {COUNT:,} sink connectors
would list and their KafkaConnector bodies, against the stack's Kafka (cluster A): {TOPICS} topics of
{PARTITIONS} partitions, each sink on one of them, no commits yet. Rounds back to back (the operator
runs one per ConnectCluster per drift interval); busy rounds put one record into one topic first.

{HEADER}
|---:|---|---:|---:|---:|---:|---:|---:|---:|
{chr(10).join(rows)}

- Idle rounds: at most {worst} Kafka request(s) per cluster per interval, target ≤ {TARGET:g}: \
{"met" if worst <= TARGET else "**missed**"} (one batched ListOffsets; the topic list every 5 minutes).
- The first round reads every group once ({COUNT:,} ListConsumerGroupOffsets: librdkafka takes one group per
  request); afterwards only the groups of sinks whose input moved or that have records waiting are read
  (the busy rounds: the sinks on the topics written to).
- Memory of {COUNT:,} connectors' progress: RSS {rss_before:.0f} MiB before the first round, {rss_after:.0f} MiB after.
"""
    write_section("progress", body)
    print(body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
