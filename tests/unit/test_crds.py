"""Unit tests for the custom resource models (the ``models/crds`` package) and the CRDs generated from them.

Covers:
* drift: ``render_crds()`` equals the committed ``crds/*.yaml`` (run ``connect-offsets crds`` to fix);
* the generated schemas are structural (no ``$ref``/``$defs``, no ``anyOf``/``oneOf``/``allOf``,
  no ``additionalProperties`` next to ``properties``, every node typed, objects with ``properties``
  are ``type: object``, free-form maps preserve unknown fields) and match the models' field names;
* model validation: reserved and nested config values, state enum, tasksMax minimum, unknown
  fields, ``connect_config()``, the ConnectCluster URL pattern and timeout bounds, the KeyRef
  exactly-one rule, authentication types, tolerant status models.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel, ValidationError

from connect_offsets.models import crds
from connect_offsets.models.crds import (
    RESERVED_CONFIG_KEYS,
    AuthenticationSpec,
    AutoRestartSpec,
    CertificateSource,
    ConfigMapRef,
    ConnectClusterResource,
    ConnectClusterSpec,
    ConnectorState,
    KafkaConnectorResource,
    KafkaConnectorSpec,
    KafkaConnectorStatus,
    KeyRef,
    TLSSpec,
)
from connect_offsets.models.schema import DEPRECATED_VERSIONS, crd_documents, structural_schema
from connect_offsets.reconcile.clusters import cluster_display
from connect_offsets.tools.cli import CRD_HEADER, main, render_crds
from connect_offsets.vocabulary import (
    API_GROUP,
    API_VERSION,
)

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
CRDS_DIR = REPO / "crds"
SCHEMA_MODELS: list[type[BaseModel]] = [
    crds.ConnectClusterSpec,
    crds.ConnectClusterStatus,
    crds.KafkaConnectorSpec,
    crds.KafkaConnectorStatus,
]
#: Keywords a structural schema node may carry (the subset the generator is expected to emit).
ALLOWED_KEYWORDS = {
    "type",
    "description",
    "properties",
    "required",
    "items",
    "additionalProperties",
    "enum",
    "default",
    "nullable",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "pattern",
    "format",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-validations",
}


# --------------------------------------------------------------------------- drift


def test_committed_crds_match_the_models() -> None:
    rendered = render_crds()
    committed = {path.name for path in CRDS_DIR.glob("*.yaml")}
    assert committed == set(rendered), (
        f"crds/ holds {sorted(committed)} but the models generate {sorted(rendered)}; run `connect-offsets crds`"
    )
    for name, text in rendered.items():
        assert (CRDS_DIR / name).read_text() == text, (
            f"crds/{name} is out of date with operator/src/connect_offsets/models/crds/; run `connect-offsets crds`"
        )


def test_render_crds_is_the_yaml_of_crd_documents() -> None:
    documents = crd_documents()
    for name, text in render_crds().items():
        assert text.startswith(CRD_HEADER)
        assert yaml.safe_load(text) == documents[name]


def test_cli_writes_the_same_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["crds", "--output", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    for name, text in render_crds().items():
        assert (tmp_path / "out" / name).read_text() == text
        assert f"wrote {tmp_path / 'out' / name}" in out


# --------------------------------------------------------------------------- structural schemas


def schema_nodes(node: dict[str, Any], path: str = "$") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every schema node below (and including) ``node``, with a readable path."""
    yield path, node
    for name, sub in node.get("properties", {}).items():
        yield from schema_nodes(sub, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        yield from schema_nodes(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from schema_nodes(node["additionalProperties"], f"{path}{{*}}")


def all_dicts(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, dict):
        yield value
        for item in value.values():
            yield from all_dicts(item)
    elif isinstance(value, list):
        for item in value:
            yield from all_dicts(item)


def crd_schemas() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for name, doc in crd_documents().items():
        for version in doc["spec"]["versions"]:
            out.append((f"{name}@{version['name']}", version["schema"]["openAPIV3Schema"]))
    return out


@pytest.mark.parametrize(("name", "schema"), crd_schemas(), ids=[n for n, _ in crd_schemas()])
def test_schema_is_structural(name: str, schema: dict[str, Any]) -> None:
    for value in all_dicts(schema):
        for banned in ("$ref", "$defs", "definitions", "title"):
            assert banned not in value, f"{name}: {banned} in {value}"
    nodes = list(schema_nodes(schema))
    assert len(nodes) > 20
    for path, node in nodes:
        where = f"{name} {path}"
        for combinator in ("anyOf", "oneOf", "allOf", "not"):
            assert combinator not in node, f"{where}: {combinator} is not allowed in a structural schema"
        assert set(node) <= ALLOWED_KEYWORDS, f"{where}: unexpected keywords {set(node) - ALLOWED_KEYWORDS}"
        assert not ("properties" in node and "additionalProperties" in node), (
            f"{where}: additionalProperties next to properties"
        )
        if "properties" in node:
            assert node.get("type") == "object", f"{where}: has properties but type {node.get('type')!r}"
        if node.get("x-kubernetes-preserve-unknown-fields"):
            assert node.get("type") == "object", f"{where}: free-form map without type: object"
        else:
            assert "type" in node, f"{where}: every node needs a type"
        if node.get("type") == "array":
            assert isinstance(node.get("items"), dict), f"{where}: array without items"
        if "nullable" in node:
            assert node["nullable"] is True, where
        if "default" in node:
            assert node["default"] is not None, f"{where}: default null"
        for required in node.get("required", []):
            assert required in node.get("properties", {}), f"{where}: required {required!r} is not a property"


@pytest.mark.parametrize("model", SCHEMA_MODELS, ids=lambda m: m.__name__)
def test_structural_schema_of_each_model(model: type[BaseModel]) -> None:
    schema = structural_schema(model)
    assert schema["type"] == "object"
    for path, node in schema_nodes(schema):
        assert "anyOf" not in node, path
        assert "$ref" not in node, path


def test_connector_spec_schema_fields() -> None:
    schema = structural_schema(KafkaConnectorSpec)
    props = schema["properties"]
    assert set(props) == {
        "class",
        "tasksMax",
        "config",
        "state",
        "autoRestart",
        "listOffsets",
        "alterOffsets",
        "offsetsPolicy",
        "initialOffsets",
        "version",
        "progress",
        "offsetsOnDelete",
    }
    assert schema["required"] == ["class"]
    assert props["tasksMax"] == {
        "description": "Maximum number of tasks.",
        "minimum": 1,
        "type": "integer",
        "nullable": True,
    }
    assert props["state"]["enum"] == [s.value for s in ConnectorState]
    assert props["state"]["default"] == "running"
    assert props["config"]["type"] == "object"
    assert props["config"]["x-kubernetes-preserve-unknown-fields"] is True
    assert props["listOffsets"]["properties"]["toConfigMap"]["required"] == ["name"]
    assert props["alterOffsets"]["properties"]["fromConfigMap"]["properties"]["name"]["maxLength"] == 253
    assert props["autoRestart"]["properties"]["maxRestarts"]["minimum"] == 0


def test_connector_status_schema_preserves_connect_status() -> None:
    props = structural_schema(KafkaConnectorStatus)["properties"]
    assert props["connectorStatus"]["x-kubernetes-preserve-unknown-fields"] is True
    assert set(props["lastOffsetsOperation"]["properties"]) >= {"operation", "result", "time", "message", "request"}
    assert props["lastOffsetsOperation"]["properties"]["result"]["enum"] == ["Succeeded", "Failed"]


def test_cluster_spec_schema_fields() -> None:
    schema = structural_schema(ConnectClusterSpec)
    props = schema["properties"]
    assert schema["required"] == ["url"]
    assert props["url"]["pattern"] == r"^https?://[^\s/@]+(/.*)?$"
    assert props["requestTimeoutSeconds"]["minimum"] == 1
    assert props["requestTimeoutSeconds"]["maximum"] == 600
    assert props["authentication"]["properties"]["type"]["enum"] == ["basic", "bearer"]
    ca = props["tls"]["properties"]["ca"]
    assert set(ca["properties"]) == {"secret", "configMap"}


@pytest.mark.parametrize(("name", "doc"), list(crd_documents().items()), ids=list(crd_documents()))
def test_crd_envelope(name: str, doc: dict[str, Any]) -> None:
    plural = name.removesuffix(".yaml")
    assert doc["metadata"]["name"] == f"{plural}.{API_GROUP}"
    spec = doc["spec"]
    assert spec["group"] == API_GROUP
    assert spec["scope"] == "Namespaced"
    assert spec["names"]["plural"] == plural
    # docs/api-versions.md: the new version stored, each older one still served, deprecated, with a
    # warning naming the new one, and the same schema and columns (so no conversion webhook).
    version, *older = spec["versions"]
    assert spec["conversion"] == {"strategy": "None"}
    assert [v["name"] for v in older] == list(reversed(DEPRECATED_VERSIONS))
    assert version["name"] == API_VERSION
    assert version["served"] is True
    assert version["storage"] is True
    assert "deprecated" not in version
    assert version["subresources"] == {"status": {}}
    for old in older:
        assert old["served"] is True
        assert old["storage"] is False
        assert old["deprecated"] is True
        assert f"use {API_GROUP}/{API_VERSION}" in old["deprecationWarning"]
        assert spec["names"]["kind"] in old["deprecationWarning"]
        assert {k: v for k, v in old.items() if k not in ("name", "storage", "deprecated", "deprecationWarning")} == {
            k: v for k, v in version.items() if k not in ("name", "storage")
        }
    root = version["schema"]["openAPIV3Schema"]
    assert root["type"] == "object"
    assert root["required"] == ["spec"]
    assert set(root["properties"]) == {"apiVersion", "kind", "metadata", "spec", "status"}
    # The API server refuses a CRD whose metadata schema says more (a description included)
    assert root["properties"]["metadata"] == {"type": "object"}
    for column in version["additionalPrinterColumns"]:
        assert column["jsonPath"].startswith(".")


def fields_without_description(node: dict[str, Any], path: str) -> Iterator[str]:
    """Every field (a property, also inside list items and map values) whose description is empty."""
    for name, child in (node.get("properties") or {}).items():
        if not str(child.get("description") or "").strip():
            yield f"{path}.{name}"
        yield from fields_without_description(child, f"{path}.{name}")
    for key, suffix in (("items", "[]"), ("additionalProperties", "{}")):
        if isinstance(node.get(key), dict):
            yield from fields_without_description(node[key], path + suffix)


@pytest.mark.parametrize(("name", "doc"), list(crd_documents().items()), ids=list(crd_documents()))
def test_kubectl_explain_has_a_description_for_every_field(name: str, doc: dict[str, Any]) -> None:
    """Issue 36: `kubectl explain kafkaconnector.spec` (and .status, and the other kinds) showed an
    empty description; every field has one now, spec and status included, on one line each."""
    root = doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    kind = doc["spec"]["names"]["kind"]
    assert root["description"]
    # metadata: the API server publishes ObjectMeta's schema and description (it refuses one here)
    assert list(fields_without_description(root, kind)) == [f"{kind}.metadata"]
    for part in ("spec", "status"):
        assert len(root["properties"][part]["description"]) > 40, f"{kind}.{part} says too little"

    def descriptions(node: Any) -> Iterator[str]:
        if isinstance(node, dict):
            if isinstance(node.get("description"), str):
                yield node["description"]
            for value in node.values():
                yield from descriptions(value)
        elif isinstance(node, list):
            for value in node:
                yield from descriptions(value)

    assert not [text for text in descriptions(root) if "\n" in text or "  " in text]


def test_the_cluster_column_shows_the_cluster_namespace_when_it_is_another() -> None:
    """A printer column's JSONPath cannot join two labels: the operator writes status.cluster."""
    for name in ("kafkaconnectors.yaml", "kafkamirrormaker2s.yaml"):
        columns = crd_documents()[name]["spec"]["versions"][0]["additionalPrinterColumns"]
        assert columns[0] == {"name": "Cluster", "type": "string", "jsonPath": ".status.cluster"}
    labels = {f"{API_GROUP}/cluster": "shared"}
    assert cluster_display("team-a", labels) == "shared"
    assert cluster_display("team-a", {**labels, f"{API_GROUP}/cluster-namespace": "team-a"}) == "shared"
    assert cluster_display("team-a", {**labels, f"{API_GROUP}/cluster-namespace": "platform"}) == "platform/shared"
    assert cluster_display("team-a", {}) is None


# --------------------------------------------------------------------------- KafkaConnectorSpec


def spec(**fields: Any) -> KafkaConnectorSpec:
    return KafkaConnectorSpec.model_validate({"class": "org.example.FooConnector", **fields})


@pytest.mark.parametrize("key", RESERVED_CONFIG_KEYS)
def test_reserved_config_key_rejected(key: str) -> None:
    with pytest.raises(ValidationError) as info:
        spec(config={key: "x", "topic": "t"})
    text = str(info.value)
    assert f"config must not contain {key}" in text
    assert "spec.tasksMax" in text


def test_all_reserved_config_keys_named() -> None:
    with pytest.raises(ValidationError) as info:
        spec(config={"tasks.max": 2, "name": "x"})
    assert "config must not contain name, tasks.max" in str(info.value)


@pytest.mark.parametrize(("value", "type_name"), [({"a": 1}, "dict"), ([1, 2], "list"), ({}, "dict"), ([], "list")])
def test_nested_config_value_rejected(value: Any, type_name: str) -> None:
    with pytest.raises(ValidationError) as info:
        spec(config={"topic": "t", "transforms.x": value})
    assert f"config.transforms.x: expected a string, number or boolean, got {type_name}" in str(info.value)


def test_scalar_config_values_accepted() -> None:
    parsed = spec(config={"s": "x", "i": 3, "f": 0.25, "b": False, "n": None, "empty": ""})
    assert parsed.config == {"s": "x", "i": 3, "f": 0.25, "b": False, "n": None, "empty": ""}


@pytest.mark.parametrize("state", ["running", "paused", "stopped"])
def test_state_enum(state: str) -> None:
    assert spec(state=state).state is ConnectorState(state)


@pytest.mark.parametrize("state", ["RUNNING", "Running", "started", "", "failed", None])
def test_state_enum_rejects_others(state: Any) -> None:
    with pytest.raises(ValidationError) as info:
        spec(state=state)
    assert "state" in str(info.value)


def test_state_defaults_to_running() -> None:
    assert spec().state is ConnectorState.RUNNING


@pytest.mark.parametrize("tasks_max", [0, -1, -100])
def test_tasks_max_minimum(tasks_max: int) -> None:
    with pytest.raises(ValidationError) as info:
        spec(tasksMax=tasks_max)
    assert "tasksMax" in str(info.value)
    assert "greater than or equal to 1" in str(info.value)


@pytest.mark.parametrize("tasks_max", [1, 2, 1000, None])
def test_tasks_max_accepted(tasks_max: int | None) -> None:
    assert spec(tasksMax=tasks_max).tasks_max == tasks_max


@pytest.mark.parametrize("body", [{}, {"class": ""}, {"class": None}])
def test_class_required(body: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        KafkaConnectorSpec.model_validate(body)


@pytest.mark.parametrize(
    "extra",
    [{"taskMax": 1}, {"autoRestart": {"enable": True}}, {"listOffsets": {"toConfigMap": {"name": "x", "key": "k"}}}],
)
def test_unknown_spec_fields_rejected(extra: dict[str, Any]) -> None:
    with pytest.raises(ValidationError) as info:
        spec(**extra)
    assert "Extra inputs are not permitted" in str(info.value)


@pytest.mark.parametrize("name", ["", "x" * 254])
def test_configmap_ref_name_length(name: str) -> None:
    with pytest.raises(ValidationError):
        ConfigMapRef.model_validate({"name": name})
    assert ConfigMapRef.model_validate({"name": "x" * 253}).name == "x" * 253


def test_auto_restart_spec() -> None:
    assert AutoRestartSpec.model_validate({}) == AutoRestartSpec(enabled=True, max_restarts=None)
    assert AutoRestartSpec.model_validate({"maxRestarts": 0}).max_restarts == 0
    with pytest.raises(ValidationError):
        AutoRestartSpec.model_validate({"maxRestarts": -1})


def test_connect_config() -> None:
    parsed = spec(
        tasksMax=4,
        config={"topic": "orders", "batch.size": 500, "ratio": 1.5, "on": True, "off": False, "unset": None},
    )
    assert parsed.connect_config("orders-source") == {
        "topic": "orders",
        "batch.size": "500",
        "ratio": "1.5",
        "on": "true",
        "off": "false",
        "connector.class": "org.example.FooConnector",
        "name": "orders-source",
        "tasks.max": "4",
    }
    assert parsed.config["batch.size"] == 500  # the spec itself is not changed


def test_connect_config_without_tasks_max() -> None:
    assert spec(config={"a": "b"}).connect_config("c") == {
        "a": "b",
        "connector.class": "org.example.FooConnector",
        "name": "c",
    }


def test_connect_config_snake_case_names_also_accepted() -> None:
    parsed = KafkaConnectorSpec.model_validate(
        {"class": "X", "tasks_max": 2, "list_offsets": {"to_config_map": {"name": "o"}}}
    )
    assert parsed.tasks_max == 2
    assert parsed.list_offsets is not None
    assert parsed.list_offsets.to_config_map.name == "o"


def test_connector_resource_defaults_and_tolerant_status() -> None:
    resource = KafkaConnectorResource.model_validate(
        {
            "apiVersion": f"{API_GROUP}/{API_VERSION}",
            "kind": "KafkaConnector",
            "metadata": {"name": "c", "resourceVersion": "5", "managedFields": []},
            "spec": {"class": "X"},
            "status": {
                "autoRestart": {"count": 2, "lastRestartTime": "2024-05-01T12:00:00Z", "connectorName": "c"},
                "somethingOld": True,
                "conditions": [{"type": "Ready", "status": "True", "futureField": 1}],
            },
        }
    )
    assert resource.connector_name == "c"
    assert resource.metadata.namespace == "default"
    assert resource.metadata.resource_version == "5"
    assert resource.metadata.annotations == {}
    assert resource.status.auto_restart is not None
    assert resource.status.auto_restart.count == 2
    assert resource.status.conditions[0].reason == ""
    empty = KafkaConnectorResource.model_validate({"metadata": {"name": "c"}, "spec": {"class": "X"}})
    assert empty.status.last_offsets_operation is None


def test_offsets_operation_result_enum() -> None:
    with pytest.raises(ValidationError):
        KafkaConnectorStatus.model_validate(
            {"lastOffsetsOperation": {"operation": "alter", "result": "Maybe", "time": "t"}}
        )


# --------------------------------------------------------------------------- ConnectCluster


@pytest.mark.parametrize(
    "url",
    [
        "http://connect:8083",
        "https://connect.kafka.svc:8083",
        "http://10.0.0.1:8083/",
        "https://gateway.example.com/kafka/connect",
        "http://[::1]:8083",
    ],
)
def test_cluster_url_accepted(url: str) -> None:
    assert ConnectClusterSpec.model_validate({"url": url}).url == url


@pytest.mark.parametrize(
    "url",
    [
        "",
        "connect:8083",
        "ftp://connect:8083",
        "http://",
        "http:///path",
        "http://connect host:8083",
        "HTTP://connect:8083",
        " http://connect:8083",
    ],
)
def test_cluster_url_rejected(url: str) -> None:
    with pytest.raises(ValidationError) as info:
        ConnectClusterSpec.model_validate({"url": url})
    assert "url" in str(info.value)


def test_cluster_request_timeout_bounds() -> None:
    assert ConnectClusterSpec.model_validate({"url": "http://c:8083"}).request_timeout_seconds == 120.0
    for ok in (1, 600, 30.5):
        ConnectClusterSpec.model_validate({"url": "http://c:8083", "requestTimeoutSeconds": ok})
    for bad in (0, 0.5, 601):
        with pytest.raises(ValidationError):
            ConnectClusterSpec.model_validate({"url": "http://c:8083", "requestTimeoutSeconds": bad})


@pytest.mark.parametrize("model", [KeyRef, CertificateSource])
def test_key_ref_exactly_one(model: type[KeyRef]) -> None:
    ref = {"name": "s", "key": "k"}
    assert model.model_validate({"secret": ref}).secret is not None
    assert model.model_validate({"configMap": ref}).config_map is not None
    for body in ({}, {"secret": ref, "configMap": ref}, {"secret": None, "configMap": None}):
        with pytest.raises(ValidationError) as info:
            model.model_validate(body)
        assert "set exactly one of `secret` or `configMap`" in str(info.value)


def test_key_ref_fields_not_empty() -> None:
    with pytest.raises(ValidationError):
        KeyRef.model_validate({"secret": {"name": "", "key": "k"}})
    with pytest.raises(ValidationError):
        KeyRef.model_validate({"secret": {"name": "s"}})


def test_tls_ca_follows_key_ref_rule() -> None:
    ref = {"name": "s", "key": "ca.crt"}
    with pytest.raises(ValidationError):
        TLSSpec.model_validate({"ca": {"secret": ref, "configMap": ref}})
    tls = TLSSpec.model_validate({"ca": {"configMap": ref}, "insecureSkipVerify": True})
    assert tls.insecure_skip_verify is True


def test_authentication_spec() -> None:
    auth = AuthenticationSpec.model_validate({"type": "basic", "secretName": "creds"})
    assert (auth.username_key, auth.password_key, auth.token_key) == ("username", "password", "token")
    for bad in ({"type": "digest", "secretName": "creds"}, {"type": "bearer", "secretName": ""}, {"type": "basic"}):
        with pytest.raises(ValidationError):
            AuthenticationSpec.model_validate(bad)


def test_cluster_resource() -> None:
    cluster = ConnectClusterResource.model_validate(
        {
            "metadata": {"name": "main", "namespace": "kafka"},
            "spec": {"url": "http://connect:8083", "authentication": {"type": "bearer", "secretName": "t"}},
            "status": {"version": "3.9.0", "connectorPlugins": ["a"], "unknown": 1},
        }
    )
    assert cluster.status.version == "3.9.0"
    assert cluster.status.connector_plugins == ["a"]
    with pytest.raises(ValidationError):
        ConnectClusterResource.model_validate({"metadata": {"name": "m"}, "spec": {"url": "http://c", "urll": 1}})


# --------------------------------------------------------------------------- kubectl explain


def test_every_field_has_a_description_for_kubectl_explain() -> None:
    """`kubectl explain` shows the schema's descriptions: every spec and status field needs one."""
    missing = [
        f"{name} {path}"
        for name, schema in crd_schemas()
        for part in ("spec", "status")
        for path, node in schema_nodes(schema["properties"][part], f"$.{part}")
        if path != f"$.{part}" and not path.endswith(("[]", "{*}")) and not node.get("description", "").strip()
    ]
    assert missing == [], "fields without a description (add one in models/crds/):\n" + "\n".join(missing)


# --------------------------------------------------------------------------- CEL rules


def cel_rules() -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (name, path, rule)
        for name, schema in crd_schemas()
        for path, node in schema_nodes(schema)
        for rule in node.get("x-kubernetes-validations", [])
    ]


def test_every_cel_rule_has_a_message_and_only_known_keys() -> None:
    rules = cel_rules()
    assert len(rules) >= 8
    for name, path, rule in rules:
        assert set(rule) <= {"rule", "message", "fieldPath"}, f"{name} {path}: {rule}"
        assert rule["message"].strip(), f"{name} {path}: a rule without a message gives users the CEL source"


@pytest.mark.parametrize(
    ("model", "document", "message"),
    [
        (
            crds.AlterOffsetsSpec,
            {"fromConfigMap": {"name": "a"}, "toTimestamp": "2026-11-21T10:00:00Z"},
            "set exactly one of fromConfigMap and toTimestamp",
        ),
        (crds.AlterOffsetsSpec, {}, "set exactly one of fromConfigMap and toTimestamp"),
        (
            crds.AlterOffsetsSpec,
            {"toTimestamp": "2026-11-21T10:00:00Z", "applyOnChange": True},
            "applyOnChange needs fromConfigMap",
        ),
        (crds.KeyRef, {}, "set exactly one of `secret` or `configMap`"),
        (
            crds.KafkaMirrorMaker2Spec,
            {
                "clusters": [{"alias": "a", "bootstrapServers": "a:9092"}],
                "mirrors": [{"sourceCluster": "a", "targetCluster": "a"}],
            },
            "sourceCluster and targetCluster must differ",
        ),
    ],
)
def test_the_models_refuse_what_the_cel_rules_refuse_with_the_same_message(
    model: type[BaseModel], document: dict[str, Any], message: str
) -> None:
    """The CLI and the plugin build documents that never pass admission: the models say the same."""
    rule_messages = {rule["message"] for _, _, rule in cel_rules()}
    with pytest.raises(ValidationError, match=message.replace("`", ".")):
        model.model_validate(document)
    assert any(message in text for text in rule_messages)


def test_cel_toTimestamp_pattern_accepts_what_the_model_accepts() -> None:
    import re

    pattern = re.compile(crds.RFC3339_CEL)
    for text in ("2026-11-21T10:00:00Z", "2026-11-21t10:00:00.123+02:00", "2026-11-21 10:00:00-05:00"):
        assert pattern.match(text), text
        assert crds.parse_rfc3339(text) is not None, text
    for text in ("2026-11-21T10:00:00", "yesterday", "2026-11-21"):
        assert not pattern.match(text), text
        assert crds.parse_rfc3339(text) is None, text


def test_api_versions_page_shows_the_warning_and_versions_the_crds_have() -> None:
    """docs/api-versions.md quotes the deprecation warning kubectl prints and lists each served
    version: both from the generated CRDs, so the page cannot drift from them."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "api-versions.md").read_text()
    versions = crd_documents()["kafkaconnectors.yaml"]["spec"]["versions"]
    for version in versions:
        assert f"| `{version['name']}` | yes | {'yes' if version['storage'] else 'no'} |" in page
        if version.get("deprecated"):
            assert f"Warning: {version['deprecationWarning']}\n" in page
