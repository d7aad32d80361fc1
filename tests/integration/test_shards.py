"""The finalizers of earlier versions: one per shard (``connect-offsets.io/finalizer-shard-N``),
before issue 44 made it one name for every shard count. A resource an older sharded operator left
with such a finalizer and then deleted is still deleted once. Replicas and shards themselves:
test_replicas.py."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from connect_offsets.controller import FINALIZER
from tests.conftest import OperatorProcess, wait_for
from tests.integration.support import (
    GROUP,
    VERSION,
    connect_log,
    connector_absent,
    create_cluster,
    create_connector,
    file_source_spec,
    get_connector,
    request_lines,
    wait_condition,
)

CLUSTERS = 8
DELETE_REQUEST = re.compile(r'"DELETE (/connectors/[^/ ?"]+) HTTP/')


def test_a_resource_deleted_before_its_owner_put_its_finalizer_on_is_deleted_once(
    stack: dict[str, Any],
    custom: Any,
    namespace: str,
    connect_url: str,
    tmp_path: Path,
    unique: str,
) -> None:
    """An older sharded operator's finalizer on a resource deleted while no operator ran: it waits
    only on a name no replica uses any more, and a finalizer cannot be added once deletion has
    begun. The controller runs the delete logic once and removes the old finalizer (the resource
    would otherwise stay Terminating for good, and its namespace with it)."""
    name = f"orph-{unique}"
    source = tmp_path / "s.txt"
    source.write_text("a\n")
    create_cluster(custom, namespace, connect_url)
    create_connector(custom, namespace, name, file_source_spec(source, f"orph-{unique}", f"{name}-offsets", "stopped"))
    first = OperatorProcess(stack["kubeconfig"], namespace, tmp_path / "first.log")
    first.start()
    try:
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorStopped", timeout=120)
    finally:
        first.stop()
    # As a sharded operator (two shards) would have left it, then deleted with no operator running.
    rv = get_connector(custom, namespace, name)["metadata"]["resourceVersion"]
    stale = f"{FINALIZER}-shard-1"
    patch = {"metadata": {"finalizers": [stale], "resourceVersion": rv}}
    custom.patch_namespaced_custom_object(GROUP, VERSION, namespace, "kafkaconnectors", name, patch)
    custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, "kafkaconnectors", name)
    assert get_connector(custom, namespace, name)["metadata"]["deletionTimestamp"]
    log = connect_log(stack)
    seen = len(request_lines(log))
    second = OperatorProcess(stack["kubeconfig"], namespace, tmp_path / "second.log")  # unsharded
    second.start()
    try:
        assert wait_for(f"{name} gone", lambda: connector_absent(custom, namespace, name), timeout=60), second.log()[
            -3000:
        ]
        sent = [m.group(1) for line in request_lines(log)[seen:] if (m := DELETE_REQUEST.search(line))]
        assert sent.count(f"/connectors/{name}") == 1, sent  # the delete logic ran, once (others share the worker)
    finally:
        second.stop()
