"""Unit tests for ``connect_offsets.planning``: the pure planner ``plan_connector(resource, observed)``.

Matrix covered:
* cluster unusable: only ``Ready=False ConnectClusterUnavailable``, no actions;
* connector absent: ``create`` with ``initial_state`` = spec.state (RUNNING/PAUSED/STOPPED) when the
  worker supports it, ``None`` when not; the config (name, connector.class, tasks.max, owner key
  ``connect-offsets.io/owner`` = ``ns/name``, values as strings, ``None`` dropped);
* ownership: another owner or no owner -> ``ConnectorOwnedElsewhere`` and no actions; the adopt
  annotation (``true`` only) takes an unowned connector over with an ``update_config``, never one another
  resource owns;
* config drift: different or extra keys -> ``update_config``; equal -> nothing;
* state enforcement: every desired state x observed RUNNING/PAUSED/STOPPED/FAILED/UNASSIGNED
  (paused + FAILED -> no pause);
* Ready: ConnectorRunning/Paused/Stopped, Progressing, ConnectorFailed (first trace line, task ids,
  1024-character cap), TasksNotRunning, StatusUnknown;
* offsets ``list``: with and without spec.listOffsets, in any connector state;
* offsets ``alter``: every refusal before a PATCH (MissingAlterOffsets, ConfigMapNotFound,
  OffsetsKeyMissing, InvalidOffsets for bad JSON / shape / empty list / FileStreamSource filename /
  sink partition types), ConnectorNotStopped (permanent), WaitingForStop (transient, requeued),
  success with compact JSON and the annotation removed;
* offsets ``reset``: stopped -> reset + remove annotation; not stopped -> refusal;
* permanent-failure memory and the request fingerprint (annotation value, generation, ConfigMap
  resourceVersion);
* annotations: invalid offsets / restart / restart-task values -> ``InvalidAnnotation`` with Ready
  computed normally; every valid restart value and task id;
* auto-restart: disabled/absent, first failure, inside and after the back-off, the 1 s requeue
  floor, maxRestarts, counter reset after a healthy period, ``auto_restart_backoff`` values;
* a Hypothesis property test over random annotations, spec, observed Connect state and ConfigMap
  contents: the planner never raises, conditions are well formed, and an alter/reset action only
  appears for a STOPPED connector without tasks (alter: only with a document that validates).
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from connect_offsets.models.connect import ConnectorStatus
from connect_offsets.models.crds import AutoRestartStatus, KafkaConnectorResource
from connect_offsets.offsets import (
    FILE_STREAM_SOURCE_CLASS,
    OffsetsValidationError,
    parse_offsets_document,
    validate_for_connector,
)
from connect_offsets.planning import (
    SETTLE_DELAY_S,
    Action,
    ConditionSpec,
    Observed,
    OffsetsConfigMap,
    Plan,
    auto_restart_backoff,
    desired_config,
    offsets_request_fingerprint,
    plan_connector,
)
from connect_offsets.vocabulary import (
    ANNOTATION_ADOPT,
    ANNOTATION_OFFSETS,
    ANNOTATION_RESTART,
    ANNOTATION_RESTART_TASK,
    OWNER_CONFIG_KEY,
)
from tests.unit.planning_fixtures import (
    CLASS,
    FAMILIES,
    NAME,
    NOW,
    OFFSETS_KINDS,
    OWNER,
    SINK_CLASS,
    VALID_DOC,
    absent,
    alter_resource,
    auto_resource,
    conditions,
    connector_status,
    handled,
    iso,
    kinds,
    make_resource,
    observe,
    offsets_cm,
    ready,
)

pytestmark = pytest.mark.unit


# --------------------------------------------------------------------------- factories


# --------------------------------------------------------------------------- cluster, create


def test_cluster_error_gives_only_cluster_unavailable() -> None:
    resource = make_resource(annotations={ANNOTATION_OFFSETS: "lst", ANNOTATION_RESTART: "true"}, list_to="out")
    observed = observe(resource, "FAILED", cluster_error="ConnectCluster main: GET / returned 503")
    plan = plan_connector(resource, observed)
    assert plan.actions == []
    assert plan.conditions == [
        ConditionSpec("Ready", "False", "ConnectClusterUnavailable", "ConnectCluster main: GET / returned 503")
    ]
    assert plan.requeue_after is None
    assert plan.offsets_refusal is None
    assert plan.auto_restart is None


@pytest.mark.parametrize("reason", ["ClusterNotAllowed", "ConnectorNameNotAllowed"])
def test_binding_refusal_names_its_reason_and_does_nothing(reason: str) -> None:
    resource = make_resource(annotations={ANNOTATION_OFFSETS: "reset"})
    observed = Observed(NOW, "ConnectCluster platform/shared refuses", True, None, None, cluster_error_reason=reason)
    plan = plan_connector(resource, observed)
    assert plan.actions == []
    assert plan.conditions == [ConditionSpec("Ready", "False", reason, "ConnectCluster platform/shared refuses")]


@pytest.mark.parametrize(
    ("state", "expected"),
    [(None, "RUNNING"), ("running", "RUNNING"), ("paused", "PAUSED"), ("stopped", "STOPPED")],
)
@pytest.mark.parametrize("supported", [True, False])
def test_create_initial_state(state: str | None, expected: str, supported: bool) -> None:
    resource = make_resource(state=state)
    plan = plan_connector(resource, absent(supports_initial_state=supported))
    assert kinds(plan) == ["create"]
    assert plan.actions[0].initial_state == (expected if supported else None)
    assert ready(plan) == ConditionSpec("Ready", "False", "Creating", "Creating the connector in Connect")
    assert plan.requeue_after == SETTLE_DELAY_S


def test_create_config_is_stringified_and_owned() -> None:
    resource = make_resource(
        config={
            "topic": "orders",
            "batch.size": 500,
            "ratio": 1.5,
            "errors.tolerance.enabled": True,
            "exactly.once": False,
            "left.out": None,
        },
        tasks_max=3,
    )
    plan = plan_connector(resource, absent())
    assert plan.actions[0].config == {
        "name": NAME,
        "connector.class": CLASS,
        "tasks.max": "3",
        "topic": "orders",
        "batch.size": "500",
        "ratio": "1.5",
        "errors.tolerance.enabled": "true",
        "exactly.once": "false",
        OWNER_CONFIG_KEY: OWNER,
    }
    assert all(isinstance(v, str) for v in plan.actions[0].config.values())


def test_create_without_tasks_max_omits_it() -> None:
    plan = plan_connector(make_resource(tasks_max=None), absent())
    config = plan.actions[0].config
    assert config is not None
    assert "tasks.max" not in config
    assert config[OWNER_CONFIG_KEY] == OWNER


def test_create_ignores_requests_but_reports_invalid_annotations() -> None:
    resource = make_resource(
        annotations={ANNOTATION_OFFSETS: "list", ANNOTATION_RESTART: "true", ANNOTATION_RESTART_TASK: "x"},
        list_to="out",
    )
    plan = plan_connector(resource, absent())
    assert kinds(plan) == ["create"]
    assert plan.offsets_refusal is None
    (invalid,) = conditions(plan, "InvalidAnnotation")
    assert ANNOTATION_RESTART_TASK in invalid.message


# --------------------------------------------------------------------------- ownership, config


def test_owned_by_another_resource_is_left_alone() -> None:
    resource = make_resource(annotations={ANNOTATION_RESTART: "true", ANNOTATION_OFFSETS: "reset"})
    config = {**desired_config(resource), OWNER_CONFIG_KEY: "other-ns/orders-source"}
    plan = plan_connector(resource, observe(resource, "STOPPED", config=config))
    assert plan.actions == []
    condition = ready(plan)
    assert (condition.status, condition.reason) == ("False", "ConnectorOwnedElsewhere")
    assert "by other-ns/orders-source" in condition.message
    assert f"{ANNOTATION_ADOPT} annotation applies only to connectors without an owner" in condition.message
    assert len(plan.conditions) == 1
    assert plan.offsets_refusal is None


def test_unowned_connector_is_left_alone() -> None:
    resource = make_resource()
    config = {k: v for k, v in desired_config(resource).items() if k != OWNER_CONFIG_KEY}
    plan = plan_connector(resource, observe(resource, config=config))
    assert plan.actions == []
    condition = ready(plan)
    assert condition.reason == "ConnectorOwnedElsewhere"
    assert "by something other than this operator" in condition.message


@pytest.mark.parametrize("value", ["false", "True", "yes", ""])
def test_adopt_needs_exactly_true(value: str) -> None:
    resource = make_resource(annotations={ANNOTATION_ADOPT: value})
    config = {k: v for k, v in desired_config(resource).items() if k != OWNER_CONFIG_KEY}
    plan = plan_connector(resource, observe(resource, config=config))
    assert plan.actions == []
    assert ready(plan).reason == "ConnectorOwnedElsewhere"


@pytest.mark.parametrize("previous_owner", ["other-ns/orders-source", "orders/other-resource", OWNER + "x"])
def test_adopt_never_takes_a_connector_another_resource_owns(previous_owner: str) -> None:
    """Adopt is for unowned connectors: another owner (another tenant's namespace, or a sibling
    resource in this one) stays the owner, and none of this resource's requests reach it."""
    resource = make_resource(annotations={ANNOTATION_ADOPT: "true", ANNOTATION_OFFSETS: "reset"})
    config = {**desired_config(resource), OWNER_CONFIG_KEY: previous_owner}
    plan = plan_connector(resource, observe(resource, "STOPPED", config=config))
    assert plan.actions == []
    condition = ready(plan)
    assert (condition.status, condition.reason) == ("False", "ConnectorOwnedElsewhere")
    assert f"by {previous_owner}" in condition.message
    assert "applies only to connectors without an owner" in condition.message
    assert plan.offsets_refusal is None


@pytest.mark.parametrize("empty_owner", [False, True])
def test_adopt_takes_the_connector_over(empty_owner: bool) -> None:
    resource = make_resource(annotations={ANNOTATION_ADOPT: "true"})
    config = {k: v for k, v in desired_config(resource).items() if k != OWNER_CONFIG_KEY}
    if empty_owner:
        config[OWNER_CONFIG_KEY] = ""  # an empty owner names no resource: unowned
    plan = plan_connector(resource, observe(resource, config=config))
    assert kinds(plan) == ["update_config"]
    assert plan.actions[0].config == desired_config(resource)
    assert plan.actions[0].config[OWNER_CONFIG_KEY] == OWNER  # type: ignore[index]
    assert ready(plan).reason == "Progressing"


@pytest.mark.parametrize(
    "change",
    [
        {"topic": "other"},
        {"extra.key": "from-somewhere"},
        {"tasks.max": "2"},
        {"connector.class": "org.example.Other"},
    ],
)
def test_config_difference_updates_config(change: dict[str, str]) -> None:
    resource = make_resource()
    plan = plan_connector(resource, observe(resource, config={**desired_config(resource), **change}))
    assert kinds(plan) == ["update_config"]
    assert plan.actions[0].config == desired_config(resource)
    assert plan.requeue_after == SETTLE_DELAY_S
    condition = ready(plan)
    assert (condition.status, condition.reason) == ("False", "Progressing")


def test_missing_config_key_updates_config() -> None:
    resource = make_resource(config={"topic": "orders", "poll.interval.ms": 100})
    config = {k: v for k, v in desired_config(resource).items() if k != "poll.interval.ms"}
    plan = plan_connector(resource, observe(resource, config=config))
    assert kinds(plan) == ["update_config"]


def test_equal_config_needs_nothing() -> None:
    resource = make_resource(config={"topic": "orders", "n": 5, "flag": True})
    plan = plan_connector(resource, observe(resource))
    assert plan.actions == []
    assert plan.requeue_after is None
    assert plan.conditions == [ConditionSpec("Ready", "True", "ConnectorRunning", "Connector is RUNNING in Connect")]


# --------------------------------------------------------------------------- state enforcement


@pytest.mark.parametrize(
    ("desired", "observed_state", "expected"),
    [
        ("running", "RUNNING", []),
        ("running", "PAUSED", ["resume"]),
        ("running", "STOPPED", ["resume"]),
        ("running", "FAILED", []),
        ("running", "UNASSIGNED", []),
        ("paused", "RUNNING", ["pause"]),
        ("paused", "PAUSED", []),
        ("paused", "STOPPED", ["pause"]),
        ("paused", "FAILED", []),  # Connect cannot pause a failed connector
        ("paused", "UNASSIGNED", ["pause"]),
        ("stopped", "RUNNING", ["stop"]),
        ("stopped", "PAUSED", ["stop"]),
        ("stopped", "STOPPED", []),
        ("stopped", "FAILED", ["stop"]),
        ("stopped", "UNASSIGNED", ["stop"]),
    ],
)
def test_state_enforcement(desired: str, observed_state: str, expected: list[str]) -> None:
    resource = make_resource(state=desired)
    plan = plan_connector(resource, observe(resource, observed_state))
    assert kinds(plan) == expected
    if expected:
        assert plan.requeue_after == SETTLE_DELAY_S
    if observed_state == desired.upper():
        assert plan.requeue_after is None
        assert ready(plan).status == "True"


def test_no_state_action_without_status() -> None:
    resource = make_resource(state="stopped")
    plan = plan_connector(resource, observe(resource, None))
    assert plan.actions == []
    condition = ready(plan)
    assert (condition.status, condition.reason) == ("False", "StatusUnknown")
    assert plan.requeue_after == SETTLE_DELAY_S


# --------------------------------------------------------------------------- Ready


@pytest.mark.parametrize(
    ("desired", "observed_state", "tasks", "reason"),
    [
        ("running", "RUNNING", ("RUNNING", "RUNNING"), "ConnectorRunning"),
        ("running", "RUNNING", (), "ConnectorRunning"),
        ("paused", "PAUSED", ("PAUSED",), "ConnectorPaused"),
        ("stopped", "STOPPED", (), "ConnectorStopped"),
    ],
)
def test_ready_true(desired: str, observed_state: str, tasks: tuple[str, ...], reason: str) -> None:
    resource = make_resource(state=desired)
    plan = plan_connector(resource, observe(resource, observed_state, tasks))
    assert plan.conditions == [ConditionSpec("Ready", "True", reason, f"Connector is {observed_state} in Connect")]
    assert plan.actions == []
    assert plan.requeue_after is None


def test_ready_progressing_while_state_moves() -> None:
    resource = make_resource(state="running")
    plan = plan_connector(resource, observe(resource, "PAUSED"))
    condition = ready(plan)
    assert (condition.status, condition.reason) == ("False", "Progressing")
    assert condition.message == "Connector is PAUSED; moving it to RUNNING"


def test_ready_progressing_while_config_updates() -> None:
    resource = make_resource()
    plan = plan_connector(resource, observe(resource, config={**desired_config(resource), "topic": "x"}))
    assert ready(plan).reason == "Progressing"


def test_ready_connector_failed_shows_first_trace_line() -> None:
    resource = make_resource()
    trace = "org.apache.kafka.connect.errors.ConnectException: boom\n\tat org.example.Foo.start(Foo.java:42)\n"
    status = connector_status("FAILED", ("RUNNING",), trace=trace)
    plan = plan_connector(resource, observe(resource, status=status))
    condition = ready(plan)
    assert (condition.status, condition.reason) == ("False", "ConnectorFailed")
    assert condition.message == (
        "Connect reports the connector FAILED: org.apache.kafka.connect.errors.ConnectException: boom"
    )
    assert "Foo.java" not in condition.message


def test_ready_task_failed_names_the_tasks() -> None:
    resource = make_resource(tasks_max=3)
    status = connector_status(
        "RUNNING",
        ("FAILED", "RUNNING", "FAILED"),
        task_traces={0: "   \n", 2: "java.lang.IllegalStateException: no table\n\tat X"},
    )
    plan = plan_connector(resource, observe(resource, status=status))
    condition = ready(plan)
    assert condition.reason == "ConnectorFailed"
    assert condition.message == "Connect reports the task(s) 0, 2 FAILED: java.lang.IllegalStateException: no table"
    assert plan.actions == []


def test_ready_failed_without_trace_and_message_cap() -> None:
    resource = make_resource()
    plan = plan_connector(resource, observe(resource, "FAILED"))
    assert ready(plan).message == "Connect reports the connector FAILED"
    long_trace = "java.lang.RuntimeException: " + "x" * 5000
    plan = plan_connector(resource, observe(resource, status=connector_status("FAILED", (), trace=long_trace)))
    assert len(ready(plan).message) == 1024


def test_ready_failed_takes_precedence_over_state_mismatch() -> None:
    resource = make_resource(state="paused")
    plan = plan_connector(resource, observe(resource, "FAILED"))
    assert ready(plan).reason == "ConnectorFailed"
    assert plan.actions == []


@pytest.mark.parametrize("task_state", ["UNASSIGNED", "PAUSED", "RESTARTING"])
def test_ready_tasks_not_running(task_state: str) -> None:
    resource = make_resource(tasks_max=2)
    plan = plan_connector(resource, observe(resource, "RUNNING", ("RUNNING", task_state)))
    condition = ready(plan)
    assert (condition.status, condition.reason) == ("False", "TasksNotRunning")
    assert plan.requeue_after == SETTLE_DELAY_S
    assert plan.actions == []


# --------------------------------------------------------------------------- offsets: list


@pytest.mark.parametrize("observed_state", ["RUNNING", "PAUSED", "STOPPED"])
def test_list_offsets(observed_state: str) -> None:
    resource = make_resource(annotations={ANNOTATION_OFFSETS: "list"}, list_to="offsets-out")
    plan = plan_connector(resource, observe(resource, observed_state))
    offsets_actions = [a for a in plan.actions if a.kind in (*OFFSETS_KINDS, "remove_annotation", "mark_handled")]
    assert offsets_actions == [
        Action("list_offsets", configmap="offsets-out"),
        Action("remove_annotation", annotation=ANNOTATION_OFFSETS, annotation_value="list"),
        handled(),
    ]
    assert plan.offsets_refusal is None
    assert plan.offsets_request == offsets_request_fingerprint(resource, None)
    assert conditions(plan, "OffsetsOperationFailed") == []
    assert conditions(plan, "InvalidAnnotation") == []


def test_list_offsets_without_spec_is_refused_permanently() -> None:
    resource = make_resource(annotations={ANNOTATION_OFFSETS: "list"})
    plan = plan_connector(resource, observe(resource))
    assert plan.actions == []
    assert plan.offsets_refusal is not None
    reason, message, permanent = plan.offsets_refusal
    assert (reason, permanent) == ("MissingListOffsets", True)
    assert message == "list refused: spec.listOffsets.toConfigMap.name is not set"
    assert conditions(plan, "OffsetsOperationFailed") == [
        ConditionSpec("OffsetsOperationFailed", "True", "MissingListOffsets", message)
    ]
    assert ready(plan).reason == "ConnectorRunning"


# --------------------------------------------------------------------------- offsets: alter


def assert_alter_refused(plan: Plan, reason: str, *fragments: str) -> None:
    assert not any(a.kind in OFFSETS_KINDS or a.kind == "remove_annotation" for a in plan.actions), plan.actions
    assert plan.offsets_refusal is not None
    got_reason, message, permanent = plan.offsets_refusal
    assert (got_reason, permanent) == (reason, True)
    assert message.startswith("alter refused: ")
    for fragment in fragments:
        assert fragment in message
    assert conditions(plan, "OffsetsOperationFailed") == [
        ConditionSpec("OffsetsOperationFailed", "True", reason, message)
    ]


def test_alter_without_spec_is_refused() -> None:
    resource = alter_resource(alter_from=None)
    plan = plan_connector(resource, observe(resource, "STOPPED", configmap=offsets_cm(json.dumps(VALID_DOC))))
    assert_alter_refused(plan, "MissingAlterOffsets", "spec.alterOffsets.fromConfigMap.name")


@pytest.mark.parametrize("configmap", [None, OffsetsConfigMap("offsets-in", False)])
def test_alter_configmap_missing(configmap: OffsetsConfigMap | None) -> None:
    resource = alter_resource()
    plan = plan_connector(resource, observe(resource, "STOPPED", configmap=configmap))
    assert_alter_refused(plan, "ConfigMapNotFound", "ConfigMap offsets-in does not exist")
    assert ready(plan).reason == "ConnectorStopped"


@pytest.mark.parametrize(
    ("data", "keys"),
    [({}, "keys: none"), ({"offsets.yaml": "x", "b.json": "{}"}, "keys: b.json, offsets.yaml")],
)
def test_alter_key_missing(data: dict[str, str], keys: str) -> None:
    resource = alter_resource()
    plan = plan_connector(resource, observe(resource, "STOPPED", configmap=offsets_cm(**data)))
    assert_alter_refused(plan, "OffsetsKeyMissing", "has no key offsets.json", keys)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("{", "not valid JSON"),
        ("", "not valid JSON"),
        ('{"offsets": [{"partition": {"a": 1}, "offset": NaN}]}', "not valid JSON"),
        ("[]", 'expected an object with the key "offsets"'),
        ('{"offsets": {}}', "expected a list"),
        ('{"partitions": []}', "offsets: missing"),
        ('{"offsets": [{"partition": {"a": {"b": 1}}, "offset": {"o": 1}}]}', "Connect rejects nested values"),
        ('{"offsets": [{"partition": {"a": 1}}]}', "offsets[0].offset: missing"),
        ('{"offsets": []}', "expected at least one entry"),
    ],
)
def test_alter_invalid_document(text: str, fragment: str) -> None:
    resource = alter_resource()
    plan = plan_connector(resource, observe(resource, "STOPPED", configmap=offsets_cm(text)))
    assert_alter_refused(plan, "InvalidOffsets", "ConfigMap offsets-in key offsets.json is invalid", fragment)
    assert ready(plan).reason == "ConnectorStopped"


def test_alter_file_stream_source_filename_mismatch() -> None:
    resource = alter_resource(connector_class=FILE_STREAM_SOURCE_CLASS, config={"file": "/data/in.txt", "topic": "t"})
    doc = {"offsets": [{"partition": {"filename": "/data/other.txt"}, "offset": {"position": 10}}]}
    plan = plan_connector(resource, observe(resource, "STOPPED", configmap=offsets_cm(json.dumps(doc))))
    assert_alter_refused(plan, "InvalidOffsets", "offsets[0].partition.filename", '"/data/in.txt"')


def test_alter_sink_partition_as_string_is_refused() -> None:
    resource = alter_resource(connector_class=SINK_CLASS, config={"topics": "orders"})
    doc = {"offsets": [{"partition": {"kafka_topic": "orders", "kafka_partition": "3"}, "offset": {"kafka_offset": 5}}]}
    status = connector_status("STOPPED", (), type_="sink")
    plan = plan_connector(resource, observe(resource, status=status, configmap=offsets_cm(json.dumps(doc))))
    assert_alter_refused(plan, "InvalidOffsets", "kafka_partition", "without quotes")


def test_alter_sink_uses_connect_type_over_class_name() -> None:
    # A class name that does not say "Sink" but Connect reports type "sink": sink rules apply.
    resource = alter_resource(connector_class="org.example.Uploader", config={"topics": "orders"})
    doc = {"offsets": [{"partition": {"table": "orders"}, "offset": {"id": 1}}]}
    status = connector_status("STOPPED", (), type_="sink")
    plan = plan_connector(resource, observe(resource, status=status, configmap=offsets_cm(json.dumps(doc))))
    assert_alter_refused(plan, "InvalidOffsets", "a sink connector partition")


def test_invalid_document_is_refused_before_the_state_check() -> None:
    resource = alter_resource(state="running")
    plan = plan_connector(resource, observe(resource, "RUNNING", configmap=offsets_cm("{")))
    assert_alter_refused(plan, "InvalidOffsets")
    assert plan.actions == []


def test_alter_on_running_connector_is_refused_permanently() -> None:
    resource = alter_resource(state="running")
    plan = plan_connector(resource, observe(resource, "RUNNING", configmap=offsets_cm(json.dumps(VALID_DOC))))
    assert_alter_refused(plan, "ConnectorNotStopped", "the connector is RUNNING", "alter needs it STOPPED")
    assert plan.actions == []


@pytest.mark.parametrize(
    ("observed_state", "tasks", "now_state", "expected_actions"),
    [
        ("RUNNING", ("RUNNING",), "RUNNING", ["stop"]),
        ("PAUSED", ("PAUSED",), "PAUSED", ["stop"]),
        ("STOPPED", ("RUNNING",), "STOPPED", []),  # tasks not gone yet
        (None, None, "unknown", []),
    ],
)
def test_alter_waits_for_stop(
    observed_state: str | None, tasks: tuple[str, ...] | None, now_state: str, expected_actions: list[str]
) -> None:
    resource = alter_resource(state="stopped")
    observed = observe(resource, observed_state, tasks, configmap=offsets_cm(json.dumps(VALID_DOC)))
    plan = plan_connector(resource, observed)
    assert kinds(plan) == expected_actions
    assert plan.offsets_refusal == ("WaitingForStop", f"waiting for Connect to report STOPPED (now {now_state})", False)
    assert plan.requeue_after == SETTLE_DELAY_S
    assert conditions(plan, "OffsetsOperationFailed") == []


def test_alter_runs_on_stopped_connector() -> None:
    resource = alter_resource()
    text = json.dumps(
        {
            "offsets": [
                {"partition": {"table": "orders", "shard": 1}, "offset": {"id": 42, "ts": "2024-01-01"}},
                {"partition": {"table": "ünïcode"}, "offset": None},
            ]
        },
        indent=4,
        ensure_ascii=False,
    )
    configmap = offsets_cm(text, rv="12")
    plan = plan_connector(resource, observe(resource, "STOPPED", configmap=configmap))
    expected_json = (
        '{"offsets":[{"partition":{"table":"orders","shard":1},"offset":{"id":42,"ts":"2024-01-01"}},'
        '{"partition":{"table":"ünïcode"},"offset":null}]}'
    )
    assert plan.actions == [
        Action("alter_offsets", configmap="offsets-in", offsets_json=expected_json),
        Action("remove_annotation", annotation=ANNOTATION_OFFSETS, annotation_value="alter"),
        handled(),
    ]
    assert json.loads(expected_json) == json.loads(text)
    assert plan.offsets_refusal is None
    assert plan.offsets_request == offsets_request_fingerprint(resource, configmap)
    assert conditions(plan, "OffsetsOperationFailed") == []
    assert ready(plan).reason == "ConnectorStopped"


def test_alter_file_stream_source_matching_filename_runs() -> None:
    resource = alter_resource(connector_class="FileStreamSource", config={"file": "/data/in.txt", "topic": "t"})
    doc = {"offsets": [{"partition": {"filename": "/data/in.txt"}, "offset": {"position": 10}}]}
    plan = plan_connector(resource, observe(resource, "STOPPED", configmap=offsets_cm(json.dumps(doc))))
    assert kinds(plan) == ["alter_offsets", "remove_annotation", "mark_handled"]


def test_alter_sink_with_consumed_topic_runs() -> None:
    resource = alter_resource(connector_class=SINK_CLASS, config={"topics": "orders, payments"})
    doc = {"offsets": [{"partition": {"kafka_topic": "payments", "kafka_partition": 0}, "offset": {"kafka_offset": 7}}]}
    plan = plan_connector(resource, observe(resource, "STOPPED", configmap=offsets_cm(json.dumps(doc))))
    assert kinds(plan) == ["alter_offsets", "remove_annotation", "mark_handled"]


# --------------------------------------------------------------------------- offsets: reset


def test_reset_runs_on_stopped_connector() -> None:
    resource = make_resource(annotations={ANNOTATION_OFFSETS: "reset"}, state="stopped")
    plan = plan_connector(resource, observe(resource, "STOPPED"))
    assert plan.actions == [
        Action("reset_offsets"),
        Action("remove_annotation", annotation=ANNOTATION_OFFSETS, annotation_value="reset"),
        handled(),
    ]
    assert plan.offsets_request == offsets_request_fingerprint(resource, None)
    assert plan.offsets_refusal is None


@pytest.mark.parametrize(
    ("desired", "observed_state"), [("running", "RUNNING"), ("paused", "PAUSED"), ("running", "FAILED")]
)
def test_reset_refused_when_not_stopped(desired: str, observed_state: str) -> None:
    resource = make_resource(annotations={ANNOTATION_OFFSETS: "reset"}, state=desired)
    plan = plan_connector(resource, observe(resource, observed_state))
    assert not any(a.kind in OFFSETS_KINDS or a.kind == "remove_annotation" for a in plan.actions)
    assert plan.offsets_refusal is not None
    reason, message, permanent = plan.offsets_refusal
    assert (reason, permanent) == ("ConnectorNotStopped", True)
    assert message.startswith(f"reset refused: the connector is {observed_state} in Connect; reset needs it STOPPED")
    (condition,) = conditions(plan, "OffsetsOperationFailed")
    assert condition.reason == "ConnectorNotStopped"


def test_reset_waits_when_stop_is_on_its_way() -> None:
    resource = make_resource(annotations={ANNOTATION_OFFSETS: "reset"}, state="stopped")
    plan = plan_connector(resource, observe(resource, "RUNNING"))
    assert kinds(plan) == ["stop"]
    assert plan.offsets_refusal is not None
    assert plan.offsets_refusal[0] == "WaitingForStop"
    assert plan.offsets_refusal[2] is False


# --------------------------------------------------------------------------- permanent-failure memory


def failed_status(request: str, operation: str = "alter", result: str = "Failed") -> dict[str, Any]:
    return {
        "lastOffsetsOperation": {
            "operation": operation,
            "result": result,
            "time": "2024-05-01T11:00:00Z",
            "message": f"{operation} refused: Connect answered 400",
            "request": request,
        }
    }


def test_failed_request_is_not_repeated() -> None:
    configmap = offsets_cm(json.dumps(VALID_DOC), rv="12")
    first = alter_resource()
    resource = alter_resource(status=failed_status(offsets_request_fingerprint(first, configmap)))
    plan = plan_connector(resource, observe(resource, "STOPPED", configmap=configmap))
    assert plan.actions == []
    assert plan.offsets_refusal == ("Unchanged", "alter refused: Connect answered 400", True)
    assert plan.offsets_request == offsets_request_fingerprint(resource, configmap)
    assert conditions(plan, "OffsetsOperationFailed") == [
        ConditionSpec("OffsetsOperationFailed", "True", "RequestFailed", "alter refused: Connect answered 400")
    ]
    assert ready(plan).reason == "ConnectorStopped"


def test_failed_list_request_is_not_repeated() -> None:
    first = make_resource(annotations={ANNOTATION_OFFSETS: "list"}, list_to="out")
    resource = make_resource(
        annotations={ANNOTATION_OFFSETS: "list"},
        list_to="out",
        status=failed_status(offsets_request_fingerprint(first, None), "list"),
    )
    plan = plan_connector(resource, observe(resource))
    assert plan.actions == []
    assert plan.offsets_refusal is not None
    assert plan.offsets_refusal[0] == "Unchanged"


def test_changed_configmap_runs_the_request_again() -> None:
    old = offsets_cm(json.dumps(VALID_DOC), rv="12")
    new = offsets_cm(json.dumps(VALID_DOC), rv="13")
    resource = alter_resource(status=failed_status(offsets_request_fingerprint(alter_resource(), old)))
    plan = plan_connector(resource, observe(resource, "STOPPED", configmap=new))
    assert kinds(plan) == ["alter_offsets", "remove_annotation", "mark_handled"]
    assert plan.offsets_request == offsets_request_fingerprint(resource, new)
    assert plan.offsets_request != offsets_request_fingerprint(resource, old)


def test_changed_generation_runs_the_request_again() -> None:
    configmap = offsets_cm(json.dumps(VALID_DOC), rv="12")
    fingerprint = offsets_request_fingerprint(alter_resource(generation=3), configmap)
    resource = alter_resource(generation=4, status=failed_status(fingerprint))
    plan = plan_connector(resource, observe(resource, "STOPPED", configmap=configmap))
    assert kinds(plan) == ["alter_offsets", "remove_annotation", "mark_handled"]


def test_other_operation_is_not_blocked_by_a_failed_one() -> None:
    failed = offsets_request_fingerprint(alter_resource(), None)
    resource = make_resource(annotations={ANNOTATION_OFFSETS: "reset"}, state="stopped", status=failed_status(failed))
    plan = plan_connector(resource, observe(resource, "STOPPED"))
    assert kinds(plan) == ["reset_offsets", "remove_annotation", "mark_handled"]


def test_succeeded_request_with_same_fingerprint_runs() -> None:
    configmap = offsets_cm(json.dumps(VALID_DOC), rv="12")
    fingerprint = offsets_request_fingerprint(alter_resource(), configmap)
    resource = alter_resource(status=failed_status(fingerprint, result="Succeeded"))
    plan = plan_connector(resource, observe(resource, "STOPPED", configmap=configmap))
    assert kinds(plan) == ["alter_offsets", "remove_annotation", "mark_handled"]


def test_fingerprint_inputs() -> None:
    base = alter_resource()
    cm = offsets_cm("{}", rv="5")
    value = offsets_request_fingerprint(base, cm)
    assert len(value) == 16
    assert int(value, 16) >= 0
    assert value == offsets_request_fingerprint(alter_resource(), offsets_cm("different text", rv="5"))
    others = {
        offsets_request_fingerprint(base, None),
        offsets_request_fingerprint(base, offsets_cm("{}", rv="6")),
        offsets_request_fingerprint(base, OffsetsConfigMap("offsets-in", False)),
        offsets_request_fingerprint(alter_resource(generation=4), cm),
        offsets_request_fingerprint(alter_resource(annotations={ANNOTATION_OFFSETS: "reset"}), cm),
    }
    assert value not in others
    assert len(others) == 5


# --------------------------------------------------------------------------- annotations


@pytest.mark.parametrize("value", ["", "lst", "LIST", " list", "list ", "none", "alter,reset"])
def test_invalid_offsets_annotation(value: str) -> None:
    resource = make_resource(annotations={ANNOTATION_OFFSETS: value}, list_to="out", alter_from="in", state="stopped")
    plan = plan_connector(resource, observe(resource, "STOPPED", configmap=offsets_cm(json.dumps(VALID_DOC))))
    assert plan.actions == []
    assert plan.offsets_refusal is None
    assert plan.offsets_request is None
    (condition,) = conditions(plan, "InvalidAnnotation")
    assert (condition.status, condition.reason) == ("True", "UnknownValue")
    assert f"{ANNOTATION_OFFSETS}={value!r}" in condition.message
    assert "list, alter, reset" in condition.message
    assert ready(plan) == ConditionSpec("Ready", "True", "ConnectorStopped", "Connector is STOPPED in Connect")


@pytest.mark.parametrize(
    ("value", "include_tasks", "only_failed"),
    [
        ("true", False, False),
        ("TRUE", False, False),
        ("includeTasks", True, False),
        ("onlyFailed", False, True),
        ("includeTasks,onlyFailed", True, True),
        ("onlyFailed, includeTasks", True, True),
        ("includetasks , onlyfailed", True, True),
    ],
)
def test_restart_annotation(value: str, include_tasks: bool, only_failed: bool) -> None:
    resource = make_resource(annotations={ANNOTATION_RESTART: value})
    plan = plan_connector(resource, observe(resource))
    assert plan.actions == [
        Action("restart", include_tasks=include_tasks, only_failed=only_failed, automatic=False),
        Action("remove_annotation", annotation=ANNOTATION_RESTART, annotation_value=value),
    ]
    assert conditions(plan, "InvalidAnnotation") == []


@pytest.mark.parametrize("value", ["", "false", "yes", "includeTasks;onlyFailed", "all"])
def test_invalid_restart_annotation(value: str) -> None:
    resource = make_resource(annotations={ANNOTATION_RESTART: value})
    plan = plan_connector(resource, observe(resource))
    assert plan.actions == []
    (condition,) = conditions(plan, "InvalidAnnotation")
    assert f"{ANNOTATION_RESTART}={value!r}" in condition.message
    assert ready(plan).reason == "ConnectorRunning"


@pytest.mark.parametrize(("value", "task_id"), [("2", 2), ("0", 0), (" 3 ", 3), ("007", 7)])
def test_restart_task_annotation(value: str, task_id: int) -> None:
    resource = make_resource(annotations={ANNOTATION_RESTART_TASK: value})
    plan = plan_connector(resource, observe(resource))
    assert plan.actions == [
        Action("restart_task", task_id=task_id),
        Action("remove_annotation", annotation=ANNOTATION_RESTART_TASK, annotation_value=value),
    ]
    assert conditions(plan, "InvalidAnnotation") == []


@pytest.mark.parametrize("value", ["x", "", "-1", "1.5", "two", "0x2"])
def test_invalid_restart_task_annotation(value: str) -> None:
    resource = make_resource(annotations={ANNOTATION_RESTART_TASK: value})
    plan = plan_connector(resource, observe(resource))
    assert plan.actions == []
    (condition,) = conditions(plan, "InvalidAnnotation")
    assert f"{ANNOTATION_RESTART_TASK}={value!r} is not a task id" in condition.message
    assert ready(plan).reason == "ConnectorRunning"


def test_all_annotation_problems_in_one_condition() -> None:
    resource = make_resource(
        annotations={ANNOTATION_OFFSETS: "LIST", ANNOTATION_RESTART: "no", ANNOTATION_RESTART_TASK: "x"}
    )
    plan = plan_connector(resource, observe(resource))
    (condition,) = conditions(plan, "InvalidAnnotation")
    positions = [
        condition.message.index(f"{ANNOTATION_OFFSETS}='LIST'"),
        condition.message.index(f"; {ANNOTATION_RESTART}='no'"),
        condition.message.index(f"; {ANNOTATION_RESTART_TASK}='x'"),
    ]
    assert positions == sorted(positions)


def test_restart_and_restart_task_together() -> None:
    resource = make_resource(annotations={ANNOTATION_RESTART: "includeTasks", ANNOTATION_RESTART_TASK: "1"})
    plan = plan_connector(resource, observe(resource))
    assert kinds(plan) == ["restart", "remove_annotation", "restart_task", "remove_annotation"]


# --------------------------------------------------------------------------- auto-restart


AUTO_RESTART = Action("restart", include_tasks=True, only_failed=True, automatic=True)


@pytest.mark.parametrize("auto_restart", [None, {"enabled": False}, {"enabled": False, "maxRestarts": 5}])
def test_auto_restart_disabled(auto_restart: dict[str, Any] | None) -> None:
    resource = make_resource(auto_restart=auto_restart)
    plan = plan_connector(resource, observe(resource, "FAILED"))
    assert plan.actions == []
    assert plan.auto_restart is None
    assert conditions(plan, "AutoRestartExhausted") == []


def test_auto_restart_defaults_to_enabled_when_present() -> None:
    resource = make_resource(auto_restart={})
    plan = plan_connector(resource, observe(resource, "FAILED"))
    assert plan.actions == [AUTO_RESTART]


@pytest.mark.parametrize(
    ("state", "tasks"),
    [("FAILED", ("RUNNING",)), ("RUNNING", ("RUNNING", "FAILED")), ("FAILED", ("FAILED",))],
)
def test_auto_restart_first_failure(state: str, tasks: tuple[str, ...]) -> None:
    resource = auto_resource()
    plan = plan_connector(resource, observe(resource, state, tasks))
    assert plan.actions == [AUTO_RESTART]
    assert plan.auto_restart == AutoRestartStatus(count=1, last_restart_time="2024-05-01T12:00:00Z")
    assert ready(plan).reason == "ConnectorFailed"


def test_auto_restart_waits_for_the_back_off() -> None:
    # count 1 -> 2 minutes; restarted 30 s ago: look again in 90 s. (A task failure: the connector
    # itself is RUNNING, so no settle requeue interferes; see the report for the FAILED-connector case.)
    resource = auto_resource(count=1, last=NOW - timedelta(seconds=30))
    plan = plan_connector(resource, observe(resource, "RUNNING", ("FAILED",)))
    assert plan.actions == []
    assert plan.auto_restart is None
    assert plan.requeue_after == pytest.approx(90.0)


def test_auto_restart_requeue_has_a_one_second_floor() -> None:
    # Restarted 119.5 s ago with a 120 s back-off: 0.5 s left, requeued after 1 s.
    resource = make_resource(
        auto_restart={"enabled": True},
        status={"autoRestart": {"count": 1, "lastRestartTime": "2024-05-01T11:58:00.500000+00:00"}},
    )
    plan = plan_connector(resource, observe(resource, "RUNNING", ("FAILED",)))
    assert plan.actions == []
    assert plan.requeue_after == 1.0


@pytest.mark.parametrize("elapsed", [timedelta(minutes=2), timedelta(minutes=2, seconds=1), timedelta(hours=5)])
def test_auto_restart_after_the_back_off(elapsed: timedelta) -> None:
    resource = auto_resource(count=1, last=NOW - elapsed)
    plan = plan_connector(resource, observe(resource, "FAILED"))
    assert plan.actions == [AUTO_RESTART]
    assert plan.auto_restart == AutoRestartStatus(count=2, last_restart_time=iso(NOW))


def test_auto_restart_after_counter_reset_is_immediate() -> None:
    resource = auto_resource(count=0, last=NOW - timedelta(seconds=1))
    plan = plan_connector(resource, observe(resource, "FAILED"))
    assert plan.actions == [AUTO_RESTART]
    assert plan.auto_restart == AutoRestartStatus(count=1, last_restart_time=iso(NOW))


@pytest.mark.parametrize(("count", "max_restarts"), [(3, 3), (5, 3), (0, 0)])
def test_auto_restart_exhausted(count: int, max_restarts: int) -> None:
    resource = auto_resource(count=count, last=NOW - timedelta(hours=2), maxRestarts=max_restarts)
    plan = plan_connector(resource, observe(resource, "FAILED"))
    assert plan.actions == []
    assert plan.auto_restart is None
    (condition,) = conditions(plan, "AutoRestartExhausted")
    assert (condition.status, condition.reason) == ("True", "MaxRestartsReached")
    assert f"Restarted {count} time(s)" in condition.message
    assert ANNOTATION_RESTART in condition.message
    assert ready(plan).reason == "ConnectorFailed"


def test_auto_restart_below_max_restarts() -> None:
    resource = auto_resource(count=2, last=NOW - timedelta(hours=2), maxRestarts=3)
    plan = plan_connector(resource, observe(resource, "FAILED"))
    assert plan.actions == [AUTO_RESTART]
    assert plan.auto_restart == AutoRestartStatus(count=3, last_restart_time=iso(NOW))


def test_auto_restart_counter_resets_after_healthy_period() -> None:
    last = NOW - timedelta(minutes=7)  # count 2 -> 6 minutes back-off
    resource = auto_resource(count=2, last=last)
    plan = plan_connector(resource, observe(resource, "RUNNING"))
    assert plan.actions == []
    assert plan.auto_restart == AutoRestartStatus(count=0, last_restart_time=iso(last))
    assert ready(plan).reason == "ConnectorRunning"


def test_auto_restart_counter_kept_while_healthy_for_less_than_the_back_off() -> None:
    resource = auto_resource(count=2, last=NOW - timedelta(minutes=5))
    plan = plan_connector(resource, observe(resource, "RUNNING"))
    assert plan.auto_restart is None
    assert plan.actions == []


def test_auto_restart_not_for_stopped_spec_or_missing_status() -> None:
    resource = make_resource(auto_restart={"enabled": True}, state="stopped")
    plan = plan_connector(resource, observe(resource, "FAILED"))
    assert plan.actions == [Action("stop")]
    assert plan.auto_restart is None
    resource = auto_resource()
    plan = plan_connector(resource, observe(resource, None))
    assert plan.actions == []
    assert plan.auto_restart is None


@pytest.mark.parametrize(
    ("count", "minutes"),
    [(0, 0), (1, 2), (2, 6), (3, 12), (4, 20), (5, 30), (6, 42), (7, 56), (8, 60), (9, 60), (100, 60)],
)
def test_auto_restart_backoff(count: int, minutes: int) -> None:
    assert auto_restart_backoff(count) == timedelta(minutes=minutes)


# --------------------------------------------------------------------------- property test

KNOWN_ANNOTATIONS = [ANNOTATION_OFFSETS, ANNOTATION_RESTART, ANNOTATION_RESTART_TASK, ANNOTATION_ADOPT]
CONNECT_STATES = ["RUNNING", "PAUSED", "STOPPED", "FAILED", "UNASSIGNED", "RESTARTING"]
TASK_STATES = ["RUNNING", "PAUSED", "FAILED", "UNASSIGNED", "RESTARTING"]
VALID_DOCS = [json.dumps(doc) for _, _, doc in FAMILIES.values()]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=12,
)
annotation_values = st.one_of(
    st.sampled_from(
        ["list", "alter", "reset", "true", "includeTasks", "onlyFailed", "includeTasks,onlyFailed", "1", " 0 ", ""]
    ),
    st.text(max_size=12),
)
annotations_st = st.dictionaries(
    st.one_of(st.sampled_from(KNOWN_ANNOTATIONS), st.text(max_size=20)), annotation_values, max_size=5
)
operations = st.sampled_from(["list", "alter", "reset"])
random_offsets_texts = st.one_of(
    st.sampled_from(VALID_DOCS),  # valid, but maybe not for this connector
    st.text(max_size=60),
    json_values.map(json.dumps),
    st.lists(st.fixed_dictionaries({"partition": json_values, "offset": json_values}), max_size=3).map(
        lambda entries: json.dumps({"offsets": entries})
    ),
)
tasks_st = st.lists(st.tuples(st.sampled_from(TASK_STATES), st.one_of(st.none(), st.text(max_size=30))), max_size=3)


@st.composite
def configmaps(draw: st.DrawFn, valid_text: str, focus: bool) -> OffsetsConfigMap | None:
    kinds_ = ["document"] if focus else ["none", "missing", "other-keys", "document", "document", "document"]
    kind = draw(st.sampled_from(kinds_))
    if kind == "none":
        return None
    if kind == "missing":
        return OffsetsConfigMap("offsets-in", False)
    rv = draw(st.sampled_from(["1", "2", ""]))
    if kind == "other-keys":
        return OffsetsConfigMap(
            "offsets-in", True, rv, draw(st.dictionaries(st.text(max_size=10), st.text(max_size=10), max_size=2))
        )
    text = draw(st.one_of(st.just(valid_text), random_offsets_texts))
    return OffsetsConfigMap("offsets-in", True, rv, {"offsets.json": text})


@st.composite
def connector_statuses(draw: st.DrawFn, type_: str, focus: bool) -> ConnectorStatus | None:
    if not draw(st.sampled_from([True] * 7 + [False])):
        return None
    # STOPPED is where offsets requests act: make it common (Hypothesis favours the first element).
    state = draw(st.sampled_from(["STOPPED", *CONNECT_STATES] if focus else [*CONNECT_STATES, "STOPPED"]))
    tasks = [] if state == "STOPPED" and draw(st.sampled_from([True, True, True, False])) else draw(tasks_st)
    return ConnectorStatus.model_validate(
        {
            "name": NAME,
            "connector": {"state": state, "trace": draw(st.one_of(st.none(), st.text(max_size=30)))},
            "tasks": [{"id": i, "state": s, "trace": t} for i, (s, t) in enumerate(tasks)],
            "type": draw(st.sampled_from([type_, type_, None, "source", "sink"])),
        }
    )


@st.composite
def scenarios(draw: st.DrawFn, focus_on_alter: bool = False) -> tuple[KafkaConnectorResource, Observed]:
    """A resource and what the service observed; ``focus_on_alter``: an owned connector, a usable
    cluster and an ``alter`` request with a ConfigMap, so the rarer paths are reached often."""
    connector_class = draw(st.sampled_from(sorted(FAMILIES)))
    family_config, type_, valid_doc = FAMILIES[connector_class]
    config: dict[str, Any] = draw(
        st.dictionaries(
            st.text(min_size=1, max_size=10).filter(lambda k: k not in ("name", "connector.class", "tasks.max")),
            st.one_of(st.text(max_size=10), st.integers(), st.booleans(), st.none()),
            max_size=3,
        )
    )
    if draw(st.integers(0, 3)):
        config.update(family_config)

    annotations = draw(annotations_st)
    offsets_value = "alter" if focus_on_alter else draw(st.one_of(operations, operations, st.none(), annotation_values))
    if offsets_value is not None:
        annotations[ANNOTATION_OFFSETS] = offsets_value

    status: dict[str, Any] = {}
    if draw(st.booleans()):
        minutes = draw(st.integers(min_value=0, max_value=120))
        last = draw(st.sampled_from([iso(NOW - timedelta(minutes=minutes)), None]))
        status["autoRestart"] = {"count": draw(st.integers(min_value=0, max_value=12)), "lastRestartTime": last}
    auto = draw(
        st.one_of(
            st.none(),
            st.fixed_dictionaries(
                {"enabled": st.booleans(), "maxRestarts": st.one_of(st.none(), st.integers(min_value=0, max_value=5))}
            ),
        )
    )
    resource_kwargs: dict[str, Any] = {
        "annotations": annotations,
        "state": draw(st.sampled_from([None, "running", "paused", "stopped"])),
        "config": config,
        "tasks_max": draw(st.one_of(st.none(), st.integers(min_value=1, max_value=10))),
        "connector_class": connector_class,
        "auto_restart": auto,
        "list_to": draw(st.sampled_from([None, "offsets-out", "offsets-out"])),
        "alter_from": "offsets-in" if focus_on_alter else draw(st.sampled_from([None, "offsets-in", "offsets-in"])),
        "generation": draw(st.integers(min_value=0, max_value=2)),
    }
    configmap = draw(configmaps(json.dumps(valid_doc), focus_on_alter))
    if draw(st.booleans()):
        # A remembered offsets result: sometimes exactly this request's fingerprint.
        fingerprint = offsets_request_fingerprint(
            make_resource(**resource_kwargs), configmap if offsets_value == "alter" else None
        )
        status["lastOffsetsOperation"] = {
            "operation": draw(operations),
            "result": draw(st.sampled_from(["Succeeded", "Failed"])),
            "time": iso(NOW),
            "message": draw(st.text(max_size=20)),
            "request": draw(st.one_of(st.none(), st.just(fingerprint), st.text("0123456789abcdef", max_size=16))),
        }
    resource = make_resource(**resource_kwargs, status=status)

    observed_config: dict[str, str] | None = None
    choices = ["owned", "drifted"] if focus_on_alter else ["absent", "owned", "owned", "owned", "drifted", "foreign"]
    config_choice = draw(st.sampled_from([*choices, "unowned"]))
    if config_choice != "absent":
        observed_config = desired_config(resource)
        if config_choice == "drifted":
            observed_config[draw(st.text(max_size=10))] = draw(st.text(max_size=10))
        elif config_choice == "foreign":
            observed_config[OWNER_CONFIG_KEY] = draw(st.text(max_size=20))
        elif config_choice == "unowned":
            del observed_config[OWNER_CONFIG_KEY]
    observed = Observed(
        now=NOW + timedelta(minutes=draw(st.integers(min_value=0, max_value=180))),
        cluster_error=None if focus_on_alter else draw(st.sampled_from([*[None] * 8, "unreachable", ""])),
        supports_initial_state=draw(st.booleans()),
        config=observed_config,
        status=draw(connector_statuses(type_, focus_on_alter)) if observed_config is not None else None,
        alter_configmap=configmap,
    )
    return resource, observed


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario=scenarios())
def test_planner_property(scenario: tuple[KafkaConnectorResource, Observed]) -> None:
    check_plan_invariants(*scenario)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario=scenarios(focus_on_alter=True))
def test_planner_property_alter(scenario: tuple[KafkaConnectorResource, Observed]) -> None:
    check_plan_invariants(*scenario)


def check_plan_invariants(resource: KafkaConnectorResource, observed: Observed) -> None:
    plan = plan_connector(resource, observed)

    assert len(conditions(plan, "Ready")) == 1
    for condition in plan.conditions:
        assert condition.type
        assert condition.reason
        assert condition.status in ("True", "False", "Unknown")
    assert len({c.type for c in plan.conditions}) == len(plan.conditions)
    if plan.requeue_after is not None:
        assert plan.requeue_after > 0
    if observed.cluster_error is not None:
        assert plan.actions == []
    if observed.config is None:
        assert kinds(plan) in ([], ["create"])

    offsets_actions = [a for a in plan.actions if a.kind in OFFSETS_KINDS]
    event(f"offsets: {offsets_actions[0].kind if offsets_actions else 'none'}")
    event(f"refusal: {plan.offsets_refusal[0] if plan.offsets_refusal else 'none'}")
    assert len(offsets_actions) <= 1
    if offsets_actions:
        assert plan.offsets_refusal is None
        action = offsets_actions[0]
        value = resource.metadata.annotations[ANNOTATION_OFFSETS]
        assert action.kind == f"{value}_offsets"
        index = plan.actions.index(action)
        assert plan.actions[index + 1] == Action(
            "remove_annotation", annotation=ANNOTATION_OFFSETS, annotation_value=value
        )
        if action.kind == "list_offsets":
            assert resource.spec.list_offsets is not None
            assert action.configmap == resource.spec.list_offsets.to_config_map.name
        else:
            assert observed.status is not None
            assert observed.status.is_stopped
        if action.kind == "alter_offsets":
            configmap = observed.alter_configmap
            assert configmap is not None
            assert configmap.exists
            assert resource.spec.alter_offsets is not None
            try:
                document = parse_offsets_document(configmap.data["offsets.json"])
                is_sink = observed.status.type == "sink" if observed.status.type else None
                validate_for_connector(document, resource.spec.class_, observed.config or {}, is_sink=is_sink)
            except OffsetsValidationError as error:  # pragma: no cover - the assertion's message
                raise AssertionError(f"alter planned for an invalid document: {error}") from error
            assert action.offsets_json == document.to_compact_json()
