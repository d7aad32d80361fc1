"""Repeated offsets changes under the chart's own RBAC: retention and shard clean-up never wedge a change.

Issue 18, point 1: the chart granted no ``delete`` on ConfigMaps, so from a connector's sixth change on
the pruning of old backups failed with 403, the change was retried as "transient", and every retry wrote
one more backup without the change ever reaching Connect. These tests run the operator exactly as the
chart installs it (its ServiceAccount token, env and namespaces) and repeat past the retention.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

import httpx
import pytest

from connect_offsets.clients.offsets_configmaps import SHARD_LABEL, ShardIndex, name_hash
from tests.conftest import wait_for
from tests.integration.chart_install import chart_operator, set_configmap_verb, tenant_namespaces
from tests.integration.support import (
    MONITORABLE_SOURCE,
    annotate,
    connect_log,
    create_cluster,
    create_connector,
    delete_with_offsets,
    events_for,
    file_source_spec,
    offsets_requests,
    seed_offsets,
    wait_annotation_removed,
    wait_condition,
    wait_events,
)

BACKUP_OF = "connect-offsets.io/backup-of"


def offsets_changes(stack: dict[str, Any], connector: str) -> list[str]:
    """The PATCH/DELETE offsets requests Connect answered 2xx for ``connector``, oldest first."""
    return [r.method for r in offsets_requests(connect_log(stack), {connector}) if r.is_change]


def backups_of(core: Any, namespace: str, resource: str) -> list[str]:
    items = core.list_namespaced_config_map(namespace, label_selector=f"{BACKUP_OF}={resource}").items
    return sorted(item.metadata.name for item in items)


def run_request(custom: Any, namespace: str, name: str, operation: str) -> dict[str, Any]:
    annotate(custom, namespace, name, connector_offsets=operation)
    body = wait_annotation_removed(custom, namespace, name, timeout=90)
    last: dict[str, Any] = body["status"]["lastOffsetsOperation"]
    assert last["operation"] == operation and last["result"] == "Succeeded", last
    return last


def write_alter(core: Any, namespace: str, configmap: str, source: Path, position: int) -> None:
    document = {"offsets": [{"partition": {"filename": str(source)}, "offset": {"position": position}}]}
    body = {"metadata": {"name": configmap}, "data": {"offsets.json": json.dumps(document)}}
    try:
        core.replace_namespaced_config_map(configmap, namespace, body)
    except Exception:  # first time: it does not exist yet
        core.create_namespaced_config_map(namespace, body)


@pytest.mark.local_stack  # reads the local worker's request log
@pytest.mark.timeout(600)
def test_eight_changes_past_the_retention_under_the_chart_rbac(
    custom: Any,
    core: Any,
    namespace: str,
    stack: dict[str, Any],
    connect: httpx.Client,
    connect_url: str,
    tmp_path: Path,
    unique: str,
) -> None:
    with (
        tenant_namespaces(core, custom, namespace) as (tenant, other),
        chart_operator(stack, core, custom, tmp_path, [tenant, other]) as installed,
    ):
        assert "CONNECT_OFFSETS_BACKUP_RETENTION" not in installed.chart_env  # the default retention, 5
        source = tmp_path / "s.txt"
        source.write_text("alpha\nbeta\ngamma\n")
        name, cm = f"retain-{unique}", "retain-offsets"
        create_cluster(custom, tenant, connect_url)
        create_connector(custom, tenant, name, file_source_spec(source, name, cm, state="stopped"))
        try:
            wait_condition(custom, tenant, name, "Ready", reason="ConnectorStopped", timeout=90)
            operations = ["alter", "reset", "restore", "alter", "reset", "restore", "alter", "reset"]
            backups_named: list[str] = []
            for number, operation in enumerate(operations, start=1):
                if operation == "alter":
                    write_alter(core, tenant, cm, source, position=number)
                last = run_request(custom, tenant, name, operation)
                backups_named.append(last["backup"])
                # One backup per change, never a second one for a retry; the newest five stay. The
                # oldest is pruned once the request is answered (Pass.after_answer): just after it.
                assert len(set(backups_named)) == number
                assert wait_for(
                    f"{min(number, 5)} backups after change {number}",
                    lambda number=number: len(backups_of(core, tenant, name)) == min(number, 5),
                    timeout=20,
                ), backups_of(core, tenant, name)
            assert offsets_changes(stack, name) == ["PATCH" if op != "reset" else "DELETE" for op in operations]
            assert backups_of(core, tenant, name) == sorted(backups_named[-5:])
            assert connect.get(f"/connectors/{name}/offsets").json()["offsets"] == []
            assert "forbidden" not in installed.operator.log().lower(), installed.operator.log()[-3000:]
        finally:
            connect.delete(f"/connectors/{name}")


@pytest.mark.local_stack
@pytest.mark.timeout(600)
def test_a_refused_prune_neither_blocks_nor_repeats_the_change(
    custom: Any,
    core: Any,
    namespace: str,
    stack: dict[str, Any],
    connect: httpx.Client,
    connect_url: str,
    tmp_path: Path,
    unique: str,
) -> None:
    """A platform that strips ``delete`` from the Role: every change still goes through exactly once."""
    retention = ["extraEnv[0].name=CONNECT_OFFSETS_BACKUP_RETENTION", "extraEnv[0].value=2"]
    with (
        tenant_namespaces(core, custom, namespace) as (tenant, other),
        chart_operator(
            stack, core, custom, tmp_path, [tenant, other], string_values=retention, start=False
        ) as installed,
    ):
        assert installed.chart_env["CONNECT_OFFSETS_BACKUP_RETENTION"] == "2"
        set_configmap_verb(core, f"{installed.release}-connect-offsets-operator", tenant, "delete", granted=False)
        installed.operator.start()
        source = tmp_path / "s.txt"
        source.write_text("alpha\n")
        name, cm = f"noprune-{unique}", "noprune-offsets"
        create_cluster(custom, tenant, connect_url)
        create_connector(custom, tenant, name, file_source_spec(source, name, cm, state="stopped"))
        try:
            wait_condition(custom, tenant, name, "Ready", reason="ConnectorStopped", timeout=90)
            for number in range(1, 5):
                write_alter(core, tenant, cm, source, position=10 * number)
                run_request(custom, tenant, name, "alter")
                # The worker's GET takes its partition set from its offsets-topic reader, which may lag
                # the PATCH that just returned (seen in a parallel run: [] right after the first alter).
                wait_for(
                    f"Connect's GET offsets at position {10 * number}",
                    lambda n=number: (
                        connect.get(f"/connectors/{name}/offsets").json()["offsets"][0]["offset"]
                        == {"position": 10 * n}
                    ),
                )
            assert offsets_changes(stack, name) == ["PATCH"] * 4  # no change repeated
            assert len(backups_of(core, tenant, name)) == 4  # one per change, none pruned, none extra
            warnings = wait_events(core, tenant, name, "CleanupFailed")
            assert "old backups not pruned" in warnings[0].message and "forbidden" in warnings[0].message.lower()
            ready = wait_condition(custom, tenant, name, "Ready", reason="ConnectorStopped")
            assert ready["status"] == "True"
        finally:
            connect.delete(f"/connectors/{name}")


@pytest.mark.timeout(600)
def test_a_large_document_listed_three_times_leaves_one_set_of_shards(
    custom: Any,
    core: Any,
    namespace: str,
    stack: dict[str, Any],
    connect: httpx.Client,
    connect_url: str,
    tmp_path: Path,
    unique: str,
) -> None:
    with (
        tenant_namespaces(core, custom, namespace) as (tenant, other),
        chart_operator(stack, core, custom, tmp_path, [tenant, other]) as installed,
    ):
        name, cm = f"shards-{unique}", "shards-offsets"
        create_cluster(custom, tenant, connect_url)
        spec = {
            "class": MONITORABLE_SOURCE,
            "tasksMax": 1,
            "state": "stopped",
            "config": {"topic": f"{name}-topic"},
            "listOffsets": {"toConfigMap": {"name": cm}},
        }
        create_connector(custom, tenant, name, spec)
        try:
            wait_condition(custom, tenant, name, "Ready", reason="ConnectorStopped", timeout=90)
            # Random partition names do not compress: 40,000 of them are about 2 MiB as gzip, so
            # more than one ConfigMap holds them (the sharded form).
            count = 40_000
            seed = [{"partition": {"id": secrets.token_hex(24)}, "offset": {"n": i}} for i in range(count)]
            seed_offsets(connect, name, seed)
            wait_for(
                "the worker lists every seeded partition",
                lambda: len(connect.get(f"/connectors/{name}/offsets", timeout=120).json()["offsets"]) == count,
                timeout=120,
                interval=1,
            )
            selector = f"{SHARD_LABEL}={name_hash(cm)}"
            for _ in range(3):
                last = run_request(custom, tenant, name, "list")
                assert "shard ConfigMaps" in last["message"], last
                stored = core.read_namespaced_config_map(cm, tenant)
                index = ShardIndex.from_json(stored.data["offsets.json.shards"], cm)
                in_use = sorted(s.name for s in index.shards)
                assert len(in_use) >= 2
                found = sorted(
                    i.metadata.name for i in core.list_namespaced_config_map(tenant, label_selector=selector).items
                )
                assert found == in_use  # exactly the current set: the previous list's shards are gone
            assert not [e for e in events_for(core, tenant, name) if e.reason == "CleanupFailed"]
            assert "forbidden" not in installed.operator.log().lower()
        finally:
            delete_with_offsets(connect, name)
