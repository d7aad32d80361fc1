"""Generate the CRD manifests from the pydantic models.

Why generate: the CRD schema and the models must not drift. Pydantic's JSON Schema is close to
the structural OpenAPI v3 subset the API server wants, but not equal: ``$ref``/``$defs`` must be
inlined, ``Optional`` (``anyOf: [X, null]``) becomes ``nullable: true``, ``title`` is noise, and
free-form maps need ``x-kubernetes-preserve-unknown-fields``. Every field gets a description (the
models' docstrings and ``Field(description=...)``; Kubernetes' own words for apiVersion and kind;
metadata is ObjectMeta's, which the API server publishes itself), so ``kubectl explain`` has
something to say about each. This module does that conversion,
and nothing else, so ``crds/*.yaml`` is a pure function of the ``models/crds`` package.

Versions (docs/api-versions.md): ``API_VERSION`` (v1beta1) is served and stored; each version of
``DEPRECATED_VERSIONS`` (v1alpha1) is still served, marked ``deprecated`` with a warning naming
the version to move to, and with the same schema. Same schema, so no conversion webhook: with the
CRD's default conversion strategy ``None`` the API server only rewrites ``apiVersion``. A
version whose schema must differ needs a webhook, and gets its own model then.
"""

from __future__ import annotations

import copy
from typing import Any

from pydantic import BaseModel

from connect_offsets.models import crds
from connect_offsets.vocabulary import (
    API_GROUP,
    API_VERSION,
    CLUSTERS,
    CONNECTORS,
    MIRRORS,
)

__all__ = ["DEPRECATED_VERSIONS", "crd_documents", "structural_schema"]

#: Versions still served beside ``API_VERSION``, oldest first, with the same schema. One leaves this
#: tuple only as docs/api-versions.md allows (how long a deprecated version stays served).
DEPRECATED_VERSIONS: tuple[str, ...] = ("v1alpha1",)

_DROP = {"title", "$defs"}


def structural_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON Schema rewritten into a Kubernetes structural schema."""
    raw = model.model_json_schema(by_alias=True, mode="validation")
    defs: dict[str, Any] = raw.get("$defs", {})
    converted: dict[str, Any] = _convert(raw, defs)
    return converted


def _convert(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, list):
        return [_convert(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target = defs[node["$ref"].rsplit("/", 1)[-1]]
        merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        return _convert(merged, defs)
    any_of = node.get("anyOf")
    if isinstance(any_of, list):
        options = [opt for opt in any_of if opt != {"type": "null"}]
        if len(options) == 1 and len(options) < len(any_of):
            rest = {k: v for k, v in node.items() if k != "anyOf"}
            merged = {**_convert(options[0], defs), **_convert(rest, defs)}
            merged["nullable"] = True
            return _fixup(merged)
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROP:
            continue
        if key == "const":
            out["enum"] = [value]
            continue
        if key == "description" and isinstance(value, str):
            # A model's docstring is wrapped for the source; `kubectl explain` wraps it again.
            out[key] = " ".join(value.split())
            continue
        if key == "properties":
            out[key] = {name: _convert(sub, defs) for name, sub in value.items()}
            continue
        out[key] = _convert(value, defs)
    return _fixup(out)


def _fixup(out: dict[str, Any]) -> dict[str, Any]:
    if out.get("additionalProperties") is False:
        # Structural schemas forbid `properties` next to `additionalProperties`; the API server
        # prunes unknown fields instead, and the model rejects them on our side.
        out.pop("additionalProperties")
    if out.get("x-kubernetes-preserve-unknown-fields"):
        # Free-form maps: the API server stores them as given; values are checked by the model.
        out.pop("additionalProperties", None)
        out["type"] = "object"
    elif out.get("type") == "object" and "properties" not in out and "additionalProperties" not in out:
        out["x-kubernetes-preserve-unknown-fields"] = True
    if out.get("default") is None:
        out.pop("default", None)
    return out


# What `kubectl explain` shows for apiVersion and kind, in Kubernetes' own words (metav1.TypeMeta's
# descriptions): a CRD carries them only if its schema says them. metadata is ObjectMeta's own.
_API_VERSION_TEXT = (
    "APIVersion defines the versioned schema of this representation of an object. Servers should convert "
    "recognized schemas to the latest internal value, and may reject unrecognized values. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources"
)
_KIND_TEXT = (
    "Kind is a string value representing the REST resource this object represents. Servers may infer this "
    "from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"
)


#: NAME, or NAMESPACE/NAME for a ConnectCluster in another namespace: the operator writes status.cluster
#: from the two labels (a printer column's JSONPath cannot join them).
CLUSTER_COLUMN = {"name": "Cluster", "type": "string", "jsonPath": ".status.cluster"}


def _condition_columns() -> list[dict[str, Any]]:
    return [
        {"name": "Ready", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].status'},
        {"name": "Reason", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].reason'},
    ]


def _crd(
    *,
    kind: str,
    plural: str,
    short_names: list[str],
    spec_model: type[BaseModel],
    status_model: type[BaseModel],
    columns: list[dict[str, Any]],
    description: str,
    after_ready: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    schema = {
        "type": "object",
        "description": description,
        "required": ["spec"],
        "properties": {
            "apiVersion": {"type": "string", "description": _API_VERSION_TEXT},
            "kind": {"type": "string", "description": _KIND_TEXT},
            # The API server refuses anything but the type here, and publishes
            # ObjectMeta's own schema and description for it.
            "metadata": {"type": "object"},
            "spec": structural_schema(spec_model),
            "status": structural_schema(status_model),
        },
    }
    columns = [
        *columns,
        *_condition_columns(),
        *(after_ready or []),
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{plural}.{API_GROUP}",
            "labels": {"app.kubernetes.io/part-of": "connect-offsets-operator"},
        },
        "spec": {
            "group": API_GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": kind.lower(),
                "shortNames": short_names,
                "categories": ["connect-offsets"],
            },
            # The API server only rewrites apiVersion between versions: their schemas are the same.
            "conversion": {"strategy": "None"},
            "versions": [
                _version(API_VERSION, kind, schema, columns),
                *(_version(old, kind, schema, columns) for old in reversed(DEPRECATED_VERSIONS)),
            ],
        },
    }


def _version(name: str, kind: str, schema: dict[str, Any], columns: list[dict[str, Any]]) -> dict[str, Any]:
    """One entry of ``spec.versions``: the stored version, or a deprecated one served beside it."""
    entry: dict[str, Any] = {"name": name, "served": True, "storage": name == API_VERSION}
    if name != API_VERSION:
        entry["deprecated"] = True
        entry["deprecationWarning"] = (
            f"{API_GROUP}/{name} {kind} is deprecated; use {API_GROUP}/{API_VERSION} "
            "(same fields; docs/api-versions.md)"
        )
    # Copies: a YAML dump would write one object reached twice as an anchor and an alias.
    entry["subresources"] = {"status": {}}
    entry["additionalPrinterColumns"] = copy.deepcopy(columns)
    entry["schema"] = {"openAPIV3Schema": copy.deepcopy(schema)}
    return entry


def crd_documents() -> dict[str, dict[str, Any]]:
    """File name in ``crds/`` -> CRD manifest."""
    return {
        "connectclusters.yaml": _crd(
            kind="ConnectCluster",
            plural=CLUSTERS,
            short_names=["cocl"],
            spec_model=crds.ConnectClusterSpec,
            status_model=crds.ConnectClusterStatus,
            columns=[
                {"name": "URL", "type": "string", "jsonPath": ".spec.url"},
                {"name": "Version", "type": "string", "jsonPath": ".status.version"},
                {"name": "Health", "type": "string", "jsonPath": ".status.health"},
            ],
            description="An existing Kafka Connect cluster, reached through its REST API.",
        ),
        "kafkaconnectors.yaml": _crd(
            kind="KafkaConnector",
            plural=CONNECTORS,
            short_names=["cokc"],
            spec_model=crds.KafkaConnectorSpec,
            status_model=crds.KafkaConnectorStatus,
            columns=[
                CLUSTER_COLUMN,
                {"name": "Class", "type": "string", "jsonPath": ".spec.class", "priority": 1},
                {"name": "Desired", "type": "string", "jsonPath": ".spec.state"},
                {"name": "State", "type": "string", "jsonPath": ".status.connectorStatus.connector.state"},
                {"name": "Version", "type": "string", "jsonPath": ".status.pluginVersion", "priority": 1},
            ],
            after_ready=[
                {"name": "Lag", "type": "integer", "jsonPath": ".status.progress.totalLag"},
                {"name": "Last Progress", "type": "date", "jsonPath": ".status.progress.lastMoved"},
            ],
            description="A Kafka Connect connector managed on a ConnectCluster, with offsets operations.",
        ),
        "kafkamirrormaker2s.yaml": _crd(
            kind="KafkaMirrorMaker2",
            plural=MIRRORS,
            short_names=["comm2"],
            spec_model=crds.KafkaMirrorMaker2Spec,
            status_model=crds.KafkaMirrorMaker2Status,
            columns=[
                CLUSTER_COLUMN,
                {"name": "Connectors", "type": "string", "jsonPath": ".status.connectorsReady"},
            ],
            after_ready=[
                {"name": "Lag", "type": "integer", "jsonPath": ".status.replicationLag.total"},
                {"name": "Measured", "type": "date", "jsonPath": ".status.replicationLag.measuredAt"},
            ],
            description="MirrorMaker 2 run as connectors on a ConnectCluster, with per-connector offsets.",
        ),
    }
