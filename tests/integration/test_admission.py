"""Admission-time validation on the real API server: ``kubectl apply`` as a user runs it.

The CRDs carry the cross-field rules of the models as CEL (``x-kubernetes-validations``) and the
name patterns as OpenAPI ``pattern``s, so a bad resource is refused before it is stored, naming the
field and saying what was expected. These tests apply each bad document with
``kubectl apply --dry-run=server`` (the real admission chain, nothing stored) and check the refusal
carries the rule's message and field; the shipped samples in ``deploy/samples/`` must apply.
Rules that cannot be CEL (the keys of a free-form ``config`` map) are refused by the operator
after admission and are tested with the operator elsewhere.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "deploy" / "samples"
API = "connect-offsets.io/v1beta1"


def kubectl_apply(stack: dict[str, Any], document: dict[str, Any] | str) -> subprocess.CompletedProcess[str]:
    text = document if isinstance(document, str) else yaml.safe_dump(document)
    return subprocess.run(
        [stack["kubectl"], "apply", "--dry-run=server", "-f", "-"],
        input=text,
        env={**os.environ, "KUBECONFIG": stack["kubeconfig"]},
        capture_output=True,
        text=True,
        timeout=60,
    )


def connector(namespace: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "KafkaConnector",
        "metadata": {"name": "admission", "namespace": namespace},
        "spec": {"class": "FileStreamSource", **spec},
    }


def mirror(namespace: str, clusters: list[dict[str, Any]], mirrors: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "KafkaMirrorMaker2",
        "metadata": {"name": "admission", "namespace": namespace},
        "spec": {"clusters": clusters, "mirrors": mirrors},
    }


def cluster(alias: str) -> dict[str, Any]:
    return {"alias": alias, "bootstrapServers": f"{alias}.kafka:9092"}


REFUSED_CONNECTORS = [
    pytest.param(
        {"alterOffsets": {"fromConfigMap": {"name": "offsets"}, "toTimestamp": "2026-11-21T10:00:00Z"}},
        "spec.alterOffsets: Invalid value: set exactly one of fromConfigMap and toTimestamp",
        id="fromConfigMap-and-toTimestamp",
    ),
    pytest.param(
        {"alterOffsets": {"applyOnChange": False}},
        "spec.alterOffsets: Invalid value: set exactly one of fromConfigMap and toTimestamp",
        id="neither-source",
    ),
    pytest.param(
        {"alterOffsets": {"toTimestamp": "2026-11-21T10:00:00Z", "applyOnChange": True}},
        "spec.alterOffsets: Invalid value: applyOnChange needs fromConfigMap",
        id="applyOnChange-without-configmap",
    ),
    pytest.param(
        {"alterOffsets": {"toTimestamp": "yesterday at noon"}},
        "spec.alterOffsets: Invalid value: toTimestamp must be an RFC 3339 time with a zone",
        id="toTimestamp-not-rfc3339",
    ),
    pytest.param(
        {"alterOffsets": {"toTimestamp": "2026-11-21T10:00:00"}},
        "toTimestamp must be an RFC 3339 time with a zone",
        id="toTimestamp-without-zone",
    ),
    pytest.param(
        {"listOffsets": {"toConfigMap": {"name": "Offsets_Out"}}},
        'spec.listOffsets.toConfigMap.name: Invalid value: "Offsets_Out"',
        id="configmap-name-pattern",
    ),
    pytest.param(
        {"initialOffsets": {"fromConfigMap": {"name": "../etc"}}},
        'spec.initialOffsets.fromConfigMap.name: Invalid value: "../etc"',
        id="configmap-name-traversal",
    ),
    pytest.param(
        {"state": "sleeping"},
        'spec.state: Unsupported value: "sleeping"',
        id="state-enum",
    ),
    pytest.param(
        {"initialOffsets": {"fromConfigMap": {"name": "offsets"}, "fromConnector": {"name": "orders-v1"}}},
        "spec.initialOffsets: Invalid value: set exactly one of fromConfigMap, fromConnector and fromMirror",
        id="initial-offsets-two-sources",
    ),
    pytest.param(
        {"initialOffsets": {"fromConnector": {"name": "orders-v1", "clusterRef": {"name": "Other_Cluster"}}}},
        'spec.initialOffsets.fromConnector.clusterRef.name: Invalid value: "Other_Cluster"',
        id="initial-offsets-cluster-name",
    ),
]


@pytest.mark.parametrize(("spec", "expected"), REFUSED_CONNECTORS)
def test_kubectl_apply_refuses_a_bad_kafkaconnector_naming_the_field(
    stack: dict[str, Any], namespace: str, custom: Any, spec: dict[str, Any], expected: str
) -> None:
    result = kubectl_apply(stack, connector(namespace, spec))
    assert result.returncode != 0, result.stdout
    assert expected in result.stderr, result.stderr
    assert (
        custom.list_namespaced_custom_object("connect-offsets.io", "v1beta1", namespace, "kafkaconnectors")["items"]
        == []
    )


def test_an_rfc3339_time_with_an_offset_and_fraction_is_admitted(stack: dict[str, Any], namespace: str) -> None:
    result = kubectl_apply(
        stack, connector(namespace, {"alterOffsets": {"toTimestamp": "2026-11-21T10:00:00.5+01:00"}})
    )
    assert result.returncode == 0, result.stderr
    assert "created (server dry run)" in result.stdout


REFUSED_MIRRORS = [
    pytest.param(
        [cluster("a"), cluster("a")],
        [{"sourceCluster": "a", "targetCluster": "b"}],
        "spec.clusters: Invalid value: every alias must be unique",
        id="duplicate-alias",
    ),
    pytest.param(
        [cluster("a"), cluster("b")],
        [{"sourceCluster": "a", "targetCluster": "c"}],
        "spec.mirrors: Invalid value: sourceCluster and targetCluster must each be the alias of one of the clusters",
        id="unknown-alias",
    ),
    pytest.param(
        [cluster("a"), cluster("b")],
        [{"sourceCluster": "a", "targetCluster": "a"}],
        "spec.mirrors[0]: Invalid value: sourceCluster and targetCluster must differ",
        id="mirror-onto-itself",
    ),
    pytest.param(
        [cluster("a"), cluster("b")],
        [
            {
                "sourceCluster": "a",
                "targetCluster": "b",
                "sourceConnector": {"alterOffsets": {"toTimestamp": "noon"}},
            }
        ],
        "spec.mirrors[0].sourceConnector.alterOffsets: Invalid value: toTimestamp must be an RFC 3339 time",
        id="connector-rules-inside-a-mirror",
    ),
]


@pytest.mark.parametrize(("clusters", "mirrors", "expected"), REFUSED_MIRRORS)
def test_kubectl_apply_refuses_a_bad_kafkamirrormaker2_naming_the_field(
    stack: dict[str, Any],
    namespace: str,
    clusters: list[dict[str, Any]],
    mirrors: list[dict[str, Any]],
    expected: str,
) -> None:
    result = kubectl_apply(stack, mirror(namespace, clusters, mirrors))
    assert result.returncode != 0, result.stdout
    assert expected in result.stderr, result.stderr


def test_a_certificate_reference_must_name_exactly_one_source(stack: dict[str, Any], namespace: str) -> None:
    ref = {"name": "ca", "key": "ca.crt"}
    body = {
        "apiVersion": API,
        "kind": "ConnectCluster",
        "metadata": {"name": "admission", "namespace": namespace},
        "spec": {"url": "https://connect:8083", "tls": {"ca": {"secret": ref, "configMap": ref}}},
    }
    result = kubectl_apply(stack, body)
    assert result.returncode != 0, result.stdout
    assert "spec.tls.ca: Invalid value: set exactly one of `secret` or `configMap`" in result.stderr, result.stderr


@pytest.mark.parametrize("sample", sorted(p.name for p in SAMPLES.glob("*.yaml")))
def test_every_shipped_sample_is_admitted(stack: dict[str, Any], namespace: str, sample: str) -> None:
    documents = [d for d in yaml.safe_load_all((SAMPLES / sample).read_text()) if d]
    for document in documents:
        document.setdefault("metadata", {})["namespace"] = namespace
    result = kubectl_apply(stack, yaml.safe_dump_all(documents))
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("(server dry run)") == len(documents), result.stdout


def test_kubectl_explain_describes_spec_and_status_fields(stack: dict[str, Any]) -> None:
    env = {**os.environ, "KUBECONFIG": stack["kubeconfig"]}
    for path, expected in (
        ("kafkaconnectors.spec.alterOffsets", "a time to seek to (sinks)"),
        ("kafkaconnectors.spec.offsetsPolicy.stopConnector", "stop it, wait for STOPPED"),
        ("kafkaconnectors.status.lastOffsetsOperation.message", "Connect's error verbatim"),
        ("kafkamirrormaker2s.status.replicationLag.total", "Records not yet replicated"),
    ):
        result = subprocess.run(
            [stack["kubectl"], "explain", f"{path}"], env=env, capture_output=True, text=True, timeout=60
        )
        assert result.returncode == 0, result.stderr
        assert expected in " ".join(result.stdout.split()), (path, result.stdout)
