"""A Connect worker of its own, for the load test and the load benchmarks.

Why not the shared ``connect`` worker: hundreds of connectors created, stopped, resumed and
deleted make a single worker rebalance for minutes; every other engineer's test on the shared
worker would meanwhile get ``500 Request cannot be completed because a rebalance is expected``, and
deleting 200 connectors one by one takes the worker about a second each. A worker with its own
group and internal topics is as real (same jars, same settings as the stack's worker, from
``hack/stack.py``), its request log counts only our requests, and removing it (stop the JVM,
delete its three topics) removes every connector at once.
"""

from __future__ import annotations

import importlib.util
import json
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

__all__ = ["DedicatedWorker", "free_port", "stack_module", "stack_versions"]

REPO = Path(__file__).resolve().parents[2]


def stack_module() -> ModuleType:
    """hack/stack.py as a module: its components, ``start``/``stop``, ports and folders."""
    spec = importlib.util.spec_from_file_location("connect_offsets_stack", REPO / "hack" / "stack.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)  # its dataclasses look their module up
    spec.loader.exec_module(sys.modules[spec.name])
    return sys.modules[spec.name]


def stack_versions() -> dict[str, str]:
    """hack/versions.env as hack/stack.py reads it, shell quotes removed (``CONNECT_COMPAT_VERSIONS``)."""
    return {key: value.strip('"') for key, value in stack_module().VERSIONS.items()}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class DedicatedWorker:
    """``start()`` a single-worker Connect cluster; ``url``, ``log`` (its request log), ``stop()``."""

    def __init__(
        self,
        heap: str = "-Xmx768m",
        name: str = "load",
        extra_props: tuple[str, ...] = (),
        scheme: str = "http",
        probe_options: dict[str, Any] | None = None,
        version: str | None = None,
        kafka: str = "kafka-a",
    ) -> None:
        """``scheme="https"`` with ``listeners.https.ssl.*`` in ``extra_props`` serves TLS;
        ``probe_options`` (httpx keywords: ``verify``, ``cert``) let the readiness probe through.
        ``version``: a Kafka Connect release other than the stack's, from its own jars
        (``hack/fetch-kafka.sh VERSION``), still against the stack's brokers (test_connect_versions).
        ``kafka``: the stack's Kafka cluster it uses, ``kafka-a`` (the shared worker's) or ``kafka-b``
        (a second site, for MirrorMaker 2 failover tests)."""
        self.stack = stack_module()
        self.version: str = version or self.stack.VERSIONS["KAFKA_VERSION"]
        self.libs: Path = self.stack.kafka_libs(self.version)
        self.heap = heap
        self.extra_props = extra_props
        self.scheme = scheme
        self.probe_options = probe_options or {}
        self.port = free_port()
        self.suffix = f"{name}-{uuid.uuid4().hex[:6]}"
        self.topics = [f"connect-{kind}-{self.suffix}" for kind in ("offsets", "configs", "status")]
        self.bootstrap = f"{self.stack.HOST}:{self.stack.PORTS[kafka]}"
        self.url = f"{scheme}://{self.stack.HOST}:{self.port}"
        self.log: Path = self.stack.LOG_DIR / f"connect-{self.suffix}.log"
        #: The worker config (written by ``start()``): what ``connect-offsets export|import -w`` reads.
        self.config_path: Path = self.stack.RUN_DIR / f"connect-{self.suffix}.properties"
        self.process: subprocess.Popen[bytes] | None = None
        self.seeded: list[str] = []

    def seed_stopped_connectors(self, configs: dict[str, dict[str, str]]) -> None:
        """Write ``configs`` (connector name -> config) into the config topic before ``start()``.

        The records are those Kafka Connect 4.1's ``KafkaConfigBackingStore`` itself writes for a
        connector created with ``initial_state: STOPPED`` and then stopped (the worker's internal
        converter is a JsonConverter without schemas, keys are plain strings):

        * ``target-state-<name>``: ``{"state": "PAUSED", "state.v2": "STOPPED"}`` (``serializeTargetState``:
          ``state`` is PAUSED for workers older than 3.5, which know no STOPPED; ``state.v2`` is read first);
        * ``connector-<name>``: ``{"properties": {...}}`` (``putConnectorConfig``);
        * ``commit-<name>``: ``{"tasks": 0}`` (``putTaskConfigs`` with no task configs: a stopped connector).

        The worker then starts with every connector STOPPED and no task, in the time it takes to read
        the topic, instead of one REST create (and a rebalance) per connector: 1,000 creations
        through REST took 438 s. ``start()`` waits until the worker lists all of them STOPPED.
        The topic is created as the worker would (one partition, compacted); one idempotent producer
        keeps the records in order (a commit record before its connector would be ignored).
        """
        if self.process is not None:
            raise RuntimeError("seed the config topic before start(): a running worker would rebalance per record")
        topic = self.topics[1]
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        for future in admin.create_topics(
            [NewTopic(topic, num_partitions=1, replication_factor=1, config={"cleanup.policy": "compact"})],
            operation_timeout=30,
        ).values():
            future.result()
        producer = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True, "linger.ms": 50})
        failures: list[str] = []

        def delivered(error: Any, message: Any) -> None:
            if error is not None:
                failures.append(f"{message.key()!r}: {error}")

        for name, config in configs.items():
            for key, value in (
                (f"target-state-{name}", {"state": "PAUSED", "state.v2": "STOPPED"}),
                (f"connector-{name}", {"properties": config}),
                (f"commit-{name}", {"tasks": 0}),
            ):
                while True:
                    try:
                        producer.produce(topic, key=key.encode(), value=json.dumps(value).encode(), callback=delivered)
                        break
                    except BufferError:  # the local queue is full: let deliveries drain it
                        producer.poll(0.5)
            producer.poll(0)
        left = producer.flush(60)
        if left or failures:
            raise RuntimeError(f"seeding {topic}: {left} records undelivered, failures {failures[:3]}")
        self.seeded = list(configs)

    def start(self, timeout: float = 180) -> None:
        props = [
            f"bootstrap.servers={self.bootstrap}",
            f"group.id=connect-cluster-{self.suffix}",
            f"listeners={self.scheme}://{self.stack.HOST}:{self.port}",
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
            "offset.flush.interval.ms=1000",
            "scheduled.rebalance.max.delay.ms=1000",
            "plugin.discovery=only_scan",
            *self.extra_props,
        ]
        path = self.stack.write(self.config_path, "\n".join(props) + "\n")
        self.stack.write_log4j()
        cmd = self.stack.java_cmd(
            self.heap, "org.apache.kafka.connect.cli.ConnectDistributed", str(path), libs=self.libs
        )
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        # One client for the whole wait: a client per probe loads the CA bundle each time (~30 ms of
        # CPU, every 0.25 s for the minute a worker takes to start on a busy machine).
        with httpx.Client(**self.probe_options) as probe:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    raise RuntimeError(f"the dedicated Connect worker exited; see {self.log}")
                try:
                    if self._ready(probe):
                        return
                except httpx.HTTPError:
                    pass
                time.sleep(0.25)
        raise RuntimeError(f"the dedicated Connect worker was not ready after {timeout:.0f} s; see {self.log}")

    def _ready(self, probe: httpx.Client) -> bool:
        """Answering, and (seeded) listing every seeded connector STOPPED."""
        if not self.seeded:
            return probe.get(f"{self.url}/connectors", timeout=2).status_code == 200
        response = probe.get(f"{self.url}/connectors?expand=status", timeout=30)
        if response.status_code != 200:
            return False
        listed = response.json()
        return all(
            (((listed.get(name) or {}).get("status") or {}).get("connector") or {}).get("state") == "STOPPED"
            for name in self.seeded
        )

    def rss_mib(self, field: str = "VmHWM") -> float | None:
        if self.process is None:
            return None
        try:
            for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
                if line.startswith(f"{field}:"):
                    return int(line.split()[1]) / 1024
        except OSError:
            return None
        return None

    def halt(self) -> None:
        """Stop the JVM only: its internal topics (connectors, offsets) stay for a later ``start()``."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def stop(self) -> None:
        """Stop the JVM and delete its internal topics: its connectors are gone with them."""
        self.halt()
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        for future in admin.delete_topics(self.topics, operation_timeout=30).values():
            try:
                future.result()
            except Exception as error:  # a topic that was never created
                print(f"(internal topic not deleted: {error})")
