"""A request on the resource is never lost by the resource's loop (``handlers/loop.py``), whatever
happens to its watch events (issue 30, the field notes' "resource that stops answering requests").

Covers, with the real ``run_loop``, ``note_change`` and ``ResourceCache`` and a scripted reconcile:
the echo of our own annotation removal coalesced with the user's next, identical request into one
watch event (kopf batches events of one object); the next request's event arriving while a pass
runs; and, as the control, an idle resource that is not checked again before its drift interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, cast

import pytest

from connect_offsets.clients.resource_cache import ResourceCache
from connect_offsets.handlers.loop import note_change, run_loop
from connect_offsets.handlers.startup import OperatorState, Waker
from connect_offsets.reconcile.runner import accounted_view
from connect_offsets.reconcile.settings import Outcome
from connect_offsets.vocabulary import ANNOTATION_OFFSETS, CONNECTORS

pytestmark = pytest.mark.unit

NS, NAME = "team-a", "orders"
#: Far beyond the test's patience: a second check that happens came from a wake-up, not the timer.
DRIFT_INTERVAL = 3600.0


@dataclass
class _Kube:
    cache: ResourceCache = field(default_factory=ResourceCache)


@dataclass
class _State:
    """The parts of ``OperatorState`` the loop and ``note_change`` use."""

    kube: _Kube = field(default_factory=_Kube)
    drift_interval: float = DRIFT_INTERVAL
    wakers: dict[tuple[str, str, str], Waker] = field(default_factory=dict)

    def waker(self, plural: str, namespace: str, name: str) -> Waker:
        return self.wakers.setdefault((plural, namespace, name), Waker())


class _Stopped:
    def __init__(self) -> None:
        self.stop = False

    def __bool__(self) -> bool:
        return self.stop


def _body(version: int, request: str | None) -> dict[str, Any]:
    annotations = {ANNOTATION_OFFSETS: request} if request else {}
    return {"metadata": {"name": NAME, "namespace": NS, "resourceVersion": str(version), "annotations": annotations}}


async def _run(state: _State, reconcile: Callable[[], Awaitable[Outcome]], passes: int) -> int:
    """Run the loop until ``passes`` checks happened or 2 s passed; how many happened."""
    stopped = _Stopped()
    count = 0
    done = asyncio.Event()

    async def counted() -> Outcome:
        nonlocal count
        count += 1
        outcome = await reconcile()
        if count >= passes:
            stopped.stop = True
            done.set()
        return outcome

    waker = state.waker(CONNECTORS, NS, NAME)
    task = asyncio.create_task(
        run_loop(
            cast(OperatorState, state),
            waker,
            cast(Any, stopped),
            counted,
            cast(Any, None),
            "KafkaConnector",
            lambda: state.kube.cache.request_view(CONNECTORS, NS, NAME),
        )
    )
    with contextlib.suppress(TimeoutError):  # fewer passes than asked: the count says so
        await asyncio.wait_for(done.wait(), timeout=2.0)
    stopped.stop = True
    waker.event.set()
    await asyncio.wait_for(task, timeout=2.0)
    return count


def _event(state: _State, body: dict[str, Any]) -> None:
    note_change(cast(OperatorState, state), CONNECTORS, NS, NAME, copy.deepcopy(body), "MODIFIED")


async def test_a_removal_echo_coalesced_with_the_next_identical_request_still_wakes() -> None:
    """Pass 1 handles `list` (version 1) and removes the annotation (version 2); the user annotates
    `list` again (version 3); the watch delivers only version 3, whose view equals the one the
    loop last saw. The loop checks again at once."""
    state = _State()
    _event(state, _body(1, "list"))
    passes: list[str] = []

    async def reconcile() -> Outcome:
        body = state.kube.cache.get(CONNECTORS, NS, NAME)
        assert body is not None
        passes.append(body["metadata"]["resourceVersion"])
        if len(passes) == 1:
            state.kube.cache.observe(CONNECTORS, NS, NAME, _body(2, None), watched=False)  # our removal's answer
            _event(state, _body(3, "list"))  # the one event kopf delivers for versions 2 and 3
            return Outcome(seen=accounted_view(body, [ANNOTATION_OFFSETS]))
        return Outcome(seen=accounted_view(body))

    assert await _run(state, reconcile, passes=2) == 2
    assert passes == ["1", "3"]


async def test_a_request_arriving_during_a_pass_that_saw_none_is_checked_at_once() -> None:
    """The pass planned from a body without a request; the request's event arrived before the
    pass ended, while the waker still held that view."""
    state = _State()
    _event(state, _body(1, None))
    passes: list[str] = []

    async def reconcile() -> Outcome:
        body = state.kube.cache.get(CONNECTORS, NS, NAME)
        assert body is not None
        passes.append(body["metadata"]["resourceVersion"])
        if len(passes) == 1:
            state.wakers[(CONNECTORS, NS, NAME)].seen = None  # as if another event had set it meanwhile
            state.kube.cache.observe(CONNECTORS, NS, NAME, _body(2, "list"))
        return Outcome(seen=accounted_view(body))

    assert await _run(state, reconcile, passes=2) == 2
    assert passes == ["1", "2"]


async def test_an_idle_resource_waits_for_its_interval() -> None:
    """The control: nothing changed after the pass, so no second check within the test."""
    state = _State()
    _event(state, _body(1, None))

    async def reconcile() -> Outcome:
        body = state.kube.cache.get(CONNECTORS, NS, NAME)
        assert body is not None
        return Outcome(seen=accounted_view(body))

    assert await _run(state, reconcile, passes=2) == 1
