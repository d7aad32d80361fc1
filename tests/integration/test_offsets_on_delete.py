"""``spec.offsetsOnDelete`` on the real stack: what deleting a KafkaConnector does to its offsets.

* ``keep`` (the default): the connector is deleted, a connector re-created under the same name
  continues from the offsets it left;
* ``backup``: the same, and the offsets are first saved in a ConfigMap without owner reference,
  still there once the resource is gone (the garbage collector runs on this stack);
* ``reset``: stop, backup, ``DELETE .../offsets``, delete; a connector re-created under the same
  name starts with no offsets. The operator is killed (SIGKILL, fault point ``delete-after-reset``)
  right after Connect deleted the offsets and before status says so: the restarted operator
  finishes without a second reset (the worker's request log holds exactly one DELETE of the
  offsets) and posts one ``OffsetsResetOnDelete`` Event.

The proof of "a re-created connector starts clean": the same name created directly in Connect,
STOPPED, and its offsets read (``GET .../offsets``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import REPO, OperatorProcess, wait_for
from tests.integration.support import (
    FILE_SOURCE,
    GROUP,
    VERSION,
    CrdKeeper,
    connect_get,
    connect_log,
    connect_offsets,
    connect_send,
    create_cluster,
    create_connector_kept,
    delete_with_offsets,
    file_source_spec,
    offsets_requests,
    wait_condition,
    wait_events,
)

pytestmark = pytest.mark.local_stack  # reads the local worker's request log


@pytest.fixture(autouse=True)
def this_branch_crds(stack: dict[str, Any]) -> Iterator[None]:
    """The CRDs of this checkout, applied again: engineers share the stack, and another session's
    older CRDs (applied by its test session at any time) make the API server prune spec.offsetsOnDelete."""
    with CrdKeeper(stack, REPO / "crds"):
        yield


LINES = 10
LINE = 3  # bytes per line ("a0\n")


def running_source(
    custom: Any, connect: httpx.Client, namespace: str, name: str, tmp_path: Path, mode: str | None
) -> Path:
    source = tmp_path / f"{name}.txt"
    source.write_text("".join(f"a{i}\n" for i in range(LINES)))
    spec = file_source_spec(source, name, f"{name}-offsets")
    if mode is not None:
        spec["offsetsOnDelete"] = mode
    create_connector_kept(custom, namespace, name, spec)
    wait_condition(custom, namespace, name, "Ready", reason="ConnectorRunning")
    wait_for(
        f"{name} read its file",
        lambda: (offsets := connect_offsets(connect, name)) and offsets[0]["offset"]["position"] == LINES * LINE,
    )
    return source


def delete_resource(custom: Any, namespace: str, name: str, timeout: float = 90) -> None:
    custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, "kafkaconnectors", name)
    wait_gone(custom, namespace, name, timeout)


def wait_gone(custom: Any, namespace: str, name: str, timeout: float = 90) -> None:
    def gone() -> bool:
        try:
            custom.get_namespaced_custom_object(GROUP, VERSION, namespace, "kafkaconnectors", name)
        except Exception as error:  # kubernetes.client.ApiException 404
            return getattr(error, "status", None) == 404
        return False

    wait_for(f"{name} deleted (finalizer released)", gone, timeout=timeout)


def recreated_offsets(connect: httpx.Client, name: str, source: Path) -> list[dict[str, Any]]:
    """Create the same connector name directly in Connect (STOPPED) and read its offsets."""
    config = {"connector.class": FILE_SOURCE, "file": str(source), "topic": name, "tasks.max": "1"}
    answer = connect_send(
        connect, "POST", "/connectors", json={"name": name, "config": config, "initial_state": "STOPPED"}
    )
    assert answer.status_code == 201, answer.text
    wait_for(f"{name} STOPPED", lambda: connect.get(f"/connectors/{name}/status").status_code == 200)
    return connect_offsets(connect, name)


def final_backups(core: Any, namespace: str, name: str) -> list[Any]:
    selector = f"{GROUP}/final-backup=true,{GROUP}/backup-of={name}"
    return list(core.list_namespaced_config_map(namespace, label_selector=selector).items)


def test_keep_leaves_the_offsets_for_a_connector_of_the_same_name(
    custom: Any,
    core: Any,
    namespace: str,
    connect: httpx.Client,
    connect_url: str,
    tmp_path: Path,
    unique: str,
    operator: OperatorProcess,
) -> None:
    name = f"keep-{unique}"
    create_cluster(custom, namespace, connect_url)
    source = running_source(custom, connect, namespace, name, tmp_path, None)
    try:
        delete_resource(custom, namespace, name)
        assert connect_get(connect, f"/connectors/{name}").status_code == 404
        assert not final_backups(core, namespace, name)
        offsets = recreated_offsets(connect, name, source)
        assert offsets and offsets[0]["offset"]["position"] == LINES * LINE  # continues where it was
    finally:
        delete_with_offsets(connect, name)


def test_backup_writes_a_configmap_that_outlives_the_resource(
    custom: Any,
    core: Any,
    namespace: str,
    connect: httpx.Client,
    connect_url: str,
    tmp_path: Path,
    unique: str,
    operator: OperatorProcess,
) -> None:
    name = f"bk-{unique}"
    create_cluster(custom, namespace, connect_url)
    source = running_source(custom, connect, namespace, name, tmp_path, "backup")
    try:
        delete_resource(custom, namespace, name)
        assert connect_get(connect, f"/connectors/{name}").status_code == 404
        time.sleep(5)  # the garbage collector (kube-controller-manager) would have deleted an owned one
        (backup,) = final_backups(core, namespace, name)
        assert not backup.metadata.owner_references
        assert f'"position": {LINES * LINE}' in backup.data["offsets.json"]
        assert len(wait_events(core, namespace, name, "OffsetsBackedUpOnDelete")) == 1
        offsets = recreated_offsets(connect, name, source)
        assert offsets and offsets[0]["offset"]["position"] == LINES * LINE  # the offsets stayed
    finally:
        delete_with_offsets(connect, name)


def test_reset_killed_after_the_offsets_delete_resets_once(
    stack: dict[str, Any],
    custom: Any,
    core: Any,
    namespace: str,
    connect: httpx.Client,
    connect_url: str,
    tmp_path: Path,
    unique: str,
) -> None:
    name = f"rs-{unique}"
    first = OperatorProcess(
        stack["kubeconfig"], namespace, tmp_path / "op-1.log", {"CONNECT_OFFSETS_FAULT_POINTS": "delete-after-reset"}
    )
    first.start()
    try:
        create_cluster(custom, namespace, connect_url)
        source = running_source(custom, connect, namespace, name, tmp_path, "reset")
        custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, "kafkaconnectors", name)
        process = first.process
        assert process is not None
        wait_for("operator killed at delete-after-reset", lambda: process.poll() is not None, timeout=90)
        assert process.returncode == -9 and "fault point delete-after-reset reached" in first.log()
        body = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, "kafkaconnectors", name)
        deletion = body["status"]["deletion"]
        assert (deletion["step"], deletion["reset"]) == ("Resetting", False)  # status does not know yet
        assert connect.get(f"/connectors/{name}/status").json()["connector"]["state"] == "STOPPED"
        assert connect_offsets(connect, name) == []  # but Connect has deleted them

        second = OperatorProcess(stack["kubeconfig"], namespace, tmp_path / "op-2.log")
        second.start()
        try:
            wait_for(f"{name} deleted", lambda: connect.get(f"/connectors/{name}").status_code == 404, timeout=90)
            wait_gone(custom, namespace, name)
        finally:
            second.stop()
        changes = [r for r in offsets_requests(connect_log(stack), {name}) if r.is_change]
        assert [r.method for r in changes] == ["DELETE"], changes  # one reset, not two
        assert len(wait_events(core, namespace, name, "OffsetsResetOnDelete")) == 1
        (backup,) = final_backups(core, namespace, name)
        assert not backup.metadata.owner_references
        assert f'"position": {LINES * LINE}' in backup.data["offsets.json"]
        assert recreated_offsets(connect, name, source) == []  # the same name starts clean
    finally:
        first.stop()
        delete_with_offsets(connect, name)
