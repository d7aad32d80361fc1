"""Exactly once, from the source the user chose, on a connector the resource owns (issue 30): the
scenarios measured on the real stack, reproduced pass by pass against the fakes (tests/fakes.py).

Each test was written first and failed on the code before the fix:

* a request whose status was written but whose annotation removal failed (conflicts, a crash) is
  not carried out again — the next pass only removes its annotations;
* a restore retried after a retryable failure restores the backup the user chose, not the backup
  the same request wrote before its first try;
* a connector re-created by someone else after the cluster's snapshot was taken is never
  overwritten: every write to Connect planned from the snapshot is planned again from a fresh read;
* a request that arrives while a pass that found nothing to do is running is handled by the next
  check (the idle-pass skip used to remember the newer resourceVersion and skip it forever);
* an identical request made after the previous one finished runs again (the 1,000-lists case).

The exhaustive version — a crash or a fault after every write of every flow — is
tests/unit/test_simulation.py.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from connect_offsets.clients.connect.state_changes import StateChanges
from connect_offsets.clients.kubernetes import KubernetesUnavailable
from connect_offsets.planning.plan import STATE_CHANGE_SETTLE_S
from connect_offsets.reconcile.deletion import DeletionPending
from connect_offsets.vocabulary import ANNOTATION_OFFSETS, API_GROUP, CONNECTORS, OWNER_CONFIG_KEY
from tests.fakes import FakeClock, FakeConnect, FakeConnector
from tests.reconcile_pass import CM, NAME, NS, OFFSETS_PATH, Stack, document, position

pytestmark = pytest.mark.unit


def _fail_removal_once(stack: Stack) -> list[str]:
    """The next annotation removal gives up (as it did after five conflicts with a label patcher)."""
    calls: list[str] = []
    original = stack.kube.remove_annotations

    async def flaky(*args: Any, **kwargs: Any) -> list[str]:
        calls.append("remove")
        if len(calls) == 1:
            raise KubernetesUnavailable(f"remove annotations from {CONNECTORS} {NS}/{NAME}: kept conflicting", 409)
        return await original(*args, **kwargs)

    stack.kube.remove_annotations = flaky  # type: ignore[method-assign]
    return calls


async def test_a_staged_reset_whose_annotation_removal_failed_is_not_run_again(stack: Stack) -> None:
    """reset + stop-connector on a RUNNING connector; the removal after the status write fails:
    stop -> DELETE -> resume happens once, and the next pass only removes the annotations."""
    await stack.created("running")
    calls = _fail_removal_once(stack)
    stack.annotate(connector_offsets="reset", stop_connector="true")

    await stack.until_request_done(passes=12)

    assert len(calls) >= 2, calls
    assert stack.connect.changes() == [
        f"PUT /connectors/{NAME}/stop",
        f"DELETE {OFFSETS_PATH}",
        f"PUT /connectors/{NAME}/resume",
    ]
    assert stack.status()["lastOffsetsOperation"]["result"] == "Succeeded"
    assert stack.kube.reasons().count("OffsetsOperationSucceeded") == 1
    for _ in range(3):  # later passes: nothing more
        await stack.reconcile()
    assert len(stack.connect.changes()) == 3


@pytest.mark.parametrize("operation", ["reset", "alter", "list"])
async def test_a_direct_request_whose_annotation_removal_failed_is_not_run_again(stack: Stack, operation: str) -> None:
    """The same on a STOPPED connector (no stop around the change): one change, one backup."""
    await stack.created("stopped")
    await stack.put_document(document(position(6)))
    _fail_removal_once(stack)
    stack.annotate(connector_offsets=operation)

    await stack.until_request_done()

    changes = [c for c in stack.connect.changes() if c.endswith("/offsets")]
    assert len(changes) == (0 if operation == "list" else 1), changes
    assert len(stack.backups()) == (0 if operation == "list" else 1)
    assert stack.kube.reasons().count("OffsetsOperationSucceeded") == 1


async def test_the_same_request_made_again_after_it_finished_runs_again(stack: Stack) -> None:
    """Identical annotations, a new request: the second list (and the second reset) run."""
    await stack.created("stopped")
    for _ in range(3):
        stack.annotate(connector_offsets="list")
        await stack.until_request_done()
    assert [r.path for r in stack.connect.sent("GET", "/offsets")].count(OFFSETS_PATH) >= 3
    assert stack.kube.reasons().count("OffsetsOperationSucceeded") == 3
    for _ in range(2):
        stack.annotate(connector_offsets="reset")
        await stack.until_request_done()
    assert stack.connect.changes().count(f"DELETE {OFFSETS_PATH}") == 2


async def test_an_interrupted_removal_followed_by_a_withdrawal_does_not_swallow_the_next_request(
    stack: Stack,
) -> None:
    """The removal of request 1 failed and the user removed the annotation by hand; an identical
    request 2 made later runs (it is not mistaken for request 1's unfinished removal)."""
    await stack.created("stopped")
    _fail_removal_once(stack)
    stack.annotate(connector_offsets="reset")
    await stack.reconcile()  # reset done, removal failed
    assert stack.connect.changes() == [f"DELETE {OFFSETS_PATH}"]
    body = stack.kube.resource(CONNECTORS, NS, NAME)
    del body["metadata"]["annotations"][ANNOTATION_OFFSETS]  # the user withdraws it
    stack.kube.annotate(CONNECTORS, NS, NAME)  # (a new resourceVersion, delivered to the watch)
    await stack.reconcile()
    await stack.reconcile()

    stack.connect.connectors[NAME].offsets = position(40)
    stack.annotate(connector_offsets="reset")
    await stack.until_request_done()

    assert stack.connect.changes() == [f"DELETE {OFFSETS_PATH}", f"DELETE {OFFSETS_PATH}"]
    assert stack.connect.connectors[NAME].offsets == []


async def test_a_retried_restore_restores_the_backup_the_user_chose(stack: Stack) -> None:
    """restore on a STOPPED connector whose PATCH first meets a rebalance (409): the retry restores
    the newest backup from before the request (position 30), not the backup this request wrote
    before its first try (position 6)."""
    await stack.created("stopped")
    await stack.put_document(document(position(6)))
    stack.annotate(connector_offsets="alter")
    await stack.until_request_done()  # backup holds 30, Connect now 6
    (chosen,) = stack.backups()

    stack.connect.fail("PATCH", OFFSETS_PATH, 409, "Cannot complete request because of a conflicting operation")
    stack.annotate(connector_offsets="restore")
    first = await stack.reconcile()
    assert first.transient_error is not None
    await stack.until_request_done()

    assert stack.connect.connectors[NAME].offsets == position(30)
    last = stack.status()["lastOffsetsOperation"]
    assert (last["operation"], last["result"]) == ("restore", "Succeeded")
    assert chosen in last["message"], last
    assert chosen in stack.backups()


async def _two_alters_on_a_stopped_connector(stack: Stack) -> None:
    """Positions 6 then 7, each from its own ConfigMap (removed once applied): two backups made."""
    await stack.created("stopped")
    for at in (6, 7):
        await stack.put_document(document(position(at)))
        stack.annotate(connector_offsets="alter")
        await stack.until_request_done()
        await stack.kube.delete_configmap(NS, CM)


async def test_retention_never_prunes_the_backup_a_restore_is_pinned_to(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Retention 2; restore-from the oldest backup, failing with 409 several times: the pinned
    backup survives every retry and is the one restored."""
    monkeypatch.setenv("CONNECT_OFFSETS_BACKUP_RETENTION", "2")
    await _two_alters_on_a_stopped_connector(stack)
    oldest = min(stack.backups(), key=lambda n: stack.backups()[n]["metadata"]["annotations"][f"{API_GROUP}/time"])
    assert json.loads(stack.backups()[oldest]["data"]["offsets.json"])["offsets"] == position(30)

    for _ in range(4):
        stack.connect.fail("PATCH", OFFSETS_PATH, 409, "Cannot complete request because of a conflicting operation")
    stack.annotate(connector_offsets="restore", restore_from=oldest)
    for _ in range(4):
        outcome = await stack.reconcile()
        assert outcome.transient_error is not None, stack.status()
        assert oldest in stack.backups()
    await stack.until_request_done()

    assert stack.connect.connectors[NAME].offsets == position(30)
    assert oldest in stack.backups()


async def test_old_backups_are_pruned_once_the_request_is_answered(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pruning is not part of the answer (issue 35: it was an API call on the alter's path): the
    backup the retention drops goes in the same pass, after the request's annotation is removed."""
    monkeypatch.setenv("CONNECT_OFFSETS_BACKUP_RETENTION", "1")
    await _two_alters_on_a_stopped_connector(stack)
    (kept,) = stack.backups()

    journal = stack.kube.journal
    created = journal.index(f"kube: create ConfigMap {kept}")
    pruned = next(
        i for i, line in enumerate(journal) if line.startswith("kube: delete ConfigMap") and "-backup-" in line
    )
    answered = [i for i, line in enumerate(journal) if line.startswith(f"kube: annotate {NAME}")]
    assert any(created < i < pruned for i in answered), journal[created : pruned + 1]


async def test_a_connector_recreated_by_someone_else_is_not_overwritten(stack: Stack) -> None:
    """The snapshot still shows our connector; meanwhile another team deleted it and created one
    of the same name. A spec edit must not PUT our config over theirs: it ends in
    ConnectorOwnedElsewhere."""
    await stack.created("running")
    await stack.refresh_snapshot()  # the snapshot now holds our connector
    await stack.reconcile()
    assert stack.connect.sent("GET", "/config") == []  # planned from the snapshot
    theirs = {"connector.class": "x.Theirs", "file": "/data/theirs.txt", OWNER_CONFIG_KEY: "team-b/theirs"}
    stack.connect.connectors[NAME].config = dict(theirs)  # deleted and re-created behind our back
    body = stack.kube.resource(CONNECTORS, NS, NAME)
    body["spec"]["config"]["topic"] = "orders-v2"
    body["metadata"]["generation"] += 1
    stack.kube.annotate(CONNECTORS, NS, NAME)  # a new resourceVersion, delivered to the watch

    await stack.reconcile()
    await stack.reconcile()

    assert stack.connect.changes() == []
    assert stack.connect.connectors[NAME].config == theirs
    ready = stack.condition("Ready")
    assert ready is not None and ready["reason"] == "ConnectorOwnedElsewhere", stack.status()


async def test_a_lifecycle_write_checks_the_owner_fresh_but_idle_passes_stay_free(stack: Stack) -> None:
    """A pass with a write to Connect reads the connector fresh first; a pass with nothing to do
    reads nothing on its own (the snapshot is enough)."""
    await stack.created("running")
    await stack.refresh_snapshot()
    stack.connect.requests.clear()
    await stack.reconcile()
    await stack.reconcile()
    assert stack.connect.sent("GET", "/config") == []

    stack.connect.connectors[NAME].state = "PAUSED"  # drift: someone paused it
    await stack.refresh_snapshot()
    stack.connect.requests.clear()
    await stack.reconcile()

    assert [str(r) for r in stack.connect.sent("GET", "/config")] == [f"GET /connectors/{NAME}/config"]
    assert stack.connect.changes() == [f"PUT /connectors/{NAME}/resume"]


async def test_a_request_arriving_during_an_idle_pass_is_handled_by_the_next_check(stack: Stack) -> None:
    """The field notes' deaf resource: a pass planned from a body without a request while the
    request arrived in the watch cache; the next check must plan from the new body, not return
    the idle outcome remembered for it."""
    await stack.created("stopped")
    await stack.refresh_snapshot()
    await stack.reconcile()
    original = stack.service.runner.run

    async def run_then_annotate(*args: Any, **kwargs: Any) -> Any:
        result = await original(*args, **kwargs)
        if ANNOTATION_OFFSETS not in stack.annotations():
            stack.annotate(connector_offsets="list")  # the watch delivers it mid-pass
        return result

    stack.service.runner.run = run_then_annotate  # type: ignore[method-assign]
    stack.kube.annotate(CONNECTORS, NS, NAME)  # wake a full pass
    await stack.reconcile()
    stack.service.runner.run = original  # type: ignore[method-assign]

    await stack.reconcile()
    await stack.reconcile()

    assert ANNOTATION_OFFSETS not in stack.annotations(), stack.status()
    last = stack.status()["lastOffsetsOperation"]
    assert (last["operation"], last["result"]) == ("list", "Succeeded")
    assert json.loads(stack.kube.objects[CM]["data"]["offsets.json"])["offsets"] == position(30)


@pytest.mark.parametrize("lag", [1, 3, 6])
@pytest.mark.parametrize("operation", ["alter", "reset"])
async def test_a_stop_and_a_resume_are_sent_once_while_connects_status_lags_them(
    stack: Stack, operation: str, lag: int
) -> None:
    """Connect's status follows a stop or a resume late (20 ms to 0.9 s on the real stack); passes
    that read the old state meanwhile - woken at once by their own status writes - used to send
    the same ``PUT`` again (the resume twice 19 ms apart in the worker's request log)."""
    await stack.created()
    await stack.put_document(document(position(6)))
    stack.connect.status_lag = lag
    stack.annotate(connector_offsets=operation, stop_connector="true")
    await stack.until_request_done(passes=12 + 2 * lag)
    change = ("PATCH" if operation == "alter" else "DELETE") + f" {OFFSETS_PATH}"
    assert stack.connect.changes() == [f"PUT /connectors/{NAME}/stop", change, f"PUT /connectors/{NAME}/resume"]
    assert stack.status()["lastOffsetsOperation"]["result"] == "Succeeded"
    assert stack.connect.connectors[NAME].state == "RUNNING"


async def test_a_state_change_someone_undid_is_sent_again_once_connect_had_time_to_show_it(stack: Stack) -> None:
    """Within the settle window a stop is not sent again; past it, a connector still not STOPPED
    (someone resumed it by hand) is stopped again."""
    await stack.created()
    snapshot = stack.clusters.snapshot(NS, "local")
    assert snapshot is not None
    clock = FakeClock(100.0)
    snapshot.client.state_changes = StateChanges(clock=clock)
    body = stack.kube.resource(CONNECTORS, NS, NAME)
    body["spec"]["state"] = "stopped"
    stack.kube.put_resource(CONNECTORS, body)
    await stack.reconcile()
    assert stack.connect.changes() == [f"PUT /connectors/{NAME}/stop"]
    stack.connect.connectors[NAME].state = "RUNNING"  # PUT /resume by hand
    clock.now += STATE_CHANGE_SETTLE_S - 1
    await stack.reconcile()
    assert stack.connect.changes() == [f"PUT /connectors/{NAME}/stop"], "within the window"
    clock.now += 1
    await stack.reconcile()
    assert stack.connect.changes() == [f"PUT /connectors/{NAME}/stop"] * 2


async def test_a_stop_connect_applied_after_its_own_timeout_is_sent_once(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Connect answers 500 "Request timed out" when its herder was slow; the stop is applied
    anyway and the status lags it (found by the attacker review of 7ddf1a7)."""
    await stack.created()
    real = FakeConnect._connector
    answered: list[str] = []

    def slow_herder(
        self: FakeConnect, method: str, name: str, suffix: str, connector: FakeConnector | None, body: Any
    ) -> httpx.Response:
        answer = real(self, method, name, suffix, connector, body)
        if suffix == "stop" and not answered:
            answered.append(suffix)
            return httpx.Response(500, json={"error_code": 500, "message": "Request timed out"})
        return answer

    monkeypatch.setattr(FakeConnect, "_connector", slow_herder)
    stack.connect.status_lag = 3
    body = stack.kube.resource(CONNECTORS, NS, NAME)
    body["spec"]["state"] = "stopped"
    stack.kube.put_resource(CONNECTORS, body)
    for _ in range(3):
        await stack.reconcile()
    assert stack.connect.changes() == [f"PUT /connectors/{NAME}/stop"]


async def test_a_deletions_stop_is_sent_once_while_connects_status_lags_it(stack: Stack) -> None:
    """``offsetsOnDelete: reset`` stops the connector and polls for STOPPED; polls that read the
    lagging status within the settle window send no second stop (the attacker review's finding 4)."""
    await stack.created()
    body = stack.kube.resource(CONNECTORS, NS, NAME)
    body["spec"]["offsetsOnDelete"] = "reset"
    stack.kube.put_resource(CONNECTORS, body)
    stack.connect.status_lag = 3
    outcomes = []
    for _ in range(6):
        try:
            outcomes.append(
                await stack.service.delete(NS, NAME, stack.kube.resource(CONNECTORS, NS, NAME), give_up=False)
            )
            break
        except DeletionPending as waiting:
            outcomes.append(str(waiting))
    assert stack.connect.changes() == [
        f"PUT /connectors/{NAME}/stop",
        f"DELETE {OFFSETS_PATH}",
        f"DELETE /connectors/{NAME}",
    ], outcomes
