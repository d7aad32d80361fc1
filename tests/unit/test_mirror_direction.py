"""Unit tests for where a KafkaMirrorMaker2's records go (``mirror_direction``, ``producer_override``).

MirrorMaker 2 run as Connect connectors writes every record through the Connect worker's producer,
into the worker's own Kafka cluster. The matrix:

* ``writeToTarget: worker`` (default): target id == Connect's id passes; a different target is
  refused (``TargetIsNotConnectCluster``) naming both ids, the field to set and whether the records
  would land in the source (reversed aliases) or a third cluster; an unknown Connect id refuses too;
* source id == target id: refused in both modes (``MirrorOntoItself``);
* a cluster that could not be asked: ``MirrorClusterUnreachable`` with the error, in both modes;
* ``writeToTarget: producerOverride``: any target passes the id check (Connect validates later), and
  every connector of the mirror gets ``producer.override.bootstrap.servers`` and the target's
  connection and security settings (secrets included), never the source's or unrelated ones.
"""

from __future__ import annotations

from typing import Any

import pytest

from connect_offsets.models.crds import KafkaMirrorMaker2Resource, MirrorSpec, WriteToTarget
from connect_offsets.planning import MirrorClusterIds, mirror_direction, mirror_targets, producer_override

SOURCE_ID, TARGET_ID, THIRD_ID = "src-AAAAAAAAAAAAAAAAAA", "tgt-BBBBBBBBBBBBBBBBBB", "oth-CCCCCCCCCCCCCCCCCC"


def mirror(write_to_target: str | None = None) -> MirrorSpec:
    fields: dict[str, Any] = {"sourceCluster": "east", "targetCluster": "west"}
    if write_to_target is not None:
        fields["writeToTarget"] = write_to_target
    return MirrorSpec.model_validate(fields)


def test_default_mode_is_worker() -> None:
    assert mirror().write_to_target is WriteToTarget.WORKER


def test_target_is_the_connect_cluster_passes() -> None:
    assert mirror_direction(0, mirror(), TARGET_ID, MirrorClusterIds(SOURCE_ID, TARGET_ID)) is None


def test_reversed_aliases_are_refused_naming_both_ids_and_the_fix() -> None:
    refusal = mirror_direction(2, mirror(), SOURCE_ID, MirrorClusterIds(SOURCE_ID, TARGET_ID))
    assert refusal is not None
    assert (refusal.type, refusal.status, refusal.reason) == ("Ready", "False", "TargetIsNotConnectCluster")
    for fragment in (
        "spec.mirrors[2] (east -> west)",
        f"Kafka cluster {TARGET_ID}",
        f"use Kafka cluster {SOURCE_ID}",
        "into its source",
        "spec.mirrors[2].writeToTarget: producerOverride",
        "connector.client.config.override.policy",
        "Nothing was created",
    ):
        assert fragment in refusal.message, (fragment, refusal.message)


def test_a_third_cluster_is_named_as_such() -> None:
    refusal = mirror_direction(0, mirror(), THIRD_ID, MirrorClusterIds(SOURCE_ID, TARGET_ID))
    assert refusal is not None and refusal.reason == "TargetIsNotConnectCluster"
    assert "neither source nor target" in refusal.message and THIRD_ID in refusal.message


def test_connect_without_a_cluster_id_is_refused_in_worker_mode() -> None:
    refusal = mirror_direction(0, mirror(), None, MirrorClusterIds(SOURCE_ID, TARGET_ID))
    assert refusal is not None and refusal.reason == "TargetIsNotConnectCluster"
    assert "(not reported by Connect)" in refusal.message


@pytest.mark.parametrize("mode", ["worker", "producerOverride"])
def test_a_cluster_mirrored_onto_itself_is_refused(mode: str) -> None:
    refusal = mirror_direction(1, mirror(mode), SOURCE_ID, MirrorClusterIds(SOURCE_ID, SOURCE_ID))
    assert refusal is not None and refusal.reason == "MirrorOntoItself"
    assert f"id {SOURCE_ID}" in refusal.message and "spec.mirrors[1]" in refusal.message


@pytest.mark.parametrize("mode", ["worker", "producerOverride"])
def test_an_unreachable_cluster_is_reported_with_the_error(mode: str) -> None:
    refusal = mirror_direction(
        0, mirror(mode), TARGET_ID, MirrorClusterIds(error="describe cluster west:9092: timed out")
    )
    assert refusal is not None and refusal.reason == "MirrorClusterUnreachable"
    assert "describe cluster west:9092: timed out" in refusal.message and "nothing is created" in refusal.message


@pytest.mark.parametrize("connect_id", [SOURCE_ID, TARGET_ID, THIRD_ID, None])
def test_producer_override_passes_the_id_check_for_any_connect_cluster(connect_id: str | None) -> None:
    assert mirror_direction(0, mirror("producerOverride"), connect_id, MirrorClusterIds(SOURCE_ID, TARGET_ID)) is None


def test_an_unknown_mode_is_refused_by_the_schema() -> None:
    with pytest.raises(ValueError, match=r"writeToTarget|write_to_target"):
        mirror("consumer")


def test_producer_override_keeps_only_the_targets_connection_settings() -> None:
    settings = {
        "target.cluster.alias": "west",
        "target.cluster.bootstrap.servers": "west:9092",
        "target.cluster.security.protocol": "SASL_SSL",
        "target.cluster.sasl.jaas.config": "secret-jaas",
        "target.cluster.ssl.truststore.location": "/t.jks",
        "target.cluster.linger.ms": "5",
        "source.cluster.sasl.jaas.config": "source-secret",
    }
    assert producer_override(settings) == {
        "producer.override.bootstrap.servers": "west:9092",
        "producer.override.security.protocol": "SASL_SSL",
        "producer.override.sasl.jaas.config": "secret-jaas",
        "producer.override.ssl.truststore.location": "/t.jks",
    }


def resource(write_to_target: str | None) -> KafkaMirrorMaker2Resource:
    mirror_fields: dict[str, Any] = {
        "sourceCluster": "east",
        "targetCluster": "west",
        "sourceConnector": {},
        "checkpointConnector": {},
        "heartbeatConnector": {"config": {"producer.override.linger.ms": 7}},
    }
    if write_to_target is not None:
        mirror_fields["writeToTarget"] = write_to_target
    return KafkaMirrorMaker2Resource.model_validate(
        {
            "apiVersion": "connect-offsets.io/v1beta1",
            "kind": "KafkaMirrorMaker2",
            "metadata": {"name": "m", "namespace": "team-a", "generation": 1},
            "spec": {
                "clusters": [
                    {"alias": "east", "bootstrapServers": "east:9092", "config": {"security.protocol": "SSL"}},
                    {
                        "alias": "west",
                        "bootstrapServers": "west:9092",
                        "config": {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"},
                        "secretConfig": {"sasl.jaas.config": {"name": "west", "key": "jaas"}},
                    },
                ],
                "mirrors": [mirror_fields],
            },
        }
    )


def test_every_connector_of_an_override_mirror_writes_to_the_target() -> None:
    plan = mirror_targets(resource("producerOverride"), {("west", "jaas"): "west-jaas"})
    assert len(plan.targets) == 3
    for target in plan.targets:
        assert target.config["producer.override.bootstrap.servers"] == "west:9092"
        assert target.config["producer.override.security.protocol"] == "SASL_SSL"
        assert target.config["producer.override.sasl.mechanism"] == "PLAIN"
        assert target.config["producer.override.sasl.jaas.config"] == "west-jaas"
    heartbeat = next(t for t in plan.targets if t.name.endswith("Heartbeat" + "Connector"))
    assert heartbeat.config["producer.override.linger.ms"] == "7"  # the block's own config still applies


def test_worker_mode_sets_no_producer_override() -> None:
    plan = mirror_targets(resource(None), {("west", "jaas"): "west-jaas"})
    for target in plan.targets:
        overrides = {k for k in target.config if k.startswith("producer.override.")}
        assert overrides <= {"producer.override.linger.ms"}
