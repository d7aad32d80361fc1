"""Benchmark: one replication lag measurement of a MirrorMaker 2 mirror over thousands of partitions.

What it shows: the cost of ``connect_offsets.lag.measure_mirror`` is one ``GET /connectors/{c}/offsets``
plus one metadata request and one batched ListOffsets on the source cluster (a second ListOffsets,
for start offsets, only while some partitions have no offset yet) — whatever the partition count.

Set-up on the real local stack: a topic with N partitions on Kafka B (the source), 10 records in
each, and a MirrorSourceConnector created STOPPED on the shared Connect worker (no task runs, so
nothing is replicated and the worker does no work) whose offsets are written with ``PATCH
/offsets``: replicated up to offset 4 on 90 % of the partitions (lag 5), none on the rest (lag 10,
the whole backlog). The measurement's totals are checked against that, then everything is removed.

Run: ``make bench BENCH=mm2_lag`` (or ``.venv/bin/python bench/bench_mm2_lag.py``).
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.report import machine, write_section
from connect_offsets.clients.connect import ConnectClient, ConnectEndpoint
from connect_offsets.lag import MirrorLag, measure_mirror
from connect_offsets.models.crds import KafkaMirrorMaker2Resource
from connect_offsets.planning import mirror_targets

SIZES = (1000, 3000)
RECORDS = 10
REPLICATED_UP_TO = 4  # lag 5 on partitions with an offset
ROUNDS = 5


def stack_info() -> dict[str, Any]:
    import json

    out = subprocess.run([sys.executable, "hack/stack.py", "info"], check=True, capture_output=True, text=True)
    info: dict[str, Any] = json.loads(out.stdout)
    return info


def make_target(east: str, west: str, topic: str, source: str, target: str) -> Any:
    resource = KafkaMirrorMaker2Resource.model_validate(
        {
            "metadata": {"name": "bench", "namespace": "bench"},
            "spec": {
                "clusters": [{"alias": east, "bootstrapServers": source}, {"alias": west, "bootstrapServers": target}],
                "mirrors": [
                    {
                        "sourceCluster": east,
                        "targetCluster": west,
                        "topicsPattern": topic,
                        "sourceConnector": {
                            "state": "stopped",
                            "config": {
                                "replication.factor": 1,
                                "offset-syncs.topic.replication.factor": 1,
                                "heartbeats.replication.enabled": False,
                            },
                        },
                    }
                ],
            },
        }
    )
    return next(t for t in mirror_targets(resource, {}).targets if t.name.endswith(".MirrorSourceConnector"))


async def run_size(partitions: int, info: dict[str, Any]) -> dict[str, Any]:
    unique = uuid.uuid4().hex[:6]
    east, west, topic = f"beast{unique}", f"bwest{unique}", f"bench-lag-{unique}"
    source = info["kafka_b"]
    admin = AdminClient({"bootstrap.servers": source})
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(120)
    target = make_target(east, west, topic, source, info["kafka_a"])
    connect = httpx.AsyncClient(base_url=info["connect_url"], timeout=120)
    client = ConnectClient(ConnectEndpoint(url=info["connect_url"], timeout_seconds=120))
    try:
        producer = Producer({"bootstrap.servers": source, "linger.ms": 50})
        for partition in range(partitions):
            for i in range(RECORDS):
                producer.produce(topic, value=b"x%d" % i, partition=partition)
            producer.poll(0)
        assert producer.flush(60) == 0
        response = await connect.post(
            "/connectors", json={"name": target.name, "config": target.config, "initial_state": "STOPPED"}
        )
        response.raise_for_status()
        with_offset = [p for p in range(partitions) if p % 10 != 0]
        document = {
            "offsets": [
                {
                    "partition": {"cluster": east, "topic": topic, "partition": p},
                    "offset": {"offset": REPLICATED_UP_TO},
                }
                for p in with_offset
            ]
        }
        for _ in range(60):  # the connector needs a moment before Connect accepts offsets for it
            response = await connect.patch(f"/connectors/{target.name}/offsets", json=document)
            if response.status_code == 200:
                break
            await asyncio.sleep(1)
        response.raise_for_status()
        expected = len(with_offset) * (RECORDS - REPLICATED_UP_TO - 1) + (partitions - len(with_offset)) * RECORDS
        times: list[float] = []
        result: MirrorLag | None = None
        for _ in range(ROUNDS):
            started = time.monotonic()
            result = await measure_mirror(client, target, result, None, timeout=30)
            times.append(time.monotonic() - started)
            assert result.error is None, result.error
            assert len(result.lags) == partitions, (len(result.lags), partitions)
            assert result.total == expected, (result.total, expected)
        assert result is not None
        # steady state: every partition has an offset, so no start offsets are asked
        document = {
            "offsets": [
                {
                    "partition": {"cluster": east, "topic": topic, "partition": p},
                    "offset": {"offset": REPLICATED_UP_TO},
                }
                for p in range(partitions)
                if p % 10 == 0
            ]
        }
        (await connect.patch(f"/connectors/{target.name}/offsets", json=document)).raise_for_status()
        steady: list[float] = []
        steady_result: MirrorLag | None = None
        for _ in range(ROUNDS):
            started = time.monotonic()
            steady_result = await measure_mirror(client, target, steady_result, None, timeout=30)
            steady.append(time.monotonic() - started)
            assert steady_result.error is None, steady_result.error
            assert steady_result.total == partitions * (RECORDS - REPLICATED_UP_TO - 1)
        assert steady_result is not None
        return {
            "partitions": partitions,
            "median": statistics.median(times),
            "max": max(times),
            "requests": result.requests,
            "steady_median": statistics.median(steady),
            "steady_max": max(steady),
            "steady_requests": steady_result.requests,
            "total": result.total,
        }
    finally:
        await connect.delete(f"/connectors/{target.name}")
        await connect.aclose()
        await client.aclose()
        admin.delete_topics([topic])


async def main() -> None:
    info = stack_info()
    rows = [await run_size(size, info) for size in SIZES]
    table = "\n".join(
        f"| {r['partitions']:,} | {r['median']:.3f} / {r['max']:.3f} | {r['requests']} | "
        f"{r['steady_median']:.3f} / {r['steady_max']:.3f} | {r['steady_requests']} | {r['total']:,} |"
        for r in rows
    )
    body = f"""## MirrorMaker 2 replication lag: one measurement of a mirror (issue 11)

`make bench BENCH=mm2_lag` — {machine()}.

A topic of N partitions on Kafka B with {RECORDS} records each; a MirrorSourceConnector created STOPPED
on the shared Connect worker, offsets written with `PATCH /offsets` (up to offset {REPLICATED_UP_TO} on 90 %
of the partitions, none on the rest). `connect_offsets.lag.measure_mirror` measured {ROUNDS} times; every
result is checked (partition count, total lag). Requests per measurement = Connect `GET /offsets` +
Kafka metadata + batched ListOffsets (latest) + batched ListOffsets (earliest, only for partitions
without an offset). "Steady" = after every partition has an offset.

| Partitions | Wall time median / max (s) | Requests | Steady: median / max (s) | Requests | Total lag |
|---:|---:|---:|---:|---:|---:|
{table}
"""
    write_section("mm2_lag", body)
    print(body)


if __name__ == "__main__":
    asyncio.run(main())
