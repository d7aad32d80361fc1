"""Resources, observations and helpers shared by the planner's unit tests (one place, no test
module importing another)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from connect_offsets.models.connect import ConnectorStatus
from connect_offsets.models.crds import KafkaConnectorResource, KafkaMirrorMaker2Resource
from connect_offsets.offsets import (
    FILE_STREAM_SOURCE_CLASS,
    MIRROR_SOURCE_CLASS,
)
from connect_offsets.planning import (
    Action,
    ConditionSpec,
    Observed,
    OffsetsConfigMap,
    Plan,
    desired_config,
)
from connect_offsets.vocabulary import (
    ANNOTATION_HANDLED_REQUEST,
    ANNOTATION_OFFSETS,
)

pytestmark = pytest.mark.unit


NOW = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)


NAME = "orders-source"


NAMESPACE = "team-a"


OWNER = f"{NAMESPACE}/{NAME}"


CLASS = "org.example.OrdersSourceConnector"


SINK_CLASS = "org.example.OrdersSinkConnector"


OFFSETS_KINDS = {"list_offsets", "alter_offsets", "reset_offsets"}


VALID_DOC = {"offsets": [{"partition": {"table": "orders"}, "offset": {"id": 42}}]}


_OWNED = object()  # sentinel: "the config this resource would write", see observe()


def make_resource(
    *,
    annotations: dict[str, str] | None = None,
    state: str | None = None,
    config: dict[str, Any] | None = None,
    tasks_max: int | None = 1,
    connector_class: str = CLASS,
    auto_restart: dict[str, Any] | None = None,
    list_to: str | None = None,
    alter_from: str | None = None,
    status: dict[str, Any] | None = None,
    generation: int = 3,
    name: str = NAME,
    namespace: str = NAMESPACE,
) -> KafkaConnectorResource:
    spec: dict[str, Any] = {"class": connector_class, "config": config if config is not None else {"topic": "orders"}}
    if tasks_max is not None:
        spec["tasksMax"] = tasks_max
    if state is not None:
        spec["state"] = state
    if auto_restart is not None:
        spec["autoRestart"] = auto_restart
    if list_to is not None:
        spec["listOffsets"] = {"toConfigMap": {"name": list_to}}
    if alter_from is not None:
        spec["alterOffsets"] = {"fromConfigMap": {"name": alter_from}}
    body: dict[str, Any] = {
        "apiVersion": "connect-offsets.io/v1beta1",
        "kind": "KafkaConnector",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "generation": generation,
            "resourceVersion": "100",
            "annotations": annotations or {},
        },
        "spec": spec,
    }
    if status is not None:
        body["status"] = status
    return KafkaConnectorResource.model_validate(body)


def connector_status(
    state: str = "RUNNING",
    tasks: list[str] | tuple[str, ...] = ("RUNNING",),
    *,
    trace: str | None = None,
    task_traces: dict[int, str] | None = None,
    type_: str | None = "source",
) -> ConnectorStatus:
    task_traces = task_traces or {}
    return ConnectorStatus.model_validate(
        {
            "name": NAME,
            "connector": {"state": state, "worker_id": "w1:8083", "trace": trace},
            "tasks": [
                {"id": i, "state": s, "worker_id": "w1:8083", "trace": task_traces.get(i)} for i, s in enumerate(tasks)
            ],
            "type": type_,
        }
    )


def default_tasks(state: str) -> tuple[str, ...]:
    """Tasks as Connect reports them for a connector in ``state``."""
    return {"RUNNING": ("RUNNING",), "PAUSED": ("PAUSED",), "STOPPED": (), "FAILED": ("RUNNING",)}.get(
        state, ("UNASSIGNED",)
    )


def observe(
    resource: KafkaConnectorResource,
    state: str | None = "RUNNING",
    tasks: list[str] | tuple[str, ...] | None = None,
    *,
    config: Any = _OWNED,
    status: ConnectorStatus | None = None,
    configmap: OffsetsConfigMap | None = None,
    supports_initial_state: bool = True,
    now: datetime = NOW,
    cluster_error: str | None = None,
) -> Observed:
    """An existing connector owned by ``resource`` with its desired config, in ``state``."""
    if config is _OWNED:
        config = desired_config(resource)
    if status is None and state is not None:
        status = connector_status(state, default_tasks(state) if tasks is None else tasks)
    return Observed(
        now=now,
        cluster_error=cluster_error,
        supports_initial_state=supports_initial_state,
        config=config,
        status=status,
        alter_configmap=configmap,
    )


def absent(supports_initial_state: bool = True) -> Observed:
    return Observed(NOW, None, supports_initial_state, None, None)


def offsets_cm(text: str | None = None, *, name: str = "offsets-in", rv: str = "7", **data: str) -> OffsetsConfigMap:
    if text is not None:
        data["offsets.json"] = text
    return OffsetsConfigMap(name, True, rv, dict(data))


def handled(version: str = "100") -> Action:
    """What a finished request's removal also does: mark its instance handled (the version of the
    body it was planned from; "100" is ``make_resource``'s)."""
    return Action("mark_handled", annotation=ANNOTATION_HANDLED_REQUEST, annotation_value=version)


def kinds(plan: Plan) -> list[str]:
    return [a.kind for a in plan.actions]


def conditions(plan: Plan, type_: str) -> list[ConditionSpec]:
    return [c for c in plan.conditions if c.type == type_]


def ready(plan: Plan) -> ConditionSpec:
    found = conditions(plan, "Ready")
    assert len(found) == 1, plan.conditions
    return found[0]


def iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def alter_resource(**kwargs: Any) -> KafkaConnectorResource:
    kwargs.setdefault("annotations", {ANNOTATION_OFFSETS: "alter"})
    kwargs.setdefault("alter_from", "offsets-in")
    kwargs.setdefault("state", "stopped")
    return make_resource(**kwargs)


def auto_resource(count: int | None = None, last: datetime | None = None, **spec: Any) -> KafkaConnectorResource:
    status: dict[str, Any] | None = None
    if count is not None:
        status = {"autoRestart": {"count": count, "lastRestartTime": iso(last) if last else None}}
    return make_resource(auto_restart={"enabled": True, **spec}, status=status)


#: Connector class -> (config it needs, connector type, a document that validates for it).
FAMILIES: dict[str, tuple[dict[str, str], str, dict[str, Any]]] = {
    CLASS: ({}, "source", VALID_DOC),
    SINK_CLASS: (
        {"topics": "orders"},
        "sink",
        {"offsets": [{"partition": {"kafka_topic": "orders", "kafka_partition": 0}, "offset": None}]},
    ),
    FILE_STREAM_SOURCE_CLASS: (
        {"file": "/data/in.txt"},
        "source",
        {"offsets": [{"partition": {"filename": "/data/in.txt"}, "offset": {"position": 3}}]},
    ),
    "FileStreamSource": (
        {"file": "/data/in.txt"},
        "source",
        {"offsets": [{"partition": {"filename": "/data/in.txt"}, "offset": {"position": 0}}]},
    ),
    MIRROR_SOURCE_CLASS: (
        {},
        "source",
        {"offsets": [{"partition": {"cluster": "source", "partition": 0, "topic": "t"}, "offset": {"offset": 9}}]},
    ),
}


# --- group failovers (test_failover, test_failover_wedge) ------------------------------------------


def failover_mm2(
    mirrors: list[dict[str, Any]], annotations: dict[str, str] | None = None, **status: Any
) -> KafkaMirrorMaker2Resource:
    """A KafkaMirrorMaker2 ``dr`` (clusters b and a, generation 3) for the failover planning tests."""
    return KafkaMirrorMaker2Resource.model_validate(
        {
            "metadata": {
                "name": "dr",
                "namespace": "team-a",
                "generation": 3,
                "resourceVersion": "120",
                "annotations": annotations or {},
            },
            "spec": {
                "clusters": [
                    {"alias": "b", "bootstrapServers": "b:9092"},
                    {"alias": "a", "bootstrapServers": "a:9092"},
                ],
                "mirrors": mirrors,
            },
            "status": status,
        }
    )


def failover_mirror(**extra: Any) -> dict[str, Any]:
    """A mirror b -> a with a checkpoint connector that checkpoints every group but ``__.*``."""
    return {
        "sourceCluster": "b",
        "targetCluster": "a",
        "topicsPattern": "orders.*",
        "sourceConnector": {},
        "checkpointConnector": {"config": {"groups.exclude": "__.*"}},
        **extra,
    }
