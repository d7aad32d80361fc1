"""The work queue's fairness and priorities (issue 45): a share of the workers per namespace, a
cluster in doubt held to one pass, user requests ahead of checks without starving them.

The promise, proven by enumeration over worker counts, hostile namespaces and their dead
clusters: a namespace with nothing running gets a worker at its first look whenever one is free
for it - however many keys other namespaces have ready, and whatever their passes wait for. A
namespace past its share never takes the last free worker, and ended passes go to namespaces
under their share first.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import pytest

from connect_offsets.clients.kubernetes import KubernetesApi
from connect_offsets.clients.resource_cache import ResourceCache
from connect_offsets.controller import LAG, Controller
from connect_offsets.controller.queue import BACKGROUND_EVERY, RESERVE_FROM, WorkQueue
from connect_offsets.vocabulary import ANNOTATION_OFFSETS, CLUSTER_LABEL, CONNECTORS, MIRRORS

pytestmark = pytest.mark.unit

Key = tuple[str, str, str]


def key(namespace: str, name: str) -> Key:
    return (CONNECTORS, namespace, name)


def take_now(queue: WorkQueue) -> Key | None:
    """What one worker looking now would take (the queue's decision, without waiting)."""
    queue._promote_due()
    taken = queue._take()
    return None if taken is None else taken[0]


def take_all(queue: WorkQueue, workers: int) -> list[Key]:
    """Keys the free workers take, one look each, until none is takeable or no worker is free."""
    taken: list[Key] = []
    while queue.processing() < workers:
        found = take_now(queue)
        if found is None:
            break
        taken.append(found)
    return taken


def test_a_namespace_alone_keeps_one_worker_free_and_a_newcomer_takes_it() -> None:
    queue = WorkQueue(workers=8)
    for i in range(100):
        queue.add(key("a", f"x{i}"))
    assert [k[1] for k in take_all(queue, 8)] == ["a"] * 7  # the eighth stays free
    queue.add(key("b", "list"))
    assert take_now(queue) == key("b", "list")  # at once, though a has 93 ready
    assert queue.stats.past_share == 0  # a alone was within its share, (8 - 1) // 1 = 7


def test_ended_passes_go_to_namespaces_under_their_share_first() -> None:
    queue = WorkQueue(workers=8)
    for i in range(100):
        queue.add(key("a", f"x{i}"))
    a_running = take_all(queue, 8)
    for i in range(10):
        queue.add(key("b", f"y{i}"))
    assert take_now(queue) == key("b", "y0")
    # Share with two namespaces: (8 - 1) // 2 = 3. a has 7 running, b 1: each pass a ends goes to b.
    for i, ended in enumerate(a_running[:2]):
        queue.done(ended)
        assert take_now(queue) == key("b", f"y{i + 1}")
    # b is at its share (3) now, a (5) past it: nobody within a share can take the worker a frees
    # next, and past the shares one worker must stay free.
    queue.done(a_running[2])
    assert queue.processing() == 7
    assert take_now(queue) is None  # the last free worker stays for a namespace with nothing running
    queue.add(key("c", "z"))
    assert take_now(queue) == key("c", "z")


def test_a_worker_count_below_the_reserve_threshold_gives_a_namespace_alone_every_worker() -> None:
    queue = WorkQueue(workers=RESERVE_FROM - 1)
    for i in range(10):
        queue.add(key("a", f"x{i}"))
    assert len(take_all(queue, RESERVE_FROM - 1)) == RESERVE_FROM - 1


def test_a_cluster_in_doubt_holds_one_worker() -> None:
    """A dead endpoint (its breaker open or probing) holds one worker with its probe; the cluster's
    other keys wait, and another cluster of the same namespace runs."""
    doubtful = {"dead"}
    clusters = {key("a", f"d{i}"): "dead" for i in range(5)} | {key("a", f"h{i}"): "healthy" for i in range(5)}
    queue = WorkQueue(workers=8, cluster_cap=4, cluster_of=clusters.get, in_doubt=lambda c: c in doubtful)
    for k in clusters:
        queue.add(k)
    taken = take_all(queue, 8)
    assert sum(1 for k in taken if clusters[k] == "dead") == 1
    assert sum(1 for k in taken if clusters[k] == "healthy") == 4  # the ordinary cap
    doubtful.clear()  # it answered: its keys run side by side again
    queue.done(taken[0])
    # 4 of its 4 remaining keys would fit its cap, but the namespace alone has a share of 7 and
    # 4 healthy passes running: 3 more.
    assert [clusters[k] for k in take_all(queue, 8)] == ["dead"] * 3


def test_urgent_keys_go_first_and_an_urgent_add_moves_a_waiting_key_ahead() -> None:
    queue = WorkQueue()
    for i in range(50):
        queue.add(key("a", f"check{i}"))
    queue.add(key("a", "request"), urgent=True)
    assert take_now(queue) == key("a", "request")
    queue.add(key("a", "check30"), urgent=True)  # waiting as background: moved ahead
    assert take_now(queue) == key("a", "check30")
    assert queue.stats.taken["urgent"] == 2


def test_urgent_of_decides_for_keys_coming_due_and_retries() -> None:
    asks: set[Key] = {key("a", "pending")}
    clock = [1000.0]
    queue = WorkQueue(urgent_of=lambda k: k in asks, clock=lambda: clock[0])
    for i in range(20):
        queue.add(key("a", f"check{i}"))
    queue.add_after(key("a", "pending"), 5)  # a requeue while a connector stops
    clock[0] += 6
    assert take_now(queue) == key("a", "pending")


def test_an_urgent_add_while_processing_comes_back_urgent() -> None:
    queue = WorkQueue()
    queue.add(key("a", "x"))
    assert take_now(queue) == key("a", "x")
    for i in range(20):
        queue.add(key("a", f"check{i}"))
    queue.add(key("a", "x"), urgent=True)  # the user annotated it during the pass
    queue.done(key("a", "x"))
    assert take_now(queue) == key("a", "x")


def test_background_keys_get_one_take_in_every_background_every_while_requests_flood() -> None:
    queue = WorkQueue()
    for i in range(100):
        queue.add(key("a", f"check{i}"))
        queue.add(key("b", f"request{i}"), urgent=True)
    taken = [take_now(queue) for _ in range(10 * BACKGROUND_EVERY)]
    background = [k for k in taken if k is not None and k[2].startswith("check")]
    assert len(background) == 10  # not starved, and not more: requests stay first
    assert taken[BACKGROUND_EVERY - 1] is not None and taken[BACKGROUND_EVERY - 1][2] == "check0"


@pytest.mark.parametrize(
    ("workers", "hostile", "dead_clusters"),
    list(itertools.product(range(RESERVE_FROM, 13), range(1, 4), range(1, 4))),
)
def test_a_namespace_with_nothing_running_gets_a_worker_whatever_others_wait_for(
    workers: int, hostile: int, dead_clusters: int
) -> None:
    """Enumerated: ``hostile`` namespaces, each with ``dead_clusters`` clusters in doubt and 50 keys
    on each (plus 50 on a healthy cluster), every pass of theirs hanging for ever (never done),
    arriving one after another, each taking what it may; then the victim's key.

    Held: one probe per dead cluster; no namespace past its share at its arrival (``(workers -
    1) // k``, k the namespaces wanting workers then), and no take past a share ever (a newcomer
    never finds the reserve taken by a namespace already running). So with one hostile namespace
    the victim's key is taken at its first look, whatever the counts. What no queue can do without
    pre-empting passes: several hostile namespaces arriving in turn each take a newcomer's place,
    the last one the reserve; then the victim waits for the first of their passes to end (the
    circuit breaker ends all but one probe per dead cluster at once, ``clients/connect/breaker``)."""
    doubtful = {f"dead-{h}-{d}" for h in range(hostile) for d in range(dead_clusters)}
    clusters: dict[Key, str] = {}
    for h in range(hostile):
        for d in range(dead_clusters):
            for i in range(50):
                clusters[key(f"hostile{h}", f"d{d}-{i}")] = f"dead-{h}-{d}"
        for i in range(50):
            clusters[key(f"hostile{h}", f"ok{i}")] = f"ok-{h}"
    clusters[key("victim", "list")] = "victim"
    queue = WorkQueue(
        workers=workers, cluster_cap=workers // 2, cluster_of=clusters.get, in_doubt=lambda c: c in doubtful
    )
    for h in range(hostile):
        for k in clusters:
            if k[1] == f"hostile{h}":
                queue.add(k)
        hanging = take_all(queue, workers)  # never done: their passes hang
        assert len(hanging) <= max(1, (workers - 1) // (h + 1)), (h, hanging)
        dead_running = [clusters[k] for k in hanging if clusters[k] in doubtful]
        assert len(set(dead_running)) == len(dead_running)  # one probe per dead cluster
    assert queue.stats.past_share == 0
    queue.add(key("victim", "list"))
    if hostile == 1 or queue.processing() < workers:  # one hostile namespace always leaves the reserve
        assert take_now(queue) == key("victim", "list")


async def test_a_waiting_worker_wakes_when_a_share_frees() -> None:
    """Workers blocked by shares (not by an empty queue) wake when a pass ends."""
    queue = WorkQueue(workers=4)
    for i in range(10):
        queue.add(key("a", f"x{i}"))
    first = [(await queue.get())[0] for _ in range(3)]  # a alone: 3 of 4
    waiting = asyncio.create_task(queue.get())
    await asyncio.sleep(0.01)
    assert not waiting.done()  # the fourth stays free for a newcomer
    queue.add(key("b", "y"))
    found, _ = await asyncio.wait_for(waiting, 1.0)
    assert found == key("b", "y")
    waiting = asyncio.create_task(queue.get())
    await asyncio.sleep(0.01)
    assert not waiting.done()
    queue.done(found)  # b's pass ends: a alone again, with 3 running = its share: still one kept free
    await asyncio.sleep(0.01)
    assert not waiting.done()
    queue.done(first[0])  # one of a's ends: a takes its place
    found, _ = await asyncio.wait_for(waiting, 1.0)
    assert found[1] == "a"
    queue.shut_down()


# --- what the controller calls urgent ----------------------------------------------------------------


def resource(name: str, version: int, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "resourceVersion": str(version),
            "generation": 1,
            "annotations": annotations or {},
            "labels": {CLUSTER_LABEL: "local"},
        },
        "status": {"observedGeneration": 1},
    }


@dataclass
class Kube:
    cache: ResourceCache = field(default_factory=ResourceCache)


async def test_a_users_change_goes_ahead_of_first_checks_and_a_first_sight_with_a_request_too() -> None:
    """100 resources seen for the first time (a start) are background; one of them changed by a
    user afterwards, a ConfigMap another reads, and a first sight that carries a request are urgent."""
    made = Controller(cast(KubernetesApi, Kube()), {}, drift_interval=3600.0, workers=8)
    for i in range(100):
        made.observe(CONNECTORS, "team-a", f"c{i}", resource(f"c{i}", 1))
    made.observe(CONNECTORS, "team-a", "asked", resource("asked", 1, {ANNOTATION_OFFSETS: "list"}))
    made.observe(CONNECTORS, "team-a", "c50", resource("c50", 2, {ANNOTATION_OFFSETS: "reset"}))
    made._references.record((CONNECTORS, "team-a", "c70"), {"offsets"}, set())
    made.configmap_changed("team-a", "offsets")
    changed_spec = resource("c80", 2)
    changed_spec["metadata"]["generation"] = 2  # a spec change the operator has not acted on yet
    made.observe(CONNECTORS, "team-a", "c80", changed_spec)
    first = [take_now(made.queue) for _ in range(4)]
    assert {k[2] for k in first if k is not None} == {"asked", "c50", "c70", "c80"}
    assert made.queue.stats.taken == {"urgent": 4}
    for taken in first:
        assert taken is not None
        made.queue.done(taken)  # (the cluster's cap is 4 of the 8 workers)
    assert take_now(made.queue) == (CONNECTORS, "team-a", "c0")  # then the checks, in their order


async def test_a_connect_cluster_answering_again_wakes_its_resources_at_once() -> None:
    """Its resources failed at once while its breaker was open and wait in back-off; the first
    answer wakes them (``ClusterRegistry(on_recovered=...)`` -> ``cluster_recovered``), not others."""
    made = Controller(cast(KubernetesApi, Kube()), {}, drift_interval=3600.0, workers=8)
    for i in range(3):
        made.observe(CONNECTORS, "team-a", f"c{i}", resource(f"c{i}", 1))
    other = resource("elsewhere", 1)
    other["metadata"]["labels"] = {CLUSTER_LABEL: "other"}
    made.observe(CONNECTORS, "team-a", "elsewhere", other)
    taken = [take_now(made.queue) for _ in range(4)]
    for k in taken:
        assert k is not None
        made.queue.done(k)
        made.queue.add_rate_limited(k)  # each failed: back-off
    assert take_now(made.queue) is None
    made.cluster_recovered({("team-a", "local")})
    woken = {k[2] for k in (take_now(made.queue) for _ in range(4)) if k is not None}
    assert woken == {"c0", "c1", "c2"}


async def test_a_kafka_address_answering_again_wakes_its_namespace_and_its_mirrors_lag() -> None:
    """``TenantNetwork.on_recovered`` -> ``kafka_recovered``: the namespace's resources in back-off
    (progress, seek, failover failed on its brokers) and its mirrors' lag measurements check now;
    another namespace's do not."""

    async def measure(body: Mapping[str, Any]) -> tuple[float, bool]:
        return 3600.0, False  # (never run here: the test takes keys, it runs no worker)

    made = Controller(cast(KubernetesApi, Kube()), {}, drift_interval=3600.0, workers=8, measure_lag=measure)
    made.observe(CONNECTORS, "team-a", "sink", resource("sink", 1))
    mirror = resource("mirror", 1)
    made.observe(MIRRORS, "team-a", "mirror", mirror)
    other = resource("theirs", 1)
    other["metadata"]["namespace"] = "team-b"
    made.observe(CONNECTORS, "team-b", "theirs", other)
    while (taken := take_now(made.queue)) is not None:
        made.queue.done(taken)
        made.queue.add_after(taken, 60)  # each waits for its back-off or its next measurement
    made.kafka_recovered("team-a")
    woken = set()
    while (taken := take_now(made.queue)) is not None:
        woken.add(taken)
        made.queue.done(taken)
    assert woken == {(CONNECTORS, "team-a", "sink"), (MIRRORS, "team-a", "mirror"), (LAG, "team-a", "mirror")}
