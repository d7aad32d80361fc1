"""A ConfigMap edited in the middle of an alter (issue 44, item 4), through the reconcile layer
against the fake worker (tests/reconcile_pass.py), pass by pass.

The content an alter applies is the content of its ConfigMap when the request was claimed: a
staged change (stop -> change -> resume) pins it in a ConfigMap of its own with the intent
(``pendingOffsetsOperation.pinned``), and every step and retry applies those bytes. An edit made
while the connector stops is a new request: applyOnChange applies it once afterwards (the applied
content hash recorded is the pinned content's); without applyOnChange nothing applies it until
the user asks again. Before, the change step read the ConfigMap again: the edit was applied by the
running request, then once more by applyOnChange, and the records committed in between were
delivered again.

Covers: an annotated staged alter applies the claimed content, not the edit; applyOnChange
applies the claimed content then the edit, one PATCH each, in order, for a plain, a gzip and a
sharded document; a pin the API server refuses fails the request before the connector is stopped
(applyOnChange records the content as failed, not retried each pass); a pin deleted while the
connector stops fails the change and resumes the connector, never reading the edited ConfigMap.
The exhaustive version (the edit at every write boundary, a fault at every write) is
``test_an_edit_while_the_connector_stops_is_applied_after_the_claimed_content`` in
tests/unit/test_simulation.py.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from connect_offsets.clients.kubernetes import KubernetesRejected
from connect_offsets.clients.offsets_configmaps import OffsetsConfigMapStore
from connect_offsets.planning import content_hash
from connect_offsets.vocabulary import API_GROUP, CONNECTORS
from tests.reconcile_pass import ANY_SOURCE, CM, NAME, NS, OFFSETS_PATH, Stack, document, position

pytestmark = pytest.mark.unit

PINS = f"{API_GROUP}/pin-kind=alter"


async def edit(stack: Stack, text: str) -> None:
    """The user edits the ConfigMap (kubectl apply)."""
    await stack.kube.patch_configmap(NS, CM, {"data": {"offsets.json": text}})


def patches(stack: Stack) -> list[list[dict[str, Any]]]:
    """The offsets of every PATCH Connect received, in order."""
    return [r.body["offsets"] for r in stack.connect.sent("PATCH", "/offsets")]


def pending(stack: Stack) -> dict[str, Any]:
    return dict(stack.status().get("pendingOffsetsOperation") or {})


async def settle(stack: Stack, passes: int = 12) -> None:
    for _ in range(passes):
        await stack.reconcile()


async def test_an_annotated_staged_alter_applies_what_it_claimed_not_the_edit(stack: Stack) -> None:
    """alter + stop-connector on a RUNNING connector; the ConfigMap is edited while it stops: the
    alter applies the document as it was when the request began, once, and the edit is not applied
    (no applyOnChange: the user asks again)."""
    await stack.created("running")
    await stack.put_document(document(position(6)))
    stack.annotate(connector_offsets="alter", stop_connector="true")

    await stack.reconcile()  # claims: the document pinned, the intent recorded, the stop sent
    record = pending(stack)
    assert record["step"] == "Stopping" and record["pinned"], record
    (pin,) = stack.kube.configmaps_labelled(PINS).values()
    assert pin["metadata"]["name"] == record["pinned"]
    assert json.loads(pin["data"]["offsets.json"])["offsets"] == position(6)
    assert pin["metadata"]["annotations"][f"{API_GROUP}/pinned-from"] == f"ConfigMap {CM}"
    await edit(stack, document(position(8)))

    await stack.until_request_done()
    await settle(stack, 3)

    assert patches(stack) == [position(6)]
    assert stack.connect.connectors[NAME].offsets == position(6)
    assert stack.connect.connectors[NAME].state == "RUNNING"
    last = stack.status()["lastOffsetsOperation"]
    assert (last["operation"], last["result"]) == ("alter", "Succeeded"), last
    assert "appliedOffsets" not in stack.status()


@pytest.mark.parametrize("form", ["plain", "gzip", "sharded"])
async def test_apply_on_change_applies_the_claimed_content_then_the_edit_once_each(stack: Stack, form: str) -> None:
    """applyOnChange on a RUNNING connector: content C1 is claimed and pinned; the ConfigMap is
    edited to C2 while the connector stops. Connect receives C1 once, then C2 once; the recorded
    content hash is C2's in the end (C1's after the first change), so nothing is applied a third
    time. A large document pins gzip or in shards like any offsets ConfigMap."""
    count = {"plain": 1, "gzip": 100, "sharded": 400}[form]
    if form != "plain":
        # A small store budget makes the pin's gzip and shard forms cheap to reach.
        stack.service.runner.store = OffsetsConfigMapStore(stack.kube, max_payload_bytes=4096)  # type: ignore[arg-type]

    def offsets(base: int) -> list[dict[str, Any]]:
        # Names that do not compress away: a sharded pin needs more than the budget after gzip.
        files = [hashlib.sha256(f"{i}".encode()).hexdigest() if form == "sharded" else f"f{i}" for i in range(count)]
        return [{"partition": {"file": f}, "offset": {"position": base + i}} for i, f in enumerate(files)]

    await stack.created("running", offsets(0), cls=ANY_SOURCE, config={"topic": "orders"})
    await stack.put_document(document(offsets(0)))
    body = stack.kube.resource(CONNECTORS, NS, NAME)
    body["spec"]["alterOffsets"]["applyOnChange"] = True
    stack.kube.put_resource(CONNECTORS, body)
    await settle(stack, 6)
    stack.connect.requests.clear()
    stack.kube.events.clear()
    first, edited = document(offsets(1000)), document(offsets(5000))

    await edit(stack, first)
    await stack.reconcile()  # claims C1
    record = pending(stack)
    assert (record["step"], record["contentHash"]) == ("Stopping", content_hash(first)), record
    pins = stack.kube.configmaps_labelled(PINS)
    assert record["pinned"] in pins
    stored = pins[record["pinned"]]
    stored_keys = set(stored.get("data", {})) | set(stored.get("binaryData", {}))
    assert (
        stored_keys
        == {"plain": {"offsets.json"}, "gzip": {"offsets.json.gz"}, "sharded": {"offsets.json.shards"}}[form]
    ), stored_keys
    await edit(stack, edited)
    await settle(stack)

    assert patches(stack) == [offsets(1000), offsets(5000)], "C1 once, then C2 once"
    assert stack.connect.connectors[NAME].offsets == offsets(5000)
    applied = stack.status()["appliedOffsets"]
    assert (applied["contentHash"], applied["result"]) == (content_hash(edited), "Succeeded"), applied
    assert [e.reason for e in stack.kube.events if e.reason.startswith("OffsetsOperation")] == [
        "OffsetsOperationSucceeded",
        "OffsetsOperationSucceeded",
    ]
    assert "pendingOffsetsOperation" not in stack.status()
    await settle(stack, 3)
    assert len(patches(stack)) == 2  # and nothing more


async def test_the_first_change_records_the_claimed_content_hash(stack: Stack) -> None:
    """Right after the first change, status.appliedOffsets holds C1's hash (the pinned content),
    not the hash of what the ConfigMap holds by then: that is what makes the edit a change."""
    await stack.applying_on_change()
    await edit(stack, document(position(6)))
    await stack.reconcile()
    await edit(stack, document(position(8)))
    for _ in range(12):
        await stack.reconcile()
        if "pendingOffsetsOperation" not in stack.status():
            break
    applied = stack.status()["appliedOffsets"]
    assert applied["contentHash"] == content_hash(document(position(6))), applied
    assert patches(stack) == [position(6)]


@pytest.mark.parametrize("apply_on_change", [False, True])
async def test_a_refused_pin_fails_the_request_before_the_connector_is_stopped(
    stack: Stack, apply_on_change: bool
) -> None:
    """The API server refuses the pin (a quota, a webhook): the request fails with
    ConfigMapWriteFailed and nothing else happens — no intent, no stop, no PATCH. applyOnChange
    records the content as failed: it is tried again when the content changes, not every pass."""
    if apply_on_change:
        await stack.applying_on_change()
    else:
        await stack.created("running")
        await stack.put_document(document(position(30)))
    original = stack.kube.create_configmap_uid

    async def refuse_pins(namespace: str, body: dict[str, Any]) -> str:
        if "-pinned-" in body["metadata"]["name"]:
            raise KubernetesRejected(f"create ConfigMap {namespace}/{body['metadata']['name']}: 403 quota", 403)
        return await original(namespace, body)

    stack.kube.create_configmap_uid = refuse_pins  # type: ignore[method-assign]
    await edit(stack, document(position(6)))
    if not apply_on_change:
        stack.annotate(connector_offsets="alter", stop_connector="true")

    await settle(stack, 4)

    assert stack.connect.changes() == []
    assert stack.connect.connectors[NAME].state == "RUNNING"
    assert "pendingOffsetsOperation" not in stack.status()
    last = stack.status()["lastOffsetsOperation"]
    assert (last["result"], last["reason"]) == ("Failed", "ConfigMapWriteFailed"), last
    assert "403 quota" in last["message"]
    assert (
        stack.condition("OffsetsOperationInProgress") is None
        or (stack.condition("OffsetsOperationInProgress") or {}).get("status") != "True"
    )
    assert stack.kube.reasons().count("OffsetsOperationFailed") == 1  # once, not every pass
    if apply_on_change:
        applied = stack.status()["appliedOffsets"]
        assert (applied["contentHash"], applied["result"]) == (content_hash(document(position(6))), "Failed")


async def test_a_pin_deleted_while_stopping_fails_the_change_and_resumes(stack: Stack) -> None:
    """Someone deletes the pin while the connector stops: the change is refused (PinnedCopyMissing)
    and the connector resumed; the ConfigMap, edited meanwhile, is not read in its place."""
    await stack.created("running")
    await stack.put_document(document(position(6)))
    stack.annotate(connector_offsets="alter", stop_connector="true")
    await stack.reconcile()
    await stack.kube.delete_configmap(NS, pending(stack)["pinned"])
    await edit(stack, document(position(8)))

    for _ in range(8):
        await stack.reconcile()
        if "lastOffsetsOperation" in stack.status():
            break

    assert patches(stack) == []
    assert stack.connect.changes() == [f"PUT /connectors/{NAME}/stop", f"PUT /connectors/{NAME}/resume"]
    assert stack.connect.connectors[NAME].state == "RUNNING"
    assert stack.connect.connectors[NAME].offsets == position(30)
    last = stack.status()["lastOffsetsOperation"]
    assert (last["result"], last["reason"]) == ("Failed", "PinnedCopyMissing"), last
    assert "not read again" in last["message"]
    assert f"connect: PATCH {OFFSETS_PATH}" not in stack.journal
