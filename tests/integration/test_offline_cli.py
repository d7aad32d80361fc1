"""The offline offsets tool (``connect-offsets export|import``) against real workers.

Covers:
- key bytes and Kafka partitions: records the shared worker itself writes (via PATCH, with
  awkward partitions: 13 keys, floats, control characters, non-ASCII) are byte-identical to our
  encoding and sit on the partition our murmur2 picks; export equals Connect's GET offsets;
- distributed round trip on the on-demand ``connect-offline`` worker: refusals (bad JSON shape,
  unknown connector, running connector) write nothing, dry run writes nothing, then stop the
  worker, import a new position, start it: the FileStreamSource connector resumes from there;
- the same round trip on the ``connect-standalone`` worker and its offsets file.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from connect_offsets.tools.offline.records import encode_key, murmur2_partition
from connect_offsets.tools.offline.store import topic_partition_count
from tests.conftest import STACK, wait_for
from tests.integration.support import (
    FILE_SOURCE,
    connect_offsets,
    connect_send,
    end_offset,
    raw_records,
    run_cli,
    wait_connect_state,
)

LINE = "line-{:02d}\n"  # 8 bytes per line: position n*8 is the start of line n


def canonical(entries: list[dict[str, Any]]) -> list[str]:
    return sorted(json.dumps(e, sort_keys=True) for e in entries)


def create_file_source(client: httpx.Client, name: str, file: Path, topic: str, **extra: Any) -> None:
    body = {
        "name": name,
        "config": {"connector.class": FILE_SOURCE, "tasks.max": "1", "file": str(file), "topic": topic},
    }
    body.update(extra)
    response = connect_send(client, "POST", "/connectors", json=body)
    assert response.status_code == 201, response.text


def wait_position(client: httpx.Client, name: str, file: Path, position: int) -> None:
    expected = [{"partition": {"filename": str(file)}, "offset": {"position": position}}]
    wait_for(f"{name} at position {position}", lambda: connect_offsets(client, name) == expected, timeout=60)


def stack_cmd(*args: str) -> None:
    subprocess.run([*STACK, *args], check=True, capture_output=True, timeout=180)


# --------------------------------------------------------------------------- byte-exactness on the shared worker


def test_worker_written_keys_match_ours_and_export_matches_get(
    stack: dict[str, Any], connect: httpx.Client, tmp_path: Path, unique: str
) -> None:
    name = f"offline-keys-{unique}"
    source = tmp_path / "in.txt"
    source.write_text("")
    create_file_source(connect, name, source, f"offline-keys-{unique}", initial_state="STOPPED")
    try:
        wait_connect_state(connect, name, "STOPPED")
        many = {f"k{i}": i for i in range(12)}
        partitions: list[dict[str, Any]] = [
            {"filename": str(source)},
            {"filename": f'{source}-\u00e9\u4e2d/\x1f\t"q"', **many},
            {"filename": "floats", "small": 1.5e-7, "big": 1e20, "plain": 0.25, "neg": -3, "flag": True},
        ]
        body = {"offsets": [{"partition": p, "offset": {"position": 7 + i}} for i, p in enumerate(partitions)]}
        response = connect_send(connect, "PATCH", f"/connectors/{name}/offsets", json=body)
        assert response.status_code == 200, response.text

        worker_config = str(Path(stack["run_dir"]) / "connect.properties")
        topic = "connect-offsets"
        records = wait_for(
            "the worker's offsets records", lambda: (r := raw_records(stack["kafka_a"], topic, name)) and len(r) >= 3
        )
        records = raw_records(stack["kafka_a"], topic, name)
        count = topic_partition_count({"bootstrap.servers": stack["kafka_a"]}, topic)
        ours = {encode_key(name, p) for p in partitions}
        assert {key for _, key, _ in records} == ours  # byte-identical keys
        for partition, key, _ in records:
            assert partition == murmur2_partition(key, count), key  # Java's murmur2 partitioner

        exported = run_cli("export", "-w", worker_config, "--connectors", name)
        assert exported.returncode == 0, exported.stderr
        document = json.loads(exported.stdout)
        assert canonical(document[name]) == canonical(connect_offsets(connect, name))
        assert "STOPPED" in exported.stderr  # the state from the config topic is listed

        history = json.loads(run_cli("export", "-w", worker_config, "-c", name, "--from-beginning").stdout)[name]
        assert len(history) == 3 and all(e["kafka"]["topic"] == topic for e in history)
        assert all(e["kafka"]["timestamp"] > 1_600_000_000_000 for e in history)
    finally:
        connect.delete(f"/connectors/{name}")


# --------------------------------------------------------------------------- distributed round trip


@pytest.mark.local_stack
@pytest.mark.xdist_group("connect-offline")  # stops the worker that another test uses (docs/development.md#tests)
def test_distributed_import_round_trip(stack: dict[str, Any], tmp_path: Path, unique: str) -> None:
    stack_cmd("up", "connect-offline")
    url = f"http://127.0.0.1:{18086}"
    worker_config = str(Path(stack["run_dir"]) / "connect-offline.properties")
    name, topic = f"offline-rt-{unique}", f"offline-rt-{unique}"
    source = tmp_path / "source.txt"
    source.write_text("".join(LINE.format(i) for i in range(10)))
    with httpx.Client(base_url=url, timeout=30) as client:
        create_file_source(client, name, source, topic)
        wait_position(client, name, source, 80)
        assert end_offset(stack["kafka_a"], topic) == 10

        exported = run_cli("export", "-w", worker_config, "-c", name)
        assert exported.returncode == 0, exported.stderr
        assert canonical(json.loads(exported.stdout)[name]) == canonical(connect_offsets(client, name))
        kip875 = json.loads(run_cli("export", "-w", worker_config, "-c", name, "--format", "kip875").stdout)
        assert kip875[name]["offsets"] == json.loads(exported.stdout)[name]

        # The worker's own records for this key sit where our murmur2 says (25 partitions).
        history = json.loads(run_cli("export", "-w", worker_config, "-c", name, "--from-beginning").stdout)[name]
        key = encode_key(name, {"filename": str(source)})
        assert {e["kafka"]["partition"] for e in history} == {murmur2_partition(key, 25)}

        before = len(raw_records(stack["kafka_a"], "connect-offsets-offline", name))
        new_position = {name: [{"partition": {"filename": str(source)}, "offset": {"position": 40}}]}
        refusals = {
            "running": (json.dumps(new_position), 5, "is STARTED, not STOPPED"),
            "unknown": (json.dumps({f"nope-{unique}": new_position[name]}), 5, "not in the config topic"),
            "shape": (json.dumps({name: {"partition": {}, "offset": {}}}), 2, "expected a list"),
            "json": ("{", 2, "not valid JSON"),
        }
        for case, (text, code, message) in refusals.items():
            result = run_cli("import", "-w", worker_config, stdin=text)
            assert result.returncode == code, (case, result.stderr)
            errors = [line for line in result.stderr.splitlines() if line.startswith("connect-offsets: error:")]
            assert len(errors) == 1 and message in errors[0], (case, result.stderr)
        dry = run_cli("import", "-w", worker_config, "--dry-run", "--force", stdin=json.dumps(new_position))
        assert dry.returncode == 0, dry.stderr
        assert (
            f"connect-offsets-offline[{murmur2_partition(key, 25)}] {key.decode()} = " + '{"position":40}' in dry.stdout
        )
        assert len(raw_records(stack["kafka_a"], "connect-offsets-offline", name)) == before  # nothing written

        response = connect_send(client, "PUT", f"/connectors/{name}/stop")
        assert response.status_code == 204, response.text
        wait_connect_state(client, name, "STOPPED")
    stack_cmd("stop", "connect-offline")
    try:
        imported = run_cli("import", "-w", worker_config, "--input", _write(tmp_path, new_position))
        assert imported.returncode == 0, imported.stderr
        assert "1 record(s) written in 1 transaction(s)" in imported.stderr
    finally:
        stack_cmd("up", "connect-offline")
    with httpx.Client(base_url=url, timeout=30) as client:
        assert connect_offsets(client, name) == new_position[name]
        assert connect_send(client, "PUT", f"/connectors/{name}/resume").status_code == 202
        # lines 5..9 are read again from position 40
        wait_for("lines re-read from the imported position", lambda: end_offset(stack["kafka_a"], topic) == 15)
        wait_position(client, name, source, 80)
        client.delete(f"/connectors/{name}")


def _write(folder: Path, document: dict[str, Any]) -> str:
    path = folder / f"offsets-{uuid.uuid4().hex[:6]}.json"
    path.write_text(json.dumps(document))
    return str(path)


# --------------------------------------------------------------------------- standalone round trip


@pytest.mark.local_stack
def test_standalone_import_round_trip(stack: dict[str, Any], tmp_path: Path, unique: str) -> None:
    stack_cmd("up", "connect-standalone")
    url = "http://127.0.0.1:18087"
    worker_config = str(Path(stack["run_dir"]) / "connect-standalone.properties")
    offsets_file = Path(stack["run_dir"]) / "connect-standalone.offsets"
    name, topic = f"standalone-rt-{unique}", f"standalone-rt-{unique}"
    source = tmp_path / "source.txt"
    source.write_text("".join(LINE.format(i) for i in range(10)))
    with httpx.Client(base_url=url, timeout=30) as client:
        create_file_source(client, name, source, topic)
        wait_position(client, name, source, 80)
        wait_for(
            "the offsets file to hold the position",
            lambda: (
                json.loads(run_cli("export", "-w", worker_config, "-c", name).stdout)[name]
                == connect_offsets(client, name)
            ),
        )
        running = run_cli("import", "-w", worker_config, stdin=json.dumps({name: []}))
        assert running.returncode == 2 and "expected at least one entry" in running.stderr
        document = {name: [{"partition": {"filename": str(source)}, "offset": {"position": 24}}]}
        refused = run_cli("import", "-w", worker_config, stdin=json.dumps(document))
        assert refused.returncode == 5 and "standalone worker answers" in refused.stderr
    stack_cmd("stop", "connect-standalone")
    try:
        before = offsets_file.read_bytes()
        dry = run_cli("import", "-w", worker_config, "--dry-run", stdin=json.dumps(document))
        assert dry.returncode == 0 and '= {"position":24}' in dry.stdout and 'was {"position":80}' in dry.stdout
        assert offsets_file.read_bytes() == before
        imported = run_cli("import", "-w", worker_config, stdin=json.dumps(document))
        assert imported.returncode == 0, imported.stderr
        backups = list(offsets_file.parent.glob(f"{offsets_file.name}.*.bak"))
        assert any(b.read_bytes() == before for b in backups)
        assert json.loads(run_cli("export", "-w", worker_config, "-c", name).stdout)[name] == document[name]
    finally:
        stack_cmd("up", "connect-standalone")
    with httpx.Client(base_url=url, timeout=30) as client:
        # standalone workers forget REST-created connectors on restart; the offsets file remembers
        create_file_source(client, name, source, topic)
        wait_for("lines 3..9 re-read", lambda: end_offset(stack["kafka_a"], topic) == 17)
        wait_position(client, name, source, 80)
        client.delete(f"/connectors/{name}")
