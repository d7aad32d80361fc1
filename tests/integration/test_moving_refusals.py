"""Copies between tenants (issue 34): every refusal names its rule and changes nothing, on the real
stack with the operator under the chart's ServiceAccount watching two tenant namespaces.

Tenant A owns connector ``src`` on the platform's shared ConnectCluster (it lists both tenants) and
has a private ConnectCluster that lists nobody else. Tenant B's ``dst`` (STOPPED, the same file)
asks to copy:

* ``src`` with the plugin, before A shares it: exit 1, ``SourceConnectorNotAllowed`` naming A's
  resource and the annotation ``offsets-readers``; the same for a new TO (the plugin deletes the
  KafkaConnector it created, nothing reaches Connect);
* a connector that does not exist: ``SourceConnectorNotFound``;
* ``src`` through A's private ConnectCluster: ``ClusterNotAllowed``;
* after A annotates ``src`` with ``offsets-readers: <B>``: the copy succeeds, with a backup.

After each refusal ``dst``'s offsets in Connect are unchanged, no backup and no pinned copy was
written in B's namespace, and B's request annotations were withdrawn by the plugin (or kept with the
failure recorded, for the annotation asked by hand).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import wait_for
from tests.integration.chart_install import chart_operator, tenant_namespaces
from tests.integration.support import (
    FILE_SOURCE,
    GROUP,
    VERSION,
    annotate,
    connect_get,
    connect_offsets,
    create_cluster,
    get_connector,
    wait_connect_state,
)

pytestmark = pytest.mark.local_stack

PLUGIN = str(Path(sys.executable).parent / "kubectl-connect_offsets")


def plugin(stack: dict[str, Any], *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": stack["kubeconfig"]}
    return subprocess.run([PLUGIN, *args], capture_output=True, text=True, env=env, timeout=180)


def connector(
    custom: Any, namespace: str, name: str, spec: dict[str, Any], labels: dict[str, str], annotations: dict[str, str]
) -> None:
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "KafkaConnector",
        "metadata": {"name": name, "namespace": namespace, "labels": labels, "annotations": annotations},
        "spec": spec,
    }
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "kafkaconnectors", body)


def written_configmaps(core: Any, namespace: str) -> list[str]:
    """Backups and pinned copies in the namespace (what a copy writes before it changes anything)."""
    found = core.list_namespaced_config_map(namespace, label_selector=f"{GROUP}/kind").items
    return sorted(
        cm.metadata.name
        for cm in found
        if f"{GROUP}/backup-of" in (cm.metadata.labels or {}) or f"{GROUP}/pinned-for" in (cm.metadata.labels or {})
    )


@pytest.mark.timeout(600)
def test_copies_across_tenants_are_refused_naming_the_rule_until_the_owner_shares(
    stack: dict[str, Any],
    core: Any,
    custom: Any,
    connect: httpx.Client,
    connect_url: str,
    namespace: str,
    tmp_path: Path,
    unique: str,
) -> None:
    with (
        tenant_namespaces(core, custom, namespace) as (team_a, team_b),
        chart_operator(stack, core, custom, tmp_path, [namespace, team_a, team_b]),
    ):
        create_cluster(custom, namespace, connect_url, name="shared", allowedNamespaces=[team_a, team_b])
        create_cluster(custom, team_a, connect_url, name="private")
        shared = {f"{GROUP}/cluster": "shared", f"{GROUP}/cluster-namespace": namespace}
        data = tmp_path / "orders.txt"
        data.write_text("".join(f"line-{i}\n" for i in range(8)))
        src, dst = f"src-{unique}", f"dst-{unique}"
        spec = {"class": FILE_SOURCE, "tasksMax": 1, "config": {"file": str(data), "topic": f"t-{unique}"}}
        connector(custom, team_a, src, {**spec, "state": "running"}, shared, {})
        connector(
            custom,
            team_b,
            dst,
            {**spec, "state": "stopped", "listOffsets": {"toConfigMap": {"name": f"{dst}-offsets"}}},
            shared,
            {},
        )
        size = data.stat().st_size
        at_end = [{"partition": {"filename": str(data)}, "offset": {"position": size}}]
        wait_for(f"{src} read its file", lambda: connect_offsets(connect, src) == at_end, timeout=90)
        wait_connect_state(connect, dst, "STOPPED")
        before = connect_offsets(connect, dst)
        assert before == []

        def unchanged(what: str) -> None:
            assert connect_offsets(connect, dst) == before, what
            assert written_configmaps(core, team_b) == [], what
            assert connect.get(f"/connectors/{dst}/status").json()["connector"]["state"] == "STOPPED", what

        # Another tenant's connector, not shared: refused through the plugin, naming the rule.
        refused = plugin(stack, "copy", src, dst, "-n", team_b, "--from-namespace", team_a)
        assert refused.returncode == 1, (refused.stdout, refused.stderr)
        assert "SourceConnectorNotAllowed" in refused.stderr, refused.stderr
        assert f"{team_a}/{src}" in refused.stderr and "offsets-readers" in refused.stderr
        unchanged("not shared")
        assert "connect-offsets.io/alter-from-connector" not in (
            get_connector(custom, team_b, dst)["metadata"].get("annotations") or {}
        )
        # The same into a new connector: created, refused, deleted again; nothing in Connect.
        fresh = f"fresh-{unique}"
        refused = plugin(stack, "copy", src, fresh, "-n", team_b, "--from-namespace", team_a)
        assert refused.returncode == 1 and "SourceConnectorNotAllowed" in refused.stderr, refused.stderr
        assert "was deleted again" in refused.stderr
        wait_for(
            "the refused new connector is gone",
            lambda: (
                not any(
                    c["metadata"]["name"] == fresh
                    for c in custom.list_namespaced_custom_object(GROUP, VERSION, team_b, "kafkaconnectors")["items"]
                )
            ),
            timeout=60,
        )
        assert connect_get(connect, f"/connectors/{fresh}").status_code == 404

        # A connector that does not exist, and a cluster that does not allow the namespace.
        for request_id, annotations, reason in (
            ("missing", {"alter_from_connector": f"nope-{unique}"}, "SourceConnectorNotFound"),
            (
                "private",
                {"alter_from_connector": src, "alter_from_cluster": f"{team_a}/private"},
                "ClusterNotAllowed",
            ),
        ):
            annotate(custom, team_b, dst, connector_offsets="alter", request_id=request_id, **annotations)
            last = wait_for(
                f"{reason} recorded",
                lambda rid=request_id: (
                    lambda r: r if r.get("requestId") == rid and r.get("result") == "Failed" else None
                )((get_connector(custom, team_b, dst).get("status") or {}).get("lastOffsetsOperation") or {}),
                timeout=60,
            )
            assert last["reason"] == reason, last
            unchanged(reason)
            annotate(
                custom,
                team_b,
                dst,
                connector_offsets=None,
                request_id=None,
                alter_from_connector=None,
                alter_from_cluster=None,
            )
        assert "does not list namespace" in last["message"] and team_b in last["message"], last

        # The owner shares it: the copy goes through, with a backup of dst's offsets first.
        custom.patch_namespaced_custom_object(
            GROUP,
            VERSION,
            team_a,
            "kafkaconnectors",
            src,
            {"metadata": {"annotations": {f"{GROUP}/offsets-readers": team_b}}},
        )
        done = plugin(stack, "copy", src, dst, "-n", team_b, "--from-namespace", team_a)
        assert done.returncode == 0, done.stderr
        assert connect_offsets(connect, dst) == at_end
        assert any(name.startswith(f"{dst}-backup-") for name in written_configmaps(core, team_b))
        assert "backup of the previous offsets" in done.stdout
