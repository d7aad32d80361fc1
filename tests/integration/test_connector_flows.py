"""KafkaConnector flows with the operator running (as a subprocess) against the real stack.

Covers: the Strimzi blog flow on FileStreamSource (list -> stop -> alter -> resume -> reset), the
sink flow on FileStreamSink, refusals that must not touch Connect, Connect down during a list,
connector lifecycle (config change, deletion, drift repair, name clash), and basic auth with no
secret leaking into logs, status or Events.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Producer

from tests.conftest import REPO, OperatorProcess, delete_namespace, wait_for
from tests.integration.support import (
    FILE_SINK,
    annotate,
    annotation,
    condition,
    configmap_offsets,
    connect_offsets,
    connect_send,
    connect_state,
    connector_config,
    create_cluster,
    create_connector,
    events_for,
    file_source_spec,
    get_connector,
    patch_connector,
    read_topic,
    wait_annotation_removed,
    wait_condition,
    wait_connect_state,
    wait_events,
)


def offsets_cm(core: Any, namespace: str, name: str, text: str, **extra: str) -> None:
    body = {"metadata": {"name": name}, "data": {"offsets.json": text, **extra}}
    try:
        core.create_namespaced_config_map(namespace, body)
    except Exception:
        core.replace_namespaced_config_map(name, namespace, body)


def cleanup_connector(connect: httpx.Client, name: str) -> None:
    connect.delete(f"/connectors/{name}")


def test_blog_flow_file_source(
    custom: Any,
    core: Any,
    namespace: str,
    operator: OperatorProcess,
    connect: httpx.Client,
    connect_url: str,
    stack: dict[str, Any],
    tmp_path: Path,
    unique: str,
) -> None:
    lines = [f"record-{i:02d}" for i in range(6)]
    source = tmp_path / "source.txt"
    source.write_text("".join(f"{line}\n" for line in lines))
    size = source.stat().st_size
    name, topic, cm = f"blog-{unique}", f"blog-{unique}", "blog-offsets"
    # A pre-existing ConfigMap: list must keep its other keys.
    core.create_namespaced_config_map(namespace, {"metadata": {"name": cm}, "data": {"notes": "keep me"}})
    create_cluster(custom, namespace, connect_url)
    create_connector(custom, namespace, name, file_source_spec(source, topic, cm))
    try:
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorRunning")
        assert [r.decode().strip('"') for r in read_topic(stack["kafka_a"], topic, len(lines))] == lines
        wait_for(
            "source offset at end of file",
            lambda: (
                connect_offsets(connect, name)
                == [{"partition": {"filename": str(source)}, "offset": {"position": size}}]
            ),
        )

        # list
        annotate(custom, namespace, name, connector_offsets="list")
        body = wait_annotation_removed(custom, namespace, name)
        listed = configmap_offsets(core, namespace, cm)
        assert listed == {"offsets": [{"partition": {"filename": str(source)}, "offset": {"position": size}}]}
        configmap = core.read_namespaced_config_map(cm, namespace)
        assert configmap.data["notes"] == "keep me"
        # The user's ConfigMap stays the user's: no owner reference (deleting the resource would
        # garbage-collect it) and none of the operator's labels (issue 18).
        assert not configmap.metadata.owner_references
        assert "connect-offsets.io/name" not in (configmap.metadata.labels or {})
        assert body["status"]["lastOffsetsOperation"]["operation"] == "list"
        assert body["status"]["lastOffsetsOperation"]["result"] == "Succeeded"

        # stop, then alter to position 10
        patch_connector(custom, namespace, name, {"spec": {"state": "stopped"}})
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorStopped")
        listed["offsets"][0]["offset"]["position"] = 10
        offsets_cm(core, namespace, cm, json.dumps(listed, indent=2), notes="keep me")
        annotate(custom, namespace, name, connector_offsets="alter")
        body = wait_annotation_removed(custom, namespace, name)
        assert connect_offsets(connect, name) == [{"partition": {"filename": str(source)}, "offset": {"position": 10}}]
        assert body["status"]["lastOffsetsOperation"]["operation"] == "alter"
        assert "altered successfully" in body["status"]["lastOffsetsOperation"]["message"]
        assert connect_state(connect, name) == "STOPPED"

        # resume: the file is read again from byte 10
        patch_connector(custom, namespace, name, {"spec": {"state": "running"}})
        replay = source.read_bytes()[10:].decode().splitlines()
        records = read_topic(stack["kafka_a"], topic, len(lines) + len(replay))
        assert [r.decode().strip('"') for r in records[len(lines) :]] == replay

        # reset needs STOPPED again
        patch_connector(custom, namespace, name, {"spec": {"state": "stopped"}})
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorStopped")
        annotate(custom, namespace, name, connector_offsets="reset")
        body = wait_annotation_removed(custom, namespace, name)
        assert connect_offsets(connect, name) == []
        assert body["status"]["lastOffsetsOperation"]["operation"] == "reset"
        wait_events(core, namespace, name, "OffsetsOperationSucceeded")  # posted after the status write
        assert "ConnectorCreated" in {e.reason for e in events_for(core, namespace, name)}
    finally:
        cleanup_connector(connect, name)


def test_sink_flow_replays_records(
    custom: Any,
    core: Any,
    namespace: str,
    operator: OperatorProcess,
    connect: httpx.Client,
    connect_url: str,
    stack: dict[str, Any],
    tmp_path: Path,
    unique: str,
) -> None:
    topic, name, cm = f"sink-{unique}", f"sink-{unique}", "sink-offsets"
    producer = Producer({"bootstrap.servers": stack["kafka_a"]})
    for i in range(6):
        producer.produce(topic, value=json.dumps(f"value-{i}").encode())
    producer.flush(10)
    sink_file = tmp_path / "sink.txt"
    create_cluster(custom, namespace, connect_url)
    create_connector(
        custom,
        namespace,
        name,
        {
            "class": FILE_SINK,
            "tasksMax": 1,
            "config": {"topics": topic, "file": str(sink_file), "consumer.override.auto.offset.reset": "earliest"},
            "listOffsets": {"toConfigMap": {"name": cm}},
            "alterOffsets": {"fromConfigMap": {"name": cm}},
        },
    )
    try:
        wait_for(
            "6 lines in the sink file", lambda: sink_file.exists() and len(sink_file.read_text().splitlines()) == 6
        )
        wait_for(
            "sink offsets committed",
            lambda: connect_offsets(connect, name) and connect_offsets(connect, name)[0]["offset"]["kafka_offset"] == 6,
        )
        annotate(custom, namespace, name, connector_offsets="list")
        wait_annotation_removed(custom, namespace, name)
        listed = configmap_offsets(core, namespace, cm)
        assert listed == {
            "offsets": [{"partition": {"kafka_topic": topic, "kafka_partition": 0}, "offset": {"kafka_offset": 6}}]
        }

        patch_connector(custom, namespace, name, {"spec": {"state": "stopped"}})
        listed["offsets"][0]["offset"]["kafka_offset"] = 2
        offsets_cm(core, namespace, cm, json.dumps(listed))
        annotate(custom, namespace, name, connector_offsets="alter")  # stop and alter in one go
        wait_annotation_removed(custom, namespace, name)
        assert connect_offsets(connect, name)[0]["offset"] == {"kafka_offset": 2}
        patch_connector(custom, namespace, name, {"spec": {"state": "running"}})
        wait_for(
            "records 2..5 written again",
            lambda: sink_file.read_text().splitlines()[6:] == [f"value-{i}" for i in range(2, 6)],
        )
    finally:
        cleanup_connector(connect, name)


def test_refusals_change_nothing_in_connect(
    custom: Any,
    core: Any,
    namespace: str,
    operator: OperatorProcess,
    connect: httpx.Client,
    connect_url: str,
    tmp_path: Path,
    unique: str,
) -> None:
    source = tmp_path / "source.txt"
    source.write_text("a\nb\nc\n")
    name, cm = f"refuse-{unique}", "refuse-offsets"
    valid = json.dumps({"offsets": [{"partition": {"filename": str(source)}, "offset": {"position": 1}}]})
    offsets_cm(core, namespace, cm, valid)
    create_cluster(custom, namespace, connect_url)
    create_connector(custom, namespace, name, file_source_spec(tmp_path / "source.txt", f"t-{unique}", cm))
    try:
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorRunning")
        wait_for("offsets committed", lambda: connect_offsets(connect, name))
        before = connect_offsets(connect, name)

        # alter on a running connector: refused, connector keeps running
        annotate(custom, namespace, name, connector_offsets="alter")
        found = wait_condition(custom, namespace, name, "OffsetsOperationFailed", reason="ConnectorNotStopped")
        assert "spec.state: stopped" in found["message"]
        assert connect_state(connect, name) == "RUNNING"
        assert connect_offsets(connect, name) == before
        assert annotation(get_connector(custom, namespace, name), "connector-offsets") == "alter"

        # an unknown annotation value: a warning condition, everything else keeps working
        for bad in ("lst", ""):
            annotate(custom, namespace, name, connector_offsets=bad)
            found = wait_for(
                f"InvalidAnnotation for {bad!r}",
                lambda b=bad: (lambda c: c if c and repr(b) in c["message"] else None)(
                    condition(get_connector(custom, namespace, name), "InvalidAnnotation")
                ),
            )
            assert found["status"] == "True"
            assert condition(get_connector(custom, namespace, name), "Ready")["status"] == "True"  # type: ignore[index]

        patch_connector(custom, namespace, name, {"spec": {"state": "stopped"}})
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorStopped")
        before = connect_offsets(connect, name)

        cases = [
            ("ConfigMapNotFound", None, "does not exist"),
            ("InvalidOffsets", "{not json", "line 1"),
            ("InvalidOffsets", json.dumps({"offsets": [{"partition": {"filename": str(source)}}]}), "offsets[0]"),
            ("InvalidOffsets", json.dumps({"offsets": []}), "offsets"),
            (
                "InvalidOffsets",
                json.dumps({"offsets": [{"partition": {"filename": str(source)}, "offset": {"position": "ten"}}]}),
                "position",
            ),
        ]
        core.delete_namespaced_config_map(cm, namespace)
        for reason, content, fragment in cases:
            if content is not None:
                offsets_cm(core, namespace, cm, content)
            annotate(custom, namespace, name, connector_offsets="alter")
            found = wait_for(
                f"refusal {reason} for {content!r}",
                lambda r=reason, f=fragment: (lambda c: c if c and c["reason"] == r and f in c["message"] else None)(
                    condition(get_connector(custom, namespace, name), "OffsetsOperationFailed")
                ),
            )
            assert found["status"] == "True"
            assert connect_offsets(connect, name) == before
            assert connect_state(connect, name) == "STOPPED"
            assert annotation(get_connector(custom, namespace, name), "connector-offsets") == "alter"
        assert any(e.type == "Warning" for e in wait_events(core, namespace, name, "OffsetsOperationFailed"))

        # A valid ConfigMap now: the pending request runs without touching the annotation again.
        offsets_cm(core, namespace, cm, valid)
        wait_annotation_removed(custom, namespace, name)
        assert connect_offsets(connect, name)[0]["offset"] == {"position": 1}
        assert condition(get_connector(custom, namespace, name), "OffsetsOperationFailed") is None
    finally:
        cleanup_connector(connect, name)


@pytest.fixture(scope="module")
def aux_worker(stack: dict[str, Any]) -> str:
    subprocess.run([sys.executable, str(REPO / "hack" / "stack.py"), "up", "connect-aux"], check=True)
    return str(stack["connect_aux_url"])


@pytest.mark.local_stack
def test_list_retried_while_connect_is_down(
    custom: Any,
    core: Any,
    namespace: str,
    operator: OperatorProcess,
    aux_worker: str,
    tmp_path: Path,
    unique: str,
) -> None:
    source = tmp_path / "source.txt"
    source.write_text("x\ny\n")
    name, cm = f"down-{unique}", "down-offsets"
    create_cluster(custom, namespace, aux_worker, name="aux")
    create_connector(custom, namespace, name, file_source_spec(source, f"down-{unique}", cm), cluster="aux")
    stack_py = [sys.executable, str(REPO / "hack" / "stack.py")]
    with httpx.Client(base_url=aux_worker, timeout=30) as aux:
        try:
            wait_condition(custom, namespace, name, "Ready", reason="ConnectorRunning")
            subprocess.run([*stack_py, "stop", "connect-aux"], check=True)
            annotate(custom, namespace, name, connector_offsets="list")
            found = wait_condition(custom, namespace, name, "Ready", status="False")
            assert found["reason"] in ("ConnectClusterUnavailable", "ConnectError")
            assert annotation(get_connector(custom, namespace, name), "connector-offsets") == "list"
            with pytest.raises(Exception, match="Not Found"):
                core.read_namespaced_config_map(cm, namespace)
            subprocess.run([*stack_py, "up", "connect-aux"], check=True)
            wait_annotation_removed(custom, namespace, name, timeout=120)
            assert configmap_offsets(core, namespace, cm)["offsets"][0]["partition"] == {"filename": str(source)}
        finally:
            subprocess.run([*stack_py, "up", "connect-aux"], check=True)
            cleanup_connector(aux, name)


def test_lifecycle_config_drift_and_deletion(
    custom: Any,
    core: Any,
    namespace: str,
    operator: OperatorProcess,
    connect: httpx.Client,
    connect_url: str,
    tmp_path: Path,
    unique: str,
) -> None:
    source = tmp_path / "source.txt"
    source.write_text("1\n2\n")
    name = f"life-{unique}"
    create_cluster(custom, namespace, connect_url)
    create_connector(custom, namespace, name, file_source_spec(source, f"life-{unique}", "unused", state="paused"))
    try:
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorPaused")
        assert connect_state(connect, name) == "PAUSED"

        patch_connector(custom, namespace, name, {"spec": {"config": {"topic": f"life2-{unique}"}, "state": "running"}})
        wait_for(
            "config updated in Connect",
            lambda: connect.get(f"/connectors/{name}/config").json().get("topic") == f"life2-{unique}",
        )
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorRunning")

        # Behind our back: deleted via REST -> recreated by the drift check.
        assert connect_send(connect, "DELETE", f"/connectors/{name}").status_code == 204
        wait_for(
            "connector recreated (second ConnectorCreated event)",
            lambda: len([e for e in events_for(core, namespace, name) if e.reason == "ConnectorCreated"]) >= 2,
        )
        wait_for(
            "recreated connector running",
            lambda: (
                connect.get(f"/connectors/{name}/config").status_code == 200
                and connect_state(connect, name) == "RUNNING"
            ),
        )
        # Behind our back, while the operator is down: paused via REST -> resumed once it is back.
        operator.stop()
        assert connect_send(connect, "PUT", f"/connectors/{name}/pause").status_code == 202
        wait_connect_state(connect, name, "PAUSED")
        operator.start()
        wait_connect_state(connect, name, "RUNNING", timeout=60)

        # A second resource elsewhere claiming the same connector name must not take it over.
        other_ns = f"{namespace}-b"[:63]
        core.create_namespace({"metadata": {"name": other_ns}})
        try:
            create_cluster(custom, other_ns, connect_url)
            create_connector(custom, other_ns, name, file_source_spec(source, f"other-{unique}", "unused"))
            second = OperatorProcess(operator.kubeconfig, other_ns, tmp_path / "op2.log")
            second.start()
            try:
                found = wait_condition(
                    custom, other_ns, name, "Ready", status="False", reason="ConnectorOwnedElsewhere"
                )
                assert f"{namespace}/{name}" in found["message"]
                assert connector_config(connect, name)["topic"] == f"life2-{unique}"
                custom.delete_namespaced_custom_object(
                    "connect-offsets.io", "v1beta1", other_ns, "kafkaconnectors", name
                )
                wait_for(
                    "second resource deleted",
                    lambda: (
                        not custom.list_namespaced_custom_object(
                            "connect-offsets.io", "v1beta1", other_ns, "kafkaconnectors"
                        )["items"]
                    ),
                )
                assert connect_state(connect, name) == "RUNNING"  # not deleted: not its connector
            finally:
                second.stop()
        finally:
            delete_namespace(core, custom, other_ns)

        custom.delete_namespaced_custom_object("connect-offsets.io", "v1beta1", namespace, "kafkaconnectors", name)
        wait_for("connector deleted in Connect", lambda: connect_state(connect, name) is None)
    finally:
        cleanup_connector(connect, name)


@pytest.fixture(scope="module")
def auth_worker(stack: dict[str, Any]) -> dict[str, Any]:
    subprocess.run([sys.executable, str(REPO / "hack" / "stack.py"), "up", "connect-auth"], check=True)
    info = json.loads(
        subprocess.run(
            [sys.executable, str(REPO / "hack" / "stack.py"), "info"], check=True, capture_output=True, text=True
        ).stdout
    )
    return info


@pytest.mark.local_stack
def test_basic_auth_cluster_never_leaks_the_password(
    custom: Any,
    core: Any,
    namespace: str,
    operator: OperatorProcess,
    auth_worker: dict[str, Any],
    tmp_path: Path,
    unique: str,
) -> None:
    user, password = auth_worker["connect_auth_user"], auth_worker["connect_auth_password"]
    url = auth_worker["connect_auth_url"]
    assert httpx.get(f"{url}/connectors").status_code == 401  # the worker really demands auth
    opted_in = {"connect-offsets.io/credentials": "true"}
    core.create_namespaced_secret(
        namespace,
        {
            "metadata": {"name": "connect-creds", "labels": opted_in},
            "stringData": {"username": user, "password": password},
        },
    )
    core.create_namespaced_secret(
        namespace,
        {
            "metadata": {"name": "wrong-creds", "labels": opted_in},
            "stringData": {"username": user, "password": "wrong-" + password},
        },
    )
    create_cluster(
        custom, namespace, url, name="secured", authentication={"type": "basic", "secretName": "connect-creds"}
    )
    create_cluster(custom, namespace, url, name="wrong", authentication={"type": "basic", "secretName": "wrong-creds"})
    source = tmp_path / "s.txt"
    source.write_text("one\n")
    name, cm = f"auth-{unique}", "auth-offsets"
    create_connector(custom, namespace, name, file_source_spec(source, f"auth-{unique}", cm), cluster="secured")
    with httpx.Client(base_url=url, auth=(user, password), timeout=30) as authed:
        try:
            wait_condition(custom, namespace, name, "Ready", reason="ConnectorRunning")
            wait_for("offsets committed", lambda: authed.get(f"/connectors/{name}/offsets").json()["offsets"])
            annotate(custom, namespace, name, connector_offsets="list")
            wait_annotation_removed(custom, namespace, name)
            assert configmap_offsets(core, namespace, cm)["offsets"][0]["offset"] == {"position": 4}

            def wrong_cluster_status() -> dict[str, Any] | None:
                body = custom.get_namespaced_custom_object(
                    "connect-offsets.io", "v1beta1", namespace, "connectclusters", "wrong"
                )
                ready = condition(body, "Ready")
                return body if ready and ready["status"] == "False" else None

            wrong = wait_for("wrong credentials reported", wrong_cluster_status)
            assert "401" in condition(wrong, "Ready")["message"]  # type: ignore[index]

            texts = [operator.log()]
            texts.append(json.dumps(get_connector(custom, namespace, name)))
            for cluster in ("secured", "wrong"):
                texts.append(
                    json.dumps(
                        custom.get_namespaced_custom_object(
                            "connect-offsets.io", "v1beta1", namespace, "connectclusters", cluster
                        )
                    )
                )
            texts += [f"{e.reason} {e.message}" for e in core.list_namespaced_event(namespace).items]
            for text in texts:
                assert password not in text
        finally:
            authed.delete(f"/connectors/{name}")


def test_restart_annotations_and_auto_restart(
    custom: Any,
    core: Any,
    namespace: str,
    operator: OperatorProcess,
    connect: httpx.Client,
    connect_url: str,
    tmp_path: Path,
    unique: str,
) -> None:
    create_cluster(custom, namespace, connect_url)
    # A sink whose file lives in a missing directory: its task fails at start, every time.
    broken, healthy = f"broken-{unique}", f"healthy-{unique}"
    create_connector(
        custom,
        namespace,
        broken,
        {
            "class": FILE_SINK,
            "tasksMax": 1,
            "config": {"topics": f"broken-{unique}", "file": str(tmp_path / "missing" / "dir" / "out.txt")},
            "autoRestart": {"enabled": True, "maxRestarts": 1},
        },
    )
    source = tmp_path / "s.txt"
    source.write_text("x\n")
    create_connector(custom, namespace, healthy, file_source_spec(source, f"healthy-{unique}", "unused"))
    try:
        found = wait_condition(custom, namespace, broken, "Ready", status="False", reason="ConnectorFailed")
        assert "FAILED" in found["message"]
        body = wait_for(
            "an automatic restart",
            lambda: (lambda b: b if (b["status"].get("autoRestart") or {}).get("count") == 1 else None)(
                get_connector(custom, namespace, broken)
            ),
        )
        assert body["status"]["autoRestart"]["lastRestartTime"]
        assert wait_events(core, namespace, broken, "ConnectorAutoRestarted")
        # The task fails again; with maxRestarts 1 the operator gives up and says so.
        exhausted = wait_condition(custom, namespace, broken, "AutoRestartExhausted")
        assert "maxRestarts" in exhausted["message"]

        wait_condition(custom, namespace, healthy, "Ready", reason="ConnectorRunning")
        annotate(custom, namespace, healthy, restart="includeTasks")
        wait_annotation_removed(custom, namespace, healthy, key="restart")
        annotate(custom, namespace, healthy, restart_task="0")
        wait_annotation_removed(custom, namespace, healthy, key="restart-task")
        assert wait_events(core, namespace, healthy, "ConnectorRestarted")
        assert wait_events(core, namespace, healthy, "TaskRestarted")
        annotate(custom, namespace, healthy, restart="sometimes")
        found = wait_condition(custom, namespace, healthy, "InvalidAnnotation")
        assert "sometimes" in found["message"]
        wait_condition(custom, namespace, healthy, "Ready", reason="ConnectorRunning")
    finally:
        cleanup_connector(connect, broken)
        cleanup_connector(connect, healthy)


def test_offsets_backed_up_before_every_change(
    custom: Any,
    core: Any,
    namespace: str,
    stack: dict[str, Any],
    connect: httpx.Client,
    connect_url: str,
    tmp_path: Path,
    unique: str,
) -> None:
    """Every alter/reset/restore first saves the current offsets in a backup ConfigMap; the newest N are
    kept; restore puts a backup back exactly (the newest, or the one named by restore-from)."""
    operator = OperatorProcess(
        stack["kubeconfig"], namespace, tmp_path / "op.log", extra_env={"CONNECT_OFFSETS_BACKUP_RETENTION": "2"}
    )
    operator.start()
    source = tmp_path / "s.txt"
    source.write_text("0123456789\n")
    name, cm = f"backup-{unique}", "backup-offsets"
    partition = {"filename": str(source)}
    create_cluster(custom, namespace, connect_url)
    create_connector(custom, namespace, name, file_source_spec(source, f"backup-{unique}", cm))
    try:
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorRunning")
        wait_for("offsets committed", lambda: connect_offsets(connect, name))
        patch_connector(custom, namespace, name, {"spec": {"state": "stopped"}})
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorStopped")
        made = []
        for position in (1, 2):
            offsets_cm(
                core,
                namespace,
                cm,
                json.dumps({"offsets": [{"partition": partition, "offset": {"position": position}}]}),
            )
            annotate(custom, namespace, name, connector_offsets="alter")
            body = wait_annotation_removed(custom, namespace, name)
            made.append(body["status"]["lastOffsetsOperation"]["backup"])
        annotate(custom, namespace, name, connector_offsets="reset")
        body = wait_annotation_removed(custom, namespace, name)
        made.append(body["status"]["lastOffsetsOperation"]["backup"])
        assert connect_offsets(connect, name) == []

        selector = f"connect-offsets.io/backup-of={name}"

        def backups() -> dict[str, Any]:
            found = core.list_namespaced_config_map(namespace, label_selector=selector).items
            return {c.metadata.name: c for c in found}

        # The oldest goes (retention 2), pruned once the reset is answered: just after the removal.
        wait_for("the oldest backup pruned", lambda: set(backups()) == set(made[1:]), timeout=20)
        kept = backups()
        # Each backup holds the offsets from just before its change.
        assert json.loads(kept[made[1]].data["offsets.json"])["offsets"][0]["offset"] == {"position": 1}
        assert json.loads(kept[made[2]].data["offsets.json"])["offsets"][0]["offset"] == {"position": 2}
        annotations = kept[made[2]].metadata.annotations
        assert annotations["connect-offsets.io/operation"] == "reset"
        assert annotations["connect-offsets.io/connector"] == name
        assert [o.name for o in kept[made[2]].metadata.owner_references] == [name]

        # restore from a named backup: the offsets from before the second alter come back
        annotate(custom, namespace, name, connector_offsets="restore", restore_from=made[1])
        body = wait_annotation_removed(custom, namespace, name)
        assert annotation(body, "restore-from") is None
        assert connect_offsets(connect, name) == [{"partition": partition, "offset": {"position": 1}}]
        assert body["status"]["lastOffsetsOperation"]["operation"] == "restore"
        before_restore = body["status"]["lastOffsetsOperation"]["backup"]
        # restore the newest backup (taken just before that restore, when there were no offsets):
        # exact, so the partition that exists now is removed again
        annotate(custom, namespace, name, connector_offsets="restore")
        body = wait_annotation_removed(custom, namespace, name)
        assert f"restore from {before_restore}" in body["status"]["lastOffsetsOperation"]["message"]
        # A loaded worker may list the partition with a null offset until its store has read the
        # tombstone back; what counts is that it ends up with no offset.
        wait_for("partition removed again", lambda: connect_offsets(connect, name) == [], timeout=20)
    finally:
        operator.stop()
        cleanup_connector(connect, name)
