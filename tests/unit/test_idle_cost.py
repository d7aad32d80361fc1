"""The idle cost of issue 20, without the stack: a pass reads the resource from the watch cache and
the connector from its cluster's one snapshot; freshness is paid for only where it decides
something. ``ConnectorService`` and ``ConnectorsSnapshot`` run against tests/fakes.py.

The same is measured at scale on the real stack by bench/bench_steady_state.py, and drift repair
and stale-cache safety by tests/integration/test_watch_cache.py.

Covers: an idle pass makes no Kubernetes GET and no per-connector Connect call, and a check that
finds nothing changed skips planning; a connector deleted, reconfigured or stopped behind the
operator's back is reported by the next snapshot and put back; after the operator's own write the
connector is read on its own until a newer snapshot; a partial snapshot answer, a connector the
snapshot leaves out and a 409 during a rebalance; a request removed from the API server while the
watch still shows it is not acted on (no backup, no change); too-large snapshots fall back.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Any

import httpx
import pytest

from connect_offsets import metrics
from connect_offsets.clients.connect import ConnectClient, ConnectConflict, ConnectEndpoint, ConnectError
from connect_offsets.reconcile import snapshots
from connect_offsets.reconcile.snapshots import ConnectorsSnapshot
from connect_offsets.vocabulary import ANNOTATION_OFFSETS, CLUSTERS, CONNECTORS
from tests.fakes import FakeConnect
from tests.polling import until
from tests.reconcile_pass import NAME, NS, URL, Stack, client_for, document, held_listing, position

pytestmark = pytest.mark.unit


def per_connector_reads(connect: FakeConnect) -> list[str]:
    return [str(r) for r in connect.requests if r.method == "GET" and r.path.startswith(f"/connectors/{NAME}")]


async def refreshed(stack: Stack) -> ConnectorsSnapshot:
    """The cluster's snapshot, refreshed as the ConnectCluster's pass does once per drift interval."""
    snapshot = stack.clusters.snapshot(NS, "local")
    assert snapshot is not None
    await snapshot.refresh()
    return snapshot


def checks(kind: str = "KafkaConnector") -> tuple[float, float]:
    return (
        metrics.RESOURCE_CHECKS.labels(kind)._value.get(),
        metrics.RESOURCE_CHECKS_UNCHANGED.labels(kind)._value.get(),
    )


async def test_an_idle_pass_costs_no_kubernetes_get_and_no_per_connector_call(stack: Stack) -> None:
    """Ten passes over an unchanged, STOPPED connector: the resource comes from the watch cache,
    the connector from one snapshot; after the first quiet pass the check skips planning."""
    await stack.created("stopped")
    await refreshed(stack)  # the ConnectCluster's pass, once per drift interval
    await stack.reconcile()  # the pass that sees the state the creation left
    stack.kube.resource_gets = 0
    stack.connect.requests.clear()
    patches = len(stack.kube.status_patches)
    before = checks()

    for _ in range(10):
        outcome = await stack.reconcile()
        assert outcome.transient_error is None and outcome.connectors == {NAME}

    after = checks()
    assert stack.kube.resource_gets == 0
    assert per_connector_reads(stack.connect) == []
    assert [str(r) for r in stack.connect.requests] in ([], ["GET /connectors"])  # at most one snapshot
    assert len(stack.kube.status_patches) == patches  # nothing changed, nothing written
    assert after[0] - before[0] == 10 and after[1] - before[1] >= 9


async def test_a_connector_deleted_behind_the_back_is_reported_and_recreated(stack: Stack) -> None:
    """The cluster's refresh reports the changed connectors (this wakes their resources), and the
    woken pass puts the connector back; a reconfigured one gets its config back."""
    await stack.created("stopped")
    snapshot = await refreshed(stack)
    await stack.reconcile()
    changed: list[set[str]] = []
    snapshot.on_change = changed.append

    del stack.connect.connectors[NAME]
    await snapshot.refresh()  # what the ConnectCluster's pass does once per drift interval
    assert changed == [{NAME}]
    await stack.reconcile()
    assert NAME in stack.connect.connectors and stack.connect.connectors[NAME].state == "STOPPED"

    stack.connect.connectors[NAME].config["file"] = "/elsewhere.txt"
    await snapshot.refresh()
    assert changed[-1] == {NAME}
    await stack.reconcile()
    assert stack.connect.connectors[NAME].config["file"] == "/data/orders.txt"


async def test_after_its_own_write_the_operator_reads_the_connector_itself(stack: Stack) -> None:
    """The snapshot was taken before the operator stopped the connector: the next pass must not
    believe it (it would see RUNNING) and reads config and status on their own."""
    await stack.created("running")
    snapshot = stack.clusters.snapshot(NS, "local")
    assert snapshot is not None
    await snapshot.refresh()
    stack.kube.put_resource(
        CONNECTORS,
        {
            **stack.kube.resource(CONNECTORS, NS, NAME),
            "spec": {**stack.kube.resource(CONNECTORS, NS, NAME)["spec"], "state": "stopped"},
        },
    )
    stack.connect.requests.clear()

    await stack.reconcile()  # stops it: a write to the connector
    assert "PUT /connectors/orders/stop" in [str(r) for r in stack.connect.requests]
    stack.connect.requests.clear()
    read = await snapshot.read(NAME)
    assert read.digest is None and read.status is not None and read.status.state == "STOPPED"
    assert per_connector_reads(stack.connect) == [f"GET /connectors/{NAME}/config", f"GET /connectors/{NAME}/status"]

    await snapshot.refresh()  # a snapshot newer than the write is trusted again
    stack.connect.requests.clear()
    read = await snapshot.read(NAME)
    assert read.digest is not None and stack.connect.requests == []


async def test_a_request_removed_while_the_watch_lags_is_not_acted_on(stack: Stack) -> None:
    """The cache still shows ``alter`` but the user has removed it: the fresh read before the
    change finds that, nothing is backed up or sent, and the next pass plans from the fresh body."""
    await stack.created("stopped")
    await stack.put_document(document(position(6)))
    stack.kube.watch_paused = True
    stack.annotate(connector_offsets="alter")
    stack.kube.cache.observe(CONNECTORS, NS, NAME, stack.kube.resource(CONNECTORS, NS, NAME))  # watch saw it
    body = stack.kube.resource(CONNECTORS, NS, NAME)
    del body["metadata"]["annotations"][ANNOTATION_OFFSETS]  # removed; the watch has not told us yet
    body["metadata"]["resourceVersion"] = stack.kube._bump()

    outcome = await stack.reconcile()
    assert outcome.requeue_after == 0.0
    assert stack.connect.changes() == [] and stack.backups() == {}
    assert stack.kube.resource_gets == 1  # the one GET, right before the change

    stack.kube.watch_paused = False
    await stack.reconcile()
    assert stack.connect.changes() == [] and stack.backups() == {}
    assert stack.connect.connectors[NAME].offsets == position(30)


async def test_a_request_still_standing_is_carried_out_with_one_get(stack: Stack) -> None:
    await stack.created("stopped")
    await stack.put_document(document(position(6)))
    stack.annotate(connector_offsets="alter")
    stack.kube.resource_gets = 0
    await stack.until_request_done()
    assert stack.connect.connectors[NAME].offsets == position(6)
    assert stack.kube.resource_gets <= 2  # the fresh read before the change (+ the removal's retry at most)


async def test_a_partial_answer_or_a_left_out_connector_is_read_on_its_own() -> None:
    connect = FakeConnect(URL)
    connect.handle(httpx.Request("POST", f"{URL}/connectors", json={"name": "a", "config": {"k": "v"}}))
    connect.handle(httpx.Request("POST", f"{URL}/connectors", json={"name": "b", "config": {"k": "v"}}))
    real = connect.handle

    def partial(request: httpx.Request) -> httpx.Response:
        answer = real(request)
        if request.url.path == "/connectors" and request.url.params.get_list("expand"):
            data = answer.json()
            del data["a"]["info"]  # the worker left part of it out
            del data["b"]  # deleted while it answered
            return httpx.Response(200, json=data)
        return answer

    client = ConnectClient(ConnectEndpoint(url=URL), transport=httpx.MockTransport(partial))
    snapshot = ConnectorsSnapshot(client, max_age=60)
    connect.requests.clear()
    read_a, read_b = await snapshot.read("a"), await snapshot.read("b")
    assert read_a.config == {"k": "v"} and read_a.status is not None and read_a.digest is None
    assert read_b.config == {"k": "v"} and read_b.digest is None  # absent is confirmed, not believed
    assert [str(r) for r in connect.requests] == [
        "GET /connectors",
        "GET /connectors/a/config",
        "GET /connectors/a/status",
        "GET /connectors/b/config",
        "GET /connectors/b/status",
    ]
    await client.aclose()


async def test_a_409_during_a_rebalance_is_one_request_however_many_readers() -> None:
    connect = FakeConnect(URL)
    connect.fail("GET", "/connectors", 409, "Request cannot be completed because a rebalance is expected")
    client = client_for(connect)
    snapshot = ConnectorsSnapshot(client, max_age=60)
    for _ in range(5):
        with pytest.raises(ConnectConflict):
            await snapshot.read("a")
    assert [str(r) for r in connect.requests] == ["GET /connectors"]  # held for FAILED_REFRESH_HOLD_S
    snapshot._failed = (time.monotonic() - snapshots.FAILED_REFRESH_HOLD_S - 1, snapshot._failed[1])  # type: ignore[index]
    read = await snapshot.read("a")
    assert read.config is None and read.status is None  # the worker answers again: "a" is absent
    await client.aclose()


async def test_many_readers_of_one_refresh_share_one_request_and_one_comparison() -> None:
    """Thousands of resources wait on the same refresh: one GET, the snapshot installed and
    compared with the last one once (inside the request's task), every reader served from it."""
    connect = FakeConnect(URL)
    for name in ("a", "b"):
        connect.handle(httpx.Request("POST", f"{URL}/connectors", json={"name": name, "config": {"k": "v"}}))
    client = client_for(connect)
    told: list[set[str]] = []
    snapshot = ConnectorsSnapshot(client, max_age=60, on_change=told.append)
    await snapshot.refresh()
    connect.handle(httpx.Request("PUT", f"{URL}/connectors/a/config", json={"k": "changed"}))
    connect.requests.clear()
    compared: list[int] = []
    real_take = snapshot._take

    async def counting_take() -> snapshots._Taken:
        compared.append(1)
        return await real_take()

    snapshot._take = counting_take  # type: ignore[method-assign]
    await asyncio.gather(*(snapshot.refresh() for _ in range(200)))
    reads = await asyncio.gather(*(snapshot.read(n) for n in ("a", "b") * 100))
    assert [str(r) for r in connect.requests] == ["GET /connectors"] and compared == [1]
    assert told == [{"a"}]  # once, naming only what changed
    assert {r.config["k"] for r in reads if r.config} == {"changed", "v"} and all(r.digest for r in reads)
    await client.aclose()


async def test_a_snapshot_past_its_cap_falls_back_to_reading_one_by_one(monkeypatch: pytest.MonkeyPatch) -> None:
    connect = FakeConnect(URL)
    connect.handle(httpx.Request("POST", f"{URL}/connectors", json={"name": "a", "config": {"k": "v" * 200}}))
    monkeypatch.setattr("connect_offsets.clients.connect.client.MAX_SNAPSHOT_BYTES", 100)  # where the client reads it
    client = client_for(connect)
    snapshot = ConnectorsSnapshot(client, max_age=60)
    read = await snapshot.read("a")
    assert read.config == {"k": "v" * 200} and not snapshot.usable
    connect.requests.clear()
    await snapshot.read("a")
    assert "GET /connectors" not in [str(r) for r in connect.requests]  # never asked again
    await client.aclose()


async def test_topics_are_read_only_for_running_connectors_and_not_every_pass() -> None:
    client = client_for(FakeConnect(URL))
    snapshot = ConnectorsSnapshot(client, max_age=60)
    assert not snapshot.topics_due("a", running=False)
    assert snapshot.topics_due("a", running=True)
    assert not snapshot.topics_due("a", running=True)  # within TOPICS_REFRESH_S
    snapshot._topics_at["a"] -= snapshots.TOPICS_REFRESH_S + 1
    assert snapshot.topics_due("a", running=True)
    await client.aclose()


async def test_connect_clusters_naming_the_same_endpoint_share_one_snapshot(stack: Stack) -> None:
    """Each team's ConnectCluster naming the platform's one Connect: one client and one snapshot
    per endpoint, so the cost grows with Connect clusters, not with tenants. Other credentials are
    another endpoint, never shared."""
    for namespace in ("team-b", "team-c"):
        stack.kube.put_resource(
            CLUSTERS,
            {"kind": "ConnectCluster", "metadata": {"name": "local", "namespace": namespace}, "spec": {"url": URL}},
        )
    stack.kube.put_resource(
        CLUSTERS,
        {
            "kind": "ConnectCluster",
            "metadata": {"name": "tls", "namespace": "team-d"},
            "spec": {"url": URL, "requestTimeoutSeconds": 7},
        },
    )
    clients = [
        (await stack.clusters.client_for(ns, n))[0]
        for ns, n in [(NS, "local"), ("team-b", "local"), ("team-c", "local"), ("team-d", "tls")]
    ]
    assert clients[0] is clients[1] is clients[2] and clients[3] is not clients[0]
    shared = stack.clusters.snapshot(NS, "local")
    assert shared is stack.clusters.snapshot("team-b", "local") is stack.clusters.snapshot("team-c", "local")
    assert shared is not stack.clusters.snapshot("team-d", "tls")

    stack.connect.requests.clear()
    assert shared is not None
    for _ in range(3):  # the three ConnectClusters' passes in one interval
        await shared.refresh(older_than=10)
    assert [str(r) for r in stack.connect.requests] == ["GET /connectors"]

    await stack.clusters.forget("team-b", "local")
    await stack.clusters.forget("team-c", "local")
    assert stack.clusters.snapshot(NS, "local") is shared  # still used by the first one


@pytest.mark.parametrize(("status", "off"), [(404, True), (405, True), (400, True), (401, False), (403, False)])
async def test_an_endpoint_that_refuses_the_listing_for_good_is_read_one_by_one(status: int, off: bool) -> None:
    """A worker behind an authorizing extension or a proxy that routes only per-connector paths:
    snapshots are turned off for it instead of failing every pass; 401/403 are about credentials
    and are raised (the ConnectCluster reports them)."""
    connect = FakeConnect(URL)
    connect.handle(httpx.Request("POST", f"{URL}/connectors", json={"name": "a", "config": {"k": "v"}}))
    connect.fail("GET", "/connectors", status, "refused")
    client = client_for(connect)
    snapshot = ConnectorsSnapshot(client, max_age=60)
    if off:
        read = await snapshot.read("a")
        assert read.config == {"k": "v"} and not snapshot.usable
        connect.requests.clear()
        await snapshot.refresh()
        assert connect.requests == []  # never asked again
    else:
        with pytest.raises(ConnectError):
            await snapshot.read("a")
        assert snapshot.usable
    await client.aclose()


def status_cleared(stack: Stack) -> None:
    """Another client wiped the status: the next pass must write it again."""
    body = stack.kube.resource(CONNECTORS, NS, NAME)
    body["status"] = {}
    body["metadata"]["resourceVersion"] = stack.kube._bump()
    stack.kube._deliver(CONNECTORS, NS, NAME)


async def test_a_pass_that_only_wrote_status_leaves_the_next_check_quiet(stack: Stack) -> None:
    """The status patch's answer is the version the pass read plus its own write: the next check
    skips planning at once, instead of one more full pass per resource after every status write
    (at 5,000 resources that second pass was 5,000 full passes; bench_steady_state)."""
    await stack.created("stopped")
    await refreshed(stack)
    status_cleared(stack)
    patches = len(stack.kube.status_patches)
    before = checks()
    await stack.reconcile()  # full: writes status again
    assert len(stack.kube.status_patches) == patches + 1
    await stack.reconcile()
    after = checks()
    assert after[0] - before[0] == 2 and after[1] - before[1] == 1  # the second check was quiet
    assert len(stack.kube.status_patches) == patches + 1


async def test_a_label_changed_while_the_pass_ran_makes_the_next_check_full(stack: Stack) -> None:
    """Another client patched the resource between the pass's read and its status write (the
    interference of issue 30): the written version is not the one planned from, so the next check
    looks at the resource in full, and sees the label."""
    await stack.created("stopped")
    await refreshed(stack)
    status_cleared(stack)
    write = stack.kube.patch_status

    async def labelled_first(plural: str, namespace: str, name: str, status: dict[str, object]) -> object:
        body = stack.kube.resource(plural, namespace, name)
        body["metadata"]["labels"]["team"] = "payments"
        body["metadata"]["resourceVersion"] = stack.kube._bump()
        stack.kube._deliver(plural, namespace, name)
        stack.kube.patch_status = write  # type: ignore[method-assign]
        return await write(plural, namespace, name, status)

    stack.kube.patch_status = labelled_first  # type: ignore[assignment]
    before = checks()
    await stack.reconcile()
    await stack.reconcile()
    after = checks()
    assert after[0] - before[0] == 2 and after[1] - before[1] == 0  # both full
    await stack.reconcile()
    assert checks()[1] - after[1] == 1  # quiet again once a full pass saw the label


async def test_a_check_gives_its_worker_back_rather_than_wait_for_the_first_listing() -> None:
    """bench_cold_start: after a start, each namespace's worker share was held by checks waiting for
    their cluster's first listing (7.7 s for 5,000 connectors), and a `list` waited behind them. A
    reader that may defer (a KafkaConnector's pass) is handed the one listing under way instead;
    when it lands the reader finds the snapshot. A request still reads its connector on its own."""
    connect, client, snapshot, listing = first_listing_held()
    with pytest.raises(snapshots.ListingPending) as first:
        await asyncio.wait_for(snapshot.read("a", defer=True), timeout=1)
    with pytest.raises(snapshots.ListingPending) as second:
        await asyncio.wait_for(snapshot.read("a", defer=True), timeout=1)
    assert first.value.listing is second.value.listing and not first.value.listing.done()  # one listing
    asked = await asyncio.wait_for(snapshot.read("a", asked=True, defer=True), timeout=1)
    assert asked.config == {"k": "v"}
    listing.set()
    await asyncio.wait_for(first.value.listing, timeout=2)
    assert snapshot.first_listing() is None
    read = await snapshot.read("a", defer=True)
    assert read.config == {"k": "v"} and read.digest
    assert [str(r) for r in connect.requests] == [
        "GET /connectors/a/config",
        "GET /connectors/a/status",
        "GET /connectors",
    ]
    await client.aclose()


async def test_a_deferred_pass_writes_nothing_and_the_controller_sees_the_listing_from_the_cache(stack: Stack) -> None:
    """A KafkaConnector's first pass on a cluster resolved just now starts its first listing and
    ends there: no status, no Connect call but the cluster's own; the controller, asking before
    later passes, finds that listing from the watch cache alone, and nothing once it has landed."""
    stack.connector("stopped")
    assert stack.service.first_listing(NS, NAME) is None  # the cluster is not resolved: the pass runs
    patches = len(stack.kube.status_patches)
    outcome = await stack.service.reconcile(NS, NAME)
    assert outcome.after is not None and outcome.transient_error is None
    assert stack.service.first_listing(NS, NAME) is outcome.after
    assert len(stack.kube.status_patches) == patches and NAME not in stack.connect.connectors
    await asyncio.wait([outcome.after], timeout=2)
    assert stack.service.first_listing(NS, NAME) is None
    assert (await stack.service.reconcile(NS, NAME)).after is None
    assert NAME in stack.connect.connectors  # the pass that came back created it


async def test_after_a_failed_first_listing_checks_report_its_error_instead_of_deferring_again() -> None:
    """A deferred check comes back when the listing ends, however it ends: a failed one's error is
    held (``FAILED_REFRESH_HOLD_S``) and the checks that come back get it, so their resources say
    that Connect is unreachable rather than wait for listing after listing."""
    client = ConnectClient(ConnectEndpoint(url=URL), transport=httpx.MockTransport(lambda r: httpx.Response(200)))
    failure = ConnectError("connection refused")

    async def refused() -> Any:
        await asyncio.sleep(0.01)
        raise failure

    client.list_connectors_expanded = refused  # type: ignore[method-assign]
    snapshot = ConnectorsSnapshot(client, max_age=60)
    with pytest.raises(snapshots.ListingPending) as deferred:
        await snapshot.read("a", defer=True)
    done, _ = await asyncio.wait([deferred.value.listing], timeout=2)
    assert done
    assert snapshot.first_listing() is None
    with pytest.raises(ConnectError) as reported:
        await snapshot.read("a", defer=True)
    assert reported.value is failure
    await client.aclose()


async def test_a_listing_slower_than_the_interval_does_not_hold_every_check() -> None:
    """20,000 connectors took Connect minutes to list: a snapshot was already past its age when it
    arrived, and every check then waited for the next listing. Readers are answered from it (a
    refresh started behind them) while its age is explained by how long the listing took."""
    connect = FakeConnect(URL)
    connect.handle(httpx.Request("POST", f"{URL}/connectors", json={"name": "a", "config": {"k": "v"}}))
    client = client_for(connect)
    snapshot = ConnectorsSnapshot(client, max_age=1)
    await snapshot.refresh()
    # As if that listing had taken 30 s and finished a second ago: 31 s old, 1 s allowed.
    snapshot._took = 30.0
    snapshot._taken = snapshots._Taken(snapshot._taken.connectors, time.monotonic() - 31, 0)  # type: ignore[union-attr]
    connect.requests.clear()
    listing = held_listing(client)
    reads = await asyncio.wait_for(asyncio.gather(*(snapshot.read("a") for _ in range(50))), timeout=2)
    assert all(r.config == {"k": "v"} and r.digest for r in reads)  # answered, nobody waited
    assert snapshot._inflight is not None  # one refresh started behind them
    listing.set()
    await asyncio.wait_for(snapshot._inflight, timeout=2)
    assert [str(r) for r in connect.requests] == ["GET /connectors"]
    await client.aclose()


async def test_an_unchanged_listing_is_not_parsed_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """An idle cluster answers the snapshot listing with the same bytes each interval: the parse
    of the last answer is handed out again (parsing 5,000 connectors took 0.16 s of CPU, issue 35);
    an answer that differs in one byte is parsed anew."""
    from connect_offsets.clients.connect import responses

    parses: list[int] = []
    real = responses._expanded

    def counted(raw: bytes) -> Any:
        parses.append(len(raw))
        return real(raw)

    monkeypatch.setattr(responses, "_expanded", counted)

    def status(state: str) -> dict[str, Any]:
        return {"name": "a", "connector": {"state": state, "worker_id": "w:8083"}, "tasks": [], "type": "source"}

    entry = {"info": {"config": {"connector.class": "X"}}, "status": status("STOPPED")}
    answers = [{"a": entry}, {"a": entry}, {"a": {**entry, "status": status("PAUSED")}}]

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=answers.pop(0))

    client = ConnectClient(ConnectEndpoint(url=URL), transport=httpx.MockTransport(handler))
    first = await client.list_connectors_expanded()
    second = await client.list_connectors_expanded()
    third = await client.list_connectors_expanded()
    await client.aclose()

    assert len(parses) == 2 and second is first
    assert first["a"].status is not None and first["a"].status.connector.state == "STOPPED"
    assert third["a"].status is not None and third["a"].status.connector.state == "PAUSED"
    assert third["a"].digest != first["a"].digest


def first_listing_held() -> tuple[FakeConnect, ConnectClient, ConnectorsSnapshot, asyncio.Event]:
    """A worker with connector ``a``, and a snapshot of it whose listings wait for the event (a
    worker slow to list 5,000 connectors after a start); no request sent yet."""
    connect = FakeConnect(URL)
    connect.handle(httpx.Request("POST", f"{URL}/connectors", json={"name": "a", "config": {"k": "v"}}))
    client = client_for(connect)
    snapshot = ConnectorsSnapshot(client, max_age=60)
    connect.requests.clear()
    return connect, client, snapshot, held_listing(client)


async def test_a_request_does_not_wait_for_the_first_listing_after_a_start() -> None:
    """After a start the first listing of a cluster takes seconds; checks wait for it (one request
    for all of them), but a pass carrying a user's request reads its connector on its own."""
    connect, client, snapshot, listing = first_listing_held()
    checks = [asyncio.ensure_future(snapshot.read("a")) for _ in range(20)]
    asked = await asyncio.wait_for(snapshot.read("a", asked=True), timeout=2)
    assert asked.config == {"k": "v"} and not any(check.done() for check in checks)
    assert [str(r) for r in connect.requests] == ["GET /connectors/a/config", "GET /connectors/a/status"]
    listing.set()
    reads = await asyncio.wait_for(asyncio.gather(*checks), timeout=2)
    assert all(r.config == {"k": "v"} and r.digest for r in reads)
    assert [str(r) for r in connect.requests][2:] == ["GET /connectors"]  # one listing for the 20
    again = await snapshot.read("a", asked=True)  # a snapshot exists now: a request reads it too
    assert again.digest and len(connect.requests) == 3
    await client.aclose()


async def test_a_request_never_waits_for_the_listing_that_replaces_a_stale_snapshot() -> None:
    """bench_cold_start: a ``list`` asked the moment a first start's hold ended waited 7.5 s, for
    the listing of 5,000 connectors that replaced the start's 150 s old snapshot (too old to be
    served while refreshing). Checks still wait for it (one listing for all); a pass carrying a
    user's request reads its connector on its own, and reads the new snapshot once taken."""
    connect = FakeConnect(URL)
    connect.handle(httpx.Request("POST", f"{URL}/connectors", json={"name": "a", "config": {"k": "v"}}))
    client = client_for(connect)
    snapshot = ConnectorsSnapshot(client, max_age=45)
    await snapshot.refresh()
    taken = snapshot._taken
    assert taken is not None
    snapshot._taken = dataclasses.replace(taken, at=taken.at - 150)  # the start held it that long
    listing = held_listing(client)
    connect.requests.clear()
    checks = [asyncio.ensure_future(snapshot.read("a")) for _ in range(5)]
    asked = await asyncio.wait_for(snapshot.read("a", asked=True), timeout=2)
    assert asked.config == {"k": "v"} and not any(check.done() for check in checks)
    assert [str(r) for r in connect.requests] == ["GET /connectors/a/config", "GET /connectors/a/status"]
    listing.set()
    await asyncio.wait_for(asyncio.gather(*checks), timeout=2)
    assert [str(r) for r in connect.requests][2:] == ["GET /connectors"]  # the request started it
    assert (await snapshot.read("a", asked=True)).digest and len(connect.requests) == 3  # fresh now
    # Past max_age but within what is served while refreshing: the snapshot answers a request too
    # (helper-41: two requests per connector would be more than the one listing), and refreshes.
    snapshot._taken = dataclasses.replace(snapshot._taken, at=snapshot._taken.at - 50)
    listing = held_listing(client)
    asked = await asyncio.wait_for(snapshot.read("a", asked=True), timeout=1)
    assert asked.digest and len(connect.requests) == 3
    listing.set()
    await until(lambda: snapshot._inflight is None)
    assert [str(r) for r in connect.requests][3:] == ["GET /connectors"]
    await client.aclose()


async def taken_under_a_start() -> tuple[FakeConnect, ConnectClient, list[bool], ConnectorsSnapshot]:
    """A worker with connector ``a``, and a snapshot of it (max_age 45 s) taken while the process's
    start is under way (``starting[0]``: set it False to end the start's hold)."""
    connect = FakeConnect(URL)
    connect.handle(httpx.Request("POST", f"{URL}/connectors", json={"name": "a", "config": {"k": "v"}}))
    client = client_for(connect)
    starting = [True]
    snapshot = ConnectorsSnapshot(client, max_age=45, hold=lambda: starting[0])
    await snapshot.refresh()
    return connect, client, starting, snapshot


async def test_a_request_past_the_stale_window_never_repeats_a_failed_or_refused_listing() -> None:
    """Attack review helper-42, 3-5. A user's request that finds the snapshot too old reads its
    connector on its own and starts the refresh only where one may be asked: not while snapshots
    are off for the endpoint (a listing too large), not within ``FAILED_REFRESH_HOLD_S`` of a failed
    one (its error is not the request's: it reads on its own), not for a fresh read (an offsets
    change reads its connector anyway); and a snapshot the start's hold kept is not what a request
    decides on once the hold is over, however the listings fare."""
    from connect_offsets.clients.connect import ConnectServerError

    connect, client, starting, snapshot = await taken_under_a_start()
    taken = snapshot._taken
    assert taken is not None
    old = dataclasses.replace(taken, at=taken.at - 250)
    per_connector = ["GET /connectors/a/config", "GET /connectors/a/status"]

    async def asked_reads(count: int, **kw: Any) -> list[str]:
        connect.requests.clear()
        for _ in range(count):
            read = await asyncio.wait_for(snapshot.read("a", asked=True, **kw), timeout=1)
            assert read.config == {"k": "v"} and not read.digest  # read on its own
        await asyncio.sleep(0.01)
        return [str(r) for r in connect.requests]

    # Kept by the start's hold, the hold over, every listing failing: never decided on.
    snapshot._taken = old
    assert (await snapshot.read("a")).digest  # a check, during the hold: the kept snapshot
    starting[0] = False
    failure = ConnectServerError(method="GET", path="/connectors", status_code=500, message="overloaded")
    snapshot._failed = (snapshot._clock(), failure)  # a listing failed just now
    assert await asked_reads(3) == per_connector * 3  # no listing asked again meanwhile
    assert await asked_reads(1, fresh=True) == per_connector  # an offsets change: no error, no listing
    # Snapshots off for the endpoint (a listing too large): no request starts one.
    snapshot._failed = None
    snapshot._turn_off("the listing was too large")
    assert await asked_reads(3) == per_connector * 3
    await client.aclose()


async def test_when_the_starts_hold_ends_its_snapshot_is_served_while_the_refresh_runs() -> None:
    """bench_cold_start: when a first start's checks were done its hold ended, the snapshots were
    150 s old, past the age served while refreshing (2 x max_age + the listing's time), and every
    check of a namespace waited 5 s for the new listing, holding the workers a user's ``list``
    needed (5.7 s). A snapshot the hold kept is served while one refresh runs, however old."""
    connect, client, starting, snapshot = await taken_under_a_start()
    taken = snapshot._taken
    assert taken is not None
    snapshot._taken = dataclasses.replace(taken, at=taken.at - 150)
    connect.requests.clear()
    assert (await snapshot.read("a")).config == {"k": "v"} and connect.requests == []  # the hold keeps it
    starting[0] = False
    listing = held_listing(client)
    reads = await asyncio.wait_for(asyncio.gather(*(snapshot.read("a") for _ in range(5))), timeout=1)
    assert all(r.config == {"k": "v"} for r in reads)  # answered at once, from the kept snapshot
    listing.set()
    await until(lambda: snapshot._inflight is None)
    assert [str(r) for r in connect.requests] == ["GET /connectors"]  # one refresh for all
    assert snapshot._age() < 45
    # A snapshot no hold kept, as old, is waited for as before (no unbounded staleness).
    snapshot._taken = dataclasses.replace(snapshot._taken, at=snapshot._taken.at - 150)
    listing = held_listing(client)
    waiting = asyncio.ensure_future(snapshot.read("a"))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    listing.set()
    assert (await asyncio.wait_for(waiting, timeout=1)).config == {"k": "v"}
    await client.aclose()


async def test_a_starts_first_checks_hold_the_snapshot_refresh_for_a_bounded_while() -> None:
    """bench_cold_start: in a 211 s first start at 20,000 connectors the workers spent 91 s of CPU
    on the listings of every drift interval, beside the API server's writes. While the process's start
    is under way (``hold``: its first checks), a taken snapshot is neither refreshed by the ConnectCluster's
    pass nor by a reader that finds it old, up to ``START_HOLD_MAX_S``; then, or once the checks
    are done, as before."""
    connect = FakeConnect(URL)
    connect.handle(httpx.Request("POST", f"{URL}/connectors", json={"name": "a", "config": {"k": "v"}}))
    client = client_for(connect)
    starting = [True]
    snapshot = ConnectorsSnapshot(client, max_age=1, hold=lambda: starting[0])
    await snapshot.refresh()  # the first listing is taken, start or not
    taken = snapshot._taken
    assert taken is not None
    snapshot._taken = dataclasses.replace(taken, at=taken.at - 100)  # far past max_age
    connect.requests.clear()
    await snapshot.refresh(older_than=0)
    assert (await snapshot.read("a")).config == {"k": "v"}
    assert connect.requests == []  # held: the start's snapshot serves
    # A user's request does not decide on a snapshot only the hold keeps: it reads its connector.
    assert (await snapshot.read("a", asked=True)).config == {"k": "v"}
    assert [str(r) for r in connect.requests] == ["GET /connectors/a/config", "GET /connectors/a/status"]
    connect.requests.clear()
    snapshot._taken = dataclasses.replace(taken, at=taken.at - snapshots.START_HOLD_MAX_S - 1)
    await snapshot.refresh(older_than=0)
    assert [str(r) for r in connect.requests] == ["GET /connectors"]  # too old even for a start
    taken = snapshot._taken
    snapshot._taken = dataclasses.replace(taken, at=taken.at - 100)
    starting[0] = False  # the start's checks are done
    connect.requests.clear()
    await snapshot.refresh(older_than=0)
    assert [str(r) for r in connect.requests] == ["GET /connectors"]
    await client.aclose()
