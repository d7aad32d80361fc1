"""Exactly once, proven by enumeration: a fault after (or instead of) every write of every flow.

For each flow — list, alter, reset and restore on a STOPPED connector, the staged stop -> change ->
resume of alter, reset and restore, a dry run, a declarative alter (``applyOnChange``), a chunked
alter, initial offsets at creation, and KafkaMirrorMaker2 per-connector list, alter and reset —
the flow is first run without faults to count its writes W (Kubernetes status, annotations,
ConfigMaps, Events; every request to Connect but a GET). Then, for every N in 1..W and every fault
kind (tests/simulation.py: ``crash`` after the write, ``conflict`` 409, ``unavailable`` 5xx,
``timeout`` before and ``timeout-after`` the write), the flow runs again from the same world with
that fault at write N; a crashed operator restarts from what persisted, and the resource is checked
until nothing more is written. Then, for every N and kind:

1. each offsets change was applied to Connect at most once (the worker's own record of applied
   PATCH and DELETE requests; every chunk of a chunked alter at most once);
2. the request ended in exactly one terminal result (one ``lastOffsetsOperation`` written for it,
   never a second) and at most one outcome Event;
3. it succeeded: Connect holds the requested offsets, its annotations are gone and marked handled;
4. the backup the change made still exists and holds the offsets from before the change;
5. the connector is in the state its spec asks, with no pending operation left;
6. nothing outside the resource's own objects changed (another team's resource, ConfigMap and
   connector are compared byte for byte).

``test_every_write_of_offsets_on_delete_survives_every_fault`` does the same for
``spec.offsetsOnDelete`` backup and reset through the delete handler (kopf's finalizer, called
again after each failure or crash): the reset applied exactly once, the final backup holding the
offsets from before with no owner reference, at most one outcome Event, the connector gone.

``test_an_edit_while_the_connector_stops_is_applied_after_the_claimed_content`` (issue 44) edits
the alter ConfigMap at every write boundary of a staged alter's Stopping step (annotated,
applyOnChange, an annotated alter with applyOnChange, a KafkaMirrorMaker2 with applyOnChange), with a
fault at every write until that change finished: Connect receives the claimed content once, then the
edit once with applyOnChange (never without); the PATCHes are counted in the fake worker.

``test_interleavings`` adds a hypothesis state machine that interleaves user actions (annotate,
edit the ConfigMap, edit the spec, withdraw the request, delete the resource), Connect faults and
crashes; the number of runs and steps explored is printed (``-s`` shows it in the output).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from connect_offsets.clients.kafka_groups import Checkpoint
from connect_offsets.models.crds import KafkaConnectorResource
from connect_offsets.planning import content_hash, mirror_configmap_key, request_key, target_for_connector
from connect_offsets.vocabulary import (
    ANNOTATION_HANDLED_REQUEST,
    ANNOTATION_OFFSETS,
    ANNOTATION_STOP_CONNECTOR,
    API_GROUP,
    CONNECTORS,
    MIRRORS,
    OWNER_CONFIG_KEY,
)
from tests.fakes import FakeConnector, apply_merge_patch
from tests.simulation import EXPLORED, FAULT_KINDS, NS, Sim, World, mirrors_status_entry, resource, simulation

pytestmark = pytest.mark.unit

FILE_SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
ANY_SOURCE = "org.apache.kafka.connect.integration.MonitorableSourceConnector"
FILE = "/data/orders.txt"
NAME, CM, INITIAL_CM = "orders", "orders-offsets", "orders-initial"
MM2, MM2_CM = "east-to-west", "mm2-offsets"
SOURCE = "east->west.MirrorSourceConnector"
OUTCOME_EVENTS = {
    "OffsetsOperationSucceeded",
    "OffsetsOperationFailed",
    "OffsetsDryRun",
    "InitialOffsetsApplied",
    "GroupFailoverSucceeded",
    "GroupFailoverFailed",
}
#: A copy's source: a connector of the same namespace that keeps running (its position moves on every read).
SOURCE_V1 = "orders-v1"
SINK_CLASS = "org.apache.kafka.connect.file.FileStreamSinkConnector"
GROUP = "app"
#: The checkpoint both failover flows translate: upstream offset 40 of east's orders-0 is 38 on west.
TRANSLATED = {("east.orders", 0): 38}


def position(at: int, file: str = FILE) -> list[dict[str, Any]]:
    return [{"partition": {"filename": file}, "offset": {"position": at}}]


def many(base: int, count: int = 5) -> list[dict[str, Any]]:
    return [{"partition": {"file": f"f{i}"}, "offset": {"position": base + i}} for i in range(count)]


def mirrored(at: int) -> list[dict[str, Any]]:
    return [{"partition": {"cluster": "east", "partition": 0, "topic": "orders"}, "offset": {"offset": at}}]


def document(entries: list[dict[str, Any]]) -> str:
    return json.dumps({"offsets": entries})


# --- the world each flow starts from ---------------------------------------------------------------


def connector_body(name: str, state: str, cls: str = FILE_SOURCE, **spec: Any) -> dict[str, Any]:
    config = {"file": FILE, "topic": "orders"} if cls == FILE_SOURCE else {"topic": "orders"}
    return {
        "apiVersion": f"{API_GROUP}/v1beta1",
        "kind": "KafkaConnector",
        "metadata": {"name": name, "namespace": NS, "labels": {f"{API_GROUP}/cluster": "local"}},
        "spec": {
            "class": cls,
            "tasksMax": 1,
            "state": state,
            "config": config,
            "listOffsets": {"toConfigMap": {"name": CM}},
            "alterOffsets": {"fromConfigMap": {"name": CM}},
            **spec,
        },
    }


def mm2_body(state: str) -> dict[str, Any]:
    block = {
        "state": state,
        "listOffsets": {"toConfigMap": {"name": MM2_CM}},
        "alterOffsets": {"fromConfigMap": {"name": MM2_CM}},
    }
    return {
        "apiVersion": f"{API_GROUP}/v1beta1",
        "kind": "KafkaMirrorMaker2",
        "metadata": {"name": MM2, "namespace": NS, "labels": {f"{API_GROUP}/cluster": "local"}},
        "spec": {
            "clusters": [
                {"alias": "east", "bootstrapServers": "east:9092"},
                {"alias": "west", "bootstrapServers": "west:9092"},
            ],
            "mirrors": [
                {"sourceCluster": "east", "targetCluster": "west", "topicsPattern": "orders", "sourceConnector": block}
            ],
        },
    }


async def bystanders(sim: Sim) -> None:
    """Another team's resource, ConfigMap and connector in the same namespace and worker: never touched."""
    sim.kube.put_resource(CONNECTORS, connector_body("other", "running"))
    with sim.as_user():
        await sim.kube.create_configmap(
            NS, {"metadata": {"name": "bystander"}, "data": {"offsets.json": document(position(1))}}
        )
    sim.connect.connectors["other"] = FakeConnector(
        {"connector.class": FILE_SOURCE, OWNER_CONFIG_KEY: f"{NS}/other"}, "RUNNING", position(9)
    )


async def with_connector(
    sim: Sim, state: str, offsets: list[dict[str, Any]], cls: str = FILE_SOURCE, **spec: Any
) -> None:
    await bystanders(sim)
    sim.kube.put_resource(CONNECTORS, connector_body(NAME, state, cls, **spec))
    await sim.settle([(CONNECTORS, NAME)])
    sim.connect.connectors[NAME].offsets = offsets


async def put_document(sim: Sim, entries: list[dict[str, Any]], name: str = CM, key: str = "offsets.json") -> None:
    """The user writes an offsets document (kubectl apply)."""
    body = {"metadata": {"name": name}, "data": {key: document(entries)}}
    with sim.as_user():
        if name in sim.kube.objects:
            await sim.kube.patch_configmap(NS, name, {"data": body["data"]})
        else:
            await sim.kube.create_configmap(NS, body)


def annotate(sim: Sim, plural: str, name: str, **annotations: str) -> None:
    sim.kube.annotate(plural, NS, name, **annotations)


# --- the flows ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Flow:
    name: str
    setup: Callable[[Sim], Awaitable[None]]
    trigger: Callable[[Sim], Awaitable[None]]
    operation: str  # what the terminal record says ("" for initial offsets)
    #: Connect's offsets at the end (a copy: computed from the pinned copy, as the source moves on).
    offsets: list[dict[str, Any]] | Callable[[Sim], list[dict[str, Any]]]
    state: str = "RUNNING"  # the connector's state at the end
    backup_of: list[dict[str, Any]] | None = None  # the backup's offsets (None: no backup)
    changes: int = 1  # offsets changes applied to Connect (chunks)
    plural: str = CONNECTORS
    resource: str = NAME
    connector: str = NAME
    annotated: bool = True  # asked with annotations (removed and marked handled at the end)
    #: A flow's own invariants, checked after the common ones (a copy is pinned once ...).
    extra: Callable[[Sim, str], None] | None = None
    #: The invariants themselves (a group failover's differ: its result is a commit in Kafka).
    invariants: Callable[[Sim, Flow, dict[str, Any], tuple[Any, ...], str], None] | None = None


async def _stopped(sim: Sim) -> None:
    await with_connector(sim, "stopped", position(30))
    await put_document(sim, position(6))


async def _running(sim: Sim) -> None:
    await with_connector(sim, "running", position(30))
    await put_document(sim, position(6))


async def _with_backup(sim: Sim, state: str) -> None:
    """A backup holding position 30 (made by an earlier alter); Connect now at 6."""
    await with_connector(sim, "stopped", position(30))
    await put_document(sim, position(6))
    annotate(sim, CONNECTORS, NAME, connector_offsets="alter")
    await sim.settle([(CONNECTORS, NAME)])
    if state == "running":
        body = resource(sim, CONNECTORS, NAME)
        body["spec"]["state"] = "running"
        sim.kube.put_resource(CONNECTORS, body)
        await sim.settle([(CONNECTORS, NAME)])
    sim.kube.events.clear()


async def _apply_on_change(sim: Sim) -> None:
    spec = {"alterOffsets": {"fromConfigMap": {"name": CM}, "applyOnChange": True}}
    await with_connector(sim, "running", position(30), **spec)
    await put_document(sim, position(30))  # applied once here: no change
    await sim.settle([(CONNECTORS, NAME)])
    sim.kube.events.clear()


async def _chunked(sim: Sim) -> None:
    await with_connector(sim, "stopped", many(0), ANY_SOURCE)
    await put_document(sim, many(100))


async def _initial(sim: Sim) -> None:
    await bystanders(sim)
    await put_document(sim, position(12), INITIAL_CM)


async def _create_with_initial(sim: Sim) -> None:
    sim.kube.put_resource(
        CONNECTORS, connector_body(NAME, "running", initialOffsets={"fromConfigMap": {"name": INITIAL_CM}})
    )


async def _mm2(sim: Sim, state: str) -> None:
    await bystanders(sim)
    sim.kube.put_resource(MIRRORS, mm2_body(state))
    await sim.settle([(MIRRORS, MM2)])
    sim.connect.connectors[SOURCE].offsets = mirrored(40)
    await put_document(sim, mirrored(7), MM2_CM, mirror_configmap_key(SOURCE))


async def _copy_source(sim: Sim, state: str) -> None:
    """The connector to copy from (same namespace, running: it moves on every read) and the target."""
    await with_connector(sim, state, position(30))
    sim.connect.connectors[SOURCE_V1] = FakeConnector(
        {"connector.class": FILE_SOURCE, "file": FILE, OWNER_CONFIG_KEY: f"{NS}/{SOURCE_V1}"}, "RUNNING", position(50)
    )
    sim.connect.moving = {SOURCE_V1}


async def _copy_initial(sim: Sim) -> None:
    await bystanders(sim)
    sim.connect.connectors[SOURCE_V1] = FakeConnector(
        {"connector.class": FILE_SOURCE, "file": FILE, OWNER_CONFIG_KEY: f"{NS}/{SOURCE_V1}"}, "RUNNING", position(50)
    )
    sim.connect.moving = {SOURCE_V1}


async def _create_copy(sim: Sim) -> None:
    sim.kube.put_resource(
        CONNECTORS, connector_body(NAME, "running", initialOffsets={"fromConnector": {"name": SOURCE_V1}})
    )


def _failover_mm2() -> dict[str, Any]:
    body = mm2_body("running")
    body["spec"]["mirrors"][0]["checkpointConnector"] = {"config": {"groups.exclude": "__.*"}}
    return body


async def _failover_world(sim: Sim) -> None:
    """A mirror east -> west with a checkpoint connector, and east's group ``app`` (and a sink
    connector's group) checkpointed at upstream 40 -> downstream 38; nobody consumes on west."""
    await bystanders(sim)
    sim.kube.put_resource(MIRRORS, _failover_mm2())
    await sim.settle([(MIRRORS, MM2)])
    sim.kafka.records = {
        "east.checkpoints.internal": [
            Checkpoint(group, "east.orders", 0, upstream, downstream)
            for group in (GROUP, "connect-orders-sink")
            for upstream, downstream in ((20, 19), (40, 38))
        ]
    }
    sim.kafka.groups = {("east:9092", group): {("orders", 0): 40} for group in (GROUP, "connect-orders-sink")}
    sim.kafka.topics = {"west:9092": {"east.orders"}}


async def _create_dr_sink(sim: Sim) -> None:
    body = connector_body(
        NAME,
        "running",
        SINK_CLASS,
        initialOffsets={"fromMirror": {"mirror": MM2, "sourceConnector": "orders-sink"}},
    )
    body["spec"]["config"] = {"file": "/data/out.txt", "topics": "east.orders"}
    sim.kube.put_resource(CONNECTORS, body)


async def _declare_failover(sim: Sim) -> None:
    body = resource(sim, MIRRORS, MM2)
    body["spec"]["mirrors"][0]["groupFailover"] = {"groups": [GROUP]}
    body["metadata"]["generation"] += 1
    sim.kube.put_resource(MIRRORS, body)


def _pinned(sim: Sim, kind: str) -> list[dict[str, Any]]:
    """The offsets in the one pinned copy of ``kind`` left (older ones are pruned)."""
    pins = sim.kube.configmaps_labelled(f"{API_GROUP}/pin-kind={kind}")
    assert len(pins) == 1, f"pinned copies: {sorted(pins)}"
    (pin,) = pins.values()
    return list(json.loads(pin["data"]["offsets.json"])["offsets"])


def _status_values(sim: Sim, *path: str) -> list[Any]:
    """Every value the status patches wrote at ``path`` (None skipped), in order."""
    found = []
    for patch in sim.kube.status_patches:
        value: Any = patch
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if value is not None:
            found.append(value)
    return found


def _pinned_once(sim: Sim, what: str) -> None:
    """Once a copy is recorded as pinned, the request never pins another: a retry applies that copy."""
    names = set(_status_values(sim, "offsetsProgress", "pinned")) | set(
        _status_values(sim, "pendingOffsetsOperation", "pinned")
    )
    assert len(names) <= 1, f"{what}: the copy was pinned again: {sorted(names)}"


def _initial_pinned_once(sim: Sim, what: str) -> None:
    """Once the connector is created from a pinned copy, that copy is the one applied."""
    used = {
        patch["initialOffsets"]["configMap"]
        for patch in sim.kube.status_patches
        if isinstance(patch.get("initialOffsets"), dict)
        and patch["initialOffsets"].get("step") in ("Creating", "Applied")
        and "configMap" in patch["initialOffsets"]
    }
    assert len(used) <= 1, f"{what}: created from more than one copy: {sorted(used)}"


def _request(plural: str, name: str, **annotations: str) -> Callable[[Sim], Awaitable[None]]:
    async def trigger(sim: Sim) -> None:
        annotate(sim, plural, name, **annotations)

    return trigger


async def _edit_document(sim: Sim) -> None:
    await put_document(sim, position(6))


MM2_ANNOTATIONS = {"mirrormaker_connector": SOURCE}

FLOWS = [
    Flow(
        "list",
        _stopped,
        _request(CONNECTORS, NAME, connector_offsets="list"),
        "list",
        position(30),
        "STOPPED",
        changes=0,
    ),
    Flow(
        "list-running", _running, _request(CONNECTORS, NAME, connector_offsets="list"), "list", position(30), changes=0
    ),
    Flow(
        "alter",
        _stopped,
        _request(CONNECTORS, NAME, connector_offsets="alter"),
        "alter",
        position(6),
        "STOPPED",
        position(30),
    ),
    Flow(
        "reset", _stopped, _request(CONNECTORS, NAME, connector_offsets="reset"), "reset", [], "STOPPED", position(30)
    ),
    Flow(
        "restore",
        lambda sim: _with_backup(sim, "stopped"),
        _request(CONNECTORS, NAME, connector_offsets="restore"),
        "restore",
        position(30),
        "STOPPED",
        position(6),
    ),
    Flow(
        "staged-alter",
        _running,
        _request(CONNECTORS, NAME, connector_offsets="alter", stop_connector="true"),
        "alter",
        position(6),
        backup_of=position(30),
    ),
    Flow(
        "staged-reset",
        _running,
        _request(CONNECTORS, NAME, connector_offsets="reset", stop_connector="true"),
        "reset",
        [],
        backup_of=position(30),
    ),
    Flow(
        "staged-restore",
        lambda sim: _with_backup(sim, "running"),
        _request(CONNECTORS, NAME, connector_offsets="restore", stop_connector="true"),
        "restore",
        position(30),
        backup_of=position(6),
    ),
    Flow(
        "dry-run",
        _running,
        _request(CONNECTORS, NAME, connector_offsets="alter", dry_run="true"),
        "alter",
        position(30),
        changes=0,
    ),
    Flow(
        "apply-on-change",
        _apply_on_change,
        _edit_document,
        "alter",
        position(6),
        backup_of=position(30),
        annotated=False,
    ),
    Flow(
        "chunked-alter",
        _chunked,
        _request(CONNECTORS, NAME, connector_offsets="alter"),
        "alter",
        many(100),
        "STOPPED",
        many(0),
        changes=3,
    ),
    Flow("initial-offsets", _initial, _create_with_initial, "", position(12), changes=1, annotated=False),
    Flow(
        "mm2-list",
        lambda sim: _mm2(sim, "stopped"),
        _request(MIRRORS, MM2, connector_offsets="list", **MM2_ANNOTATIONS),
        "list",
        mirrored(40),
        "STOPPED",
        changes=0,
        plural=MIRRORS,
        resource=MM2,
        connector=SOURCE,
    ),
    Flow(
        "mm2-alter",
        lambda sim: _mm2(sim, "stopped"),
        _request(MIRRORS, MM2, connector_offsets="alter", **MM2_ANNOTATIONS),
        "alter",
        mirrored(7),
        "STOPPED",
        mirrored(40),
        plural=MIRRORS,
        resource=MM2,
        connector=SOURCE,
    ),
    Flow(
        "mm2-staged-reset",
        lambda sim: _mm2(sim, "running"),
        _request(MIRRORS, MM2, connector_offsets="reset", stop_connector="true", **MM2_ANNOTATIONS),
        "reset",
        [],
        backup_of=mirrored(40),
        plural=MIRRORS,
        resource=MM2,
        connector=SOURCE,
    ),
    Flow(
        "copy-alter",
        lambda sim: _copy_source(sim, "stopped"),
        _request(CONNECTORS, NAME, connector_offsets="alter", alter_from_connector=SOURCE_V1),
        "alter",
        lambda sim: _pinned(sim, "alter"),
        "STOPPED",
        position(30),
        extra=_pinned_once,
    ),
    Flow(
        "copy-staged-alter",
        lambda sim: _copy_source(sim, "running"),
        _request(CONNECTORS, NAME, connector_offsets="alter", alter_from_connector=SOURCE_V1, stop_connector="true"),
        "alter",
        lambda sim: _pinned(sim, "alter"),
        backup_of=position(30),
        extra=_pinned_once,
    ),
    Flow(
        "copy-initial",
        _copy_initial,
        _create_copy,
        "",
        lambda sim: _pinned(sim, "initial"),
        annotated=False,
        extra=_initial_pinned_once,
    ),
    Flow(
        "mirror-initial",
        _failover_world,
        _create_dr_sink,
        "",
        [{"partition": {"kafka_topic": "east.orders", "kafka_partition": 0}, "offset": {"kafka_offset": 38}}],
        annotated=False,
        extra=_initial_pinned_once,
    ),
]


# --- the invariants ---------------------------------------------------------------------------------


def _last_operation(sim: Sim, flow: Flow | EditFlow, status: dict[str, Any]) -> dict[str, Any] | None:
    if flow.plural == MIRRORS:
        entry = next((e for e in status.get("connectors") or [] if e.get("name") == flow.connector), {})
        record = entry.get("lastOffsetsOperation")
    else:
        record = status.get("lastOffsetsOperation")
    return record if isinstance(record, dict) else None


def _terminal_records(sim: Sim, flow: Flow | EditFlow, before: dict[str, Any]) -> list[dict[str, Any]]:
    """The lastOffsetsOperation records written since ``before`` (the status when the user asked),
    in order, replaying the status patches; a record written again unchanged counts once."""
    status = dict(before)
    first = _last_operation(sim, flow, status)
    written: list[dict[str, Any]] = []
    for patch in sim.kube.status_patches:
        status = apply_merge_patch(status, patch)
        record = _last_operation(sim, flow, status)
        if record is not None and record.get("result") and record != first and (not written or written[-1] != record):
            written.append(record)
    return written


def _outside(sim: Sim) -> tuple[Any, ...]:
    """Everything that belongs to someone else: compared before and after each run."""
    return (
        json.dumps(sim.kube.objects.get("bystander"), sort_keys=True),
        json.dumps(sim.kube.resources.get((CONNECTORS, NS, "other")), sort_keys=True),
        json.dumps(vars(sim.connect.connectors["other"]), sort_keys=True),
    )


def check_invariants(sim: Sim, flow: Flow, before: dict[str, Any], outside: tuple[Any, ...], what: str) -> None:
    body = resource(sim, flow.plural, flow.resource)
    status = body.get("status") or {}
    # 1. at most once
    changes = [a for a in sim.connect.applied if a.connector == flow.connector]
    assert len(changes) == len(set(changes)), f"{what}: a change applied twice: {changes}"
    assert len(changes) <= flow.changes, f"{what}: {len(changes)} changes applied, at most {flow.changes}: {changes}"
    # 2. one terminal result, at most one outcome Event
    events = [e.reason for e in sim.kube.events if e.reason in OUTCOME_EVENTS]
    assert len(events) <= 1, f"{what}: outcome Events {events}"
    if flow.operation:
        records = _terminal_records(sim, flow, before)
        assert len(records) == 1, f"{what}: terminal records written: {records}"
        (record,) = records
        assert (record["operation"], record["result"]) == (flow.operation, "Succeeded"), f"{what}: {record}"
    else:
        record = {}
        assert status.get("initialOffsets", {}).get("step") == "Applied", f"{what}: {status}"
    # 3. it happened, and the request is gone and marked
    wanted = flow.offsets(sim) if callable(flow.offsets) else flow.offsets
    assert sim.connect.connectors[flow.connector].offsets == wanted, f"{what}: offsets in Connect"
    annotations = body["metadata"].get("annotations") or {}
    assert ANNOTATION_OFFSETS not in annotations, f"{what}: request still annotated: {annotations}"
    if flow.annotated:
        assert annotations.get(ANNOTATION_HANDLED_REQUEST) == record.get("instance"), f"{what}: {annotations}"
    # 4. the backup it made
    if flow.backup_of is not None:
        backup = record.get("backup")
        assert backup in sim.kube.objects, f"{what}: backup {backup} missing"
        assert json.loads(sim.kube.objects[backup]["data"]["offsets.json"])["offsets"] == flow.backup_of
    # 5. the state the spec asks, nothing pending
    assert sim.connect.connectors[flow.connector].state == flow.state, f"{what}: state"
    entry = mirrors_status_entry(sim, flow.resource, flow.connector) if flow.plural == MIRRORS else status
    assert "pendingOffsetsOperation" not in entry and "offsetsProgress" not in entry, f"{what}: {entry}"
    # 6. nothing else
    assert _outside(sim) == outside, f"{what}: something outside the resource changed"
    if flow.extra is not None:
        flow.extra(sim, what)


def check_failover(sim: Sim, flow: Flow, before: dict[str, Any], outside: tuple[Any, ...], what: str) -> None:
    """A group failover: committed on the target at most once, ended in one terminal record (and at
    most one outcome Event), the group at the translated offsets, the request gone and marked."""
    body = resource(sim, MIRRORS, MM2)
    status = body.get("status") or {}
    # 1. at most once
    commits = [c for c in sim.kafka.applied if c.group == GROUP]
    assert len(commits) <= 1, f"{what}: committed {len(commits)} times: {commits}"
    # 2. one terminal record, at most one outcome Event
    terminal: list[dict[str, Any]] = []
    replayed = dict(before)
    for patch in sim.kube.status_patches:
        replayed = apply_merge_patch(replayed, patch)
        for record in replayed.get("groupFailovers") or []:
            if record.get("group") == GROUP and record.get("result") and record not in terminal:
                terminal.append(record)
    assert len(terminal) == 1, f"{what}: terminal records {terminal}"
    (record,) = terminal
    assert record["result"] == "Succeeded" and record["partitions"] == 1, f"{what}: {record}"
    events = [e.reason for e in sim.kube.events if e.reason in OUTCOME_EVENTS]
    assert events == ["GroupFailoverSucceeded"] or events == [], f"{what}: outcome Events {events}"
    # 3. it happened: the group is at the translated offsets on west; the request is gone
    assert sim.kafka.groups[("west:9092", GROUP)] == TRANSLATED, f"{what}: {sim.kafka.groups}"
    annotations = body["metadata"].get("annotations") or {}
    assert f"{API_GROUP}/failover-group" not in annotations, f"{what}: {annotations}"
    if flow.annotated:
        assert annotations.get(ANNOTATION_HANDLED_REQUEST) == record.get("instance"), f"{what}: {annotations}"
    # 4. the pinned translation it committed is kept; nothing in progress
    assert record["pinned"] in sim.kube.objects, f"{what}: pinned copy {record['pinned']} missing"
    assert all(r.get("step") is None for r in status.get("groupFailovers") or []), f"{what}: {status}"
    # 5. the mirror's connectors untouched, nothing else changed
    assert not [a for a in sim.connect.applied if a.connector == SOURCE], f"{what}: {sim.connect.applied}"
    assert _outside(sim) == outside, f"{what}: something outside the resource changed"


FLOWS += [
    Flow(
        "group-failover",
        _failover_world,
        _request(MIRRORS, MM2, failover_group=GROUP),
        "",
        [],
        plural=MIRRORS,
        resource=MM2,
        connector=SOURCE,
        invariants=check_failover,
    ),
    Flow(
        "group-failover-spec",
        _failover_world,
        _declare_failover,
        "",
        [],
        plural=MIRRORS,
        resource=MM2,
        connector=SOURCE,
        annotated=False,
        invariants=check_failover,
    ),
]


@dataclass
class Explored:
    runs: int = 0
    writes: int = 0
    restarts: int = 0
    seconds: float = 0.0
    kinds: dict[str, int] = field(default_factory=dict)


async def _run(sim: Sim, world: World, flow: Flow, at: int | None, kind: str) -> None:
    await sim.load(world)
    outside = _outside(sim)
    body = sim.kube.resources.get((flow.plural, NS, flow.resource))
    before = dict((body or {}).get("status") or {})
    sim.faults.arm(at, kind)
    await flow.trigger(sim)
    await sim.settle([(flow.plural, flow.resource)])
    invariants = flow.invariants or check_invariants
    invariants(sim, flow, before, outside, f"{flow.name}, {kind} at write {at} ({sim.faults.hit})")


@pytest.mark.parametrize("flow", FLOWS, ids=[f.name for f in FLOWS])
async def test_every_write_of_the_flow_survives_every_fault(
    flow: Flow, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    monkeypatch.setenv("CONNECT_OFFSETS_PATCH_MAX_PARTITIONS", "2")
    started = time.monotonic()
    async with simulation() as sim:
        await flow.setup(sim)
        await sim.settle([(flow.plural, flow.resource)])
        world = sim.save()
        await _run(sim, world, flow, None, "crash")  # without a fault: the baseline
        total = sim.faults.count
        assert total > 0
        explored = Explored()
        for at in range(1, total + 1):
            for kind in FAULT_KINDS:
                await _run(sim, world, flow, at, kind)
                assert sim.faults.hit is not None, f"{flow.name}: {kind} at {at} hit nothing"
                explored.runs += 1
                explored.writes += sim.faults.count
                explored.restarts += sim.restarts
    request.node.user_properties.append(
        (
            EXPLORED,
            f"{flow.name}: {total} writes x {len(FAULT_KINDS)} fault kinds = {explored.runs} runs, "
            f"{explored.writes} writes in all, {time.monotonic() - started:.1f}s",
        )
    )


# --- an edit of the ConfigMap while the connector stops (issue 44) ----------------------------------


@dataclass(frozen=True)
class EditFlow:
    """A staged alter from the ConfigMap, and a person's edit of that ConfigMap at a write boundary
    of it: the alter applies what it claimed (``first``); the edit (``edited``) is a request of its
    own, applied once afterwards when applyOnChange is on, never otherwise."""

    name: str
    setup: Callable[[Sim], Awaitable[None]]
    trigger: Callable[[Sim], Awaitable[None]]
    first: list[dict[str, Any]]
    edited: list[dict[str, Any]]
    apply_on_change: bool
    plural: str = CONNECTORS
    resource: str = NAME
    connector: str = NAME
    configmap: str = CM
    key: str = "offsets.json"
    #: The faults tried at every write: all kinds for the two plain cases; a crash (the operator
    #: restarts from what persisted) for the variants, which differ from them only in planning.
    kinds: tuple[str, ...] = FAULT_KINDS


async def _annotated_alter_with_apply_on_change(sim: Sim) -> None:
    """The plugin's ``alter --from-file`` on a resource with applyOnChange: the document written to
    the ConfigMap and the request annotated before the operator looks."""
    await put_document(sim, position(6))
    annotate(sim, CONNECTORS, NAME, connector_offsets="alter")


async def _mm2_apply_on_change(sim: Sim) -> None:
    """A running mirror created with applyOnChange, its document applied once (Connect at 40)."""
    await bystanders(sim)
    body = mm2_body("running")
    body["spec"]["mirrors"][0]["sourceConnector"]["alterOffsets"]["applyOnChange"] = True
    sim.kube.put_resource(MIRRORS, body)
    await sim.settle([(MIRRORS, MM2)])
    sim.connect.connectors[SOURCE].offsets = mirrored(40)
    await put_document(sim, mirrored(40), MM2_CM, mirror_configmap_key(SOURCE))
    await sim.settle([(MIRRORS, MM2)])
    sim.kube.events.clear()


async def _mm2_edit(sim: Sim) -> None:
    await put_document(sim, mirrored(7), MM2_CM, mirror_configmap_key(SOURCE))


async def _stop_policy_apply_on_change(sim: Sim) -> None:
    await _apply_on_change(sim)
    body = resource(sim, CONNECTORS, NAME)
    body["spec"]["offsetsPolicy"] = {"stopConnector": True}
    sim.kube.put_resource(CONNECTORS, body)
    await sim.settle([(CONNECTORS, NAME)])
    sim.kube.events.clear()


EDIT_FLOWS = [
    EditFlow(
        "staged-alter",
        _running,
        _request(CONNECTORS, NAME, connector_offsets="alter", stop_connector="true"),
        position(6),
        position(8),
        apply_on_change=False,
    ),
    EditFlow("apply-on-change", _apply_on_change, _edit_document, position(6), position(8), apply_on_change=True),
    EditFlow(
        "alter-with-apply-on-change",
        _stop_policy_apply_on_change,
        _annotated_alter_with_apply_on_change,
        position(6),
        position(8),
        apply_on_change=True,
        kinds=("crash",),
    ),
    EditFlow(
        "mm2-apply-on-change",
        _mm2_apply_on_change,
        _mm2_edit,
        mirrored(7),
        mirrored(9),
        apply_on_change=True,
        plural=MIRRORS,
        resource=MM2,
        connector=SOURCE,
        configmap=MM2_CM,
        key=mirror_configmap_key(SOURCE),
        kinds=("crash",),
    ),
]


def _entry(sim: Sim, flow: EditFlow) -> dict[str, Any]:
    """The flow's connector's part of the status (a KafkaMirrorMaker2 keeps one per connector)."""
    if flow.plural == MIRRORS:
        return mirrors_status_entry(sim, flow.resource, flow.connector)
    return dict(resource(sim, flow.plural, flow.resource).get("status") or {})


def _patches(sim: Sim, flow: EditFlow) -> list[list[dict[str, Any]]]:
    """The documents Connect applied to the flow's connector, PATCH by PATCH, in order."""
    return [
        list(json.loads(a.body)["offsets"])
        for a in sim.connect.applied
        if a.connector == flow.connector and a.method == "PATCH"
    ]


def _edit_at(sim: Sim, flow: EditFlow, at: int) -> dict[str, int]:
    """Edit the ConfigMap right before the operator's write ``at`` + 1 (after ``at`` writes), once.
    Returned as the run goes: ``claimed``, whether by then the request was claimed (its pending
    record persisted, or already finished), which decides what it must apply; ``first``, the writes
    until the first change finished (what follows is applyOnChange's apply of the edit, a flow of
    its own above)."""
    seen: dict[str, int] = {}

    def boundary(count: int) -> None:
        if count == at and "claimed" not in seen:
            seen["claimed"] = "pendingOffsetsOperation" in _entry(sim, flow) or bool(_patches(sim, flow))
            sim.edit_configmap(flow.configmap, flow.key, document(flow.edited))
        if "first" not in seen and _patches(sim, flow) and "pendingOffsetsOperation" not in _entry(sim, flow):
            seen["first"] = count  # the claimed content applied and its change finished

    sim.faults.boundary = boundary
    return seen


def _stopping_window(steps: list[str | None]) -> range:
    """The write boundaries of the first claim's Stopping step, and the one right before it (the
    pin written, the intent not yet: the edit races the pass that read the ConfigMap)."""
    stopping = [k for k, step in enumerate(steps) if step == "Stopping"]
    assert stopping, f"no Stopping step seen: {steps}"
    last = stopping[0]
    while last + 1 < len(steps) and steps[last + 1] == "Stopping":
        last += 1
    return range(max(stopping[0] - 1, 0), last + 1)


def check_edited(sim: Sim, flow: EditFlow, before: dict[str, Any], claimed: bool, what: str) -> None:
    """The request applied what it claimed, once; the edit was applied once afterwards
    (applyOnChange) or not at all; nothing pending, nothing else touched."""
    body = resource(sim, flow.plural, flow.resource)
    patches = _patches(sim, flow)
    if flow.apply_on_change:
        allowed = [[flow.first, flow.edited]] if claimed else [[flow.first, flow.edited], [flow.edited]]
    else:
        allowed = [[flow.first]] if claimed else [[flow.first], [flow.edited]]
    assert patches in allowed, f"{what}: PATCHes {patches}, claimed before the edit: {claimed}"
    assert sim.connect.connectors[flow.connector].offsets == patches[-1], f"{what}: offsets in Connect"
    records = [(r["operation"], r["result"]) for r in _terminal_records(sim, flow, before)]
    assert records == [("alter", "Succeeded")] * len(patches), f"{what}: terminal records {records}"
    events = [e.reason for e in sim.kube.events if e.reason in OUTCOME_EVENTS]
    # At most one outcome Event each (one posted after a status write a crash followed is lost).
    assert set(events) <= {"OffsetsOperationSucceeded"} and len(events) <= len(patches), f"{what}: Events {events}"
    entry = _entry(sim, flow)
    assert "pendingOffsetsOperation" not in entry and "offsetsProgress" not in entry, f"{what}: {entry}"
    if flow.apply_on_change:
        applied = entry.get("appliedOffsets") or {}
        wanted = content_hash(document(flow.edited))
        assert (applied.get("contentHash"), applied.get("result")) == (wanted, "Succeeded"), f"{what}: {applied}"
    assert ANNOTATION_OFFSETS not in body["metadata"].get("annotations", {}), f"{what}: request still annotated"
    assert sim.connect.connectors[flow.connector].state == "RUNNING", f"{what}: state"


async def _run_edited(sim: Sim, world: World, flow: EditFlow, edit: int, at: int | None, kind: str) -> int:
    """One run: the request, the edit after write ``edit``, a fault at write ``at``; checked. Returns
    the writes until the claimed content's change finished."""
    await sim.load(world)
    outside = _outside(sim)
    before = dict(resource(sim, flow.plural, flow.resource).get("status") or {})
    sim.faults.arm(at, kind)
    seen = _edit_at(sim, flow, edit)
    await flow.trigger(sim)
    await sim.settle([(flow.plural, flow.resource)])
    if "claimed" not in seen:  # the flow ended first: the edit comes after it
        sim.faults.boundary = None
        seen["claimed"] = 1
        sim.edit_configmap(flow.configmap, flow.key, document(flow.edited))
        await sim.settle([(flow.plural, flow.resource)])
    check_edited(
        sim,
        flow,
        before,
        bool(seen["claimed"]),
        f"{flow.name}, edit after write {edit}, {kind} at write {at} ({sim.faults.hit})",
    )
    assert _outside(sim) == outside, f"{flow.name}: something outside the resource changed"
    return seen.get("first", sim.faults.count)


EDIT_RUNS = [(flow, kind) for flow in EDIT_FLOWS for kind in flow.kinds]


@pytest.mark.parametrize(("flow", "kind"), EDIT_RUNS, ids=[f"{flow.name}-{kind}" for flow, kind in EDIT_RUNS])
async def test_an_edit_while_the_connector_stops_is_applied_after_the_claimed_content(
    flow: EditFlow, kind: str, request: pytest.FixtureRequest
) -> None:
    """Issue 44: a ConfigMap edited in the middle of an alter. The edit comes at every write
    boundary of the Stopping step (and the one before the claim); for each, a fault of the kind at
    every write until the claimed change finished (applyOnChange's apply of the edit after it is
    the ``apply-on-change`` flow above). Connect receives the claimed content once, then
    (applyOnChange) the edited content once; never the same content twice, never the edit in place
    of the claim."""
    started = time.monotonic()
    async with simulation() as sim:
        await flow.setup(sim)
        await sim.settle([(flow.plural, flow.resource)])
        world = sim.save()
        steps: list[str | None] = []
        await sim.load(world)
        sim.faults.boundary = lambda count: steps.append(
            (_entry(sim, flow).get("pendingOffsetsOperation") or {}).get("step")
        )
        await flow.trigger(sim)
        await sim.settle([(flow.plural, flow.resource)])
        window = _stopping_window(steps)
        runs = 0
        for edit in window:
            first = await _run_edited(sim, world, flow, edit, None, "crash")  # without a fault
            for at in range(1, first + 1):
                await _run_edited(sim, world, flow, edit, at, kind)
                assert sim.faults.hit is not None, f"{flow.name}: {kind} at {at} hit nothing"
                runs += 1
    request.node.user_properties.append(
        (
            EXPLORED,
            f"edited {flow.name}: edits at {len(window)} write boundaries x {kind} at every write = {runs} runs, "
            f"{time.monotonic() - started:.1f}s",
        )
    )


# --- interleavings ------------------------------------------------------------------------------------


#: How many operator checks follow a step of the machine.
CHECKS = st.integers(min_value=0, max_value=4)


class Interleavings(RuleBasedStateMachine):
    """User actions, Connect faults and crashes in any order against one KafkaConnector.

    A request is each annotate; a change applied to Connect is attributed to the request that
    asked for it. Invariants: no more changes than requests; a settled resource is in the state
    its spec asks, with nothing pending; another team's objects never change.
    """

    runs = 0
    steps = 0
    changes = 0
    crashes = 0

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.context = simulation()
        self.sim = self.loop.run_until_complete(self.context.__aenter__())
        self.requests = 0
        self.deleted = False
        self.spec_state = "stopped"
        Interleavings.runs += 1

    def run(self, coroutine: Awaitable[Any]) -> Any:
        return self.loop.run_until_complete(coroutine)

    def teardown(self) -> None:
        Interleavings.changes += len(self.sim.connect.applied)
        Interleavings.crashes += self.sim.restarts
        self.loop.run_until_complete(self.context.__aexit__(None, None, None))
        self.loop.close()

    @initialize()
    def world(self) -> None:
        self.run(with_connector(self.sim, "stopped", position(30)))
        self.run(put_document(self.sim, position(6)))
        self.outside = _outside(self.sim)

    def operate(self, checks: int) -> None:
        """The operator runs alongside: ``checks`` checks of the resource after the action."""
        for _ in range(checks):
            if not self.deleted:
                self.run(self.sim.check(CONNECTORS, NAME))

    @precondition(lambda self: not self.deleted)
    @rule(
        operation=st.sampled_from(["list", "alter", "reset", "restore"]),
        stop=st.booleans(),
        dry_run=st.booleans(),
        then=CHECKS,
    )
    def annotate(self, operation: str, stop: bool, dry_run: bool, then: int) -> None:
        annotations = {"connector_offsets": operation}
        if stop:
            annotations["stop_connector"] = "true"
        if dry_run:
            annotations["dry_run"] = "true"
        elif operation != "list":
            self.requests += 1
        annotate(self.sim, CONNECTORS, NAME, **annotations)
        self.operate(then)

    @precondition(lambda self: not self.deleted)
    @rule(then=CHECKS)
    def withdraw(self, then: int) -> None:
        body = resource(self.sim, CONNECTORS, NAME)
        for key in (ANNOTATION_OFFSETS, ANNOTATION_STOP_CONNECTOR):
            body["metadata"]["annotations"].pop(key, None)
        annotate(self.sim, CONNECTORS, NAME)
        self.operate(then)

    @rule(at=st.integers(min_value=1, max_value=40), then=CHECKS)
    def edit_document(self, at: int, then: int) -> None:
        self.run(put_document(self.sim, position(at)))
        self.operate(then)

    @precondition(lambda self: not self.deleted)
    @rule(state=st.sampled_from(["running", "stopped"]), then=CHECKS)
    def edit_spec(self, state: str, then: int) -> None:
        body = resource(self.sim, CONNECTORS, NAME)
        body["spec"]["state"] = state
        body["metadata"]["generation"] += 1
        self.spec_state = state
        self.sim.kube.put_resource(CONNECTORS, body)
        self.operate(then)

    @precondition(lambda self: not self.deleted)
    @rule()
    def delete_resource(self) -> None:
        if (
            self.run(self.sim.delete(CONNECTORS, NAME)) != "crashed"
            and (CONNECTORS, NS, NAME) not in self.sim.kube.resources
        ):
            self.deleted = True

    @rule(at=st.integers(min_value=1, max_value=8), kind=st.sampled_from(FAULT_KINDS), then=CHECKS)
    def fault(self, at: int, kind: str, then: int) -> None:
        """A fault at the at-th write from now: a crash, or Kubernetes/Connect failing that write."""
        self.sim.faults.arm(at, kind)
        self.operate(then)

    @rule(then=CHECKS)
    def crash(self, then: int) -> None:
        """The operator killed between two checks (a rollout, the OOM killer)."""
        self.run(self.sim.restart())
        self.operate(then)

    @rule()
    def settle(self) -> None:
        """Faults stop; the operator catches up. A request still on the resource then has failed for
        good (it waits for a change), a finished one is gone; the connector is as the spec asks."""
        self.sim.faults.arm(None)
        if self.deleted:
            assert NAME not in self.sim.connect.connectors, "deleted resource, connector left in Connect"
            return
        self.run(self.sim.settle([(CONNECTORS, NAME)]))
        body = resource(self.sim, CONNECTORS, NAME)
        status = body.get("status") or {}
        assert "pendingOffsetsOperation" not in status, status
        want = {"running": "RUNNING", "stopped": "STOPPED"}[self.spec_state]
        assert self.sim.connect.connectors[NAME].state == want
        if ANNOTATION_OFFSETS in body["metadata"]["annotations"]:
            last = status.get("lastOffsetsOperation") or {}
            key = request_key(target_for_connector(KafkaConnectorResource.model_validate(body)))
            assert (last.get("result"), last.get("requestKey")) == ("Failed", key), (body["metadata"], last)

    @invariant()
    def count_steps(self) -> None:
        Interleavings.steps += 1

    @invariant()
    def at_most_one_change_per_request(self) -> None:
        changes = [a for a in self.sim.connect.applied if a.connector == NAME]
        assert len(changes) <= self.requests, (changes, self.requests)

    @invariant()
    def nothing_outside(self) -> None:
        if hasattr(self, "outside"):
            assert _outside(self.sim) == self.outside


def test_interleavings(request: pytest.FixtureRequest) -> None:
    started = time.monotonic()
    Interleavings.runs = Interleavings.steps = Interleavings.changes = Interleavings.crashes = 0
    test = Interleavings.TestCase
    test.settings = settings(
        max_examples=150, stateful_step_count=30, deadline=None, suppress_health_check=list(HealthCheck)
    )
    test().runTest()
    request.node.user_properties.append(
        (
            EXPLORED,
            f"interleavings: {Interleavings.runs} runs, {Interleavings.steps} steps explored, "
            f"{Interleavings.changes} offsets changes applied, {Interleavings.crashes} restarts, "
            f"{time.monotonic() - started:.1f}s",
        )
    )
    assert Interleavings.runs >= 150
    assert Interleavings.changes > 0 and Interleavings.crashes > 0  # the machine reached what it is for


# --- spec.offsetsOnDelete through the finalizer ---------------------------------------------------

DELETE_EVENTS = {"OffsetsResetOnDelete", "OffsetsBackedUpOnDelete"}


async def _delete_until_gone(sim: Sim) -> list[str]:
    """kopf's delete handler called again and again (its retries, a restarted operator) until the
    finalizer is released and the resource gone."""
    results = []
    for _ in range(40):
        if (CONNECTORS, NS, NAME) not in sim.kube.resources:
            return results
        results.append(await sim.delete(CONNECTORS, NAME))
    raise AssertionError(f"the resource is still there after 40 calls of the delete handler: {results[-5:]}")


def check_deletion(sim: Sim, mode: str, outside: tuple[Any, ...], what: str) -> None:
    # 1. at most once: the reset applied exactly once (it must happen, and never twice)
    resets = [a for a in sim.connect.applied if a.connector == NAME]
    assert len(resets) == (1 if mode == "reset" else 0), f"{what}: offsets changes {resets}"
    # 2. at most one outcome Event
    events = [e.reason for e in sim.kube.events if e.reason in DELETE_EVENTS]
    assert len(events) <= 1, f"{what}: outcome Events {events}"
    # 3. the connector deleted
    assert NAME not in sim.connect.connectors, f"{what}: the connector is still in Connect"
    # 4. the final backup: the offsets from before, no owner reference (it outlives the resource)
    finals = sim.kube.configmaps_labelled(f"{API_GROUP}/final-backup=true")
    assert len(finals) == 1, f"{what}: final backups {sorted(finals)}"
    (backup,) = finals.values()
    assert not backup["metadata"].get("ownerReferences"), f"{what}: {backup['metadata']}"
    assert json.loads(backup["data"]["offsets.json"])["offsets"] == position(30), f"{what}: backup content"
    # 5. nothing else
    assert _outside(sim) == outside, f"{what}: something outside the resource changed"


async def _run_deletion(sim: Sim, world: World, mode: str, at: int | None, kind: str) -> None:
    await sim.load(world)
    outside = _outside(sim)
    sim.faults.arm(at, kind)
    await _delete_until_gone(sim)
    check_deletion(sim, mode, outside, f"offsetsOnDelete {mode}, {kind} at write {at} ({sim.faults.hit})")


@pytest.mark.parametrize("mode", ["backup", "reset"])
async def test_every_write_of_offsets_on_delete_survives_every_fault(mode: str, request: pytest.FixtureRequest) -> None:
    """A RUNNING connector with offsetsOnDelete deleted: every write of the finalizer's work
    (status.deletion, the stop, the backup, the DELETE of the offsets, the connector's DELETE, the
    Event) crashed after, or failed before or after; the reset is applied exactly once, the backup
    holds the offsets from before and outlives the resource, at most one outcome Event."""
    started = time.monotonic()
    async with simulation() as sim:
        await with_connector(sim, "running", position(30), offsetsOnDelete=mode)
        world = sim.save()
        await _run_deletion(sim, world, mode, None, "crash")  # the baseline
        total = sim.faults.count
        assert total >= (6 if mode == "reset" else 4), sim.faults.writes
        events = [e.reason for e in sim.kube.events if e.reason in DELETE_EVENTS]
        assert events == ["OffsetsResetOnDelete" if mode == "reset" else "OffsetsBackedUpOnDelete"]
        runs = 0
        for at in range(1, total + 1):
            for kind in FAULT_KINDS:
                await _run_deletion(sim, world, mode, at, kind)
                assert sim.faults.hit is not None, f"{mode}: {kind} at {at} hit nothing"
                runs += 1
    request.node.user_properties.append(
        (
            EXPLORED,
            f"offsetsOnDelete {mode}: {total} writes x {len(FAULT_KINDS)} fault kinds = {runs} runs, "
            f"{time.monotonic() - started:.1f}s",
        )
    )


async def test_a_wipe_is_told_when_the_patch_after_it_waits_for_a_rebalance(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 48: the leftovers of an earlier same-named connector are wiped, then the PATCH of the
    initial offsets is answered "rebalance is expected" (nothing done, a transient error). The next
    pass applies the offsets and finds nothing left to remove: the status must still say what the
    first pass removed (it said only "applied" before)."""
    import tests.fakes

    leftover = position(7, "/data/old.txt")

    def created_with_leftovers(config: dict[str, Any], state: str) -> FakeConnector:
        # Connect keeps a deleted connector's offsets: a new one of the same name sees them.
        return FakeConnector(config, state, json.loads(json.dumps(leftover)))

    monkeypatch.setattr(tests.fakes, "FakeConnector", created_with_leftovers)
    async with simulation() as sim:
        await put_document(sim, position(12), INITIAL_CM)
        sim.connect.fail(
            "PATCH", f"/connectors/{NAME}/offsets", 500, "Request cannot be completed because a rebalance is expected"
        )
        await _create_with_initial(sim)
        first = await sim.check(CONNECTORS, NAME)
        assert first.transient_error is not None  # the PATCH waits for the rebalance
        await sim.settle([(CONNECTORS, NAME)])
        initial = sim.kube.resources[(CONNECTORS, NS, NAME)]["status"]["initialOffsets"]
        assert initial["step"] == "Applied", initial
        assert initial["message"].startswith(f"removed 1 offset(s) left by an earlier connector named {NAME}; "), (
            initial
        )
        assert "applied 1 initial offset(s)" in initial["message"], initial
        assert [a.method for a in sim.connect.applied] == ["DELETE", "PATCH"]  # wiped once, applied once
