"""What a hostile tenant sends, and how a test watches the operator's health meanwhile.

Shared by the shared-operator tests (``test_shared_cpu``, ``test_shared_memory``) and the
hostile-tenant benchmark, so the bench measures exactly what the tests assert on.
"""

from __future__ import annotations

import contextlib
import threading
import time
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx


def gzip_zeros(size: int) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = bytes(1 << 20)
    return b"".join([*(packer.compress(zeros) for _ in range(size >> 20)), packer.flush()])


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmHWM for {pid}")


@contextlib.contextmanager
def huge_answers() -> Iterator[tuple[str, list[str]]]:
    """An HTTP server on 127.0.0.1 whose every answer is 300 MiB of JSON-ish zeros as ~300 KB gzip."""
    body = gzip_zeros(300 << 20)
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the operator stops at its cap
                self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


class Prober(threading.Thread):
    """Asks the liveness endpoint every 0.2 s (1 s timeout each) and keeps every failure."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.failures: list[str] = []
        self.latencies: list[float] = []
        self.done = threading.Event()

    def run(self) -> None:
        with httpx.Client(timeout=1.0) as client:
            while not self.done.is_set():
                started = time.monotonic()
                try:
                    status = client.get(self.url).status_code
                    if status != 200:
                        self.failures.append(f"HTTP {status}")
                except httpx.HTTPError as error:
                    self.failures.append(repr(error))
                self.latencies.append(time.monotonic() - started)
                self.done.wait(0.2)
