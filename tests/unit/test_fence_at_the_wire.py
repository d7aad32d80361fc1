"""The fence's last look, right before a Connect write's first byte leaves (``fencing.at_the_wire``).

Why a real socket here: the look runs inside httpcore (its ``trace`` extension), which a
MockTransport skips. The server is a few lines of asyncio on 127.0.0.1; the client is the
operator's own ``ConnectClient`` with a pool of one connection, so a write waits for a
connection the way it does behind a busy pool or a TCP connect. The term ends while it waits,
as when a replica is frozen (SIGSTOP, a GC pause) there and woken after another replica took its
Lease over: seen on the real stack, the woken replica's ``PUT /stop`` went out after the new holder
had finished the alter and resumed the connector.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import httpx
import pytest

from connect_offsets import fencing
from connect_offsets.clients.connect import ConnectClient, ConnectEndpoint

pytestmark = pytest.mark.unit


@dataclass
class HeldServer:
    """Answers every request with ``204``; a ``GET`` is held until ``release`` is set."""

    release: asyncio.Event = field(default_factory=asyncio.Event)
    holding: asyncio.Event = field(default_factory=asyncio.Event)
    requests: list[str] = field(default_factory=list)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                method, path, _ = head.split(b"\r\n", 1)[0].decode().split(" ", 2)
                self.requests.append(f"{method} {path}")
                if method == "GET":
                    self.holding.set()
                    await self.release.wait()
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n[]")
                else:
                    writer.write(b"HTTP/1.1 204 No Content\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@pytest.fixture
async def held() -> AsyncIterator[tuple[ConnectClient, HeldServer]]:
    server = HeldServer()
    listener = await asyncio.start_server(server.serve, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    one_connection = httpx.AsyncHTTPTransport(limits=httpx.Limits(max_connections=1))
    client = ConnectClient(ConnectEndpoint(url=f"http://127.0.0.1:{port}"), transport=one_connection)
    async with listener, client:
        yield client, server
        server.release.set()


async def stop_while_the_pool_is_busy(
    client: ConnectClient, server: HeldServer, fence: fencing.Fence, meanwhile: asyncio.Event
) -> asyncio.Task[None]:
    """A list holds the only connection; a fenced stop passes ``before_write`` and waits for it."""
    listing = asyncio.create_task(client.list_connectors())
    await server.holding.wait()

    async def stop() -> None:
        with fencing.acting_under(fence):
            await client.stop_connector("orders")

    stopping = asyncio.create_task(stop())
    while not fence.confirmed_for_writes:  # before_write is behind it: it waits for the connection
        await asyncio.sleep(0)
    meanwhile.set()
    server.release.set()
    assert await listing == []
    return stopping


async def test_a_term_that_ends_while_a_write_waits_for_its_connection_sends_nothing(
    held: tuple[ConnectClient, HeldServer],
) -> None:
    client, server = held
    ended = asyncio.Event()
    fence = fencing.Fence(holder="frozen/1", valid=lambda: not ended.is_set())
    stopping = await stop_while_the_pool_is_busy(client, server, fence, ended)
    with pytest.raises(fencing.FencedOff, match="term frozen/1 has ended: PUT /connectors/orders/stop"):
        await stopping
    assert server.requests == ["GET /connectors"]
    # The pool is not poisoned: the next write of a valid term goes out on it.
    with fencing.acting_under(fencing.Fence(holder="standby/2", valid=lambda: True)):
        await client.stop_connector("orders")
    assert server.requests == ["GET /connectors", "PUT /connectors/orders/stop"]


async def test_a_claim_taken_over_while_a_write_waits_for_its_connection_sends_nothing(
    held: tuple[ConnectClient, HeldServer],
) -> None:
    client, server = held
    taken = asyncio.Event()
    fence = fencing.Fence(holder="slow-clock/1", valid=lambda: True, still_claimed=lambda: not taken.is_set())
    stopping = await stop_while_the_pool_is_busy(client, server, fence, taken)
    with pytest.raises(fencing.FencedOff, match="another replica claimed the resource: PUT /connectors/orders/stop"):
        await stopping
    assert server.requests == ["GET /connectors"]


async def test_a_term_still_held_at_the_wire_writes(held: tuple[ConnectClient, HeldServer]) -> None:
    client, server = held
    nothing = asyncio.Event()
    fence = fencing.Fence(holder="holder/1", valid=lambda: True, still_claimed=lambda: True)
    stopping = await stop_while_the_pool_is_busy(client, server, fence, nothing)
    await stopping
    assert server.requests == ["GET /connectors", "PUT /connectors/orders/stop"]


async def test_outside_a_fenced_pass_there_is_no_last_look() -> None:
    assert fencing.at_the_wire("PUT /connectors/orders/stop") is None


async def test_a_term_that_ends_while_a_large_patch_body_is_on_its_way_sends_no_complete_patch() -> None:
    """Connect acts on a request once its last byte arrived: a worker slow to read a body of
    megabytes (one chunk of a chunked alter) leaves most of it in this process while the term
    ends; the request must never be completed (found by the attacker review of 7ddf1a7)."""
    headers_read = asyncio.Event()
    read_body = asyncio.Event()
    complete: list[str] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode().split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            length = next(
                int(v) for k, _, v in (line.partition(": ") for line in lines[1:]) if k.lower() == "content-length"
            )
            headers_read.set()
            await read_body.wait()  # a worker slow to read the body (busy Jetty threads, slow link)
            await reader.readexactly(length)
            complete.append(f"{method} {path}")  # Connect acts on the request now
            answer = json.dumps({"message": "altered"})
            head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(answer)}\r\n\r\n"
            writer.write((head + answer).encode())
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.bind(("127.0.0.1", 0))
    listener = await asyncio.start_server(serve, sock=sock)
    port = sock.getsockname()[1]
    client = ConnectClient(ConnectEndpoint(url=f"http://127.0.0.1:{port}"))
    ended = asyncio.Event()
    fence = fencing.Fence(holder="frozen/1", valid=lambda: not ended.is_set())
    # One chunk of a chunked alter: many partitions, under the 4 MiB chunk limit.
    entries = [{"partition": {"filename": f"/data/file-{i:07d}.txt"}, "offset": {"position": i}} for i in range(50_000)]
    async with listener, client:

        async def alter() -> None:
            with fencing.acting_under(fence):
                await client.alter_offsets("orders", {"offsets": entries})

        altering = asyncio.create_task(alter())
        await asyncio.wait_for(headers_read.wait(), 10)
        await asyncio.sleep(0.2)
        assert not altering.done(), "the body did not wait on the wire: no window to show"
        ended.set()  # frozen here; woken after another replica took the Lease over
        read_body.set()
        await asyncio.wait([altering], timeout=10)
        outcome = "succeeded" if altering.exception() is None else repr(altering.exception())
        assert complete == [], (
            f"a PATCH whose term had ended before its body left reached Connect whole (the alter {outcome})"
        )
