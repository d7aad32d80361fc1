"""A partial group failover is refused unless the request allows it (issue 46, item 5).

The disaster case - the source site down, or partitions without a checkpoint - committed the
partitions it could translate and only mentioned the rest; those then silently started from
``auto.offset.reset``. Now a partial translation is refused (``UntranslatablePartitions``, nothing
committed) unless the request says ``allowPartial`` (the ``connect-offsets.io/allow-partial``
annotation next to ``failover-group``, or ``spec.mirrors[].groupFailover.allowPartial``); the
refusal and the dry run list each partition with what happens to it and why.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from connect_offsets.clients.kafka_groups import Checkpoint
from connect_offsets.planning.failover import mirror_facts, translate
from connect_offsets.planning.failover_requests import failover_key, failover_requests
from connect_offsets.planning.plan import PlannedRefusal
from connect_offsets.vocabulary import (
    ANNOTATION_ALLOW_PARTIAL,
    ANNOTATION_DRY_RUN,
    ANNOTATION_FAILOVER_GROUP,
    ANNOTATION_REQUEST_ID,
    API_GROUP,
    MIRRORS,
    short_hash,
)
from tests.simulation import NS, Sim, resource, simulation
from tests.unit.planning_fixtures import failover_mirror, failover_mm2

pytestmark = pytest.mark.unit


# --- the translation -----------------------------------------------------------------------------


def test_the_refusal_lists_every_partition_with_what_happens_to_it() -> None:
    facts = mirror_facts(failover_mm2([failover_mirror()]), None)
    assert not isinstance(facts, PlannedRefusal)
    checkpoints = {("b.orders", 0): (55, 52)}
    upstream = {("orders", 0): 55, ("orders", 1): 9, ("audit", 0): 3}
    translation = translate("app", facts, checkpoints, upstream, {"b.orders"})
    assert translation.partial
    refused = translation.refusal()
    assert refused is not None and refused.reason == "UntranslatablePartitions"
    lines = refused.message.split("\n")
    assert lines[0].startswith(
        "group app: 2 partition(s) cannot be translated through mirror b->a; nothing was changed"
    )
    assert "allow-partial=true" in lines[0] and "groupFailover.allowPartial: true" in lines[0]
    assert lines[1:] == [
        "b.orders-0: translated to offset 52 (checkpoint of upstream offset 55)",
        "audit-0 (offset 3): TopicNotReplicated: mirror b->a does not replicate topic audit",
        lines[3],
    ]
    assert lines[3].startswith("orders-1 (offset 9): NoCheckpoint: no checkpoint yet")
    assert translation.refusal(allow_partial=True) is None
    # Nothing translated at all is refused even when a partial failover is allowed.
    nothing = translate("app", facts, {}, {("orders", 1): 9}, {"b.orders"})
    refused = nothing.refusal(allow_partial=True)
    assert refused is not None and "orders-1 (offset 9): NoCheckpoint" in refused.message
    assert "A partial failover commits" not in refused.message


def test_a_complete_translation_is_not_partial() -> None:
    facts = mirror_facts(failover_mm2([failover_mirror()]), None)
    assert not isinstance(facts, PlannedRefusal)
    translation = translate("app", facts, {("b.orders", 0): (55, 52)}, {("orders", 0): 55}, {"b.orders"})
    assert not translation.partial and translation.refusal() is None


# --- the request ---------------------------------------------------------------------------------


def test_allow_partial_comes_from_the_annotation_or_the_spec() -> None:
    asked = {ANNOTATION_FAILOVER_GROUP: "app", ANNOTATION_REQUEST_ID: "r1", ANNOTATION_ALLOW_PARTIAL: "true"}
    requests, conditions, _ = failover_requests(failover_mm2([failover_mirror()], asked))
    assert [(r.group, r.allow_partial) for r in requests] == [("app", True)] and conditions == []
    assert any(a.annotation == ANNOTATION_ALLOW_PARTIAL for a in requests[0].removals)  # removed with the request
    plain = {ANNOTATION_FAILOVER_GROUP: "app"}
    requests, _, _ = failover_requests(failover_mm2([failover_mirror()], plain))
    assert [(r.group, r.allow_partial) for r in requests] == [("app", False)]
    declared = failover_mirror(groupFailover={"groups": ["app", "billing"], "allowPartial": True})
    requests, _, _ = failover_requests(failover_mm2([declared]))
    assert [(r.source, r.group, r.allow_partial) for r in requests] == [
        ("spec", "app", True),
        ("spec", "billing", True),
    ]


def test_a_bad_allow_partial_value_is_told_and_nothing_is_done() -> None:
    asked = {ANNOTATION_FAILOVER_GROUP: "app", ANNOTATION_ALLOW_PARTIAL: "yes"}
    requests, conditions, finish = failover_requests(failover_mm2([failover_mirror()], asked))
    assert requests == [] and finish == ()
    assert [(c.type, c.reason) for c in conditions] == [("InvalidAnnotation", "UnknownValue")]
    assert f"{ANNOTATION_ALLOW_PARTIAL}: 'yes' is not 'true' or 'false'" in conditions[0].message


def test_requests_made_without_the_annotation_keep_their_identity() -> None:
    """The identity of a request is a hash of its annotations: one recorded before allow-partial
    existed must still be recognised (else a handled request would run again)."""
    annotations = {ANNOTATION_FAILOVER_GROUP: "app", ANNOTATION_REQUEST_ID: "r1"}
    keys = (ANNOTATION_FAILOVER_GROUP, f"{API_GROUP}/failover-from", ANNOTATION_REQUEST_ID, ANNOTATION_DRY_RUN)
    before = short_hash("\x00".join(["failover", *(f"{k}={annotations.get(k, '')}" for k in keys)]))
    assert failover_key(annotations) == before
    assert failover_key({**annotations, ANNOTATION_ALLOW_PARTIAL: "true"}) != before


# --- a simulation of passes over the fakes ----------------------------------------------------------

MM2 = "east-to-west"
GROUP = "app"


def _mm2_body() -> dict[str, Any]:
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
                    "sourceConnector": {"state": "running"},
                    "checkpointConnector": {"config": {"groups.exclude": "__.*"}},
                }
            ],
        },
    }


async def _mirror_with_a_gap(sim: Sim) -> None:
    """Group ``app`` on east at orders-0 (checkpointed) and orders-1 (no checkpoint yet)."""
    sim.kube.put_resource(MIRRORS, _mm2_body())
    await sim.settle([(MIRRORS, MM2)])
    sim.kafka.records = {"east.checkpoints.internal": [Checkpoint(GROUP, "east.orders", 0, 40, 38)]}
    sim.kafka.groups = {("east:9092", GROUP): {("orders", 0): 40, ("orders", 1): 12}}
    sim.kafka.topics = {"west:9092": {"east.orders"}}


def _records(sim: Sim) -> list[dict[str, Any]]:
    status = resource(sim, MIRRORS, MM2).get("status") or {}
    return [dict(r) for r in status.get("groupFailovers") or [] if r.get("group") == GROUP]


async def test_a_partial_failover_is_refused_then_committed_with_allow_partial() -> None:
    async with simulation() as sim:
        await _mirror_with_a_gap(sim)
        sim.kube.annotate(MIRRORS, NS, MM2, failover_group=GROUP, request_id="r1")
        await sim.settle([(MIRRORS, MM2)])
        (refused,) = _records(sim)
        assert (refused["result"], refused["reason"]) == ("Failed", "UntranslatablePartitions"), refused
        assert "east.orders-0: translated to offset 38" in refused["message"]
        assert "orders-1 (offset 12): NoCheckpoint" in refused["message"]
        assert sim.kafka.applied == []

        # Asked again, allowing a partial failover: the dry run lists the partitions, then the commit.
        annotations = {"failover_group": GROUP, "request_id": "r2", "allow_partial": "true", "dry_run": "true"}
        sim.kube.annotate(MIRRORS, NS, MM2, **annotations)
        await sim.settle([(MIRRORS, MM2)])
        dry = _records(sim)[-1]
        assert (dry["result"], dry.get("dryRun")) == ("Succeeded", True), dry
        assert "partial (allowPartial)" in dry["message"] and "orders-1 (offset 12): NoCheckpoint" in dry["message"]
        assert sim.kafka.applied == []
        before = copy.deepcopy(sim.kafka.groups)
        sim.kube.annotate(MIRRORS, NS, MM2, failover_group=GROUP, request_id="r3", allow_partial="true")
        await sim.settle([(MIRRORS, MM2)])
        done = _records(sim)[-1]
        assert (done["result"], done["partitions"]) == ("Succeeded", 1), done
        assert "orders-1 (offset 12): NoCheckpoint" in done["message"]
        assert [(c.cluster, c.group, c.offsets) for c in sim.kafka.applied] == [
            ("west:9092", GROUP, ((("east.orders", 0), 38),))
        ]
        assert sim.kafka.groups[("west:9092", GROUP)] == {("east.orders", 0): 38} != before.get(("west:9092", GROUP))


def _declared(allow: bool) -> dict[str, Any]:
    body = _mm2_body()
    body["spec"]["mirrors"][0]["groupFailover"] = {"groups": [GROUP], "allowPartial": allow}
    return body


def _gap(sim: Sim) -> None:
    sim.kafka.records = {"east.checkpoints.internal": [Checkpoint(GROUP, "east.orders", 0, 40, 38)]}
    sim.kafka.groups = {("east:9092", GROUP): {("orders", 0): 40, ("orders", 1): 12}}
    sim.kafka.topics = {"west:9092": {"east.orders"}}


def _withdraw_allow_partial(sim: Sim) -> None:
    """The user sets ``allowPartial: false`` (a new generation) on the API server."""
    obj = sim.kube.resources[(MIRRORS, NS, MM2)]
    obj["spec"]["mirrors"][0]["groupFailover"]["allowPartial"] = False
    obj["metadata"]["generation"] += 1
    obj["metadata"]["resourceVersion"] = sim.kube._bump()


async def test_a_declared_allow_partial_withdrawn_during_the_pass_commits_nothing() -> None:
    """Attacker review of issue 46, F5: a declared failover read its body once; ``allowPartial``
    withdrawn while it translated still got a partial commit. Now a declared failover re-reads the
    resource before the commit (as annotation requests do): a new generation is planned again."""
    async with simulation() as sim:
        _gap(sim)
        describe = sim.kafka.describe
        edited: list[int] = []

        async def describe_and_edit(config: dict[str, Any], group: str, *, namespace: str) -> Any:
            if not edited:  # the target's group looked at just before the commit
                edited.append(1)
                with sim.as_user():
                    _withdraw_allow_partial(sim)
                    sim.kube._deliver(MIRRORS, NS, MM2)
            return await describe(config, group, namespace=namespace)

        sim.kafka.describe = describe_and_edit  # type: ignore[method-assign]
        sim.kube.put_resource(MIRRORS, _declared(True))
        await sim.settle([(MIRRORS, MM2)])
        assert edited and sim.kafka.applied == []
        (record,) = _records(sim)
        assert (record["result"], record["reason"], record["generation"]) == ("Failed", "UntranslatablePartitions", 2)


async def test_a_declared_allow_partial_withdrawn_while_the_watch_lags_commits_nothing() -> None:
    async with simulation() as sim:
        _gap(sim)
        sim.kube.put_resource(MIRRORS, _declared(True))
        sim.kube.watch_paused = True
        _withdraw_allow_partial(sim)  # the cache has not seen it
        await sim.check(MIRRORS, MM2)
        sim.kube.watch_paused = False
        sim.kube._deliver(MIRRORS, NS, MM2)
        await sim.settle([(MIRRORS, MM2)])
        assert sim.kafka.applied == []
        (record,) = _records(sim)
        assert (record["result"], record["reason"], record["generation"]) == ("Failed", "UntranslatablePartitions", 2)


def _edit_spec(sim: Sim, change: Any) -> None:
    obj = sim.kube.resources[(MIRRORS, NS, MM2)]
    change(obj["spec"])
    obj["metadata"]["generation"] += 1
    obj["metadata"]["resourceVersion"] = sim.kube._bump()
    sim.kube._deliver(MIRRORS, NS, MM2)


@pytest.mark.parametrize("source", ["spec", "annotation"])
async def test_a_resumed_commit_is_checked_on_the_target_whatever_the_spec_says_meanwhile(source: str) -> None:
    """Attacker review of issue 46, P1: a commit cut short (record Committing) was recorded Failed by
    a spec the mirror's facts now refuse (a custom replication policy), without looking at the
    target; the spec changed back, the failover ran anew and committed a second, newer translation.
    A resume needs only the target cluster: checked there, never committed twice; while no connector
    of the mirror is declared (its target unknown), the record stays Committing with a condition."""
    async with simulation() as sim:
        sim.kafka.records = {"east.checkpoints.internal": [Checkpoint(GROUP, "east.orders", 0, 40, 38)]}
        sim.kafka.groups = {("east:9092", GROUP): {("orders", 0): 40}}
        sim.kafka.topics = {"west:9092": {"east.orders"}}
        sim.kube.put_resource(MIRRORS, _declared(False) if source == "spec" else _mm2_body())
        if source == "annotation":
            sim.kube.annotate(MIRRORS, NS, MM2, failover_group=GROUP)
        for at in range(1, 20):  # crash right after the Kafka commit
            sim.faults.arm(at, "crash")
            await sim.check(MIRRORS, MM2)
            assert sim.faults.hit is not None, "no commit"
            if "kafka: commit" in sim.faults.hit:
                break
        sim.faults.arm(None)
        assert [r.get("step") for r in _records(sim)] == ["Committing"] and len(sim.kafka.applied) == 1
        # the mirror goes from the spec: its target is unknown, the record stays Committing
        mirrors = copy.deepcopy(sim.kube.resources[(MIRRORS, NS, MM2)]["spec"]["mirrors"])
        _edit_spec(sim, lambda spec: spec["mirrors"][0].update(sourceCluster="west", targetCluster="east"))
        await sim.settle([(MIRRORS, MM2)])
        assert [r.get("step") for r in _records(sim) if r["mirror"] == "east->west"] == ["Committing"]
        status = resource(sim, MIRRORS, MM2)["status"]
        assert any(
            (c["type"], c["reason"]) == ("GroupFailoverInProgress", "MirrorNotFound") for c in status["conditions"]
        ), status["conditions"]
        # back, with a policy the mirror's facts refuse: the resume still looks at the target only
        mirrors[0]["checkpointConnector"]["config"]["replication.policy.class"] = "com.example.CustomPolicy"
        _edit_spec(sim, lambda spec: spec.update(mirrors=copy.deepcopy(mirrors)))
        await sim.settle([(MIRRORS, MM2)])
        (record,) = [r for r in _records(sim) if r["mirror"] == "east->west"]
        assert (record.get("step"), record["result"]) == (None, "Succeeded"), record
        assert "not committed again" in record["message"]
        # the policy reverted while the checkpoints moved on: nothing committed again
        sim.kafka.records["east.checkpoints.internal"].append(Checkpoint(GROUP, "east.orders", 0, 60, 57))
        del mirrors[0]["checkpointConnector"]["config"]["replication.policy.class"]
        _edit_spec(sim, lambda spec: spec.update(mirrors=copy.deepcopy(mirrors)))
        await sim.settle([(MIRRORS, MM2)])
        assert [c.offsets for c in sim.kafka.applied] == [((("east.orders", 0), 38),)]
