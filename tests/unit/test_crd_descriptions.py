"""``kubectl explain`` against the code (issue 49 item 5): every spec field the operator's source reads
has a description in every served version of its CRD, and ``spec.kafka``'s says what reads it.

Why against the source: ``kubectl explain connectclusters.spec.kafka`` said "not needed for anything
else" than seek-to-timestamp while sink progress read it too, so a first sink on a cluster without
it showed no LAG and only NotMeasured. A description that promises less (or more) than the code does
is a wrong answer to the one question users ask the API server.
"""

from __future__ import annotations

import ast
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from connect_offsets.models import crds
from connect_offsets.models.schema import crd_documents

pytestmark = pytest.mark.unit

SRC = Path(__file__).resolve().parents[2] / "operator" / "src" / "connect_offsets"
KINDS = {
    "connectclusters.yaml": crds.ConnectClusterSpec,
    "kafkaconnectors.yaml": crds.KafkaConnectorSpec,
    "kafkamirrormaker2s.yaml": crds.KafkaMirrorMaker2Spec,
}


def attributes_read_in_source() -> set[str]:
    """Every attribute name the package reads (``x.spec.kafka.bootstrap_servers`` gives ``spec``,
    ``kafka``, ``bootstrap_servers``), outside the models that declare the fields."""
    names: set[str] = set()
    for path in SRC.rglob("*.py"):
        if (SRC / "models" / "crds") in path.parents:
            continue
        names.update(node.attr for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Attribute))
    return names


def nested_model(annotation: Any) -> type[BaseModel] | None:
    """The spec model inside a field's type (``X | None``, ``list[X]``, ``dict[str, X]``), if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for argument in typing.get_args(annotation):
        found = nested_model(argument)
        if found is not None:
            return found
    return None


def object_schema(node: dict[str, Any]) -> dict[str, Any]:
    """The schema with the properties of a field's model: the node, or its items / map values."""
    while "properties" not in node:
        node = node.get("items") or node["additionalProperties"]
    return node


def spec_fields(model: type[BaseModel], schema: dict[str, Any], path: str) -> Iterator[tuple[str, str, str]]:
    """(python name, CRD path, description) of every field of ``model`` and of the models inside it."""
    for name, field in model.model_fields.items():
        alias = field.alias or name
        prop = schema["properties"][alias]
        yield name, f"{path}.{alias}", str(prop.get("description") or "")
        inner = nested_model(field.annotation)
        if inner is not None:
            yield from spec_fields(inner, object_schema(prop), f"{path}.{alias}")


def served_specs() -> Iterator[tuple[str, type[BaseModel], dict[str, Any]]]:
    for file, model in KINDS.items():
        doc = crd_documents()[file]
        for version in doc["spec"]["versions"]:
            assert version["served"] is True
            spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
            yield f"{doc['spec']['names']['plural']}@{version['name']}", model, spec


SERVED = list(served_specs())


@pytest.mark.parametrize(("crd", "model", "spec"), SERVED, ids=[crd for crd, _, _ in SERVED])
def test_every_spec_field_the_source_reads_has_a_description(
    crd: str, model: type[BaseModel], spec: dict[str, Any]
) -> None:
    read = attributes_read_in_source()
    fields = list(spec_fields(model, spec, f"{crd}.spec"))
    assert len(fields) > 10
    # Every field is read somewhere (a field no code reads would be described for nothing), so the
    # description check below covers them all.
    assert [path for name, path, _ in fields if name not in read] == []
    # A description, not only punctuation or the field's own name again.
    undescribed = [
        path
        for name, path, text in fields
        if name in read and text.strip(" .").lower() in ("", name.lower(), path.rsplit(".", 1)[-1].lower())
    ]
    assert undescribed == [], "a field the operator reads has no description (kubectl explain shows nothing)"


def test_spec_kafka_says_what_reads_it() -> None:
    """Sink progress and seek-to-timestamp read the ConnectCluster's spec.kafka; its description
    (what `kubectl explain connectclusters.spec.kafka` prints) names both, and nothing says it is
    needed only for seeking."""
    # The two readers, as the code words its errors when spec.kafka is missing or unusable.
    assert "sink progress needs Kafka access" in (SRC / "progress" / "monitor.py").read_text()
    assert (
        "seeking to a time needs Kafka access (ConnectCluster spec.kafka)"
        in (SRC / "reconcile" / "observe.py").read_text()
    )
    for crd, _, spec in SERVED:
        if not crd.startswith("connectclusters@"):
            continue
        text = spec["properties"]["kafka"]["description"]
        assert "progress" in text, crd
        assert "NotMeasured" in text, crd  # what a sink shows without it
        assert "toTimestamp" in text and "seek-to" in text, crd
        assert "not needed" not in text and "only" not in text, crd
    # the other side of the reference: a KafkaConnector's spec.progress says a sink needs it
    for crd, _, spec in SERVED:
        if crd.startswith("kafkaconnectors@"):
            assert "ConnectCluster spec.kafka" in spec["properties"]["progress"]["properties"]["enabled"]["description"]
