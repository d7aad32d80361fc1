"""API server refusals a retry cannot fix end in a condition and wait (issue 18, point 2).

The operator runs as the chart installs it. Each refusal is produced for real by the API server:
an immutable ConfigMap as a list target (422), and a Role without ``create`` on ConfigMaps so the
backup before an alter is forbidden (403). Each gives a condition that names the object and what
to change; nothing reaches Connect; nothing is retried in a loop (the worker's request log shows
no repeated offsets requests over several drift intervals).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import wait_for
from tests.integration.chart_install import chart_operator, set_configmap_verb, tenant_namespaces
from tests.integration.support import (
    annotate,
    condition,
    connect_log,
    create_cluster,
    create_connector,
    events_for,
    file_source_spec,
    get_connector,
    offsets_requests,
    wait_annotation_removed,
    wait_condition,
)


def offsets_methods(stack: dict[str, Any], connector: str) -> list[str]:
    """Every offsets request for ``connector`` in the worker's log, answered or refused, oldest first."""
    return [r.method for r in offsets_requests(connect_log(stack), {connector})]


@pytest.mark.local_stack  # reads the local worker's request log
@pytest.mark.timeout(400)
def test_refusals_end_in_conditions_not_retry_loops(
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
        chart_operator(stack, core, custom, tmp_path, [tenant, other], start=False) as installed,
    ):
        # The platform's Role for this tenant lacks `create` on ConfigMaps: backups are forbidden.
        role = f"{installed.release}-connect-offsets-operator"
        set_configmap_verb(core, role, tenant, "create", granted=False)
        installed.operator.start()

        source = tmp_path / "s.txt"
        source.write_text("alpha\n")
        immutable, stopped = f"immutable-{unique}", f"nobackup-{unique}"
        create_cluster(custom, tenant, connect_url)
        core.create_namespaced_config_map(
            tenant, {"metadata": {"name": "frozen"}, "data": {"offsets.json": "{}"}, "immutable": True}
        )
        create_connector(custom, tenant, immutable, file_source_spec(source, immutable, "frozen"))
        document = {"offsets": [{"partition": {"filename": str(source)}, "offset": {"position": 3}}]}
        core.create_namespaced_config_map(
            tenant, {"metadata": {"name": "nobackup"}, "data": {"offsets.json": json.dumps(document)}}
        )
        create_connector(custom, tenant, stopped, file_source_spec(source, stopped, "nobackup", state="stopped"))
        try:
            wait_condition(custom, tenant, immutable, "Ready", reason="ConnectorRunning", timeout=90)
            wait_condition(custom, tenant, stopped, "Ready", reason="ConnectorStopped", timeout=90)

            # 422: list into an immutable ConfigMap.
            annotate(custom, tenant, immutable, connector_offsets="list")
            failed = wait_for(
                "the list refused",
                lambda: condition(get_connector(custom, tenant, immutable), "OffsetsOperationFailed"),
                timeout=60,
            )
            assert failed["reason"] == "ConfigMapWriteFailed", failed
            assert "frozen" in failed["message"] and "422" in failed["message"], failed

            # 403: the backup before an alter is forbidden, so the alter does not run.
            annotate(custom, tenant, stopped, connector_offsets="alter")
            refused = wait_for(
                "the alter refused for its backup",
                lambda: condition(get_connector(custom, tenant, stopped), "OffsetsOperationFailed"),
                timeout=60,
            )
            assert refused["reason"] == "BackupFailed", refused
            assert "could not be written, so nothing was changed" in refused["message"], refused
            assert "403" in refused["message"] and "RBAC" in refused["message"], refused
            # Several drift intervals (5 s here): no retry loop, no change sent.
            seen = offsets_methods(stack, stopped)
            time.sleep(16)
            assert offsets_methods(stack, stopped) == seen, "the refused alter was retried"
            assert "PATCH" not in seen
            assert connect.get(f"/connectors/{stopped}/offsets").json()["offsets"] == []

            # The platform grants `create` again; the user asks again: it runs, once.
            set_configmap_verb(core, role, tenant, "create", granted=True)
            annotate(custom, tenant, stopped, request_id="after-the-fix")
            body = wait_annotation_removed(custom, tenant, stopped, timeout=60)
            assert body["status"]["lastOffsetsOperation"]["result"] == "Succeeded", body["status"]
            assert offsets_methods(stack, stopped).count("PATCH") == 1
        finally:
            for name in (immutable, stopped):
                connect.delete(f"/connectors/{name}")


@pytest.mark.local_stack  # reads the local worker's request log
@pytest.mark.timeout(300)
def test_an_unreadable_configmap_is_reported_once_and_waits(
    custom: Any,
    core: Any,
    namespace: str,
    stack: dict[str, Any],
    connect: httpx.Client,
    connect_url: str,
    tmp_path: Path,
    unique: str,
) -> None:
    """The Role lacks `get` on ConfigMaps: the alter's ConfigMap cannot be read (403). One
    ApiServerRefused condition and one Warning Event, no retry loop, nothing sent to Connect; once
    the platform grants `get`, the next drift pass runs the request, once."""
    with (
        tenant_namespaces(core, custom, namespace) as (tenant, other),
        chart_operator(stack, core, custom, tmp_path, [tenant, other], start=False) as installed,
    ):
        role = f"{installed.release}-connect-offsets-operator"
        set_configmap_verb(core, role, tenant, "get", granted=False)
        installed.operator.start()

        source = tmp_path / "s.txt"
        source.write_text("alpha\n")
        name = f"unreadable-{unique}"
        document = {"offsets": [{"partition": {"filename": str(source)}, "offset": {"position": 4}}]}
        core.create_namespaced_config_map(
            tenant, {"metadata": {"name": "feed"}, "data": {"offsets.json": json.dumps(document)}}
        )
        create_cluster(custom, tenant, connect_url)
        create_connector(custom, tenant, name, file_source_spec(source, name, "feed", state="stopped"))
        try:
            wait_condition(custom, tenant, name, "Ready", reason="ConnectorStopped", timeout=90)
            annotate(custom, tenant, name, connector_offsets="alter")
            refused = wait_condition(custom, tenant, name, "ApiServerRefused", reason="Forbidden", timeout=60)
            assert "feed" in refused["message"] and "403" in refused["message"], refused
            time.sleep(16)  # three drift passes: reported once, nothing retried or sent
            events = [e for e in events_for(core, tenant, name) if e.reason == "ApiServerRefused"]
            assert len(events) == 1 and (events[0].count or 1) == 1, [(e.message, e.count) for e in events]
            assert [r for r in offsets_requests(connect_log(stack), {name}) if r.method != "GET"] == []

            set_configmap_verb(core, role, tenant, "get", granted=True)
            body = wait_annotation_removed(custom, tenant, name, timeout=60)
            assert body["status"]["lastOffsetsOperation"]["result"] == "Succeeded", body["status"]
            assert condition(body, "ApiServerRefused") is None, body["status"]["conditions"]
            assert offsets_methods(stack, name).count("PATCH") == 1
            assert connect.get(f"/connectors/{name}/offsets").json()["offsets"][0]["offset"] == {"position": 4}
        finally:
            connect.delete(f"/connectors/{name}")
