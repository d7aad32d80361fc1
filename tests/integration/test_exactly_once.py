"""Exactly once, from the chosen source, on a connector the resource owns — on the real stack, with
something else touching the resources (issue 30).

The exhaustive proof is tests/unit/test_simulation.py (a crash or a fault after every write of every
flow); these are its worst cases on the real API server and Connect worker, each of which failed on
the code before the fix:

* the operator killed (SIGKILL) between the status write and the annotation removal of a staged
  reset: the restarted operator finishes the removal and never stops, resets or resumes again;
* another controller patching the resource's labels continuously (three threads, as fast as the
  API server lets them) while a staged reset runs: one stop, one DELETE, one resume in the worker's
  request log (it was seven of each);
* a connector deleted and re-created by another team right before a spec edit: never overwritten,
  the resource says ConnectorOwnedElsewhere;
* requests are never lost: 1,000 `list` requests back to back on one resource, and 100 resources
  asked at once; every request is answered (the latency target, 2 s, is measured by
  bench/bench_request_storm.py, not asserted here).

The worker's own request log (``offsets_requests``) is the ground truth for what reached Connect.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import OperatorProcess, wait_for
from tests.integration.support import (
    GROUP,
    annotate,
    annotation,
    ask_all_at_once,
    ask_request,
    connect_log,
    connect_offsets,
    connect_send,
    connector_config,
    create_cluster,
    create_connector,
    file_source_spec,
    get_connector,
    offsets_requests,
    patch_connector,
    request_lines,
    wait_annotation_removed,
    wait_answered,
    wait_condition,
)

pytestmark = pytest.mark.local_stack  # reads the local worker's request log

LINE = 3  # bytes per line of the source files ("a0\n")
#: A request not answered this long after it was made is lost (before the fix one waited until the
#: operator restarted). Not a speed target: those are in bench/bench_request_storm.py (2 s per
#: request, measured on a quiet machine, results in bench/README.md). Room for a busy CI machine:
#: there, 100 requests made at once were answered in 10.3 s at most (p50 8.7 s) while three other
#: test workers ran.
LOST_AFTER_S = 30.0


def source_file(path: Path, lines: int = 10) -> Path:
    path.write_text("".join(f"a{i}\n" for i in range(lines)))
    return path


def requests_of(stack: dict[str, Any], connector: str, suffix: str) -> list[str]:
    """Requests ending with ``suffix`` for this connector in the worker's request log."""
    needle = f"/connectors/{connector}/{suffix} HTTP"
    return [line for line in request_lines(connect_log(stack)) if needle in line]


def running_connector(
    custom: Any, connect: httpx.Client, namespace: str, name: str, source: Path, topic: str, **spec: Any
) -> None:
    create_connector(custom, namespace, name, {**file_source_spec(source, topic, f"{name}-offsets"), **spec})
    wait_condition(custom, namespace, name, "Ready", reason="ConnectorRunning")
    wait_for(
        f"{name} read its file",
        lambda: (offsets := connect_offsets(connect, name)) and offsets[0]["offset"]["position"] == 10 * LINE,
    )


def assert_one_staged_reset(stack: dict[str, Any], connect: httpx.Client, name: str) -> None:
    changes = [r for r in offsets_requests(connect_log(stack), {name}) if r.is_change]
    assert [r.method for r in changes] == ["DELETE"], changes
    assert len(requests_of(stack, name, "stop")) == 1
    assert len(requests_of(stack, name, "resume")) == 1
    assert connect.get(f"/connectors/{name}/status").json()["connector"]["state"] == "RUNNING"


def test_killed_between_status_and_annotation_removal_the_reset_runs_once(
    stack: dict[str, Any],
    custom: Any,
    namespace: str,
    connect: httpx.Client,
    connect_url: str,
    tmp_path: Path,
    unique: str,
) -> None:
    """The new crash point ``after-status``: the outcome is in status, the annotations are still
    on; a new operator removes them and does nothing else."""
    name = f"ks-{unique}"
    first = OperatorProcess(
        stack["kubeconfig"], namespace, tmp_path / "op-1.log", {"CONNECT_OFFSETS_FAULT_POINTS": "after-status"}
    )
    first.start()
    try:
        create_cluster(custom, namespace, connect_url)
        running_connector(custom, connect, namespace, name, source_file(tmp_path / "src.txt"), f"ks-{unique}")
        annotate(custom, namespace, name, connector_offsets="reset", stop_connector="true")
        process = first.process
        assert process is not None
        wait_for("operator killed at after-status", lambda: process.poll() is not None, timeout=90)
        assert process.returncode == -9 and "fault point after-status reached" in first.log()
        body = get_connector(custom, namespace, name)
        last = body["status"]["lastOffsetsOperation"]
        assert (last["operation"], last["result"]) == ("reset", "Succeeded")
        assert annotation(body, "connector-offsets") == "reset"  # the removal never happened

        second = OperatorProcess(stack["kubeconfig"], namespace, tmp_path / "op-2.log")
        second.start()
        try:
            body = wait_annotation_removed(custom, namespace, name)
            assert body["metadata"]["annotations"][f"{GROUP}/handled-request"] == last["instance"]
            assert body["status"]["lastOffsetsOperation"] == last  # no second outcome
            time.sleep(3)  # a few drift passes (5 s interval in tests) may not start it again
            assert_one_staged_reset(stack, connect, name)
        finally:
            second.stop()
    finally:
        first.stop()
        connect.delete(f"/connectors/{name}")


@pytest.fixture
def label_patchers(custom: Any) -> Iterator[Any]:
    """Three threads patching a label on one resource as fast as the API server answers, as a
    GitOps controller or a labelling webhook does; yields a function that starts them."""
    stop = threading.Event()
    threads: list[threading.Thread] = []
    patches = [0]

    def start(namespace: str, name: str) -> None:
        def patcher(index: int) -> None:
            n = 0
            while not stop.is_set():
                n += 1
                patch_connector(custom, namespace, name, {"metadata": {"labels": {f"patcher-{index}": str(n)}}})
                patches[0] += 1

        threads.extend(threading.Thread(target=patcher, args=(i,), daemon=True) for i in range(3))
        for thread in threads:
            thread.start()

    start.patches = patches  # type: ignore[attr-defined]
    yield start
    stop.set()
    for thread in threads:
        thread.join(timeout=10)


def test_a_staged_reset_runs_once_while_another_client_patches_labels(
    stack: dict[str, Any],
    custom: Any,
    namespace: str,
    connect: httpx.Client,
    connect_url: str,
    tmp_path: Path,
    unique: str,
    operator: OperatorProcess,
    label_patchers: Any,
) -> None:
    name = f"lp-{unique}"
    create_cluster(custom, namespace, connect_url)
    running_connector(custom, connect, namespace, name, source_file(tmp_path / "src.txt"), f"lp-{unique}")
    label_patchers(namespace, name)
    annotate(custom, namespace, name, connector_offsets="reset", stop_connector="true")
    body = wait_annotation_removed(custom, namespace, name, timeout=120)
    last = body["status"]["lastOffsetsOperation"]
    assert (last["operation"], last["result"]) == ("reset", "Succeeded"), last
    time.sleep(6)  # more than one drift interval with the patchers still running
    assert label_patchers.patches[0] > 50, "the patchers barely ran"
    assert_one_staged_reset(stack, connect, name)
    # kopf does not process our resources (handlers/watching.py streams them): its diff base, a
    # PATCH of the resource when first seen and after each label change, is never written.
    annotations = get_connector(custom, namespace, name)["metadata"].get("annotations") or {}
    assert f"{GROUP}/last-handled-configuration" not in annotations, sorted(annotations)
    print(f"\n{label_patchers.patches[0]} label patches during the reset; one stop, one DELETE, one resume")
    connect.delete(f"/connectors/{name}")


def test_a_connector_recreated_by_another_team_before_a_spec_edit_is_not_overwritten(
    stack: dict[str, Any],
    custom: Any,
    namespace: str,
    connect: httpx.Client,
    connect_url: str,
    tmp_path: Path,
    unique: str,
) -> None:
    """The window: the cluster's snapshot, refreshed every drift interval, still shows our connector
    after another team deleted it and created its own; the spec edit that follows is planned from
    it. Before the write barrier, the edit PUT our config over theirs."""
    name = f"rc-{unique}"
    drift = 10.0  # snapshots refreshed every 10 s, trusted for 15 s
    env = {"CONNECT_OFFSETS_DRIFT_INTERVAL": str(drift)}
    op = OperatorProcess(stack["kubeconfig"], namespace, tmp_path / "op.log", env)
    op.start()
    create_cluster(custom, namespace, connect_url)
    running_connector(custom, connect, namespace, name, source_file(tmp_path / "src.txt"), f"rc-{unique}")
    theirs_file = source_file(tmp_path / "theirs.txt")
    theirs = {
        "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
        "file": str(theirs_file),
        "topic": f"theirs-{unique}",
        "connect-offsets.io/owner": "team-b/theirs",
    }
    try:
        time.sleep(drift + 1)  # a snapshot taken after our create (so passes read it, not Connect)
        # Deleted and re-created by someone else; the operator's snapshot still shows ours.
        assert connect_send(connect, "DELETE", f"/connectors/{name}").status_code in (200, 204)
        wait_for("deleted", lambda: connect.get(f"/connectors/{name}").status_code == 404, interval=0.05)
        created = connect_send(connect, "POST", "/connectors", json={"name": name, "config": theirs})
        assert created.status_code == 201, created.text
        patch_connector(custom, namespace, name, {"spec": {"config": {"topic": f"rc2-{unique}"}}})
        wait_condition(custom, namespace, name, "Ready", "False", reason="ConnectorOwnedElsewhere", timeout=60)
        time.sleep(drift)  # a drift interval later: still theirs
        config = connector_config(connect, name)
        assert {k: v for k, v in config.items() if k != "name"} == theirs
        puts = [line for line in requests_of(stack, name, "config") if f'"PUT /connectors/{name}/config' in line]
        assert puts == [], puts  # the operator never wrote its config over theirs
    finally:
        op.stop()
        connect.delete(f"/connectors/{name}")


# 250 in every make test run: five times past where the field notes' resource went deaf (after the
# 44th and 50th request); the full thousand under the load marker (make test-load), at 145 s too
# slow for every run (issue 32).
@pytest.mark.parametrize(
    "requests", [pytest.param(250, id="250"), pytest.param(1000, id="1000", marks=pytest.mark.load)]
)
def test_back_to_back_lists_are_all_answered(
    custom: Any,
    namespace: str,
    connect: httpx.Client,
    connect_url: str,
    tmp_path: Path,
    unique: str,
    operator: OperatorProcess,
    requests: int,
) -> None:
    """The field notes' deaf resource: each request annotated as soon as the previous one's
    annotation is gone. Before the fix a request after the 44th-50th waited for ever."""
    name = f"bb-{unique}"
    create_cluster(custom, namespace, connect_url)
    create_connector(
        custom,
        namespace,
        name,
        file_source_spec(source_file(tmp_path / "src.txt"), f"bb-{unique}", f"{name}-offsets", state="stopped"),
    )
    wait_condition(custom, namespace, name, "Ready", reason="ConnectorStopped")
    took: list[float] = []
    for _ in range(requests):
        asked, version = ask_request(custom, namespace, name)
        took.append(wait_answered(custom, namespace, name, version, timeout=LOST_AFTER_S) - asked)
    took.sort()
    print(
        f"\n{requests:,} back-to-back lists: p50 {statistics.median(took) * 1000:.0f} ms, "
        f"p99 {took[int(len(took) * 0.99) - 1] * 1000:.0f} ms, max {took[-1] * 1000:.0f} ms"
    )
    assert len(took) == requests
    assert took[-1] <= LOST_AFTER_S, took[-10:]
    last = get_connector(custom, namespace, name)["status"]["lastOffsetsOperation"]
    assert (last["operation"], last["result"]) == ("list", "Succeeded")
    connect.delete(f"/connectors/{name}")


def test_a_hundred_resources_asked_at_once_are_all_answered(
    custom: Any,
    namespace: str,
    connect: httpx.Client,
    connect_url: str,
    tmp_path: Path,
    unique: str,
    operator: OperatorProcess,
) -> None:
    """100 resources annotated together (8 clients in parallel); one watch on the namespace, begun
    before the first request, sees each answer (its annotation removed)."""
    names = [f"h{i:03d}-{unique}" for i in range(100)]
    create_cluster(custom, namespace, connect_url)
    source = source_file(tmp_path / "src.txt")
    for name in names:
        spec = file_source_spec(source, f"h-{unique}", f"{name}-offsets", state="stopped")
        create_connector(custom, namespace, name, spec)
    try:
        for name in names:
            wait_condition(custom, namespace, name, "Ready", reason="ConnectorStopped", timeout=180)
        took = sorted(ask_all_at_once(custom, namespace, names, timeout=LOST_AFTER_S * 3).took.values())
        p50, slowest = statistics.median(took) * 1000, took[-1] * 1000
        print(f"\n100 resources asked at once: p50 {p50:.0f} ms, max {slowest:.0f} ms (bench: request_storm)")
        assert len(took) == 100
        assert took[-1] <= LOST_AFTER_S, took[-10:]
    finally:
        for name in names:
            connect.delete(f"/connectors/{name}")
