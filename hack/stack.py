#!/usr/bin/env python3
"""Start, stop and describe the local stack: etcd, kube-apiserver, kube-controller-manager,
two single-node KRaft Kafka clusters and Kafka Connect workers, all on 127.0.0.1; on demand, a third
Kafka cluster and an exactly-once Connect worker on it for MirrorMaker 2's harder cases
(``up connect-eos``), a Spark standalone master and worker for the offsets pipeline
(``up spark-worker``), and a node where Pods run (``up node``: containerd, kubelet, kube-scheduler,
kube-proxy and the CNI bridge, with an API server and controller-manager of their own beside the core
pair).

Why a script of its own (stdlib only): it must run before the project's virtualenv exists,
from ``make`` and from the pytest session fixture alike, and every test must see the same
ports and credentials. Binaries and jars come from the project cache (see
``hack/build-go-tools.sh`` and ``hack/fetch-kafka.sh``; Spark is the installed pyspark's own distribution,
``$SPARK_HOME`` or the project's .venv); runtime state (data, logs, pid
files, kubeconfig) lives in one stack folder that ``down`` removes.

Usage::

    stack.py up [COMPONENT ...]     # default: the core set; idempotent
    stack.py down                   # stops every process it started, removes data
    stack.py up node                # on demand: a node (containerd, kubelet, scheduler, kube-proxy, CNI)
    stack.py down node              # stops only the node and removes its data
    stack.py node-image REF ...     # podman's image into the node's containerd
    stack.py node-namespace NS ...  # a namespace the node's Pods can run in
    stack.py stop COMPONENT ...     # stop some components (data kept, for fault tests)
    stack.py status                 # which components run, where their logs are
    stack.py env                    # shell exports (KUBECONFIG, CONNECT_URL, ...)
    stack.py info                   # the same as JSON, for tools and tests
"""

from __future__ import annotations

import argparse
import base64
import calendar
import concurrent.futures
import contextlib
import fcntl
import hashlib
import http.client
import io
import json
import os
import secrets
import shlex
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tarfile
import threading
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
    "kafka-a-pods": 19094,
    "kafka-b": 29092,
    "kafka-b-controller": 29093,
    "kafka-b-pods": 29094,
    "kafka-c": 39092,
    "kafka-c-controller": 39093,
    "kafka-c-pods": 39094,
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
    #: The settings the process reads once at start (side-effect free, unlike ``prepare``): a
    #: running process started with other settings is restarted by ``up`` (``stale``), so that a
    #: checkout that changed them (a listener added) does not test against the old ones.
    settings: Callable[[], str] | None = None

    @property
    def log(self) -> Path:
        return LOG_DIR / f"{self.name}.log"

    @property
    def pidfile(self) -> Path:
        return RUN_DIR / f"{self.name}.pid"

    @property
    def settings_file(self) -> Path:
        return RUN_DIR / f"{self.name}.settings-sha256"

    def settings_digest(self) -> str | None:
        return None if self.settings is None else hashlib.sha256(self.settings().encode()).hexdigest()


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


def write(path: Path, text: str, mode: int = 0o644) -> Path:
    """Whole or not at all, and with ``mode`` from the start: the node's components start together
    and each writes the node's kubeconfig before it starts, and kube-scheduler once read it while
    another component's write had emptied it ("no configuration has been provided")."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as file:
        file.write(text)
    partial.chmod(mode)  # whatever the umask took off
    partial.replace(path)
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
        write(path, json.dumps(data, indent=2), 0o600)
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
    tokens = write(pki / "tokens.csv", f'{state()["admin_token"]},admin,admin-uid,"system:masters"\n', 0o600)
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
    write(kubeconfig_path(), json.dumps(config, indent=2), 0o600)


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


def kafka_properties(which: str) -> str:
    """Two listeners: PLAINTEXT for this machine (127.0.0.1) and PODS for the node's Pods, which
    reach it through the node gateway on NODE_IP and must be told that address in the metadata (a
    broker advertising 127.0.0.1 sends a Pod's client to the Pod itself). Both bind 127.0.0.1 only."""
    port, pods = PORTS[f"kafka-{which}"], PORTS[f"kafka-{which}-pods"]
    controller = PORTS[f"kafka-{which}-controller"]
    return "\n".join(
        [
            "process.roles=broker,controller",
            "node.id=1",
            f"controller.quorum.voters=1@{HOST}:{controller}",
            f"listeners=PLAINTEXT://{HOST}:{port},PODS://{HOST}:{pods},CONTROLLER://{HOST}:{controller}",
            f"advertised.listeners=PLAINTEXT://{HOST}:{port},PODS://{NODE_IP}:{pods}",
            "controller.listener.names=CONTROLLER",
            "inter.broker.listener.name=PLAINTEXT",
            "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,PODS:PLAINTEXT",
            f"log.dirs={STACK_DIR / f'kafka-{which}-data'}",
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
    )


def prepare_kafka(which: str) -> Callable[[], list[str]]:
    def prepare() -> list[str]:
        data = STACK_DIR / f"kafka-{which}-data"
        props = write(RUN_DIR / f"kafka-{which}.properties", kafka_properties(which))
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


def kafka_component(which: str) -> Component:
    name = f"kafka-{which}"
    ports = [PORTS[name], PORTS[f"{name}-controller"], PORTS[f"{name}-pods"]]
    return Component(
        name, ports, [], prepare_kafka(which), kafka_ready(which), settings=lambda: kafka_properties(which)
    )


def kafka_ready(which: str) -> Callable[[], bool]:
    def ready() -> bool:
        if not port_open(PORTS[f"kafka-{which}"]):
            return False
        log = LOG_DIR / f"kafka-{which}.log"
        # This start's lines only: the log is appended to, and an earlier start's line is no answer.
        return log.exists() and "Kafka Server started" in log.read_text(errors="replace").rsplit("==== start ", 1)[-1]

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
                0o600,
            )
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


# ---------------------------------------------------------------------------------------
# The node (on demand: ``up node``; docs/development.md#the-node): containerd with runc, kubelet,
# kube-scheduler, kube-proxy and the CNI bridge, so that Pods run; a second API server and
# controller-manager for what Pods need that the core pair (left as it is) lacks; a TCP gateway from
# the Pods' network to the stack's Connect workers. Binaries: hack/build-node.sh; Debian packages:
# hack/node-packages.sh.

NODE_DIR = STACK_DIR / "node"
#: The node's API server's self-signed serving certificate and CA: kept by ``down node`` (the
#: ``kube-root-ca.crt`` ConfigMaps of namespaces hold that CA), removed with the rest by ``down``.
NODE_PKI = STACK_DIR / "node-pki"
NODE_NAME = "stack-node"
#: Only Pods that tolerate it run on the node: the stack is shared, and the node's controllers make
#: Pods of every Deployment and StatefulSet in it, other tests' too.
NODE_TAINT = {"key": "stack.connect-offsets.io/node", "effect": "NoSchedule"}
#: The API server's Service range (``--service-cluster-ip-range``; ``kubernetes`` is 10.0.0.1).
SERVICE_CIDR = "10.0.0.0/24"
#: The Pods' addresses: a /24 that no address or route of this machine uses (``ip addr``/``ip route``:
#: eth0 192.0.2.0/24 only, Services 10.0.0.0/24, podman's default 10.88.0.0/16 when it makes one).
POD_CIDR = "10.244.0.0/24"
#: The bridge's own address: the Pods' gateway, the node's InternalIP (kubelet refuses a loopback one)
#: and where the node's API server and the gateway listen; it is local to this machine, so nothing
#: of the node listens on eth0.
NODE_IP = "10.244.0.1"
NODE_BRIDGE = "stack-cni0"
PAUSE_IMAGE = f"localhost/stack-pause:{VERSIONS.get('STACK_PAUSE_VERSION', '1')}"
NODE_PORTS = {
    "node-apiserver": 26444,
    "node-controllers": 20258,
    "kube-scheduler": 20259,
    "kubelet": 20250,
    "kubelet-healthz": 20248,
    "kube-proxy-healthz": 20256,
    "kube-proxy-metrics": 20249,
}
#: Stack ports a Pod reaches on NODE_IP through ``node-gateway`` (they listen on 127.0.0.1 only): the
#: Connect workers' REST APIs and the Kafka brokers' PODS listeners, which advertise NODE_IP
#: (``kafka_properties``; their PLAINTEXT listeners advertise 127.0.0.1, which in a Pod is the Pod).
GATEWAY_PORTS = [PORTS[name] for name in PORTS if name.startswith("connect") or name.endswith("-pods")]
#: Kernel settings kubelet (vm.*, kernel.*: setupKernelTunables) and the CNI bridge (ip_forward) set
#: for the whole machine; their values before the node started are put back by ``down``.
NODE_SYSCTLS = [
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
    "net/ipv4/ip_forward",
]


def containerd_socket() -> Path:
    return NODE_DIR / "containerd.sock"


def node_kubeconfig_path() -> Path:
    return NODE_DIR / "kubeconfig"


def node_binary(relative: str) -> str:
    path = BIN_DIR / relative
    if not path.exists():
        raise StackError(f"{relative} missing in {BIN_DIR}: run hack/build-node.sh")
    return str(path)


def cni_bin_dir() -> Path:
    return BIN_DIR / f"cni-plugins-{VERSIONS.get('CNI_PLUGINS_VERSION', '')}"


def system_binary(name: str) -> str:
    found = shutil.which(name, path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin")
    if found is None:
        raise StackError(f"{name} is not installed: run hack/node-packages.sh (containerd, runc, iptables)")
    return found


def ensure_bridge() -> None:
    """The Pods' bridge with NODE_IP, made before the CNI plugin's first Pod so that the node's API
    server, kubelet and gateway can listen on it from the start (the plugin adopts an existing bridge)."""
    ip = system_binary("ip")
    if not Path(f"/sys/class/net/{NODE_BRIDGE}").exists():
        subprocess.run([ip, "link", "add", NODE_BRIDGE, "type", "bridge"], check=True, capture_output=True)
    shown = subprocess.run([ip, "-4", "-o", "addr", "show", "dev", NODE_BRIDGE], capture_output=True, text=True)
    if f" {NODE_IP}/" not in shown.stdout:
        prefix = POD_CIDR.split("/")[1]
        subprocess.run([ip, "addr", "add", f"{NODE_IP}/{prefix}", "dev", NODE_BRIDGE], check=True, capture_output=True)
    subprocess.run([ip, "link", "set", NODE_BRIDGE, "up"], check=True, capture_output=True)


def save_sysctls() -> None:
    """The machine-wide settings the node changes, as they were before its first start (kept until ``down``)."""
    saved = NODE_DIR / "sysctls-before.json"
    if saved.exists():
        return
    values = {}
    for key in NODE_SYSCTLS:
        with contextlib.suppress(OSError):
            values[key] = (Path("/proc/sys") / key).read_text().strip()
    write(saved, json.dumps(values, indent=2))


def restore_sysctls() -> None:
    saved = NODE_DIR / "sysctls-before.json"
    if not saved.exists():
        return
    for key, value in json.loads(saved.read_text()).items():
        with contextlib.suppress(OSError):
            (Path("/proc/sys") / key).write_text(value)


def write_node_kubeconfig() -> Path:
    """The node's components and ``kubectl`` for Pods talk to the node's API server. They use the
    stack's admin token: the core API server authenticates tokens from its file only (read at its
    start, no client CA), and runs RBAC without the Node authorizer, so no node identity exists."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "stack-node",
                "cluster": {
                    "server": f"https://{NODE_IP}:{NODE_PORTS['node-apiserver']}",
                    "insecure-skip-tls-verify": True,
                },
            }
        ],
        "users": [{"name": "admin", "user": {"token": state()["admin_token"]}}],
        "contexts": [{"name": "stack-node", "context": {"cluster": "stack-node", "user": "admin"}}],
        "current-context": "stack-node",
    }
    path = write(node_kubeconfig_path(), json.dumps(config, indent=2), 0o600)
    return path


def prepare_containerd() -> list[str]:
    """containerd with a config, root, state and socket of its own under the stack folder (a
    system-wide /etc/containerd/config.toml, which the Debian package installs, is not read); CRI with
    the local pause image as sandbox image, runc through the cgroupfs driver (no systemd here), and
    the CNI plugins and config of the stack."""
    save_sysctls()
    ensure_bridge()
    root = NODE_DIR / "containerd"
    cni_conf = NODE_DIR / "cni" / "net.d"
    for folder in (root / "root", root / "state", root / "opt", cni_conf):
        folder.mkdir(parents=True, exist_ok=True)
    write_cni_config(cni_conf)
    config = write(
        NODE_DIR / "containerd.toml",
        "\n".join(
            [
                "version = 2",
                f'root = "{root / "root"}"',
                f'state = "{root / "state"}"',
                # Snapshotters this machine has no use for would only log that they cannot start.
                'disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",'
                ' "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]',
                "[grpc]",
                f'  address = "{containerd_socket()}"',
                "[ttrpc]",
                f'  address = "{containerd_socket()}.ttrpc"',
                "[debug]",
                '  level = "warn"',
                '[plugins."io.containerd.internal.v1.opt"]',
                f'  path = "{root / "opt"}"',
                '[plugins."io.containerd.grpc.v1.cri"]',
                f'  sandbox_image = "{PAUSE_IMAGE}"',
                # No CAP_SYS_RESOURCE here (podman needs --ulimit for the same reason): kubelet's
                # negative oom_score_adj (-998 for every sandbox) failed runc's init ("can't get final
                # child's PID from pipe: EOF"); restricted, scores stay at or above containerd's own.
                "  restrict_oom_score_adj = true",
                '[plugins."io.containerd.grpc.v1.cri".containerd]',
                '  snapshotter = "overlayfs"',
                '  default_runtime_name = "runc"',
                '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]',
                '  runtime_type = "io.containerd.runc.v2"',
                '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]',
                "  SystemdCgroup = false",
                f'  BinaryName = "{system_binary("runc")}"',
                '[plugins."io.containerd.grpc.v1.cri".cni]',
                f'  bin_dir = "{cni_bin_dir()}"',
                f'  conf_dir = "{cni_conf}"',
                "",
            ]
        ),
    )
    return [system_binary("containerd"), "--config", str(config)]


def write_cni_config(folder: Path) -> Path:
    """bridge + host-local on POD_CIDR, with NODE_IP as gateway (isGateway: the plugin turns on
    ip_forward, which Service traffic between Pods needs), hairpin for a Pod reaching itself through a
    Service; no masquerade (Pods talk to this machine only); portmap for hostPort."""
    bridge = {
        "type": "bridge",
        "bridge": NODE_BRIDGE,
        "isGateway": True,
        "ipMasq": False,
        "hairpinMode": True,
        "ipam": {
            "type": "host-local",
            "ranges": [[{"subnet": POD_CIDR, "gateway": NODE_IP}]],
            "routes": [{"dst": "0.0.0.0/0"}],
            "dataDir": str(NODE_DIR / "cni" / "ipam"),
        },
    }
    conflist = {
        "cniVersion": "1.0.0",
        "name": "stack",
        "plugins": [bridge, {"type": "portmap", "capabilities": {"portMappings": True}}],
    }
    return write(folder / "10-stack.conflist", json.dumps(conflist, indent=2))


def containerd_ready() -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.3)
        return sock.connect_ex(str(containerd_socket())) == 0


def ctr(*args: str, stdin: int | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [system_binary("ctr"), "--address", str(containerd_socket()), "--namespace", "k8s.io", *args],
        stdin=stdin,
        capture_output=True,
        text=True,
    )


def pause_image_archive() -> Path:
    """The sandbox image as a docker-archive of one layer: hack/build-node.sh's static pause binary."""
    pause = Path(node_binary(f"stack-pause-{VERSIONS.get('STACK_PAUSE_VERSION', '1')}/pause"))
    layer_bytes = io.BytesIO()
    with tarfile.open(fileobj=layer_bytes, mode="w", format=tarfile.USTAR_FORMAT) as layer:
        entry = tarfile.TarInfo("pause")
        entry.size, entry.mode, entry.mtime = pause.stat().st_size, 0o755, 0
        with pause.open("rb") as handle:
            layer.addfile(entry, handle)
    diff_id = hashlib.sha256(layer_bytes.getvalue()).hexdigest()
    image_config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Entrypoint": ["/pause"], "User": "65535:65535"},
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{diff_id}"]},
    }
    manifest = [{"Config": "config.json", "RepoTags": [PAUSE_IMAGE], "Layers": ["layer.tar"]}]
    archive = NODE_DIR / "stack-pause.tar"
    archive.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, "w") as tar:
        for name, data in (
            ("layer.tar", layer_bytes.getvalue()),
            ("config.json", json.dumps(image_config).encode()),
            ("manifest.json", json.dumps(manifest).encode()),
        ):
            entry = tarfile.TarInfo(name)
            entry.size = len(data)
            tar.addfile(entry, io.BytesIO(data))
    return archive


def image_present(reference: str) -> bool:
    listed = ctr("images", "ls", "-q")
    return reference in listed.stdout.split() or f"docker.io/{reference}" in listed.stdout.split()


def import_image(archive: Path) -> None:
    with archive.open("rb") as handle:
        result = ctr("images", "import", "-", stdin=handle.fileno())
    if result.returncode != 0:
        raise StackError(f"ctr images import {archive} failed: {result.stderr.strip()}")


def prepare_node_apiserver() -> list[str]:
    """A second API server on the same etcd (a control plane of two, as in any HA cluster), on
    NODE_IP where Pods reach it. The core one runs without the ServiceAccount admission plugin and only
    on 127.0.0.1, and is never restarted under running tests; the node's controllers create Pods
    through this one, whose ServiceAccount plugin gives them their token volume. Its endpoint is the
    ``kubernetes`` Service's (an EndpointSlice of the stack, ``ensure_kubernetes_endpoints``): the
    core one's reconciler refuses 127.0.0.1, so that Service had none."""
    ensure_bridge()
    core_pki = STACK_DIR / "pki"
    if not (core_pki / "sa.key").exists():
        raise StackError("the core API server's keys are missing: start it first (stack.py up)")
    pki = NODE_PKI
    pki.mkdir(parents=True, exist_ok=True)
    write_node_kubeconfig()
    return [
        binary("kube-apiserver"),
        f"--etcd-servers=http://{HOST}:{PORTS['etcd']}",
        f"--cert-dir={pki}",
        f"--secure-port={NODE_PORTS['node-apiserver']}",
        f"--bind-address={NODE_IP}",
        f"--advertise-address={NODE_IP}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--allow-privileged=true",
        "--authorization-mode=RBAC",
        f"--token-auth-file={core_pki / 'tokens.csv'}",
        f"--service-account-issuer=https://{HOST}:{PORTS['apiserver']}",
        f"--service-account-key-file={core_pki / 'sa.key'}",
        f"--service-account-signing-key-file={core_pki / 'sa.key'}",
        "--endpoint-reconciler-type=none",
        # logs, exec, port-forward: kubelet at the node's InternalIP (its Hostname, stack-node, resolves
        # nowhere; the core API server, which keeps the default order, cannot reach kubelet by it).
        "--kubelet-preferred-address-types=InternalIP",
        "--enable-priority-and-fairness=false",
        "--v=0",
    ]


def node_apiserver_ready() -> bool:
    return http_ok(f"https://{NODE_IP}:{NODE_PORTS['node-apiserver']}/readyz", token=state()["admin_token"])


def node_kubectl(*args: str, stdin_text: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [binary("kubectl"), f"--kubeconfig={node_kubeconfig_path()}", *args],
        input=stdin_text,
        capture_output=True,
        text=True,
    )


def ensure_kubernetes_endpoints() -> None:
    """The ``kubernetes`` Service (10.0.0.1:443, in-cluster clients' address) routes to the node's API
    server: an EndpointSlice of its own, which the core API server's reconciler (by name) never touches."""
    slice_ = {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": "kubernetes-stack-node",
            "namespace": "default",
            "labels": {
                "kubernetes.io/service-name": "kubernetes",
                "endpointslice.kubernetes.io/managed-by": "stack.connect-offsets.io",
            },
        },
        "addressType": "IPv4",
        "endpoints": [{"addresses": [NODE_IP], "conditions": {"ready": True}}],
        "ports": [{"name": "https", "port": NODE_PORTS["node-apiserver"], "protocol": "TCP"}],
    }
    result = node_kubectl("apply", "-f", "-", stdin_text=json.dumps(slice_))
    if result.returncode != 0:
        raise StackError(f"EndpointSlice for the kubernetes Service: {result.stderr.strip()}")


def node_namespace(namespace: str) -> None:
    """A namespace Pods run in: created if missing, with the ``kube-root-ca.crt`` ConfigMap of every
    Pod's token volume (the node's API server's CA; its controller-manager does not publish it in
    every namespace, which the other tests' namespaces would see)."""
    node_kubectl("create", "namespace", namespace)
    ca = (NODE_PKI / "apiserver.crt").read_text()
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "kube-root-ca.crt", "namespace": namespace},
        "data": {"ca.crt": ca},
    }
    result = node_kubectl("apply", "-f", "-", stdin_text=json.dumps(configmap))
    if result.returncode != 0:
        raise StackError(f"kube-root-ca.crt in {namespace}: {result.stderr.strip()}")


#: What the node's controller-manager runs: Deployments, ReplicaSets and StatefulSets make Pods,
#: EndpointSlices route Services, the disruption controller keeps PodDisruptionBudgets for evictions,
#: node lifecycle marks the node NotReady when kubelet stops. The core one keeps its three.
NODE_CONTROLLERS = [
    "deployment-controller",
    "replicaset-controller",
    "statefulset-controller",
    "endpointslice-controller",
    "endpointslice-mirroring-controller",
    "disruption-controller",
    "node-lifecycle-controller",
    "pod-garbage-collector-controller",
]


def prepare_node_controllers() -> list[str]:
    kubeconfig = write_node_kubeconfig()
    return [
        binary("kube-controller-manager"),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        f"--bind-address={HOST}",
        f"--secure-port={NODE_PORTS['node-controllers']}",
        "--leader-elect=false",
        f"--controllers={','.join(NODE_CONTROLLERS)}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--v=0",
    ]


def prepare_scheduler() -> list[str]:
    kubeconfig = write_node_kubeconfig()
    return [
        node_binary("kube-scheduler"),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        f"--bind-address={HOST}",
        f"--secure-port={NODE_PORTS['kube-scheduler']}",
        "--leader-elect=false",
        "--v=0",
    ]


def prepare_kubelet() -> list[str]:
    """kubelet 1.35 on cgroup v1 (this machine: v1 hierarchies plus a cgroup2 mount at
    /sys/fs/cgroup/unified) starts only with ``failCgroupV1: false``, its documented setting (KEP-5573;
    without it: "kubelet is configured to not run on a host using cgroup v1");
    cgroupfs driver as containerd's runc; no swap check; no image garbage collection (the images cannot
    be pulled again); eviction only when the machine is nearly full (it is shared)."""
    if not image_present(PAUSE_IMAGE):
        import_image(pause_image_archive())
    root = NODE_DIR / "kubelet"
    root.mkdir(parents=True, exist_ok=True)
    kubeconfig = write_node_kubeconfig()
    config = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": NODE_IP,
        "port": NODE_PORTS["kubelet"],
        "readOnlyPort": 0,
        "healthzBindAddress": HOST,
        "healthzPort": NODE_PORTS["kubelet-healthz"],
        # The API servers reach kubelet (logs, exec) without a client certificate: anonymous, allowed;
        # kubelet listens on NODE_IP only, which is local to this machine.
        "authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
        "authorization": {"mode": "AlwaysAllow"},
        "containerRuntimeEndpoint": f"unix://{containerd_socket()}",
        "cgroupDriver": "cgroupfs",
        "failCgroupV1": False,
        "failSwapOn": False,
        "podLogsDir": str(NODE_DIR / "pod-logs"),
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "nodefs.inodesFree": "1%",
            "imagefs.available": "1%",
        },
        "maxPods": 30,
        "registerWithTaints": [NODE_TAINT],
        "resolvConf": "/etc/resolv.conf",
    }
    config_path = write(NODE_DIR / "kubelet.json", json.dumps(config, indent=2))
    return [
        node_binary("kubelet"),
        f"--config={config_path}",
        f"--kubeconfig={kubeconfig}",
        f"--root-dir={root}",
        f"--hostname-override={NODE_NAME}",
        f"--node-ip={NODE_IP}",
        "--v=0",
    ]


def kubelet_ready() -> bool:
    """Ready when kubelet answers and its Node is Ready (the runtime and CNI report ready) in a status
    this kubelet wrote, not one left by a kubelet stopped before."""
    if not http_ok(f"http://{HOST}:{NODE_PORTS['kubelet-healthz']}/healthz"):
        return False
    ready = "{.status.conditions[?(@.type=='Ready')]}"
    result = node_kubectl("get", "node", NODE_NAME, "-o", f"jsonpath={ready}")
    try:
        condition = json.loads(result.stdout)
        started = COMPONENTS["kubelet"].pidfile.stat().st_mtime
        beat = calendar.timegm(time.strptime(condition["lastHeartbeatTime"], "%Y-%m-%dT%H:%M:%SZ"))
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return bool(condition.get("status") == "True" and beat >= int(started) - 1)


def prepare_kube_proxy() -> list[str]:
    """iptables mode for the Services of POD_CIDR; it leaves conntrack sysctls and route_localnet alone
    and serves NodePorts on NODE_IP only."""
    ensure_kubernetes_endpoints()
    config = {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "mode": "iptables",
        "clientConnection": {"kubeconfig": str(write_node_kubeconfig())},
        "hostnameOverride": NODE_NAME,
        "clusterCIDR": POD_CIDR,
        "healthzBindAddress": f"{HOST}:{NODE_PORTS['kube-proxy-healthz']}",
        "metricsBindAddress": f"{HOST}:{NODE_PORTS['kube-proxy-metrics']}",
        "nodePortAddresses": [f"{NODE_IP}/32"],
        "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
        "iptables": {"localhostNodePorts": False},
    }
    config_path = write(NODE_DIR / "kube-proxy.json", json.dumps(config, indent=2))
    return [node_binary("kube-proxy"), f"--config={config_path}", "--v=0"]


def prepare_gateway() -> list[str]:
    ensure_bridge()
    ports = ",".join(str(port) for port in GATEWAY_PORTS)
    return [sys.executable, str(HACK_DIR / "node_gateway.py"), NODE_IP, HOST, ports]


NODE_COMPONENTS = [
    Component("containerd", [], [], prepare_containerd, containerd_ready),
    Component("node-apiserver", [], ["apiserver"], prepare_node_apiserver, node_apiserver_ready),
    Component(
        "node-controllers",
        [NODE_PORTS["node-controllers"]],
        ["node-apiserver"],
        prepare_node_controllers,
        lambda: http_ok(f"https://{HOST}:{NODE_PORTS['node-controllers']}/healthz"),
    ),
    Component(
        "kube-scheduler",
        [NODE_PORTS["kube-scheduler"]],
        ["node-apiserver"],
        prepare_scheduler,
        lambda: http_ok(f"https://{HOST}:{NODE_PORTS['kube-scheduler']}/healthz"),
    ),
    Component(
        "kubelet",
        [NODE_PORTS["kubelet-healthz"]],
        ["containerd", "node-apiserver"],
        prepare_kubelet,
        kubelet_ready,
    ),
    Component(
        "kube-proxy",
        [NODE_PORTS["kube-proxy-healthz"], NODE_PORTS["kube-proxy-metrics"]],
        ["node-apiserver"],
        prepare_kube_proxy,
        lambda: http_ok(f"http://{HOST}:{NODE_PORTS['kube-proxy-healthz']}/healthz"),
    ),
    Component("node-gateway", [], [], prepare_gateway, lambda: gateway_ready(), settings=lambda: repr(GATEWAY_PORTS)),
]
#: ``up node`` / ``down node``: the node's components, in start order.
GROUPS = {"node": [component.name for component in NODE_COMPONENTS]}


def gateway_ready() -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.3)
        return sock.connect_ex((NODE_IP, GATEWAY_PORTS[0])) == 0


def node_image(reference: str) -> None:
    """An image podman has (``make image``) into the node's containerd, where kubelet finds it
    (``imagePullPolicy: Never`` or ``IfNotPresent``: no registry is reachable)."""
    if not containerd_ready():
        raise StackError("the node's containerd is not running: stack.py up node")
    began = time.monotonic()
    archive = NODE_DIR / "image-import.tar"
    saved = subprocess.run(
        [system_binary("podman"), "save", "--format", "docker-archive", "-o", str(archive), reference],
        capture_output=True,
        text=True,
    )
    if saved.returncode != 0:
        raise StackError(f"podman save {reference}: {saved.stderr.strip()}")
    try:
        import_image(archive)
    finally:
        archive.unlink(missing_ok=True)
    print(f"  {reference} imported into the node's containerd in {time.monotonic() - began:.1f}s")


def node_mounts() -> list[str]:
    """Mount points under the node's folder (Pods' volumes, containerd's snapshots), deepest first."""
    points = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            point = line.split()[4].replace("\\040", " ")
            if point == str(NODE_DIR) or point.startswith(f"{NODE_DIR}/"):
                points.append(point)
    return sorted(set(points), key=lambda p: p.count("/"), reverse=True)


def down_node(*, remove: bool = True) -> None:
    """Stops the node so that nothing of it runs or uses CPU afterwards: kubelet first (it would start
    the Pods again), then every Pod through CRI (containers, their shims, CNI DEL, network namespaces),
    then containerd; kube-proxy's and the bridge's rules and link; the kernel settings as they were."""
    names = GROUPS["node"]
    if not NODE_DIR.exists() and not any(read_pid(COMPONENTS[name]) for name in names):
        return  # never started (a stack without a node): nothing to stop or clean
    # All but containerd at once (each stop waits ~2 s here for its process to be reaped); 5 s: the
    # node's API server, asked to stop, waits out the 20 s otherwise (its state is in etcd).
    others = [name for name in reversed(names) if name != "containerd"]
    with concurrent.futures.ThreadPoolExecutor(len(others)) as pool:
        stopped = list(pool.map(lambda name: stop(COMPONENTS[name], timeout=5.0), others))
    for name, was_running in zip(others, stopped, strict=True):
        if was_running:
            print(f"  {name:<20} stopped")
    if read_pid(COMPONENTS["containerd"]) is not None:
        crictl = BIN_DIR / "crictl"
        if crictl.exists():
            subprocess.run(
                [str(crictl), f"--runtime-endpoint=unix://{containerd_socket()}", "rmp", "--all", "--force"],
                capture_output=True,
                timeout=120,
            )
        stop(COMPONENTS["containerd"])
        print(f"  {'containerd':<20} stopped")
    kill_leftover_shims()
    if Path(node_binary_path("kube-proxy")).exists():
        subprocess.run([node_binary_path("kube-proxy"), "--cleanup"], capture_output=True, timeout=60)
    remove_kubelet_chains()
    for point in node_mounts():
        subprocess.run(["umount", "--lazy", point], capture_output=True)
    if Path(f"/sys/class/net/{NODE_BRIDGE}").exists():
        subprocess.run(["ip", "link", "del", NODE_BRIDGE], capture_output=True)
    restore_sysctls()
    # The Node (else a next `up node` would find it Ready from before) and the kubernetes Service's
    # endpoint on the node's API server, through the core API server when it runs.
    if apiserver_ready():
        for kind, name, namespace in (("node", NODE_NAME, None), ("endpointslice", "kubernetes-stack-node", "default")):
            subprocess.run(
                [binary("kubectl"), f"--kubeconfig={kubeconfig_path()}", "delete", kind, name, "--ignore-not-found"]
                + ([f"--namespace={namespace}"] if namespace else []),
                capture_output=True,
                timeout=60,
            )
    if remove:
        shutil.rmtree(NODE_DIR, ignore_errors=True)


def remove_kubelet_chains() -> None:
    """kubelet's own chains, which ``kube-proxy --cleanup`` leaves (KUBE-FIREWALL, its drop of
    outside packets to 127.0.0.0/8, KUBE-KUBELET-CANARY, KUBE-IPTABLES-HINT): the jumps to them
    from the built-in chains, then the chains, in IPv4 and IPv6."""
    for tool in ("iptables", "ip6tables"):
        found = shutil.which(tool, path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin")
        if found is None:
            continue
        for table in ("filter", "nat", "mangle"):
            saved = subprocess.run([found, "-w", "-t", table, "-S"], capture_output=True, text=True)
            rules = saved.stdout.splitlines()
            chains = [line.split()[1] for line in rules if line.startswith("-N KUBE-")]
            for rule in rules:
                words = shlex.split(rule)
                jumps = words[:1] == ["-A"] and "-j" in words and words[words.index("-j") + 1] in chains
                if jumps and words[1] not in chains:
                    subprocess.run([found, "-w", "-t", table, "-D", *words[1:]], capture_output=True)
            for flag in ("-F", "-X"):
                for chain in chains:
                    subprocess.run([found, "-w", "-t", table, flag, chain], capture_output=True)


def node_binary_path(relative: str) -> str:
    return str(BIN_DIR / relative)


def kill_leftover_shims() -> None:
    """containerd's shims run in sessions of their own and outlive it: any left serving the node's
    containerd (its socket on their command line) is ended, by pid."""
    address = str(containerd_socket())
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            args = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if args and args[0].endswith(b"containerd-shim-runc-v2") and address.encode() in args:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(proc.name), signal.SIGKILL)


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
        kafka_component("a"),
        kafka_component("b"),
        # On demand, for MirrorMaker 2 tests that need a third site (a chain of two mirrors: MirrorMaker 2
        # never mirrors a topic back to a cluster it came from, so two clusters make one hop at most)
        # and for the exactly-once worker below, whose Kafka it is.
        kafka_component("c"),
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
        # On demand (`up node`): the node, after everything else so that `down` stops it first.
        *NODE_COMPONENTS,
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


def stale(component: Component) -> bool:
    """Running with other settings than this checkout's (or from before settings were recorded)."""
    digest = component.settings_digest()
    if digest is None or read_pid(component) is None:
        return False
    try:
        return component.settings_file.read_text().strip() != digest
    except FileNotFoundError:
        return True


def start(component: Component) -> subprocess.Popen[bytes] | None:
    if stale(component):
        print(f"  {component.name:<20} restarting: its settings changed (see {component.log})", flush=True)
        stop(component)
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
    digest = component.settings_digest()
    if digest is not None:
        component.settings_file.write_text(digest)
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
        if name in GROUPS:
            for member in GROUPS[name]:
                visit(member)
            return
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
    # Running components started with other settings are restarted too, asked for or not: the
    # first ``up`` after a checkout changed them (tests and make call ``up`` when ``info`` says so).
    pending = resolve([*(names or CORE), *(name for name, c in COMPONENTS.items() if stale(c))])
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


def cmd_down(groups: list[str] | None = None) -> None:
    """Everything, or only the named groups (``down node``: the node, the rest of the stack untouched)."""
    unknown = [group for group in groups or [] if group not in GROUPS]
    if unknown:
        raise StackError(f"down takes no component, only a group: {', '.join(GROUPS)} (not {', '.join(unknown)})")
    if groups:
        down_node()
        print("node down")
        return
    down_node()
    # Reverse dependency order: Connect before Kafka, controller-manager before apiserver, Spark's worker
    # (and its executors) before its master.
    for name in reversed(list(COMPONENTS)):
        if stop(COMPONENTS[name]):
            print(f"  {name:<20} stopped")
    for name in ("etcd-data", "kafka-a-data", "kafka-b-data", "kafka-c-data", "run", "pki", "node-pki"):
        shutil.rmtree(STACK_DIR / name, ignore_errors=True)
    kubeconfig_path().unlink(missing_ok=True)
    print("stack down")


def info() -> dict[str, object]:
    running = {name: read_pid(c) is not None for name, c in COMPONENTS.items()}
    restart = [name for name, c in COMPONENTS.items() if stale(c)]
    # Read only: ``info`` runs in every test process at once, and only ``up`` (under its lock) adds values.
    saved = RUN_DIR / "state.json"
    creds: dict[str, str] = json.loads(saved.read_text()) if saved.exists() else {}
    return {
        "kubeconfig": str(kubeconfig_path()),
        "apiserver": f"https://{HOST}:{PORTS['apiserver']}",
        "kafka_a": f"{HOST}:{PORTS['kafka-a']}",
        "kafka_b": f"{HOST}:{PORTS['kafka-b']}",
        "kafka_c": f"{HOST}:{PORTS['kafka-c']}",
        # The same brokers as the node's Pods reach them (through node-gateway; ``up node``).
        "kafka_a_pods": f"{NODE_IP}:{PORTS['kafka-a-pods']}",
        "kafka_b_pods": f"{NODE_IP}:{PORTS['kafka-b-pods']}",
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
        "node_kubeconfig": str(node_kubeconfig_path()),
        "node_name": NODE_NAME,
        "node_ip": NODE_IP,
        "pod_cidr": POD_CIDR,
        "node_toleration": {**NODE_TAINT, "operator": "Exists"},
        "containerd_endpoint": f"unix://{containerd_socket()}",
        "crictl": str(BIN_DIR / "crictl"),
        "running": running,
        "stale": restart,
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
    # The node (`up node`): kubectl for its Pods (logs, exec) and crictl's endpoint.
    print(f"export NODE_KUBECONFIG={data['node_kubeconfig']}")
    print(f"export CONTAINER_RUNTIME_ENDPOINT={data['containerd_endpoint']}")
    print(f"export PATH={BIN_DIR}:$PATH")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start components (default: the core set)")
    up.add_argument("components", nargs="*")
    stop_parser = sub.add_parser("stop", help="stop components, keep their data")
    stop_parser.add_argument("components", nargs="+")
    down = sub.add_parser("down", help="stop everything and remove data (or only a group: down node)")
    down.add_argument("groups", nargs="*")
    image = sub.add_parser("node-image", help="import images from podman into the node's containerd")
    image.add_argument("images", nargs="+")
    namespace = sub.add_parser("node-namespace", help="make namespaces where the node's Pods can run")
    namespace.add_argument("namespaces", nargs="+")
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
                cmd_down(args.groups)
        elif args.command == "node-image":
            for reference in args.images:
                node_image(reference)
        elif args.command == "node-namespace":
            for name in args.namespaces:
                node_namespace(name)
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
