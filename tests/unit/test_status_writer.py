"""Every status write goes through the kind's status model (issue 19, "one house").

The status writer (``reconcile.status.write_status``) takes the kind's status model built with
only the fields it sets, and serializes it in one place. A field the model does not declare cannot
be written: building the update raises ``TypeError`` (the API server would otherwise prune the field
without a word, since the CRD schema is generated from the same models), and no module that builds
status (reconcile, planning, lag, offsets) spells a status field's camelCase name itself.
"""

from __future__ import annotations

import ast
import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from connect_offsets.models import crds
from connect_offsets.models.crds import (
    Condition,
    ConnectClusterStatus,
    KafkaConnectorResource,
    KafkaConnectorStatus,
    KafkaMirrorMaker2Status,
    MirrorConnectorStatus,
    OffsetsOperationStatus,
    OffsetsProgressStatus,
    PendingOffsetsOperation,
    StatusModel,
)
from connect_offsets.planning import ConditionSpec
from connect_offsets.reconcile import mirrormaker2, status
from connect_offsets.reconcile.status import (
    CONDITION_KEYS,
    STATUS_MODELS,
    merge_conditions,
    status_fields,
    write_status,
)
from connect_offsets.vocabulary import CLUSTERS, CONNECTORS, MIRRORS
from tests.fakes import FakeKube

pytestmark = pytest.mark.unit

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
READY = [ConditionSpec("Ready", "True", "ConnectorRunning", "fine")]
PACKAGE = Path(status.__file__).parent.parent


def resource(plural: str, status_body: dict[str, Any] | None = None) -> tuple[FakeKube, dict[str, Any]]:
    kube = FakeKube()
    body: dict[str, Any] = {
        "kind": "KafkaConnector",
        "metadata": {"name": "c", "namespace": "ns", "generation": 3, "uid": "u", "resourceVersion": "1"},
        "spec": {"class": "X"},
        "status": status_body or {},
    }
    kube.resources[(plural, "ns", "c")] = body
    return kube, body


def status_models() -> list[type[StatusModel]]:
    return [
        m for m in vars(crds).values() if isinstance(m, type) and issubclass(m, StatusModel) and m is not StatusModel
    ]


# --- a field the model does not declare cannot be written ------------------------------------------


@pytest.mark.parametrize("model", status_models(), ids=lambda m: m.__name__)
def test_building_a_status_with_an_undeclared_field_is_a_type_error(model: type[StatusModel]) -> None:
    with pytest.raises(TypeError, match="declares no field not_a_status_field"):
        model(not_a_status_field=1)


def test_status_fields_are_built_by_python_name_not_by_their_camel_case_wire_name() -> None:
    with pytest.raises(TypeError, match="offsetsProgress"):
        KafkaConnectorStatus(offsetsProgress=None)
    with pytest.raises(TypeError, match="handledRequestIds"):
        KafkaMirrorMaker2Status(handledRequestIds=["a"])


def test_reading_a_status_stays_tolerant_of_fields_an_older_operator_wrote() -> None:
    parsed = KafkaConnectorResource.model_validate(
        {
            "metadata": {"name": "c"},
            "spec": {"class": "X"},
            "status": {
                "somethingOld": 1,
                "offsetsProgress": {"request": "r", "futureField": 2},
                "pendingOffsetsOperation": {"operation": "alter", "step": "Stopping", "started": "t", "old": 3},
            },
        }
    )
    assert parsed.status.offsets_progress == OffsetsProgressStatus(request="r")
    assert parsed.status.pending_offsets_operation is not None


def test_a_mirror_connector_entry_refuses_a_field_only_a_kafka_connector_has() -> None:
    """One target's pass reports a KafkaConnectorStatus; a MirrorMaker 2 connector's entry in
    status.connectors declares fewer fields, and one it lacks is an error, not a silent drop."""
    progress = OffsetsProgressStatus(request="r", backup="b")
    entry = mirrormaker2._entry_update(
        "a->b.MirrorSourceConnector",
        KafkaConnectorStatus(offsets_progress=progress, pending_offsets_operation=None, handled_request_ids=["x"]),
    )
    assert entry.model_fields_set == {"name", "offsets_progress", "pending_offsets_operation"}
    initial = crds.InitialOffsetsStatus(config_map="cm", step="Creating", time="t")
    with pytest.raises(TypeError, match="MirrorConnectorStatus declares no field initial_offsets"):
        mirrormaker2._entry_update("a->b.MirrorSourceConnector", KafkaConnectorStatus(initial_offsets=initial))


def test_a_new_pass_carries_over_the_kept_fields_of_a_connector_entry_and_computes_the_others() -> None:
    progress = OffsetsProgressStatus(request="r", backup="b")
    operation = OffsetsOperationStatus(operation="alter", result="Succeeded", time="t")
    old = MirrorConnectorStatus(
        name="a->b.MirrorSourceConnector",
        ready=False,
        reason="Old",
        connector_status={"state": "FAILED"},
        offsets_progress=progress,
        last_offsets_operation=operation,
    )
    new = MirrorConnectorStatus(name="a->b.MirrorSourceConnector", ready=True)
    kept = mirrormaker2._kept_entry_fields(new, old)
    assert mirrormaker2.KEPT_ENTRY_FIELDS.issubset(MirrorConnectorStatus.model_fields)
    assert kept.model_fields_set == {"name", "ready", *mirrormaker2.KEPT_ENTRY_FIELDS}
    assert (kept.ready, kept.reason, kept.connector_status) == (True, "", None)
    assert (kept.offsets_progress, kept.last_offsets_operation, kept.auto_restart) == (progress, operation, None)
    assert mirrormaker2._kept_entry_fields(new, None) is new


#: Where status is decided and built: the reconcile layer, the planner's outcomes, the lag monitor
#: (``lag.py``, or the ``lag/`` package), and the offsets documents (chunk progress).
STATUS_BUILDERS = ("reconcile", "planning", "lag", "offsets")


def status_builder_modules() -> list[Path]:
    return sorted(
        path
        for name in STATUS_BUILDERS
        for path in [*(PACKAGE / name).glob("*.py"), PACKAGE / f"{name}.py"]
        if path.is_file()
    )


def test_no_status_building_module_spells_a_status_field_by_its_wire_name() -> None:
    """Status fields are set through the models only: a camelCase status key in a module that
    builds status (a dict literal, ``status["..."]``) would bypass them."""
    wire_names = {
        info.alias
        for model in status_models()
        for name, info in model.model_fields.items()
        if info.alias is not None and info.alias != name
    }
    modules = status_builder_modules()
    assert {path.parent.name if path.parent != PACKAGE else path.stem for path in modules} == set(STATUS_BUILDERS)
    found = [
        f"{path.relative_to(PACKAGE)}:{node.lineno}: {node.value!r}"
        for path in modules
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant) and node.value in wire_names
    ]
    assert found == []


# --- the writer ----------------------------------------------------------------------------------


def test_merged_conditions_write_every_field_of_the_condition_model() -> None:
    assert set(CONDITION_KEYS) == {info.alias for info in Condition.model_fields.values()}
    (merged,) = merge_conditions([], READY, 3, "t")
    assert Condition.model_validate(merged).model_dump(by_alias=True) == merged


def test_each_kind_has_its_status_model() -> None:
    assert dict(STATUS_MODELS) == {
        CLUSTERS: ConnectClusterStatus,
        CONNECTORS: KafkaConnectorStatus,
        MIRRORS: KafkaMirrorMaker2Status,
    }


@pytest.mark.parametrize(
    ("plural", "update"),
    [
        (CONNECTORS, KafkaMirrorMaker2Status(handled_request_ids=["a"])),
        (MIRRORS, KafkaConnectorStatus(tasks_max=2)),
        (CLUSTERS, KafkaConnectorStatus(topics=["t"])),
    ],
)
def test_an_update_of_another_kind_is_refused_and_nothing_is_written(plural: str, update: StatusModel) -> None:
    kube, body = resource(plural)
    with pytest.raises(TypeError, match="status update is a"):
        asyncio.run(write_status(kube, plural, body, READY, NOW, update))
    assert kube.status_patches == [] and body["status"] == {}


@pytest.mark.parametrize("field", ["conditions", "observed_generation"])
def test_conditions_and_observed_generation_are_the_writers_own(field: str) -> None:
    update = KafkaConnectorStatus(**{field: [] if field == "conditions" else 1})
    with pytest.raises(TypeError, match="the writer's"):
        status_fields(update)


def test_only_the_fields_set_are_written_camel_case_and_none_removes_one() -> None:
    pending = PendingOffsetsOperation(operation="alter", step="Stopping", started="t")
    kube, body = resource(
        CONNECTORS,
        {"offsetsProgress": {"request": "r"}, "topics": ["old"], "pendingOffsetsOperation": {"x": 1}},
    )
    operation = OffsetsOperationStatus(operation="alter", result="Succeeded", time="t", backup=None)
    update = KafkaConnectorStatus(
        offsets_progress=None,  # removed: an explicit null in the merge patch
        initial_offsets=None,  # not there: nothing to remove
        last_offsets_operation=operation,
        pending_offsets_operation=pending,
        tasks_max=2,
    )
    assert status_fields(update) == {
        "offsetsProgress": None,
        "initialOffsets": None,
        # Nested objects: no None fields, defaults ("" reasons and messages) written.
        "lastOffsetsOperation": {
            "operation": "alter",
            "result": "Succeeded",
            "reason": "",
            "time": "t",
            "message": "",
        },
        "pendingOffsetsOperation": {
            "operation": "alter",
            "step": "Stopping",
            "source": "annotation",
            "started": "t",
            "reason": "",
            "message": "",
        },
        "tasksMax": 2,
    }
    asyncio.run(write_status(kube, CONNECTORS, body, READY, NOW, update))
    (patch,) = kube.status_patches
    assert patch["offsetsProgress"] is None and "initialOffsets" not in patch
    written = kube.resources[(CONNECTORS, "ns", "c")]["status"]
    assert "topics" not in patch and written["topics"] == ["old"]  # a field not set is left as it is
    # A record is written whole (issue 36): the previous record's fields the new one lacks are nulled.
    assert patch["pendingOffsetsOperation"]["x"] is None and "x" not in written["pendingOffsetsOperation"]
    assert "offsetsProgress" not in written and written["tasksMax"] == 2
    assert written["observedGeneration"] == 3
    assert written["conditions"] == [
        {
            "type": "Ready",
            "status": "True",
            "reason": "ConnectorRunning",
            "message": "fine",
            "lastTransitionTime": "2026-01-02T03:04:05Z",
            "observedGeneration": 3,
        }
    ]
    # The same update again changes nothing: not written again.
    asyncio.run(write_status(kube, CONNECTORS, body, READY, NOW, update))
    assert len(kube.status_patches) == 1


def test_a_status_update_is_merged_field_by_field() -> None:
    first = KafkaConnectorStatus(offsets_progress=OffsetsProgressStatus(request="r"), tasks_max=1)
    merged = first.updated(KafkaConnectorStatus(offsets_progress=None, topics=["t"]))
    assert merged.model_fields_set == {"offsets_progress", "tasks_max", "topics"}
    assert status_fields(merged) == {"offsetsProgress": None, "tasksMax": 1, "topics": ["t"]}
    assert first.offsets_progress is not None  # the first update is left as it was


def test_a_mirrormaker2_entry_is_written_without_its_none_fields() -> None:
    kube, body = resource(MIRRORS)
    entry = MirrorConnectorStatus(name="a->b.MirrorSourceConnector", ready=True, offsets_progress=None)
    asyncio.run(write_status(kube, MIRRORS, body, READY, NOW, KafkaMirrorMaker2Status(connectors=[entry])))
    assert kube.resources[(MIRRORS, "ns", "c")]["status"]["connectors"] == [
        {"name": "a->b.MirrorSourceConnector", "ready": True, "reason": "", "message": ""}
    ]


def test_a_transient_pass_keeps_a_standing_refusal_and_a_settled_pass_clears_it() -> None:
    """The one writer keeps an ApiServerRefused condition through every write of a pass that failed
    for a transient reason (the refusal still stands: dropped, the next pass would post its Event
    again), and only a pass that got past it writes it away."""
    refused = {
        "type": "ApiServerRefused",
        "status": "True",
        "reason": "Forbidden",
        "message": "get ConfigMap: 403",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
        "observedGeneration": 3,
    }
    unreachable = [ConditionSpec("Ready", "False", "ConnectClusterUnavailable", "timed out")]
    kube, body = resource(CONNECTORS, {"conditions": [refused]})
    asyncio.run(write_status(kube, CONNECTORS, body, unreachable, NOW, transient=True))
    written = kube.resources[(CONNECTORS, "ns", "c")]["status"]["conditions"]
    assert [c["type"] for c in written] == ["Ready", "ApiServerRefused"]
    assert written[1] == refused  # as it was: its transition time is not moved
    asyncio.run(write_status(kube, CONNECTORS, body, READY, NOW))
    assert [c["type"] for c in kube.resources[(CONNECTORS, "ns", "c")]["status"]["conditions"]] == ["Ready"]
