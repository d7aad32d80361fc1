"""Unit tests for the Helm chart in production (issue 49, item 2): static renders, no cluster.

Covers:
* one PodDisruptionBudget per shard, selecting that shard's pods only (one StatefulSet per shard,
  its pods labelled ``connect-offsets.io/shard``), and one over the Deployment unsharded; none for
  a single pod (of a shard) or when disabled;
* ``minAvailable``/``maxUnavailable`` as an integer or a percentage, exactly one of them (the
  schema refuses both and neither), and a budget that would block every drain refused at render time;
* the default preferred pod anti-affinity (a shard's pods before the release's) and soft zone
  spread, replaced or turned off by ``affinity``, ``topologySpreadConstraints`` and ``spread``;
* NOTES for each mode: ``deployment/<fullname>`` unsharded, the shards' StatefulSets sharded, the
  budgets, the unpublished default image;
* sizing: the chart README's formula, computed from ``values.yaml``, fits the default memory limit;
* the README's Install section: the image is not published, how to build, push and use it;
* ``helm lint --strict`` and ``helm template`` in every mode, every object a Kubernetes object
  (it round-trips through the kubernetes client's models: no field the API does not know).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client import ApiClient

from tests.chart import CHART, NAMESPACE, RELEASE, REPO, helm_binary, objects, one, render, run_helm, workloads

pytestmark = pytest.mark.unit

README = CHART / "README.md"
SHARD_LABEL = "connect-offsets.io/shard"
SELECTOR = {"app.kubernetes.io/name": "connect-offsets-operator", "app.kubernetes.io/instance": RELEASE}
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
#: Every mode of the chart: unsharded and sharded, one pod (of a shard) and several.
MODES = [
    (),
    ("replicaCount=2",),
    ("sharding.shards=3",),
    ("sharding.shards=3", "replicaCount=2"),
    ("sharding.shards=2", "replicaCount=3", "watchNamespaces={a,b}"),
]


def mode_id(values: tuple[str, ...]) -> str:
    return ",".join(values) or "defaults"


def template(*args: str) -> subprocess.CompletedProcess[str]:
    """``helm template`` of the chart with raw arguments (``--set``, ``-f``), not asserting success."""
    return run_helm("template", RELEASE, "charts/connect-offsets-operator", "--namespace", NAMESPACE, *args)


def sets(*values: str) -> list[str]:
    return [arg for value in values for arg in ("--set", value)]


def matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A LabelSelector of matchLabels only (all the chart writes) against a pod's labels."""
    assert set(selector) == {"matchLabels"}, selector
    return selector["matchLabels"].items() <= labels.items()


def pod_labels(workload: dict[str, Any]) -> dict[str, str]:
    labels: dict[str, str] = workload["spec"]["template"]["metadata"]["labels"]
    return labels


def pod_spec(workload: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = workload["spec"]["template"]["spec"]
    return spec


def notes(*values: str) -> str:
    """The NOTES ``helm install`` prints, from a client-side dry run (no cluster is contacted)."""
    env = {**os.environ, "KUBECONFIG": str(REPO / "nonexistent-kubeconfig")}
    args = ["install", RELEASE, "charts/connect-offsets-operator", "--namespace", NAMESPACE, "--dry-run=client"]
    result = subprocess.run(
        [helm_binary(), *args, *sets(*values)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    _, found, text = result.stdout.partition("\nNOTES:\n")
    assert found, result.stdout[-2000:]
    return text


def mebibytes(quantity: str) -> float:
    """A Kubernetes memory quantity in MiB (the binary suffixes the chart uses, or plain bytes)."""
    units = {"Ki": 1 / 1024, "Mi": 1, "Gi": 1024, "Ti": 1024 * 1024}
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti)?", str(quantity))
    assert match, f"unexpected memory quantity {quantity!r}"
    number, unit = float(match.group(1)), match.group(2)
    return number * units[unit] if unit else number / 2**20


# --- 1. a PodDisruptionBudget per shard ----------------------------------------------------------


def test_three_shards_of_two_pods_get_a_budget_each_over_their_own_pods() -> None:
    """The reported case: shards=3, replicaCount=2. One budget over all six pods let a drain take
    both pods of a shard; now each shard's budget counts its two pods and no other."""
    docs = render("sharding.shards=3", "replicaCount=2")
    statefulsets = {s["metadata"]["name"]: s for s in objects(docs, "StatefulSet")}
    budgets = objects(docs, "PodDisruptionBudget")
    assert [b["metadata"]["name"] for b in budgets] == [f"{RELEASE}-shard-{i}" for i in range(3)]
    for shard, budget in enumerate(budgets):
        assert budget["metadata"]["namespace"] == NAMESPACE
        assert budget["spec"]["minAvailable"] == 1 and "maxUnavailable" not in budget["spec"]
        selector = budget["spec"]["selector"]
        assert selector["matchLabels"] == {**SELECTOR, SHARD_LABEL: str(shard)}
        # The pods it covers: exactly those of its shard's StatefulSet (2 of the 6).
        covered = [name for name, s in statefulsets.items() if matches(selector, pod_labels(s))]
        assert covered == [f"{RELEASE}-shard-{shard}"]
        assert statefulsets[covered[0]]["spec"]["replicas"] == 2
        assert selector["matchLabels"] == statefulsets[covered[0]]["spec"]["selector"]["matchLabels"]
        assert budget["metadata"]["labels"][SHARD_LABEL] == str(shard)


def test_unsharded_budget_covers_the_deployment() -> None:
    docs = render("replicaCount=2")
    budget = one(docs, "PodDisruptionBudget")
    deployment = one(docs, "Deployment")
    assert budget["metadata"]["name"] == RELEASE
    assert budget["spec"]["selector"]["matchLabels"] == SELECTOR == deployment["spec"]["selector"]["matchLabels"]
    assert matches(budget["spec"]["selector"], pod_labels(deployment))


@pytest.mark.parametrize(
    "values",
    [
        (),
        ("sharding.shards=3",),  # one pod per shard: a budget would block every drain
        ("sharding.shards=3", "replicaCount=2", "podDisruptionBudget.enabled=false"),
        ("replicaCount=0",),
    ],
    ids=mode_id,
)
def test_no_budget_for_single_pods_or_when_disabled(values: tuple[str, ...]) -> None:
    assert objects(render(*values), "PodDisruptionBudget") == []


def test_shard_names_fit_and_stay_apart() -> None:
    """StatefulSet names stay within 52 characters (pod names and the controller-revision-hash label
    add to them), whatever the release's full name."""
    docs = render("fullnameOverride=" + "a" * 63, "sharding.shards=12", "replicaCount=2")
    names = [s["metadata"]["name"] for s in objects(docs, "StatefulSet")]
    assert len(set(names)) == 12 and all(len(name) <= 52 for name in names), names
    assert sorted(b["metadata"]["name"] for b in objects(docs, "PodDisruptionBudget")) == sorted(names)


# --- 2. minAvailable / maxUnavailable ------------------------------------------------------------


def test_min_available_takes_a_percentage() -> None:
    budgets = objects(
        render("sharding.shards=2", "replicaCount=4", "podDisruptionBudget.minAvailable=50%"), "PodDisruptionBudget"
    )
    assert [b["spec"] for b in budgets] == [
        {"minAvailable": "50%", "selector": {"matchLabels": {**SELECTOR, SHARD_LABEL: str(i)}}} for i in range(2)
    ]


@pytest.mark.parametrize(("value", "expected"), [("1", 1), ("25%", "25%")])
def test_max_unavailable_replaces_min_available(value: str, expected: int | str) -> None:
    budget = one(
        render(
            "replicaCount=3", "podDisruptionBudget.minAvailable=null", f"podDisruptionBudget.maxUnavailable={value}"
        ),
        "PodDisruptionBudget",
    )
    assert budget["spec"]["maxUnavailable"] == expected
    assert "minAvailable" not in budget["spec"]


def test_a_values_file_sets_max_unavailable(tmp_path: Path) -> None:
    """As a values file does it: numbers arrive as floats, and null unsets the default."""
    values = tmp_path / "values.yaml"
    values.write_text("replicaCount: 3\npodDisruptionBudget:\n  minAvailable: null\n  maxUnavailable: 2\n")
    result = template("-f", str(values))
    assert result.returncode == 0, result.stderr
    budget = one([d for d in yaml.safe_load_all(result.stdout) if d], "PodDisruptionBudget")
    assert budget["spec"]["maxUnavailable"] == 2 and "minAvailable" not in budget["spec"]


def test_both_set_is_refused_by_the_schema() -> None:
    result = template(*sets("replicaCount=2", "podDisruptionBudget.maxUnavailable=1"))
    assert result.returncode != 0
    assert "schema" in result.stderr
    assert "at '/podDisruptionBudget/maxUnavailable': 'not' failed" in result.stderr, result.stderr
    assert "at '/podDisruptionBudget/minAvailable': 'not' failed" in result.stderr, result.stderr


def test_neither_set_is_refused_by_the_schema() -> None:
    result = template(*sets("replicaCount=2", "podDisruptionBudget.minAvailable=null"))
    assert result.returncode != 0
    assert "at '/podDisruptionBudget': 'anyOf' failed" in result.stderr, result.stderr
    assert "missing property 'minAvailable'" in result.stderr and "missing property 'maxUnavailable'" in result.stderr


@pytest.mark.parametrize(
    "value",
    [
        "podDisruptionBudget.minAvailable=0",
        "podDisruptionBudget.minAvailable=150%",
        "podDisruptionBudget.minAvailable=half",
        "podDisruptionBudget.other=1",
    ],
)
def test_schema_refuses_bad_budgets(value: str) -> None:
    result = template(*sets(value))
    assert result.returncode != 0, value
    assert "schema" in result.stderr and "podDisruptionBudget" in result.stderr, result.stderr


@pytest.mark.parametrize(
    "values",
    [
        ("replicaCount=2", "podDisruptionBudget.minAvailable=2"),
        ("replicaCount=3", "podDisruptionBudget.minAvailable=100%"),
        ("replicaCount=2", "podDisruptionBudget.minAvailable=51%"),  # rounded up: 2 of 2
        ("sharding.shards=3", "replicaCount=2", "podDisruptionBudget.minAvailable=2"),
    ],
    ids=mode_id,
)
def test_a_budget_keeping_every_pod_is_refused_at_render_time(values: tuple[str, ...]) -> None:
    result = template(*sets(*values))
    assert result.returncode != 0, values
    assert "no pod could ever be evicted" in result.stderr, result.stderr
    assert "maxUnavailable" in result.stderr


def test_a_budget_keeping_every_pod_is_fine_when_disabled() -> None:
    assert (
        template(
            *sets("replicaCount=2", "podDisruptionBudget.minAvailable=2", "podDisruptionBudget.enabled=false")
        ).returncode
        == 0
    )


# --- 3. spread over nodes and zones --------------------------------------------------------------


def preferred_terms(workload: dict[str, Any]) -> list[tuple[int, str, dict[str, str]]]:
    anti = pod_spec(workload)["affinity"]["podAntiAffinity"]
    assert set(anti) == {"preferredDuringSchedulingIgnoredDuringExecution"}, anti  # soft only
    return [
        (
            term["weight"],
            term["podAffinityTerm"]["topologyKey"],
            term["podAffinityTerm"]["labelSelector"]["matchLabels"],
        )
        for term in anti["preferredDuringSchedulingIgnoredDuringExecution"]
    ]


def test_default_anti_affinity_unsharded() -> None:
    deployment = one(render("replicaCount=2"), "Deployment")
    assert preferred_terms(deployment) == [(100, HOSTNAME, SELECTOR)]
    assert set(pod_spec(deployment)["affinity"]) == {"podAntiAffinity"}


def test_default_anti_affinity_keeps_a_shards_pods_apart_first() -> None:
    docs = render("sharding.shards=3", "replicaCount=2")
    for shard, statefulset in enumerate(objects(docs, "StatefulSet")):
        terms = preferred_terms(statefulset)
        assert terms == [(100, HOSTNAME, {**SELECTOR, SHARD_LABEL: str(shard)}), (50, HOSTNAME, SELECTOR)]
        # The heavier term selects the pods of this shard only; the lighter every pod of the release.
        assert terms[0][2] == statefulset["spec"]["selector"]["matchLabels"]
        for other in objects(docs, "StatefulSet"):
            same = other is statefulset
            assert matches({"matchLabels": terms[0][2]}, pod_labels(other)) == same
            assert matches({"matchLabels": terms[1][2]}, pod_labels(other))


@pytest.mark.parametrize("values", MODES, ids=mode_id)
def test_default_zone_spread_is_soft_and_per_shard(values: tuple[str, ...]) -> None:
    for workload in workloads(render(*values)):
        [constraint] = pod_spec(workload)["topologySpreadConstraints"]
        assert constraint == {
            "maxSkew": 1,
            "topologyKey": ZONE,
            "whenUnsatisfiable": "ScheduleAnyway",  # a preference: never a pending pod
            "labelSelector": {"matchLabels": workload["spec"]["selector"]["matchLabels"]},
        }


def test_affinity_pod_anti_affinity_replaces_the_default() -> None:
    docs = render(
        "sharding.shards=2",
        "replicaCount=2",
        "affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey=" + HOSTNAME,
        "affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchLabels.app=x",
    )
    for statefulset in objects(docs, "StatefulSet"):
        assert pod_spec(statefulset)["affinity"] == {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": HOSTNAME, "labelSelector": {"matchLabels": {"app": "x"}}}
                ]
            }
        }


def test_node_affinity_is_kept_beside_the_default() -> None:
    key = (
        "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0]"
    )
    deployment = one(
        render("replicaCount=2", f"{key}.key=pool", f"{key}.operator=In", f"{key}.values={{operators}}"),
        "Deployment",
    )
    affinity = pod_spec(deployment)["affinity"]
    assert affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == [
        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["operators"]}]}
    ]
    assert preferred_terms(deployment) == [(100, HOSTNAME, SELECTOR)]


def test_topology_spread_constraints_replace_the_default() -> None:
    docs = render(
        "sharding.shards=2",
        "topologySpreadConstraints[0].maxSkew=1",
        f"topologySpreadConstraints[0].topologyKey={HOSTNAME}",
        "topologySpreadConstraints[0].whenUnsatisfiable=DoNotSchedule",
        f"topologySpreadConstraints[0].matchLabelKeys={{{SHARD_LABEL}}}",
    )
    for statefulset in objects(docs, "StatefulSet"):
        assert pod_spec(statefulset)["topologySpreadConstraints"] == [
            {
                "maxSkew": 1,
                "topologyKey": HOSTNAME,
                "whenUnsatisfiable": "DoNotSchedule",
                "matchLabelKeys": [SHARD_LABEL],
            }
        ]


def test_spread_turns_off() -> None:
    for values in [
        ("spread.acrossNodes=false", "spread.acrossZones=false"),
        ("sharding.shards=2", "spread.acrossNodes=false", "spread.acrossZones=false"),
    ]:
        for workload in workloads(render(*values)):
            assert "affinity" not in pod_spec(workload) and "topologySpreadConstraints" not in pod_spec(workload)
    result = template(*sets("spread.acrossRacks=true"))
    assert result.returncode != 0 and "additional properties 'acrossRacks' not allowed" in result.stderr


# --- 4. NOTES ------------------------------------------------------------------------------------


def test_notes_unsharded_name_the_deployment() -> None:
    text = notes()
    assert f"rollout status deployment/{RELEASE}\n" in text
    assert f"logs deployment/{RELEASE}\n" in text
    assert "statefulset" not in text.lower()
    assert "PodDisruptionBudget" not in text and "poddisruptionbudgets" not in text  # one pod: no budget
    with_budget = notes("replicaCount=2")
    assert "with a PodDisruptionBudget" in with_budget and "get poddisruptionbudgets" in with_budget


def test_notes_sharded_name_each_shards_statefulset() -> None:
    values = ("sharding.shards=3", "replicaCount=2")
    text = notes(*values)
    assert "deployment/" not in text
    loop = re.search(
        r"for shard in \$\(seq 0 (\d+)\); do\n\s+kubectl -n (\S+) rollout status statefulset/(\S+)\$shard\n", text
    )
    assert loop, text
    assert loop.group(2) == NAMESPACE
    named = [f"{loop.group(3)}{i}" for i in range(int(loop.group(1)) + 1)]
    assert named == [s["metadata"]["name"] for s in objects(render(*values), "StatefulSet")]
    assert (
        f"-l app.kubernetes.io/name=connect-offsets-operator,app.kubernetes.io/instance={RELEASE} -L {SHARD_LABEL}"
        in text
    )
    assert "3 shards, one StatefulSet each" in text and "a PodDisruptionBudget per shard" in text


def test_notes_warn_about_the_unpublished_default_image() -> None:
    assert "is not published" in notes()
    assert "make image IMAGE_REPOSITORY=" in notes()
    assert "is not published" not in notes("image.repository=registry.example.com/platform/connect-offsets-operator")


# --- 5. sizing -----------------------------------------------------------------------------------


def sizing_section() -> str:
    return README.read_text().split("\n## Sizing\n", 1)[1].split("\n## ", 1)[0]


def formula() -> tuple[float, float]:
    """The README's restore formula: (base MiB, MiB per MiB of document)."""
    found = re.search(r"about \*\*(\d+) MiB plus ([\d.]+) times its document\*\*", sizing_section())
    assert found, "the Sizing section no longer states the formula in the form this test reads"
    return float(found.group(1)), float(found.group(2))


def test_the_default_memory_limit_covers_a_restore_of_the_largest_document() -> None:
    """Issue 49: by its own formula the chart needed about 1.5 GiB for the default maxDocumentBytes
    against a 1 GiB limit. Computed from values.yaml, so neither can drift from the other."""
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    base, factor = formula()
    document = values["maxDocumentBytes"] / 2**20
    needed = base + factor * document
    limit = mebibytes(values["resources"]["limits"]["memory"])
    assert needed <= limit, (
        f"a restore of a maxDocumentBytes document ({document:.0f} MiB) needs about {needed:.0f} MiB "
        f"by the README's formula, above the default memory limit of {limit:.0f} MiB"
    )
    # And the rendered pod carries that limit.
    [main] = pod_spec(one(render(), "Deployment"))["containers"]
    assert mebibytes(main["resources"]["limits"]["memory"]) == limit


def test_the_formula_covers_the_measurements_it_quotes() -> None:
    """The formula is not below the figures of the sizing table it is drawn from."""
    base, factor = formula()
    section = sizing_section()
    idle = re.search(r"\| idle, one resource \| — \| (\d+) MiB \|", section)
    restore = re.search(r"\| `restore` of 1,000,000 partitions \| (\d+) MiB JSON \| (\d+) MiB \|", section)
    assert idle and restore
    assert base >= float(idle.group(1))
    assert base + factor * float(restore.group(1)) >= float(restore.group(2))


def test_the_sizing_rows_agree_with_the_formula() -> None:
    base, factor = formula()
    rows = re.findall(r"^\| `(\d+)` \([^|]*\) \| ([\d,]+) MiB \| `(\w+)`", sizing_section(), re.M)
    assert len(rows) >= 3, rows
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert (str(values["maxDocumentBytes"]), values["resources"]["limits"]["memory"]) in {(r[0], r[2]) for r in rows}
    for document, needed, limit in rows:
        computed = base + factor * int(document) / 2**20
        assert round(computed) == int(needed.replace(",", "")), (document, computed)
        assert computed <= mebibytes(limit), (document, limit)


# --- 6. the Install section ----------------------------------------------------------------------


def test_install_says_the_image_is_not_published_and_how_to_build_push_and_use_it() -> None:
    install = README.read_text().split("\n## Install\n", 1)[1].split("\n## ", 1)[0]
    assert "**The image is not published.**" in install
    assert "ghcr.io/connect-offsets/connect-offsets-operator" in install
    assert re.search(r"^make image IMAGE_REPOSITORY=\S+", install, re.M)
    assert re.search(r"^podman push .*registry", install, re.M)
    assert "--set image.repository=" in install and "--set image.digest=" in install
    # What it relies on exists: the make target and the variable the build script reads.
    assert re.search(r"^image:", (REPO / "Makefile").read_text(), re.M)
    assert 'IMAGE_REPOSITORY="${IMAGE_REPOSITORY:-' in (REPO / "hack" / "build-image.sh").read_text()
    assert "docs/development.md" in install


# --- helm conventions in every mode --------------------------------------------------------------


@pytest.mark.parametrize("values", MODES, ids=mode_id)
def test_helm_lint_strict_in_every_mode(values: tuple[str, ...]) -> None:
    result = run_helm("lint", "--strict", "charts/connect-offsets-operator", *sets(*values))
    assert result.returncode == 0, f"{result.stdout}\n{result.stderr}"
    assert "[WARNING]" not in result.stdout and "[ERROR]" not in result.stdout, result.stdout


@pytest.mark.parametrize("values", MODES, ids=mode_id)
def test_every_mode_renders_its_workloads_and_budgets(values: tuple[str, ...]) -> None:
    settings = dict(value.split("=", 1) for value in values)
    shards = int(settings.get("sharding.shards", "1"))
    replicas = int(settings.get("replicaCount", "1"))
    docs = render(*values)
    found = workloads(docs)
    assert len(found) == shards
    assert {w["kind"] for w in found} == {"StatefulSet" if shards > 1 else "Deployment"}
    assert all(w["spec"]["replicas"] == replicas for w in found)
    assert len(objects(docs, "PodDisruptionBudget")) == (shards if replicas > 1 else 0)


#: The kubernetes client's model of each kind the chart renders, besides RBAC and monitoring objects.
MODELS = {
    "Deployment": "V1Deployment",
    "StatefulSet": "V1StatefulSet",
    "PodDisruptionBudget": "V1PodDisruptionBudget",
    "Service": "V1Service",
}


@pytest.mark.parametrize(
    "values",
    [
        *MODES,
        ("sharding.shards=2", "replicaCount=2", "podDisruptionBudget.minAvailable=50%"),
        ("replicaCount=3", "podDisruptionBudget.minAvailable=null", "podDisruptionBudget.maxUnavailable=1"),
    ],
    ids=mode_id,
)
def test_every_object_is_made_of_known_fields(values: tuple[str, ...]) -> None:
    """Without a cluster: each object deserialized into the client's model and serialized back is
    unchanged, so no field (of the budgets, affinity, spread constraints) is unknown or misplaced."""
    api = ApiClient()
    checked = 0
    for doc in render(*values):
        if doc["kind"] in MODELS:
            model = api.deserialize(json.dumps(doc), MODELS[doc["kind"]], "application/json")
            assert api.sanitize_for_serialization(model) == doc, (doc["kind"], doc["metadata"]["name"])
            checked += 1
    assert checked >= 2
