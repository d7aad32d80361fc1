"""Remote topic names follow the mirror's replication policy (issue 46, item 4).

MirrorMaker 2's ``DefaultReplicationPolicy`` and ``IdentityReplicationPolicy`` restated
(``planning.mirror_topics.ReplicationPolicy``), checked against their Java sources: remote topics
nest once per hop (``x.y.t`` on z came from x, where it came from y), ``originalTopic`` strips every
alias, recursively, and ``MirrorCheckpointTask.renameTopicPartition`` names a checkpoint's topic with
them. A topic that crossed two mirrors was reported ``NoCheckpoint``: one alias was stripped where
MirrorMaker 2 strips all. The class comes from the mirror's config; an unknown one is refused,
saying where and what was expected.
"""

from __future__ import annotations

import pytest

from connect_offsets.planning.failover import mirror_facts, translate
from connect_offsets.planning.mirror_topics import (
    DEFAULT_POLICY,
    IDENTITY_POLICY,
    ReplicationPolicy,
    mirrored_topic_filter,
    replication_policy,
)
from connect_offsets.planning.plan import PlannedRefusal
from tests.unit.planning_fixtures import failover_mirror as mirror
from tests.unit.planning_fixtures import failover_mm2 as mm2

pytestmark = pytest.mark.unit

DEFAULT = ReplicationPolicy(identity=False, separator=".", internal_separator=".")


def test_the_default_policy_nests_once_per_hop_and_strips_every_hop() -> None:
    assert DEFAULT.format_remote("x", "y.t") == "x.y.t"
    assert (DEFAULT.topic_source("x.y.t"), DEFAULT.upstream_topic("x.y.t")) == ("x", "y.t")
    assert DEFAULT.original_topic("x.y.t") == "t" and DEFAULT.original_topic("t") == "t"
    assert (DEFAULT.topic_source("t"), DEFAULT.upstream_topic("t")) == (None, None)
    # Java's split drops trailing empty strings: "t." is no remote topic, ".t" comes from "".
    assert DEFAULT.topic_source("t.") is None and DEFAULT.topic_source("a..t") == "a"


def test_a_separator_of_several_characters() -> None:
    policy = replication_policy({"replication.policy.separator": "__"}, "here")
    assert isinstance(policy, ReplicationPolicy)
    assert policy.format_remote("x", "y__t") == "x__y__t" and policy.original_topic("x__y__t") == "t"
    assert policy.topic_source("x_y.t") is None and policy.checkpoints_topic("x") == "x__checkpoints__internal"
    kept = replication_policy(
        {"replication.policy.separator": "_", "replication.policy.internal.topic.separator.enabled": "false"}, "here"
    )
    assert isinstance(kept, ReplicationPolicy) and kept.checkpoints_topic("x") == "x.checkpoints.internal"


def test_checkpoint_topics_as_mirror_checkpoint_task_names_them() -> None:
    # renameTopicPartition: a topic that came from the target goes back to its original name, all hops.
    assert DEFAULT.checkpoint_topic("t", "x", "z") == "x.t"
    assert DEFAULT.checkpoint_topic("y.t", "x", "z") == "x.y.t"  # two hops: x.y.t on z
    assert DEFAULT.checkpoint_topic("z.t", "x", "z") == "t"
    assert DEFAULT.checkpoint_topic("z.y.t", "x", "z") == "t"  # MirrorMaker 2's originalTopic, not "y.t"


def test_the_identity_policy_keeps_names_but_heartbeats() -> None:
    policy = replication_policy({"replication.policy.class": IDENTITY_POLICY, "source.cluster.alias": "x"}, "here")
    assert isinstance(policy, ReplicationPolicy) and policy.identity
    assert policy.checkpoint_topic("y.t", "x", "z") == "y.t" and policy.checkpoint_topic("t", "x", "z") == "t"
    assert policy.topic_source("y.t") == "x" and policy.original_topic("y.t") == "y.t"
    assert policy.checkpoint_topic("heartbeats", "x", "z") == "x.heartbeats"  # as the default policy names them


def test_an_unknown_policy_class_says_where_and_what_was_expected() -> None:
    refused = replication_policy({"replication.policy.class": "com.example.Mine"}, "mirror x->z")
    assert isinstance(refused, str)
    assert refused.startswith("mirror x->z: replication.policy.class 'com.example.Mine' is not ")
    assert DEFAULT_POLICY in refused and IDENTITY_POLICY in refused
    facts = mirror_facts(mm2([mirror(checkpointConnector={"config": {"replication.policy.class": "Mine"}})]), None)
    assert isinstance(facts, PlannedRefusal) and facts.reason == "CustomReplicationPolicy"
    assert "(its checkpoint connector's config)" in facts.message and "'Mine'" in facts.message


def test_a_group_on_a_two_hop_topic_translates() -> None:
    """Mirror b->a (source b): a group on b reads ``c.t`` (from c, one hop) and ``d.c.t`` (two hops);
    their checkpoints on a are ``b.c.t`` and ``b.d.c.t``. A topic that came from a (``a.c.t``) is a
    cycle MirrorMaker 2 does not replicate; its checkpoint name would be the original ``t``."""
    facts = mirror_facts(mm2([mirror(topicsPattern=".*")]), None)
    assert not isinstance(facts, PlannedRefusal)
    assert facts.remote("a.c.t") == "t"
    checkpoints = {("b.c.t", 0): (40, 38), ("b.d.c.t", 1): (7, 6)}
    upstream = {("c.t", 0): 40, ("d.c.t", 1): 7, ("a.c.t", 0): 3}
    translation = translate("app", facts, checkpoints, upstream, {"b.c.t", "b.d.c.t"})
    assert translation.offsets == {("b.c.t", 0): 38, ("b.d.c.t", 1): 6}
    assert [(u.topic, u.reason) for u in translation.untranslatable] == [("a.c.t", "TopicNotReplicated")]


def test_the_offset_syncs_topic_is_named_by_the_same_policy() -> None:
    assert DEFAULT.offset_syncs_topic("west") == "mm2-offset-syncs.west.internal"
    policy = replication_policy({"replication.policy.separator": "-"}, "here")
    assert isinstance(policy, ReplicationPolicy)
    assert policy.offset_syncs_topic("west") == "mm2-offset-syncs-west-internal"


def test_an_empty_separator_is_refused_never_taken_for_a_dot() -> None:
    """Attacker review of issue 46, F6: MirrorMaker 2 keeps an empty ``replication.policy.separator``
    (its offset-syncs topic is ``mm2-offset-syncs<alias>internal``); taking "." for it named another
    topic (an offset-syncs reset could delete another mirror's). Refused like an unknown class,
    naming the mirror and the setting (the offset-syncs reset: test_mirror_planning)."""
    refused = replication_policy({"replication.policy.separator": ""}, "mirror x->z")
    assert isinstance(refused, str) and refused.startswith("mirror x->z: replication.policy.separator is empty")
    assert mirrored_topic_filter({"replication.policy.separator": ""}) is None
    facts = mirror_facts(mm2([mirror(checkpointConnector={"config": {"replication.policy.separator": ""}})]), None)
    assert isinstance(facts, PlannedRefusal) and facts.reason == "CustomReplicationPolicy"
    assert "mirror" in facts.message and "replication.policy.separator is empty" in facts.message
