"""hack/stack.py without starting anything heavy: busy ports are named, dependencies are ordered,
unknown components are refused, and versions come from the one versions file."""

from __future__ import annotations

import socket
from pathlib import Path
from types import ModuleType

import pytest

from tests.hack_scripts import load_hack_script

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.setenv("CONNECT_OFFSETS_STACK_DIR", str(tmp_path / "stack"))
    return load_hack_script("stack")


def test_busy_port_is_reported_with_the_component(stack: ModuleType) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        component = stack.Component("probe", [port], [], lambda: ["true"], lambda: True)
        (stack.RUN_DIR).mkdir(parents=True, exist_ok=True)
        with pytest.raises(stack.StackError, match=rf"probe: port\(s\) {port} on 127.0.0.1 already in use"):
            stack.start(component)


def test_dependencies_come_first(stack: ModuleType) -> None:
    order = stack.resolve(["connect", "controller-manager"])
    assert order.index("kafka-a") < order.index("connect")
    assert order.index("etcd") < order.index("apiserver") < order.index("controller-manager")


def test_unknown_component_is_refused(stack: ModuleType) -> None:
    with pytest.raises(stack.StackError, match="unknown component 'kafak'"):
        stack.resolve(["kafak"])


def test_versions_come_from_the_versions_file(stack: ModuleType) -> None:
    text = (REPO / "hack" / "versions.env").read_text()
    assert f"KAFKA_VERSION={stack.VERSIONS['KAFKA_VERSION']}" in text
    assert stack.KAFKA_LIBS.name == "libs" and stack.VERSIONS["KAFKA_VERSION"] in str(stack.KAFKA_LIBS)


def test_offline_tool_workers_are_on_demand_with_their_own_ports(stack: ModuleType) -> None:
    for name in ("connect-offline", "connect-standalone"):
        assert name not in stack.CORE  # started by the tests that stop and start them
        assert stack.resolve([name]) == ["kafka-a", name]
    ports = [port for component in stack.COMPONENTS.values() for port in component.ports]
    assert len(ports) == len(set(ports))
    assert stack.info()["run_dir"] == str(stack.RUN_DIR)


def test_fault_workers_are_one_on_demand_cluster(stack: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    """connect-fault and connect-fault-2 (killed, frozen and restarted by test_faults.py) form one Connect
    cluster of their own: same group and internal topics, never the shared worker's."""
    assert {"connect-fault", "connect-fault-2"}.isdisjoint(stack.CORE)
    stack.RUN_DIR.mkdir(parents=True, exist_ok=True)
    monkeypatch.setattr(stack, "java_cmd", lambda *args, **kwargs: ["java"])  # no jars or JDK needed
    settings = {}
    for name in ("connect-fault", "connect-fault-2"):
        stack.COMPONENTS[name].prepare()
        lines = (stack.RUN_DIR / f"{name}.properties").read_text().splitlines()
        settings[name] = dict(line.split("=", 1) for line in lines if "=" in line)
    first, second = settings["connect-fault"], settings["connect-fault-2"]
    for key in ("group.id", "config.storage.topic", "offset.storage.topic", "status.storage.topic"):
        assert first[key] == second[key] and first[key].endswith("-fault"), key
    assert first["listeners"] != second["listeners"] and first["rest.advertised.port"] == "18088"
    assert first["plugin.discovery"] == "service_load"  # fast restarts; the last setting wins in Java


def test_spark_cluster_is_on_demand_from_the_installed_distribution(stack: ModuleType, tmp_path: Path) -> None:
    """`up spark-worker` starts a standalone master first, then one small worker registered with it, both with
    the distribution's spark-class; a distribution of another Spark version than versions.env is refused."""
    assert {"spark-master", "spark-worker"}.isdisjoint(stack.CORE)
    assert stack.resolve(["spark-worker"]) == ["spark-master", "spark-worker"]
    names = list(stack.COMPONENTS)
    assert names.index("spark-worker") > names.index("spark-master")  # `down` stops the worker first
    home = tmp_path / "pyspark"
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "spark-class").write_text("#!/bin/sh\n")
    (home / "jars").mkdir()
    (home / "jars" / f"spark-core_2.13-{stack.VERSIONS['SPARK_VERSION']}.jar").write_text("")
    master, worker = stack.spark_components("-x", master_port=1, master_ui_port=2, worker_ui_port=3, home=home)
    assert (master.name, master.ports, worker.name, worker.ports) == ("spark-master-x", [1, 2], "spark-worker-x", [3])
    assert worker.depends == ["spark-master-x"] and master.env["SPARK_HOME"] == str(home)
    spark_class = str(home / "bin" / "spark-class")
    master_command = master.prepare()
    assert master_command[:2] == [spark_class, "org.apache.spark.deploy.master.Master"]
    assert options(master_command) == {"--host": "127.0.0.1", "--port": "1", "--webui-port": "2"}
    command = worker.prepare()
    assert (
        command[:2] == [spark_class, "org.apache.spark.deploy.worker.Worker"] and command[-1] == "spark://127.0.0.1:1"
    )
    assert options(command[:-1]) == {
        "--host": "127.0.0.1",
        "--webui-port": "3",
        "--work-dir": str(stack.RUN_DIR / "spark-worker-x-work"),
        "--cores": "1",
        "--memory": "1g",
    }
    (home / "jars" / f"spark-core_2.13-{stack.VERSIONS['SPARK_VERSION']}.jar").rename(
        home / "jars" / "spark-core_2.13-3.5.0.jar"
    )
    with pytest.raises(stack.StackError, match=r"is 3\.5\.0, hack/versions.env pins"):
        master.prepare()


def options(command: list[str]) -> dict[str, str]:
    """``--name value`` pairs after the main class (Spark's deploy classes refuse ``--name=value``)."""
    rest = command[2:]
    assert all(flag.startswith("--") and "=" not in flag for flag in rest[::2]), rest
    return dict(zip(rest[::2], rest[1::2], strict=True))


def test_kafka_cluster_ids_never_read_as_an_option(stack: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    """One token in 64 starts "-" in URL-safe base64; kafka-storage then read the id as an option and
    the stack did not start. Ids are drawn again until they do not, as Kafka's Uuid.randomUuid does."""
    draws = iter([b"\xf8" + bytes(15), bytes(16)])  # the first encodes as "-AAA...", the second "AAAA..."
    monkeypatch.setattr(stack.secrets, "token_bytes", lambda n: next(draws))
    cluster_id = stack.kafka_cluster_id()
    assert cluster_id == "A" * 22
    assert stack.base64.urlsafe_b64encode(b"\xf8" + bytes(15)).decode().startswith("-")  # the refused draw
