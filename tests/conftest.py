"""Shared fixtures: one real stack per session, a namespace and an operator per test.

Tiers (markers, applied by folder): ``unit`` (tests/unit: no network) and ``integration``
(tests/integration: the real kube-apiserver, Kafka and Connect started by ``hack/stack.py``).
The stack is started once per run, or reused when it already runs (``make stack-up``);
a stack the run started is stopped at its end unless CONNECT_OFFSETS_KEEP_STACK=1.
Tests isolate themselves by namespace and unique connector/topic names, never by restarts.

Parallel runs (``pytest -n 4 --dist loadgroup``, what ``make test`` does through ``hack/suite.py``):
every xdist worker is a process with its own session fixtures, so the stack is started under a
file lock by the first worker that needs it, and stopped by the process that ends the run (the
xdist controller, or the only process), which knows it from a marker file named after the run
(``CONNECT_OFFSETS_TEST_RUN``, shared by every process of the run). Tests that need the stack to
themselves are marked ``serial`` and run after the parallel part, one at a time; tests that share
something one of them stops or starts once carry the same ``xdist_group``, so one worker runs them
one after another (docs/development.md#tests).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import resource
import ssl
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

REPO = Path(__file__).resolve().parent.parent
STACK = [sys.executable, str(REPO / "hack" / "stack.py")]
T = TypeVar("T")
#: One id for every process of a test run (the xdist controller sets it before its workers start;
#: hack/suite.py sets it for both parts of ``make test``), so a stack started by any of them is
#: known to the process that ends the run.
RUN_ID = "CONNECT_OFFSETS_TEST_RUN"
#: CPU time (cpu_seconds) when a test's setup began.
CPU_AT_SETUP = pytest.StashKey[float]()


#: Target an existing cluster instead of the local stack (see deploy/kind/README.md).
EXTERNAL_KUBECONFIG = os.environ.get("CONNECT_OFFSETS_TEST_KUBECONFIG")


def is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def pytest_configure(config: pytest.Config) -> None:
    if not is_xdist_worker(config):
        os.environ.setdefault(RUN_ID, uuid.uuid4().hex)
        return
    # Hypothesis fails an example slower than its deadline (200 ms unless a test sets one): a timing
    # check, not what the tests assert, and one that the other processes' load breaks (an example of
    # test_offsets_models took 307 ms in a parallel run). Parallel runs keep every test's examples
    # and assertions and drop only that default deadline; explicit @settings(deadline=...) still apply.
    from hypothesis import settings

    settings.register_profile("parallel", deadline=None)
    settings.load_profile("parallel")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        path = str(item.path)
        if f"{os.sep}integration{os.sep}" in path:
            item.add_marker(pytest.mark.integration)
        elif f"{os.sep}unit{os.sep}" in path:
            item.add_marker(pytest.mark.unit)
    if EXTERNAL_KUBECONFIG:
        # Tests that start, stop or add local stack components cannot run against a foreign
        # cluster: they are deselected (reported as such), not skipped.
        kept = [i for i in items if i.get_closest_marker("local_stack") is None]
        deselected = [i for i in items if i.get_closest_marker("local_stack") is not None]
        if deselected:
            config.hook.pytest_deselected(items=deselected)
            items[:] = kept
    if is_xdist_worker(config):
        from tests.parallel import longest_first, record_groups

        longest_first(items)
        record_groups(items)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadgroup`` that keeps each ``xdist_group`` in one worker under pytest 9 (tests/parallel.py)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from tests.parallel import GroupScheduling

    return GroupScheduling(config, log)


def stack_info() -> dict[str, Any]:
    out = subprocess.run([*STACK, "info"], check=True, capture_output=True, text=True).stdout
    info: dict[str, Any] = json.loads(out)
    return info


def wait_for(what: str, check: Callable[[], T | None], timeout: float = 60.0, interval: float = 0.25) -> T:
    """Poll until ``check`` returns something truthy; fail with ``what`` and the last error.

    For a custom resource, ``tests.integration.support.watch_until`` waits on its changes instead.
    """
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
        except Exception as error:  # the next poll may succeed; keep the error for the report
            last_error = error
        time.sleep(interval)
    raise AssertionError(
        f"timed out after {timeout:.0f}s waiting for {what}" + (f": {last_error!r}" if last_error else "")
    )


def external_info() -> dict[str, Any]:
    """The existing cluster described by CONNECT_OFFSETS_TEST_* variables, in stack_info()'s shape."""
    local = stack_info()
    missing = [
        v for v in ("CONNECT_OFFSETS_TEST_CONNECT_URL", "CONNECT_OFFSETS_TEST_KAFKA_BOOTSTRAP") if not os.environ.get(v)
    ]
    if missing:
        raise RuntimeError(f"CONNECT_OFFSETS_TEST_KUBECONFIG is set, so set {', '.join(missing)} too")
    from kubernetes import config as kube_config

    loaded = kube_config.kube_config.KubeConfigLoader(
        config_dict=__import__("yaml").safe_load(Path(str(EXTERNAL_KUBECONFIG)).read_text())
    )
    server = loaded._cluster["server"]
    return {
        **local,
        "kubeconfig": EXTERNAL_KUBECONFIG,
        "apiserver": server,
        "connect_url": os.environ["CONNECT_OFFSETS_TEST_CONNECT_URL"],
        "kafka_a": os.environ["CONNECT_OFFSETS_TEST_KAFKA_BOOTSTRAP"],
        "kafka_b": os.environ.get("CONNECT_OFFSETS_TEST_KAFKA_B_BOOTSTRAP", ""),
        "external": True,
    }


def install_crds(info: dict[str, Any]) -> None:
    """Apply crds/ to the local stack and wait until the API server really serves them.

    The test session and every benchmark call this: a fresh stack (``hack/stack.py up`` alone) has
    no CRDs, and ``make bench`` on a fresh machine must not depend on a test run having installed them.
    """
    kubectl = info["kubectl"]
    env = {**os.environ, "KUBECONFIG": info["kubeconfig"]}
    with storage_version_lock(info):
        subprocess.run(
            [kubectl, "apply", "--server-side", "--force-conflicts", "-f", str(REPO / "crds")],
            check=True,
            env=env,
            capture_output=True,
        )
    plurals = ("connectclusters", "kafkaconnectors", "kafkamirrormaker2s")
    for crd in plurals:
        subprocess.run(
            [kubectl, "wait", "--for=condition=Established", f"crd/{crd}.connect-offsets.io", "--timeout=60s"],
            check=True,
            env=env,
            capture_output=True,
        )
    # Established is not yet servable: a fresh API server answers 429 "storage is (re)initializing"
    # for a while, which would delay the first test's operator past its waits.
    for plural in plurals:
        wait_for(
            f"{plural} servable",
            lambda p=plural: (
                subprocess.run(  # type: ignore[misc]
                    [kubectl, "get", p, "-A", "--request-timeout=5s"], env=env, capture_output=True
                ).returncode
                == 0
            ),
            timeout=120,
        )


@contextlib.contextmanager
def storage_version_lock(info: dict[str, Any]) -> Iterator[None]:
    """Held while a process changes which version the CRDs store: test_storage_migration (it moves
    storage back to v1alpha1 for a few seconds) and a session applying crds/ (which moves it to
    v1beta1), so a session starting meanwhile cannot switch it under that test."""
    folder = Path(info["run_dir"]).parent
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "storage-version.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def run_marker(info: dict[str, Any], what: str) -> Path:
    """A file in the stack's run folder saying this run did ``what`` (``stack.py down`` removes it)."""
    return Path(info["run_dir"]) / f"test-run-{os.environ[RUN_ID]}.{what}"


@contextlib.contextmanager
def session_lock(info: dict[str, Any]) -> Iterator[None]:
    """One process of the run at a time starts the stack and installs the CRDs; the others wait."""
    folder = Path(info["run_dir"]).parent
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "test-session.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


@pytest.fixture(scope="session")
def stack() -> Iterator[dict[str, Any]]:
    if EXTERNAL_KUBECONFIG:
        info = external_info()
        env = {**os.environ, "KUBECONFIG": info["kubeconfig"]}
        subprocess.run(
            [info["kubectl"], "apply", "--server-side", "--force-conflicts", "-f", str(REPO / "crds")],
            check=True,
            env=env,
            capture_output=True,
        )
        yield info
        return
    info = stack_info()
    with session_lock(info):
        info = stack_info()
        core = ["etcd", "apiserver", "controller-manager", "kafka-a", "kafka-b", "connect"]
        if not all(info["running"][name] for name in core):
            subprocess.run([*STACK, "up"], check=True)
            info = stack_info()
            run_marker(info, "started-stack").touch()  # pytest_sessionfinish of the run's last process stops it
        elif info.get("stale"):  # running with a former checkout's settings: ``up`` restarts those
            subprocess.run([*STACK, "up"], check=True)
            info = stack_info()
        installed = run_marker(info, "installed-crds")
        if not installed.exists():
            install_crds(info)
            installed.touch()
    yield info


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The run's end (the controller, or the only process): stop a stack the run started."""
    if is_xdist_worker(session.config):
        return
    if session.config.pluginmanager.hasplugin("xdist"):
        from tests.parallel import groups_file

        groups_file().unlink(missing_ok=True)
    if EXTERNAL_KUBECONFIG:
        return
    try:
        info = stack_info()
    except (OSError, subprocess.CalledProcessError, ValueError):  # no stack tooling here: nothing to stop
        return
    run_marker(info, "installed-crds").unlink(missing_ok=True)
    started = run_marker(info, "started-stack")
    if started.exists() and os.environ.get("CONNECT_OFFSETS_KEEP_STACK") != "1":
        subprocess.run([*STACK, "down"], check=False)


@pytest.fixture(scope="session")
def kube(stack: dict[str, Any]) -> Any:
    """A kubernetes ApiClient bound to the test stack's kubeconfig, and nothing else."""
    from kubernetes import config

    kubeconfig = stack["kubeconfig"]
    if not stack.get("external") and not kubeconfig.startswith(str(Path(stack["logs"]).parent)):
        raise RuntimeError(f"refusing a kubeconfig outside the test stack: {kubeconfig}")
    api_client = config.new_client_from_config(config_file=kubeconfig)
    import urllib3

    urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)  # self-signed test apiserver
    return api_client


@pytest.fixture
def core(kube: Any) -> Any:
    from kubernetes import client

    return client.CoreV1Api(kube)


@pytest.fixture
def custom(kube: Any) -> Any:
    from kubernetes import client

    return client.CustomObjectsApi(kube)


@pytest.fixture
def namespace(core: Any, custom: Any, request: pytest.FixtureRequest) -> Iterator[str]:
    name = f"t-{request.node.name[:30].lower().replace('_', '-').strip('-')}-{uuid.uuid4().hex[:6]}"
    name = "".join(c for c in name if c.isalnum() or c == "-")
    core.create_namespace({"metadata": {"name": name}})
    yield name
    delete_leftover_connectors(custom, name)
    delete_namespace(core, custom, name)


def listed_resources(custom: Any, namespace: str, plural: str) -> list[dict[str, Any]]:
    """The project's resources of one kind in the namespace; none if the API server refuses."""
    from kubernetes.client.exceptions import ApiException

    try:
        found: list[dict[str, Any]] = custom.list_namespaced_custom_object(
            "connect-offsets.io", "v1beta1", namespace, plural
        )["items"]
    except ApiException:
        return []
    return found


def delete_namespace(core: Any, custom: Any, namespace: str) -> None:
    """Delete a test's namespace once its operator has stopped, finalizers of the project's resources first.

    Nothing else would remove those finalizers now: the namespace would stay Terminating for the rest
    of the session, and the namespace controller retrying it (dozens of them by the end of a run)
    keeps the API server busy under every later test. The deletion itself is asynchronous (the
    controller-manager finishes it); nothing waits for it.
    """
    from kubernetes.client.exceptions import ApiException

    for plural in ("kafkaconnectors", "kafkamirrormaker2s", "connectclusters"):
        for item in listed_resources(custom, namespace, plural):
            if item["metadata"].get("finalizers"):
                with contextlib.suppress(ApiException):
                    custom.patch_namespaced_custom_object(
                        "connect-offsets.io",
                        "v1beta1",
                        namespace,
                        plural,
                        item["metadata"]["name"],
                        {"metadata": {"finalizers": None}},
                    )
    core.delete_namespace(namespace)


def delete_leftover_connectors(custom: Any, namespace: str) -> None:
    """Delete in Connect the connectors of the namespace's resources, if they are still there (the
    ``namespace`` fixture's teardown, after the test's operator has stopped).

    Why: the test's operator has stopped by now, so nothing else deletes them, and a connector left
    behind keeps its task, its polls and its share of every rebalance on the shared Connect worker
    for the rest of the run and for every later run on the same stack (19 were still running after
    one ``make test``). Best effort: a worker that is gone or refuses is left as it is.
    """
    clusters = listed_resources(custom, namespace, "connectclusters")
    urls = {c["metadata"]["name"]: (c.get("spec") or {}).get("url") for c in clusters}
    names: dict[str, set[str]] = {}
    for connector in listed_resources(custom, namespace, "kafkaconnectors"):
        cluster = (connector["metadata"].get("labels") or {}).get("connect-offsets.io/cluster", "")
        names.setdefault(cluster, set()).add(connector["metadata"]["name"])
    for mirror in listed_resources(custom, namespace, "kafkamirrormaker2s"):
        cluster = (mirror["metadata"].get("labels") or {}).get("connect-offsets.io/cluster", "")
        entries = (mirror.get("status") or {}).get("connectors") or []
        names.setdefault(cluster, set()).update(e["name"] for e in entries if isinstance(e, dict) and e.get("name"))
    for cluster, connectors in names.items():
        url = urls.get(cluster)
        if not url or not url.startswith("http://"):  # TLS workers need the test's client certificate
            continue
        with httpx.Client(base_url=url, timeout=2, verify=SHARED_TLS) as client:
            try:
                # One quick question first: a test's cluster may be a stopped worker or a proxy that
                # never answers, and a teardown must not wait on it once per connector.
                listed = set(client.get("/connectors").json())
            except (httpx.HTTPError, ValueError, TypeError):
                continue
            for name in sorted(connectors & listed):
                with contextlib.suppress(httpx.HTTPError):
                    client.delete(f"/connectors/{name}")


#: One TLS context for the tests' clients of the stack's http endpoints: without it httpx builds one
#: per client and loads the CA bundle into it, ~30 ms of CPU each, with a client per test and per
#: namespace clean-up (issue 32).
SHARED_TLS = ssl.create_default_context()


@pytest.fixture
def unique() -> str:
    return uuid.uuid4().hex[:8]


@pytest.fixture(scope="session")
def connect_url(stack: dict[str, Any]) -> str:
    return str(stack["connect_url"])


@pytest.fixture
def connect(connect_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=connect_url, timeout=30, verify=SHARED_TLS) as client:
        yield client


class OperatorProcess:
    """The operator as users run it: the ``connect-offsets-operator`` entry point in a subprocess."""

    def __init__(
        self,
        kubeconfig: str,
        namespace: str,
        log_path: Path,
        extra_env: dict[str, str] | None = None,
        extra_args: list[str] | None = None,
    ):
        self.kubeconfig = kubeconfig
        self.namespace = namespace
        self.log_path = log_path
        self.extra_env = extra_env or {}
        self.extra_args = extra_args or []
        self.executable = str(Path(sys.executable).parent / "connect-offsets-operator")
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = {
            **os.environ,
            "KUBECONFIG": self.kubeconfig,
            "CONNECT_OFFSETS_DRIFT_INTERVAL": "5",
            # The local stack has no TLS: its Connect takes basic auth over http, as a user who
            # allowed it would run the operator (tests of the refusal set it to false).
            "CONNECT_OFFSETS_ALLOW_PLAINTEXT_CREDENTIALS": "true",
            **self.extra_env,
        }
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [self.executable, "-n", self.namespace, *self.extra_args],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


@pytest.fixture
def operator(
    stack: dict[str, Any], namespace: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[OperatorProcess]:
    op = OperatorProcess(stack["kubeconfig"], namespace, tmp_path / "operator.log")
    op.start()
    yield op
    op.stop()
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        print("---- operator log (tail) ----")
        print(op.log()[-8000:])


def cpu_seconds() -> float:
    """CPU time of this process and of the children it has waited for (the operator, kubectl, the
    CLI, dedicated Connect workers a test stopped)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    item.stash[CPU_AT_SETUP] = cpu_seconds()


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    setattr(item, f"rep_{report.when}", report)
    if report.when == "teardown" and CPU_AT_SETUP in item.stash:
        # In the JUnit report (a property of the test): what hack/suite.py lists as the CPU each
        # test cost. On two cores the parallel part is CPU-bound, so CPU, not wall time, is what a
        # test takes from the others (issue 32).
        report.user_properties.append(("cpu_seconds", f"{cpu_seconds() - item.stash[CPU_AT_SETUP]:.1f}"))


#: The tests' own SparkSessions (the ``spark`` fixture) compile with C1 only: their jobs are short,
#: and C2's compilations cost a third of their CPU (tests/unit/test_pipeline.py: 60 s of CPU with the
#: product's default, 39 s like this, the same wall time) on two cores the integration tests need
#: (issue 32). The product's default (EMBEDDED_JAVA_OPTIONS) still runs in the tests that start the
#: pipeline as a command.
TEST_SPARK_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local SparkSession per test process (the Spark tests share an xdist group, so one JVM)."""
    from connect_offsets.tools.pipeline.session import EMBEDDED_JAVA_OPTIONS, SparkOptions, build_session

    conf = {
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.extraJavaOptions": f"{EMBEDDED_JAVA_OPTIONS} {TEST_SPARK_JAVA_OPTIONS}",
    }
    session = build_session(SparkOptions(master="local[2]", shuffle_partitions=2, progress=False, conf=conf))
    yield session
    session.stop()
