"""The offsets history pipeline against the real stack: a FileStreamSource connector's commits.

The connector (created through the operator, with its own ``offsets.storage.topic`` so the read is
small and the KIP-618 path is exercised) is advanced through known file positions at known times,
with a reset (tombstone) in between. Then: ``history`` holds each commit, ``as-of`` for each instant
gives that instant's position, ``latest`` (also as a separate ``python -m`` process, embedded Spark
with the cached jars) equals Connect's ``GET offsets``, and applying an as-of document through the
operator's alter flow rewinds the connector: its next records start at that position.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from connect_offsets.tools.pipeline.command import main as pipeline_main
from connect_offsets.tools.pipeline.jobs import (
    KafkaSource,
    as_of,
    decode_records,
    latest_documents,
    only_connectors,
    read_kafka,
)
from tests.conftest import REPO, OperatorProcess, wait_for
from tests.integration.support import (
    annotate,
    configmap_offsets,
    connect_offsets,
    create_cluster,
    create_connector,
    file_source_spec,
    patch_connector,
    read_topic,
    wait_annotation_removed,
    wait_condition,
    wait_connect_state,
)

# One xdist worker runs the Spark tests (here and tests/unit/test_pipeline.py): one SparkSession JVM.
pytestmark = pytest.mark.xdist_group("spark-session")


def _position(connect: httpx.Client, name: str) -> int | None:
    offsets = connect_offsets(connect, name)
    return int(offsets[0]["offset"]["position"]) if offsets else None


def _advance(connect: httpx.Client, name: str, source: Path, lines: list[str]) -> tuple[int, datetime]:
    """Append lines, wait until Connect has committed the new end of file; return it and a time after it."""
    with source.open("a") as handle:
        handle.write("".join(f"{line}\n" for line in lines))
    size = source.stat().st_size
    wait_for(f"{name} committed position {size}", lambda: _position(connect, name) == size, timeout=180)
    time.sleep(0.05)
    instant = datetime.now(UTC)
    time.sleep(0.05)
    return size, instant


@pytest.mark.timeout(1200)  # Spark + several operator round trips; slow when the 2 cores are shared
def test_history_as_of_latest_and_rewind_through_the_operator(
    spark: Any,
    custom: Any,
    core: Any,
    namespace: str,
    operator: OperatorProcess,
    connect: httpx.Client,
    connect_url: str,
    stack: dict[str, Any],
    tmp_path: Path,
    unique: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    name, topic, offsets_topic, cm = f"hist-{unique}", f"hist-{unique}", f"hist-offsets-{unique}", "hist-rewind"
    source = tmp_path / "source.txt"
    source.write_text("")
    spec = file_source_spec(source, topic, cm)
    spec["config"]["offsets.storage.topic"] = offsets_topic
    create_cluster(custom, namespace, connect_url)
    create_connector(custom, namespace, name, spec)
    bootstrap = stack["kafka_a"]
    lines = [f"line-{i:02d}" for i in range(8)]
    try:
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorRunning", timeout=180)
        p1, t1 = _advance(connect, name, source, lines[:3])
        p2, t2 = _advance(connect, name, source, lines[3:6])

        # reset in between: stop, DELETE offsets through the operator (tombstone), resume -> file read again
        patch_connector(custom, namespace, name, {"spec": {"state": "stopped"}})
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorStopped", timeout=180)
        annotate(custom, namespace, name, connector_offsets="reset")
        wait_annotation_removed(custom, namespace, name, timeout=180)
        assert connect_offsets(connect, name) == []
        time.sleep(0.05)
        t_reset = datetime.now(UTC)
        time.sleep(0.05)
        patch_connector(custom, namespace, name, {"spec": {"state": "running"}})
        wait_for("re-read after the reset", lambda: _position(connect, name) == p2, timeout=180)
        time.sleep(0.05)
        t_reread = datetime.now(UTC)
        p3, t3 = _advance(connect, name, source, lines[6:])
        assert len(read_topic(bootstrap, topic, 14)) == 14 and p1 < p2 < p3

        records = only_connectors(read_kafka(spark, KafkaSource(bootstrap, offsets_topic)), [name]).cache()
        # history: every commit, in order (a commit may repeat the previous position; collapse those)
        history = [
            (None if r["offset"] is None else json.loads(r["offset"])["position"])
            for r in decode_records(records).orderBy("timestamp", "kafka_offset").collect()
        ]
        collapsed = [v for i, v in enumerate(history) if i == 0 or v != history[i - 1]]
        assert collapsed == [p1, p2, None, p2, p3], history
        partition = {"filename": str(source)}

        # as-of each instant
        def at(instant: datetime) -> list[dict[str, Any]]:
            offsets: list[dict[str, Any]] = as_of(records, instant).documents[name]["offsets"]
            return offsets

        assert at(t1) == [{"partition": partition, "offset": {"position": p1}}]
        assert at(t2) == [{"partition": partition, "offset": {"position": p2}}]
        assert at(t_reset) == [{"partition": partition, "offset": None}]  # no offset then; one now -> remove
        assert at(t_reread) == [{"partition": partition, "offset": {"position": p2}}]
        assert at(t3) == [{"partition": partition, "offset": {"position": p3}}]

        # latest equals Connect's own answer
        assert latest_documents(records) == {name: {"offsets": connect_offsets(connect, name)}}
        records.unpersist()

        # the same through the command line, as a separate process (embedded Spark, cached jars)
        out = tmp_path / "latest"
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "connect_offsets.tools.pipeline",
                "latest",
                "-b",
                bootstrap,
                "-t",
                offsets_topic,
                "-c",
                name,
                "-o",
                str(out),
                "--master",
                "local[1]",
                "--quiet",
            ],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=REPO,
        )
        assert run.returncode == 0, run.stderr[-3000:]
        assert json.loads((out / f"{name}.json").read_text()) == {"offsets": connect_offsets(connect, name)}

        # a time before the first retained record is refused with the first record's time
        early = ["as-of", "--at", "2000-01-01T00:00:00Z", "-b", bootstrap, "-t", offsets_topic, "-c", name]
        assert pipeline_main([*early, "-o", str(tmp_path / "early"), "--quiet"]) == 2

        # rewind to t1 through the operator: as-of straight into the alter ConfigMap, stop, alter, resume
        monkeypatch.setenv("KUBECONFIG", stack["kubeconfig"])
        args = ["as-of", "--at", t1.isoformat(), "-b", bootstrap, "-t", offsets_topic, "-c", name]
        assert pipeline_main([*args, "-o", str(tmp_path / "asof"), "--to-configmap", cm, "-n", namespace, "-q"]) == 0
        document = configmap_offsets(core, namespace, cm)
        assert document == {"offsets": [{"partition": partition, "offset": {"position": p1}}]}
        assert json.loads((tmp_path / "asof" / f"{name}.json").read_text()) == document

        patch_connector(custom, namespace, name, {"spec": {"state": "stopped"}})
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorStopped", timeout=180)
        annotate(custom, namespace, name, connector_offsets="alter")
        wait_annotation_removed(custom, namespace, name, timeout=180)
        assert _position(connect, name) == p1
        before = len(read_topic(bootstrap, topic, 14))
        patch_connector(custom, namespace, name, {"spec": {"state": "running"}})
        wait_connect_state(connect, name, "RUNNING", timeout=180)
        replay = lines[3:]  # everything after position p1
        records_out = read_topic(bootstrap, topic, before + len(replay), timeout=180)
        assert [r.decode().strip('"') for r in records_out[before:]] == replay
    finally:
        connect.delete(f"/connectors/{name}")


def test_clear_errors_for_a_missing_topic_and_unreachable_kafka(
    stack: dict[str, Any], tmp_path: Path, unique: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = str(tmp_path / "out")
    assert pipeline_main(["latest", "-b", stack["kafka_a"], "-t", f"no-such-{unique}", "-o", out, "-q"]) == 2
    assert f"topic no-such-{unique} does not exist on Kafka at {stack['kafka_a']}" in capsys.readouterr().err
    started = time.monotonic()
    assert pipeline_main(["latest", "-b", "127.0.0.1:1", "-t", "connect-offsets", "-o", out, "-q"]) == 2
    assert (
        "cannot reach Kafka at 127.0.0.1:1 (connection refused): check --bootstrap-servers" in capsys.readouterr().err
    )
    assert time.monotonic() - started < 60
