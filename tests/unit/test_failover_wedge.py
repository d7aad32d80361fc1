"""A declarative group failover that failed in the current generation does not wedge the
KafkaMirrorMaker2 (issue 46, item 1).

``planning.failover_requests`` reported such a group with the loop variable of the Committing
records (``record``) instead of the group's own record: unbound when nothing was committing
(``UnboundLocalError`` on every later pass, so the status froze and annotation requests were never
answered), and another group's reason and message when something was. The group stays Failed with
its own reason and is not tried again until the spec changes; the rest of the pass goes on.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from connect_offsets.clients.kafka_groups import Checkpoint
from connect_offsets.models.crds import KafkaMirrorMaker2Resource
from connect_offsets.planning.failover_requests import failover_requests
from connect_offsets.vocabulary import ANNOTATION_HANDLED_REQUEST, ANNOTATION_OFFSETS, API_GROUP, MIRRORS
from tests.simulation import NS, Sim, mirrors_status_entry, resource, simulation
from tests.unit.planning_fixtures import failover_mirror, failover_mm2

pytestmark = pytest.mark.unit


# --- planning ----------------------------------------------------------------------------------------


def mm2(groups: list[str], annotations: dict[str, str] | None = None, **status: Any) -> KafkaMirrorMaker2Resource:
    """The failover tests' mirror, declaring ``groups`` for failover."""
    return failover_mm2([failover_mirror(groupFailover={"groups": groups})], annotations, **status)


def spec_record(group: str, **fields: Any) -> dict[str, Any]:
    return {"mirror": "b->a", "group": group, "source": "spec", "time": "2026-11-26T10:00:00Z", **fields}


FAILED = spec_record(
    "app",
    result="Failed",
    reason="ConsumerGroupActive",
    message="group app has 2 active member(s) on the target cluster",
    generation=3,
    instance="118",
)


def test_a_declared_group_failed_in_this_generation_stays_failed_with_its_own_reason() -> None:
    requests, conditions, finish = failover_requests(mm2(["app"], groupFailovers=[FAILED]))
    assert requests == [] and finish == ()
    assert [(c.type, c.status, c.reason) for c in conditions] == [
        ("GroupFailoverFailed", "True", "ConsumerGroupActive")
    ]
    assert "app" in conditions[0].message and FAILED["message"] in conditions[0].message


def test_an_annotation_request_is_still_planned_next_to_a_failed_declared_group() -> None:
    asked = {f"{API_GROUP}/failover-group": "billing", f"{API_GROUP}/request-id": "r1"}
    requests, conditions, _ = failover_requests(mm2(["app"], asked, groupFailovers=[FAILED]))
    assert [(r.source, r.group) for r in requests] == [("annotation", "billing")]
    assert [(c.type, c.reason) for c in conditions] == [("GroupFailoverFailed", "ConsumerGroupActive")]
    # An offsets request (list) waiting on the resource: the failover request waits, the failed group is still told.
    listing = {**asked, ANNOTATION_OFFSETS: "list"}
    requests, conditions, _ = failover_requests(mm2(["app"], listing, groupFailovers=[FAILED]))
    assert requests == []
    assert [(c.type, c.reason) for c in conditions] == [
        ("GroupFailoverWaiting", "OtherRequestPending"),
        ("GroupFailoverFailed", "ConsumerGroupActive"),
    ]


def test_the_failed_group_is_told_with_its_own_record_while_another_commit_is_resumed() -> None:
    committing = spec_record("billing", step="Committing", pinned="dr-pinned-x", reason="Other", message="other")
    requests, conditions, _ = failover_requests(mm2(["app", "billing"], groupFailovers=[FAILED, committing]))
    assert [(r.group, r.resume is not None) for r in requests] == [("billing", True)]
    assert [(c.type, c.reason) for c in conditions] == [("GroupFailoverFailed", "ConsumerGroupActive")]
    assert FAILED["message"] in conditions[0].message and "other" not in conditions[0].message


def test_a_failure_of_an_earlier_generation_is_tried_again() -> None:
    earlier = {**FAILED, "generation": 2}
    requests, conditions, _ = failover_requests(mm2(["app"], groupFailovers=[earlier]))
    assert [(r.source, r.group) for r in requests] == [("spec", "app")] and conditions == []


# --- a simulation of passes over the fakes ----------------------------------------------------------

MM2, MM2_CM = "east-to-west", "mm2-offsets"
SOURCE = "east->west.MirrorSourceConnector"
GROUP = "app"


def _mm2_body() -> dict[str, Any]:
    block = {
        "state": "running",
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
                {
                    "sourceCluster": "east",
                    "targetCluster": "west",
                    "topicsPattern": "orders",
                    "sourceConnector": block,
                    "checkpointConnector": {"config": {"groups.exclude": "__.*"}},
                }
            ],
        },
    }


async def _failed_declared_failover(sim: Sim) -> None:
    """A mirror east -> west whose declared group ``app`` is checkpointed but has a consumer on
    west: its failover ends Failed (ConsumerGroupActive) in the spec's generation."""
    sim.kube.put_resource(MIRRORS, _mm2_body())
    await sim.settle([(MIRRORS, MM2)])
    sim.kafka.records = {"east.checkpoints.internal": [Checkpoint(GROUP, "east.orders", 0, 40, 38)]}
    sim.kafka.groups = {("east:9092", GROUP): {("orders", 0): 40}}
    sim.kafka.topics = {"west:9092": {"east.orders"}}
    sim.kafka.members = {("west:9092", GROUP): 2}
    body = resource(sim, MIRRORS, MM2)
    body["spec"]["mirrors"][0]["groupFailover"] = {"groups": [GROUP]}
    body["metadata"]["generation"] += 1
    sim.kube.put_resource(MIRRORS, body)
    await sim.settle([(MIRRORS, MM2)])


def _failed_record(sim: Sim) -> dict[str, Any]:
    status = resource(sim, MIRRORS, MM2).get("status") or {}
    (record,) = [r for r in status.get("groupFailovers") or [] if r.get("group") == GROUP]
    return dict(record)


def _condition(sim: Sim, kind: str) -> dict[str, Any] | None:
    status = resource(sim, MIRRORS, MM2).get("status") or {}
    return next((dict(c) for c in status.get("conditions") or [] if c.get("type") == kind), None)


async def test_a_failed_declared_failover_then_a_list_request_is_answered() -> None:
    async with simulation() as sim:
        await _failed_declared_failover(sim)
        failed = _failed_record(sim)
        assert (failed["source"], failed["result"], failed["reason"]) == ("spec", "Failed", "ConsumerGroupActive")
        assert failed["generation"] == resource(sim, MIRRORS, MM2)["metadata"]["generation"]
        told = _condition(sim, "GroupFailoverFailed")
        assert told is not None and told["reason"] == "ConsumerGroupActive" and GROUP in told["message"]
        # Later passes tell it as the pass that failed it did: the condition is written once, not flapping.
        written = [
            c["message"]
            for patch in sim.kube.status_patches
            for c in patch.get("conditions") or []
            if c.get("type") == "GroupFailoverFailed"
        ]
        assert written == [told["message"]], written
        assert sim.kafka.applied == []

        # The connector's offsets, then a list asked on the resource: answered as on any mirror.
        sim.connect.connectors[SOURCE].offsets = [
            {"partition": {"cluster": "east", "partition": 0, "topic": "orders"}, "offset": {"offset": 40}}
        ]
        annotations = {"connector_offsets": "list", "mirrormaker_connector": SOURCE}
        sim.kube.annotate(MIRRORS, NS, MM2, **annotations)
        before = copy.deepcopy(resource(sim, MIRRORS, MM2))
        await sim.settle([(MIRRORS, MM2)])

        body = resource(sim, MIRRORS, MM2)
        left = body["metadata"].get("annotations") or {}
        assert ANNOTATION_OFFSETS not in left and f"{API_GROUP}/mirrormaker-connector" not in left, left
        assert left.get(ANNOTATION_HANDLED_REQUEST) not in (
            None,
            before["metadata"]["annotations"].get(ANNOTATION_HANDLED_REQUEST),
        )
        operation = body["status"]["lastOffsetsOperation"]
        assert (operation["operation"], operation["result"]) == ("list", "Succeeded"), operation
        assert MM2_CM in sim.kube.objects
        entry = mirrors_status_entry(sim, MM2, SOURCE)
        assert "pendingOffsetsOperation" not in entry and "offsetsProgress" not in entry, entry
        # The failed group stays Failed, with its reason, and was not tried again.
        assert _failed_record(sim) == failed
        told = _condition(sim, "GroupFailoverFailed")
        assert told is not None and told["reason"] == "ConsumerGroupActive"
        assert sim.kafka.applied == []


async def test_a_dry_run_failover_next_to_a_list_never_commits_for_real() -> None:
    """Attacker review of issue 46, P2: ``failover-group`` + ``dry-run`` + ``request-id`` set with a
    ``list``: the list ran first and its removal took the shared dry-run and request-id along; the
    failover then committed for real. While both requests are on the resource with a shared
    annotation, neither runs (InvalidAnnotation/AmbiguousRequest); once the list goes, the dry run."""
    async with simulation() as sim:
        sim.kube.put_resource(MIRRORS, _mm2_body())
        await sim.settle([(MIRRORS, MM2)])
        sim.kafka.records = {"east.checkpoints.internal": [Checkpoint(GROUP, "east.orders", 0, 40, 38)]}
        sim.kafka.groups = {("east:9092", GROUP): {("orders", 0): 40}}
        sim.kafka.topics = {"west:9092": {"east.orders"}}
        sim.connect.connectors[SOURCE].offsets = [
            {"partition": {"cluster": "east", "partition": 0, "topic": "orders"}, "offset": {"offset": 40}}
        ]
        both = {
            "connector_offsets": "list",
            "mirrormaker_connector": SOURCE,
            "failover_group": GROUP,
            "dry_run": "true",
            "request_id": "r1",
        }
        sim.kube.annotate(MIRRORS, NS, MM2, **both)
        await sim.settle([(MIRRORS, MM2)])
        body = resource(sim, MIRRORS, MM2)
        assert {"connect-offsets.io/dry-run", "connect-offsets.io/request-id"} <= set(body["metadata"]["annotations"])
        assert sim.kafka.applied == [] and not (body.get("status") or {}).get("groupFailovers")
        reasons = {(c["type"], c["reason"]) for c in body["status"]["conditions"]}
        assert ("InvalidAnnotation", "AmbiguousRequest") in reasons, reasons
        # the list taken away: the failover runs, as the dry run it asked for
        obj = sim.kube.resources[(MIRRORS, NS, MM2)]
        for key in ("connector-offsets", "mirrormaker-connector"):
            del obj["metadata"]["annotations"][f"connect-offsets.io/{key}"]
        obj["metadata"]["resourceVersion"] = sim.kube._bump()
        sim.kube._deliver(MIRRORS, NS, MM2)
        await sim.settle([(MIRRORS, MM2)])
        records = resource(sim, MIRRORS, MM2)["status"]["groupFailovers"]
        assert [(r["result"], r.get("dryRun"), r.get("requestId")) for r in records] == [("Succeeded", True, "r1")]
        assert sim.kafka.applied == []
