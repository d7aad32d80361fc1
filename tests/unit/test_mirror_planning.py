"""Unit tests for the KafkaMirrorMaker2 part of ``connect_offsets.planning``.

``mirror_targets(resource, secrets)`` turns a KafkaMirrorMaker2 into one ``ConnectorTarget`` per
declared connector block plus resource-level conditions; ``plan_target`` then plans each target
like a KafkaConnector. Matrix covered:

* naming: ``<src>-><tgt>.MirrorSourceConnector|MirrorCheckpointConnector|MirrorHeartbeatConnector``,
  only for the blocks a mirror declares, in that order, across several mirrors; the ConfigMap key
  ``<src>--<tgt>.<Kind>.json`` (Strimzi's);
* config: name, connector.class, ByteArrayConverter for keys and values, ``source.cluster.*`` /
  ``target.cluster.*`` (alias, bootstrap.servers, each cluster ``config`` key with booleans as
  ``true``/``false``, each ``secretConfig`` key with its value from ``secrets``); topics /
  topics.exclude / groups per connector kind; tasks.max; the block ``config`` (stringified, ``None``
  dropped) overriding the derived keys;
* spec validation: unknown alias in a mirror (source or target), duplicate aliases, the same source
  and target, reserved keys in a block ``config``;
* target fields: owner, generation, class, state, autoRestart, list/alter ConfigMaps, the ConfigMap
  key and the ``spec.mirrors[i].<block>`` path; previous per-connector status (autoRestart counters,
  lastOffsetsOperation) carried over by name;
* annotations: the offsets operation reaches only the selected connector, with
  ``mirrormaker-connector`` (and ``reset-offset-syncs`` when present) as companions to remove;
  ``InvalidAnnotation`` for an operation without a connector, a connector without an operation, an
  unknown connector name (the message lists the valid ones) and an unknown operation;
* ``reset-offset-syncs``: topic and cluster for ``offset-syncs.topic.location`` source (default)
  and target; refused (``InvalidOffsetSyncsReset``, no reset tuple) with list/alter, a checkpoint
  or heartbeat connector, no or an unknown connector, or a value other than ``true``;
* ``plan_target`` on MM2 targets: create with the owner key; list; alter (valid source document on
  a STOPPED connector; wrong source cluster alias; non-zero checkpoint/heartbeat offsets; the
  document under the wrong key); reset with every companion removed; refusal messages naming
  ``spec.mirrors[i].<block>``; a failed request not repeated after the status carries it; no
  offsets action for the connectors that were not selected.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from connect_offsets.models.connect import ConnectorStatus
from connect_offsets.models.crds import (
    AutoRestartSpec,
    AutoRestartStatus,
    ConnectorState,
    KafkaMirrorMaker2Resource,
    OffsetsOperationStatus,
)
from connect_offsets.planning import (
    BYTES,
    Action,
    ConditionSpec,
    ConnectorTarget,
    MirrorPlan,
    Observed,
    OffsetsConfigMap,
    Plan,
    mirror_configmap_key,
    mirror_connector_name,
    mirror_targets,
    plan_target,
)
from connect_offsets.vocabulary import (
    ANNOTATION_MM2_CONNECTOR,
    ANNOTATION_OFFSETS,
    ANNOTATION_RESET_OFFSET_SYNCS,
    MIRROR_CLASSES,
    OWNER_CONFIG_KEY,
)
from tests.unit.planning_fixtures import handled

pytestmark = pytest.mark.unit

NOW = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)
NAME = "east-to-west"
NAMESPACE = "team-a"
OWNER = f"{NAMESPACE}/{NAME}"
KINDS = ("MirrorSourceConnector", "MirrorCheckpointConnector", "MirrorHeartbeatConnector")
BLOCKS = {
    "MirrorSourceConnector": "sourceConnector",
    "MirrorCheckpointConnector": "checkpointConnector",
    "MirrorHeartbeatConnector": "heartbeatConnector",
}
SOURCE = "east->west.MirrorSourceConnector"
CHECKPOINT = "east->west.MirrorCheckpointConnector"
HEARTBEAT = "east->west.MirrorHeartbeatConnector"
ALL_NAMES = [SOURCE, CHECKPOINT, HEARTBEAT]
JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="p";'
SECRETS = {("east-credentials", "jaas"): JAAS, ("west-truststore", "password"): "changeit"}
OFFSETS_KINDS = {"list_offsets", "alter_offsets", "reset_offsets"}
SOURCE_DOC = {
    "offsets": [{"partition": {"cluster": "east", "partition": 0, "topic": "orders"}, "offset": {"offset": 41}}]
}


# --------------------------------------------------------------------------- factories


def east(**extra: Any) -> dict[str, Any]:
    return {
        "alias": "east",
        "bootstrapServers": "east-kafka:9092",
        "config": {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512"},
        "secretConfig": {"sasl.jaas.config": {"name": "east-credentials", "key": "jaas"}},
        **extra,
    }


def west(**extra: Any) -> dict[str, Any]:
    return {"alias": "west", "bootstrapServers": "west-kafka:9092,west-kafka-2:9092", **extra}


def make_mirror(
    source: str = "east",
    target: str = "west",
    *,
    blocks: tuple[str, ...] = KINDS,
    **fields: Any,
) -> dict[str, Any]:
    """A mirror with an empty block for each connector kind in ``blocks``; ``fields`` are camelCase."""
    mirror: dict[str, Any] = {"sourceCluster": source, "targetCluster": target}
    for kind in blocks:
        mirror[BLOCKS[kind]] = {}
    mirror.update(fields)
    return mirror


def make_mm2(
    *,
    clusters: list[dict[str, Any]] | None = None,
    mirrors: list[dict[str, Any]] | None = None,
    annotations: dict[str, str] | None = None,
    status: dict[str, Any] | None = None,
    generation: int = 4,
) -> KafkaMirrorMaker2Resource:
    body: dict[str, Any] = {
        "apiVersion": "connect-offsets.io/v1beta1",
        "kind": "KafkaMirrorMaker2",
        "metadata": {
            "name": NAME,
            "namespace": NAMESPACE,
            "generation": generation,
            "resourceVersion": "200",
            "annotations": annotations or {},
        },
        "spec": {
            "clusters": clusters if clusters is not None else [east(), west()],
            "mirrors": mirrors if mirrors is not None else [make_mirror()],
        },
    }
    if status is not None:
        body["status"] = status
    return KafkaMirrorMaker2Resource.model_validate(body)


def offsets_annotations(operation: str | None, connector: str | None, syncs: str | None = None) -> dict[str, str]:
    values = {ANNOTATION_OFFSETS: operation, ANNOTATION_MM2_CONNECTOR: connector, ANNOTATION_RESET_OFFSET_SYNCS: syncs}
    return {key: value for key, value in values.items() if value is not None}


def plan_mm2(**kwargs: Any) -> MirrorPlan:
    return mirror_targets(make_mm2(**kwargs), SECRETS)


def by_name(mirror: MirrorPlan) -> dict[str, ConnectorTarget]:
    return {t.name: t for t in mirror.targets}


def connector_status(name: str, state: str = "STOPPED") -> ConnectorStatus:
    tasks = [] if state == "STOPPED" else [{"id": 0, "state": state, "worker_id": "w1:8083"}]
    return ConnectorStatus.model_validate(
        {"name": name, "connector": {"state": state, "worker_id": "w1:8083"}, "tasks": tasks, "type": "source"}
    )


def observe(target: ConnectorTarget, state: str = "STOPPED", configmap: OffsetsConfigMap | None = None) -> Observed:
    """An existing connector owned by the resource, with its desired config, in ``state``."""
    config = {**target.config, OWNER_CONFIG_KEY: target.owner}
    return Observed(NOW, None, True, config, connector_status(target.name, state), configmap)


def mm2_cm(connector: str, document: Any, *, name: str = "mm2-offsets", rv: str = "9") -> OffsetsConfigMap:
    text = document if isinstance(document, str) else json.dumps(document)
    return OffsetsConfigMap(name, True, rv, {mirror_configmap_key(connector): text})


def with_offsets_blocks(block: dict[str, Any] | None = None, **mirror_fields: Any) -> list[dict[str, Any]]:
    """One east->west mirror whose every block lists to and alters from ``mm2-offsets``, stopped."""
    block = block or {
        "state": "stopped",
        "listOffsets": {"toConfigMap": {"name": "mm2-offsets"}},
        "alterOffsets": {"fromConfigMap": {"name": "mm2-offsets"}},
    }
    blocks: dict[str, Any] = {field: dict(block) for field in BLOCKS.values()}
    return [make_mirror(**blocks, **mirror_fields)]


def selected_target(operation: str, connector: str, syncs: str | None = None, **kwargs: Any) -> ConnectorTarget:
    kwargs.setdefault("mirrors", with_offsets_blocks())
    mirror = plan_mm2(annotations=offsets_annotations(operation, connector, syncs), **kwargs)
    return by_name(mirror)[connector]


def kinds(plan: Plan) -> list[str]:
    return [a.kind for a in plan.actions]


def conditions(plan: Plan | MirrorPlan, type_: str) -> list[ConditionSpec]:
    return [c for c in plan.conditions if c.type == type_]


def removals(operation: str, connector: str, syncs: str | None = None) -> list[Action]:
    actions = [
        Action("remove_annotation", annotation=ANNOTATION_OFFSETS, annotation_value=operation),
        Action("remove_annotation", annotation=ANNOTATION_MM2_CONNECTOR, annotation_value=connector),
    ]
    if syncs is not None:
        actions.append(Action("remove_annotation", annotation=ANNOTATION_RESET_OFFSET_SYNCS, annotation_value=syncs))
    return [*actions, handled("200")]


def assert_refused(plan: Plan, operation: str, reason: str, *fragments: str) -> str:
    assert not any(a.kind in OFFSETS_KINDS or a.kind == "remove_annotation" for a in plan.actions), plan.actions
    assert plan.offsets_refusal is not None
    got_reason, message, permanent = plan.offsets_refusal
    assert (got_reason, permanent) == (reason, True)
    assert message.startswith(f"{operation} refused: ")
    for fragment in fragments:
        assert fragment in message, message
    assert conditions(plan, "OffsetsOperationFailed") == [
        ConditionSpec("OffsetsOperationFailed", "True", reason, message)
    ]
    return message


# --------------------------------------------------------------------------- names and keys


@pytest.mark.parametrize("kind", KINDS)
def test_connector_name_and_configmap_key(kind: str) -> None:
    name = mirror_connector_name("east", "west", kind)
    assert name == f"east->west.{kind}"
    assert mirror_configmap_key(name) == f"east--west.{kind}.json"


def test_configmap_key_keeps_hyphens_in_aliases() -> None:
    name = mirror_connector_name("east-kafka", "west-kafka", "MirrorSourceConnector")
    assert mirror_configmap_key(name) == "east-kafka--west-kafka.MirrorSourceConnector.json"


@pytest.mark.parametrize(
    "blocks",
    [
        KINDS,
        ("MirrorSourceConnector",),
        ("MirrorCheckpointConnector",),
        ("MirrorHeartbeatConnector",),
        ("MirrorSourceConnector", "MirrorHeartbeatConnector"),
        (),
    ],
)
def test_connectors_only_for_declared_blocks(blocks: tuple[str, ...]) -> None:
    mirror = plan_mm2(mirrors=[make_mirror(blocks=blocks)])
    assert [t.name for t in mirror.targets] == [f"east->west.{kind}" for kind in KINDS if kind in blocks]
    assert [t.class_name for t in mirror.targets] == [MIRROR_CLASSES[kind] for kind in KINDS if kind in blocks]
    assert mirror.conditions == []
    assert mirror.offset_syncs_reset is None


def test_targets_of_several_mirrors_keep_their_index() -> None:
    mirrors = [
        make_mirror(blocks=("MirrorSourceConnector", "MirrorCheckpointConnector")),
        make_mirror("west", "east", blocks=("MirrorSourceConnector",)),
    ]
    targets = plan_mm2(mirrors=mirrors).targets
    assert [(t.name, t.spec_path) for t in targets] == [
        (SOURCE, "spec.mirrors[0].sourceConnector"),
        (CHECKPOINT, "spec.mirrors[0].checkpointConnector"),
        ("west->east.MirrorSourceConnector", "spec.mirrors[1].sourceConnector"),
    ]
    reverse = targets[2]
    assert reverse.config["source.cluster.alias"] == "west"
    assert reverse.config["target.cluster.alias"] == "east"
    assert reverse.config["target.cluster.sasl.jaas.config"] == JAAS
    assert reverse.configmap_key == "west--east.MirrorSourceConnector.json"


# --------------------------------------------------------------------------- config


def test_source_connector_config() -> None:
    source = by_name(plan_mm2())[SOURCE]
    assert source.config == {
        "name": SOURCE,
        "connector.class": "org.apache.kafka.connect.mirror.MirrorSourceConnector",
        "key.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
        "value.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
        "source.cluster.alias": "east",
        "source.cluster.bootstrap.servers": "east-kafka:9092",
        "source.cluster.security.protocol": "SASL_SSL",
        "source.cluster.sasl.mechanism": "SCRAM-SHA-512",
        "source.cluster.sasl.jaas.config": JAAS,
        "target.cluster.alias": "west",
        "target.cluster.bootstrap.servers": "west-kafka:9092,west-kafka-2:9092",
    }


@pytest.mark.parametrize("kind", KINDS)
def test_every_connector_has_name_class_converters_and_both_clusters(kind: str) -> None:
    config = by_name(plan_mm2())[f"east->west.{kind}"].config
    assert config["name"] == f"east->west.{kind}"
    assert config["connector.class"] == MIRROR_CLASSES[kind] == f"org.apache.kafka.connect.mirror.{kind}"
    assert config["key.converter"] == config["value.converter"] == BYTES
    assert BYTES == "org.apache.kafka.connect.converters.ByteArrayConverter"
    assert config["source.cluster.alias"] == "east"
    assert config["source.cluster.bootstrap.servers"] == "east-kafka:9092"
    assert config["target.cluster.alias"] == "west"
    assert config["target.cluster.bootstrap.servers"] == "west-kafka:9092,west-kafka-2:9092"
    assert "tasks.max" not in config


def test_cluster_config_values_are_strings_on_the_right_side() -> None:
    clusters = [
        east(config={"enable.idempotence": True, "ssl.endpoint.identification.algorithm": "", "retries": 3}),
        west(config={"allow.auto.create.topics": False, "request.timeout.ms": 30000, "linger.ms": 2.5}),
    ]
    config = by_name(plan_mm2(clusters=clusters))[SOURCE].config
    assert config["source.cluster.enable.idempotence"] == "true"
    assert config["source.cluster.ssl.endpoint.identification.algorithm"] == ""
    assert config["source.cluster.retries"] == "3"
    assert config["target.cluster.allow.auto.create.topics"] == "false"
    assert config["target.cluster.request.timeout.ms"] == "30000"
    assert config["target.cluster.linger.ms"] == "2.5"
    assert "target.cluster.enable.idempotence" not in config
    assert "source.cluster.allow.auto.create.topics" not in config
    assert all(isinstance(value, str) for value in config.values())


def test_secret_config_values_come_from_the_secrets_dict() -> None:
    clusters = [
        east(),
        west(
            config={"ssl.truststore.type": "PKCS12"},
            secretConfig={"ssl.truststore.password": {"name": "west-truststore", "key": "password"}},
        ),
    ]
    targets = plan_mm2(clusters=clusters).targets
    for target in targets:
        assert target.config["source.cluster.sasl.jaas.config"] == JAAS
        assert target.config["target.cluster.ssl.truststore.password"] == "changeit"
        assert target.config["target.cluster.ssl.truststore.type"] == "PKCS12"
        assert "source.cluster.ssl.truststore.password" not in target.config
        assert "target.cluster.sasl.jaas.config" not in target.config


def test_secret_value_is_the_one_read_for_that_secret_and_key() -> None:
    secrets = {("east-credentials", "jaas"): "first", ("east-credentials", "other"): "second"}
    config = mirror_targets(make_mm2(), secrets).targets[0].config
    assert config["source.cluster.sasl.jaas.config"] == "first"


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("MirrorSourceConnector", {"topics": "orders.*", "topics.exclude": ".*internal"}),
        ("MirrorCheckpointConnector", {"topics.exclude": ".*internal", "groups": "app-.*"}),
        ("MirrorHeartbeatConnector", {}),
    ],
)
def test_patterns_per_connector_kind(kind: str, expected: dict[str, str]) -> None:
    mirrors = [make_mirror(topicsPattern="orders.*", topicsExcludePattern=".*internal", groupsPattern="app-.*")]
    config = by_name(plan_mm2(mirrors=mirrors))[f"east->west.{kind}"].config
    assert {key: config[key] for key in ("topics", "topics.exclude", "groups") if key in config} == expected


def test_no_patterns_no_filter_keys() -> None:
    for target in plan_mm2().targets:
        assert not {"topics", "topics.exclude", "groups"} & set(target.config)


def test_tasks_max_per_block() -> None:
    mirrors = [make_mirror(sourceConnector={"tasksMax": 4}, checkpointConnector={"tasksMax": 1})]
    targets = by_name(plan_mm2(mirrors=mirrors))
    assert targets[SOURCE].config["tasks.max"] == "4"
    assert targets[CHECKPOINT].config["tasks.max"] == "1"
    assert "tasks.max" not in targets[HEARTBEAT].config


def test_block_config_is_stringified_and_overrides_derived_keys() -> None:
    block = {
        "config": {
            "replication.factor": 3,
            "sync.topic.acls.enabled": False,
            "emit.heartbeats.enabled": True,
            "refresh.topics.interval.seconds": 1.5,
            "dropped": None,
            "topics": "payments",
            "key.converter": "org.example.Converter",
            "target.cluster.bootstrap.servers": "west-internal:9093",
        }
    }
    mirrors = [make_mirror(topicsPattern="orders.*", sourceConnector=block)]
    targets = by_name(plan_mm2(mirrors=mirrors))
    config = targets[SOURCE].config
    assert config["replication.factor"] == "3"
    assert config["sync.topic.acls.enabled"] == "false"
    assert config["emit.heartbeats.enabled"] == "true"
    assert config["refresh.topics.interval.seconds"] == "1.5"
    assert "dropped" not in config
    assert config["topics"] == "payments"
    assert config["key.converter"] == "org.example.Converter"
    assert config["value.converter"] == BYTES
    assert config["target.cluster.bootstrap.servers"] == "west-internal:9093"
    # Another block's config stays its own.
    assert "replication.factor" not in targets[CHECKPOINT].config
    assert targets[CHECKPOINT].config["key.converter"] == BYTES


# --------------------------------------------------------------------------- spec validation


@pytest.mark.parametrize(
    ("clusters", "mirrors", "fragments"),
    [
        pytest.param(
            [east(), west()],
            [make_mirror("north", "west")],
            ("mirrors[0].sourceCluster", "'north' is not one of the clusters (east, west)"),
            id="unknown-source-alias",
        ),
        pytest.param(
            [east(), west()],
            [make_mirror(), make_mirror("east", "south")],
            ("mirrors[1].targetCluster", "'south' is not one of the clusters (east, west)"),
            id="unknown-target-alias",
        ),
        pytest.param(
            [east(), west(), west(bootstrapServers="other:9092"), east()],
            [make_mirror()],
            ("clusters: duplicate alias(es) east, west",),
            id="duplicate-aliases",
        ),
        pytest.param(
            [east(), west()],
            [make_mirror(), make_mirror("west", "west")],
            ("mirrors[1]: sourceCluster and targetCluster must differ",),
            id="same-source-and-target",
        ),
    ],
)
def test_invalid_spec_is_rejected(
    clusters: list[dict[str, Any]], mirrors: list[dict[str, Any]], fragments: tuple[str, ...]
) -> None:
    with pytest.raises(ValidationError) as caught:
        make_mm2(clusters=clusters, mirrors=mirrors)
    for fragment in fragments:
        assert fragment in str(caught.value)


@pytest.mark.parametrize(
    "key", ["name", "connector.class", "tasks.max", "source.cluster.alias", "target.cluster.alias"]
)
@pytest.mark.parametrize("block", BLOCKS.values())
def test_reserved_keys_in_block_config_are_rejected(key: str, block: str) -> None:
    with pytest.raises(ValidationError) as caught:
        fields: dict[str, Any] = {block: {"config": {key: "x", "fine": "y"}}}
        make_mm2(mirrors=[make_mirror(**fields)])
    message = str(caught.value)
    assert f"mirrors.0.{block}.config" in message
    assert f"config must not contain {key}: the mirror sets them" in message


def test_all_reserved_keys_are_named_at_once() -> None:
    config = {"name": "n", "tasks.max": 2, "target.cluster.alias": "t"}
    with pytest.raises(ValidationError, match=r"config must not contain name, tasks\.max, target\.cluster\.alias"):
        make_mm2(mirrors=[make_mirror(sourceConnector={"config": config})])


@pytest.mark.parametrize("missing", ["clusters", "mirrors"])
def test_clusters_and_mirrors_must_not_be_empty(missing: str) -> None:
    with pytest.raises(ValidationError):
        spec: dict[str, Any] = {missing: []}
        make_mm2(**spec)


# --------------------------------------------------------------------------- target fields


def test_target_fields_come_from_the_block() -> None:
    source_block = {
        "state": "stopped",
        "autoRestart": {"enabled": True, "maxRestarts": 5},
        "listOffsets": {"toConfigMap": {"name": "list-out"}},
        "alterOffsets": {"fromConfigMap": {"name": "alter-in"}},
    }
    mirrors = [make_mirror(sourceConnector=source_block, checkpointConnector={"state": "paused"})]
    targets = by_name(plan_mm2(mirrors=mirrors, generation=11))
    source = targets[SOURCE]
    assert source.owner == OWNER
    assert source.generation == 11
    assert source.class_name == MIRROR_CLASSES["MirrorSourceConnector"]
    assert source.state is ConnectorState.STOPPED
    assert source.auto_restart == AutoRestartSpec(enabled=True, max_restarts=5)
    assert (source.list_configmap, source.alter_configmap) == ("list-out", "alter-in")
    assert source.configmap_key == "east--west.MirrorSourceConnector.json"
    assert source.spec_path == "spec.mirrors[0].sourceConnector"
    assert OWNER_CONFIG_KEY not in source.config

    checkpoint = targets[CHECKPOINT]
    assert checkpoint.state is ConnectorState.PAUSED
    assert checkpoint.auto_restart is None
    assert (checkpoint.list_configmap, checkpoint.alter_configmap) == (None, None)
    assert checkpoint.configmap_key == "east--west.MirrorCheckpointConnector.json"
    assert checkpoint.spec_path == "spec.mirrors[0].checkpointConnector"
    assert targets[HEARTBEAT].state is ConnectorState.RUNNING
    assert targets[HEARTBEAT].spec_path == "spec.mirrors[0].heartbeatConnector"


def test_previous_connector_status_is_carried_over_by_name() -> None:
    last = {
        "operation": "alter",
        "result": "Failed",
        "reason": "InvalidOffsets",
        "time": "2024-05-01T11:00:00Z",
        "message": "alter refused: ...",
        "request": "0123456789abcdef",
    }
    status = {
        "connectors": [
            {
                "name": SOURCE,
                "ready": True,
                "autoRestart": {"count": 2, "lastRestartTime": "2024-05-01T10:00:00Z"},
                "lastOffsetsOperation": last,
            },
            {"name": CHECKPOINT, "ready": False},
            {"name": "west->east.MirrorSourceConnector", "autoRestart": {"count": 9}},
        ]
    }
    targets = by_name(plan_mm2(status=status))
    source = targets[SOURCE]
    assert source.auto_restart_status == AutoRestartStatus(count=2, last_restart_time="2024-05-01T10:00:00Z")
    assert source.last_offsets_operation == OffsetsOperationStatus.model_validate(last)
    for other in (targets[CHECKPOINT], targets[HEARTBEAT]):
        assert other.auto_restart_status == AutoRestartStatus()
        assert other.last_offsets_operation is None


# --------------------------------------------------------------------------- annotations


def test_no_annotations_no_requests_no_conditions() -> None:
    mirror = plan_mm2(annotations={"unrelated": "x", ANNOTATION_OFFSETS + "-typo": "list"})
    assert all(t.annotations == {} and t.companion_annotations == () for t in mirror.targets)
    assert mirror.conditions == []
    assert mirror.offset_syncs_reset is None


@pytest.mark.parametrize("operation", ["list", "alter", "reset"])
@pytest.mark.parametrize("selected", ALL_NAMES)
def test_offsets_operation_applies_only_to_the_selected_connector(operation: str, selected: str) -> None:
    mirror = plan_mm2(annotations=offsets_annotations(operation, selected))
    assert mirror.conditions == []
    assert mirror.offset_syncs_reset is None
    for target in mirror.targets:
        if target.name == selected:
            assert target.annotations == {ANNOTATION_OFFSETS: operation}
            assert target.companion_annotations == ((ANNOTATION_MM2_CONNECTOR, selected),)
        else:
            assert target.annotations == {}
            assert target.companion_annotations == ()


@pytest.mark.parametrize(("operation", "syncs"), [("reset", "true"), ("list", "true"), ("reset", "false")])
def test_reset_offset_syncs_annotation_is_a_companion_when_present(operation: str, syncs: str) -> None:
    mirror = plan_mm2(annotations=offsets_annotations(operation, SOURCE, syncs))
    targets = by_name(mirror)
    assert targets[SOURCE].companion_annotations == (
        (ANNOTATION_MM2_CONNECTOR, SOURCE),
        (ANNOTATION_RESET_OFFSET_SYNCS, syncs),
    )
    assert targets[CHECKPOINT].companion_annotations == ()


def test_a_second_mirror_is_selected_by_its_own_name() -> None:
    reverse = "west->east.MirrorSourceConnector"
    mirrors = [make_mirror(), make_mirror("west", "east", blocks=("MirrorSourceConnector",))]
    mirror = plan_mm2(mirrors=mirrors, annotations=offsets_annotations("list", reverse))
    assert [t.name for t in mirror.targets if t.annotations] == [reverse]
    assert mirror.conditions == []


@pytest.mark.parametrize("operation", ["list", "alter", "reset"])
def test_offsets_without_connector_annotation(operation: str) -> None:
    mirror = plan_mm2(annotations={ANNOTATION_OFFSETS: operation})
    assert mirror.conditions == [
        ConditionSpec(
            "InvalidAnnotation",
            "True",
            "MissingAnnotation",
            f"{ANNOTATION_OFFSETS}={operation!r} needs {ANNOTATION_MM2_CONNECTOR}=<connector>, one of: "
            f"{SOURCE}, {CHECKPOINT}, {HEARTBEAT}",
        )
    ]
    assert all(t.annotations == {} for t in mirror.targets)


def test_connector_annotation_without_offsets() -> None:
    mirror = plan_mm2(annotations={ANNOTATION_MM2_CONNECTOR: SOURCE})
    [condition] = mirror.conditions
    assert (condition.type, condition.status, condition.reason) == ("InvalidAnnotation", "True", "MissingAnnotation")
    assert condition.message == (
        f"{ANNOTATION_MM2_CONNECTOR}={SOURCE!r} needs {ANNOTATION_OFFSETS}=list|alter|reset next to it"
    )
    assert all(t.annotations == {} and t.companion_annotations == () for t in mirror.targets)


@pytest.mark.parametrize(
    "selected", ["east->west.MirrorSourceConector", "east--west.MirrorSourceConnector", "MirrorSourceConnector", ""]
)
def test_unknown_connector_name_lists_the_valid_names(selected: str) -> None:
    mirror = plan_mm2(annotations=offsets_annotations("list", selected))
    [condition] = mirror.conditions
    assert (condition.type, condition.status, condition.reason) == ("InvalidAnnotation", "True", "UnknownConnector")
    assert condition.message == (
        f"{ANNOTATION_MM2_CONNECTOR}={selected!r} matches no connector of this resource; valid names: "
        f"{SOURCE}, {CHECKPOINT}, {HEARTBEAT}"
    )
    assert all(t.annotations == {} for t in mirror.targets)


def test_undeclared_block_is_an_unknown_connector() -> None:
    mirror = plan_mm2(
        mirrors=[make_mirror(blocks=("MirrorSourceConnector",))], annotations=offsets_annotations("list", HEARTBEAT)
    )
    [condition] = mirror.conditions
    assert condition.reason == "UnknownConnector"
    assert condition.message.endswith(f"valid names: {SOURCE}")


@pytest.mark.parametrize("operation", ["", "lst", "LIST", "delete"])
def test_unknown_offsets_operation(operation: str) -> None:
    mirror = plan_mm2(mirrors=with_offsets_blocks(), annotations=offsets_annotations(operation, SOURCE))
    assert mirror.conditions == [
        ConditionSpec(
            "InvalidAnnotation",
            "True",
            "UnknownValue",
            f"{ANNOTATION_OFFSETS}={operation!r} is not one of list, alter, reset, restore; nothing was done",
        )
    ]
    source = by_name(mirror)[SOURCE]
    plan = plan_target(source, observe(source, configmap=mm2_cm(SOURCE, SOURCE_DOC)))
    assert not OFFSETS_KINDS & set(kinds(plan))
    assert "remove_annotation" not in kinds(plan)
    assert plan.offsets_request is None


# --------------------------------------------------------------------------- reset-offset-syncs


@pytest.mark.parametrize("location", [None, "source"])
def test_offset_syncs_reset_on_the_source_cluster(location: str | None) -> None:
    block: dict[str, Any] = {"config": {"offset-syncs.topic.location": location}} if location else {}
    mirror = plan_mm2(
        mirrors=[make_mirror(sourceConnector=block)], annotations=offsets_annotations("reset", SOURCE, "true")
    )
    assert mirror.offset_syncs_reset == (SOURCE, "mm2-offset-syncs.west.internal", "east")
    assert mirror.conditions == []


def test_offset_syncs_reset_on_the_target_cluster() -> None:
    block = {"config": {"offset-syncs.topic.location": "target"}}
    mirror = plan_mm2(
        mirrors=[make_mirror(sourceConnector=block)], annotations=offsets_annotations("reset", SOURCE, "true")
    )
    assert mirror.offset_syncs_reset == (SOURCE, "mm2-offset-syncs.east.internal", "west")
    assert mirror.conditions == []


def test_offset_syncs_reset_of_the_second_mirror() -> None:
    reverse = "west->east.MirrorSourceConnector"
    mirrors = [make_mirror(), make_mirror("west", "east", blocks=("MirrorSourceConnector",))]
    mirror = plan_mm2(mirrors=mirrors, annotations=offsets_annotations("reset", reverse, "true"))
    assert mirror.offset_syncs_reset == (reverse, "mm2-offset-syncs.east.internal", "west")


@pytest.mark.parametrize(
    ("operation", "connector", "value"),
    [
        pytest.param("list", SOURCE, "true", id="with-list"),
        pytest.param("alter", SOURCE, "true", id="with-alter"),
        pytest.param(None, SOURCE, "true", id="without-operation"),
        pytest.param("reset", CHECKPOINT, "true", id="checkpoint-connector"),
        pytest.param("reset", HEARTBEAT, "true", id="heartbeat-connector"),
        pytest.param("reset", None, "true", id="no-connector"),
        pytest.param("reset", "east->west.Nope", "true", id="unknown-connector"),
        pytest.param("reset", SOURCE, "True", id="value-True"),
        pytest.param("reset", SOURCE, "yes", id="value-yes"),
        pytest.param("reset", SOURCE, "false", id="value-false"),
        pytest.param("reset", SOURCE, "", id="value-empty"),
    ],
)
def test_offset_syncs_reset_refused(operation: str | None, connector: str | None, value: str) -> None:
    mirror = plan_mm2(annotations=offsets_annotations(operation, connector, value))
    assert mirror.offset_syncs_reset is None
    refusals = [c for c in mirror.conditions if c.reason == "InvalidOffsetSyncsReset"]
    assert refusals == [
        ConditionSpec(
            "InvalidAnnotation",
            "True",
            "InvalidOffsetSyncsReset",
            f"{ANNOTATION_RESET_OFFSET_SYNCS}=true only goes with {ANNOTATION_OFFSETS}=reset of a "
            "MirrorSourceConnector; nothing in Kafka was touched",
        )
    ]


def test_reset_without_syncs_annotation_has_no_syncs_reset() -> None:
    mirror = plan_mm2(annotations=offsets_annotations("reset", SOURCE))
    assert mirror.offset_syncs_reset is None
    assert mirror.conditions == []


# --------------------------------------------------------------------------- plan_target on MM2 targets


def test_absent_mirror_connector_is_created_with_the_owner_key() -> None:
    source = by_name(plan_mm2())[SOURCE]
    plan = plan_target(source, Observed(NOW, None, True, None, None))
    assert plan.actions == [
        Action("create", config={**source.config, OWNER_CONFIG_KEY: OWNER}, initial_state="RUNNING")
    ]


def test_existing_mirror_connector_with_its_config_needs_nothing() -> None:
    for target in plan_mm2().targets:
        plan = plan_target(target, observe(target, "RUNNING"))
        assert plan.actions == []
        assert [(c.type, c.status, c.reason) for c in plan.conditions] == [("Ready", "True", "ConnectorRunning")]


@pytest.mark.parametrize("state", ["RUNNING", "PAUSED", "STOPPED"])
def test_list_writes_the_configmap_and_removes_both_annotations(state: str) -> None:
    block = {"state": state.lower(), "listOffsets": {"toConfigMap": {"name": "mm2-offsets"}}}
    target = selected_target("list", SOURCE, mirrors=[make_mirror(sourceConnector=block)])
    plan = plan_target(target, observe(target, state))
    assert plan.actions == [Action("list_offsets", configmap="mm2-offsets"), *removals("list", SOURCE)]
    assert plan.offsets_refusal is None
    assert plan.offsets_request is not None


def test_list_with_reset_offset_syncs_removes_it_too() -> None:
    target = selected_target("list", CHECKPOINT, "true")
    plan = plan_target(target, observe(target))
    assert plan.actions == [Action("list_offsets", configmap="mm2-offsets"), *removals("list", CHECKPOINT, "true")]


def test_valid_source_alter_on_stopped_connector() -> None:
    target = selected_target("alter", SOURCE)
    text = json.dumps(SOURCE_DOC, indent=2)
    plan = plan_target(target, observe(target, configmap=mm2_cm(SOURCE, text)))
    assert plan.actions == [
        Action(
            "alter_offsets",
            configmap="mm2-offsets",
            offsets_json='{"offsets":[{"partition":{"cluster":"east","partition":0,"topic":"orders"},'
            '"offset":{"offset":41}}]}',
        ),
        *removals("alter", SOURCE),
    ]
    assert plan.offsets_refusal is None
    assert plan.offsets_request is not None
    assert conditions(plan, "OffsetsOperationFailed") == []


def test_source_alter_with_a_tombstone_runs() -> None:
    target = selected_target("alter", SOURCE)
    doc = {"offsets": [{"partition": {"cluster": "east", "partition": 3, "topic": "orders"}, "offset": None}]}
    plan = plan_target(target, observe(target, configmap=mm2_cm(SOURCE, doc)))
    assert kinds(plan) == ["alter_offsets", "remove_annotation", "remove_annotation", "mark_handled"]


def test_source_alter_with_the_wrong_cluster_alias_is_refused() -> None:
    target = selected_target("alter", SOURCE)
    doc = {"offsets": [{"partition": {"cluster": "west", "partition": 0, "topic": "orders"}, "offset": {"offset": 1}}]}
    plan = plan_target(target, observe(target, configmap=mm2_cm(SOURCE, doc)))
    assert_refused(
        plan,
        "alter",
        "InvalidOffsets",
        "ConfigMap mm2-offsets key east--west.MirrorSourceConnector.json is invalid",
        "offsets[0].partition.cluster",
        'expected the connector\'s source.cluster.alias "east", got "west" (string)',
    )


@pytest.mark.parametrize(("connector", "task"), [(CHECKPOINT, "checkpoint"), (HEARTBEAT, "heartbeat")])
def test_non_zero_checkpoint_or_heartbeat_offset_is_refused(connector: str, task: str) -> None:
    partition = (
        {"group": "app", "topic": "east.orders", "partition": 0}
        if connector == CHECKPOINT
        else {"sourceClusterAlias": "east", "targetClusterAlias": "west"}
    )
    doc = {"offsets": [{"partition": partition, "offset": {"offset": 5}}]}
    target = selected_target("alter", connector)
    plan = plan_target(target, observe(target, configmap=mm2_cm(connector, doc)))
    assert_refused(
        plan,
        "alter",
        "InvalidOffsets",
        f"key {mirror_configmap_key(connector)} is invalid",
        "offsets[0].offset.offset: expected 0, got 5 (integer)",
        f"{task} tasks don't use offsets; the only accepted value is 0",
    )
    assert "alter_offsets" not in kinds(plan)


def test_checkpoint_alter_to_zero_runs() -> None:
    doc = {
        "offsets": [{"partition": {"group": "app", "topic": "east.orders", "partition": 0}, "offset": {"offset": 0}}]
    }
    target = selected_target("alter", CHECKPOINT)
    plan = plan_target(target, observe(target, configmap=mm2_cm(CHECKPOINT, doc)))
    assert kinds(plan) == ["alter_offsets", "remove_annotation", "remove_annotation", "mark_handled"]
    assert plan.actions[2] == Action(
        "remove_annotation", annotation=ANNOTATION_MM2_CONNECTOR, annotation_value=CHECKPOINT
    )


def test_alter_reads_the_mm2_key_not_offsets_json() -> None:
    target = selected_target("alter", SOURCE)
    configmap = OffsetsConfigMap("mm2-offsets", True, "9", {"offsets.json": json.dumps(SOURCE_DOC)})
    plan = plan_target(target, observe(target, configmap=configmap))
    assert_refused(
        plan,
        "alter",
        "OffsetsKeyMissing",
        "ConfigMap mm2-offsets has no key east--west.MirrorSourceConnector.json (keys: offsets.json)",
    )


def test_reset_on_stopped_connector_removes_every_companion() -> None:
    target = selected_target("reset", SOURCE, "true")
    plan = plan_target(target, observe(target))
    assert plan.actions == [Action("reset_offsets"), *removals("reset", SOURCE, "true")]
    assert plan.offsets_refusal is None


@pytest.mark.parametrize(
    ("mirrors", "operation", "connector", "reason", "fragment"),
    [
        pytest.param(
            [make_mirror(), make_mirror("west", "east", blocks=("MirrorSourceConnector",))],
            "alter",
            "west->east.MirrorSourceConnector",
            "MissingAlterOffsets",
            "spec.mirrors[1].sourceConnector.alterOffsets.fromConfigMap.name is not set",
            id="alter-second-mirror",
        ),
        pytest.param(
            [make_mirror()],
            "list",
            CHECKPOINT,
            "MissingListOffsets",
            "spec.mirrors[0].checkpointConnector.listOffsets.toConfigMap.name is not set",
            id="list-checkpoint",
        ),
        pytest.param(
            [make_mirror()],
            "list",
            SOURCE,
            "MissingListOffsets",
            "spec.mirrors[0].sourceConnector.listOffsets.toConfigMap.name is not set",
            id="list-source",
        ),
    ],
)
def test_refusals_name_the_mirror_block(
    mirrors: list[dict[str, Any]], operation: str, connector: str, reason: str, fragment: str
) -> None:
    target = selected_target(operation, connector, mirrors=mirrors)
    plan = plan_target(target, observe(target, configmap=mm2_cm(connector, SOURCE_DOC)))
    assert_refused(plan, operation, reason, fragment)


@pytest.mark.parametrize("operation", ["alter", "reset"])
def test_not_stopped_refusal_names_the_mirror_block(operation: str) -> None:
    block = {"alterOffsets": {"fromConfigMap": {"name": "mm2-offsets"}}}
    mirrors = [make_mirror(), make_mirror("west", "east", blocks=(), sourceConnector=block)]
    target = selected_target(operation, "west->east.MirrorSourceConnector", mirrors=mirrors)
    doc = {"offsets": [{"partition": {"cluster": "west", "partition": 0, "topic": "t"}, "offset": {"offset": 0}}]}
    plan = plan_target(target, observe(target, "RUNNING", configmap=mm2_cm(target.name, doc)))
    assert_refused(
        plan,
        operation,
        "ConnectorNotStopped",
        f"the connector is RUNNING in Connect; {operation} needs it STOPPED",
        "Set spec.mirrors[1].sourceConnector.state: stopped",
    )


def test_connectors_that_were_not_selected_get_no_offsets_action() -> None:
    mirror = plan_mm2(mirrors=with_offsets_blocks(), annotations=offsets_annotations("reset", SOURCE, "true"))
    for target in mirror.targets:
        plan = plan_target(target, observe(target))
        if target.name == SOURCE:
            removed = ["remove_annotation"] * 3
            assert kinds(plan) == ["reset_offsets", *removed, "mark_handled"]
        else:
            assert plan.actions == []
            assert plan.offsets_request is None


def test_failed_request_carried_in_status_is_not_repeated() -> None:
    annotations = offsets_annotations("alter", CHECKPOINT)
    bad = {"offsets": [{"partition": {"group": "g", "topic": "t", "partition": 0}, "offset": {"offset": 5}}]}
    configmap = mm2_cm(CHECKPOINT, bad)
    target = by_name(plan_mm2(mirrors=with_offsets_blocks(), annotations=annotations))[CHECKPOINT]
    first = plan_target(target, observe(target, configmap=configmap))
    assert first.offsets_refusal is not None
    reason, message, _ = first.offsets_refusal
    failed = {
        "operation": "alter",
        "result": "Failed",
        "reason": reason,
        "time": "2024-05-01T11:59:00Z",
        "message": message,
        "request": first.offsets_request,
    }
    status = {"connectors": [{"name": CHECKPOINT, "lastOffsetsOperation": failed}]}
    again = by_name(plan_mm2(mirrors=with_offsets_blocks(), annotations=annotations, status=status))[CHECKPOINT]
    second = plan_target(again, observe(again, configmap=configmap))
    assert second.offsets_refusal == ("Unchanged", message, True)
    assert conditions(second, "OffsetsOperationFailed") == [
        ConditionSpec("OffsetsOperationFailed", "True", "InvalidOffsets", message)
    ]
    # A new ConfigMap version is a new request.
    fixed = {"offsets": [{"partition": {"group": "g", "topic": "t", "partition": 0}, "offset": {"offset": 0}}]}
    third = plan_target(again, observe(again, configmap=mm2_cm(CHECKPOINT, fixed, rv="10")))
    assert kinds(third) == ["alter_offsets", "remove_annotation", "remove_annotation", "mark_handled"]


# --------------------------------------------------------------------------- regressions
# Bugs found while writing this matrix, fixed in planning.py / crds.py.


def test_none_in_cluster_config_is_dropped() -> None:
    mirror = plan_mm2(clusters=[east(config={"ssl.truststore.type": None}), west()])
    assert "source.cluster.ssl.truststore.type" not in by_name(mirror)[SOURCE].config


@pytest.mark.parametrize("key", ["alias", "bootstrap.servers"])
def test_cluster_config_cannot_override_alias_or_bootstrap(key: str) -> None:
    with pytest.raises(ValidationError, match=key):
        make_mm2(clusters=[east(config={key: "spoof"}), west()])


@pytest.mark.parametrize("where", ["cluster", "block"])
def test_nested_config_values_rejected(where: str) -> None:
    with pytest.raises(ValidationError, match="expected a string, number or boolean"):
        if where == "cluster":
            make_mm2(clusters=[east(config={"x": {"a": 1}}), west()])
        else:
            make_mm2(mirrors=[make_mirror(sourceConnector={"config": {"x": {"a": 1}}})])


@pytest.mark.parametrize(
    ("config", "topic"),
    [
        ({"replication.policy.separator": "_"}, "mm2-offset-syncs_west_internal"),
        (
            {"replication.policy.separator": "_", "replication.policy.internal.topic.separator.enabled": "false"},
            "mm2-offset-syncs.west.internal",
        ),
    ],
)
def test_offset_syncs_topic_uses_the_policy_separator(config: dict[str, str], topic: str) -> None:
    mirror = plan_mm2(
        mirrors=[make_mirror(sourceConnector={"config": config})],
        annotations=offsets_annotations("reset", SOURCE, "true"),
    )
    assert mirror.offset_syncs_reset == (SOURCE, topic, "east")


def test_offset_syncs_reset_refused_for_custom_replication_policy() -> None:
    mirror = plan_mm2(
        mirrors=[make_mirror(sourceConnector={"config": {"replication.policy.class": "com.example.Policy"}})],
        annotations=offsets_annotations("reset", SOURCE, "true"),
    )
    assert mirror.offset_syncs_reset is None
    assert any(c.reason == "InvalidOffsetSyncsReset" for c in mirror.conditions)


def test_offset_syncs_reset_refused_for_an_empty_separator() -> None:
    """Attacker review of issue 46, F6: MirrorMaker 2 keeps an empty separator
    (``mm2-offset-syncs<alias>internal``); taken for "." the reset deleted another topic."""
    mirror = plan_mm2(
        mirrors=[make_mirror(sourceConnector={"config": {"replication.policy.separator": ""}})],
        annotations=offsets_annotations("reset", SOURCE, "true"),
    )
    assert mirror.offset_syncs_reset is None
    (condition,) = [c for c in mirror.conditions if c.reason == "InvalidOffsetSyncsReset"]
    assert f"{SOURCE}'s config: replication.policy.separator is empty" in condition.message


@pytest.mark.parametrize(("replay_from", "stored"), [(5, {"offset": 4}), (1, {"offset": 0}), (0, None)])
def test_alter_in_replay_from_terms(replay_from: int, stored: dict[str, int] | None) -> None:
    """MirrorSourceConnector resumes at offset + 1: replayFrom N is stored as N - 1 (0: no offset)."""
    document = {
        "offsets": [
            {"partition": {"cluster": "east", "partition": 0, "topic": "orders"}, "offset": {"replayFrom": replay_from}}
        ]
    }
    mirror = plan_mm2(
        mirrors=[make_mirror(sourceConnector={"alterOffsets": {"fromConfigMap": {"name": "mm2-offsets"}}})],
        annotations=offsets_annotations("alter", SOURCE),
    )
    target = by_name(mirror)[SOURCE]
    configmap = OffsetsConfigMap("mm2-offsets", True, "7", {target.configmap_key: json.dumps(document)})
    plan = plan_target(target, observe(target, "STOPPED", configmap=configmap))
    alter = next(a for a in plan.actions if a.kind == "alter_offsets")
    assert alter.offsets_json is not None
    assert json.loads(alter.offsets_json)["offsets"][0]["offset"] == stored


@pytest.mark.parametrize("offset", [{"replayFrom": -1}, {"replayFrom": "5"}, {"replayFrom": 5, "offset": 4}])
def test_bad_replay_from_is_refused(offset: dict[str, object]) -> None:
    document = {"offsets": [{"partition": {"cluster": "east", "partition": 0, "topic": "orders"}, "offset": offset}]}
    mirror = plan_mm2(
        mirrors=[make_mirror(sourceConnector={"alterOffsets": {"fromConfigMap": {"name": "mm2-offsets"}}})],
        annotations=offsets_annotations("alter", SOURCE),
    )
    target = by_name(mirror)[SOURCE]
    configmap = OffsetsConfigMap("mm2-offsets", True, "7", {target.configmap_key: json.dumps(document)})
    plan = plan_target(target, observe(target, "STOPPED", configmap=configmap))
    assert not [a for a in plan.actions if a.kind == "alter_offsets"]
    assert plan.offsets_refusal is not None and plan.offsets_refusal[0] == "InvalidOffsets"
    assert "offsets[0].offset" in plan.offsets_refusal[1]
