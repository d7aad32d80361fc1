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
from connect_offsets.fencing import Fence
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
    checks.checked(key("ns", "a"), checks.term(key("ns", "a")))
    checks.discard(key("ns", "b"))  # deleted before its check: waits for nothing
    checks.checked(key("ns", "zz"), checks.term(key("ns", "zz")))  # never waited: no count
    assert done == []
    checks.checked(key("ns", "c"), checks.term(key("ns", "c")))
    assert done == [(2, 4.5)]  # two checked; from the first queued to the last checked
    assert len(checks) == 0 and metrics.UNCHECKED_RESOURCES._value.get() == 0
    checks.checked(key("ns", "c"), checks.term(key("ns", "c")))  # its next pass: nothing more
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
        "apiVersion": "connect-offsets.io/v1beta1",
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


async def test_checks_waiting_for_their_clusters_first_listing_give_their_worker_back() -> None:
    """bench_cold_start: after a start, each namespace's worker share was held by checks waiting
    for their cluster's first listing (7.7 s for 5,000 connectors), and a `list` asked meanwhile
    waited behind them. With one worker: the checks do not run while the listing is under way (the
    controller asks before the pass, or the pass finds it and says ``Outcome.after``), a request of
    the same namespace is answered at once, and each check runs once when its listing lands; the
    start's wave of first checks ends only then."""
    loop = asyncio.get_running_loop()
    listing: asyncio.Future[Any] = loop.create_future()
    found_in_pass: asyncio.Future[Any] = loop.create_future()  # c2's cluster was not resolved yet
    passes: list[str] = []

    async def reconcile(namespace: str, name: str) -> Outcome:
        passes.append(name)
        if name == "c2" and not found_in_pass.done():
            return Outcome(after=found_in_pass)
        return Outcome()

    made = Controller(cast(KubernetesApi, Kube()), {CONNECTORS: reconcile}, drift_interval=3600.0, workers=1)
    made.first_listing = lambda namespace, name: None if listing.done() or name == "c2" else listing
    done: list[int] = []
    made.first_checks.on_all_checked = lambda count, seconds: done.append(count)
    for name in ("c0", "c1", "c2"):
        made.observe(CONNECTORS, "team-a", name, resource(name))
    made.start()
    try:
        await until(lambda: passes == ["c2"])
        asking = resource("c3")
        asking["metadata"]["annotations"] = {"connect-offsets.io/connector-offsets": "list"}
        made.observe(CONNECTORS, "team-a", "c3", asking)
        await until(lambda: "c3" in passes)
        assert passes == ["c2", "c3"] and done == []  # c0 and c1 wait for the listing, not on the worker
        assert {k[2] for k in made.first_checks._waiting} >= {"c0", "c1", "c2"}
        found_in_pass.set_result(None)
        await until(lambda: passes.count("c2") == 2)
        listing.set_result(None)
        await until(lambda: bool(done))
        await asyncio.sleep(0.05)
        assert sorted(passes) == ["c0", "c1", "c2", "c2", "c3"]  # once each after the listings
        assert done[0] >= 3 and len(made.first_checks) == 0
    finally:
        await made.stop()


# --- the attacker's findings (helper-19): each fails without its fix ------------------------------

HELD = ("team-a", "local")


class OneLease:
    """This replica holds team-a/local only; another replica holds every other cluster."""

    timings = None

    def holds(self, cluster: tuple[str, str]) -> bool:
        return cluster == HELD

    def held(self) -> set[tuple[str, str]]:
        return {HELD}

    def fence(self, cluster: tuple[str, str]) -> Fence | None:
        if cluster != HELD:
            return None

        async def confirm(fresh: bool = False) -> bool:
            return True

        return Fence(holder="r0/1", valid=lambda: True, confirm=confirm, cluster=HELD)

    async def run(self) -> None:
        await asyncio.Event().wait()


def labelled(name: str, cluster: str, namespace: str = "team-a") -> dict[str, Any]:
    body = resource(name)
    body["metadata"]["namespace"] = namespace
    body["metadata"]["labels"] = {CLUSTER_LABEL: cluster}
    return body


async def test_a_waiting_key_relabelled_to_another_replicas_cluster_leaves_the_wave() -> None:
    """Relabelled while queued to a cluster whose Lease another replica holds: the worker drops it
    (its holder checks it), and the wave ends without it instead of waiting for ever."""
    gate = asyncio.Event()
    passes: list[str] = []

    async def reconcile(namespace: str, name: str) -> Outcome:
        passes.append(name)
        await gate.wait()
        return Outcome()

    made = Controller(cast(KubernetesApi, Kube()), {CONNECTORS: reconcile}, drift_interval=3600.0, workers=1)
    made.leases = cast(Any, OneLease())
    done: list[int] = []
    made.first_checks.on_all_checked = lambda count, seconds: done.append(count)
    for name in ("c0", "c1"):
        made.observe(CONNECTORS, "team-a", name, labelled(name, "local"))
    made.start()
    try:
        await until(lambda: bool(passes))
        made.observe(CONNECTORS, "team-a", "c1", labelled("c1", "other"))
        gate.set()
        await until(lambda: bool(done))
        assert passes == ["c0"] and done == [1] and len(made.first_checks) == 0
    finally:
        await made.stop()


async def test_a_resource_deleted_while_its_pass_runs_is_not_recorded_again() -> None:
    """Without Leases passes run inline: one deleted mid-pass must not be indexed again (a tenant
    creating and deleting resources on a slow endpoint would grow the indexes for ever)."""
    gate = asyncio.Event()
    started: list[str] = []

    async def reconcile(namespace: str, name: str) -> Outcome:
        started.append(name)
        await gate.wait()
        return Outcome(referenced_configmaps={f"{name}-cm"}, connectors={name}, seen=("x",))

    made = Controller(cast(KubernetesApi, Kube()), {CONNECTORS: reconcile}, drift_interval=3600.0, workers=8)
    for i in range(20):
        made.observe(CONNECTORS, "team-a", f"r{i}", resource(f"r{i}"))
    made.start()
    try:
        await until(lambda: len(started) >= 4)
        for i in range(20):
            made.observe(CONNECTORS, "team-a", f"r{i}", None)
        gate.set()
        await asyncio.sleep(0.1)
        assert made._references._of == {} and made._seen == {} and made._by_cluster == {}
        assert not any(made.queue.has(key("team-a", f"r{i}")) for i in range(20))
    finally:
        await made.stop()


async def test_a_snapshot_wakes_only_the_resources_of_the_clusters_naming_its_endpoint() -> None:
    """Tenant A's own Connect reports its connector ``orders`` changed: tenant B's KafkaConnector
    declaring ``orders`` on B's own cluster is not woken; A's is."""
    passes: list[str] = []

    async def reconcile(namespace: str, name: str) -> Outcome:
        passes.append(namespace)
        return Outcome(connectors={"orders"})

    made = Controller(cast(KubernetesApi, Kube()), {CONNECTORS: reconcile}, drift_interval=3600.0, workers=2)
    made.observe(CONNECTORS, "team-a", "orders", labelled("orders", "a-connect", "team-a"))
    made.observe(CONNECTORS, "team-b", "orders", labelled("orders", "b-connect", "team-b"))
    made.start()
    try:
        await until(lambda: len(passes) == 2)
        passes.clear()
        made.connectors_changed({("team-a", "a-connect")}, {"orders"})
        await until(lambda: bool(passes))
        await asyncio.sleep(0.05)
        assert passes == ["team-a"]
    finally:
        await made.stop()


def test_a_pass_of_an_earlier_wait_does_not_end_the_next_one() -> None:
    """A Lease lost, then taken back while the old pass was still ending: that pass's end does not
    count as the new wait's first check."""
    done: list[int] = []
    checks = FirstChecks(lambda count, seconds: done.append(count))
    checks.waiting(key("ns", "a"))
    old = checks.term(key("ns", "a"))
    checks.discard(key("ns", "a"))  # the Lease is lost
    checks.waiting(key("ns", "a"))  # and taken back: a new wait
    checks.checked(key("ns", "a"), old)  # the old pass ends
    assert len(checks) == 1 and done == []
    checks.checked(key("ns", "a"), checks.term(key("ns", "a")))
    assert len(checks) == 0 and done == [1]


def cluster_body(name: str, namespace: str, generation: int, **annotations: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "resourceVersion": str(generation * 10 + len(annotations)),
            "generation": generation,
            "annotations": annotations,
        },
        "spec": {"url": "http://connect:8083"},
    }


async def test_a_connectcluster_wakes_only_its_own_resources_and_only_for_a_spec_change() -> None:
    """A ConnectCluster's first sight, spec change and deletion wake the resources bound to it
    (another cluster's in the same namespace stay asleep); an annotation of it wakes nobody, so a
    tenant annotating its cluster in a loop costs one small event each (attacker review F2)."""
    from connect_offsets.vocabulary import CLUSTERS

    passes: list[str] = []

    async def reconcile(namespace: str, name: str) -> Outcome:
        passes.append(name)
        return Outcome()

    async def cluster_pass(namespace: str, name: str) -> Outcome:
        return Outcome()

    made = Controller(
        cast(KubernetesApi, Kube()), {CONNECTORS: reconcile, CLUSTERS: cluster_pass}, drift_interval=3600.0, workers=2
    )
    made.observe(CONNECTORS, "team-a", "on-east", labelled("on-east", "east"))
    made.observe(CONNECTORS, "team-a", "on-west", labelled("on-west", "west"))
    made.start()
    try:
        await until(lambda: sorted(passes) == ["on-east", "on-west"])
        for event, expected in (
            (cluster_body("east", "team-a", 1), ["on-east"]),  # first sight
            (cluster_body("east", "team-a", 1, note="x"), []),  # an annotation only
            (cluster_body("east", "team-a", 1, note="y"), []),
            (cluster_body("east", "team-a", 2, note="y"), ["on-east"]),  # spec changed
            (None, ["on-east"]),  # deleted
        ):
            passes.clear()
            made.observe_cluster("team-a", "east", event)
            await asyncio.sleep(0.05)
            assert passes == expected, (event, passes)
    finally:
        await made.stop()
