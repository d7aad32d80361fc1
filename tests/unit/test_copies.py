"""Copies of offsets without the stack (issue 34): alter-from-connector and initialOffsets.fromConnector
through the reconcile layer against the fake worker, the rules that refuse a source (each refusal
names its rule and changes nothing), the dry run of a copy, and the plugin's local parts.

Covers: a copy applies the source as read at the request's first attempt (pinned; the source moves
on); a connector owned by another namespace is refused unless its resource lists this namespace in
``offsets-readers``; an unowned connector, an unknown one, one on a ConnectCluster that does not
allow the namespace, and a copy from itself are refused; a copy's dry run lists what will not
match; a new connector copies before it is created; the plugin's manifest for a new TO and how it
reads a created connector's status.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from connect_offsets.models.crds import InitialOffsetsSpec
from connect_offsets.planning.copies import offsets_readers, source_refusal
from connect_offsets.tools.kubectl.main import main
from connect_offsets.tools.kubectl.moving import copied_manifest, created_state
from connect_offsets.vocabulary import API_GROUP, CLUSTERS, CONNECTORS, OWNER_CONFIG_KEY
from tests.fakes import FakeConnector
from tests.reconcile_pass import FILE, FILE_SOURCE, NAME, NS, URL, Stack, position

pytestmark = pytest.mark.unit

SOURCE = "orders-v1"
PINNED = f"{API_GROUP}/pin-kind=alter"


def source_connector(stack: Stack, owner: str, at: int = 50, file: str = FILE) -> None:
    stack.connect.connectors[SOURCE] = FakeConnector(
        {"connector.class": FILE_SOURCE, "file": file, OWNER_CONFIG_KEY: owner}, "RUNNING", position(at)
    )
    stack.connect.connectors[SOURCE].offsets[0]["partition"]["filename"] = file


def owning_resource(stack: Stack, namespace: str, readers: str | None = None) -> None:
    annotations = {f"{API_GROUP}/offsets-readers": readers} if readers is not None else {}
    stack.kube.put_resource(
        CONNECTORS,
        {
            "apiVersion": f"{API_GROUP}/v1beta1",
            "kind": "KafkaConnector",
            "metadata": {"name": SOURCE, "namespace": namespace, "annotations": annotations},
            "spec": {"class": FILE_SOURCE, "config": {"file": FILE}},
        },
    )


def last(stack: Stack) -> dict[str, Any]:
    return dict(stack.status().get("lastOffsetsOperation") or {})


async def copy(stack: Stack, **annotations: str) -> dict[str, Any]:
    stack.annotate(connector_offsets="alter", alter_from_connector=SOURCE, **annotations)
    for _ in range(6):
        await stack.reconcile()
    return last(stack)


def test_readers_and_the_ownership_rule() -> None:
    assert offsets_readers({f"{API_GROUP}/offsets-readers": " team-b, Team-C ,bad/name,team-d"}) == {"team-b", "team-d"}
    assert source_refusal("connector x", "team-a/x", "team-a", None) is None
    assert source_refusal("connector x", "team-b/x", "team-a", frozenset({"team-a"})) is None
    unowned = source_refusal("connector x", None, "team-a", None)
    assert (
        unowned is not None and unowned.reason == "SourceConnectorNotAllowed" and "was not created" in unowned.message
    )
    other = source_refusal("connector x", "team-b/x", "team-a", frozenset({"team-c"}))
    assert other is not None and "does not list namespace team-a in its annotation" in other.message
    gone = source_refusal("connector x", "team-b/x", "team-a", None)
    assert gone is not None and "could not be read" in gone.message


async def test_a_copy_applies_the_source_as_read_at_the_first_attempt(stack: Stack) -> None:
    await stack.created("stopped", position(30))
    source_connector(stack, f"{NS}/{SOURCE}")
    stack.annotate(connector_offsets="alter", alter_from_connector=SOURCE)
    await stack.reconcile()  # reads the source once and pins it
    pins = stack.kube.configmaps_labelled(PINNED)
    assert len(pins) == 1 and stack.connect.sent("PATCH") == []
    (pin,) = pins.values()
    assert json.loads(pin["data"]["offsets.json"])["offsets"] == position(50)
    assert (
        pin["metadata"]["annotations"][f"{API_GROUP}/pinned-from"] == f"connector {SOURCE} on ConnectCluster {NS}/local"
    )
    stack.connect.connectors[SOURCE].offsets = position(90)  # the source moves on: the copy does not
    for _ in range(3):
        await stack.reconcile()
    assert stack.connect.connectors[NAME].offsets == position(50)
    record = last(stack)
    assert (record["operation"], record["result"]) == ("alter", "Succeeded") and record["backup"], record
    assert stack.annotations().get(f"{API_GROUP}/connector-offsets") is None
    assert "offsetsProgress" not in stack.status()
    assert any(e.reason == "OffsetsPinned" for e in stack.kube.events)


@pytest.mark.parametrize(
    ("owner", "readers", "reason", "words"),
    [
        ("team-b/orders-v1", None, "SourceConnectorNotAllowed", "does not list namespace team-a"),
        ("", None, "SourceConnectorNotAllowed", "was not created by a resource of this operator"),
    ],
)
async def test_a_connector_this_namespace_may_not_read_is_refused_and_nothing_changes(
    stack: Stack, owner: str, readers: str | None, reason: str, words: str
) -> None:
    await stack.created("stopped", position(30))
    source_connector(stack, owner)
    owning_resource(stack, "team-b", readers)
    record = await copy(stack)
    assert (record["result"], record["reason"]) == ("Failed", reason) and words in record["message"], record
    assert stack.connect.connectors[NAME].offsets == position(30)
    assert stack.backups() == {} and stack.kube.configmaps_labelled(PINNED) == {}
    assert stack.connect.changes() == []


async def test_the_owners_grant_lets_another_namespace_copy(stack: Stack) -> None:
    await stack.created("stopped", position(30))
    source_connector(stack, f"team-b/{SOURCE}")
    owning_resource(stack, "team-b", "team-a")
    record = await copy(stack)
    assert record["result"] == "Succeeded", record
    assert stack.connect.connectors[NAME].offsets == position(50)


async def test_an_unknown_connector_a_cluster_not_allowed_and_a_copy_of_itself_are_refused(stack: Stack) -> None:
    await stack.created("stopped", position(30))
    stack.annotate(connector_offsets="alter", alter_from_connector="nope")
    for _ in range(3):
        await stack.reconcile()
    assert (last(stack)["reason"], "does not exist" in last(stack)["message"]) == ("SourceConnectorNotFound", True)
    stack.kube.put_resource(
        CLUSTERS,
        {
            "apiVersion": f"{API_GROUP}/v1beta1",
            "kind": "ConnectCluster",
            "metadata": {"name": "shared", "namespace": "team-b"},
            "spec": {"url": URL},
        },
    )
    source_connector(stack, f"{NS}/{SOURCE}")
    record = await copy(stack, alter_from_cluster="team-b/shared", request_id="r2")
    assert record["reason"] == "ClusterNotAllowed" and "does not list namespace team-a" in record["message"], record
    body = stack.kube.resource(CONNECTORS, NS, NAME)
    body["metadata"]["annotations"].pop(f"{API_GROUP}/alter-from-cluster")
    stack.kube.put_resource(CONNECTORS, body)
    stack.annotate(connector_offsets="alter", alter_from_connector=NAME, request_id="r3")
    for _ in range(3):
        await stack.reconcile()
    assert (last(stack)["reason"], "is this connector" in last(stack)["message"]) == ("InvalidAnnotation", True)
    assert stack.connect.connectors[NAME].offsets == position(30) and stack.connect.changes() == []


async def test_a_copys_dry_run_lists_what_will_not_match(stack: Stack) -> None:
    await stack.created("running", position(30))
    source_connector(stack, f"{NS}/{SOURCE}", file="/data/other.txt")
    record = await copy(stack, dry_run="true")
    assert (record["result"], record.get("dryRun")) == ("Succeeded", True), record
    report = json.loads(stack.kube.objects["orders-offsets"]["data"]["dry-run.json"])
    assert report["source"] == f"connector {SOURCE} on ConnectCluster {NS}/local"
    assert any("expected the connector's file" in line for line in report["notMatching"]), report
    assert "1 problem(s)" in report["summary"]
    assert stack.connect.connectors[NAME].offsets == position(30) and stack.connect.changes() == []
    # The real copy refuses what does not match: its partitions are copied as they are.
    record = await copy(stack, request_id="real")
    assert record["reason"] == "InvalidOffsets" and "do not fit this connector" in record["message"]


async def test_a_new_connector_copies_before_it_is_created(stack: Stack) -> None:
    source_connector(stack, f"{NS}/{SOURCE}")
    stack.connector("running")
    body = stack.kube.resource(CONNECTORS, NS, NAME)
    body["spec"]["initialOffsets"] = {"fromConnector": {"name": SOURCE}}
    stack.kube.put_resource(CONNECTORS, body)
    await stack.reconcile()
    initial = stack.status()["initialOffsets"]
    assert (initial["step"], initial["source"]) == (
        "Pinned",
        f"connector {SOURCE}",
    ) and NAME not in stack.connect.connectors
    for _ in range(4):
        await stack.reconcile()
    assert stack.status()["initialOffsets"]["step"] == "Applied"
    assert stack.connect.connectors[NAME].offsets == position(50) and stack.connect.connectors[NAME].state == "RUNNING"


async def test_a_new_connector_whose_source_is_refused_is_not_created(stack: Stack) -> None:
    source_connector(stack, f"team-b/{SOURCE}")
    owning_resource(stack, "team-b")
    stack.connector("running")
    body = stack.kube.resource(CONNECTORS, NS, NAME)
    body["spec"]["initialOffsets"] = {"fromConnector": {"name": SOURCE}}
    stack.kube.put_resource(CONNECTORS, body)
    outcome = await stack.reconcile()
    ready = stack.condition("Ready")
    assert ready is not None and ready["reason"] == "SourceConnectorNotAllowed", ready
    assert "nothing was created" in ready["message"] and outcome.requeue_after == 30.0
    assert NAME not in stack.connect.connectors and "initialOffsets" not in stack.status()


def test_initial_offsets_name_exactly_one_source() -> None:
    with pytest.raises(ValueError, match="exactly one of fromConfigMap, fromConnector and fromMirror"):
        InitialOffsetsSpec.model_validate({"fromConfigMap": {"name": "x"}, "fromConnector": {"name": "y"}})
    spec = InitialOffsetsSpec.model_validate({"fromMirror": {"mirror": "dr", "sourceConnector": "sink"}})
    assert spec.from_mirror is not None and spec.from_mirror.group is None


def test_the_plugin_copies_a_spec_without_its_offsets_configmaps() -> None:
    source = {
        "metadata": {
            "name": "orders-v1",
            "namespace": "team-a",
            "labels": {f"{API_GROUP}/cluster": "local", "team": "payments"},
        },
        "spec": {
            "class": FILE_SOURCE,
            "config": {"file": FILE},
            "state": "stopped",
            "listOffsets": {"toConfigMap": {"name": "v1-offsets"}},
            "alterOffsets": {"fromConfigMap": {"name": "v1-offsets"}},
        },
    }
    same = copied_manifest(source, "orders-v2", "team-a", ("team-a", "local"), ("team-a", "local"))
    assert same["spec"] == {
        "class": FILE_SOURCE,
        "config": {"file": FILE},
        "state": "stopped",
        "initialOffsets": {"fromConnector": {"name": "orders-v1"}},
    }
    assert same["metadata"]["labels"] == {f"{API_GROUP}/cluster": "local", "team": "payments"}
    moved = copied_manifest(source, "orders-west", "team-a", ("platform", "west"), ("team-a", "local"))
    assert moved["spec"]["initialOffsets"] == {"fromConnector": {"name": "orders-v1", "clusterRef": {"name": "local"}}}
    assert moved["metadata"]["labels"][f"{API_GROUP}/cluster-namespace"] == "platform"
    applied = {"status": {"initialOffsets": {"step": "Applied", "message": "applied 1"}}}
    assert created_state(applied) == ("Succeeded", "", "applied 1")
    refused = {
        "status": {"conditions": [{"type": "Ready", "status": "False", "reason": "ClusterNotAllowed", "message": "m"}]}
    }
    assert created_state(refused) == ("Failed", "ClusterNotAllowed", "m")
    creating = {"status": {"conditions": [{"type": "Ready", "status": "False", "reason": "Creating", "message": "m"}]}}
    assert created_state(creating) is None and created_state({}) is None


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["copy", "a", "b", "--dry-run", "--stop-connector"], "--dry-run changes nothing"),
        (["copy", "mm2/a", "b"], "copy works on KafkaConnectors"),
        (["failover-group", " ", "--mirror", "dr"], "is not a consumer group id"),
        (["failover-group", "app", "--mirror", "cokc/dr"], "--mirror names a KafkaMirrorMaker2"),
    ],
)
def test_the_plugin_refuses_what_it_can_before_reaching_the_cluster(
    argv: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    assert words in capsys.readouterr().err
