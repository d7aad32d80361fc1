#!/usr/bin/env python3
"""Start, stop and describe the local stack: etcd, kube-apiserver, kube-controller-manager,
two single-node KRaft Kafka clusters and Kafka Connect workers, all on 127.0.0.1; on demand, a third
Kafka cluster and an exactly-once Connect worker on it for MirrorMaker 2's harder cases
(``up connect-eos``), and a Spark standalone master and worker for the offsets pipeline
(``up spark-worker``).

Why a script of its own (stdlib only): it must run before the project's virtualenv exists,
from ``make`` and from the pytest session fixture alike, and every test must see the same
ports and credentials. Binaries and jars come from the project cache (see
``hack/build-go-tools.sh`` and ``hack/fetch-kafka.sh``; Spark is the installed pyspark's own distribution,
``$SPARK_HOME`` or the project's .venv); runtime state (data, logs, pid
files, kubeconfig) lives in one stack folder that ``down`` removes.

Usage::

    stack.py up [COMPONENT ...]     # default: the core set; idempotent
    stack.py down                   # stops every process it started, removes data
    stack.py stop COMPONENT ...     # stop some components (data kept, for fault tests)
    stack.py status                 # which components run, where their logs are
    stack.py env                    # shell exports (KUBECONFIG, CONNECT_URL, ...)
    stack.py info                   # the same as JSON, for tools and tests
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import fcntl
import http.client
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

HACK_DIR = Path(__file__).resolve().parent
REPO_ROOT = HACK_DIR.parent


def _read_versions() -> dict[str, str]:
    versions: dict[str, str] = {}
    for line in (HACK_DIR / "versions.env").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            versions[key] = value
    return versions


VERSIONS = _read_versions()
CACHE_DIR = Path(os.environ.get("CONNECT_OFFSETS_CACHE", Path.home() / ".cache" / "connect-offsets"))
BIN_DIR = CACHE_DIR / "bin"


def kafka_libs(version: str) -> Path:
    """Where hack/fetch-kafka.sh puts one Kafka version's jars."""
    return CACHE_DIR / f"kafka-{version}" / "libs"


KAFKA_LIBS = kafka_libs(VERSIONS["KAFKA_VERSION"])
STACK_DIR = Path(os.environ.get("CONNECT_OFFSETS_STACK_DIR", CACHE_DIR / "stack"))
LOG_DIR = STACK_DIR / "logs"
RUN_DIR = STACK_DIR / "run"

HOST = "127.0.0.1"
PORTS = {
    "etcd": 23790,
    "etcd-peer": 23800,
    "apiserver": 26443,
    "controller-manager": 20257,
    "kafka-a": 19092,
    "kafka-a-controller": 19093,
    "kafka-b": 29092,
    "kafka-b-controller": 29093,
    "kafka-c": 39092,
    "kafka-c-controller": 39093,
    "connect": 18083,
    "connect-auth": 18084,
    "connect-aux": 18085,
    "connect-offline": 18086,
    "connect-standalone": 18087,
    "connect-fault": 18088,
    "connect-fault-2": 18089,
    "connect-eos": 18090,
    "spark-master": 17077,
    "spark-master-ui": 18070,
    "spark-worker-ui": 18071,
}
# Heaps are capped: the JVM defaults (1/4 of RAM) would take 6 GiB per process here.
KAFKA_HEAP = "-Xmx512m"
CONNECT_HEAP = "-Xmx768m"
CORE = ["etcd", "apiserver", "controller-manager", "kafka-a", "kafka-b", "connect"]
START_TIMEOUT_S = 120.0


class StackError(Exception):
    """A component failed; the message names it and the log to read."""


@dataclass
class Component:
    name: str
    ports: list[int]
    depends: list[str]
    prepare: Callable[[], list[str]]  # returns the command line
    ready: Callable[[], bool]
    env: dict[str, str] = field(default_factory=dict)

    @property
    def log(self) -> Path:
        return LOG_DIR / f"{self.name}.log"

    @property
    def pidfile(self) -> Path:
        return RUN_DIR / f"{self.name}.pid"


# ---------------------------------------------------------------------------------------
# Helpers


def port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.3)
        return sock.connect_ex((HOST, port)) == 0


def http_ok(url: str, token: str | None = None, auth: tuple[str, str] | None = None) -> bool:
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    if auth:
        raw = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        request.add_header("Authorization", f"Basic {raw}")
    context = ssl._create_unverified_context()  # the apiserver's self-signed serving cert
    try:
        with urllib.request.urlopen(request, timeout=2, context=context) as response:
            return bool(200 <= response.status < 300)
    except (urllib.error.URLError, ConnectionError, TimeoutError, http.client.HTTPException, OSError):
        return False


def read_pid(component: Component) -> int | None:
    try:
        pid = int(component.pidfile.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        return pid
    return pid


def java_cmd(
    heap: str, main: str, *args: str, extra_props: list[str] | None = None, libs: Path = KAFKA_LIBS
) -> list[str]:
    """``libs``: another Kafka version's jars (``kafka_libs(version)``), for a Connect worker of that version."""
    if not (libs / ".complete").exists():
        raise StackError(f"Kafka jars missing in {libs}: run hack/fetch-kafka.sh {libs.parent.name[6:]} (make deps)")
    java = shutil.which("java")
    if java is None:
        raise StackError("java is not installed (need JDK 17+)")
    log4j = RUN_DIR / "log4j2.properties"
    return [
        java,
        heap,
        "-XX:+UseSerialGC",  # two cores: fewer GC threads competing with the tests
        "-XX:TieredStopAtLevel=1",  # faster start-up matters more than peak speed here
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={log4j}",
        *(extra_props or []),
        "-cp",
        f"{libs}/*",
        main,
        *args,
    ]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def kafka_cluster_id() -> str:
    """A random cluster id as Kafka makes them (``Uuid.randomUuid``: 16 bytes, URL-safe base64), and
    like Kafka never one that starts with "-", which a command line reads as an option (a stack
    whose id did failed to start: kafka-storage "argument --cluster-id/-t: expected one argument")."""
    while True:
        cluster_id = base64.urlsafe_b64encode(secrets.token_bytes(16)).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def state() -> dict[str, str]:
    """Credentials and cluster ids generated once per stack (random, never committed).

    A stack made before a value existed (kafka-c's cluster id came later) gets the missing ones added
    and kept; the values already there never change, since running components use them."""
    path = RUN_DIR / "state.json"
    data: dict[str, str] = json.loads(path.read_text()) if path.exists() else {}
    wanted: dict[str, Callable[[], str]] = {
        "admin_token": lambda: secrets.token_hex(16),
        "connect_auth_user": lambda: "connect-admin",
        "connect_auth_password": lambda: secrets.token_hex(12),
        "kafka_a_cluster_id": kafka_cluster_id,
        "kafka_b_cluster_id": kafka_cluster_id,
        "kafka_c_cluster_id": kafka_cluster_id,
    }
    missing = [key for key in wanted if key not in data]
    if missing:
        data.update({key: wanted[key]() for key in missing})
        # Whole or not at all: every test process reads this file (``info``) while another may write it.
        partial = write(path.with_name(f"{path.name}.{os.getpid()}"), json.dumps(data, indent=2))
        partial.chmod(0o600)
        partial.replace(path)
    return data


def http_json(url: str) -> object:
    """The JSON an HTTP endpoint answers, or None when it does not (yet) answer."""
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return json.loads(response.read())
    except (urllib.error.URLError, ConnectionError, TimeoutError, http.client.HTTPException, OSError, ValueError):
        return None


def kubeconfig_path() -> Path:
    return STACK_DIR / "kubeconfig"


def binary(name: str) -> str:
    path = BIN_DIR / name
    if not path.exists():
        raise StackError(f"{name} missing in {BIN_DIR}: run hack/build-go-tools.sh (make deps)")
    return str(path)


# ---------------------------------------------------------------------------------------
# Components


def prepare_etcd() -> list[str]:
    data = STACK_DIR / "etcd-data"
    data.mkdir(parents=True, exist_ok=True)
    return [
        binary("etcd"),
        "--name=stack",
        f"--data-dir={data}",
        f"--listen-client-urls=http://{HOST}:{PORTS['etcd']}",
        f"--advertise-client-urls=http://{HOST}:{PORTS['etcd']}",
        f"--listen-peer-urls=http://{HOST}:{PORTS['etcd-peer']}",
        f"--initial-advertise-peer-urls=http://{HOST}:{PORTS['etcd-peer']}",
        f"--initial-cluster=stack=http://{HOST}:{PORTS['etcd-peer']}",
        "--unsafe-no-fsync",  # test data: durability is not worth the fsync latency
        "--log-level=warn",
    ]


def prepare_apiserver() -> list[str]:
    pki = STACK_DIR / "pki"
    pki.mkdir(parents=True, exist_ok=True)
    sa_key = pki / "sa.key"
    if not sa_key.exists():
        subprocess.run(["openssl", "genrsa", "-out", str(sa_key), "2048"], check=True, capture_output=True)
    tokens = write(pki / "tokens.csv", f'{state()["admin_token"]},admin,admin-uid,"system:masters"\n')
    tokens.chmod(0o600)
    write_kubeconfig()
    return [
        binary("kube-apiserver"),
        f"--etcd-servers=http://{HOST}:{PORTS['etcd']}",
        f"--cert-dir={pki}",
        f"--secure-port={PORTS['apiserver']}",
        f"--bind-address={HOST}",
        # Without a default route the apiserver cannot pick an address by itself.
        f"--advertise-address={HOST}",
        "--service-cluster-ip-range=10.0.0.0/24",
        "--allow-privileged=true",
        "--authorization-mode=RBAC",
        f"--token-auth-file={tokens}",
        f"--service-account-issuer=https://{HOST}:{PORTS['apiserver']}",
        f"--service-account-key-file={sa_key}",
        f"--service-account-signing-key-file={sa_key}",
        # No kubelet runs pods here; the plugin would refuse pods without a default SA.
        "--disable-admission-plugins=ServiceAccount",
        "--enable-priority-and-fairness=false",
        "--v=0",
    ]


def write_kubeconfig() -> None:
    token = state()["admin_token"]
    server = f"https://{HOST}:{PORTS['apiserver']}"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "stack", "cluster": {"server": server, "insecure-skip-tls-verify": True}}],
        "users": [{"name": "admin", "user": {"token": token}}],
        "contexts": [{"name": "stack", "context": {"cluster": "stack", "user": "admin"}}],
        "current-context": "stack",
    }
    path = write(kubeconfig_path(), json.dumps(config, indent=2))
    path.chmod(0o600)


def apiserver_ready() -> bool:
    return http_ok(f"https://{HOST}:{PORTS['apiserver']}/readyz", token=state()["admin_token"])


def prepare_controller_manager() -> list[str]:
    return [
        binary("kube-controller-manager"),
        f"--kubeconfig={kubeconfig_path()}",
        f"--authentication-kubeconfig={kubeconfig_path()}",
        f"--authorization-kubeconfig={kubeconfig_path()}",
        f"--bind-address={HOST}",
        f"--secure-port={PORTS['controller-manager']}",
        "--leader-elect=false",
        # Only what tests rely on: owner-reference GC, namespace deletion, default SAs.
        "--controllers=garbage-collector-controller,namespace-controller,serviceaccount-controller",
        "--concurrent-gc-syncs=5",
        "--v=0",
    ]


def controller_manager_ready() -> bool:
    return http_ok(f"https://{HOST}:{PORTS['controller-manager']}/healthz")


def prepare_kafka(which: str) -> Callable[[], list[str]]:
    def prepare() -> list[str]:
        port = PORTS[f"kafka-{which}"]
        controller = PORTS[f"kafka-{which}-controller"]
        data = STACK_DIR / f"kafka-{which}-data"
        props = write(
            RUN_DIR / f"kafka-{which}.properties",
            "\n".join(
                [
                    "process.roles=broker,controller",
                    "node.id=1",
                    f"controller.quorum.voters=1@{HOST}:{controller}",
                    f"listeners=PLAINTEXT://{HOST}:{port},CONTROLLER://{HOST}:{controller}",
                    f"advertised.listeners=PLAINTEXT://{HOST}:{port}",
                    "controller.listener.names=CONTROLLER",
                    "inter.broker.listener.name=PLAINTEXT",
                    "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
                    f"log.dirs={data}",
                    "num.partitions=1",
                    "offsets.topic.replication.factor=1",
                    "offsets.topic.num.partitions=5",
                    "transaction.state.log.replication.factor=1",
                    "transaction.state.log.min.isr=1",
                    "transaction.state.log.num.partitions=5",
                    "share.coordinator.state.topic.replication.factor=1",
                    "share.coordinator.state.topic.min.isr=1",
                    "group.initial.rebalance.delay.ms=0",
                    "auto.create.topics.enable=true",
                    "log.segment.bytes=16777216",
                    "",
                ]
            ),
        )
        if not (data / "meta.properties").exists():
            data.mkdir(parents=True, exist_ok=True)
            cluster_id = state()[f"kafka_{which}_cluster_id"]
            cmd = java_cmd(
                "-Xmx256m", "kafka.tools.StorageTool", "format", f"--cluster-id={cluster_id}", "-c", str(props)
            )
            result = subprocess.run(cmd, capture_output=True, text=True)
            if result.returncode != 0:
                raise StackError(f"kafka-{which}: storage format failed:\n{result.stdout}{result.stderr}")
        return java_cmd(KAFKA_HEAP, "kafka.Kafka", str(props))

    return prepare


def kafka_ready(which: str) -> Callable[[], bool]:
    def ready() -> bool:
        if not port_open(PORTS[f"kafka-{which}"]):
            return False
        log = LOG_DIR / f"kafka-{which}.log"
        return log.exists() and "Kafka Server started" in log.read_text(errors="replace")

    return ready


def prepare_connect(
    name: str,
    *,
    basic_auth: bool = False,
    group: str | None = None,
    settings: list[str] | None = None,
    kafka: str = "kafka-a",
) -> Callable[[], list[str]]:
    """A distributed worker; ``group`` (a suffix) puts several workers in one Connect cluster; ``settings``
    (``key=value``) override the defaults below; ``kafka``: the stack's Kafka cluster it uses."""

    def prepare() -> list[str]:
        port = PORTS[name]
        suffix = "" if name == "connect" else f"-{group or name.removeprefix('connect-')}"
        lines = [
            f"bootstrap.servers={HOST}:{PORTS[kafka]}",
            f"group.id=connect-cluster{suffix}",
            f"listeners=http://{HOST}:{port}",
            f"rest.advertised.host.name={HOST}",
            f"rest.advertised.port={port}",
            "key.converter=org.apache.kafka.connect.json.JsonConverter",
            "value.converter=org.apache.kafka.connect.json.JsonConverter",
            "key.converter.schemas.enable=false",
            "value.converter.schemas.enable=false",
            f"offset.storage.topic=connect-offsets{suffix}",
            f"config.storage.topic=connect-configs{suffix}",
            f"status.storage.topic=connect-status{suffix}",
            "offset.storage.replication.factor=1",
            "config.storage.replication.factor=1",
            "status.storage.replication.factor=1",
            "offset.flush.interval.ms=1000",
            # Rebalances on join/leave are fast on a single worker: tests restart workers.
            "scheduled.rebalance.max.delay.ms=1000",
            "connector.client.config.override.policy=All",
            "plugin.discovery=only_scan",
            *(settings or []),
        ]
        extra: list[str] = []
        if basic_auth:
            creds = state()
            users = write(
                RUN_DIR / f"{name}-users.properties",
                f"{creds['connect_auth_user']}: {creds['connect_auth_password']}\n",
            )
            users.chmod(0o600)
            jaas = write(
                RUN_DIR / f"{name}-jaas.conf",
                "KafkaConnect {\n"
                "  org.apache.kafka.connect.rest.basic.auth.extension.PropertyFileLoginModule required\n"
                f'  file="{users}";\n'
                "};\n",
            )
            lines.append(
                "rest.extension.classes="
                "org.apache.kafka.connect.rest.basic.auth.extension.BasicAuthSecurityRestExtension"
            )
            extra.append(f"-Djava.security.auth.login.config={jaas}")
        props = write(RUN_DIR / f"{name}.properties", "\n".join(lines) + "\n")
        return java_cmd(CONNECT_HEAP, "org.apache.kafka.connect.cli.ConnectDistributed", str(props), extra_props=extra)

    return prepare


def prepare_connect_standalone() -> list[str]:
    """A ConnectStandalone worker: offsets in a file under the run folder (kept across restarts)."""
    name = "connect-standalone"
    port = PORTS[name]
    lines = [
        f"bootstrap.servers={HOST}:{PORTS['kafka-a']}",
        f"listeners=http://{HOST}:{port}",
        f"rest.advertised.host.name={HOST}",
        f"rest.advertised.port={port}",
        "key.converter=org.apache.kafka.connect.json.JsonConverter",
        "value.converter=org.apache.kafka.connect.json.JsonConverter",
        "key.converter.schemas.enable=false",
        "value.converter.schemas.enable=false",
        f"offset.storage.file.filename={RUN_DIR / 'connect-standalone.offsets'}",
        "offset.flush.interval.ms=1000",
        "plugin.discovery=only_scan",
    ]
    props = write(RUN_DIR / f"{name}.properties", "\n".join(lines) + "\n")
    return java_cmd(CONNECT_HEAP, "org.apache.kafka.connect.cli.ConnectStandalone", str(props))


def connect_ready(name: str, *, basic_auth: bool = False) -> Callable[[], bool]:
    def ready() -> bool:
        creds = state()
        auth = (creds["connect_auth_user"], creds["connect_auth_password"]) if basic_auth else None
        # /connectors answers only once the worker joined its group and read the config topic.
        return http_ok(f"http://{HOST}:{PORTS[name]}/connectors", auth=auth)

    return ready


# ---------------------------------------------------------------------------------------
# Spark standalone (the offsets pipeline on a real cluster; docs/pipeline.md)


def default_spark_home() -> Path | None:
    """A Spark distribution: ``$SPARK_HOME``, else the pyspark the Makefile installed in .venv (pip's
    pyspark is one: ``bin/spark-class``, ``bin/spark-submit`` and ``jars/``)."""
    if os.environ.get("SPARK_HOME"):
        return Path(os.environ["SPARK_HOME"])
    found = sorted(REPO_ROOT.glob(".venv/lib/python3*/site-packages/pyspark/bin/spark-class"))
    return found[-1].parent.parent if found else None


def spark_version(home: Path) -> str | None:
    """The Spark version of a distribution, from its spark-core jar (pip's pyspark has no RELEASE file)."""
    for jar in (home / "jars").glob("spark-core_*.jar"):
        return jar.stem.rsplit("-", 1)[1]  # spark-core_2.13-4.2.0
    return None


def spark_components(
    suffix: str = "",
    *,
    master_port: int = PORTS["spark-master"],
    master_ui_port: int = PORTS["spark-master-ui"],
    worker_ui_port: int = PORTS["spark-worker-ui"],
    home: Path | None = None,
) -> tuple[Component, Component]:
    """A standalone master and one worker (1 core, 1 GiB for executors), started from the Spark
    distribution ``home`` with ``spark-class``: ``spark-master{suffix}`` and ``spark-worker{suffix}``
    (their options take separate values: ``--port 7077``, not ``--port=7077``).

    The stack's own pair (``up spark-worker``) has fixed ports; tests make pairs of their own with free
    ports and a suffix (tests/integration/test_pipeline_spark_cluster.py). The worker's executors log
    into its work folder under the run folder (``<work>/<app-id>/<executor-id>/stderr``); the master's
    ``/json/`` on its UI port lists workers and applications.
    """
    spark_home = home or default_spark_home()
    env = {
        # Loopback only: the master, worker, executors and the driver all bind and advertise 127.0.0.1.
        "SPARK_LOCAL_IP": HOST,
        "SPARK_DAEMON_MEMORY": "512m",
        "SPARK_DAEMON_JAVA_OPTS": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1",  # as the stack's other JVMs
        **({"SPARK_HOME": str(spark_home)} if spark_home else {}),
    }
    master_name, worker_name = f"spark-master{suffix}", f"spark-worker{suffix}"
    master_url = f"spark://{HOST}:{master_port}"

    def spark_class() -> str:
        if spark_home is None or not (spark_home / "bin" / "spark-class").is_file():
            raise StackError(
                f"no Spark distribution (bin/spark-class) at {spark_home or '$SPARK_HOME or .venv'}: "
                "install the [spark] extra (make venv) or set SPARK_HOME"
            )
        found, pinned = spark_version(spark_home), VERSIONS["SPARK_VERSION"]
        if found != pinned:
            raise StackError(f"Spark at {spark_home} is {found}, hack/versions.env pins {pinned}: run make venv")
        return str(spark_home / "bin" / "spark-class")

    def prepare_master() -> list[str]:
        return [
            spark_class(),
            "org.apache.spark.deploy.master.Master",
            *("--host", HOST, "--port", str(master_port), "--webui-port", str(master_ui_port)),
        ]

    def prepare_worker() -> list[str]:
        work = RUN_DIR / f"{worker_name}-work"
        work.mkdir(parents=True, exist_ok=True)
        return [
            spark_class(),
            "org.apache.spark.deploy.worker.Worker",
            *("--host", HOST, "--webui-port", str(worker_ui_port), "--work-dir", str(work)),
            *("--cores", "1", "--memory", "1g"),  # one executor of Spark's default 1g
            master_url,
        ]

    def master_state() -> dict[str, object]:
        answer = http_json(f"http://{HOST}:{master_ui_port}/json/")
        return answer if isinstance(answer, dict) else {}

    def worker_registered() -> bool:
        workers = master_state().get("workers")
        return isinstance(workers, list) and any(
            w.get("state") == "ALIVE" and str(w.get("webuiaddress", "")).endswith(f":{worker_ui_port}") for w in workers
        )

    master = Component(
        master_name,
        [master_port, master_ui_port],
        [],
        prepare_master,
        lambda: master_state().get("status") == "ALIVE",
        env=env,
    )
    worker = Component(worker_name, [worker_ui_port], [master_name], prepare_worker, worker_registered, env=env)
    return master, worker


#: Workers the fault tests kill and restart: plugins found through their ServiceLoader manifests
#: (KIP-898) instead of a reflective scan of every jar, which takes 20 s of the start-up here.
FAST_RESTART = ["plugin.discovery=service_load"]

#: The exactly-once worker (KIP-618): every source task writes its records and its offsets in one
#: transaction per batch, so MirrorMaker 2's checkpoints and mirrored records carry transaction
#: markers, and the leader fences zombie tasks through the config topic with a transactional producer
#: too. Kafka C (single broker) already has a transaction state log of replication factor 1
#: (prepare_kafka). Plugins through their ServiceLoader manifests: it starts in about half the time.
EXACTLY_ONCE = ["exactly.once.source.support=enabled", *FAST_RESTART]

COMPONENTS: dict[str, Component] = {
    c.name: c
    for c in [
        Component(
            "etcd",
            [PORTS["etcd"], PORTS["etcd-peer"]],
            [],
            prepare_etcd,
            lambda: http_ok(f"http://{HOST}:{PORTS['etcd']}/health"),
        ),
        Component("apiserver", [PORTS["apiserver"]], ["etcd"], prepare_apiserver, apiserver_ready),
        Component(
            "controller-manager",
            [PORTS["controller-manager"]],
            ["apiserver"],
            prepare_controller_manager,
            controller_manager_ready,
        ),
        Component("kafka-a", [PORTS["kafka-a"], PORTS["kafka-a-controller"]], [], prepare_kafka("a"), kafka_ready("a")),
        Component("kafka-b", [PORTS["kafka-b"], PORTS["kafka-b-controller"]], [], prepare_kafka("b"), kafka_ready("b")),
        # On demand, for MirrorMaker 2 tests that need a third site (a chain of two mirrors: MirrorMaker 2
        # never mirrors a topic back to a cluster it came from, so two clusters make one hop at most)
        # and for the exactly-once worker below, whose Kafka it is.
        Component("kafka-c", [PORTS["kafka-c"], PORTS["kafka-c-controller"]], [], prepare_kafka("c"), kafka_ready("c")),
        Component("connect", [PORTS["connect"]], ["kafka-a"], prepare_connect("connect"), connect_ready("connect")),
        Component(
            "connect-auth",
            [PORTS["connect-auth"]],
            ["kafka-a"],
            prepare_connect("connect-auth", basic_auth=True),
            connect_ready("connect-auth", basic_auth=True),
        ),
        Component(
            "connect-aux",
            [PORTS["connect-aux"]],
            ["kafka-a"],
            prepare_connect("connect-aux"),
            connect_ready("connect-aux"),
        ),
        # On demand, for the offline offsets tool's tests, which stop and start them freely:
        # a distributed worker with its own group and -offline topics, and a standalone worker.
        Component(
            "connect-offline",
            [PORTS["connect-offline"]],
            ["kafka-a"],
            prepare_connect("connect-offline"),
            connect_ready("connect-offline"),
        ),
        Component(
            "connect-standalone",
            [PORTS["connect-standalone"]],
            ["kafka-a"],
            prepare_connect_standalone,
            connect_ready("connect-standalone"),
        ),
        # On demand, for the fault tests (tests/integration/test_faults.py), which SIGKILL, SIGSTOP and
        # restart them: two workers of one Connect cluster (group connect-cluster-fault, -fault topics),
        # so that starting or stopping the second one rebalances the first.
        Component(
            "connect-fault",
            [PORTS["connect-fault"]],
            ["kafka-a"],
            prepare_connect("connect-fault", group="fault", settings=FAST_RESTART),
            connect_ready("connect-fault"),
        ),
        Component(
            "connect-fault-2",
            [PORTS["connect-fault-2"]],
            ["kafka-a"],
            prepare_connect("connect-fault-2", group="fault", settings=FAST_RESTART),
            connect_ready("connect-fault-2"),
        ),
        # On demand, for MirrorMaker 2 with exactly-once source support (tests/integration/
        # test_mirrormaker2_exactly_once.py): a worker of its own (group connect-cluster-eos, -eos topics)
        # on Kafka C, so that a mirror into C writes its checkpoints in transactions.
        Component(
            "connect-eos",
            [PORTS["connect-eos"]],
            ["kafka-c"],
            prepare_connect("connect-eos", settings=EXACTLY_ONCE, kafka="kafka-c"),
            connect_ready("connect-eos"),
        ),
        # On demand, for running the offsets pipeline with spark-submit against a real cluster by hand
        # (docs/pipeline.md); `up spark-worker` starts the master too, `down` stops the worker first.
        *spark_components(),
    ]
}


# ---------------------------------------------------------------------------------------
# Commands


def write_log4j() -> None:
    write(
        RUN_DIR / "log4j2.properties",
        "\n".join(
            [
                "status = warn",
                "appender.console.type = Console",
                "appender.console.name = STDOUT",
                "appender.console.layout.type = PatternLayout",
                "appender.console.layout.pattern = [%d] %p %m (%c)%n",
                "rootLogger.level = INFO",
                "rootLogger.appenderRefs = stdout",
                "rootLogger.appenderRef.stdout.ref = STDOUT",
                "logger.kafka.name = kafka",
                "logger.kafka.level = WARN",
                "logger.server.name = kafka.server.KafkaServer",
                "logger.server.level = INFO",
                "logger.broker.name = kafka.server.BrokerServer",
                "logger.broker.level = INFO",
                "logger.raftserver.name = kafka.server.KafkaRaftServer",
                "logger.raftserver.level = INFO",
                "logger.reflections.name = org.reflections",
                "logger.reflections.level = ERROR",
                "logger.clients.name = org.apache.kafka.clients",
                "logger.clients.level = WARN",
                "",
            ]
        ),
    )


def start(component: Component) -> subprocess.Popen[bytes] | None:
    if read_pid(component) is not None:
        return None
    busy = [p for p in component.ports if port_open(p)]
    if busy:
        raise StackError(
            f"{component.name}: port(s) {', '.join(map(str, busy))} on {HOST} already in use by another "
            f"process (not started by this stack); free them or stop that process"
        )
    cmd = component.prepare()
    component.log.parent.mkdir(parents=True, exist_ok=True)
    with component.log.open("ab") as log:
        log.write(f"\n==== start {time.strftime('%Y-%m-%dT%H:%M:%S')} ====\n".encode())
        log.flush()
        process = subprocess.Popen(
            cmd,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=STACK_DIR,
            start_new_session=True,  # survives the caller; `down` kills the whole group
            env={**os.environ, **component.env},
        )
    component.pidfile.write_text(str(process.pid))
    return process


def wait_ready(component: Component, process: subprocess.Popen[bytes] | None, deadline: float) -> None:
    while time.monotonic() < deadline:
        if component.ready():
            return
        if process is not None and process.poll() is not None:
            raise StackError(
                f"{component.name} exited with code {process.returncode} during start-up; see {component.log}"
            )
        time.sleep(0.25)
    raise StackError(f"{component.name} not ready after {START_TIMEOUT_S:.0f}s; see {component.log}")


def resolve(names: list[str]) -> list[str]:
    ordered: list[str] = []

    def visit(name: str) -> None:
        if name not in COMPONENTS:
            raise StackError(f"unknown component {name!r}; known: {', '.join(COMPONENTS)}")
        for dep in COMPONENTS[name].depends:
            visit(dep)
        if name not in ordered:
            ordered.append(name)

    for name in names:
        visit(name)
    return ordered


@contextlib.contextmanager
def changing() -> Iterator[None]:
    """One ``up``, ``stop`` or ``down`` at a time, across processes.

    Parallel test workers (``pytest -n``, docs/development.md) start the same on-demand component at
    once: without the lock both would find no pid file and the second would fail on the busy port.
    The one that waited then finds the component running (``start`` is a no-op) and only waits for it.
    """
    STACK_DIR.mkdir(parents=True, exist_ok=True)
    with (STACK_DIR / "changes.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def cmd_up(names: list[str]) -> None:
    began = time.monotonic()
    for folder in (STACK_DIR, LOG_DIR, RUN_DIR):
        folder.mkdir(parents=True, exist_ok=True)
    write_log4j()
    state()
    pending = resolve(names or CORE)
    started: dict[str, subprocess.Popen[bytes] | None] = {}
    done: set[str] = set()
    deadline = time.monotonic() + START_TIMEOUT_S
    # Start every component whose dependencies are ready; wait in waves so the JVMs boot together.
    while pending:
        wave = [n for n in pending if all(d in done for d in COMPONENTS[n].depends)]
        for name in wave:
            started[name] = start(COMPONENTS[name])
        for name in wave:
            wait_ready(COMPONENTS[name], started[name], deadline)
            done.add(name)
            pending.remove(name)
            print(f"  {name:<20} ready  (log {COMPONENTS[name].log})", flush=True)
    print(f"stack up in {time.monotonic() - began:.1f}s; `python3 hack/stack.py env` prints the exports")


def stop(component: Component, *, timeout: float = 20.0) -> bool:
    pid = read_pid(component)
    if pid is None:
        component.pidfile.unlink(missing_ok=True)
        return False
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        # A component this very process started (a test's own, through start()) stays a zombie until
        # reaped, and a zombie still counts as a member of its process group.
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
    component.pidfile.unlink(missing_ok=True)
    return True


def cmd_stop(names: list[str]) -> None:
    for name in names:
        if name not in COMPONENTS:
            raise StackError(f"unknown component {name!r}")
        stopped = stop(COMPONENTS[name])
        print(f"  {name:<20} {'stopped' if stopped else 'not running'}")


def cmd_down() -> None:
    # Reverse dependency order: Connect before Kafka, controller-manager before apiserver, Spark's worker
    # (and its executors) before its master.
    for name in reversed(list(COMPONENTS)):
        if stop(COMPONENTS[name]):
            print(f"  {name:<20} stopped")
    for name in ("etcd-data", "kafka-a-data", "kafka-b-data", "kafka-c-data", "run", "pki"):
        shutil.rmtree(STACK_DIR / name, ignore_errors=True)
    kubeconfig_path().unlink(missing_ok=True)
    print("stack down")


def info() -> dict[str, object]:
    running = {name: read_pid(c) is not None for name, c in COMPONENTS.items()}
    # Read only: ``info`` runs in every test process at once, and only ``up`` (under its lock) adds values.
    saved = RUN_DIR / "state.json"
    creds: dict[str, str] = json.loads(saved.read_text()) if saved.exists() else {}
    return {
        "kubeconfig": str(kubeconfig_path()),
        "apiserver": f"https://{HOST}:{PORTS['apiserver']}",
        "kafka_a": f"{HOST}:{PORTS['kafka-a']}",
        "kafka_b": f"{HOST}:{PORTS['kafka-b']}",
        "kafka_c": f"{HOST}:{PORTS['kafka-c']}",
        "connect_url": f"http://{HOST}:{PORTS['connect']}",
        "connect_auth_url": f"http://{HOST}:{PORTS['connect-auth']}",
        "connect_aux_url": f"http://{HOST}:{PORTS['connect-aux']}",
        "connect_offline_url": f"http://{HOST}:{PORTS['connect-offline']}",
        "connect_standalone_url": f"http://{HOST}:{PORTS['connect-standalone']}",
        "connect_fault_url": f"http://{HOST}:{PORTS['connect-fault']}",
        "connect_fault_2_url": f"http://{HOST}:{PORTS['connect-fault-2']}",
        "connect_eos_url": f"http://{HOST}:{PORTS['connect-eos']}",
        "spark_master_url": f"spark://{HOST}:{PORTS['spark-master']}",
        "spark_master_ui": f"http://{HOST}:{PORTS['spark-master-ui']}",
        "run_dir": str(RUN_DIR),
        "connect_auth_user": creds.get("connect_auth_user"),
        "connect_auth_password": creds.get("connect_auth_password"),
        "kubectl": str(BIN_DIR / "kubectl"),
        "helm": str(BIN_DIR / "helm"),
        "kafka_libs": str(KAFKA_LIBS),
        "logs": str(LOG_DIR),
        "running": running,
        "versions": VERSIONS,
    }


def cmd_status() -> int:
    data = info()
    running = data["running"]
    assert isinstance(running, dict)
    for name, component in COMPONENTS.items():
        flag = "running" if running[name] else "stopped"
        print(f"  {name:<20} {flag:<8} log {component.log}")
    return 0 if all(running[n] for n in CORE) else 1


def cmd_env() -> None:
    data = info()
    print(f"export KUBECONFIG={data['kubeconfig']}")
    print(f"export CONNECT_URL={data['connect_url']}")
    print(f"export KAFKA_BOOTSTRAP={data['kafka_a']}")
    print(f"export KAFKA_B_BOOTSTRAP={data['kafka_b']}")
    print(f"export KAFKA_C_BOOTSTRAP={data['kafka_c']}")
    print(f"export CONNECT_EOS_URL={data['connect_eos_url']}")
    print(f"export PATH={BIN_DIR}:$PATH")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start components (default: the core set)")
    up.add_argument("components", nargs="*")
    stop_parser = sub.add_parser("stop", help="stop components, keep their data")
    stop_parser.add_argument("components", nargs="+")
    sub.add_parser("down", help="stop everything and remove data")
    sub.add_parser("status")
    sub.add_parser("env")
    sub.add_parser("info")
    args = parser.parse_args(argv)
    try:
        if args.command == "up":
            with changing():
                cmd_up(args.components)
        elif args.command == "stop":
            with changing():
                cmd_stop(args.components)
        elif args.command == "down":
            with changing():
                cmd_down()
        elif args.command == "status":
            return cmd_status()
        elif args.command == "env":
            cmd_env()
        elif args.command == "info":
            print(json.dumps(info(), indent=2))
    except StackError as error:
        print(f"stack: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
