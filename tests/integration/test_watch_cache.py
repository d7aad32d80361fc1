"""Issue 20 on the real stack: the operator reconciles from its watch cache and one connector
snapshot per Connect cluster, and is still as good at drift and as safe with stale data.

- Idle: over several drift intervals the operator sends the worker no per-connector config or
  status read for a connector that does not change, only the cluster's snapshot
  (``GET /connectors?expand=status&expand=info``); the worker's request log is the witness.
- Drift: a connector deleted, reconfigured or resumed behind the operator's back is put back by
  the next snapshot (the test waits generously; the time is measured in bench/, not asserted).
- Stale cache: a connector resumed by someone else right before an ``alter`` request is on the
  snapshot as STOPPED; the change must still be safe (the operator reads the connector fresh
  before an offsets change, stops it, changes it, and leaves it as the spec says) and the offsets
  must be exactly the document's.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import OperatorProcess, wait_for
from tests.integration.support import (
    annotate,
    connect_log,
    connect_offsets,
    connect_state,
    create_cluster,
    create_connector,
    file_source_spec,
    wait_annotation_removed,
    wait_condition,
    wait_connect_state,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

_OPERATOR_REQUEST = re.compile(r'"(\w+) (/[^ ]*) HTTP/[\d.]+" (\d{3}) \S+ "[^"]*" "connect-offsets-operator')


def operator_requests(log: Path, start: int) -> list[str]:
    """The operator's requests in the worker's request log after byte ``start``: ``METHOD path``."""
    with log.open("rb") as handle:
        handle.seek(start)
        text = handle.read().decode(errors="replace")
    return [f"{m.group(1)} {m.group(2)}" for m in _OPERATOR_REQUEST.finditer(text)]


def test_idle_connector_costs_only_the_cluster_snapshot(
    stack: dict[str, Any],
    custom: Any,
    namespace: str,
    operator: OperatorProcess,
    connect: httpx.Client,
    connect_url: str,
    tmp_path: Path,
    unique: str,
) -> None:
    name = f"idle-{unique}"
    source = tmp_path / "in.txt"
    source.write_text("a\n")
    create_cluster(custom, namespace, connect_url)
    create_connector(custom, namespace, name, file_source_spec(source, f"idle-{unique}", "unused", state="stopped"))
    try:
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorStopped")
        time.sleep(6)  # one drift interval (5 s in tests): the passes after creation are done
        log = connect_log(stack)
        start = log.stat().st_size
        time.sleep(16)  # three drift intervals
        requests = operator_requests(log, start)
        per_connector = [r for r in requests if r.split()[1].startswith(f"/connectors/{name}")]
        assert per_connector == [], requests
        snapshots = [r for r in requests if r == "GET /connectors?expand=status&expand=info"]
        assert 2 <= len(snapshots) <= 5, requests  # about one per interval, shared by every connector
    finally:
        connect.delete(f"/connectors/{name}")


def test_drift_behind_the_back_is_repaired_from_the_snapshot(
    custom: Any,
    core: Any,
    namespace: str,
    operator: OperatorProcess,
    connect: httpx.Client,
    connect_url: str,
    tmp_path: Path,
    unique: str,
) -> None:
    name = f"drift-{unique}"
    source = tmp_path / "in.txt"
    source.write_text("a\n")
    create_cluster(custom, namespace, connect_url)
    spec = file_source_spec(source, f"drift-{unique}", "unused", state="stopped")
    create_connector(custom, namespace, name, spec)
    try:
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorStopped")
        time.sleep(6)  # at least one snapshot lists it

        assert connect.delete(f"/connectors/{name}").status_code == 204
        wait_for("deleted connector recreated", lambda: connect.get(f"/connectors/{name}/config").status_code == 200)
        wait_connect_state(connect, name, "STOPPED")

        changed = {**connect.get(f"/connectors/{name}/config").json(), "file": str(tmp_path / "other.txt")}
        assert connect.put(f"/connectors/{name}/config", json=changed).status_code == 200
        wait_for(
            "config put back",
            lambda: connect.get(f"/connectors/{name}/config").json().get("file") == str(source),
        )

        assert connect.put(f"/connectors/{name}/resume").status_code == 202
        wait_connect_state(connect, name, "RUNNING", timeout=20)
        wait_connect_state(connect, name, "STOPPED")
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorStopped")
    finally:
        connect.delete(f"/connectors/{name}")


def test_a_connector_resumed_by_someone_else_right_before_an_alter_is_changed_safely(
    custom: Any,
    core: Any,
    namespace: str,
    operator: OperatorProcess,
    connect: httpx.Client,
    connect_url: str,
    tmp_path: Path,
    unique: str,
) -> None:
    name = f"stale-{unique}"
    source = tmp_path / "in.txt"
    source.write_text("one\ntwo\n")
    create_cluster(custom, namespace, connect_url)
    configmap = f"stale-{unique}"
    create_connector(custom, namespace, name, file_source_spec(source, f"stale-{unique}", configmap, state="stopped"))
    wanted = [{"partition": {"filename": str(source)}, "offset": {"position": 4}}]
    core.create_namespaced_config_map(
        namespace, {"metadata": {"name": configmap}, "data": {"offsets.json": json.dumps({"offsets": wanted})}}
    )
    try:
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorStopped")
        time.sleep(6)  # the snapshot lists it STOPPED
        # Someone else resumes it, and the alter request comes before the next snapshot.
        assert connect.put(f"/connectors/{name}/resume").status_code == 202
        annotate(custom, namespace, name, connector_offsets="alter")
        body = wait_annotation_removed(custom, namespace, name, timeout=90)
        last = body["status"]["lastOffsetsOperation"]
        assert (last["operation"], last["result"]) == ("alter", "Succeeded"), last
        assert connect_offsets(connect, name) == wanted
        wait_connect_state(connect, name, "STOPPED")  # as the spec says
        assert connect_state(connect, name) == "STOPPED"
    finally:
        connect.delete(f"/connectors/{name}")
