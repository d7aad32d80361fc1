"""hack/stack.py's third Kafka cluster and exactly-once Connect worker (issue 46), without starting them:
both on demand, the worker on Kafka C with exactly-once source support and a group and internal topics
of its own, and a stack made before kafka-c existed gains its cluster id without losing any value."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest

from tests.hack_scripts import load_hack_script


@pytest.fixture
def stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.setenv("CONNECT_OFFSETS_STACK_DIR", str(tmp_path / "stack"))
    return load_hack_script("stack")


def properties(path: Path) -> dict[str, str]:
    lines = path.read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))


def test_the_third_site_is_on_demand(stack: ModuleType) -> None:
    assert {"kafka-c", "connect-eos"}.isdisjoint(stack.CORE)  # make test's core set is unchanged
    assert stack.resolve(["connect-eos"]) == ["kafka-c", "connect-eos"]
    ports = [port for component in stack.COMPONENTS.values() for port in component.ports]
    assert len(ports) == len(set(ports))
    info = stack.info()
    assert (info["kafka_c"], info["connect_eos_url"]) == ("127.0.0.1:39092", "http://127.0.0.1:18090")


def test_the_exactly_once_worker_uses_kafka_c_with_its_own_group_and_topics(
    stack: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    stack.RUN_DIR.mkdir(parents=True, exist_ok=True)
    monkeypatch.setattr(stack, "java_cmd", lambda *args, **kwargs: ["java"])  # no jars or JDK needed
    for name in ("connect", "connect-eos"):
        stack.COMPONENTS[name].prepare()
    shared, eos = (properties(stack.RUN_DIR / f"{name}.properties") for name in ("connect", "connect-eos"))
    assert eos["bootstrap.servers"] == "127.0.0.1:39092" and shared["bootstrap.servers"] == "127.0.0.1:19092"
    assert eos["exactly.once.source.support"] == "enabled" and "exactly.once.source.support" not in shared
    for key in ("group.id", "config.storage.topic", "offset.storage.topic", "status.storage.topic"):
        assert eos[key].endswith("-eos") and eos[key] != shared[key], key
    assert eos["listeners"] == "http://127.0.0.1:18090"


def test_kafka_c_has_a_single_broker_transaction_log(stack: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    """Exactly-once source tasks and the worker's leader write in transactions: with one broker the
    transaction state log must make do with one replica, or every transactional producer waits."""
    stack.RUN_DIR.mkdir(parents=True, exist_ok=True)
    (stack.STACK_DIR / "kafka-c-data").mkdir(parents=True)
    (stack.STACK_DIR / "kafka-c-data" / "meta.properties").write_text("")  # formatted: no kafka-storage run
    monkeypatch.setattr(stack, "java_cmd", lambda *args, **kwargs: ["java"])
    stack.COMPONENTS["kafka-c"].prepare()
    props = properties(stack.RUN_DIR / "kafka-c.properties")
    assert props["transaction.state.log.replication.factor"] == "1"
    assert props["transaction.state.log.min.isr"] == "1"
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:39092,PODS://127.0.0.1:39094,CONTROLLER://127.0.0.1:39093"
    # The node's Pods are told the node's address (the gateway forwards it to 127.0.0.1:39094).
    assert props["advertised.listeners"] == "PLAINTEXT://127.0.0.1:39092,PODS://10.244.0.1:39094"


def test_an_older_stack_gains_the_missing_cluster_id_and_keeps_the_rest(stack: ModuleType) -> None:
    """A stack running since before kafka-c: its token, password and cluster ids stay (its running
    components use them); only kafka-c's id is added, and ``info`` does not write the file."""
    path = stack.RUN_DIR / "state.json"
    before = {
        "admin_token": "t0k",
        "connect_auth_user": "connect-admin",
        "connect_auth_password": "pw",
        "kafka_a_cluster_id": "AAAA",
        "kafka_b_cluster_id": "BBBB",
    }
    stack.write(path, json.dumps(before))
    assert stack.info()["connect_auth_password"] == "pw"
    assert json.loads(path.read_text()) == before  # info only reads
    after = stack.state()
    assert {k: after[k] for k in before} == before
    assert after["kafka_c_cluster_id"] and not after["kafka_c_cluster_id"].startswith("-")
    assert json.loads(path.read_text()) == after and stack.state() == after  # kept, not drawn again
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert [p.name for p in stack.RUN_DIR.iterdir()] == ["state.json"]  # no partial file left behind


def test_a_broker_running_with_a_former_checkouts_settings_is_restarted_by_up(
    stack: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stack started before the brokers had their PODS listener keeps running across a checkout:
    ``info`` lists such a component under ``stale`` (its settings' digest, recorded at its start,
    differs or is missing) and the test session's ``up`` restarts it; a fresh start is not stale."""
    stack.RUN_DIR.mkdir(parents=True, exist_ok=True)
    kafka = stack.COMPONENTS["kafka-a"]
    monkeypatch.setattr(stack, "read_pid", lambda component: 4242 if component is kafka else None)
    assert stack.info()["stale"] == ["kafka-a"]  # running, no digest recorded: started by an older checkout
    kafka.settings_file.write_text(kafka.settings_digest())
    assert stack.info()["stale"] == []
    kafka.settings_file.write_text("0" * 64)  # started with other listeners
    assert stack.stale(kafka) and not stack.stale(stack.COMPONENTS["connect"])  # no settings kept for it
    assert "PODS://10.244.0.1:19094" in stack.kafka_properties("a")
    assert stack.info()["kafka_a_pods"] == "10.244.0.1:19094"
