#!/usr/bin/env python3
"""The stack's node gateway: TCP forwarding from the Pods' network to the stack's services that
listen on 127.0.0.1 only (the Connect workers' REST APIs), so that a Pod reaches them on the node's
address (hack/stack.py ``up node``; docs/development.md#the-node).

    node_gateway.py LISTEN_ADDRESS TARGET_ADDRESS PORT[,PORT...]

Each PORT on LISTEN_ADDRESS is forwarded to the same PORT on TARGET_ADDRESS, byte for byte (HTTP,
TLS alike). A Service with an EndpointSlice cannot do it: endpoints in 127.0.0.0/8 are refused.
Stdlib only, as hack/stack.py, which starts and stops it.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()  # the other side's half-close, passed on
    except (ConnectionError, OSError):
        pass


async def forward(target: str, port: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        target_reader, target_writer = await asyncio.open_connection(target, port)
    except OSError:
        writer.close()
        return
    try:
        await asyncio.gather(pipe(reader, target_writer), pipe(target_reader, writer))
    finally:
        for each in (target_writer, writer):
            with contextlib.suppress(ConnectionError, OSError):
                each.close()


async def serve(listen: str, target: str, ports: list[int]) -> None:
    servers = []
    for port in ports:

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, port: int = port) -> None:
            await forward(target, port, reader, writer)

        servers.append(await asyncio.start_server(handle, listen, port, reuse_address=True))
    print(f"forwarding {listen}:{{{','.join(map(str, ports))}}} to {target}", flush=True)
    await asyncio.gather(*(server.serve_forever() for server in servers))


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    listen, target, ports = argv
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(listen, target, [int(port) for port in ports.split(",")]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
