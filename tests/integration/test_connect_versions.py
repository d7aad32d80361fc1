"""The core KafkaConnector flows against Connect workers of other versions (issue 21, item 1).

Why a module of its own: the rest of the suite runs against the stack's worker (KAFKA_VERSION in
hack/versions.env); this one starts a ``DedicatedWorker`` from another release's jars (fetched by
``hack/fetch-kafka.sh VERSION`` into its own libs dir) against the stack's 4.x brokers, one version
at a time (module-scoped, parametrized fixture), and runs the flows whose REST calls differ between
releases: create in each state (3.6 has no ``initial_state``: create, then stop or pause), list,
alter, reset, stop -> change -> resume, initial offsets. A worker older than 3.6 has no offsets API:
the operator must say ``ConnectTooOld`` once, not retry.

Selection: every test here is marked ``compat``; all versions but the oldest of
``CONNECT_COMPAT_VERSIONS`` are also ``compat_extra``, which ``make test`` deselects (it runs the
oldest only) and ``make test-compat`` runs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from connect_offsets.models.connect import supports_initial_state
from tests.conftest import OperatorProcess, wait_for
from tests.integration.connect_worker import DedicatedWorker, stack_versions
from tests.integration.support import (
    annotate,
    condition,
    configmap_offsets,
    connect_offsets,
    connect_state,
    create_cluster,
    create_connector,
    file_source_spec,
    get_connector,
    patch_connector,
    read_topic,
    wait_annotation_removed,
    wait_condition,
)

pytestmark = [pytest.mark.integration, pytest.mark.compat, pytest.mark.timeout(600)]


VERSIONS = stack_versions()
COMPAT = sorted(VERSIONS["CONNECT_COMPAT_VERSIONS"].split(), key=lambda v: tuple(int(p) for p in v.split(".")))
TOO_OLD = VERSIONS.get("CONNECT_TOO_OLD_VERSION", "")
LINE = 3  # "aN\n"


def _param(version: str) -> Any:
    return pytest.param(version, id=version, marks=[] if version == COMPAT[0] else [pytest.mark.compat_extra])


@pytest.fixture(scope="module", params=[_param(v) for v in COMPAT])
def worker(request: pytest.FixtureRequest, stack: dict[str, Any]) -> Iterator[DedicatedWorker]:
    """One worker of ``request.param`` at a time: two cores, and each JVM needs ~400 MiB."""
    w = DedicatedWorker(heap="-Xmx512m", name=f"v{request.param.replace('.', '')}", version=request.param)
    w.start()
    try:
        yield w
    finally:
        w.stop()


@pytest.fixture
def rest(worker: DedicatedWorker) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=worker.url, timeout=30) as client:
        yield client


def source_file(path: Path, lines: int = 10) -> Path:
    path.write_text("".join(f"a{i}\n" for i in range(lines)))
    return path


def test_worker_reports_its_version(worker: DedicatedWorker, rest: httpx.Client) -> None:
    assert rest.get("/").json()["version"] == worker.version


def test_create_in_each_state(
    worker: DedicatedWorker,
    rest: httpx.Client,
    custom: Any,
    namespace: str,
    operator: OperatorProcess,
    tmp_path: Path,
    unique: str,
) -> None:
    """RUNNING, PAUSED and STOPPED from the first reconcile: before 3.7 by create-then-stop/pause."""
    source = source_file(tmp_path / "states.txt")
    create_cluster(custom, namespace, worker.url)
    names = {state: f"{state}-{unique}" for state in ("running", "paused", "stopped")}
    for state, name in names.items():
        create_connector(custom, namespace, name, file_source_spec(source, f"states-{unique}", "unused", state=state))
    for state, name in names.items():
        wait_condition(custom, namespace, name, "Ready", reason=f"Connector{state.capitalize()}", timeout=120)
        assert connect_state(rest, name) == state.upper()
    for name in names.values():
        rest.delete(f"/connectors/{name}")


def test_list_alter_resume_reset(
    worker: DedicatedWorker,
    rest: httpx.Client,
    custom: Any,
    core: Any,
    namespace: str,
    operator: OperatorProcess,
    stack: dict[str, Any],
    tmp_path: Path,
    unique: str,
) -> None:
    """The blog flow: list -> stop -> alter -> resume (records replayed) -> stop -> reset."""
    source = source_file(tmp_path / "flow.txt", 6)
    size = source.stat().st_size
    name, topic, cm = f"flow-{unique}", f"flow-{unique}", "flow-offsets"
    create_cluster(custom, namespace, worker.url)
    create_connector(custom, namespace, name, file_source_spec(source, topic, cm))
    try:
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorRunning", timeout=120)
        assert len(read_topic(stack["kafka_a"], topic, 6)) == 6
        at_end = [{"partition": {"filename": str(source)}, "offset": {"position": size}}]
        wait_for("source offset at end of file", lambda: connect_offsets(rest, name) == at_end)

        annotate(custom, namespace, name, connector_offsets="list")
        wait_annotation_removed(custom, namespace, name)
        listed = configmap_offsets(core, namespace, cm)
        assert listed == {"offsets": at_end}

        patch_connector(custom, namespace, name, {"spec": {"state": "stopped"}})
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorStopped")
        listed["offsets"][0]["offset"]["position"] = 4 * LINE
        core.replace_namespaced_config_map(
            cm, namespace, {"metadata": {"name": cm}, "data": {"offsets.json": json.dumps(listed)}}
        )
        annotate(custom, namespace, name, connector_offsets="alter")
        body = wait_annotation_removed(custom, namespace, name)
        last = body["status"]["lastOffsetsOperation"]
        assert last["operation"] == "alter" and last["result"] == "Succeeded", last
        assert connect_offsets(rest, name) == [{"partition": {"filename": str(source)}, "offset": {"position": 12}}]
        # Connect's own words, verbatim (they differ between releases only in wording we keep as is).
        assert "altered successfully" in last["message"], last

        patch_connector(custom, namespace, name, {"spec": {"state": "running"}})
        records = read_topic(stack["kafka_a"], topic, 8)
        assert [json.loads(r) for r in records[6:]] == ["a4", "a5"]

        patch_connector(custom, namespace, name, {"spec": {"state": "stopped"}})
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorStopped")
        annotate(custom, namespace, name, connector_offsets="reset")
        body = wait_annotation_removed(custom, namespace, name)
        last = body["status"]["lastOffsetsOperation"]
        assert last["operation"] == "reset" and last["result"] == "Succeeded", last
        assert connect_offsets(rest, name) == []
    finally:
        rest.delete(f"/connectors/{name}")


def test_initial_offsets(
    worker: DedicatedWorker,
    rest: httpx.Client,
    custom: Any,
    core: Any,
    namespace: str,
    operator: OperatorProcess,
    stack: dict[str, Any],
    tmp_path: Path,
    unique: str,
) -> None:
    """spec.initialOffsets: created STOPPED, PATCHed, then RUNNING from the given position. Before
    3.7 (no ``initial_state``) a running connector would read first: refused, nothing created."""
    source = source_file(tmp_path / "init.txt")
    name, topic = f"init-{unique}", f"init-{unique}"
    doc = {"offsets": [{"partition": {"filename": str(source)}, "offset": {"position": 6 * LINE}}]}
    core.create_namespaced_config_map(
        namespace, {"metadata": {"name": "init"}, "data": {"offsets.json": json.dumps(doc)}}
    )
    spec = file_source_spec(source, topic, "init-list")
    spec["initialOffsets"] = {"fromConfigMap": {"name": "init"}}
    create_cluster(custom, namespace, worker.url)
    create_connector(custom, namespace, name, spec)
    try:
        if not supports_initial_state(worker.version):
            found = wait_condition(custom, namespace, name, "Ready", status="False", reason="InitialOffsetsUnsupported")
            assert "3.7" in found["message"], found
            assert connect_state(rest, name) is None
            return
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorRunning", timeout=120)
        assert [json.loads(r) for r in read_topic(stack["kafka_a"], topic, 4)] == ["a6", "a7", "a8", "a9"]
        assert get_connector(custom, namespace, name)["status"]["initialOffsets"]["step"] == "Applied"
    finally:
        rest.delete(f"/connectors/{name}")


@pytest.mark.compat_extra
def test_a_worker_without_the_offsets_api_is_named_once(
    stack: dict[str, Any], custom: Any, namespace: str, operator: OperatorProcess, tmp_path: Path, unique: str
) -> None:
    # No skip: 3.5.2 is fetchable here (hack/versions.env); a machine without it must fail, not pass.
    assert TOO_OLD, "hack/versions.env must name CONNECT_TOO_OLD_VERSION (a Connect release older than 3.6)"
    old = DedicatedWorker(heap="-Xmx512m", name="tooold", version=TOO_OLD)
    old.start()
    try:
        create_cluster(custom, namespace, old.url)
        create_connector(
            custom, namespace, f"old-{unique}", file_source_spec(source_file(tmp_path / "o.txt"), "o", "o")
        )
        found = wait_condition(custom, namespace, f"old-{unique}", "Ready", status="False", reason="ConnectTooOld")
        assert TOO_OLD in found["message"] and "3.6.0" in found["message"], found
        assert condition(get_connector(custom, namespace, f"old-{unique}"), "Ready") == found
    finally:
        old.stop()
