"""Unit tests for the Helm chart (``charts/connect-offsets-operator``), ``deploy/`` and its samples.

Static checks only: ``helm lint`` and ``helm template`` with the helm built by ``make go-tools``
(``$CONNECT_OFFSETS_CACHE/bin/helm``, default ``~/.cache/connect-offsets/bin/helm``); no cluster.

Covers:
* drift: the chart's ``crds/`` are byte-identical copies of ``crds/``, and
  ``deploy/connect-offsets-operator.yaml`` equals a fresh ``helm template`` render (both fixed by
  ``hack/render-deploy.sh``);
* ``helm lint`` and ``helm lint --strict`` pass;
* default values: Deployment (image, args ``-A``/``--liveness``/``--metrics-port``/``--log-format``,
  drift interval env, probes, pod and container security contexts, writable ``/tmp``,
  RollingUpdate), the ``<fullname>-metrics`` Service, standard labels on every object;
* RBAC: the default ClusterRole grants exactly the documented rules (Secrets ``get`` only, no
  ``*``, no delete, no leases), every rule carries a comment;
* ``watchNamespaces={a,b}``: ``-n a -n b``, a Role and RoleBinding in each, and the only ClusterRole
  reads CRDs and namespace names, never ConfigMaps or Secrets;
* Leases, for every replica and shard count: ``--leader-election`` with the ``leaderElection``
  timings and prefix, ``POD_NAME``/``POD_NAMESPACE`` from the downward API, RollingUpdate, and one
  Role ``<fullname>-leases`` in the release namespace with exactly get/list/watch/create/update/delete
  on ``leases`` (nothing about leases anywhere else); timings out of order refused at render time;
* nothing of kopf peering (``kopf.dev``, ``--peering``, KopfPeering objects or CRDs) in any render;
* ``image.tag``, ``logFormat``, ``metrics.enabled=false``, the ServiceMonitor;
* ``values.schema.json`` rejects unknown values (top level and nested) and a bad ``logFormat``;
* ``deploy/samples``: each document parses, has apiVersion/kind/metadata.name, and our resources use
  only fields of the matching CRD schema (top-level spec properties, required ones, and recursively).
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.chart import (
    CHART,
    NAMESPACE,
    RELEASE,
    REPO,
    container,
    objects,
    one,
    render,
    render_text,
    run_helm,
)

pytestmark = pytest.mark.unit

CRDS_DIR = REPO / "crds"
DEPLOY = REPO / "deploy" / "connect-offsets-operator.yaml"
SAMPLES = REPO / "deploy" / "samples"
FIX = "run hack/render-deploy.sh"
IMAGE = "ghcr.io/connect-offsets/connect-offsets-operator"
STANDARD_LABELS = {
    "app.kubernetes.io/name",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/part-of",
}
#: The default ClusterRole, rule by rule: (apiGroup, resource) -> verbs.
EXPECTED_CLUSTER_RULES = {
    ("connect-offsets.io", "connectclusters"): {"get", "list", "watch", "patch", "update"},
    ("connect-offsets.io", "kafkaconnectors"): {"get", "list", "watch", "patch", "update"},
    ("connect-offsets.io", "kafkamirrormaker2s"): {"get", "list", "watch", "patch", "update"},
    ("connect-offsets.io", "connectclusters/status"): {"get", "patch", "update"},
    ("connect-offsets.io", "kafkaconnectors/status"): {"get", "patch", "update"},
    ("connect-offsets.io", "kafkamirrormaker2s/status"): {"get", "patch", "update"},
    ("", "configmaps"): {"get", "list", "watch", "create", "patch", "update", "delete"},
    ("", "secrets"): {"get"},
    ("", "events"): {"create", "patch"},
    ("events.k8s.io", "events"): {"create", "patch"},
    ("apiextensions.k8s.io", "customresourcedefinitions"): {"list", "watch"},
}
#: The Lease Role in the release namespace (issue 44: a Lease per ConnectCluster; no patch, every
#: write is a PUT with the resourceVersion read).
EXPECTED_LEASE_RULES = {
    ("coordination.k8s.io", "leases"): {"get", "list", "watch", "create", "update", "delete"},
}
#: Value sets covering every shape of the chart: replica counts, shard counts, watched namespaces.
SHAPES = [
    (),
    ("replicaCount=0",),
    ("replicaCount=2",),
    ("replicaCount=3", "watchNamespaces={a,b}"),
    ("sharding.shards=3",),
    ("sharding.shards=3", "replicaCount=2", "watchNamespaces={a}"),
]
SAMPLE_FILES = {
    "connectcluster-basic-auth.yaml",
    "kafkaconnector-file-source.yaml",
    "kafkaconnector-file-sink.yaml",
    "kafkamirrormaker2.yaml",
}


def has_sequence(args: list[str], expected: list[str]) -> bool:
    return any(args[i : i + len(expected)] == expected for i in range(len(args) - len(expected) + 1))


def rule_map(role: dict[str, Any]) -> dict[tuple[str, str], set[str]]:
    """(apiGroup, resource) -> verbs of a Role or ClusterRole; a pair granted twice is an error."""
    granted: dict[tuple[str, str], set[str]] = {}
    for rule in role.get("rules", []):
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                key = (group, resource)
                assert key not in granted, f"{role['metadata']['name']}: {key} granted twice"
                granted[key] = set(rule["verbs"])
    return granted


def crd_schemas() -> dict[str, tuple[str, dict[str, Any]]]:
    """kind -> (apiVersion, openAPIV3Schema of the spec) from crds/*.yaml."""
    schemas: dict[str, tuple[str, dict[str, Any]]] = {}
    for path in sorted(CRDS_DIR.glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        version = next(v for v in crd["spec"]["versions"] if v.get("storage"))
        api_version = f"{crd['spec']['group']}/{version['name']}"
        schemas[crd["spec"]["names"]["kind"]] = (
            api_version,
            version["schema"]["openAPIV3Schema"]["properties"]["spec"],
        )
    return schemas


def unknown_fields(value: Any, schema: dict[str, Any], path: str) -> list[str]:
    """Paths in ``value`` that the structural ``schema`` does not declare."""
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    problems: list[str] = []
    if isinstance(value, dict):
        properties = schema.get("properties")
        additional = schema.get("additionalProperties")
        for key, item in value.items():
            if properties is not None and key in properties:
                problems += unknown_fields(item, properties[key], f"{path}.{key}")
            elif isinstance(additional, dict):
                problems += unknown_fields(item, additional, f"{path}.{key}")
            else:
                problems.append(f"{path}.{key}")
    elif isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            problems += unknown_fields(item, schema["items"], f"{path}[{index}]")
    return problems


# --- drift ---------------------------------------------------------------------------------------


def test_chart_crds_are_byte_identical_copies() -> None:
    sources = sorted(p.name for p in CRDS_DIR.glob("*.yaml"))
    copies = sorted(p.name for p in (CHART / "crds").glob("*.yaml"))
    assert sources == ["connectclusters.yaml", "kafkaconnectors.yaml", "kafkamirrormaker2s.yaml"]
    assert copies == sources, f"chart crds/ holds {copies}, crds/ holds {sources}: {FIX}"
    for name in sources:
        assert (CHART / "crds" / name).read_bytes() == (CRDS_DIR / name).read_bytes(), (
            f"charts/connect-offsets-operator/crds/{name} differs from crds/{name}: {FIX}"
        )


def test_deploy_manifest_matches_a_fresh_render() -> None:
    assert DEPLOY.is_file(), f"{DEPLOY.relative_to(REPO)} is missing: {FIX}"
    text = DEPLOY.read_text()
    header, separator, body = text.partition("\n---\n")
    assert separator, f"{DEPLOY.relative_to(REPO)} has no rendered documents: {FIX}"
    header_lines = header.splitlines()
    assert header_lines[0].startswith("# Generated by hack/render-deploy.sh"), header_lines[0]
    assert all(line.startswith("#") for line in header_lines), "the header is comments only"
    assert "--namespace connect-offsets --include-crds" in header
    fresh = render_text(include_crds=True)
    assert "---\n" + body == fresh, f"{DEPLOY.relative_to(REPO)} is out of date: {FIX}"
    kinds = [doc["kind"] for doc in yaml.safe_load_all(body) if doc]
    assert kinds.count("CustomResourceDefinition") == 3
    assert {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Service", "Deployment"} <= set(kinds)


# --- lint ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("strict", [False, True], ids=["lint", "lint-strict"])
def test_helm_lint_is_clean(strict: bool) -> None:
    args = ["lint", "charts/connect-offsets-operator", *(["--strict"] if strict else [])]
    result = run_helm(*args)
    assert result.returncode == 0, f"helm {' '.join(args)}:\n{result.stdout}\n{result.stderr}"
    assert "[WARNING]" not in result.stdout and "[ERROR]" not in result.stdout, result.stdout


# --- default values ------------------------------------------------------------------------------


def test_default_deployment() -> None:
    docs = render()
    deployment = one(docs, "Deployment")
    assert deployment["metadata"]["name"] == RELEASE
    assert deployment["metadata"]["namespace"] == NAMESPACE
    assert deployment["spec"]["replicas"] == 1
    # Leases keep old and new pods off each other's clusters: no Recreate, even with one replica.
    assert deployment["spec"]["strategy"] == {"type": "RollingUpdate"}
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == RELEASE
    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 65532,
        "runAsGroup": 65532,
        "fsGroup": 65532,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    main = container(docs)
    assert main["image"] == f"{IMAGE}:0.1.0"
    assert main["imagePullPolicy"] == "IfNotPresent"
    assert main["command"] == ["connect-offsets-operator"]
    args = main["args"]
    assert "-A" in args and "-n" not in args
    assert "--peering" not in args and "--priority" not in args
    assert "--leader-election" in args
    assert has_sequence(args, ["--lease-prefix", RELEASE])
    assert has_sequence(args, ["--lease-duration", "15"])
    assert has_sequence(args, ["--renew-deadline", "10"])
    assert has_sequence(args, ["--retry-period", "2"])
    assert has_sequence(args, ["--liveness", "http://0.0.0.0:8080/healthz"])
    assert has_sequence(args, ["--metrics-port", "9090"])
    assert has_sequence(args, ["--log-format", "text"])
    assert {"name": "CONNECT_OFFSETS_DRIFT_INTERVAL", "value": "30"} in main["env"]
    security = main["securityContext"]
    assert security["allowPrivilegeEscalation"] is False
    assert security["readOnlyRootFilesystem"] is True
    assert security["capabilities"] == {"drop": ["ALL"]}
    # Sized from bench/README.md: a restore of a maxDocumentBytes document (256 MiB) needs about
    # 105 MiB + 5.5 x 256 MiB (test_chart_production.py checks the formula against the limit).
    assert main["resources"] == {
        "requests": {"cpu": "100m", "memory": "256Mi"},
        "limits": {"cpu": "1", "memory": "2Gi"},
    }
    assert {"name": "CONNECT_OFFSETS_MAX_DOCUMENT_BYTES", "value": "268435456"} in main["env"]
    ports = {port["name"]: port["containerPort"] for port in main["ports"]}
    assert ports == {"health": 8080, "metrics": 9090}
    for probe in ("livenessProbe", "readinessProbe"):
        assert main[probe]["httpGet"] == {"path": "/healthz", "port": "health"}, probe
    mounts = {mount["name"]: mount["mountPath"] for mount in main["volumeMounts"]}
    assert mounts == {"tmp": "/tmp"}
    assert pod["volumes"] == [{"name": "tmp", "emptyDir": {}}]
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert selector.items() <= deployment["spec"]["template"]["metadata"]["labels"].items()


def test_default_metrics_service_and_labels() -> None:
    docs = render()
    service = one(docs, "Service")
    assert service["metadata"]["name"] == f"{RELEASE}-metrics"
    assert service["spec"]["ports"] == [{"name": "metrics", "port": 9090, "targetPort": "metrics", "protocol": "TCP"}]
    pod_labels = one(docs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert not objects(docs, "ServiceMonitor")
    for doc in docs:
        labels = doc["metadata"].get("labels", {})
        assert labels.keys() >= STANDARD_LABELS, f"{doc['kind']} {doc['metadata']['name']}: {labels}"
        assert labels["app.kubernetes.io/part-of"] == "connect-offsets-operator"
        assert labels["app.kubernetes.io/version"] == "0.1.0"
    kinds = {doc["kind"] for doc in docs}
    assert kinds == {
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Service",
        "Deployment",
    }


def test_default_cluster_role_is_least_privilege() -> None:
    docs = render()
    role = one(docs, "ClusterRole")
    granted = rule_map(role)
    assert granted == EXPECTED_CLUSTER_RULES
    secrets = [rule for rule in role["rules"] if "secrets" in rule["resources"]]
    assert [rule["verbs"] for rule in secrets] == [["get"]]
    for rule in role["rules"]:
        for field in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule[field], rule
        # delete only on ConfigMaps (the operator's own backups and shards), never deletecollection
        assert "delete" not in rule["verbs"] or rule["resources"] == ["configmaps"], rule
        assert "deletecollection" not in rule["verbs"], rule
        assert "leases" not in rule["resources"] and "coordination.k8s.io" not in rule["apiGroups"], rule
    binding = one(docs, "ClusterRoleBinding")
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": RELEASE}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": RELEASE, "namespace": NAMESPACE}]
    # The only Role is the Lease Role (test_lease_role_is_the_only_lease_grant).
    assert [role["metadata"]["name"] for role in objects(docs, "Role")] == [f"{RELEASE}-leases"]
    assert [b["metadata"]["name"] for b in objects(docs, "RoleBinding")] == [f"{RELEASE}-leases"]


@pytest.mark.parametrize(
    "values", [(), ("watchNamespaces={a,b}",), ("replicaCount=2",), ("replicaCount=2", "watchNamespaces={a}")]
)
def test_every_rbac_rule_has_a_comment(values: tuple[str, ...]) -> None:
    lines = [line for line in render_text(*values).splitlines() if line.strip()]
    rules = 0
    for index, line in enumerate(lines):
        if line.startswith("- apiGroups:"):
            rules += 1
            assert lines[index - 1].lstrip().startswith("#"), f"rule without a comment: {line} ({values})"
    assert rules >= 2


# --- watched namespaces --------------------------------------------------------------------------


def test_watch_namespaces_uses_roles_per_namespace() -> None:
    docs = render("watchNamespaces={a,b}")
    args = container(docs)["args"]
    assert "-A" not in args
    assert has_sequence(args, ["-n", "a", "-n", "b"])
    records, leases = owner_records_role(docs), lease_role(docs)
    roles = {role["metadata"]["namespace"]: role for role in objects(docs, "Role") if role not in (records, leases)}
    assert set(roles) == {"a", "b"}
    for role in roles.values():
        granted = rule_map(role)
        namespaced = {k: v for k, v in EXPECTED_CLUSTER_RULES.items() if k[0] != "apiextensions.k8s.io"}
        assert granted == namespaced
    bindings = {
        binding["metadata"]["namespace"]: binding
        for binding in objects(docs, "RoleBinding")
        if binding["roleRef"]["name"] not in (records["metadata"]["name"], leases["metadata"]["name"])
    }
    assert set(bindings) == {"a", "b"}
    for namespace, binding in bindings.items():
        assert binding["roleRef"]["kind"] == "Role"
        assert binding["roleRef"]["name"] == roles[namespace]["metadata"]["name"]
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": RELEASE, "namespace": NAMESPACE}]
    cluster_roles = objects(docs, "ClusterRole")
    assert len(cluster_roles) == 1
    cluster_granted = rule_map(cluster_roles[0])
    assert cluster_granted == {
        ("apiextensions.k8s.io", "customresourcedefinitions"): {"list", "watch"},
        ("", "namespaces"): {"list", "watch"},
    }
    for cluster_role in cluster_roles:
        resources = {resource for rule in cluster_role["rules"] for resource in rule["resources"]}
        assert not resources & {"configmaps", "secrets"}, cluster_role["metadata"]["name"]
    assert one(docs, "ClusterRoleBinding")["roleRef"]["name"] == cluster_roles[0]["metadata"]["name"]


def lease_role(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """The Role that lets the operator keep its Leases in the release namespace (every install)."""
    [role] = [r for r in objects(docs, "Role") if r["metadata"]["name"].endswith("-leases")]
    return role


def owner_records_role(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """The Role that lets the operator keep owner records in the release namespace (namespaced install)."""
    [role] = [r for r in objects(docs, "Role") if r["metadata"]["name"].endswith("-owner-records")]
    return role


def test_owner_records_live_in_the_release_namespace() -> None:
    """Tenants cannot write where the operator keeps who last created each connector name."""
    env = {e["name"]: e.get("value") for e in container(render())["env"]}
    assert env["CONNECT_OFFSETS_OWNER_RECORDS_NAMESPACE"] == NAMESPACE
    docs = render("watchNamespaces={a,b}")
    role = owner_records_role(docs)
    assert role["metadata"]["namespace"] == NAMESPACE
    assert rule_map(role) == {("", "configmaps"): {"get", "create", "patch"}}
    [binding] = [b for b in objects(docs, "RoleBinding") if b["roleRef"]["name"] == role["metadata"]["name"]]
    assert binding["metadata"]["namespace"] == NAMESPACE
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": RELEASE, "namespace": NAMESPACE}]
    # Watching every namespace, the ClusterRole's ConfigMap rule covers the release namespace.
    assert not [r for r in objects(render(), "Role") if r["metadata"]["name"].endswith("-owner-records")]


# --- Leases: several replicas and shards ---------------------------------------------------------


@pytest.mark.parametrize("values", SHAPES, ids=lambda values: ",".join(values) or "defaults")
def test_leader_election_for_every_replica_and_shard_count(values: tuple[str, ...]) -> None:
    """Issue 44: every pod holds a Lease per ConnectCluster it works on, a single replica too (that is
    what makes a rolling update safe), so the flags and the downward API are always there."""
    docs = render(*values)
    main = container(docs)
    args = main["args"]
    assert args.count("--leader-election") == 1
    for flag, value in (
        ("--lease-prefix", RELEASE),
        ("--lease-duration", "15"),
        ("--renew-deadline", "10"),
        ("--retry-period", "2"),
    ):
        assert has_sequence(args, [flag, value]), (flag, args)
    assert "--lease-namespace" not in args  # $POD_NAMESPACE, the release namespace: where the Role is
    env = {e["name"]: e for e in main["env"]}
    assert env["POD_NAME"] == {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
    assert env["POD_NAMESPACE"] == {
        "name": "POD_NAMESPACE",
        "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
    }
    for deployment in objects(docs, "Deployment"):
        assert deployment["spec"]["strategy"] == {"type": "RollingUpdate"}, values
    for statefulset in objects(docs, "StatefulSet"):
        assert statefulset["spec"]["podManagementPolicy"] == "Parallel"


@pytest.mark.parametrize("values", SHAPES, ids=lambda values: ",".join(values) or "defaults")
def test_lease_role_is_the_only_lease_grant(values: tuple[str, ...]) -> None:
    docs = render(*values)
    role = lease_role(docs)
    assert role["metadata"]["name"] == f"{RELEASE}-leases"
    assert role["metadata"]["namespace"] == NAMESPACE
    assert rule_map(role) == EXPECTED_LEASE_RULES  # exactly these verbs: no patch, no deletecollection
    [binding] = [b for b in objects(docs, "RoleBinding") if b["roleRef"]["name"] == role["metadata"]["name"]]
    assert binding["metadata"]["namespace"] == NAMESPACE
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": f"{RELEASE}-leases"}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": RELEASE, "namespace": NAMESPACE}]
    for other in objects(docs, "Role") + objects(docs, "ClusterRole"):
        if other is role:
            continue
        for rule in other["rules"]:
            assert "coordination.k8s.io" not in rule["apiGroups"] and "leases" not in rule["resources"], other


def test_lease_timings_and_prefix_reach_the_operator() -> None:
    args = container(
        render(
            "leaderElection.leaseDuration=30",
            "leaderElection.renewDeadline=20",
            "leaderElection.retryPeriod=4",
            "leaderElection.leasePrefix=team-a-offsets",
        )
    )["args"]
    assert has_sequence(args, ["--lease-duration", "30"])
    assert has_sequence(args, ["--renew-deadline", "20"])
    assert has_sequence(args, ["--retry-period", "4"])
    assert has_sequence(args, ["--lease-prefix", "team-a-offsets"])
    # The default prefix is the release's full name: two releases in one namespace never share Leases.
    assert has_sequence(
        container(render("fullnameOverride=other-offsets"))["args"], ["--lease-prefix", "other-offsets"]
    )


@pytest.mark.parametrize(
    "values",
    [
        ("leaderElection.retryPeriod=10",),
        ("leaderElection.renewDeadline=15",),
        ("leaderElection.leaseDuration=5",),
    ],
)
def test_lease_timings_out_of_order_are_refused_at_render_time(values: tuple[str, ...]) -> None:
    """The operator refuses to start unless retry period < renew deadline < lease duration."""
    result = run_helm(
        "template", RELEASE, "charts/connect-offsets-operator", *[a for v in values for a in ("--set", v)]
    )
    assert result.returncode != 0, values
    assert "retryPeriod" in result.stderr and "< renewDeadline" in result.stderr, result.stderr


@pytest.mark.parametrize("values", SHAPES, ids=lambda values: ",".join(values) or "defaults")
def test_nothing_of_kopf_peering_is_rendered(values: tuple[str, ...]) -> None:
    """kopf peering is gone (issue 44): no kopf.dev CRDs, objects or rules, no --peering."""
    text = render_text(*values, include_crds=True)
    assert "kopf.dev" not in text
    assert "KopfPeering" not in text and "kopfpeering" not in text
    assert "--peering" not in text
    docs = [doc for doc in yaml.safe_load_all(text) if doc]
    crds = {doc["metadata"]["name"] for doc in objects(docs, "CustomResourceDefinition")}
    assert crds == {
        "connectclusters.connect-offsets.io",
        "kafkaconnectors.connect-offsets.io",
        "kafkamirrormaker2s.connect-offsets.io",
    }
    for doc in docs:
        assert not doc["apiVersion"].startswith("kopf.dev/"), doc["kind"]
        assert "helm.sh/hook" not in doc["metadata"].get("annotations", {}), doc["kind"]


def test_replicas_keep_the_cluster_role_and_roll() -> None:
    """More replicas change the pod count, nothing of the RBAC (no peering rules any more)."""
    docs = render("replicaCount=2")
    deployment = one(docs, "Deployment")
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["strategy"] == {"type": "RollingUpdate"}
    assert rule_map(one(docs, "ClusterRole")) == EXPECTED_CLUSTER_RULES


def test_workers_and_cluster_workers_reach_the_operator() -> None:
    assert has_sequence(container(render())["args"], ["--workers", "8"])
    assert "--cluster-workers" not in container(render())["args"]
    args = container(render("workers=16", "clusterWorkers=4"))["args"]
    assert has_sequence(args, ["--workers", "16"]) and has_sequence(args, ["--cluster-workers", "4"])


def test_shards_are_stateful_sets() -> None:
    """Issue 35: three shards of two pods each. Issue 44: the pods of a shard split its clusters
    through their Leases, one per ConnectCluster. Issue 49: one StatefulSet per shard, its pods
    labelled with their shard and run with its index, so each shard has a selector of its own."""
    docs = render("sharding.shards=3", "replicaCount=2")
    assert not objects(docs, "Deployment")
    statefulsets = objects(docs, "StatefulSet")
    assert [s["metadata"]["name"] for s in statefulsets] == [f"{RELEASE}-shard-{i}" for i in range(3)]
    for shard, statefulset in enumerate(statefulsets):
        assert statefulset["spec"]["replicas"] == 2
        assert statefulset["spec"]["podManagementPolicy"] == "Parallel"
        service = next(
            s for s in objects(docs, "Service") if s["metadata"]["name"] == statefulset["spec"]["serviceName"]
        )
        assert service["spec"]["clusterIP"] == "None"
        assert service["spec"]["selector"].items() <= statefulset["spec"]["template"]["metadata"]["labels"].items()
        selector = statefulset["spec"]["selector"]["matchLabels"]
        assert selector["connect-offsets.io/shard"] == str(shard)
        assert selector.items() <= statefulset["spec"]["template"]["metadata"]["labels"].items()
        [main] = statefulset["spec"]["template"]["spec"]["containers"]
        args = main["args"]
        assert has_sequence(args, ["--shard-count", "3"]) and has_sequence(args, ["--shard-index", str(shard)])
        assert "--leader-election" in args and "--peering" not in args
        env = {e["name"]: e for e in main["env"]}
        assert "CONNECT_OFFSETS_POD_INDEX" not in env  # the index is the StatefulSet's, not the pod's
        assert {"POD_NAME", "POD_NAMESPACE"} <= set(env)


def test_one_shard_is_the_deployment() -> None:
    docs = render("sharding.shards=1")
    assert one(docs, "Deployment") and not objects(docs, "StatefulSet")
    assert "--shard-count" not in container(docs)["args"]


# --- other values --------------------------------------------------------------------------------


def test_image_tag_and_log_format() -> None:
    main = container(render("image.tag=x", "logFormat=json", "image.pullPolicy=Always"))
    assert main["image"] == f"{IMAGE}:x"
    assert main["imagePullPolicy"] == "Always"
    assert has_sequence(main["args"], ["--log-format", "json"])


def test_metrics_disabled() -> None:
    docs = render("metrics.enabled=false", "metrics.serviceMonitor.enabled=true")
    main = container(docs)
    assert "--metrics-port" not in main["args"]
    assert [port["name"] for port in main["ports"]] == ["health"]
    assert not objects(docs, "Service") and not objects(docs, "ServiceMonitor")


def test_service_monitor() -> None:
    docs = render("metrics.serviceMonitor.enabled=true", "metrics.serviceMonitor.labels.release=prom")
    monitor = one(docs, "ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "prom"
    assert monitor["spec"]["endpoints"] == [{"port": "metrics", "path": "/metrics", "interval": "30s"}]
    service = one(docs, "Service")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()


def test_drift_interval_and_extra_env() -> None:
    main = container(render("driftIntervalSeconds=5", "extraEnv[0].name=FOO", "extraEnv[0].value=bar"))
    assert {"name": "CONNECT_OFFSETS_DRIFT_INTERVAL", "value": "5"} in main["env"]
    assert {"name": "FOO", "value": "bar"} in main["env"]


def test_credentials_settings_reach_the_env() -> None:
    defaults = container(render())["env"]
    assert {"name": "CONNECT_OFFSETS_ALLOW_PLAINTEXT_CREDENTIALS", "value": "false"} in defaults
    assert {"name": "CONNECT_OFFSETS_ALLOWED_HOSTS", "value": ""} in defaults
    main = container(render("credentials.allowPlaintext=true", "allowedHosts={connect.svc:8083,*.kafka.svc,[::1]}"))
    assert {"name": "CONNECT_OFFSETS_ALLOW_PLAINTEXT_CREDENTIALS", "value": "true"} in main["env"]
    assert {"name": "CONNECT_OFFSETS_ALLOWED_HOSTS", "value": "connect.svc:8083,*.kafka.svc,[::1]"} in main["env"]


# --- values.schema.json --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("unknownValue=1", "additional properties 'unknownValue' not allowed"),
        ("metrics.unknown=1", "additional properties 'unknown' not allowed"),
        ("logFormat=xml", "logFormat"),
        ("replicaCount=-1", "replicaCount"),
        ("workers=0", "workers"),
        ("sharding.shards=0", "shards"),
        ("sharding.other=1", "additional properties 'other' not allowed"),
        ("driftIntervalSeconds=0", "driftIntervalSeconds"),
        ("watchNamespaces={Not_A_Namespace}", "watchNamespaces"),
        ("credentials.allowPlaintext=maybe", "allowPlaintext"),
        ("credentials.other=true", "additional properties 'other' not allowed"),
        ("allowedHosts={https://connect.svc}", "allowedHosts"),
        ("allowedHosts={a*b.svc}", "allowedHosts"),
        ("leaderElection.leaseDuration=0", "leaseDuration"),
        ("leaderElection.renewDeadline=-1", "renewDeadline"),
        ("leaderElection.retryPeriod=0", "retryPeriod"),
        ("leaderElection.leasePrefix=Not_A_Prefix", "leasePrefix"),
        ("leaderElection.other=1", "additional properties 'other' not allowed"),
        # kopf peering is gone: a values file still setting it is refused, not silently ignored.
        ("peering.createCRDs=true", "additional properties 'peering' not allowed"),
    ],
)
def test_schema_rejects_bad_values(value: str, message: str) -> None:
    result = run_helm("template", RELEASE, "charts/connect-offsets-operator", "--set", value)
    assert result.returncode != 0, f"--set {value} was accepted"
    assert "schema" in result.stderr and message in result.stderr, result.stderr


def test_schema_is_draft_07_and_closed() -> None:
    schema = yaml.safe_load((CHART / "values.schema.json").read_text())
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    assert schema["additionalProperties"] is False
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert set(values) <= set(schema["properties"])
    assert "peering" not in schema["properties"]
    for key in (
        "image",
        "metrics",
        "health",
        "serviceAccount",
        "leaderElection",
        "sharding",
        "podDisruptionBudget",
        "spread",
    ):
        assert schema["properties"][key]["additionalProperties"] is False, key
    assert schema["properties"]["metrics"]["properties"]["serviceMonitor"]["additionalProperties"] is False


# --- samples -------------------------------------------------------------------------------------


def test_samples_exist() -> None:
    assert {path.name for path in SAMPLES.glob("*.yaml")} == SAMPLE_FILES


@pytest.mark.parametrize("name", sorted(SAMPLE_FILES))
def test_sample_documents_match_the_crds(name: str) -> None:
    schemas = crd_schemas()
    docs = [doc for doc in yaml.safe_load_all((SAMPLES / name).read_text()) if doc is not None]
    assert docs, name
    ours = 0
    for doc in docs:
        assert isinstance(doc, dict), name
        assert doc.get("apiVersion") and doc.get("kind"), f"{name}: {doc}"
        assert doc.get("metadata", {}).get("name"), f"{name}: {doc['kind']} without metadata.name"
        if doc["kind"] not in schemas:
            assert not doc["apiVersion"].startswith("connect-offsets.io/"), f"{name}: unknown kind {doc['kind']}"
            continue
        ours += 1
        api_version, spec_schema = schemas[doc["kind"]]
        assert doc["apiVersion"] == api_version, name
        spec = doc["spec"]
        top_level = set(spec_schema["properties"])
        assert set(spec) <= top_level, f"{name}: spec keys {sorted(set(spec) - top_level)} are not in the CRD"
        assert set(spec_schema.get("required", [])) <= set(spec), f"{name}: required spec keys missing"
        assert unknown_fields(spec, spec_schema, "spec") == [], name
        if doc["kind"] != "ConnectCluster":
            assert doc["metadata"].get("labels", {}).get("connect-offsets.io/cluster"), f"{name}: no cluster label"
    assert ours >= 1, f"{name} has no connect-offsets.io resource"


# --------------------------------------------------------------------------- shared-cluster scheduling


def test_replicas_get_a_pod_disruption_budget_and_a_single_pod_none() -> None:
    assert objects(render(), "PodDisruptionBudget") == []  # one pod with a PDB would block every drain
    pdb = one(render("replicaCount=3", "podDisruptionBudget.minAvailable=2"), "PodDisruptionBudget")
    assert pdb["spec"]["minAvailable"] == 2
    assert pdb["metadata"]["name"] == RELEASE
    deployment = one(render("replicaCount=3"), "Deployment")
    assert pdb["spec"]["selector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
    assert objects(render("replicaCount=2", "podDisruptionBudget.enabled=false"), "PodDisruptionBudget") == []


def test_image_digest_replaces_the_tag() -> None:
    digest = "sha256:" + "0123456789abcdef" * 4
    assert container(render(f"image.digest={digest}", "image.tag=ignored"))["image"] == f"{IMAGE}@{digest}"
    result = run_helm("template", RELEASE, CHART, "--set", "image.digest=latest")
    assert result.returncode != 0 and "digest" in result.stderr


def test_priority_class_and_topology_spread_constraints_reach_the_pod() -> None:
    pod = one(
        render(
            "priorityClassName=system-cluster-critical",
            "topologySpreadConstraints[0].maxSkew=1",
            "topologySpreadConstraints[0].topologyKey=topology.kubernetes.io/zone",
            "topologySpreadConstraints[0].whenUnsatisfiable=ScheduleAnyway",
        ),
        "Deployment",
    )["spec"]["template"]["spec"]
    assert pod["priorityClassName"] == "system-cluster-critical"
    assert pod["topologySpreadConstraints"] == [
        {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway"}
    ]
    defaults = one(render(), "Deployment")["spec"]["template"]["spec"]
    assert "priorityClassName" not in defaults
    # The chart's own zone spread (test_chart_production.py), replaced by the values' list above.
    assert [c["topologyKey"] for c in defaults["topologySpreadConstraints"]] == ["topology.kubernetes.io/zone"]


def test_metrics_and_health_on_one_port_are_refused_at_render_time() -> None:
    result = run_helm("template", RELEASE, CHART, "--set", "health.port=9090")
    assert result.returncode != 0
    assert "metrics.port and health.port are both 9090" in result.stderr
    assert (
        run_helm("template", RELEASE, CHART, "--set", "health.port=9090", "--set", "metrics.enabled=false").returncode
        == 0
    )


def test_the_sizing_table_quotes_the_benchmarks() -> None:
    """The chart README's memory figures are the ones `make bench` last measured."""
    import re

    sizing = (REPO / "charts" / "connect-offsets-operator" / "README.md").read_text().split("## Sizing", 1)[1]
    bench = (REPO / "bench" / "README.md").read_text()
    large = bench.split("<!-- bench:operator_large_offsets:start -->", 1)[1].split("end -->", 1)[0]
    for step in ("list", "alter", "restore"):
        measured = re.search(rf"^\| {step} \| [0-9.]+ \| (\d+) \|", large, re.M)
        assert measured, step
        assert re.search(rf"`{step}` of 1,000,000 partitions \| 116 MiB JSON \| {measured.group(1)} MiB", sizing), step
    idle = re.search(r"RSS when idle with this resource: (\d+) MiB", large)
    assert idle and f"idle, one resource | — | {idle.group(1)} MiB" in sizing
    hostile = bench.split("<!-- bench:hostile_tenant:start -->", 1)[1].split("end -->", 1)[0]
    peak = max(int(row.rsplit("|", 2)[1]) for row in hostile.splitlines() if row.startswith("| alter of 1,000,000"))
    assert f"| {peak} MiB |" in sizing
