"""The offsets pipeline on a real distributed engine: ``spark-submit`` against a Spark standalone cluster.

A standalone master and one worker (1 core, 1 GiB for executors) are started from the installed
pyspark's own distribution with ``spark-class`` by hack/stack.py's ``spark_components`` (free ports,
logs in the stack's log folder, executors' logs in the worker's work folder under the run folder), once
for the module, and stopped at its end. A FileStreamSource connector on the stack's Connect worker
commits two file positions into its offsets topic (its own ``offsets.storage.topic``, KIP-618, created
beforehand with one partition: the jobs read a few records in one task, whatever else the session wrote
to the worker's 25-partition ``connect-offsets``).
Then the command docs/pipeline.md gives ("On a Spark cluster") runs, with the venv's ``spark-submit``::

    SPARK_LOCAL_IP=127.0.0.1 PYSPARK_PYTHON=.venv/bin/python .venv/bin/spark-submit \\
        --master spark://127.0.0.1:<master port> --jars <the cached Kafka source jars, comma-separated> \\
        <site-packages>/connect_offsets/tools/pipeline/__main__.py \\
        latest -b 127.0.0.1:19092 -t <offsets topic> -c <connector> -o <out>

``latest`` must equal Connect's ``GET /connectors/<connector>/offsets``; ``as-of`` at an instant between
the two commits must equal the same command run embedded (``python -m connect_offsets.tools.pipeline``,
``local[*]``), and be the first position. That the jobs really ran on the cluster is read from the cluster
itself: the driver reports the standalone master, the master lists each submitted application as
finished, and the worker launched an executor for it whose log shows it ran tasks.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

import connect_offsets.tools.pipeline as pipeline_package
from connect_offsets.tools.pipeline.session import find_kafka_jars
from tests.conftest import REPO, TEST_SPARK_JAVA_OPTIONS, wait_for
from tests.integration.connect_worker import free_port, stack_module
from tests.integration.support import FILE_SOURCE, connect_offsets

# Starts Spark processes of its own next to the local stack and reads the stack worker's topic.
pytestmark = pytest.mark.local_stack

APP_NAME = "connect-offsets-pipeline"  # session.build_session's application name


@dataclass(frozen=True)
class Standalone:
    master_url: str  # spark://127.0.0.1:<port>
    master_ui: str  # http://127.0.0.1:<port>, whose /json/ describes workers and applications
    work_dir: Path  # the worker's: <app-id>/<executor-id>/stderr per executor

    def applications(self) -> dict[str, dict[str, Any]]:
        state = httpx.get(f"{self.master_ui}/json/", timeout=10).json()
        return {app["id"]: app for app in [*state["activeapps"], *state["completedapps"]]}


@pytest.fixture(scope="module")
def standalone(stack: dict[str, Any]) -> Iterator[Standalone]:
    import pyspark

    tool = stack_module()
    master_port, master_ui_port, worker_ui_port = free_port(), free_port(), free_port()
    master, worker = tool.spark_components(
        f"-test-{uuid.uuid4().hex[:6]}",
        master_port=master_port,
        master_ui_port=master_ui_port,
        worker_ui_port=worker_ui_port,
        home=Path(pyspark.__file__).parent,  # the distribution spark-submit below uses
    )
    work_dir = Path(tool.RUN_DIR) / f"{worker.name}-work"
    try:
        for component in (master, worker):
            process = tool.start(component)
            tool.wait_ready(component, process, time.monotonic() + tool.START_TIMEOUT_S)
        yield Standalone(f"spark://127.0.0.1:{master_port}", f"http://127.0.0.1:{master_ui_port}", work_dir)
    finally:
        for component in (worker, master):  # the worker stops its executors
            tool.stop(component)
        shutil.rmtree(work_dir, ignore_errors=True)


def _spark_conf_dir(folder: Path) -> Path:
    """The machine's Spark configuration for this test (``SPARK_CONF_DIR``): its drivers and executors
    compile with C1 only, as the tests' SparkSessions do (tests/conftest.py, TEST_SPARK_JAVA_OPTIONS),
    without a flag on the documented command line. An embedded run's own setting (the product's
    default) still wins over it."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "spark-defaults.conf").write_text(
        "".join(f"spark.{side}.extraJavaOptions {TEST_SPARK_JAVA_OPTIONS}\n" for side in ("driver", "executor"))
    )
    return folder


def _pipeline(launcher: list[str], *args: str, conf_dir: Path) -> subprocess.CompletedProcess[str]:
    """Run the pipeline (under spark-submit or as a module) with ``conf_dir`` as SPARK_CONF_DIR; a
    failure shows its stderr."""
    env = {
        **os.environ,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_CONF_DIR": str(conf_dir),
    }
    env.pop("SPARK_HOME", None)  # spark-submit finds the venv's pyspark itself, as in docs/pipeline.md
    run = subprocess.run([*launcher, *args], env=env, capture_output=True, text=True, timeout=600, cwd=REPO)
    assert run.returncode == 0, f"{' '.join(launcher)} failed ({run.returncode}):\n{run.stderr[-6000:]}"
    return run


def _spark_submit(standalone: Standalone) -> list[str]:
    entry = Path(pipeline_package.__file__).parent / "__main__.py"
    jars = ",".join(find_kafka_jars())  # the cached set (make spark-jars) for the installed pyspark
    submit = Path(sys.executable).parent / "spark-submit"  # pyspark's, installed next to the interpreter
    return [str(submit), "--master", standalone.master_url, "--jars", jars, str(entry)]


def _position(connect: httpx.Client, name: str) -> int | None:
    offsets = connect_offsets(connect, name)
    return int(offsets[0]["offset"]["position"]) if offsets else None


def _append(connect: httpx.Client, name: str, source: Path, lines: list[str]) -> int:
    with source.open("a") as handle:
        handle.write("".join(f"{line}\n" for line in lines))
    size = source.stat().st_size
    wait_for(f"{name} committed position {size}", lambda: _position(connect, name) == size, timeout=180)
    return size


def _ran_on_the_cluster(standalone: Standalone, before: set[str]) -> list[str]:
    """The applications submitted since ``before``, once the master lists them all as finished; each had an
    executor on the worker whose log shows tasks run there."""

    def finished() -> dict[str, dict[str, Any]] | None:
        apps = {k: v for k, v in standalone.applications().items() if k not in before}
        return apps if all(app["state"] == "FINISHED" for app in apps.values()) else None

    apps = wait_for("the submitted applications finished on the master", finished, timeout=60)
    for app_id, app in apps.items():
        assert app["name"] == APP_NAME, app
        executor_logs = sorted((standalone.work_dir / app_id).glob("*/stderr"))
        assert executor_logs, f"no executor of {app_id} in {standalone.work_dir}"
        text = "\n".join(log.read_text(errors="replace") for log in executor_logs)
        assert "Running task" in text and "Finished task" in text, text[-3000:]
    return sorted(apps)


@pytest.mark.timeout(900)  # three pipeline runs (two on the cluster); slow when the 2 cores are shared
def test_latest_and_as_of_under_spark_submit_on_a_standalone_cluster(
    standalone: Standalone, stack: dict[str, Any], connect: httpx.Client, tmp_path: Path, unique: str
) -> None:
    name, topic, offsets_topic = f"spark-cluster-{unique}", f"spark-cluster-{unique}", f"spark-offsets-{unique}"
    conf = _spark_conf_dir(tmp_path / "conf")
    source = tmp_path / "source.txt"
    source.write_text("")
    config = {"connector.class": FILE_SOURCE, "tasks.max": "1", "file": str(source), "topic": topic}
    config["offsets.storage.topic"] = offsets_topic
    admin = AdminClient({"bootstrap.servers": stack["kafka_a"]})
    compacted_topic = NewTopic(
        offsets_topic, num_partitions=1, replication_factor=1, config={"cleanup.policy": "compact"}
    )
    for future in admin.create_topics([compacted_topic], operation_timeout=30).values():
        future.result()
    connect.put(f"/connectors/{name}/config", json=config).raise_for_status()
    read = ["-b", stack["kafka_a"], "-t", offsets_topic, "-c", name]
    on_the_master = f"master {standalone.master_url}, application app-"  # the driver's progress line
    try:
        first = _append(connect, name, source, ["a-1", "a-2", "a-3"])
        time.sleep(0.05)
        between = datetime.now(UTC).isoformat()
        time.sleep(0.05)
        second = _append(connect, name, source, ["b-1", "b-2"])
        assert 0 < first < second
        before = set(standalone.applications())

        # latest, on the cluster: Connect's own answer
        run = _pipeline(_spark_submit(standalone), "latest", *read, "-o", str(tmp_path / "latest"), conf_dir=conf)
        assert on_the_master in run.stdout, run.stdout[-3000:]  # spark-submit passes the driver's stderr on there
        latest = json.loads((tmp_path / "latest" / f"{name}.json").read_text())
        assert latest == {"offsets": connect_offsets(connect, name)}
        assert latest["offsets"][0]["offset"] == {"position": second}

        # as-of between the commits, on the cluster and embedded (local[*]): the same documents
        as_of = ["as-of", "--at", between, *read]
        run = _pipeline(_spark_submit(standalone), *as_of, "-o", str(tmp_path / "cluster"), conf_dir=conf)
        assert on_the_master in run.stdout, run.stdout[-3000:]
        run = _pipeline(
            [sys.executable, "-m", "connect_offsets.tools.pipeline"],
            *as_of,
            "-o",
            str(tmp_path / "local"),
            conf_dir=conf,
        )
        assert "master local[*]" in run.stderr, run.stderr[-3000:]
        on_cluster = json.loads((tmp_path / "cluster" / f"{name}.json").read_text())
        assert on_cluster == json.loads((tmp_path / "local" / f"{name}.json").read_text())
        assert on_cluster == {"offsets": [{"partition": {"filename": str(source)}, "offset": {"position": first}}]}

        def compacted(folder: str) -> dict[str, Any]:
            report: dict[str, Any] = json.loads((tmp_path / folder / "compacted-before.json").read_text())
            report.pop("written")  # when the file was written
            return report

        assert compacted("cluster") == compacted("local")

        assert len(_ran_on_the_cluster(standalone, before)) == 2
    finally:
        connect.delete(f"/connectors/{name}")
