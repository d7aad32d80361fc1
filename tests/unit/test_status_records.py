"""One record per operation (issue 36): ``status.lastOffsetsOperation`` holds the fields of the
operation that wrote it and nothing of an earlier one.

The status writer sends a JSON merge patch, which the API server (and ``FakeKube``) merges key by
key into nested objects; a record that left out a field of the previous record (a dry run's
``dryRun``, a reset's ``backup``, the plugin's ``requestId``) used to keep it. Each step below checks
the whole record, so a stale field of any earlier step fails it.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.reconcile_pass import Stack, document, position

pytestmark = pytest.mark.unit

#: Fields every record has; the others belong to some operations only.
ALWAYS = {"operation", "result", "reason", "time", "message", "request", "requestKey", "instance"}


def record(stack: Stack) -> dict[str, Any]:
    return dict(stack.status()["lastOffsetsOperation"])


async def test_each_operation_writes_its_own_record_whole(stack: Stack) -> None:
    await stack.created("stopped")
    await stack.put_document(document(position(6)))

    stack.annotate(connector_offsets="alter", dry_run="true", request_id="plugin-1")
    await stack.until_request_done()
    dry = record(stack)
    assert set(dry) == ALWAYS | {"dryRun", "requestId"}, dry
    assert (dry["operation"], dry["dryRun"], dry["requestId"]) == ("alter", True, "plugin-1")

    stack.annotate(connector_offsets="reset")
    await stack.until_request_done()
    reset = record(stack)
    assert set(reset) == ALWAYS | {"backup"}, reset  # no dryRun, no requestId of the dry run
    assert reset["operation"] == "reset" and reset["backup"] in stack.backups()

    stack.annotate(connector_offsets="list")
    await stack.until_request_done()
    listed = record(stack)
    assert set(listed) == ALWAYS, listed  # no backup of the reset
    assert listed["operation"] == "list"

    stack.annotate(connector_offsets="restore", request_id="plugin-2")
    await stack.until_request_done()
    restored = record(stack)
    assert set(restored) == ALWAYS | {"backup", "requestId"}, restored
    assert restored["requestId"] == "plugin-2" and restored["backup"] != reset["backup"]
    assert stack.connect.connectors["orders"].offsets == position(30)  # the reset undone


async def test_a_failed_record_replaces_a_succeeded_one_whole(stack: Stack) -> None:
    """A refusal after a change: the refusal's record has no backup of the change before it."""
    await stack.created("stopped")
    await stack.put_document(document(position(6)))
    stack.annotate(connector_offsets="alter")
    await stack.until_request_done()
    assert "backup" in record(stack)

    wrong = document([{"partition": {"filename": "/elsewhere"}, "offset": {"position": 1}}])
    await stack.kube.patch_configmap("team-a", "orders-offsets", {"data": {"offsets.json": wrong}})
    stack.annotate(connector_offsets="alter")
    await stack.reconcile()
    failed = record(stack)
    assert (failed["result"], failed["reason"]) == ("Failed", "InvalidOffsets")
    assert set(failed) == ALWAYS, failed
