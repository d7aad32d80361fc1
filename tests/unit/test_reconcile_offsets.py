"""The reconcile layer's offsets requests, without the stack: ``ConnectorService`` against the shared
in-memory Kubernetes fake and a fake Connect worker mounted with respx (tests/fakes.py).

The same behaviours are checked on the real stack by tests/integration/test_safe_operations.py
(dry runs, refusals, stop -> change -> resume), test_large_offsets.py and
test_operator_large_offsets.py (chunked alters) and test_backups*.py; here each pass is driven by
hand, so the exact requests to Connect, their order against the ConfigMap writes, and the status
written after each pass are asserted.

Covers: a backup is written before an alter or reset changes offsets; a refused document ends in
a condition and sends nothing to Connect; a chunked alter that failed mid-way resumes from the
recorded chunk and never re-sends an applied one; stop -> change -> resume calls Connect in that
order and resumes even when the change fails; a dry run changes nothing; a step that cannot be
done now (StepUnavailable) ends the pass as transient without the change.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

import pytest

from connect_offsets.models.crds import KafkaConnectorResource
from connect_offsets.planning import Action, target_for_connector
from connect_offsets.reconcile.context import StepUnavailable
from connect_offsets.vocabulary import ANNOTATION_OFFSETS, API_GROUP, CONNECTORS, DRY_RUN_KEY
from tests.reconcile_pass import ANY_SOURCE, CM, FILE, NAME, NS, OFFSETS_PATH, Stack, document, position

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("operation", "change"), [("alter", f"connect: PATCH {OFFSETS_PATH}"), ("reset", f"connect: DELETE {OFFSETS_PATH}")]
)
async def test_a_backup_is_written_before_the_change(stack: Stack, operation: str, change: str) -> None:
    """alter/reset on a STOPPED connector: the current offsets go to a backup ConfigMap first, and
    only then does Connect get the change; status names the backup."""
    await stack.created("stopped")
    await stack.put_document(document(position(6)))
    stack.annotate(connector_offsets=operation)

    await stack.until_request_done()

    (backup_name, backup), *others = stack.backups().items()
    assert not others
    assert json.loads(backup["data"]["offsets.json"])["offsets"] == position(30)
    assert backup["metadata"]["annotations"][f"{API_GROUP}/operation"] == operation
    assert stack.journal.index(f"kube: create ConfigMap {backup_name}") < stack.journal.index(change)
    assert stack.connect.changes() == [change.removeprefix("connect: ")]
    last = stack.status()["lastOffsetsOperation"]
    assert (last["operation"], last["result"], last["backup"]) == (operation, "Succeeded", backup_name)
    assert stack.connect.connectors[NAME].offsets == ([] if operation == "reset" else position(6))
    assert "OffsetsOperationSucceeded" in stack.kube.reasons()


async def test_a_refused_document_ends_in_a_condition_and_sends_nothing(stack: Stack) -> None:
    """stop-connector with offsets for another file: refused before anything happens; the connector
    keeps running, no backup is taken (test_invalid_request_never_stops_the_connector)."""
    await stack.created("running")
    await stack.put_document(document([{"partition": {"filename": "/data/other.txt"}, "offset": {"position": 3}}]))
    stack.annotate(connector_offsets="alter", stop_connector="true")

    await stack.reconcile()
    await stack.reconcile()  # a second pass: still nothing may happen

    failed = stack.condition("OffsetsOperationFailed")
    assert failed is not None and failed["reason"] == "InvalidOffsets", stack.status()
    assert "offsets[0].partition.filename" in failed["message"]
    assert stack.connect.changes() == []
    assert stack.connect.connectors[NAME].state == "RUNNING"
    assert stack.connect.connectors[NAME].offsets == position(30)
    assert stack.backups() == {}
    assert "pendingOffsetsOperation" not in stack.status()
    assert stack.status()["lastOffsetsOperation"]["result"] == "Failed"
    assert "OffsetsOperationFailed" in stack.kube.reasons()


async def test_a_chunked_alter_resumes_at_the_recorded_chunk(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    """Five partitions, two per PATCH: the second PATCH fails with a 500; the progress in status says
    one chunk was applied, and the next pass sends chunks two and three only, reusing the backup."""
    monkeypatch.setenv("CONNECT_OFFSETS_PATCH_MAX_PARTITIONS", "2")
    old = [{"partition": {"file": f"f{i}"}, "offset": {"position": 0}} for i in range(5)]
    new = [{"partition": {"file": f"f{i}"}, "offset": {"position": 100 + i}} for i in range(5)]
    await stack.created("stopped", old, cls=ANY_SOURCE, config={"topic": "orders"})
    await stack.put_document(document(new))
    stack.connect.fail("PATCH", OFFSETS_PATH, 500, "Request timed out", after=1)  # the second chunk
    stack.annotate(connector_offsets="alter")

    outcome = await stack.reconcile()

    assert outcome.transient_error is not None  # retried with back-off
    progress = stack.status()["offsetsProgress"]
    assert progress["appliedChunks"] == 1, progress
    assert ANNOTATION_OFFSETS in stack.annotations()
    (backup_name,) = stack.backups()
    assert progress["backup"] == backup_name
    sent = [r.body["offsets"] for r in stack.connect.sent("PATCH")]
    assert sent == [new[0:2], new[2:4]]

    stack.connect.requests.clear()
    await stack.until_request_done()

    resent = [r.body["offsets"] for r in stack.connect.sent("PATCH")]
    assert resent == [new[2:4], new[4:5]]  # the applied first chunk is never sent again
    assert list(stack.backups()) == [backup_name]  # no second backup of half-changed offsets
    last = stack.status()["lastOffsetsOperation"]
    assert last["result"] == "Succeeded" and last["backup"] == backup_name
    assert "resumed at chunk 2" in last["message"]
    assert "offsetsProgress" not in stack.status()
    assert stack.connect.connectors[NAME].offsets == new


async def test_stop_change_resume_in_that_order(stack: Stack) -> None:
    """A RUNNING connector, alter with stop-connector: stop, backup, PATCH, resume; the outcome is
    published once it runs again (test_stop_change_resume_with_annotation_and_policy)."""
    await stack.created("running")
    await stack.put_document(document(position(21)))
    stack.annotate(connector_offsets="alter", stop_connector="true")

    await stack.until_request_done()

    stop, patch, resume = f"/connectors/{NAME}/stop", OFFSETS_PATH, f"/connectors/{NAME}/resume"
    assert stack.connect.changes() == [f"PUT {stop}", f"PATCH {patch}", f"PUT {resume}"]
    (backup_name,) = stack.backups()
    assert stack.journal.index(f"kube: create ConfigMap {backup_name}") < stack.journal.index(f"connect: PATCH {patch}")
    last = stack.status()["lastOffsetsOperation"]
    assert last["result"] == "Succeeded" and "connector back to running" in last["message"], last
    assert "pendingOffsetsOperation" not in stack.status()
    assert stack.connect.connectors[NAME].state == "RUNNING"
    assert stack.connect.connectors[NAME].offsets == position(21)
    assert "OffsetsChangeStarted" in stack.kube.reasons()


async def test_a_failed_change_still_resumes(stack: Stack) -> None:
    """Connect refuses the PATCH: the connector is resumed anyway, and the failure is published."""
    await stack.created("running")
    await stack.put_document(document(position(21)))
    stack.connect.fail("PATCH", OFFSETS_PATH, 400, "offsets rejected by the connector")
    stack.annotate(connector_offsets="alter", stop_connector="true")

    # A failed request keeps its annotation (it waits for a change by a person): run the passes
    # until the outcome is published.
    for _ in range(8):
        await stack.reconcile()
        if "lastOffsetsOperation" in stack.status():
            break
    await stack.reconcile()  # one more pass: nothing further is sent

    assert stack.connect.changes() == [
        f"PUT /connectors/{NAME}/stop",
        f"PATCH {OFFSETS_PATH}",
        f"PUT /connectors/{NAME}/resume",
    ]
    assert stack.connect.connectors[NAME].state == "RUNNING"
    assert stack.connect.connectors[NAME].offsets == position(30)
    last = stack.status()["lastOffsetsOperation"]
    assert (last["result"], last["reason"]) == ("Failed", "ConnectRejected"), last
    assert "Connect answered 400: offsets rejected by the connector" in last["message"]
    failed = stack.condition("OffsetsOperationFailed")
    assert failed is not None and failed["reason"] == "ConnectRejected"
    assert "pendingOffsetsOperation" not in stack.status()


async def test_a_dry_run_changes_nothing(stack: Stack) -> None:
    """alter with dry-run on a RUNNING connector: the diff in dry-run.json, a summary in status and
    an Event; nothing sent to Connect but reads, no backup (test_dry_run_diffs_and_changes_nothing)."""
    await stack.created("running")
    await stack.put_document(document(position(6)))
    stack.annotate(connector_offsets="alter", dry_run="true")

    await stack.until_request_done()

    assert stack.connect.changes() == []
    assert stack.connect.connectors[NAME].offsets == position(30)
    assert stack.connect.connectors[NAME].state == "RUNNING"
    assert stack.backups() == {}
    diff = json.loads(stack.kube.objects[CM]["data"][DRY_RUN_KEY])
    assert diff["operation"] == "alter" and diff["added"] == [] and diff["removed"] == []
    assert diff["changed"] == [{"partition": {"filename": FILE}, "old": {"position": 30}, "new": {"position": 6}}]
    last = stack.status()["lastOffsetsOperation"]
    assert last["dryRun"] is True and last["result"] == "Succeeded" and "backup" not in last
    assert "0 added, 1 changed, 0 removed, 0 unchanged" in last["message"]
    assert f"diff in ConfigMap {CM} key {DRY_RUN_KEY}" in last["message"]
    assert stack.kube.reasons().count("OffsetsDryRun") == 1


async def test_a_dry_run_from_its_own_configmap_leaves_the_alter_configmap_alone(stack: Stack) -> None:
    """dry-run-from (the plugin's alter --from-file --dry-run): the preview reads that ConfigMap; the
    alter ConfigMap's document stays byte for byte what the user wrote, and only dry-run.json is added
    next to it (the documented report)."""
    await stack.created("running")
    users = document(position(12)) + "\n"  # the user's hand edit, with its own formatting
    await stack.put_document(users)
    await stack.kube.create_configmap(
        NS, {"metadata": {"name": "preview"}, "data": {"offsets.json": document(position(6))}}
    )
    stack.annotate(connector_offsets="alter", dry_run="true", dry_run_from="preview")

    await stack.until_request_done()

    assert stack.connect.changes() == []
    assert stack.kube.objects[CM]["data"]["offsets.json"] == users
    assert set(stack.kube.objects[CM]["data"]) == {"offsets.json", DRY_RUN_KEY}
    diff = json.loads(stack.kube.objects[CM]["data"][DRY_RUN_KEY])
    assert diff["changed"] == [{"partition": {"filename": FILE}, "old": {"position": 30}, "new": {"position": 6}}]
    assert f"{API_GROUP}/dry-run-from" not in stack.annotations()  # removed with the request


async def test_status_names_the_cluster_for_the_cluster_column(stack: Stack) -> None:
    """status.cluster feeds the Cluster column of kubectl get (NAMESPACE/NAME for another namespace:
    test_crds.py; the real cross-namespace case: test_shared_clusters.py)."""
    await stack.created("running")
    assert stack.status()["cluster"] == "local"


async def test_a_step_that_cannot_be_done_now_ends_the_pass_as_transient(stack: Stack) -> None:
    """A BeforeOffsets hook (MirrorMaker 2's offset-syncs reset) that raises StepUnavailable: the
    pass reports a transient error and a not-Ready condition, and the change is not sent."""
    await stack.created("stopped")
    stack.annotate(connector_offsets="reset")
    body = await stack.kube.get_resource(CONNECTORS, NS, NAME)
    assert body is not None
    resource = KafkaConnectorResource.model_validate(body)
    client, info = await stack.clusters.client_for(NS, "local")

    async def kafka_down(action: Action) -> str:
        raise StepUnavailable("offset-syncs reset on cluster east: Kafka did not answer")

    result = await stack.service.runner.run(
        target_for_connector(resource), body, client, info, datetime.now(UTC), kafka_down
    )

    assert result.transient_error == "offset-syncs reset on cluster east: Kafka did not answer"
    ready = next(c for c in result.conditions if c.type == "Ready")
    assert (ready.status, ready.reason) == ("False", "ConnectError")
    assert f"DELETE {OFFSETS_PATH}" not in stack.connect.changes()
    assert stack.connect.connectors[NAME].offsets == position(30)


async def test_a_request_withdrawn_while_the_cache_lags_changes_nothing(stack: Stack) -> None:
    """The pass plans from the watch cache, which may lag one event: the user's withdrawal of an
    alter. The GET that confirms the request (sent beside the pass's first reads, issue 35) sees
    it, and nothing is backed up or changed; the next pass, on the withdrawal's event, finds
    nothing to do."""
    await stack.created("stopped")
    await stack.put_document(document(position(6)))
    stack.annotate(connector_offsets="alter")
    stack.kube.watch_paused = True  # the withdrawal's event has not arrived
    del stack.kube.resource(CONNECTORS, NS, NAME)["metadata"]["annotations"][ANNOTATION_OFFSETS]
    gets = stack.kube.resource_gets

    await stack.reconcile()

    assert stack.kube.resource_gets == gets + 1  # the confirming GET, once
    assert stack.backups() == {}
    assert stack.connect.changes() == []
    assert stack.connect.connectors[NAME].offsets == position(30)
    stack.kube.watch_paused = False
    stack.kube.annotate(CONNECTORS, NS, NAME)  # the event arrives
    await stack.reconcile()
    assert stack.connect.changes() == [] and stack.backups() == {}
    assert "lastOffsetsOperation" not in stack.status()


async def test_a_confirming_get_the_pass_did_not_use_is_not_left_behind() -> None:
    """The GET sent early for ``confirm_request`` is cancelled when the pass ends without it (a
    refused request, a plan that changes nothing): no task outlives its pass."""
    from typing import Any, cast

    from connect_offsets.reconcile.context import Pass, StatusSink

    class SlowKube:
        gets = 0

        async def fresh_resource(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
            SlowKube.gets += 1
            await asyncio.Event().wait()  # an API server that does not answer
            return None

    body = {"kind": "KafkaConnector", "metadata": {"namespace": NS, "name": NAME}}
    none = cast(Any, None)
    p = Pass(cast(Any, SlowKube()), none, none, body, none, none, datetime.now(UTC), StatusSink(None))
    p.read_resource_soon()
    p.read_resource_soon()  # one GET however often asked
    await asyncio.sleep(0)
    sent = p._early_read.future
    assert sent is not None
    p.drop_unused_reads()
    await asyncio.sleep(0)
    assert sent.cancelled() and SlowKube.gets == 1 and p._early_read.future is None


def test_a_transient_failure_keeps_a_standing_refusal() -> None:
    """An ApiServerRefused condition survives a pass that failed for a transient reason (the
    refusal still stands, and dropping it made the next pass post a second Event); nothing else
    is carried over."""
    from connect_offsets.reconcile.status import standing_refusal

    refused = {"type": "ApiServerRefused", "status": "True", "reason": "Forbidden", "message": "get ConfigMap: 403"}
    ready = {"type": "Ready", "status": "False", "reason": "ConnectError", "message": "rebalance"}
    body = {"status": {"conditions": [ready, refused]}}
    [kept] = standing_refusal(body)
    assert (kept.type, kept.status, kept.reason, kept.message) == (
        "ApiServerRefused",
        "True",
        "Forbidden",
        refused["message"],
    )
    assert standing_refusal({"status": {"conditions": [ready]}}) == []
    assert standing_refusal({}) == []


async def test_a_change_refused_because_someone_resumed_the_connector_is_planned_again(stack: Stack) -> None:
    """Status said STOPPED, but someone had just resumed the connector (the status follows the target
    state a moment later): Connect answers the PATCH 400 "must be in the STOPPED state". Nothing was
    changed, so it is not a failure for the user to fix: the pass ends in a transient error and the
    next one, from fresh reads, sends it again; applied once (clean-clone CI run 10)."""
    await stack.created("stopped")
    await stack.put_document(document(position(6)))
    stack.connect.fail(
        "PATCH", OFFSETS_PATH, 400, "Connectors must be in the STOPPED state before their offsets can be modified."
    )
    stack.annotate(connector_offsets="alter")

    outcomes = await stack.until_request_done()

    assert outcomes[0].transient_error is not None and "STOPPED state" in outcomes[0].transient_error
    assert [c for c in stack.connect.changes() if c.startswith("PATCH")] == [f"PATCH {OFFSETS_PATH}"] * 2
    assert stack.connect.connectors[NAME].offsets == position(6)  # the refused one changed nothing
    last = stack.status()["lastOffsetsOperation"]
    assert last["result"] == "Succeeded", last
    assert len(stack.backups()) == 1  # the retry reused the backup of the first try
