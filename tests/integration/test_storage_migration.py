"""Issue 49's upgrade path on the real API server: objects written as v1alpha1 before the upgrade
are read, altered and deleted as v1beta1 after ``helm upgrade`` and ``connect-offsets
migrate-storage`` (docs/api-versions.md#upgrading-from-v1alpha1).

The CRDs are cluster-wide and every test of the run shares them, so "before the upgrade" cannot be
the old CRDs that serve v1alpha1 alone: the other tests (and their operators) use v1beta1 meanwhile.
It is this release's CRDs with the storage version moved back to v1alpha1, which is what matters
for storage: the API server then writes new objects to etcd as v1alpha1, exactly as a v1alpha1-only
release did (the test reads etcd to show it), and lists v1alpha1 in ``status.storedVersions``. Both
versions stay served all along, with the same schema, so no other test sees a difference; the
upgrade applies the chart's CRDs as its README says, which moves storage to v1beta1 again. The test
is ``serial`` (it changes state every test shares, the storage version, and the migration writes
every object of the cluster back) and holds the storage-version lock (tests/conftest.py), which
a session also takes to apply crds/: neither a second run of it nor a session starting meanwhile
moves the storage version under it. Whatever happens, it ends with the suite's CRDs applied. The
migration runs as a ServiceAccount granted exactly the ClusterRole docs/api-versions.md gives.
"""

from __future__ import annotations

import base64
import functools
import json
import os
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from connect_offsets.tools.storage_migration import storage_version_hash
from tests.conftest import REPO, storage_version_lock, wait_for
from tests.hack_scripts import load_hack_script
from tests.integration.chart_install import CHART, chart_operator, run, sa_kubeconfig
from tests.integration.support import (
    CLI,
    GROUP,
    annotate,
    connect_offsets,
    connect_state,
    file_source_spec,
    wait_annotation_removed,
    wait_condition,
)

pytestmark = [pytest.mark.integration, pytest.mark.serial]

OLD, NEW = "v1alpha1", "v1beta1"
KINDS = {
    "connectclusters": "ConnectCluster",
    "kafkaconnectors": "KafkaConnector",
    "kafkamirrormaker2s": "KafkaMirrorMaker2",
}


def kube_env(stack: dict[str, Any]) -> dict[str, str]:
    return {**os.environ, "KUBECONFIG": stack["kubeconfig"]}


def apply_crds(stack: dict[str, Any], documents: list[dict[str, Any]]) -> None:
    """As ``install_crds`` and the chart README do (server-side apply by kubectl), so the fields stay
    owned by the same manager."""
    text = "\n---\n".join(yaml.safe_dump(doc, sort_keys=False) for doc in documents)
    subprocess.run(
        [stack["kubectl"], "apply", "--server-side", "--force-conflicts", "-f", "-"],
        input=text.encode(),
        env=kube_env(stack),
        capture_output=True,
        check=True,
    )


def crds_in(folder: Path) -> list[dict[str, Any]]:
    return [yaml.safe_load(path.read_text()) for path in sorted(folder.glob("*.yaml"))]


def storing(documents: list[dict[str, Any]], version: str) -> list[dict[str, Any]]:
    """The same CRDs, with ``version`` as the storage version (both versions still served)."""
    out: list[dict[str, Any]] = json.loads(json.dumps(documents))
    for doc in out:
        for entry in doc["spec"]["versions"]:
            entry["storage"] = entry["name"] == version
            assert entry["served"] is True
    return out


def wait_storage(custom: Any, version: str) -> None:
    """Until discovery reports ``version`` as the storage version of all three kinds: the API server
    has rebuilt its storage for the new CRDs (what ``migrate-storage`` itself waits for)."""
    api = custom.api_client

    def switched() -> bool:
        response = api.call_api(*api.param_serialize("GET", f"/apis/{GROUP}/{version}", auth_settings=["BearerToken"]))
        resources = {r["name"]: r.get("storageVersionHash") for r in json.loads(response.read())["resources"]}
        return all(resources[plural] == storage_version_hash(GROUP, version, kind) for plural, kind in KINDS.items())

    wait_for(f"the API server to store {version}", switched, timeout=60)


def stored_versions(custom: Any) -> dict[str, list[str]]:
    api = custom.api_client
    out = {}
    for plural in KINDS:
        path = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{plural}.{GROUP}"
        response = api.call_api(*api.param_serialize("GET", path, auth_settings=["BearerToken"]))
        out[plural] = json.loads(response.read())["status"]["storedVersions"]
    return out


def etcd_api_version(stack: dict[str, Any], plural: str, namespace: str, name: str) -> str:
    """The apiVersion of the object as etcd holds it (custom resources are stored as JSON), read
    through etcd's own JSON gateway: what the API server wrote, not what it converts to on read."""
    stack_script = load_hack_script("stack")
    url = f"http://{stack_script.HOST}:{stack_script.PORTS['etcd']}/v3/kv/range"
    key = f"/registry/{GROUP}/{plural}/{namespace}/{name}".encode()
    request = urllib.request.Request(url, data=json.dumps({"key": base64.b64encode(key).decode()}).encode())
    with urllib.request.urlopen(request, timeout=10) as answer:
        (stored,) = json.load(answer)["kvs"]
    return str(json.loads(base64.b64decode(stored["value"]))["apiVersion"])


def test_objects_written_as_v1alpha1_are_read_altered_and_deleted_as_v1beta1_after_upgrade_and_migration(
    stack: dict[str, Any],
    custom: Any,
    core: Any,
    namespace: str,
    connect: httpx.Client,
    connect_url: str,
    tmp_path: Path,
    unique: str,
) -> None:
    suite_crds = crds_in(REPO / "crds")
    assert {doc["spec"]["versions"][0]["name"] for doc in suite_crds} == {NEW}
    source = tmp_path / "source.txt"
    source.write_text("".join(f"line-{i}\n" for i in range(5)))
    name, cm = f"mig-{unique}", "mig-offsets"
    with storage_version_lock(stack):
        try:
            # --- before the upgrade: the API server stores v1alpha1 --------------------------------
            apply_crds(stack, storing(suite_crds, OLD))
            wait_storage(custom, OLD)
            with chart_operator(stack, core, custom, tmp_path, [namespace], start=False) as chart:
                created = {
                    "connectclusters": ("local", {"url": connect_url}, {}),
                    "kafkaconnectors": (
                        name,
                        file_source_spec(source, f"mig-{unique}", cm),
                        {f"{GROUP}/cluster": "local"},
                    ),
                    # Bound to a ConnectCluster that does not exist: the operator runs nothing of it
                    # on Connect (MirrorMaker 2 on the shared clusters is the mirrormaker2 group's).
                    "kafkamirrormaker2s": (
                        f"mm2-{unique}",
                        {
                            "clusters": [
                                {"alias": "east", "bootstrapServers": stack["kafka_a"]},
                                {"alias": "west", "bootstrapServers": stack["kafka_b"]},
                            ],
                            "mirrors": [{"sourceCluster": "east", "targetCluster": "west", "topicsPattern": "mig-x"}],
                        },
                        {f"{GROUP}/cluster": "nowhere"},
                    ),
                }
                for plural, (obj, spec, labels) in created.items():
                    body = {
                        "apiVersion": f"{GROUP}/{OLD}",
                        "kind": KINDS[plural],
                        "metadata": {"name": obj, "labels": labels},
                        "spec": spec,
                    }
                    custom.create_namespaced_custom_object(GROUP, OLD, namespace, plural, body)
                local = not stack.get("external")  # etcd is the local stack's; a kind cluster's is not reachable
                if local:
                    for plural, (obj, _, _) in created.items():
                        assert etcd_api_version(stack, plural, namespace, obj) == f"{GROUP}/{OLD}", plural
                assert all(OLD in versions for versions in stored_versions(custom).values())
                # v1alpha1 is served, with the deprecation warning naming v1beta1 (kubectl prints it)
                listed = subprocess.run(
                    [stack["kubectl"], "get", f"kafkaconnectors.{OLD}.{GROUP}", "-n", namespace, "-o", "name"],
                    env=kube_env(stack),
                    capture_output=True,
                    text=True,
                    check=True,
                )
                assert listed.stdout.split() == [f"kafkaconnector.{GROUP}/{name}"]
                assert f"Warning: {GROUP}/{OLD} KafkaConnector is deprecated; use {GROUP}/{NEW}" in listed.stderr, (
                    listed.stderr
                )

                # migrate-storage before the new CRDs are applied: refused, nothing written
                early = subprocess.run(
                    [CLI, "migrate-storage"], env=kube_env(stack), capture_output=True, text=True, timeout=120
                )
                assert early.returncode == 5, early.stderr
                assert f"refused: CRD connectclusters.{GROUP} stores {OLD}" in early.stderr
                if local:
                    assert etcd_api_version(stack, "kafkaconnectors", namespace, name) == f"{GROUP}/{OLD}"

                # --- the upgrade: the chart's CRDs (Helm does not upgrade crds/), then helm upgrade -----
                apply_crds(stack, crds_in(CHART / "crds"))
                env = kube_env(stack)
                run(
                    [
                        stack["helm"],
                        "upgrade",
                        chart.release,
                        str(CHART),
                        "-n",
                        chart.release_namespace,
                        "--reuse-values",
                    ],
                    env,
                )
                wait_storage(custom, NEW)

                # --- the storage migration, as users run it, with the RBAC docs/api-versions.md gives ---
                migrator = documented_migrator(stack, namespace, unique, tmp_path)
                migrated = subprocess.run(
                    [CLI, "migrate-storage", "--kubeconfig", str(migrator)],
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=300,
                )
                assert migrated.returncode == 0, migrated.stderr
                lines = migrated.stdout.splitlines()
                assert [line.split(":")[0] for line in lines] == [f"{plural}.{GROUP}" for plural in KINDS]
                for line in lines:
                    # v1alpha1 was a stored version of each (asserted above): each is narrowed
                    assert line.endswith(f"-> ['{NEW}']"), line
                assert stored_versions(custom) == {plural: [NEW] for plural in KINDS}
                if local:
                    for plural, (obj, _, _) in created.items():
                        assert etcd_api_version(stack, plural, namespace, obj) == f"{GROUP}/{NEW}", plural

                # --- after: read, alter and delete as v1beta1, through the operator -----------------
                chart.operator.start()
                for plural, (obj, spec, _) in created.items():
                    read = custom.get_namespaced_custom_object(GROUP, NEW, namespace, plural, obj)
                    assert read["apiVersion"] == f"{GROUP}/{NEW}"
                    assert read["spec"] == {**spec, **read["spec"]}  # every field written as v1alpha1 is there
                wait_condition(custom, namespace, name, "Ready", reason="ConnectorRunning")
                # a spec change as v1beta1
                custom.patch_namespaced_custom_object(
                    GROUP, NEW, namespace, "kafkaconnectors", name, {"spec": {"state": "stopped"}}
                )
                wait_condition(custom, namespace, name, "Ready", reason="ConnectorStopped")
                assert connect_state(connect, name) == "STOPPED"
                # an offsets alter through the operator, on the object written as v1alpha1
                offsets = {"offsets": [{"partition": {"filename": str(source)}, "offset": {"position": 6}}]}
                core.create_namespaced_config_map(
                    namespace, {"metadata": {"name": cm}, "data": {"offsets.json": json.dumps(offsets)}}
                )
                annotate(custom, namespace, name, connector_offsets="alter")
                wait_annotation_removed(custom, namespace, name)
                body = custom.get_namespaced_custom_object(GROUP, NEW, namespace, "kafkaconnectors", name)
                assert body["apiVersion"] == f"{GROUP}/{NEW}"
                assert body["status"]["lastOffsetsOperation"]["operation"] == "alter"
                assert body["status"]["lastOffsetsOperation"]["result"] == "Succeeded"
                assert connect_offsets(connect, name) == offsets["offsets"]
                mirror = f"mm2-{unique}"
                custom.patch_namespaced_custom_object(
                    GROUP,
                    NEW,
                    namespace,
                    "kafkamirrormaker2s",
                    mirror,
                    {
                        "spec": {
                            "mirrors": [{"sourceCluster": "east", "targetCluster": "west", "topicsPattern": "mig-y"}]
                        }
                    },
                )
                read = custom.get_namespaced_custom_object(GROUP, NEW, namespace, "kafkamirrormaker2s", mirror)
                assert read["spec"]["mirrors"][0]["topicsPattern"] == "mig-y"
                assert read["metadata"]["generation"] == 2
                # delete as v1beta1: the operator deletes the connector from Connect and lets go
                for plural in ("kafkaconnectors", "kafkamirrormaker2s", "connectclusters"):
                    custom.delete_namespaced_custom_object(GROUP, NEW, namespace, plural, created[plural][0])
                for plural, (obj, _, _) in created.items():
                    wait_for(
                        f"{plural} {obj} deleted",
                        functools.partial(absent, custom, namespace, plural, obj),
                        timeout=120,
                    )
                assert connect.get(f"/connectors/{name}").status_code == 404
                assert stored_versions(custom) == {plural: [NEW] for plural in KINDS}
        finally:
            # The suite's CRDs, whatever happened above: storage back on v1beta1 for every other test.
            apply_crds(stack, suite_crds)
            wait_storage(custom, NEW)
            connect.delete(f"/connectors/{name}")
            for cluster_scoped in (f"clusterrolebinding/migrator-{unique}", f"clusterrole/migrator-{unique}"):
                subprocess.run(
                    [stack["kubectl"], "delete", cluster_scoped, "--ignore-not-found"],
                    env=kube_env(stack),
                    capture_output=True,
                )


def documented_migrator(stack: dict[str, Any], namespace: str, unique: str, tmp_path: Path) -> Path:
    """A kubeconfig of a ServiceAccount granted exactly the ClusterRole of docs/api-versions.md
    (under a name of this test's), so a permission the docs forget fails the migration here."""
    text = (REPO / "docs" / "api-versions.md").read_text()
    section = text[text.index("## Storage migration") :]
    block = section[section.index("```yaml\n") + len("```yaml\n") :]
    role = yaml.safe_load(block[: block.index("```")])
    assert role["kind"] == "ClusterRole"
    role["metadata"]["name"] = f"migrator-{unique}"
    account = f"migrator-{unique}"
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": f"migrator-{unique}"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": f"migrator-{unique}"},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
    }
    service_account = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": account, "namespace": namespace},
    }
    env = kube_env(stack)
    subprocess.run(
        [stack["kubectl"], "apply", "-f", "-"],
        input=yaml.safe_dump_all([role, binding, service_account]),
        text=True,
        env=env,
        capture_output=True,
        check=True,
    )
    token = run([stack["kubectl"], "create", "token", account, "-n", namespace, "--duration", "1h"], env).strip()
    return sa_kubeconfig(tmp_path / "migrator-kubeconfig", stack["apiserver"], token)


def absent(custom: Any, namespace: str, plural: str, name: str) -> bool:
    try:
        custom.get_namespaced_custom_object(GROUP, NEW, namespace, plural, name)
    except Exception as error:  # kubernetes.client.ApiException
        return getattr(error, "status", None) == 404
    return False
