"""MirrorMaker 2 failover without the stack (issue 34): the checkpoint record format, which mirror
translates a group, how it translates and what cannot be translated (and why), and which failovers
a KafkaMirrorMaker2 asks for (annotation and ``spec.mirrors[].groupFailover``, exactly once).

The records are MirrorMaker 2's own bytes (``Checkpoint.java``: key group/topic/partition, value
version 0, upstream and downstream offsets, metadata); the translation is checked against
``RemoteClusterUtils.translateOffsets``'s rule (the newest checkpoint per downstream partition).
"""

from __future__ import annotations

import struct
from typing import Any

import pytest

from connect_offsets.clients.kafka_groups import Checkpoint, decode_checkpoint, encode_checkpoint
from connect_offsets.models.crds import GroupFailoverStatus
from connect_offsets.planning.failover import group_refusal, mirror_facts, offsets_document, translate
from connect_offsets.planning.failover_requests import failover_key, failover_requests, kept_records
from connect_offsets.planning.plan import PlannedRefusal
from connect_offsets.vocabulary import API_GROUP
from tests.unit.planning_fixtures import failover_mirror as mirror
from tests.unit.planning_fixtures import failover_mm2 as mm2

pytestmark = pytest.mark.unit


def test_a_checkpoint_record_is_read_as_mirrormaker_2_writes_it() -> None:
    checkpoint = Checkpoint("app", "b.orders", 3, 55, 52)
    key, value = encode_checkpoint(checkpoint, metadata="m")
    # Checkpoint.KEY_SCHEMA / VALUE_SCHEMA_V0, big-endian, strings as INT16 length + UTF-8:
    assert key == b"\x00\x03app" + b"\x00\x08b.orders" + struct.pack(">i", 3)
    assert value == b"\x00\x00" + struct.pack(">qq", 55, 52) + b"\x00\x01m"
    assert decode_checkpoint(key, value) == checkpoint
    with pytest.raises(ValueError, match="version 1"):
        decode_checkpoint(key, b"\x00\x01" + value[2:])
    with pytest.raises(ValueError):
        decode_checkpoint(b"\x00\x09ab", value)  # a string longer than the record


def test_the_mirror_is_the_one_with_a_checkpoint_connector() -> None:
    facts = mirror_facts(mm2([mirror(), {"sourceCluster": "a", "targetCluster": "b", "sourceConnector": {}}]), None)
    assert not isinstance(facts, PlannedRefusal)
    assert (facts.name, facts.checkpoints_topic, facts.checkpoint_connector) == (
        "b->a",
        "b.checkpoints.internal",
        "b->a.MirrorCheckpointConnector",
    )
    assert facts.remote("orders") == "b.orders" and facts.remote("a.orders") == "orders"  # back from the target
    none = mirror_facts(mm2([{"sourceCluster": "b", "targetCluster": "a", "sourceConnector": {}}]), None)
    assert isinstance(none, PlannedRefusal) and none.reason == "NoCheckpointConnector"
    assert "mirrors: b->a" in none.message
    wrong_alias = mirror_facts(mm2([mirror()]), "c")
    assert isinstance(wrong_alias, PlannedRefusal) and "from c" in wrong_alias.message
    several = mirror_facts(mm2([mirror(), mirror(sourceCluster="a", targetCluster="b")]), None)
    assert isinstance(several, PlannedRefusal) and several.reason == "MirrorNotFound"
    assert not isinstance(
        mirror_facts(mm2([mirror(), mirror(sourceCluster="a", targetCluster="b")]), "a"), PlannedRefusal
    )


def test_the_replication_policy_names_the_topics() -> None:
    separator = mirror(checkpointConnector={"config": {"replication.policy.separator": "_"}})
    facts = mirror_facts(mm2([separator]), None)
    assert not isinstance(facts, PlannedRefusal)
    assert (facts.checkpoints_topic, facts.remote("orders")) == ("b_checkpoints_internal", "b_orders")
    identity = mirror(
        checkpointConnector={
            "config": {"replication.policy.class": "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"}
        }
    )
    facts = mirror_facts(mm2([identity]), None)
    assert not isinstance(facts, PlannedRefusal) and facts.remote("orders") == "orders"
    custom = mirror(checkpointConnector={"config": {"replication.policy.class": "com.example.Mine"}})
    refused = mirror_facts(mm2([custom]), None)
    assert isinstance(refused, PlannedRefusal) and refused.reason == "CustomReplicationPolicy"


def test_groups_mirrormaker_2_never_checkpoints_are_refused_naming_the_setting() -> None:
    default = mirror(checkpointConnector={})
    facts = mirror_facts(mm2([default]), None)
    assert not isinstance(facts, PlannedRefusal)
    refusal = group_refusal(facts, "connect-orders-sink")  # the default groups.exclude
    assert refusal is not None and refusal.reason == "GroupNotCheckpointed" and "groups.exclude" in refusal.message
    assert group_refusal(facts, "orders-app") is None
    off = mirror_facts(mm2([mirror(checkpointConnector={"config": {"emit.checkpoints.enabled": False}})]), None)
    assert not isinstance(off, PlannedRefusal)
    disabled = group_refusal(off, "orders-app")
    assert disabled is not None and disabled.reason == "CheckpointsDisabled"


def test_the_newest_checkpoint_per_partition_is_the_translation_and_gaps_are_listed() -> None:
    facts = mirror_facts(mm2([mirror(checkpointConnector={"config": {"emit.checkpoints.interval.seconds": 30}})]), None)
    assert not isinstance(facts, PlannedRefusal)
    checkpoints = {("b.orders", 0): (55, 52), ("b.orders", 1): (10, 10)}
    upstream = {("orders", 0): 55, ("orders", 1): 12, ("orders", 2): 7, ("audit", 0): 3}
    translation = translate("app", facts, checkpoints, upstream, {"b.orders"})
    assert translation.offsets == {("b.orders", 0): 52, ("b.orders", 1): 10}
    assert [(u.topic, u.partition, u.reason) for u in translation.untranslatable] == [
        ("audit", 0, "TopicNotReplicated"),
        ("orders", 2, "NoCheckpoint"),
    ]
    assert any("orders-1: the newest checkpoint is for offset 10, the group is at 12" in n for n in translation.notes)
    refusal = translation.refusal()
    assert refusal is not None and refusal.reason == "UntranslatablePartitions"
    assert (
        "audit-0 (offset 3): TopicNotReplicated" in refusal.message
        and "orders-2 (offset 7): NoCheckpoint" in refusal.message
    )
    assert "emit.checkpoints.interval.seconds (30 s)" in refusal.message
    # A remote topic missing on the target is not replicated either; without offset syncs nothing translates.
    missing = translate("app", facts, checkpoints, {("orders", 0): 55}, set())
    assert [u.reason for u in missing.untranslatable] == ["TopicNotReplicated"]
    no_syncs = mirror_facts(mm2([mirror(sourceConnector={"config": {"emit.offset-syncs.enabled": False}})]), None)
    assert not isinstance(no_syncs, PlannedRefusal)
    assert [u.reason for u in translate("app", no_syncs, {}, {("orders", 0): 1}, None).untranslatable] == [
        "OffsetSyncsDisabled"
    ]


def test_a_source_site_that_does_not_answer_leaves_the_checkpoints_alone() -> None:
    """The checkpoints alone are a partial failover nobody can list (issue 46, item 5): refused
    unless asked for with allowPartial."""
    facts = mirror_facts(mm2([mirror()]), None)
    assert not isinstance(facts, PlannedRefusal)
    translation = translate("app", facts, {("b.orders", 0): (55, 52)}, None, None)
    assert translation.offsets == {("b.orders", 0): 52} and translation.refusal(allow_partial=True) is None
    refused = translation.refusal()
    assert refused is not None and refused.reason == "UntranslatablePartitions"
    assert "could not be read" in refused.message and "allowPartial" in refused.message
    assert "could not be read" in translation.notes[0]
    empty = translate("app", facts, {}, None, None).refusal()
    assert empty is not None and "no checkpoint of it yet" in empty.message
    assert offsets_document({("b.orders", 0): 52}) == {
        "offsets": [{"partition": {"kafka_topic": "b.orders", "kafka_partition": 0}, "offset": {"kafka_offset": 52}}]
    }


def record(**fields: Any) -> dict[str, Any]:
    return {"mirror": "b->a", "group": "app", "source": "annotation", "time": "2026-11-26T10:00:00Z", **fields}


def test_an_annotation_request_runs_once_and_its_removal_is_finished() -> None:
    asked = {f"{API_GROUP}/failover-group": "app", f"{API_GROUP}/request-id": "r1"}
    requests, conditions, finish = failover_requests(mm2([mirror()], asked))
    assert [(r.source, r.group, r.request_id, r.instance) for r in requests] == [("annotation", "app", "r1", "120")]
    assert {a.annotation for a in requests[0].removals} == {
        f"{API_GROUP}/failover-group",
        f"{API_GROUP}/request-id",
        f"{API_GROUP}/handled-request",
    }
    assert conditions == [] and finish == ()
    key = failover_key(asked)
    done = record(result="Succeeded", requestKey=key, instance="118")
    requests, _, finish = failover_requests(mm2([mirror()], asked, groupFailovers=[done]))
    assert requests == [] and any(a.kind == "mark_handled" and a.annotation_value == "118" for a in finish)
    # Once marked handled, the same annotations again are a new request.
    marked = {**asked, f"{API_GROUP}/handled-request": "118"}
    assert len(failover_requests(mm2([mirror()], marked, groupFailovers=[done]))[0]) == 1
    failed = record(result="Failed", reason="ConsumerGroupActive", message="busy", requestKey=key, generation=3)
    requests, conditions, _ = failover_requests(mm2([mirror()], asked, groupFailovers=[failed]))
    assert requests == [] and [(c.type, c.reason) for c in conditions] == [
        ("GroupFailoverFailed", "ConsumerGroupActive")
    ]
    offsets_too = {**asked, f"{API_GROUP}/connector-offsets": "list"}
    requests, conditions, _ = failover_requests(mm2([mirror()], offsets_too))
    assert requests == [] and conditions[0].reason == "OtherRequestPending"


def test_declared_groups_fail_over_once_and_a_cut_short_commit_is_resumed_first() -> None:
    declared = mirror(groupFailover={"groups": ["app", "billing"]})
    requests, _, _ = failover_requests(mm2([declared]))
    assert [(r.source, r.group, r.mirror) for r in requests] == [("spec", "app", "b->a"), ("spec", "billing", "b->a")]
    done = record(source="spec", result="Succeeded")
    committing = record(source="spec", group="billing", step="Committing", pinned="dr-pinned-x")
    requests, _, _ = failover_requests(mm2([declared], groupFailovers=[done, committing]))
    assert [(r.group, r.resume is not None) for r in requests] == [("billing", True)]
    records = [GroupFailoverStatus.model_validate(r) for r in [done, committing, record(source="spec", group="gone")]]
    records += [GroupFailoverStatus.model_validate(record(requestKey=str(i), result="Succeeded")) for i in range(15)]
    kept = kept_records(mm2([declared]), records)
    assert [r.group for r in kept if r.source == "spec"] == ["app", "billing"]  # "gone" is no longer listed
    assert [r.request_key for r in kept if r.source == "annotation"] == [str(i) for i in range(5, 15)]
