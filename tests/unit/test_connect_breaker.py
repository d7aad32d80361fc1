"""The circuit breaker of a Connect connection (issue 45, "fail fast on a dead Connect cluster").

A ConnectCluster whose URL never answers (or answers 503 after 25 s) held a worker for the whole
request time-out on every pass of each of its resources. With the breaker:

* connecting gets at most 5 s, apart from the request time-out;
* a time-out, a refused connection or a 502/503/504 opens the breaker: for the back-off (2 s,
  doubling to 60 s) every request fails at once, with no network call, with the same error (class,
  text marked remembered, identical on every call), so status written from it does not change;
* then exactly one request at a time probes the cluster; its answer closes the breaker and wakes
  the ConnectClusters using the connection (``ClusterRegistry(on_recovered=...)``);
* 4xx answers are answers: they never open it;
* a write refused while open reaches neither the transport nor the fence's claim.

Counts, never timings: the clock is a fake the tests move.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import httpx
import pytest
import respx

from connect_offsets import fencing, metrics
from connect_offsets.clients.connect import (
    CircuitBreaker,
    ConnectBadRequest,
    ConnectClient,
    ConnectConflict,
    ConnectEndpoint,
    ConnectError,
    ConnectServerError,
    ConnectUnavailable,
)
from connect_offsets.clients.connect.breaker import MAX_BACKOFF_S, RememberedFailure, Ticket
from connect_offsets.reconcile.cluster_service import ClusterService
from connect_offsets.reconcile.clusters import ClusterRegistry
from connect_offsets.vocabulary import API_GROUP, CLUSTERS
from tests.fakes import FakeConnect, FakeKube
from tests.reconcile_pass import checked

pytestmark = pytest.mark.unit

URL = "http://connect.test:8083"
Handler = Callable[[httpx.Request], httpx.Response | Awaitable[httpx.Response]]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class Server:
    """A Connect URL whose answer the test chooses; counts what reaches the transport."""

    answer: Handler
    calls: list[str] = field(default_factory=list)

    async def handle(self, request: httpx.Request) -> httpx.Response:
        self.calls.append(f"{request.method} {request.url.path}")
        response = self.answer(request)
        return response if isinstance(response, httpx.Response) else await response


def timing_out(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectTimeout("timed out", request=request)


def timing_out_reads(request: httpx.Request) -> httpx.Response:
    raise httpx.ReadTimeout("no answer", request=request)


def answering(status: int, body: object = None) -> Handler:
    return lambda request: httpx.Response(status, json=body if body is not None else [])


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def connect(clock: Clock) -> AsyncIterator[tuple[ConnectClient, Server, CircuitBreaker[ConnectError]]]:
    server = Server(timing_out)
    breaker: CircuitBreaker[ConnectError] = CircuitBreaker(clock=clock)
    client = ConnectClient(ConnectEndpoint(url=URL), transport=httpx.MockTransport(server.handle), breaker=breaker)
    async with client:
        yield client, server, breaker


async def failure(call: Awaitable[object]) -> ConnectError:
    with pytest.raises(ConnectError) as info:
        await call
    return info.value


def test_connecting_gets_a_short_time_out_apart_from_the_request_time_out() -> None:
    timeout = ConnectClient(ConnectEndpoint(url=URL))._client.timeout
    assert (timeout.connect, timeout.read, timeout.write, timeout.pool) == (5.0, 30.0, 30.0, None)
    short = ConnectClient(ConnectEndpoint(url=URL, timeout_seconds=3))._client.timeout
    assert (short.connect, short.read) == (3, 3)


async def test_a_time_out_opens_it_and_every_request_fails_at_once_without_a_network_call(
    connect: tuple[ConnectClient, Server, CircuitBreaker[ConnectError]],
) -> None:
    client, server, breaker = connect
    first = await failure(client.list_connectors())
    assert isinstance(first, ConnectUnavailable) and not first.remembered
    assert breaker.is_open and breaker.backoff == 2.0
    refused_before = metrics.CONNECT_REQUESTS_REFUSED._value.get()
    later = [
        await failure(client.list_connectors()),
        await failure(client.get_connector_status("orders")),
        await failure(client.get_offsets_raw("orders")),
        await failure(client.server_info()),
    ]
    assert server.calls == ["GET /connectors"]  # one network call, however many requests
    assert metrics.CONNECT_REQUESTS_REFUSED._value.get() - refused_before == 4
    assert all(type(error) is ConnectUnavailable and error.remembered and error.retryable for error in later)
    # The real failure's text, verbatim, marked remembered, the same on every call of a request,
    # and addressed to the request refused (not to the one that failed: another tenant's, maybe).
    assert str(later[0]).startswith(str(first) + " (remembered: ")
    assert "ConnectTimeout: timed out" in str(later[0]) and "2 s" in str(later[0])
    assert [(e.method, e.path) for e in later] == [
        ("GET", "/connectors"),
        ("GET", "/connectors/orders/status"),
        ("GET", "/connectors/orders/offsets"),
        ("GET", "/"),
    ]
    assert len({str(error).split(": ", 1)[1] for error in later}) == 1
    again = await failure(client.get_connector_status("orders"))
    assert str(again) == str(later[1])
    assert all(error is not later[0] for error in later[1:])  # fresh copies, no shared tracebacks


async def test_a_503_opens_it_with_the_same_error_class_and_status(
    connect: tuple[ConnectClient, Server, CircuitBreaker[ConnectError]],
) -> None:
    client, server, breaker = connect
    server.answer = answering(503, {"error_code": 503, "message": "no healthy upstream"})
    first = await failure(client.list_connectors())
    again = [await failure(client.list_connectors()) for _ in range(3)]
    assert len(server.calls) == 1 and breaker.is_open
    assert all(isinstance(e, ConnectServerError) and e.status_code == 503 and e.remembered for e in again)
    assert all(e.message.startswith(f"{first.message} (remembered: ") for e in again)
    assert len({str(e) for e in again}) == 1 and "no healthy upstream" in str(again[0])


@pytest.mark.parametrize(
    ("status", "error"),
    [(404, None), (409, ConnectConflict), (400, ConnectBadRequest), (500, ConnectServerError)],
)
async def test_answers_other_than_502_503_504_do_not_open_it(
    connect: tuple[ConnectClient, Server, CircuitBreaker[ConnectError]], status: int, error: type[ConnectError] | None
) -> None:
    client, server, breaker = connect
    server.answer = answering(status, {"error_code": status, "message": "Connect's own answer"})
    for _ in range(3):
        if error is None:
            assert await client.get_connector_config("orders") is None
        else:
            with pytest.raises(error):
                await client.get_connector_config("orders")
    assert len(server.calls) == 3 and not breaker.is_open


async def test_a_starting_workers_answers_do_not_open_it(
    connect: tuple[ConnectClient, Server, CircuitBreaker[ConnectError]],
) -> None:
    client, server, breaker = connect
    server.answer = lambda request: httpx.Response(404, text="<html>Error 404 Not Found</html>")
    for _ in range(2):
        with pytest.raises(ConnectUnavailable, match="worker is still starting"):
            await client.get_connector_config("orders")
    server.answer = answering(503, {"status": "starting", "message": "Worker is starting."})
    assert await client.worker_health() == ("starting", "Worker is starting.")
    assert len(server.calls) == 3 and not breaker.is_open


async def test_after_the_back_off_one_request_probes_while_the_others_fail_at_once(
    connect: tuple[ConnectClient, Server, CircuitBreaker[ConnectError]], clock: Clock
) -> None:
    client, server, breaker = connect
    await failure(client.list_connectors())
    clock.advance(2.0)
    answer = asyncio.Event()

    async def slow(request: httpx.Request) -> httpx.Response:
        await answer.wait()
        return httpx.Response(200, json=["orders"])

    server.answer = slow
    calls = [asyncio.ensure_future(client.list_connectors()) for _ in range(10)]
    await asyncio.sleep(0.01)  # every call has asked the breaker; the probe is in flight
    assert len(server.calls) == 2  # the failure that opened it, and the one probe
    answer.set()
    results = await asyncio.gather(*calls, return_exceptions=True)
    assert [r for r in results if not isinstance(r, BaseException)] == [["orders"]]
    refused = [r for r in results if isinstance(r, BaseException)]
    assert len(refused) == 9 and all(isinstance(r, ConnectUnavailable) and r.remembered for r in refused)
    assert not breaker.is_open
    assert await client.list_connectors() == ["orders"]  # closed: requests go out side by side again
    assert len(server.calls) == 3


async def test_the_back_off_doubles_up_to_the_max_and_an_answer_resets_it(
    connect: tuple[ConnectClient, Server, CircuitBreaker[ConnectError]], clock: Clock
) -> None:
    client, server, breaker = connect
    await failure(client.list_connectors())
    seen = [breaker.backoff]
    for _ in range(7):
        backoff = breaker.backoff
        assert backoff is not None
        clock.advance(backoff - 0.5)
        await failure(client.list_connectors())  # not yet: refused
        calls = len(server.calls)
        clock.advance(0.5)
        probe = await failure(client.list_connectors())  # the probe, failing
        assert len(server.calls) == calls + 1 and not probe.remembered
        seen.append(breaker.backoff)
    assert seen == [2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0, 60.0] and MAX_BACKOFF_S == 60.0
    # Each opening remembers its own back-off, and says so the same way for its whole period.
    assert "not asked again for 60 s" in str(await failure(client.list_connectors()))
    clock.advance(60.0)
    server.answer = answering(200, ["orders"])
    assert await client.list_connectors() == ["orders"]
    assert not breaker.is_open and breaker.backoff is None
    clock.advance(MAX_BACKOFF_S)  # answering for a while: the outage is over
    server.answer = timing_out
    await failure(client.list_connectors())
    assert breaker.backoff == 2.0  # reset by the answer


async def test_an_endpoint_that_answers_each_probe_and_fails_again_at_once_keeps_doubling(
    connect: tuple[ConnectClient, Server, CircuitBreaker[ConnectError]], clock: Clock
) -> None:
    """The attacker's flapping endpoint: it answers the lone probe and times out right after. Any
    answer closed the breaker and reset the back-off to 2 s, so it was asked every 2 s for ever."""
    client, server, breaker = connect
    seen = []
    for _ in range(7):
        server.answer = timing_out
        await failure(client.list_connectors())
        seen.append(breaker.backoff)
        assert breaker.backoff is not None
        clock.advance(breaker.backoff)
        server.answer = answering(200, ["orders"])
        assert await client.list_connectors() == ["orders"]  # the probe is answered
        clock.advance(0.1)
    assert seen == [2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0]


async def test_time_outs_of_requests_already_under_way_open_it_once(
    connect: tuple[ConnectClient, Server, CircuitBreaker[ConnectError]], clock: Clock
) -> None:
    client, server, breaker = connect
    all_sent = asyncio.Event()

    async def timing_out_together(request: httpx.Request) -> httpx.Response:
        if len(server.calls) == 10:
            all_sent.set()
        await all_sent.wait()
        raise httpx.ReadTimeout("timed out", request=request)

    server.answer = timing_out_together
    results = await asyncio.gather(*(client.list_connectors() for _ in range(10)), return_exceptions=True)
    assert len(server.calls) == 10  # closed: all of them were under way before the first failed
    assert all(isinstance(r, ConnectUnavailable) and not r.remembered for r in results)
    assert breaker.openings == 1 and breaker.backoff == 2.0


async def test_a_cancelled_probe_gives_its_turn_to_the_next_request(
    connect: tuple[ConnectClient, Server, CircuitBreaker[ConnectError]], clock: Clock
) -> None:
    client, server, breaker = connect
    await failure(client.list_connectors())
    clock.advance(2.0)
    never = asyncio.Event()

    async def hanging(request: httpx.Request) -> httpx.Response:
        await never.wait()
        raise AssertionError("unreachable")

    server.answer = hanging
    probe = asyncio.ensure_future(client.list_connectors())
    await asyncio.sleep(0.01)
    assert (await failure(client.list_connectors())).remembered  # the probe is in flight
    probe.cancel()
    with pytest.raises(asyncio.CancelledError):
        await probe
    server.answer = answering(200, ["orders"])
    assert await client.list_connectors() == ["orders"]  # the next one probed, and closed it
    assert len(server.calls) == 3 and breaker.openings == 1 and not breaker.is_open


async def test_a_write_refused_while_open_reaches_neither_the_transport_nor_the_claim(
    connect: tuple[ConnectClient, Server, CircuitBreaker[ConnectError]],
) -> None:
    client, server, _ = connect
    await failure(client.list_connectors())
    claims: list[str] = []

    async def claim() -> None:
        claims.append("claimedBy")

    fence = fencing.Fence(holder="replica-1/3", valid=lambda: True, claim=claim)
    with fencing.acting_under(fence):
        for write in (
            client.stop_connector("orders"),
            client.put_connector_config("orders", {"connector.class": "X"}),
            client.alter_offsets("orders", {"offsets": []}),
            client.reset_offsets("orders"),
        ):
            assert (await failure(write)).remembered
    assert server.calls == ["GET /connectors"] and claims == [] and not fence.claimed
    # Not counted as sent: a snapshot taken now is not taken for older than a write that never was.
    assert client.write_seq == 0 and client.last_write("orders") == 0


async def test_a_probe_that_is_a_write_is_claimed_and_counted_like_any_write(
    connect: tuple[ConnectClient, Server, CircuitBreaker[ConnectError]], clock: Clock
) -> None:
    client, server, breaker = connect
    await failure(client.list_connectors())
    clock.advance(2.0)
    server.answer = lambda request: httpx.Response(202)
    claims: list[str] = []

    async def claim() -> None:
        claims.append("claimedBy")

    with fencing.acting_under(fencing.Fence(holder="replica-1/3", valid=lambda: True, claim=claim)):
        await client.stop_connector("orders")
    assert server.calls == ["GET /connectors", "PUT /connectors/orders/stop"] and claims == ["claimedBy"]
    assert client.last_write("orders") > 0 and not breaker.is_open


async def test_fenced_off_before_sending_the_probe_passes_its_turn(
    connect: tuple[ConnectClient, Server, CircuitBreaker[ConnectError]], clock: Clock
) -> None:
    client, server, breaker = connect
    await failure(client.list_connectors())
    clock.advance(2.0)
    ended = fencing.Fence(holder="replica-1/3", valid=lambda: False)
    with fencing.acting_under(ended), pytest.raises(fencing.FencedOff):
        await client.stop_connector("orders")
    assert breaker.is_open  # nothing was learnt about the cluster
    server.answer = answering(200, ["orders"])
    assert await client.list_connectors() == ["orders"]  # the next request is the probe
    assert server.calls == ["GET /connectors", "GET /connectors"] and not breaker.is_open


def test_the_breaker_alone_ignores_stale_tickets(clock: Clock) -> None:
    recovered: list[str] = []
    breaker: CircuitBreaker[ValueError] = CircuitBreaker(clock=clock, on_recovered=lambda: recovered.append("up"))
    early, late = breaker.admit(), breaker.admit()
    assert isinstance(early, Ticket) and isinstance(late, Ticket)
    breaker.failed(early, lambda backoff: ValueError(f"down ({backoff:.0f} s)"))
    breaker.failed(late, lambda backoff: ValueError("never made"))
    refused = breaker.admit()
    assert isinstance(refused, RememberedFailure) and str(refused.error) == "down (2 s)" and breaker.openings == 1
    assert breaker.succeeded(late) is True and recovered == ["up"]  # any answer says it is there
    assert breaker.succeeded(early) is False and recovered == ["up"]


# ---- through the registry: the ConnectClusters sharing a connection -------------------------------


def cluster(namespace: str, name: str, url: str = URL) -> dict[str, object]:
    return {
        "apiVersion": f"{API_GROUP}/v1beta1",
        "kind": "ConnectCluster",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"url": url},
    }


@dataclass
class World:
    kube: FakeKube
    connect: FakeConnect
    clusters: ClusterRegistry
    recovered: list[set[tuple[str, str]]]
    dead: list[bool]


@pytest.fixture
async def world(clock: Clock) -> AsyncIterator[World]:
    kube = FakeKube([])
    for namespace, name in (("team-a", "local"), ("team-b", "shared")):
        kube.put_resource(CLUSTERS, cluster(namespace, name))
    kube.put_resource(CLUSTERS, cluster("team-c", "other", "http://elsewhere.test:8083"))
    connect = FakeConnect(URL)
    dead = [False]
    recovered: list[set[tuple[str, str]]] = []

    def handle(request: httpx.Request) -> httpx.Response:
        if dead[0]:
            raise httpx.ReadTimeout("no answer", request=request)
        return connect.handle(request)

    with respx.mock(assert_all_called=False) as router:
        router.route(method="GET", url__regex=r"/connector-plugins/?(\?.*)?$").respond(200, json=[])
        router.route(url__startswith=URL).mock(side_effect=handle)
        router.route(url__startswith="http://elsewhere.test:8083").mock(side_effect=connect.handle)
        clusters = ClusterRegistry(
            kube,  # type: ignore[arg-type]
            drift_interval=0.0,  # every ConnectCluster pass refreshes the snapshot: a request each
            on_recovered=recovered.append,
            new_breaker=lambda: CircuitBreaker(clock=clock),
        )
        yield World(kube, connect, clusters, recovered, dead)
        await clusters.aclose()


def ready(kube: FakeKube, namespace: str, name: str) -> dict[str, str]:
    status = kube.resource(CLUSTERS, namespace, name).get("status") or {}
    return next(c for c in status["conditions"] if c["type"] == "Ready")


async def test_clusters_on_a_dead_endpoint_say_unreachable_with_its_error_then_wake_when_it_answers(
    world: World, clock: Clock
) -> None:
    service = ClusterService(world.kube, world.clusters)  # type: ignore[arg-type]
    for namespace, name in (("team-a", "local"), ("team-b", "shared"), ("team-c", "other")):
        await checked(service, namespace, name)  # the endpoint's first listing landed
        assert ready(world.kube, namespace, name)["status"] == "True"
    client, _ = await world.clusters.client_for("team-a", "local")
    assert (await world.clusters.client_for("team-b", "shared"))[0] is client  # one connection, one breaker

    world.dead[0] = True
    sent = len(world.connect.requests)
    outcome = await service.reconcile("team-a", "local")
    first = ready(world.kube, "team-a", "local")
    assert (first["reason"], outcome.transient_error is not None) == ("Unreachable", True)
    assert "ReadTimeout: no answer" in first["message"]
    # Both ConnectClusters naming the endpoint, and a resource of either, fail at once from now on.
    messages = []
    for _ in range(3):
        for namespace, name in (("team-a", "local"), ("team-b", "shared")):
            await service.reconcile(namespace, name)
            condition = ready(world.kube, namespace, name)
            assert condition["reason"] == "Unreachable" and "ReadTimeout: no answer" in condition["message"]
            messages.append(condition["message"])
    # The same words on every pass (each refused request names itself, then the failure's text).
    failures = {m[m.index("ReadTimeout") :] for m in messages}
    assert len(failures) == 1 and "(remembered: " in messages[0]
    # In doubt for the work queue (its resources one at a time), for both names of the endpoint only.
    assert world.clusters.in_doubt("team-a", "local") and world.clusters.in_doubt("team-b", "shared")
    assert not world.clusters.in_doubt("team-c", "other") and not world.clusters.in_doubt("team-c", "unknown")
    refused = await failure(client.get_connector_config("orders"))  # a resource's pass
    assert str(refused).endswith(failures.pop()) and refused.remembered
    assert refused.path == "/connectors/orders/config"
    assert len(world.connect.requests) == sent  # the dead endpoint saw nothing: it timed out, not answered
    await service.reconcile("team-c", "other")  # another endpoint is not held back
    assert ready(world.kube, "team-c", "other")["status"] == "True" and world.recovered == []

    clock.advance(2.0)
    world.dead[0] = False
    await service.reconcile("team-b", "shared")  # its probe is the first request after the back-off
    assert ready(world.kube, "team-b", "shared")["status"] == "True"
    assert world.recovered == [{("team-a", "local"), ("team-b", "shared")}]
    assert not world.clusters.in_doubt("team-a", "local")
    await service.reconcile("team-a", "local")
    assert ready(world.kube, "team-a", "local")["status"] == "True" and len(world.recovered) == 1


async def test_a_snapshot_refresh_can_be_the_probe(world: World, clock: Clock) -> None:
    client, _ = await world.clusters.client_for("team-a", "local")
    snapshot = world.clusters.snapshot("team-a", "local")
    assert snapshot is not None and snapshot.client is client
    world.dead[0] = True
    with pytest.raises(ConnectUnavailable):
        await snapshot.refresh()
    sent = len(world.connect.requests)
    clock.advance(2.0)
    world.dead[0] = False
    await snapshot.refresh()
    assert snapshot.connectors() == {} and len(world.connect.requests) == sent + 1
    assert world.recovered == [{("team-a", "local")}]  # the only ConnectCluster resolved to it so far


async def test_a_tenants_slow_connector_path_does_not_open_the_breaker_others_share(
    connect: tuple[ConnectClient, Server, CircuitBreaker[ConnectError]], clock: Clock
) -> None:
    """The attacker's case: tenant A makes Connect slow on its own connector's path (a config whose
    validation waits for an unreachable database) until the read times out. The endpoint is
    shared; its breaker must stay closed for tenant B, and B must never see A's path. A slow
    answer to a cluster-wide read (the connector listing) does open it."""
    client, server, breaker = connect
    server.answer = timing_out_reads
    slow = await failure(client.get_connector_status("a-conn"))
    assert isinstance(slow, ConnectUnavailable) and "ReadTimeout" in str(slow)
    assert not breaker.is_open
    status = {"name": "b-conn", "connector": {"state": "RUNNING", "worker_id": "w"}, "tasks": [], "type": "source"}
    server.answer = answering(200, status)
    assert (await client.get_connector_status("b-conn")).connector.state == "RUNNING"
    server.answer = timing_out_reads
    await failure(client.list_connectors())
    assert breaker.is_open
    refused = await failure(client.get_connector_status("b-conn"))
    assert refused.remembered and "a-conn" not in str(refused)
    # A connector path's time-out while open is no answer: it neither closes the breaker nor
    # wakes the cluster's resources (it did, and a frozen worker's resources retried every 2 s).
    recovered: list[str] = []
    breaker.on_recovered = lambda: recovered.append("woken")
    clock.advance(2.0)
    await failure(client.get_connector_status("a-conn"))  # the probe, timing out on its own path
    assert breaker.is_open and recovered == []


async def test_an_answer_trickled_a_byte_at_a_time_ends_at_the_request_deadline() -> None:
    """httpx's read time-out counts per read: an answer that sends a byte just inside it, for ever,
    held a worker for good. The whole request ends after REQUEST_DEADLINE_TIME_OUTS time-outs."""

    class Trickle(httpx.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            while True:
                await asyncio.sleep(0.05)
                yield b" "

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, stream=Trickle())

    endpoint = ConnectEndpoint(url=URL, timeout_seconds=0.1)
    breaker: CircuitBreaker[ConnectError] = CircuitBreaker()
    client = ConnectClient(endpoint, transport=httpx.MockTransport(handler), breaker=breaker)
    async with client:
        error = await failure(client.list_connectors())
    assert isinstance(error, ConnectUnavailable) and "no complete answer within" in str(error)
    assert breaker.is_open  # a cluster-wide read: an outage
