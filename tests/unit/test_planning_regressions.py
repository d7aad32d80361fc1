"""Regression tests for planner bugs found by the planner test matrix (each fixed in planning.py).

1. restart-task values that str.isdigit() accepts but int() rejects; 2. offsets actions ordered
after a resume/pause; 3. FAILED connectors polled every 2 s; 4. alter validated against the old
config while a config update is pending; 5. unparsable lastRestartTime.
"""

import json
from datetime import timedelta

import pytest

from connect_offsets.offsets import FILE_STREAM_SOURCE_CLASS
from connect_offsets.planning import desired_config, plan_connector
from connect_offsets.vocabulary import ANNOTATION_OFFSETS, ANNOTATION_RESTART_TASK
from tests.unit.planning_fixtures import (
    NOW,
    VALID_DOC,
    alter_resource,
    auto_resource,
    conditions,
    kinds,
    make_resource,
    observe,
    offsets_cm,
)


@pytest.mark.parametrize("value", ["²", "①", "1" * 5000])
def test_bug1_restart_task_isdigit_but_not_int(value):
    resource = make_resource(annotations={ANNOTATION_RESTART_TASK: value})
    plan = plan_connector(resource, observe(resource))
    assert "restart_task" not in kinds(plan)
    assert conditions(plan, "InvalidAnnotation")


@pytest.mark.parametrize(
    ("desired", "op", "state_action"),
    [("running", "alter", "resume"), ("paused", "reset", "pause"), ("running", "reset", "resume")],
)
def test_bug2_offsets_action_planned_after_resume_or_pause(desired, op, state_action):
    resource = alter_resource(state=desired, annotations={ANNOTATION_OFFSETS: op})
    plan = plan_connector(resource, observe(resource, "STOPPED", configmap=offsets_cm(json.dumps(VALID_DOC))))
    k = kinds(plan)
    # before the fix: [state_action, f"{op}_offsets", "remove_annotation"] -> Connect answers 400 (not STOPPED)
    assert not (state_action in k and f"{op}_offsets" in k and k.index(state_action) < k.index(f"{op}_offsets")), k


def test_bug3_failed_connector_requeue_masks_auto_restart_backoff():
    resource = auto_resource(count=1, last=NOW - timedelta(seconds=30))
    plan = plan_connector(resource, observe(resource, "FAILED"))
    assert plan.actions == []
    assert plan.requeue_after == pytest.approx(90.0)  # before the fix: 2.0 (SETTLE_DELAY_S)


def test_bug3b_failed_connector_without_action_is_polled_every_2s():
    resource = make_resource()
    plan = plan_connector(resource, observe(resource, "FAILED"))
    assert plan.actions == []
    assert plan.requeue_after is None  # before the fix: 2.0, forever


def test_bug4_alter_validated_against_old_config_when_config_update_pending():
    resource = alter_resource(connector_class=FILE_STREAM_SOURCE_CLASS, config={"file": "/new.txt", "topic": "t"})
    old = {**desired_config(resource), "file": "/old.txt"}
    doc = {"offsets": [{"partition": {"filename": "/new.txt"}, "offset": {"position": 5}}]}
    plan = plan_connector(resource, observe(resource, "STOPPED", config=old, configmap=offsets_cm(json.dumps(doc))))
    assert kinds(plan)[0] == "update_config"
    # before the fix: ('InvalidOffsets', '... expected the connector\'s file "/old.txt", got "/new.txt" ...', True)
    assert plan.offsets_refusal is None or plan.offsets_refusal[2] is False, plan.offsets_refusal


@pytest.mark.parametrize("last", ["2024-05-01T11:00:00", "yesterday"])
def test_bug5_unparseable_last_restart_time(last):
    resource = make_resource(
        auto_restart={"enabled": True}, status={"autoRestart": {"count": 1, "lastRestartTime": last}}
    )
    plan_connector(resource, observe(resource, "FAILED"))
