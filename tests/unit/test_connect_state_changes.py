"""Which stops, pauses and resumes count as sent (``clients.connect.state_changes``): the planner does
not send one again while Connect's status lags it, so "sent" must include "maybe applied"."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from connect_offsets.clients.connect import ConnectClient, ConnectEndpoint, ConnectError
from connect_offsets.clients.connect.state_changes import StateChanges
from tests.fakes import FakeClock

pytestmark = pytest.mark.unit

URL = "http://connect.test:8083"
Answer = Callable[[httpx.Request], httpx.Response]


def client_answering(answer: Answer) -> tuple[ConnectClient, FakeClock]:
    clock = FakeClock(50.0)
    client = ConnectClient(ConnectEndpoint(url=URL), transport=httpx.MockTransport(answer))
    client.state_changes = StateChanges(clock=clock)
    return client, clock


def accepted(request: httpx.Request) -> httpx.Response:
    return httpx.Response(204 if request.url.path.endswith("/stop") else 202)


def refused(request: httpx.Request) -> httpx.Response:
    return httpx.Response(409, json={"error_code": 409, "message": "rebalance in progress"})


def answer_lost(request: httpx.Request) -> httpx.Response:
    raise httpx.ReadTimeout("no answer", request=request)


def not_connected(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("connection refused", request=request)


async def test_an_accepted_change_is_noted_with_its_age() -> None:
    client, clock = client_answering(accepted)
    async with client:
        await client.stop_connector("orders")
        clock.now += 1.5
        assert client.state_changes.last("orders") == ("stop", 1.5)
        await client.resume_connector("orders")
        assert client.state_changes.last("orders") == ("resume", 0.0)
        assert client.state_changes.last("payments") is None


def connect_timed_out(request: httpx.Request) -> httpx.Response:
    """The herder did not finish within the REST timeout: the change stays queued, applied later."""
    return httpx.Response(500, json={"error_code": 500, "message": "Request timed out"})


def gateway_timed_out(request: httpx.Request) -> httpx.Response:
    return httpx.Response(504, text="Gateway Timeout")


def failed_otherwise(request: httpx.Request) -> httpx.Response:
    return httpx.Response(500, json={"error_code": 500, "message": "Failed to stop connector orders"})


@pytest.mark.parametrize(
    ("answer", "noted"),
    [
        (refused, False),
        (failed_otherwise, False),
        (not_connected, False),
        (answer_lost, True),
        (connect_timed_out, True),
        (gateway_timed_out, True),
    ],
    ids=["Connect refused it", "Connect failed it", "never sent", "answer lost", "Connect timed out", "gateway 504"],
)
async def test_a_failed_change_counts_as_sent_only_when_connect_may_have_applied_it(
    answer: Answer, noted: bool
) -> None:
    client, _ = client_answering(answer)
    async with client:
        with pytest.raises(ConnectError):
            await client.pause_connector("orders")
        assert (client.state_changes.last("orders") is not None) is noted


async def test_a_deleted_or_created_connector_starts_with_no_change_sent() -> None:
    def anything(request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            return httpx.Response(201, json={"name": "orders", "config": {}, "tasks": []})
        return accepted(request)

    client, _ = client_answering(anything)
    async with client:
        await client.stop_connector("orders")
        await client.delete_connector("orders")
        assert client.state_changes.last("orders") is None
        await client.stop_connector("orders")
        await client.create_connector("orders", {"connector.class": "X"})
        assert client.state_changes.last("orders") is None


def answering_error(status: int, message: str) -> ConnectClient:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, json={"error_code": status, "message": message})

    client = ConnectClient(ConnectEndpoint(url=URL), transport=httpx.MockTransport(answer))
    client.state_changes = StateChanges(clock=FakeClock(50.0))
    return client


@pytest.mark.parametrize(
    "message",
    [
        "IO Error trying to forward REST request: java.util.concurrent.TimeoutException: "
        "Total timeout 90000 ms elapsed",
        "IO Error trying to forward REST request: java.io.EOFException: HttpConnectionOverHTTP@1f2e closed",
        "IO Error trying to forward REST request: java.util.concurrent.ExecutionException: "
        "java.io.IOException: Connection reset by peer",
    ],
    ids=["forward timeout", "forward EOF", "forward reset"],
)
async def test_a_stop_whose_forward_to_the_leader_failed_after_sending_counts_as_sent(message: str) -> None:
    """Connect forwards a stop to its leader (3.5+); a forward whose answer was lost leaves the
    outcome unknown (found by the second attacker review)."""
    client = answering_error(500, message)
    async with client:
        with pytest.raises(ConnectError):
            await client.stop_connector("orders")
        assert client.state_changes.last("orders") is not None, (
            "the leader may have applied the stop; not noted, the next pass (status still RUNNING) stops it again"
        )


async def test_a_gateway_502_after_the_worker_took_the_request_counts_as_sent() -> None:
    """nginx answers 502 'upstream prematurely closed connection' after the worker read the
    request (a worker restarting, its JVM killed mid-answer): as unknown as a 504."""
    client = answering_error(502, "Bad Gateway")
    async with client:
        with pytest.raises(ConnectError):
            await client.stop_connector("orders")
        assert client.state_changes.last("orders") is not None


async def test_a_forward_that_never_reached_the_leader_is_not_noted() -> None:
    """The control: a refused connection to the leader certainly did not apply it."""
    client = answering_error(
        500, "IO Error trying to forward REST request: java.net.ConnectException: Connection refused"
    )
    async with client:
        with pytest.raises(ConnectError):
            await client.stop_connector("orders")
        assert client.state_changes.last("orders") is None
