"""Is it moving? Progress and stall detection on the real stack (issue 33).

* A FileStreamSink whose file is a named pipe nobody reads: the connector is RUNNING, its task blocks
  opening the file, 20 records wait and nothing is committed. With ``spec.progress.stallAfter: 15s``
  it turns ``Progressing=False/NotAdvancing`` within stallAfter + one drift interval (5 s in
  tests), with ``status.progress`` saying 20 records waiting on 1 partition and ``kubectl get``
  showing them in its Lag column. Then the pipe is read (as ``cat pipe > /dev/null`` would): the
  task writes the records, commits, and the condition turns True again with the lag at 0 and a
  Last Progress time. The reader runs until the connector is deleted, so no blocked task thread is
  left in the shared worker.
* A source connector's progress: its offsets move as its file grows; ``status.progress.lastMoved``
  is set from Connect's offsets (read every ``CONNECT_OFFSETS_SOURCE_PROGRESS_INTERVAL``, 2 s here).
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Producer

from tests.conftest import REPO, OperatorProcess, wait_for
from tests.integration.support import (
    FILE_SINK,
    CrdKeeper,
    connect_state,
    create_cluster,
    create_connector_kept,
    file_source_spec,
    get_connector,
    wait_condition,
)

RECORDS = 20


@pytest.fixture(autouse=True)
def this_branch_crds(stack: dict[str, Any]) -> Iterator[None]:
    """The CRDs of this checkout, applied again: engineers share the stack, and another session's
    older CRDs (applied by its test session at any time) make the API server prune spec.progress."""
    with CrdKeeper(stack, REPO / "crds"):
        yield


class PipeReader:
    """Reads a named pipe until its writer closes it (``cat pipe > /dev/null``), in a thread."""

    def __init__(self, pipe: Path) -> None:
        self.pipe = pipe
        self.bytes = 0
        self.thread = threading.Thread(target=self._read, daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _read(self) -> None:
        with self.pipe.open("rb", buffering=0) as reader:  # unbuffered: each read returns what is there
            while chunk := reader.read(4096):
                self.bytes += len(chunk)


def test_a_blocked_sink_turns_not_advancing_then_advancing_when_released(
    stack: dict[str, Any],
    custom: Any,
    namespace: str,
    operator: OperatorProcess,
    connect: httpx.Client,
    connect_url: str,
    tmp_path: Path,
    unique: str,
) -> None:
    topic = name = f"stall-{unique}"
    producer = Producer({"bootstrap.servers": stack["kafka_a"]})
    for i in range(RECORDS):
        producer.produce(topic, value=json.dumps(f"record-{i}").encode())  # the worker's JsonConverter
    assert producer.flush(10) == 0
    pipe = tmp_path / "sink.fifo"
    os.mkfifo(pipe)
    reader = PipeReader(pipe)
    create_cluster(custom, namespace, connect_url, kafka={"bootstrapServers": stack["kafka_a"]})
    created = time.monotonic()
    create_connector_kept(
        custom,
        namespace,
        name,
        {
            "class": FILE_SINK,
            "tasksMax": 1,
            "config": {"topics": topic, "file": str(pipe)},
            "progress": {"stallAfter": "15s"},
        },
    )
    try:
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorRunning")
        condition = wait_condition(custom, namespace, name, "Progressing", status="False", timeout=90)
        body = get_connector(custom, namespace, name)
        assert condition["reason"] == "NotAdvancing", condition
        assert "20 record(s) waiting on 1 partition(s)" in condition["message"]
        # stallAfter (15 s) + one interval (5 s), plus the cluster's first snapshot and status write
        assert time.monotonic() - created < 15 + 5 + 30
        progress = body["status"]["progress"]
        assert (progress["type"], progress["totalLag"], progress["partitionsBehind"]) == ("sink", RECORDS, 1)
        assert "lastMoved" not in progress  # nothing has moved yet
        assert connect_state(connect, name) == "RUNNING"  # RUNNING, and yet not moving
        columns = subprocess.run(
            [stack["kubectl"], "get", "cokc", "-n", namespace, name],
            env={**os.environ, "KUBECONFIG": stack["kubeconfig"]},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
        assert columns[0].split()[:9] == [
            "NAME",
            "CLUSTER",
            "DESIRED",
            "STATE",
            "READY",
            "REASON",
            "LAG",
            "LAST",
            "PROGRESS",
        ]
        assert columns[1].split()[6] == str(RECORDS)

        reader.start()  # the pipe is read: the task opens it, writes the records, commits
        condition = wait_condition(custom, namespace, name, "Progressing", status="True", timeout=120)
        assert condition["reason"] in ("UpToDate", "Advancing"), condition
        body = wait_for(
            "lag 0 in status",
            lambda: (b := get_connector(custom, namespace, name))["status"]["progress"].get("totalLag") == 0 and b,
            timeout=120,
        )
        assert body["status"]["progress"]["lastMoved"]
        expected = sum(len(f"record-{i}\n") for i in range(RECORDS))
        wait_for(f"the records read from the pipe ({expected} bytes)", lambda: reader.bytes >= expected, timeout=30)
        assert reader.bytes == expected, reader.bytes
    finally:
        if not reader.thread.is_alive() and reader.bytes == 0:
            reader.start()  # never leave the task blocked in the shared worker
        connect.delete(f"/connectors/{name}")
        reader.thread.join(timeout=60)


def test_a_source_connector_records_when_its_offsets_last_moved(
    stack: dict[str, Any],
    custom: Any,
    namespace: str,
    connect: httpx.Client,
    connect_url: str,
    tmp_path: Path,
    unique: str,
) -> None:
    name = f"srcprog-{unique}"
    operator = OperatorProcess(
        stack["kubeconfig"], namespace, tmp_path / "operator.log", {"CONNECT_OFFSETS_SOURCE_PROGRESS_INTERVAL": "2"}
    )
    operator.start()
    source = tmp_path / "source.txt"
    source.write_text("a0\n")
    try:
        create_cluster(custom, namespace, connect_url)
        spec = {**file_source_spec(source, name, f"{name}-offsets"), "progress": {"stallAfter": "1h"}}
        create_connector_kept(custom, namespace, name, spec)
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorRunning")
        wait_condition(custom, namespace, name, "Progressing", status="True", timeout=60)
        with source.open("a") as more:
            more.write("a1\na2\n")
        body = wait_for(
            "lastMoved set from Connect's offsets",
            lambda: (b := get_connector(custom, namespace, name))["status"].get("progress", {}).get("lastMoved") and b,
            timeout=90,
        )
        progress = body["status"]["progress"]
        assert (progress["type"], progress["partitions"]) == ("source", 1)
        condition = next(c for c in body["status"]["conditions"] if c["type"] == "Progressing")
        assert (condition["status"], condition["reason"]) == ("True", "Advancing")
    finally:
        operator.stop()
        connect.delete(f"/connectors/{name}")
