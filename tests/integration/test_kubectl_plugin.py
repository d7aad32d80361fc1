"""``kubectl connect-offsets`` against the real stack with the operator running.

The plugin runs as users run it: the installed ``kubectl-connect_offsets`` console script in a
subprocess, and once through the real kubectl binary (plugin discovery on PATH). Covers list,
alter --from-file, reset and restore on a FileStreamSource connector, an operator refusal and a
Connect rejection (exit 1 with the reason and Connect's own message, request withdrawn), a bad
file (exit 2, nothing written), and -l with its summary table.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from confluent_kafka import Producer

from tests.conftest import OperatorProcess, wait_for
from tests.integration.support import (
    FILE_SINK,
    GROUP,
    VERSION,
    annotation,
    connect_offsets,
    connect_state,
    create_cluster,
    create_connector,
    file_source_spec,
    get_connector,
    patch_connector,
    read_topic,
    wait_condition,
)

PLUGIN = str(Path(sys.executable).parent / "kubectl-connect_offsets")


def plugin(stack: dict[str, Any], *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": stack["kubeconfig"]}
    return subprocess.run([PLUGIN, *args], capture_output=True, text=True, env=env, timeout=timeout)


def kubectl_plugin(stack: dict[str, Any], *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``kubectl connect-offsets ARGS``: the plugin found by kubectl's own plugin discovery on PATH."""
    env = {
        **os.environ,
        "KUBECONFIG": stack["kubeconfig"],
        "PATH": f"{Path(PLUGIN).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    return subprocess.run(
        [stack["kubectl"], "connect-offsets", *args], capture_output=True, text=True, env=env, timeout=timeout
    )


def write_kubeconfig(path: Path, server: str) -> Path:
    """A kubeconfig for a server that is not the stack's (the token is never accepted anywhere)."""
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": server, "insecure-skip-tls-verify": True}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u", "namespace": "default"}}],
                "current-context": "x",
            }
        )
    )
    return path


def source_offsets(path: Path, position: int) -> list[dict[str, Any]]:
    return [{"partition": {"filename": str(path)}, "offset": {"position": position}}]


REQUEST_KEYS = ("connector-offsets", "request-id", "restore-from", "dry-run", "stop-connector", "mirrormaker-connector")


def request_annotations(body: dict[str, Any]) -> dict[str, str]:
    """The annotations of an offsets request (kopf keeps its own under the same prefix)."""
    keys = {f"connect-offsets.io/{key}" for key in REQUEST_KEYS}
    return {k: v for k, v in (body["metadata"].get("annotations") or {}).items() if k in keys}


def test_list_alter_reset_restore_file_source(
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
    source = tmp_path / "source.txt"
    source.write_text("".join(f"line-{i}\n" for i in range(5)))
    size = source.stat().st_size
    name, cm = f"kp-{unique}", "kp-offsets"
    create_cluster(custom, namespace, connect_url)
    create_connector(custom, namespace, name, file_source_spec(source, f"kp-{unique}", cm))
    try:
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorRunning")
        wait_for("offsets at end of file", lambda: connect_offsets(connect, name) == source_offsets(source, size))

        # list: the offsets as JSON on stdout, nothing on stderr
        listed = plugin(stack, "list", name, "-n", namespace)
        assert listed.returncode == 0, listed.stderr
        assert json.loads(listed.stdout) == {"offsets": source_offsets(source, size)}
        assert listed.stderr == ""

        # the same through kubectl's plugin discovery; options before the command work too
        env = {
            **os.environ,
            "KUBECONFIG": stack["kubeconfig"],
            "PATH": f"{Path(PLUGIN).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        }
        via_kubectl = subprocess.run(
            [stack["kubectl"], "connect-offsets", "-n", namespace, "list", f"cokc/{name}", "-o", "json"],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert via_kubectl.returncode == 0, via_kubectl.stderr
        result = json.loads(via_kubectl.stdout)
        assert result["result"] == "Succeeded"
        assert result["offsets"] == source_offsets(source, size)  # the entries, not {"offsets": {"offsets": ...}}
        assert result["requestId"].startswith("kubectl-")

        # alter on a running connector: the plugin refuses before any write (issue 49: it used to
        # overwrite the ConfigMap, then the operator refused); exit 1 and the operator's reason
        offsets_file = tmp_path / "offsets.json"
        offsets_file.write_text(json.dumps({"offsets": source_offsets(source, 6)}, indent=2))
        configmap_before = core.read_namespaced_config_map(cm, namespace)
        body_before = get_connector(custom, namespace, name)
        refused = plugin(stack, "alter", name, "-n", namespace, "--from-file", str(offsets_file))
        assert refused.returncode == 1, refused.stderr
        assert "alter refused (ConnectorNotStopped)" in refused.stderr
        assert "needs it STOPPED; nothing was changed" in refused.stderr
        assert "add --stop-connector" in refused.stderr
        body = get_connector(custom, namespace, name)
        assert annotation(body, "connector-offsets") is None
        assert request_annotations(body) == request_annotations(body_before)
        assert body["status"].get("lastOffsetsOperation") == body_before["status"].get("lastOffsetsOperation")
        configmap_after = core.read_namespaced_config_map(cm, namespace)
        assert configmap_after.metadata.resource_version == configmap_before.metadata.resource_version
        assert connect_offsets(connect, name) == source_offsets(source, size)
        assert connect_state(connect, name) == "RUNNING"

        patch_connector(custom, namespace, name, {"spec": {"state": "stopped"}})
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorStopped")

        # a bad file: exit 2, the problem with its path, nothing written or annotated
        configmap_before = core.read_namespaced_config_map(cm, namespace)
        body_before = get_connector(custom, namespace, name)
        bad = tmp_path / "bad.json"
        bad.write_text(json.dumps({"offsets": [{"partition": {"filename": str(source)}, "offset": {"position": "6"}}]}))
        invalid = plugin(stack, "alter", name, "-n", namespace, "-f", str(bad))
        assert invalid.returncode == 2, invalid.stderr
        assert invalid.stderr.startswith(f"error: file {bad} is not valid for KafkaConnector {namespace}/{name}")
        assert 'offsets[0].offset.position: expected an integer >= 0, got "6" (string)' in invalid.stderr
        assert "nothing was changed" in invalid.stderr
        assert len(invalid.stderr.strip().splitlines()) == 1
        configmap_after = core.read_namespaced_config_map(cm, namespace)
        assert configmap_after.metadata.resource_version == configmap_before.metadata.resource_version
        body_after = get_connector(custom, namespace, name)
        assert request_annotations(body_after) == request_annotations(body_before)
        assert body_after["status"]["lastOffsetsOperation"] == body_before["status"]["lastOffsetsOperation"]

        # alter --from-file: written to the alterOffsets ConfigMap, applied, backup named
        altered = plugin(stack, "alter", name, "-n", namespace, "--from-file", str(offsets_file))
        assert altered.returncode == 0, altered.stderr
        assert connect_offsets(connect, name) == source_offsets(source, 6)
        assert "altered successfully" in altered.stdout
        first_backup = get_connector(custom, namespace, name)["status"]["lastOffsetsOperation"]["backup"]
        assert f"backup of the previous offsets: ConfigMap {first_backup}" in altered.stdout
        written = json.loads(core.read_namespaced_config_map(cm, namespace).data["offsets.json"])
        assert written == {"offsets": source_offsets(source, 6)}
        assert annotation(get_connector(custom, namespace, name), "connector-offsets") is None

        # reset
        reset = plugin(stack, "reset", name, "-n", namespace)
        assert reset.returncode == 0, reset.stderr
        assert "reset successfully" in reset.stdout
        assert connect_offsets(connect, name) == []

        # restore: the newest backup is the one taken before the reset (position 6)
        restored = plugin(stack, "restore", name, "-n", namespace)
        assert restored.returncode == 0, restored.stderr
        assert connect_offsets(connect, name) == source_offsets(source, 6)

        # restore a named backup: the one taken before the alter (end of file)
        named = plugin(stack, "restore", name, "-n", namespace, "--from-backup", first_backup)
        assert named.returncode == 0, named.stderr
        assert f"restore from {first_backup}" in named.stdout
        assert connect_offsets(connect, name) == source_offsets(source, size)
        assert (
            request_annotations(get_connector(custom, namespace, name)).get("connect-offsets.io/restore-from") is None
        )

        # a backup that does not exist: exit 2 before anything is annotated
        missing = plugin(stack, "restore", name, "-n", namespace, "--from-backup", "no-such-backup")
        assert missing.returncode == 2
        assert "backup ConfigMap" in missing.stderr and "not found" in missing.stderr
        assert annotation(get_connector(custom, namespace, name), "connector-offsets") is None
    finally:
        connect.delete(f"/connectors/{name}")


def test_a_refused_restore_prints_the_reason_and_the_entry(
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
    """A backup edited by hand: exit 1 with the operator's reason and the entry at fault.

    Until issue 21 a restore skipped the typed checks and this backup reached Connect, which
    answered 400; now the operator refuses it before anything is sent (InvalidBackup), naming the
    entry, and the plugin prints that."""
    name, topic, cm = f"kpsink-{unique}", f"kpsink-{unique}", "kpsink-offsets"
    create_cluster(custom, namespace, connect_url)
    create_connector(
        custom,
        namespace,
        name,
        {
            "class": FILE_SINK,
            "tasksMax": 1,
            "state": "stopped",
            "config": {"topics": topic, "file": str(tmp_path / "sink.txt")},
            "listOffsets": {"toConfigMap": {"name": cm}},
            "alterOffsets": {"fromConfigMap": {"name": cm}},
        },
    )
    try:
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorStopped")
        reset = plugin(stack, "reset", name, "-n", namespace, "-o", "json")
        assert reset.returncode == 0, reset.stderr
        backup = json.loads(reset.stdout)["backup"]
        broken = {"offsets": [{"partition": {"kafka_topic": topic}, "offset": {"kafka_offset": 1}}]}
        core.patch_namespaced_config_map(backup, namespace, {"data": {"offsets.json": json.dumps(broken)}})

        failed = plugin(stack, "restore", name, "-n", namespace, "--from-backup", backup)
        assert failed.returncode == 1, failed.stderr
        first = failed.stderr.splitlines()[0]
        assert first.startswith(f"error: KafkaConnector {namespace}/{name}: restore failed (InvalidBackup): ")
        assert f"backup {backup} is not valid for this connector" in first
        assert "offsets[0].partition" in failed.stderr and "kafka_partition" in failed.stderr
        body = get_connector(custom, namespace, name)
        assert request_annotations(body) == {}  # withdrawn: nothing runs later by surprise
        assert body["status"]["lastOffsetsOperation"]["result"] == "Failed"

        verbose = plugin(stack, "restore", name, "-n", namespace, "--from-backup", backup, "--verbose")
        assert verbose.returncode == 1
        assert "lastOffsetsOperation: " in verbose.stderr and "request id: kubectl-" in verbose.stderr
    finally:
        connect.delete(f"/connectors/{name}")


def test_selector_runs_on_many_and_prints_a_table(
    custom: Any,
    namespace: str,
    operator: OperatorProcess,
    connect: httpx.Client,
    connect_url: str,
    stack: dict[str, Any],
    tmp_path: Path,
    unique: str,
) -> None:
    create_cluster(custom, namespace, connect_url)
    names = [f"kpsel-{unique}-{i}" for i in range(3)]
    sources = []
    for index, name in enumerate(names):
        source = tmp_path / f"source-{index}.txt"
        source.write_text("x\n" * (index + 1))
        sources.append(source)
        spec = file_source_spec(source, name, f"{name}-offsets", state="running" if index == 2 else "stopped")
        create_connector(custom, namespace, name, spec)
        patch_connector(custom, namespace, name, {"metadata": {"labels": {"team": f"t-{unique}"}}})
    # One more connector outside the selector, which must not be touched.
    other = f"kpsel-{unique}-other"
    create_connector(custom, namespace, other, file_source_spec(tmp_path / "source-0.txt", other, "other", "stopped"))
    try:
        for name in names:
            wait_condition(custom, namespace, name, "Ready")

        listed = plugin(stack, "list", "-l", f"team=t-{unique}", "-n", namespace)
        assert listed.returncode == 0, listed.stderr
        lines = listed.stdout.splitlines()
        assert lines[0].split() == ["NAME", "CONNECTOR", "OPERATION", "RESULT", "MESSAGE"]
        assert [line.split()[:4] for line in lines[1:]] == [[n, n, "list", "Succeeded"] for n in names]

        # reset: two stopped connectors succeed, the running one is refused -> exit 1, summary says so
        reset = plugin(stack, "reset", "-l", f"team=t-{unique}", "-n", namespace, "-o", "json")
        assert reset.returncode == 1, reset.stderr
        rows = {row["name"]: row for row in json.loads(reset.stdout)}
        assert {n: rows[n]["result"] for n in names} == {
            names[0]: "Succeeded",
            names[1]: "Succeeded",
            names[2]: "Failed",
        }
        assert rows[names[2]]["reason"] == "ConnectorNotStopped"
        assert reset.stderr.startswith("error: 1 of 3 failed")
        assert connect_offsets(connect, names[0]) == [] and connect_offsets(connect, names[1]) == []
        assert connect_offsets(connect, names[2]) != []
        assert annotation(get_connector(custom, namespace, other), "connector-offsets") is None
        assert (get_connector(custom, namespace, other)["status"].get("lastOffsetsOperation")) is None

        nothing = plugin(stack, "list", "-l", "team=nobody", "-n", namespace)
        assert nothing.returncode == 2
        assert nothing.stderr.strip() == f"error: no KafkaConnector matches -l team=nobody in namespace {namespace}"
    finally:
        for name in [*names, other]:
            connect.delete(f"/connectors/{name}")


def test_stop_connector_and_dry_run(
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
    source = tmp_path / "source.txt"
    source.write_text("one\ntwo\nthree\n")
    size = source.stat().st_size
    name, cm = f"kpstop-{unique}", "kpstop-offsets"
    create_cluster(custom, namespace, connect_url)
    create_connector(custom, namespace, name, file_source_spec(source, f"kpstop-{unique}", cm))
    try:
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorRunning")
        wait_for("offsets at end of file", lambda: connect_offsets(connect, name) == source_offsets(source, size))

        # --dry-run on a running connector: the diff is printed, nothing changes
        dry = plugin(stack, "reset", name, "-n", namespace, "--dry-run")
        assert dry.returncode == 0, dry.stderr
        report = json.loads(dry.stdout)
        assert report["operation"] == "reset"
        assert report["removed"] == source_offsets(source, size)
        assert report["summary"].startswith("0 added, 0 changed, 1 removed")
        assert json.loads(core.read_namespaced_config_map(cm, namespace).data["dry-run.json"]) == report
        assert connect_offsets(connect, name) == source_offsets(source, size)
        assert connect_state(connect, name) == "RUNNING"
        body = get_connector(custom, namespace, name)
        assert body["status"]["lastOffsetsOperation"]["dryRun"] is True
        assert request_annotations(body) == {}

        # --stop-connector: the operator stops it, alters, and brings it back to running
        offsets_file = tmp_path / "offsets.json"
        offsets_file.write_text(json.dumps({"offsets": source_offsets(source, 4)}))
        altered = plugin(stack, "alter", name, "-n", namespace, "-f", str(offsets_file), "--stop-connector")
        assert altered.returncode == 0, altered.stderr
        assert "altered successfully" in altered.stdout
        wait_for("connector running again", lambda: connect_state(connect, name) == "RUNNING")
        # it re-reads the file from byte 4 and commits the end again
        wait_for("offsets at end of file again", lambda: connect_offsets(connect, name) == source_offsets(source, size))
        body = get_connector(custom, namespace, name)
        assert body["status"]["lastOffsetsOperation"]["operation"] == "alter"
        assert body["status"]["lastOffsetsOperation"]["result"] == "Succeeded"
        assert request_annotations(body) == {}
    finally:
        connect.delete(f"/connectors/{name}")


def test_no_operator_times_out_with_exit_3(
    custom: Any, namespace: str, stack: dict[str, Any], tmp_path: Path, unique: str
) -> None:
    """Without an operator nothing answers: exit 3 after --timeout, the request stays pending."""
    name = f"kpnoop-{unique}"
    create_connector(custom, namespace, name, file_source_spec(tmp_path / "in.txt", name, "noop-offsets"))
    result = plugin(stack, "list", name, "-n", namespace, "--timeout", "2s")
    assert result.returncode == 3, result.stderr
    lines = result.stderr.splitlines()
    assert lines[0].startswith("error: no result from the operator after 2s; the request stays pending.")
    assert f"watching namespace {namespace}?" in lines[0]
    assert lines[1].startswith(f"hint: cancel it with: kubectl annotate kafkaconnectors.connect-offsets.io {name}")
    assert annotation(get_connector(custom, namespace, name), "connector-offsets") == "list"
    # a second request is refused while the first is pending
    again = plugin(stack, "reset", name, "-n", namespace, "--no-wait")
    assert again.returncode == 2
    assert "already has a pending request connect-offsets.io/connector-offsets=list" in again.stderr
    missing = plugin(stack, "list", "no-such-connector", "-n", namespace)
    assert missing.returncode == 2
    assert missing.stderr.strip().startswith(f"error: KafkaConnector {namespace}/no-such-connector not found")


@pytest.mark.xdist_group("mirrormaker2")  # runs MirrorMaker 2: see test_mirrormaker2.py
def test_mirrormaker2_list_and_alter(
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
    east, west = f"e{unique}", f"w{unique}"
    topic = f"kpmm2-{unique}"
    source_name = f"{east}->{west}.MirrorSourceConnector"
    key = f"{east}--{west}.MirrorSourceConnector.json"
    producer = Producer({"bootstrap.servers": stack["kafka_b"]})
    for i in range(5):
        producer.produce(topic, value=f"v{i}".encode())
    producer.flush(10)
    block: dict[str, Any] = {
        "tasksMax": 1,
        "config": {
            "replication.factor": 1,
            "offset-syncs.topic.replication.factor": 1,
            "heartbeats.replication.enabled": False,  # B may hold others' heartbeats
            "sync.topic.acls.enabled": False,
            "refresh.topics.interval.seconds": 5,
        },
        "listOffsets": {"toConfigMap": {"name": "mm2-offsets"}},
        "alterOffsets": {"fromConfigMap": {"name": "mm2-offsets"}},
    }
    spec = {
        "clusters": [
            {"alias": east, "bootstrapServers": stack["kafka_b"]},
            {"alias": west, "bootstrapServers": stack["kafka_a"]},
        ],
        "mirrors": [{"sourceCluster": east, "targetCluster": west, "topicsPattern": topic, "sourceConnector": block}],
    }
    create_cluster(custom, namespace, connect_url)
    custom.create_namespaced_custom_object(
        GROUP,
        VERSION,
        namespace,
        "kafkamirrormaker2s",
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "KafkaMirrorMaker2",
            "metadata": {"name": "mirror", "namespace": namespace, "labels": {f"{GROUP}/cluster": "local"}},
            "spec": spec,
        },
    )
    partition = {"cluster": east, "partition": 0, "topic": topic}
    try:
        wait_for(
            "MM2 committed offset 4",
            lambda: connect_offsets(connect, source_name) == [{"partition": partition, "offset": {"offset": 4}}],
            timeout=120,
        )
        listed = plugin(stack, "list", "mm2/mirror", "-n", namespace, "--mirrormaker-connector", source_name)
        assert listed.returncode == 0, listed.stderr
        assert json.loads(listed.stdout) == {"offsets": [{"partition": partition, "offset": {"offset": 4}}]}

        typo = plugin(stack, "list", "mm2/mirror", "-n", namespace, "--mirrormaker-connector", f"{east}->{west}.Typo")
        assert typo.returncode == 2
        assert f"valid: {source_name}" in typo.stderr

        # replay from upstream offset 2 (stored as 1), with the operator stopping and resuming the connector
        replay = tmp_path / "replay.json"
        replay.write_text(json.dumps({"offsets": [{"partition": partition, "offset": {"replayFrom": 2}}]}))
        altered = plugin(
            stack,
            "alter",
            "comm2/mirror",
            "-n",
            namespace,
            "--mirrormaker-connector",
            source_name,
            "--from-file",
            str(replay),
            "--stop-connector",
        )
        assert altered.returncode == 0, altered.stderr
        assert f"--mirrormaker-connector {source_name}" in altered.stdout  # the undo command
        assert json.loads(core.read_namespaced_config_map("mm2-offsets", namespace).data[key])["offsets"][0][
            "offset"
        ] == {"replayFrom": 2}
        # records 2..4 are replicated again, then the committed offset is back at 4
        assert len(read_topic(stack["kafka_a"], f"{east}.{topic}", 8, timeout=90)) >= 8
        wait_for(
            "MM2 committed offset 4 again",
            lambda: connect_offsets(connect, source_name) == [{"partition": partition, "offset": {"offset": 4}}],
            timeout=120,
        )
    finally:
        custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, "kafkamirrormaker2s", "mirror")
        wait_for("MM2 connector removed with the resource", lambda: connect_state(connect, source_name) is None)


def test_output_formats_through_kubectl(
    custom: Any,
    namespace: str,
    operator: OperatorProcess,
    connect: httpx.Client,
    connect_url: str,
    stack: dict[str, Any],
    tmp_path: Path,
    unique: str,
) -> None:
    """-o yaml, name and wide through ``kubectl connect-offsets``, for one resource and with -l."""
    source = tmp_path / "source.txt"
    source.write_text("a\nbb\n")
    name = f"kpfmt-{unique}"
    create_cluster(custom, namespace, connect_url)
    create_connector(custom, namespace, name, file_source_spec(source, name, f"{name}-offsets", state="stopped"))
    patch_connector(custom, namespace, name, {"metadata": {"labels": {"fmt": unique}}})
    try:
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorStopped")

        as_yaml = kubectl_plugin(stack, "list", name, "-n", namespace, "-o", "yaml")
        assert as_yaml.returncode == 0, as_yaml.stderr
        listed = yaml.safe_load(as_yaml.stdout)
        assert (listed["kind"], listed["name"], listed["result"]) == ("KafkaConnector", name, "Succeeded")
        assert listed["offsets"] == []  # stopped before it ever ran: nothing committed
        assert listed["requestId"].startswith("kubectl-")

        offsets_file = tmp_path / "offsets.json"
        offsets_file.write_text(json.dumps({"offsets": source_offsets(source, 2)}))
        as_name = kubectl_plugin(stack, "alter", name, "-n", namespace, "-f", str(offsets_file), "-o", "name")
        assert as_name.returncode == 0, as_name.stderr
        assert as_name.stdout == f"kafkaconnector.connect-offsets.io/{name}\n"
        # kubectl itself accepts what -o name printed
        got = subprocess.run(
            [stack["kubectl"], "get", as_name.stdout.strip(), "-n", namespace, "-o", "name"],
            capture_output=True,
            text=True,
            env={**os.environ, "KUBECONFIG": stack["kubeconfig"]},
            timeout=60,
        )
        assert got.returncode == 0, got.stderr
        assert got.stdout == as_name.stdout
        assert connect_offsets(connect, name) == source_offsets(source, 2)

        wide = kubectl_plugin(stack, "reset", "-l", f"fmt={unique}", "-n", namespace, "-o", "wide")
        assert wide.returncode == 0, wide.stderr
        header, row = wide.stdout.splitlines()
        assert header.split()[:5] == ["NAMESPACE", "KIND", "NAME", "CONNECTOR", "OPERATION"]
        assert header.split()[5:10] == ["RESULT", "REASON", "BACKUP", "REQUEST", "ID"]
        assert row.split()[:6] == [namespace, "KafkaConnector", name, name, "reset", "Succeeded"]
        record = get_connector(custom, namespace, name)["status"]["lastOffsetsOperation"]
        assert row.split()[7:9] == [record["backup"], record["requestId"]]
        assert connect_offsets(connect, name) == []
    finally:
        connect.delete(f"/connectors/{name}")


def test_impersonation_and_request_timeout_through_kubectl(
    namespace: str, stack: dict[str, Any], tmp_path: Path, unique: str
) -> None:
    """--as reaches the real API server (RBAC answers for the impersonated user); --request-timeout
    bounds a request to a server that accepts the connection but never answers."""
    denied = kubectl_plugin(stack, "list", f"kpas-{unique}", "-n", namespace, "--as", f"nobody-{unique}")
    assert denied.returncode == 4, denied.stderr
    assert f'User "nobody-{unique}" cannot get resource "kafkaconnectors"' in denied.stderr
    assert "lacks a permission" in denied.stderr
    assert len(denied.stderr.strip().splitlines()) == 1

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # connections complete in the backlog; nothing ever reads or answers
    server = f"https://127.0.0.1:{silent.getsockname()[1]}"
    try:
        kubeconfig = write_kubeconfig(tmp_path / "silent", server)
        started = time.monotonic()
        hung = kubectl_plugin(stack, "list", "x", "--kubeconfig", str(kubeconfig), "--request-timeout", "1s")
        elapsed = time.monotonic() - started
    finally:
        silent.close()
    assert hung.returncode == 4, hung.stderr
    assert elapsed < 30, elapsed
    assert hung.stderr == f"error: cannot reach the API server {server}: timed out (see --request-timeout)\n"


def test_the_wait_watches_every_step_and_prints_progress(
    custom: Any, namespace: str, stack: dict[str, Any], tmp_path: Path, unique: str
) -> None:
    """The test plays the operator (no operator runs): it writes the stop -> change -> resume steps,
    chunk progress and the result into status back to back, faster than any polling would see
    them. The plugin, run through kubectl with --progress, must print every step (a watch delivers
    each change) and exit as soon as the completion protocol says so."""
    name = f"kpwatch-{unique}"
    create_connector(custom, namespace, name, file_source_spec(tmp_path / "in.txt", name, f"{name}-offsets", "stopped"))
    env = {
        **os.environ,
        "KUBECONFIG": stack["kubeconfig"],
        "PATH": f"{Path(PLUGIN).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    argv = ["connect-offsets", "reset", name, "-n", namespace, "--stop-connector", "--progress", "--timeout", "60s"]
    process = subprocess.Popen(
        [stack["kubectl"], *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(process.stderr.readline, "")), daemon=True)  # type: ignore[union-attr]
    reader.start()
    try:
        wait_for("the plugin's request", lambda: annotation(get_connector(custom, namespace, name), "request-id"))
        request_id = annotation(get_connector(custom, namespace, name), "request-id")
        wait_for("the first progress line", lambda: any("waiting for the operator" in line for line in lines))

        def status(patch: dict[str, Any]) -> None:
            custom.patch_namespaced_custom_object_status(GROUP, VERSION, namespace, "kafkaconnectors", name, patch)

        pending = {
            "operation": "reset",
            "source": "annotation",
            "requestId": request_id,
            "started": "2026-01-01T00:00:00Z",
        }
        status({"status": {"pendingOffsetsOperation": {**pending, "step": "Stopping"}}})
        status({"status": {"pendingOffsetsOperation": {**pending, "step": "Changing"}}})
        progress = {"appliedChunks": 1, "totalChunks": 3, "appliedPartitions": 10, "totalPartitions": 30}
        status({"status": {"offsetsProgress": progress}})
        status({"status": {"offsetsProgress": {**progress, "appliedChunks": 2, "appliedPartitions": 20}}})
        status({"status": {"pendingOffsetsOperation": {**pending, "step": "Resuming"}, "offsetsProgress": None}})
        record = {
            "operation": "reset",
            "result": "Succeeded",
            "time": "2026-01-01T00:00:09Z",
            "message": "reset by the test",
            "requestId": request_id,
        }
        status({"status": {"pendingOffsetsOperation": None, "lastOffsetsOperation": record}})
        removed = time.monotonic()
        patch_connector(
            custom,
            namespace,
            name,
            {"metadata": {"annotations": {f"{GROUP}/{key}": None for key in REQUEST_KEYS}}},
        )
        assert process.wait(timeout=30) == 0, "".join(lines)
        latency = time.monotonic() - removed
    finally:
        if process.poll() is None:
            process.kill()
    reader.join(timeout=10)
    out = process.stdout.read()  # type: ignore[union-attr]
    prefix = f"KafkaConnector {namespace}/{name}: reset: "
    assert [line.rstrip("\n") for line in lines] == [
        prefix + "waiting for the operator",
        prefix + "step 1/3, stopping the connector",
        prefix + "step 2/3, changing the offsets",
        prefix + "step 2/3, changing the offsets, 1/3 chunks applied (10/30 partitions)",
        prefix + "step 2/3, changing the offsets, 2/3 chunks applied (20/30 partitions)",
        prefix + "step 3/3, resuming the connector",
        prefix + "result recorded (Succeeded), finishing",  # the annotation is not removed yet
    ]
    assert out == f"KafkaConnector {namespace}/{name}: reset by the test\n"
    assert latency < 5, latency  # the plugin saw the annotation go without a polling interval's delay


def test_an_unreachable_api_server_is_one_line_with_exit_4(stack: dict[str, Any], tmp_path: Path) -> None:
    """No traceback and no urllib3 retry warnings: one line naming the server and the cause, for a
    request, for -l and for lag, through kubectl."""
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    server = f"https://127.0.0.1:{closed.getsockname()[1]}"
    closed.close()  # nothing listens there now
    kubeconfig = str(write_kubeconfig(tmp_path / "closed", server))
    expected = f"error: cannot reach the API server {server}: connection refused\n"
    for argv in (["reset", "src"], ["list", "-l", "team=x", "-A"], ["lag", "mm2/x"]):
        result = kubectl_plugin(stack, *argv, "--kubeconfig", kubeconfig)
        assert result.returncode == 4, (argv, result.stderr)
        assert result.stderr == expected, argv
        assert result.stdout == ""
    verbose = kubectl_plugin(stack, "reset", "src", "--kubeconfig", kubeconfig, "-v")
    assert verbose.returncode == 4
    assert verbose.stderr.startswith(expected) and "MaxRetryError" in verbose.stderr  # the detail, with -v
    assert "Traceback" not in verbose.stderr


def test_the_documented_rbac_without_watch_falls_back_to_reading(
    kube: Any,
    custom: Any,
    namespace: str,
    operator: OperatorProcess,
    connect: httpx.Client,
    connect_url: str,
    stack: dict[str, Any],
    tmp_path: Path,
    unique: str,
) -> None:
    """A user with the documented plugin rules but without ``watch`` (as they were before the
    watch): the request still completes, by reading the resource; -v says why. With ``watch``
    added, the same user's request is waited for with the watch (no note), and a dry run of a file
    (which creates its own ConfigMap) works with the same rules."""
    from kubernetes import client

    rbac = client.RbacAuthorizationV1Api(kube)
    user, name = f"plugin-user-{unique}", f"kprbac-{unique}"
    rules = [
        {"apiGroups": [GROUP], "resources": ["kafkaconnectors"], "verbs": ["get", "list", "patch"]},
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "create", "patch"]},
    ]
    rbac.create_namespaced_role(namespace, {"metadata": {"name": "plugin"}, "rules": rules})
    rbac.create_namespaced_role_binding(
        namespace,
        {
            "metadata": {"name": "plugin"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "plugin"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
        },
    )
    create_cluster(custom, namespace, connect_url)
    create_connector(custom, namespace, name, file_source_spec(tmp_path / "in.txt", name, f"{name}-offsets", "stopped"))
    try:
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorStopped")
        polled = kubectl_plugin(stack, "list", name, "-n", namespace, "--as", user, "-v")
        assert polled.returncode == 0, polled.stderr
        assert json.loads(polled.stdout) == {"offsets": []}
        assert f"note: KafkaConnector {namespace}/{name}: cannot watch it" in polled.stderr
        assert "reading it every 0.5s instead" in polled.stderr

        rules[0]["verbs"] = ["get", "list", "watch", "patch"]
        rbac.replace_namespaced_role("plugin", namespace, {"metadata": {"name": "plugin"}, "rules": rules})
        watched = kubectl_plugin(stack, "list", name, "-n", namespace, "--as", user, "-v")
        assert watched.returncode == 0, watched.stderr
        assert json.loads(watched.stdout) == {"offsets": []}
        assert "cannot watch" not in watched.stderr

        # the same rules cover a dry run of a file: it creates <resource>-dry-run-input (issue 36)
        preview_file = tmp_path / "preview.json"
        preview_file.write_text(json.dumps({"offsets": source_offsets(tmp_path / "in.txt", 0)}))
        preview = kubectl_plugin(
            stack, "alter", name, "-n", namespace, "-f", str(preview_file), "--dry-run", "--as", user
        )
        assert preview.returncode == 0, preview.stderr
        assert json.loads(preview.stdout)["added"] == source_offsets(tmp_path / "in.txt", 0)
    finally:
        connect.delete(f"/connectors/{name}")
