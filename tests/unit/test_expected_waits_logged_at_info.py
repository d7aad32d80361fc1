"""Expected waits are logged at INFO, errors only for errors (issue 49 item 5).

The operator used to log ``[ERROR] Handler 'delete_connector' failed temporarily`` while waiting
for Connect to report a connector STOPPED before ``offsetsOnDelete: reset``: a normal wait that
tripped log-based alerting. Deletion now runs in the controller (``controller/core.py``
``_finish_deletion``); its wait (``DeletionPending``) is one INFO line, a real failure (Connect
unreachable) stays a WARNING. The waits of stop -> change -> resume (Connect's status follows a
``PUT /stop`` a moment later) log nothing above INFO.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass, field
from typing import Any, cast

import pytest

from connect_offsets.clients.connect import ConnectUnavailable
from connect_offsets.clients.kubernetes import KubernetesApi
from connect_offsets.clients.resource_cache import ResourceCache
from connect_offsets.controller import FINALIZER, Controller, Deletions
from connect_offsets.reconcile.deletion import DeletionPending
from connect_offsets.reconcile.settings import Outcome
from connect_offsets.vocabulary import CLUSTER_LABEL, CONNECTORS
from tests.polling import until
from tests.reconcile_pass import NAME, Stack, document, position

pytestmark = pytest.mark.unit

NS = "team-a"
STOPPING = f"{NAME}: waiting for Connect to report it STOPPED before the reset"


@dataclass
class Kube:
    """What the controller reads of ``KubernetesApi``: the watch cache."""

    cache: ResourceCache = field(default_factory=ResourceCache)


def deleting() -> dict[str, Any]:
    return {
        "metadata": {
            "name": NAME,
            "namespace": NS,
            "resourceVersion": "2",
            "labels": {CLUSTER_LABEL: "local"},
            "deletionTimestamp": "2026-11-29T00:00:00Z",
            "finalizers": [FINALIZER],
        }
    }


def above_info(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [f"{r.levelname} {r.name}: {r.getMessage()}" for r in caplog.records if r.levelno > logging.INFO]


async def run_deletion(caplog: pytest.LogCaptureFixture, answers: list[BaseException | str]) -> list[str]:
    """The controller deleting one resource whose delete logic answers ``answers`` in turn;
    returns the finalizer releases' resources once it is done."""
    released: list[str] = []

    async def run(plural: str, namespace: str, name: str, body: dict[str, Any], give_up: bool) -> str:
        answer = answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    async def release(plural: str, namespace: str, name: str, finalizers: set[str]) -> None:
        released.append(name)

    async def reconcile(namespace: str, name: str) -> Outcome:
        return Outcome()

    made = Controller(
        cast(KubernetesApi, Kube()),
        {CONNECTORS: reconcile},
        drift_interval=3600.0,
        workers=1,
        deletions=Deletions(run=run, release=release),
    )
    made.start()
    try:
        with caplog.at_level(logging.DEBUG, logger="connect_offsets"):
            made.observe(CONNECTORS, NS, NAME, deleting())
            assert await until(lambda: released == [NAME], timeout=5.0)
    finally:
        await made.stop()
    return released


async def test_waiting_for_connect_to_stop_before_a_reset_on_delete_is_info(caplog: pytest.LogCaptureFixture) -> None:
    await run_deletion(caplog, [DeletionPending(STOPPING, delay=0.01), DeletionPending(STOPPING, delay=0.01), "done"])
    waits = [r for r in caplog.records if STOPPING in r.getMessage()]
    assert len(waits) == 2 and {r.levelno for r in waits} == {logging.INFO}
    assert waits[0].getMessage() == f"deletion waits 0s: {STOPPING} [KafkaConnector {NS}/{NAME}]"
    assert above_info(caplog) == []


async def test_a_deletion_that_fails_is_still_a_warning(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("connect_offsets.controller.queue.BASE_DELAY_S", 0.01)
    await run_deletion(caplog, [ConnectUnavailable("connection refused", method="GET", path="/"), "done"])
    assert [r.levelname for r in caplog.records if "connection refused" in r.getMessage()] == ["WARNING"]


async def test_the_waits_of_stop_change_resume_log_nothing_above_info(
    stack: Stack, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Connect reports STOPPED a moment after ``PUT /stop``: the passes that wait for it are
    normal, and so are the ones that change and resume."""
    await stack.created(offsets=position(30))
    body = stack.kube.resource(CONNECTORS, NS, NAME)
    body["spec"]["offsetsPolicy"] = {"stopConnector": True}
    stack.kube.put_resource(CONNECTORS, body)
    await stack.put_document(document(position(7)))
    stack.connect.status_lag = 2  # status reads that still show the state before a stop or resume
    with caplog.at_level(logging.DEBUG, logger="connect_offsets"):
        stack.annotate(connector_offsets="alter")
        outcomes = await stack.until_request_done(passes=10)
        await asyncio.sleep(0)
    assert stack.connect.connectors[NAME].lagging_reads == 0, "the status never caught up"
    waits = [c for c in stack.kube.status_patches if "waiting for Connect to report STOPPED" in json.dumps(c)]
    assert waits, "the status never lagged: no wait was exercised"
    assert stack.connect.connectors[NAME].offsets == position(7)
    assert stack.status()["lastOffsetsOperation"]["result"] == "Succeeded"
    assert len(outcomes) >= 3 and all(o.transient_error is None for o in outcomes)  # stop, wait(s), change
    assert above_info(caplog) == []
