"""Benchmark: 1,000,000 source partitions through chunked PATCH, GET, ConfigMaps and restore.

What it measures (issue 6 §1), on the real stack:

1. PATCH 1,000,000 partitions to a stopped, framework-managed source connector
   (MonitorableSourceConnector from connect-runtime's test jar, which accepts any offsets) in
   bounded chunks (``ConnectClient.alter_offsets_chunked``);
2. GET them back (time, bytes) and check they equal what was sent;
3. write the document to ConfigMaps with ``OffsetsConfigMapStore`` (form, shard count, sizes) on
   the real kube-apiserver — this is the backup / ``list`` path;
4. alter every partition to other values plus 1,000 extra partitions (the "changed since" state);
5. read the backup back from the ConfigMaps and restore it: the backup's entries plus a null for
   each extra partition (``restore_entries``), chunked; GET must equal the backup again.

Peak RSS is this process's ``ru_maxrss`` after each step (it only grows, so each figure is the
peak so far); the Connect worker's peak (VmHWM) is reported too. Comparisons are streamed: an
order-independent sum of per-entry digests, so checking never holds a million Python objects.

Why a dedicated Connect worker: a million offsets live in every worker's memory (the offsets
store) and a GET of them builds a 100 MB response. The shared ``connect`` worker has a 768 MB heap
and is used by everyone's tests, so this benchmark starts its own worker (own group, own internal
topics, larger heap, free port), and removes it and its topics at the end.

Each step is a function taking a :class:`Ctx`, so an operator-driven variant (annotations on a
KafkaConnector instead of direct calls) can replace steps 3 and 5 later.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import io
import os
import resource
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from confluent_kafka.admin import AdminClient
from kubernetes import client as kube_client
from kubernetes import config as kube_config

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.integration.support import MONITORABLE_SOURCE  # noqa: E402

from bench.report import machine, write_section  # noqa: E402
from connect_offsets.clients.connect import ConnectClient, ConnectEndpoint, ConnectServerError  # noqa: E402
from connect_offsets.clients.kubernetes import KubernetesApi  # noqa: E402
from connect_offsets.clients.offsets_configmaps import OffsetsConfigMapStore  # noqa: E402
from connect_offsets.offsets.chunking import (  # noqa: E402
    ChunkLimits,
    ChunkProgress,
    canonical_partition_digest,
    document_entries,
    restore_entries,
)

#: ``bench_large_offsets.py 20000`` for a quick smoke run (printed, not recorded).
PARTITIONS = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
EXTRA = 1_000
CONNECT_HEAP = "-Xmx3g"
LIMITS = ChunkLimits()  # the defaults the operator uses


def load_stack() -> Any:
    spec = importlib.util.spec_from_file_location("stack", REPO / "hack" / "stack.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["stack"] = module  # dataclasses in it look their module up
    spec.loader.exec_module(module)
    return module


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Step:
    name: str
    seconds: float
    rss_mib: float
    detail: str


@dataclass
class Ctx:
    connect_url: str
    bootstrap: str
    connector: str
    namespace: str
    kube: KubernetesApi
    core: Any
    steps: list[Step] = field(default_factory=list)
    backup_configmap: str = "bench-offsets"
    facts: dict[str, Any] = field(default_factory=dict)

    def record(self, name: str, started: float, detail: str) -> None:
        step = Step(name, time.monotonic() - started, rss_mib(), detail)
        self.steps.append(step)
        print(f"  {name:<44} {step.seconds:8.1f} s  peak RSS {step.rss_mib:7.0f} MiB  {detail}", flush=True)


# --- documents and comparisons (streamed) -----------------------------------------------


def make_document(n: int, *, bump: int = 0, extra: int = 0) -> bytes:
    """Offsets of a per-file source connector, written entry by entry (no list of a million dicts)."""
    out = io.BytesIO()
    out.write(b'{"offsets":[')
    for i in range(n + extra):
        out.write(
            (
                f'{"," if i else ""}{{"partition":{{"filename":"/data/incoming/2026/11/{i // 1000:04d}/'
                f'events-{i:07d}.jsonl"}},"offset":{{"position":{i * 4096 + 17 + bump},"line":{i % 977}}}}}'
            ).encode()
        )
    out.write(b"]}")
    return out.getvalue()


def fingerprint(document: bytes) -> tuple[int, int]:
    """(entries, order-independent sum of entry digests): equal documents up to entry order."""
    total = count = 0
    for entry in document_entries(document)():
        digest = canonical_partition_digest(entry["partition"]) + canonical_partition_digest(entry["offset"])
        total = (total + int.from_bytes(hashlib.blake2b(digest, digest_size=16).digest(), "big")) % 2**128
        count += 1
    return count, total


# --- the dedicated Connect worker ---------------------------------------------------------


class Worker:
    """A Connect worker for this run only: own group, own internal topics, own port."""

    def __init__(self, stack: Any) -> None:
        self.stack = stack
        self.port = free_port()
        self.suffix = f"bench-{uuid.uuid4().hex[:6]}"
        self.topics = [f"connect-{kind}-{self.suffix}" for kind in ("offsets", "configs", "status")]
        self.bootstrap = f"{stack.HOST}:{stack.PORTS['kafka-a']}"
        self.url = f"http://{stack.HOST}:{self.port}"
        self.log = stack.LOG_DIR / f"connect-{self.suffix}.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        props = "\n".join(
            [
                f"bootstrap.servers={self.bootstrap}",
                f"group.id=connect-cluster-{self.suffix}",
                f"listeners=http://{self.stack.HOST}:{self.port}",
                f"rest.advertised.host.name={self.stack.HOST}",
                f"rest.advertised.port={self.port}",
                "key.converter=org.apache.kafka.connect.json.JsonConverter",
                "value.converter=org.apache.kafka.connect.json.JsonConverter",
                "key.converter.schemas.enable=false",
                "value.converter.schemas.enable=false",
                f"offset.storage.topic={self.topics[0]}",
                f"config.storage.topic={self.topics[1]}",
                f"status.storage.topic={self.topics[2]}",
                "offset.storage.replication.factor=1",
                "config.storage.replication.factor=1",
                "status.storage.replication.factor=1",
                "plugin.discovery=only_scan",
            ]
        )
        path = self.stack.write(self.stack.RUN_DIR / f"connect-{self.suffix}.properties", props + "\n")
        self.stack.write_log4j()
        cmd = self.stack.java_cmd(CONNECT_HEAP, "org.apache.kafka.connect.cli.ConnectDistributed", str(path))
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the benchmark's Connect worker exited; see {self.log}")
            try:
                if httpx.get(f"{self.url}/connectors", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(1)
        raise RuntimeError(f"the benchmark's Connect worker did not become ready in 180 s; see {self.log}")

    def peak_rss_mib(self) -> float | None:
        if self.process is None:
            return None
        try:
            for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
        except OSError:
            return None
        return None

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        for topic, future in admin.delete_topics(self.topics, operation_timeout=30).items():
            try:
                future.result()
            except Exception as error:  # a topic that was never created
                print(f"  (topic {topic} not deleted: {error})")


# --- steps ------------------------------------------------------------------------------


async def get_settled(connect: ConnectClient, ctx: Ctx, expected: int) -> bytes:
    """GET offsets (the operator's streamed client call) until Connect lists ``expected`` partitions.

    Connect 4.1.1 answers 500 while its offset store is still consuming a large write
    (ConcurrentModificationException in ConnectorOffsetBackingStore.connectorPartitions).
    """
    deadline = time.monotonic() + 300
    while True:
        try:
            body = await connect.get_offsets_raw(ctx.connector)
            if body.count(b'"partition"') == expected:  # cheap pre-check; the exact check follows
                return body
            del body
        except ConnectServerError:
            if time.monotonic() > deadline:
                raise
        if time.monotonic() > deadline:
            raise RuntimeError(f"GET offsets never listed {expected} partitions")
        await asyncio.sleep(2)


async def step_patch(ctx: Ctx, connect: ConnectClient, name: str, source: Any, expected_entries: int) -> None:
    started = time.monotonic()
    chunks: list[ChunkProgress] = []
    result = await connect.alter_offsets_chunked(ctx.connector, source, limits=LIMITS, on_chunk_done=chunks.append)
    assert result.partitions == expected_entries, (result.partitions, expected_entries)
    ctx.record(name, started, f"{result.chunks} PATCH requests of <= {LIMITS.max_entries} partitions")
    ctx.facts.setdefault("chunks", result.chunks)


async def step_get_and_check(ctx: Ctx, connect: ConnectClient, name: str, expected: tuple[int, int]) -> bytes:
    started = time.monotonic()
    body = await get_settled(connect, ctx, expected[0])
    ctx.record(name, started, f"{len(body) / 2**20:.1f} MiB of JSON")
    started = time.monotonic()
    got = await asyncio.to_thread(fingerprint, body)
    assert got == expected, f"GET differs from what was sent: {got[0]} entries vs {expected[0]}"
    ctx.record("  compare with what was sent (streamed)", started, "equal")
    return body


async def step_write_configmaps(ctx: Ctx, store: OffsetsConfigMapStore, document: bytes) -> None:
    started = time.monotonic()
    result = await store.write(ctx.namespace, ctx.backup_configmap, "offsets.json", document, pretty=False)
    ctx.facts.update(form=result.form.value, shards=len(result.shards), stored=result.stored_bytes, size=result.size)
    ctx.record(
        "write to ConfigMaps (OffsetsConfigMapStore)",
        started,
        f"{result.form.value}: {len(result.shards)} shards, {result.stored_bytes / 2**20:.1f} MiB gzip "
        f"of {result.size / 2**20:.1f} MiB",
    )


async def step_read_configmaps(ctx: Ctx, store: OffsetsConfigMapStore, expected: tuple[int, int]) -> bytes:
    started = time.monotonic()
    stored = await store.read(ctx.namespace, ctx.backup_configmap, "offsets.json")
    assert stored is not None
    ctx.record("read back from ConfigMaps (checksums verified)", started, f"{len(stored.document) / 2**20:.1f} MiB")
    assert await asyncio.to_thread(fingerprint, stored.document) == expected
    return stored.document


async def run(ctx: Ctx) -> None:
    store = OffsetsConfigMapStore(ctx.kube)
    async with ConnectClient(ConnectEndpoint(ctx.connect_url, timeout_seconds=300)) as connect:
        started = time.monotonic()
        original = make_document(PARTITIONS)
        expected = await asyncio.to_thread(fingerprint, original)
        ctx.record(f"generate {PARTITIONS:,} partitions", started, f"{len(original) / 2**20:.1f} MiB of JSON")

        await step_patch(ctx, connect, "PATCH all (chunked)", original, PARTITIONS)
        del original
        listed = await step_get_and_check(ctx, connect, "GET offsets", expected)
        await step_write_configmaps(ctx, store, listed)
        del listed

        changed = make_document(PARTITIONS, bump=1, extra=EXTRA)
        changed_fp = await asyncio.to_thread(fingerprint, changed)
        await step_patch(ctx, connect, f"PATCH all changed + {EXTRA:,} new (chunked)", changed, PARTITIONS + EXTRA)
        del changed
        current = await step_get_and_check(ctx, connect, "GET offsets (changed)", changed_fp)

        backup = await step_read_configmaps(ctx, store, expected)
        await step_patch(
            ctx,
            connect,
            "restore: PATCH backup + nulls (chunked)",
            restore_entries(backup, current),
            PARTITIONS + EXTRA,
        )
        del backup, current
        await step_get_and_check(ctx, connect, "GET offsets after restore", expected)


def main() -> int:
    stack = load_stack()
    info = stack.info()
    kubeconfig = str(info["kubeconfig"])
    api_client = kube_config.new_client_from_config(config_file=kubeconfig)
    import urllib3

    urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)  # the local stack's self-signed cert
    core = kube_client.CoreV1Api(api_client)
    namespace = f"bench-large-offsets-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": namespace}})
    worker = Worker(stack)
    baseline = rss_mib()
    ctx: Ctx | None = None
    try:
        print(f"== starting a dedicated Connect worker on {worker.url} ({CONNECT_HEAP})", flush=True)
        worker.start()
        connector = f"bench-large-{uuid.uuid4().hex[:6]}"
        config = {"connector.class": MONITORABLE_SOURCE, "tasks.max": "1", "topic": f"{connector}-topic"}
        response = httpx.post(
            f"{worker.url}/connectors",
            json={"name": connector, "config": config, "initial_state": "STOPPED"},
            timeout=60,
        )
        response.raise_for_status()
        ctx = Ctx(worker.url, worker.bootstrap, connector, namespace, KubernetesApi(api_client), core)
        total = time.monotonic()
        load_before = os.getloadavg()[0]
        asyncio.run(run(ctx))
        elapsed = time.monotonic() - total
        ctx.facts["load"] = (load_before, os.getloadavg()[0])
        report(ctx, elapsed, baseline, worker.peak_rss_mib())
    finally:
        worker.stop()
        core.delete_namespace(namespace)
    return 0


def report(ctx: Ctx, elapsed: float, baseline: float, worker_rss: float | None) -> None:
    rows = "\n".join(f"| {s.name.strip()} | {s.seconds:.1f} | {s.rss_mib:.0f} | {s.detail} |" for s in ctx.steps)
    facts = ctx.facts
    body = f"""## Large offsets: {PARTITIONS:,} source partitions (issue 6 §1)

`make bench BENCH=large_offsets` — {machine()}; 1-minute load average {facts["load"][0]:.1f} at the
start and {facts["load"][1]:.1f} at the end (other work shared the 2 cores; times are wall times).

A stopped MonitorableSourceConnector on a dedicated Connect 4.1 worker ({CONNECT_HEAP}, own group and
topics; the shared worker is not touched). Chunks: at most {LIMITS.max_entries:,} partitions or
{LIMITS.max_bytes // 2**20} MiB per PATCH ({facts.get("chunks")} requests for {PARTITIONS:,} partitions).
The document is stored as **{facts.get("form")}**: {facts.get("shards")} shard ConfigMaps holding
{facts.get("stored", 0) / 2**20:.1f} MiB of gzip for {facts.get("size", 0) / 2**20:.1f} MiB of JSON.
Every GET is compared with what was sent (entry count and an order-independent digest sum).

| Step | Wall time (s) | Peak RSS so far (MiB) | Detail |
|---|---:|---:|---|
{rows}

Total {elapsed:.0f} s. Python process peak RSS: **{ctx.steps[-1].rss_mib:.0f} MiB** (baseline after imports
{baseline:.0f} MiB) — it holds at most the document bytes of two states at once (the restore needs
the backup and the current offsets) plus one chunk; entries are streamed with ijson, never all
parsed. Connect worker peak RSS (VmHWM): {f"{worker_rss:.0f} MiB" if worker_rss else "n/a"}.
Connect 4.1.1 answers `GET /offsets` with 500 while its offset store still consumes a large
write (`ConcurrentModificationException` in `ConnectorOffsetBackingStore.connectorPartitions`);
the GET times above include those retries.
"""
    if PARTITIONS == 1_000_000:
        write_section("large_offsets", body)
    else:  # a smoke run with another size (bench_large_offsets.py N) is printed, not recorded
        print("(not recorded in bench/README.md: only the 1,000,000-partition run is)")
    print(body)


if __name__ == "__main__":
    sys.exit(main())
