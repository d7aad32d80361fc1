"""A start's backlog of first checks (issue 45, cold start): counted until every resource had its
pass, one call when done, the collector's start-up mode ended there; and the reverse indexes that
make a ConfigMap event or a changed connector cost what they wake, not a scan of every key."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import pytest

from connect_offsets import metrics
from connect_offsets.clients.kubernetes import KubernetesApi
from connect_offsets.clients.resource_cache import ResourceCache
from connect_offsets.controller import Controller
from connect_offsets.controller import garbage_collection as collector
from connect_offsets.controller.first_checks import FirstChecks
from connect_offsets.controller.references import References
from connect_offsets.reconcile.settings import Outcome
from connect_offsets.vocabulary import CLUSTER_LABEL, CONNECTORS

pytestmark = pytest.mark.unit


def key(namespace: str, name: str) -> tuple[str, str, str]:
    return (CONNECTORS, namespace, name)


def test_a_wave_ends_with_its_last_check_and_reports_count_and_time() -> None:
    clock = iter([10.0, 14.5])
    done: list[tuple[int, float]] = []
    checks = FirstChecks(lambda count, seconds: done.append((count, seconds)), clock=lambda: next(clock))
    for name in ("a", "b", "c"):
        checks.waiting(key("ns", name))
    assert len(checks) == 3 and metrics.UNCHECKED_RESOURCES._value.get() == 3
    checks.checked(key("ns", "a"))
    checks.discard(key("ns", "b"))  # deleted before its check: waits for nothing
    checks.checked(key("ns", "zz"))  # never waited (a later pass of a known key): no count
    assert done == []
    checks.checked(key("ns", "c"))
    assert done == [(2, 4.5)]  # two checked; from the first queued to the last checked
    assert len(checks) == 0 and metrics.UNCHECKED_RESOURCES._value.get() == 0
    checks.checked(key("ns", "c"))  # its next pass: nothing more
    assert done == [(2, 4.5)]


def test_a_wave_of_discards_only_reports_nothing() -> None:
    done: list[tuple[int, float]] = []
    checks = FirstChecks(lambda count, seconds: done.append((count, seconds)))
    checks.waiting(key("ns", "a"))
    checks.discard(key("ns", "a"))
    assert done == [] and len(checks) == 0


def test_references_find_readers_and_declarers_and_forget_old_ones() -> None:
    refs = References()
    refs.record(key("a", "x"), {"offsets", "shared"}, {"conn-x"})
    refs.record(key("a", "y"), {"shared"}, {"conn-y", "conn-x"})
    refs.record(key("b", "z"), {"shared"}, {"conn-z"})
    assert sorted(refs.readers("a", "shared")) == [key("a", "x"), key("a", "y")]
    assert refs.readers("b", "offsets") == []  # a ConfigMap is its namespace's
    assert sorted(refs.declaring({"conn-x", "conn-z"})) == [key("a", "x"), key("a", "y"), key("b", "z")]
    refs.record(key("a", "x"), {"other"}, set())  # its next pass reads something else
    assert refs.readers("a", "offsets") == [] and refs.readers("a", "other") == [key("a", "x")]
    assert refs.declaring({"conn-x"}) == [key("a", "y")]
    refs.forget(key("a", "y"))
    assert refs.readers("a", "shared") == [] and refs.declaring({"conn-x", "conn-y"}) == []
    assert refs._readers == {("a", "other"): {key("a", "x")}, ("b", "shared"): {key("b", "z")}}


def test_the_start_up_mode_raises_the_thresholds_and_settling_restores_and_freezes() -> None:
    before = gc.get_threshold()
    try:
        collector.relax_for_start()
        collector.relax_for_start()  # once: the thresholds to restore are the first ones
        assert gc.get_threshold() == collector.START_THRESHOLDS
        frozen = collector.settle_after_start()
        assert frozen == gc.get_freeze_count() and frozen > 0
        assert gc.get_threshold() == before
        assert collector.settle_after_start() == 0  # not in the mode: nothing done
        assert gc.get_threshold() == before
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)


@dataclass
class Kube:
    cache: ResourceCache = field(default_factory=ResourceCache)


def resource(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "connect-offsets.io/v1alpha1",
        "kind": "KafkaConnector",
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "resourceVersion": "1",
            "generation": 1,
            "labels": {CLUSTER_LABEL: "local"},
        },
        "status": {"observedGeneration": 1},
    }


async def until(condition: Callable[[], bool]) -> None:
    for _ in range(300):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("not reached in 3 s")


async def test_the_controller_counts_first_sights_until_each_had_its_pass() -> None:
    """Three resources seen at a start, one deleted before its check: the wave ends when the other
    two had their passes, with a count of two; a later pass or a user's change starts no wave."""
    passes: list[str] = []

    async def reconcile(namespace: str, name: str) -> Outcome:
        passes.append(name)
        return Outcome(referenced_configmaps={f"{name}-offsets"})

    made = Controller(cast(KubernetesApi, Kube()), {CONNECTORS: reconcile}, drift_interval=3600.0, workers=2)
    done: list[int] = []
    made.first_checks.on_all_checked = lambda count, seconds: done.append(count)
    for name in ("c0", "c1", "c2"):
        made.observe(CONNECTORS, "team-a", name, resource(name))
    assert len(made.first_checks) == 3
    made.observe(CONNECTORS, "team-a", "c2", None)
    made.start()
    try:
        await until(lambda: bool(done))
        assert done == [2] and sorted(passes) == ["c0", "c1"]
        changed = resource("c0")
        changed["metadata"]["annotations"] = {"connect-offsets.io/connector-offsets": "list"}
        made.observe(CONNECTORS, "team-a", "c0", changed)
        assert len(made.first_checks) == 0  # a change of a seen resource is no first check
        await until(lambda: passes.count("c0") == 2)
        # The pass recorded what it read: the ConfigMap's event wakes that key alone.
        passes.clear()
        made.configmap_changed("team-a", "c1-offsets")
        await until(lambda: bool(passes))
        await asyncio.sleep(0.05)
        assert passes == ["c1"]
    finally:
        await made.stop()
