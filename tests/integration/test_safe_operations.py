"""Safe offsets operations on the real stack: dry runs, stop -> change -> resume (also across SIGKILLs
of the operator), GitOps request ids, declarative applyOnChange, and initial offsets at creation.

Every test drives the operator (a subprocess) through the API server and checks Connect itself:
its offsets, its connector state and -- for "applied exactly once" -- the PATCH requests in the
worker's own request log.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from connect_offsets.planning import content_hash
from tests.conftest import OperatorProcess, wait_for
from tests.integration.support import (
    annotate,
    annotation,
    condition,
    connect_get,
    connect_log,
    connect_offsets,
    connect_send,
    connect_state,
    create_cluster,
    create_connector,
    file_source_spec,
    get_connector,
    offsets_requests,
    patch_connector,
    read_topic,
    wait_annotation_removed,
    wait_condition,
    wait_connect_state,
    wait_events,
)

LINE = 3  # bytes per line of the source files below ("a0\n")


def source_file(path: Path, lines: int = 10, prefix: str = "a") -> Path:
    path.write_text("".join(f"{prefix}{i}\n" for i in range(lines)))
    return path


def put_configmap(core: Any, namespace: str, name: str, data: dict[str, str]) -> None:
    body = {"metadata": {"name": name}, "data": data}
    try:
        core.create_namespaced_config_map(namespace, body)
    except Exception:
        core.replace_namespaced_config_map(name, namespace, body)


def position_doc(path: Path, position: int) -> str:
    return json.dumps({"offsets": [{"partition": {"filename": str(path)}, "offset": {"position": position}}]})


def applied_count(stack: dict[str, Any], connector: str, method: str = "PATCH") -> int:
    """Offsets changes (``method`` answered 2xx) for this connector in the worker's request log, the
    ground truth. A refusal changed nothing and is retried: the shared worker answers 409 while other
    tests' connectors rebalance it (clean-clone CI run 7: a DELETE answered 409, then 200)."""
    return sum(1 for r in offsets_requests(connect_log(stack), {connector}) if r.method == method and r.is_change)


def status_of(custom: Any, namespace: str, name: str) -> dict[str, Any]:
    return dict(get_connector(custom, namespace, name).get("status") or {})


def die_at_each(
    points: tuple[str, ...], stack: dict[str, Any], namespace: str, tmp_path: Path, operators: list[OperatorProcess]
) -> Iterator[str]:
    """Start one operator per fault point, each killed (SIGKILL) when it reaches its point; yields the
    point after the kill so the caller can check what the dead operator left behind."""
    for index, point in enumerate(points, start=1):
        op = OperatorProcess(
            stack["kubeconfig"],
            namespace,
            tmp_path / f"op-{index}.log",
            extra_env={"CONNECT_OFFSETS_FAULT_POINTS": point},
        )
        op.start()
        operators.append(op)
        assert op.process is not None
        process = op.process
        wait_for(f"operator killed at {point}", lambda p=process: p.poll() is not None, timeout=90)
        assert process.returncode == -9, op.log()[-2000:]
        assert f"fault point {point} reached" in op.log()
        yield point


def running_with_offsets(custom: Any, connect: httpx.Client, namespace: str, name: str, size: int) -> None:
    wait_condition(custom, namespace, name, "Ready", reason="ConnectorRunning")
    wait_for(
        f"{name} read the whole file",
        lambda: connect_offsets(connect, name) and connect_offsets(connect, name)[0]["offset"]["position"] == size,
    )


def test_dry_run_diffs_and_changes_nothing(
    custom: Any,
    core: Any,
    namespace: str,
    connect: httpx.Client,
    connect_url: str,
    tmp_path: Path,
    unique: str,
    operator: OperatorProcess,
) -> None:
    """alter/reset with dry-run=true on a RUNNING connector: the diff in dry-run.json, a summary in
    status and an Event; Connect's offsets and state stay as they were."""
    source = source_file(tmp_path / "dry.txt")
    name, cm = f"dry-{unique}", "dry-offsets"
    create_cluster(custom, namespace, connect_url)
    create_connector(custom, namespace, name, file_source_spec(source, f"dry-{unique}", cm))
    try:
        running_with_offsets(custom, connect, namespace, name, 10 * LINE)
        before = connect_offsets(connect, name)
        other = {"filename": str(tmp_path / "other.txt")}
        put_configmap(
            core,
            namespace,
            cm,
            {
                "offsets.json": json.dumps(
                    {
                        "offsets": [
                            {"partition": {"filename": str(source)}, "offset": {"position": 6}},
                        ]
                    }
                )
            },
        )
        annotate(custom, namespace, name, connector_offsets="alter", dry_run="true")
        body = wait_annotation_removed(custom, namespace, name)
        assert annotation(body, "dry-run") is None
        last = body["status"]["lastOffsetsOperation"]
        assert last["dryRun"] is True and last["result"] == "Succeeded" and last["operation"] == "alter"
        assert "0 added, 1 changed, 0 removed, 0 unchanged" in last["message"]
        diff = json.loads(core.read_namespaced_config_map(cm, namespace).data["dry-run.json"])
        assert diff["changed"] == [
            {"partition": {"filename": str(source)}, "old": {"position": 30}, "new": {"position": 6}}
        ]
        assert diff["added"] == [] and diff["removed"] == [] and diff["operation"] == "alter"
        assert connect_state(connect, name) == "RUNNING"
        assert connect_offsets(connect, name) == before
        assert "backup" not in last  # nothing changed, nothing to back up

        annotate(custom, namespace, name, connector_offsets="reset", dry_run="true")
        body = wait_annotation_removed(custom, namespace, name)
        diff = json.loads(core.read_namespaced_config_map(cm, namespace).data["dry-run.json"])
        assert diff["operation"] == "reset" and diff["removed"] == before and diff["summary"].startswith("0 added")
        assert connect_offsets(connect, name) == before
        assert len(wait_events(core, namespace, name, "OffsetsDryRun", count=2)) == 2
        assert other not in [o["partition"] for o in connect_offsets(connect, name)]

        # A typo in dry-run is refused: it must never turn into a real change.
        annotate(custom, namespace, name, connector_offsets="reset", dry_run="yes")
        found = wait_condition(custom, namespace, name, "OffsetsOperationFailed", reason="InvalidAnnotation")
        assert "dry-run='yes' must be true or false" in found["message"]
        assert connect_offsets(connect, name) == before
        assert connect_state(connect, name) == "RUNNING"
    finally:
        connect.delete(f"/connectors/{name}")


@pytest.mark.local_stack  # counts PATCH requests in the local worker's log
def test_stop_change_resume_with_annotation_and_policy(
    custom: Any,
    core: Any,
    namespace: str,
    stack: dict[str, Any],
    connect: httpx.Client,
    connect_url: str,
    tmp_path: Path,
    unique: str,
    operator: OperatorProcess,
) -> None:
    """A RUNNING connector: alter with stop-connector=true stops it, backs up, PATCHes once and brings it
    back to RUNNING, which re-reads from the new position. Then the same via spec.offsetsPolicy."""
    source = source_file(tmp_path / "scr.txt")
    name, cm, topic = f"scr-{unique}", "scr-offsets", f"scr-{unique}"
    create_cluster(custom, namespace, connect_url)
    create_connector(custom, namespace, name, file_source_spec(source, topic, cm))
    try:
        running_with_offsets(custom, connect, namespace, name, 10 * LINE)
        read_topic(stack["kafka_a"], topic, 10)
        put_configmap(core, namespace, cm, {"offsets.json": position_doc(source, 7 * LINE)})
        annotate(custom, namespace, name, connector_offsets="alter", stop_connector="true")
        body = wait_annotation_removed(custom, namespace, name, timeout=90)
        assert annotation(body, "stop-connector") is None
        last = body["status"]["lastOffsetsOperation"]
        assert last["result"] == "Succeeded" and last["operation"] == "alter", last
        assert "connector back to running" in last["message"]
        assert "pendingOffsetsOperation" not in body["status"]
        backup = core.read_namespaced_config_map(last["backup"], namespace)
        assert json.loads(backup.data["offsets.json"])["offsets"][0]["offset"] == {"position": 30}
        wait_connect_state(connect, name, "RUNNING")
        # Re-reads lines 7..9 from the new position: 13 records in all.
        records = read_topic(stack["kafka_a"], topic, 13)
        assert [json.loads(r) for r in records[10:]] == ["a7", "a8", "a9"]
        assert applied_count(stack, name) == 1
        assert wait_events(core, namespace, name, "OffsetsChangeStarted")

        # Policy in the spec: a reset of the running connector is stopped, reset, resumed.
        patch_connector(custom, namespace, name, {"spec": {"offsetsPolicy": {"stopConnector": True}}})
        annotate(custom, namespace, name, connector_offsets="reset")
        body = wait_annotation_removed(custom, namespace, name, timeout=90)
        assert body["status"]["lastOffsetsOperation"]["operation"] == "reset"
        assert body["status"]["lastOffsetsOperation"]["result"] == "Succeeded"
        wait_connect_state(connect, name, "RUNNING")
        assert applied_count(stack, name, "DELETE") == 1
        read_topic(stack["kafka_a"], topic, 23)  # the whole file again after the reset
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorRunning")
    finally:
        connect.delete(f"/connectors/{name}")


def test_invalid_request_never_stops_the_connector(
    custom: Any,
    core: Any,
    namespace: str,
    connect: httpx.Client,
    connect_url: str,
    tmp_path: Path,
    unique: str,
    operator: OperatorProcess,
) -> None:
    """stop-connector with invalid offsets: refused before anything happens; the connector keeps running."""
    source = source_file(tmp_path / "inv.txt")
    name, cm = f"inv-{unique}", "inv-offsets"
    create_cluster(custom, namespace, connect_url)
    create_connector(custom, namespace, name, file_source_spec(source, f"inv-{unique}", cm))
    try:
        running_with_offsets(custom, connect, namespace, name, 10 * LINE)
        before = connect_offsets(connect, name)
        put_configmap(core, namespace, cm, {"offsets.json": position_doc(tmp_path / "not-the-file.txt", 3)})
        annotate(custom, namespace, name, connector_offsets="alter", stop_connector="true")
        found = wait_condition(custom, namespace, name, "OffsetsOperationFailed", reason="InvalidOffsets")
        assert "offsets[0].partition.filename" in found["message"]
        time.sleep(3)  # a few more passes: still nothing may happen
        assert connect_state(connect, name) == "RUNNING"
        assert connect_offsets(connect, name) == before
        assert "pendingOffsetsOperation" not in status_of(custom, namespace, name)
    finally:
        connect.delete(f"/connectors/{name}")


@pytest.mark.local_stack  # kills the operator at fault points; counts PATCHes in the worker log
@pytest.mark.parametrize(
    "points", [("after-intent", "after-backup"), ("after-stop", "after-patch"), ("before-resume",)], ids="+".join
)
def test_stop_change_resume_survives_sigkill(
    custom: Any,
    core: Any,
    namespace: str,
    stack: dict[str, Any],
    connect: httpx.Client,
    connect_url: str,
    tmp_path: Path,
    unique: str,
    points: tuple[str, ...],
) -> None:
    """The operator dies (SIGKILL) at each listed point in turn; a fresh one finishes the change exactly
    once: final offsets as requested, one PATCH, a backup, the connector RUNNING, annotation removed."""
    source = source_file(tmp_path / "crash.txt")
    name, cm, topic = f"crash-{unique}", "crash-offsets", f"crash-{unique}"
    create_cluster(custom, namespace, connect_url)
    create_connector(custom, namespace, name, file_source_spec(source, topic, cm))
    operators: list[OperatorProcess] = []
    try:
        plain = OperatorProcess(stack["kubeconfig"], namespace, tmp_path / "op-0.log")
        plain.start()
        operators.append(plain)
        running_with_offsets(custom, connect, namespace, name, 10 * LINE)
        plain.stop()
        put_configmap(core, namespace, cm, {"offsets.json": position_doc(source, 8 * LINE)})
        annotate(custom, namespace, name, connector_offsets="alter", stop_connector="true")
        for point in die_at_each(points, stack, namespace, tmp_path, operators):
            pending = status_of(custom, namespace, name).get("pendingOffsetsOperation")
            assert pending is not None, f"after {point}: the intent must be recorded"
            assert annotation(get_connector(custom, namespace, name), "connector-offsets") == "alter"
        final = OperatorProcess(stack["kubeconfig"], namespace, tmp_path / "op-final.log")
        final.start()
        operators.append(final)
        body = wait_annotation_removed(custom, namespace, name, timeout=120)
        last = body["status"]["lastOffsetsOperation"]
        assert last["result"] == "Succeeded", last
        assert "pendingOffsetsOperation" not in body["status"]
        assert core.read_namespaced_config_map(last["backup"], namespace).data["offsets.json"]
        wait_connect_state(connect, name, "RUNNING")
        records = read_topic(stack["kafka_a"], topic, 12)
        assert [json.loads(r) for r in records[10:]] == ["a8", "a9"]
        assert applied_count(stack, name) == 1, "the PATCH must be applied exactly once"
        if "after-patch" in points:
            assert "already in Connect (applied before the operator restarted); not sent again" in last["message"]
        time.sleep(2)  # two offset flushes (1 s each) of the resumed task: a replay would have been written
        assert len(read_topic(stack["kafka_a"], topic, 12)) == 12  # and not replayed again
    finally:
        for op in operators:
            op.stop()
        connect.delete(f"/connectors/{name}")


@pytest.mark.local_stack  # kills the operator at fault points; counts offsets requests in the worker log
@pytest.mark.parametrize("operation", ["alter", "reset", "restore"])
def test_change_on_a_stopped_connector_survives_sigkill(
    custom: Any,
    core: Any,
    namespace: str,
    stack: dict[str, Any],
    connect: httpx.Client,
    connect_url: str,
    tmp_path: Path,
    unique: str,
    operation: str,
) -> None:
    """A change on a connector that is already STOPPED (no stop -> resume around it): the operator dies
    after the backup, then a fresh one dies after the change; the third finishes. The change reaches
    Connect once, the one backup holds the offsets from before it (a restore still undoes it), the
    annotation is removed and the connector stays STOPPED."""
    source = source_file(tmp_path / "stopped.txt")
    name, cm, topic = f"stopped-{unique}", "stopped-offsets", f"stopped-{unique}"
    create_cluster(custom, namespace, connect_url)
    create_connector(custom, namespace, name, file_source_spec(source, topic, cm))
    operators: list[OperatorProcess] = []
    method = "DELETE" if operation == "reset" else "PATCH"
    try:
        plain = OperatorProcess(stack["kubeconfig"], namespace, tmp_path / "op-0.log")
        plain.start()
        operators.append(plain)
        running_with_offsets(custom, connect, namespace, name, 10 * LINE)
        patch_connector(custom, namespace, name, {"spec": {"state": "stopped"}})
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorStopped")
        if operation == "restore":
            # something to restore from: an alter to 4 lines (its backup holds 10 lines)
            put_configmap(core, namespace, cm, {"offsets.json": position_doc(source, 4 * LINE)})
            annotate(custom, namespace, name, connector_offsets="alter")
            restore_from = wait_annotation_removed(custom, namespace, name)["status"]["lastOffsetsOperation"]["backup"]
            annotate(custom, namespace, name, restore_from=restore_from)
        plain.stop()
        put_configmap(core, namespace, cm, {"offsets.json": position_doc(source, 8 * LINE)})
        before = connect_offsets(connect, name)
        applied_before = applied_count(stack, name, method)
        annotate(custom, namespace, name, connector_offsets=operation)
        for point in die_at_each(("after-backup", "after-patch"), stack, namespace, tmp_path, operators):
            progress = status_of(custom, namespace, name).get("offsetsProgress")
            assert progress and progress.get("backup"), f"after {point}: the backup must be recorded"
            assert annotation(get_connector(custom, namespace, name), "connector-offsets") == operation
        final = OperatorProcess(stack["kubeconfig"], namespace, tmp_path / "op-final.log")
        final.start()
        operators.append(final)
        body = wait_annotation_removed(custom, namespace, name, timeout=120)
        last = body["status"]["lastOffsetsOperation"]
        assert last["result"] == "Succeeded", last
        assert "already in Connect (applied before the operator restarted); not sent again" in last["message"]
        assert not body["status"].get("offsetsProgress")
        assert applied_count(stack, name, method) == applied_before + 1, f"the {method} must be applied exactly once"
        expected = {
            "alter": [{"partition": {"filename": str(source)}, "offset": {"position": 8 * LINE}}],
            "reset": [],
            "restore": [{"partition": {"filename": str(source)}, "offset": {"position": 10 * LINE}}],
        }[operation]
        assert connect_offsets(connect, name) == expected
        # one backup for this change, holding the offsets from before it
        selector = f"connect-offsets.io/backup-of={name}"
        backups = core.list_namespaced_config_map(namespace, label_selector=selector).items
        assert len(backups) == (2 if operation == "restore" else 1), [b.metadata.name for b in backups]
        saved = json.loads(core.read_namespaced_config_map(last["backup"], namespace).data["offsets.json"])
        assert saved["offsets"] == before
        assert connect_state(connect, name) == "STOPPED"
    finally:
        for op in operators:
            op.stop()
        connect.delete(f"/connectors/{name}")


@pytest.mark.local_stack
def test_request_id_makes_reapplied_requests_a_no_op(
    custom: Any,
    core: Any,
    namespace: str,
    stack: dict[str, Any],
    connect: httpx.Client,
    connect_url: str,
    tmp_path: Path,
    unique: str,
    operator: OperatorProcess,
) -> None:
    """A GitOps tool re-applies `reset` + request-id after the operator removed them: nothing happens."""
    source = source_file(tmp_path / "rid.txt")
    name, cm = f"rid-{unique}", "rid-offsets"
    create_cluster(custom, namespace, connect_url)
    create_connector(custom, namespace, name, file_source_spec(source, f"rid-{unique}", cm, state="stopped"))
    try:
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorStopped")
        put_configmap(core, namespace, cm, {"offsets.json": position_doc(source, 9)})
        annotate(custom, namespace, name, connector_offsets="alter", request_id="ticket-42")
        body = wait_annotation_removed(custom, namespace, name)
        assert annotation(body, "request-id") is None
        assert body["status"]["handledRequestIds"] == ["ticket-42"]
        assert body["status"]["lastOffsetsOperation"]["requestId"] == "ticket-42"
        assert applied_count(stack, name) == 1
        first = body["status"]["lastOffsetsOperation"]

        put_configmap(core, namespace, cm, {"offsets.json": position_doc(source, 3)})
        annotate(custom, namespace, name, connector_offsets="alter", request_id="ticket-42")
        found = wait_condition(custom, namespace, name, "OffsetsRequestIgnored", reason="AlreadyHandled")
        assert "ticket-42" in found["message"]
        time.sleep(3)  # a few more passes of the operator: the repeated request id must still do nothing
        body = get_connector(custom, namespace, name)
        assert annotation(body, "connector-offsets") == "alter"  # left alone: no fight with GitOps
        assert body["status"]["lastOffsetsOperation"] == first
        assert applied_count(stack, name) == 1
        assert connect_offsets(connect, name)[0]["offset"] == {"position": 9}

        annotate(custom, namespace, name, request_id="ticket-43")
        body = wait_annotation_removed(custom, namespace, name)
        assert body["status"]["handledRequestIds"] == ["ticket-42", "ticket-43"]
        assert connect_offsets(connect, name)[0]["offset"] == {"position": 3}
        assert condition(body, "OffsetsRequestIgnored") is None
    finally:
        connect.delete(f"/connectors/{name}")


@pytest.mark.local_stack
def test_apply_on_change_applies_once_per_content(
    custom: Any,
    core: Any,
    namespace: str,
    stack: dict[str, Any],
    connect: httpx.Client,
    connect_url: str,
    tmp_path: Path,
    unique: str,
    operator: OperatorProcess,
) -> None:
    """spec.alterOffsets.applyOnChange: each new content is applied once (stop -> change -> resume);
    re-applying the same content, or touching other keys, does nothing."""
    source = source_file(tmp_path / "decl.txt")
    name, cm, topic = f"decl-{unique}", "decl-offsets", f"decl-{unique}"
    spec = file_source_spec(source, topic, cm)
    spec["alterOffsets"]["applyOnChange"] = True
    create_cluster(custom, namespace, connect_url)
    create_connector(custom, namespace, name, spec)
    try:
        running_with_offsets(custom, connect, namespace, name, 10 * LINE)
        read_topic(stack["kafka_a"], topic, 10)
        put_configmap(core, namespace, cm, {"offsets.json": position_doc(source, 9 * LINE)})
        # Before it, appliedOffsets records the empty start (result Adopted, no content): the
        # ConfigMap appearing after applyOnChange was on is an edit, and is applied.
        applied = wait_for(
            "first content applied",
            lambda: (
                (found := status_of(custom, namespace, name).get("appliedOffsets", {})).get("result") == "Succeeded"
                and found
            ),
            timeout=90,
        )
        assert applied["result"] == "Succeeded" and applied["configMap"] == cm
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorRunning", timeout=60)
        read_topic(stack["kafka_a"], topic, 11)
        assert applied_count(stack, name) == 1

        # Same offsets again (a Git re-sync) plus an unrelated key: no second PATCH.
        put_configmap(
            core, namespace, cm, {"offsets.json": position_doc(source, 9 * LINE), "note": "re-synced from Git"}
        )
        time.sleep(6)  # more than one drift interval (5 s): the re-synced ConfigMap must not be applied again
        assert applied_count(stack, name) == 1
        assert status_of(custom, namespace, name)["appliedOffsets"]["contentHash"] == applied["contentHash"]

        put_configmap(core, namespace, cm, {"offsets.json": position_doc(source, 8 * LINE)})
        wait_for(
            "second content applied",
            lambda: (
                status_of(custom, namespace, name).get("appliedOffsets", {}).get("contentHash")
                not in (None, applied["contentHash"])
            ),
            timeout=90,
        )
        records = read_topic(stack["kafka_a"], topic, 13)
        assert [json.loads(r) for r in records[11:]] == ["a8", "a9"]
        assert applied_count(stack, name) == 2
        wait_condition(custom, namespace, name, "OffsetsApplied", reason="Applied")
    finally:
        connect.delete(f"/connectors/{name}")


@pytest.mark.local_stack  # kills the operator at a fault point; counts PATCHes in the worker log
def test_apply_on_change_edit_while_stopping_is_applied_once_after_the_claimed_content(
    custom: Any,
    core: Any,
    namespace: str,
    stack: dict[str, Any],
    connect: httpx.Client,
    connect_url: str,
    tmp_path: Path,
    unique: str,
) -> None:
    """Issue 44: applyOnChange with a stop-connector policy; content C1 is claimed (pinned with the
    intent), and the ConfigMap is edited to C2 while the connector is stopping (the operator killed
    right after ``PUT /stop``, then the edit, then a fresh operator). Connect receives exactly two
    PATCHes: C1, then C2; before the fix both applied C2 (the change read the ConfigMap again, and
    applyOnChange then applied the edit a second time).

    The source file is removed once read, so the connector's offsets move only by PATCH: the
    backup the second change took holds what the first PATCH left in Connect."""
    source = source_file(tmp_path / "edited.txt")
    name, cm, topic = f"edited-{unique}", "edited-offsets", f"edited-{unique}"
    spec = file_source_spec(source, topic, cm)
    spec["alterOffsets"]["applyOnChange"] = True
    spec["offsetsPolicy"] = {"stopConnector": True}
    create_cluster(custom, namespace, connect_url)
    create_connector(custom, namespace, name, spec)
    first, edited = position_doc(source, 8 * LINE), position_doc(source, 5 * LINE)
    operators: list[OperatorProcess] = []
    try:
        plain = OperatorProcess(stack["kubeconfig"], namespace, tmp_path / "op-0.log")
        plain.start()
        operators.append(plain)
        running_with_offsets(custom, connect, namespace, name, 10 * LINE)
        wait_for("the empty start adopted", lambda: "appliedOffsets" in status_of(custom, namespace, name))
        plain.stop()
        source.unlink()
        put_configmap(core, namespace, cm, {"offsets.json": first})
        for _ in die_at_each(("after-stop",), stack, namespace, tmp_path, operators):
            pending = status_of(custom, namespace, name)["pendingOffsetsOperation"]
            assert (pending["step"], pending["source"]) == ("Stopping", "applyOnChange"), pending
            assert pending["contentHash"] == content_hash(first)
            pin = core.read_namespaced_config_map(pending["pinned"], namespace)
            assert json.loads(pin.data["offsets.json"]) == json.loads(first)
        put_configmap(core, namespace, cm, {"offsets.json": edited})  # while the connector stops
        final = OperatorProcess(stack["kubeconfig"], namespace, tmp_path / "op-final.log")
        final.start()
        operators.append(final)
        wait_for(
            "the edit applied",
            lambda: (
                (applied := status_of(custom, namespace, name).get("appliedOffsets") or {}).get("contentHash")
                == content_hash(edited)
                and applied.get("result") == "Succeeded"
                and "pendingOffsetsOperation" not in status_of(custom, namespace, name)
            ),
            timeout=120,
        )
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorRunning", timeout=60)
        time.sleep(6)  # more than one drift interval (5 s): nothing is applied a third time
        patches = [r for r in offsets_requests(connect_log(stack), {name}) if r.method == "PATCH"]
        assert len([r for r in patches if r.is_change]) == 2, patches  # a refusal (409) changed nothing
        # In order: the second change's backup holds what the first PATCH left (C1), and Connect
        # holds C2 in the end.
        backups = core.list_namespaced_config_map(namespace, label_selector=f"connect-offsets.io/backup-of={name}")
        by_time = sorted(backups.items, key=lambda c: c.metadata.annotations["connect-offsets.io/time"])
        held = [json.loads(c.data["offsets.json"])["offsets"][0]["offset"]["position"] for c in by_time]
        assert held == [10 * LINE, 8 * LINE], held
        assert connect_offsets(connect, name)[0]["offset"]["position"] == 5 * LINE
        print(f"\nPATCH /connectors/{name}/offsets in Connect's request log: {len(patches)} (C1 = 24, then C2 = 15)")
    finally:
        for op in operators:
            op.stop()
        connect.delete(f"/connectors/{name}")


def test_initial_offsets_at_creation(
    custom: Any,
    core: Any,
    namespace: str,
    stack: dict[str, Any],
    connect: httpx.Client,
    connect_url: str,
    tmp_path: Path,
    unique: str,
    operator: OperatorProcess,
) -> None:
    """spec.initialOffsets: created STOPPED, leftovers of an earlier same-named connector wiped, the
    initial offsets PATCHed, then RUNNING: its first records start at the given position. Only once."""
    source = source_file(tmp_path / "init.txt")
    leftover = source_file(tmp_path / "leftover.txt", 2, "z")
    name, topic = f"init-{unique}", f"init-{unique}"
    # An earlier connector with the same name left offsets for another file behind.
    early = connect_send(
        connect,
        "PUT",
        f"/connectors/{name}/config",
        json={
            "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
            "file": str(leftover),
            "topic": f"{topic}-early",
            "tasks.max": "1",
        },
    )
    assert early.status_code == 201, early.text
    wait_for("leftover offsets", lambda: connect_offsets(connect, name))
    assert connect_send(connect, "DELETE", f"/connectors/{name}").status_code == 204
    put_configmap(core, namespace, "init-offsets", {"offsets.json": position_doc(source, 6 * LINE)})
    spec = file_source_spec(source, topic, "init-list")
    spec["initialOffsets"] = {"fromConfigMap": {"name": "init-offsets"}}
    create_cluster(custom, namespace, connect_url)
    create_connector(custom, namespace, name, spec)
    try:
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorRunning", timeout=90)
        records = read_topic(stack["kafka_a"], topic, 4)
        assert [json.loads(r) for r in records] == ["a6", "a7", "a8", "a9"]
        initial = status_of(custom, namespace, name)["initialOffsets"]
        assert initial["step"] == "Applied" and "removed 1 offset(s) left by an earlier connector" in initial["message"]
        wait_for("offsets at the end", lambda: connect_offsets(connect, name)[0]["offset"]["position"] == 30)
        assert [o["partition"] for o in connect_offsets(connect, name)] == [{"filename": str(source)}]

        # Never again: the connector deleted behind our back is recreated without initial offsets.
        assert connect_send(connect, "DELETE", f"/connectors/{name}").status_code == 204
        wait_connect_state(connect, name, "RUNNING", timeout=60)
        assert status_of(custom, namespace, name)["initialOffsets"]["step"] == "Applied"
        assert wait_events(core, namespace, name, "InitialOffsetsApplied")
    finally:
        connect.delete(f"/connectors/{name}")


@pytest.mark.local_stack  # kills the operator at fault points; counts PATCHes in the worker log
@pytest.mark.parametrize("point", ["initial-after-create", "initial-after-patch"])
def test_initial_offsets_survive_sigkill(
    custom: Any,
    core: Any,
    namespace: str,
    stack: dict[str, Any],
    connect: httpx.Client,
    connect_url: str,
    tmp_path: Path,
    unique: str,
    point: str,
) -> None:
    """Killed right after the STOPPED create, or right after the PATCH: a fresh operator finishes the
    initial offsets once, and the connector's first records start at the given position."""
    source = source_file(tmp_path / "initcrash.txt")
    name, topic = f"initcrash-{unique}", f"initcrash-{unique}"
    put_configmap(core, namespace, "initcrash-offsets", {"offsets.json": position_doc(source, 7 * LINE)})
    spec = file_source_spec(source, topic, "initcrash-list")
    spec["initialOffsets"] = {"fromConfigMap": {"name": "initcrash-offsets"}}
    create_cluster(custom, namespace, connect_url)
    dying = OperatorProcess(
        stack["kubeconfig"], namespace, tmp_path / "op-dying.log", extra_env={"CONNECT_OFFSETS_FAULT_POINTS": point}
    )
    final = OperatorProcess(stack["kubeconfig"], namespace, tmp_path / "op-final.log")
    try:
        dying.start()
        create_connector(custom, namespace, name, spec)
        assert dying.process is not None
        process = dying.process
        wait_for(f"operator killed at {point}", lambda: process.poll() is not None, timeout=90)
        assert f"fault point {point} reached" in dying.log()
        assert status_of(custom, namespace, name)["initialOffsets"]["step"] == "Creating"
        assert connect_state(connect, name) == "STOPPED"  # held stopped, never started from 0
        final.start()
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorRunning", timeout=90)
        records = read_topic(stack["kafka_a"], topic, 3)
        assert [json.loads(r) for r in records] == ["a7", "a8", "a9"]
        assert status_of(custom, namespace, name)["initialOffsets"]["step"] == "Applied"
        assert applied_count(stack, name) == 1
    finally:
        dying.stop()
        final.stop()
        connect.delete(f"/connectors/{name}")


def test_initial_offsets_failures_leave_no_connector(
    custom: Any,
    core: Any,
    namespace: str,
    stack: dict[str, Any],
    connect: httpx.Client,
    connect_url: str,
    tmp_path: Path,
    unique: str,
    operator: OperatorProcess,
) -> None:
    """Invalid offsets: nothing created. A config Connect rejects: nothing created (step validate). A PATCH
    Connect rejects after the create: the half-created connector is deleted and the step is named."""
    source = source_file(tmp_path / "fail.txt")
    create_cluster(custom, namespace, connect_url)

    bad_offsets = f"badoff-{unique}"
    put_configmap(core, namespace, "bad-offsets", {"offsets.json": position_doc(tmp_path / "other.txt", 3)})
    spec = file_source_spec(source, bad_offsets, "l1")
    spec["initialOffsets"] = {"fromConfigMap": {"name": "bad-offsets"}}
    create_connector(custom, namespace, bad_offsets, spec)

    bad_config = f"badcfg-{unique}"
    put_configmap(core, namespace, "good-offsets", {"offsets.json": position_doc(source, 3)})
    spec = file_source_spec(source, bad_config, "l2")
    spec["config"]["tasks.max.enforce"] = "not-a-boolean"
    spec["initialOffsets"] = {"fromConfigMap": {"name": "good-offsets"}}
    create_connector(custom, namespace, bad_config, spec)

    bad_patch = f"badpatch-{unique}"
    sink_topic = f"badpatch-{unique}"
    put_configmap(
        core,
        namespace,
        "sink-offsets",
        {
            "offsets.json": json.dumps(
                {
                    "offsets": [
                        {
                            "partition": {"kafka_topic": sink_topic, "kafka_partition": 7},
                            "offset": {"kafka_offset": 5},
                        }
                    ]
                }
            )
        },
    )
    create_connector(
        custom,
        namespace,
        bad_patch,
        {
            "class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
            "config": {"topics": sink_topic, "file": str(tmp_path / "sink.txt")},
            "initialOffsets": {"fromConfigMap": {"name": "sink-offsets"}},
        },
    )
    try:
        found = wait_condition(custom, namespace, bad_offsets, "Ready", "False", reason="InitialOffsetsInvalid")
        assert "offsets[0].partition.filename" in found["message"]
        found = wait_condition(custom, namespace, bad_config, "Ready", "False", reason="InitialOffsetsFailed")
        assert "step validate" in found["message"] and "tasks.max.enforce" in found["message"]
        found = wait_condition(
            custom, namespace, bad_patch, "Ready", "False", reason="InitialOffsetsFailed", timeout=90
        )
        assert "step patch" in found["message"], found
        assert "Failed to alter consumer group offsets" in found["message"]  # Connect's message, verbatim
        assert "half-created connector was deleted" in found["message"]
        time.sleep(3)
        for name in (bad_offsets, bad_config, bad_patch):
            assert connect_get(connect, f"/connectors/{name}").status_code == 404, name
        assert status_of(custom, namespace, bad_patch)["initialOffsets"]["step"] == "Failed"
    finally:
        for name in (bad_offsets, bad_config, bad_patch):
            connect.delete(f"/connectors/{name}")
