"""What a hostile tenant sends, and how a test watches the operator's health meanwhile.

Shared by the shared-operator tests (``test_shared_cpu``, ``test_shared_memory``, the policy and
fair-share tests) and the hostile-tenant benchmark, so the bench measures what the tests assert on.
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
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


#: A loopback address other than the stack's 127.0.0.1: what a tenant points the operator (or
#: Connect) at when it wants traffic somewhere the platform did not allow.
ELSEWHERE = "127.0.0.2"


class ConnectionTally:
    """Connections accepted by several listeners, counted together.

    ``open`` is what the clients hold open: when a connection is accepted, the others are looked at
    (a non-blocking peek) and one whose client has already closed it no longer counts, even if the
    thread serving it has not woken up to see that yet. Counting on that thread's wake-up made a
    client that closes one connection and opens the next a millisecond later look like two open at
    once on a busy machine (peak 5 against a limit of 4, test_shared_fair_share in CI).
    """

    def __init__(self) -> None:
        self.connections = 0
        self.open = 0
        self.peak_open = 0
        self._lock = threading.Lock()
        self._sockets: set[Any] = set()

    def opened(self, conn: Any) -> None:
        with self._lock:
            self.connections += 1
            self._sockets = {s for s in self._sockets if _held_open(s)}
            self._sockets.add(conn)
            self.open = len(self._sockets)
            self.peak_open = max(self.peak_open, self.open)

    def closed(self, conn: Any) -> None:
        with self._lock:
            self._sockets.discard(conn)
            self.open = len(self._sockets)

    def restart(self) -> None:
        """Count from now on: no connections yet, the peak what is open now."""
        with self._lock:
            self.connections = 0
            self._sockets = {s for s in self._sockets if _held_open(s)}
            self.open = self.peak_open = len(self._sockets)


def _held_open(conn: Any) -> bool:
    """Whether the client still holds ``conn`` open: Linux's POLLRDHUP tells that the client has
    closed its side even while its last request is still unread here."""
    try:
        poller = select.poll()
        poller.register(conn, select.POLLRDHUP)
        return not any(
            events & (select.POLLRDHUP | select.POLLHUP | select.POLLERR | select.POLLNVAL)
            for _, events in poller.poll(0)
        )
    except (OSError, ValueError):
        return False  # closed here already


class CountingListener:
    """A TCP listener on ``ELSEWHERE`` that counts every connection made to it.

    ``mode``:

    * ``"blackhole"``: accepts and never answers; a connection stays open until the client gives
      up (a broker that hangs, the worst a tenant can point a Kafka client at);
    * ``"huge-frame"``: answers the first request of each connection with a Kafka response whose
      size field says ``frame_bytes`` and streams that many bytes (a metadata answer of a hostile
      "broker"); ``bytes_sent`` tells how much the clients accepted before they hung up,
      ``most_sent`` the most one connection accepted;
    * ``"slow-proxy"``: forwards to ``upstream`` (``host:port``), each answer delayed by ``delay``
      seconds (a slow broker).

    ``mode`` may change while it runs (a broker that stops answering): new connections get the new one.

    ``connections`` counts accepted connections (``accepted``: when), ``peak_open`` the most open at once; listeners
    given one ``ConnectionTally`` also count together (``tally.peak_open``: the most open at once
    over all of them).
    """

    def __init__(
        self,
        mode: str = "blackhole",
        *,
        frame_bytes: int = 0,
        upstream: str = "",
        delay: float = 0.0,
        host: str = ELSEWHERE,
        tally: ConnectionTally | None = None,
    ) -> None:
        self.mode = mode
        self.frame_bytes = frame_bytes
        self.upstream = upstream
        self.delay = delay
        self.connections = 0
        self.accepted: list[float] = []  # time.monotonic() of each accepted connection
        self.open = 0
        self.peak_open = 0
        self.bytes_sent = 0
        self.most_sent = 0
        self.tally = tally if tally is not None else ConnectionTally()
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._sockets: list[Any] = []
        self._server = socket.socket()
        self._server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._server.bind((host, 0))
        self._server.listen(256)
        self.host = host
        self.port = int(self._server.getsockname()[1])
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            with self._lock:
                self.connections += 1
                self.accepted.append(time.monotonic())
                self.open += 1
                self.peak_open = max(self.peak_open, self.open)
                self._sockets.append(conn)
            self.tally.opened(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: Any) -> None:
        try:
            if self.mode == "huge-frame":
                self._huge_frame(conn)
            elif self.mode == "slow-proxy":
                self._proxy(conn)
            else:
                while not self._stopped.is_set() and conn.recv(65536):
                    pass
        except OSError:
            pass
        finally:
            with self._lock:
                self.open -= 1
            self.tally.closed(conn)
            with contextlib.suppress(OSError):
                conn.close()

    def _huge_frame(self, conn: Any) -> None:
        request = conn.recv(65536)
        if len(request) < 12:
            return
        # Response header: size, then the request's correlation id (request: size, api key,
        # api version, correlation id).
        conn.sendall(self.frame_bytes.to_bytes(4, "big") + request[8:12])
        total = 8
        chunk = bytes(1 << 16)
        left = self.frame_bytes - 4
        try:
            while left > 0 and not self._stopped.is_set():
                sent = conn.send(chunk[: min(left, len(chunk))])
                left -= sent
                total += sent
        finally:
            with self._lock:
                self.bytes_sent += total
                self.most_sent = max(self.most_sent, total)

    def _proxy(self, conn: Any) -> None:
        host, _, port = self.upstream.rpartition(":")
        with socket.create_connection((host, int(port)), timeout=30) as upstream:
            upstream.settimeout(None)

            def answers() -> None:
                with contextlib.suppress(OSError):
                    while data := upstream.recv(65536):
                        time.sleep(self.delay)
                        conn.sendall(data)
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_WR)

            threading.Thread(target=answers, daemon=True).start()
            while data := conn.recv(65536):
                upstream.sendall(data)

    def close(self) -> None:
        self._stopped.set()
        with contextlib.suppress(OSError):
            self._server.close()
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for conn in sockets:
            with contextlib.suppress(OSError):
                conn.close()

    def __enter__(self) -> CountingListener:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


class ConnectLike:
    """An HTTP(S) server on ``ELSEWHERE`` answering like a Connect worker, counting connections and
    keeping every request (method, path, headers, body).

    ``PUT .../config/validate`` answers one error per config entry that quotes the entry's value
    (what a careless plugin's validator may do): the operator must not repeat those values.
    """

    def __init__(self, ssl_context: Any = None, kafka_cluster_id: str = "k1") -> None:
        recorder = self
        self.requests: list[tuple[str, str, dict[str, str], bytes]] = []
        self.connections = 0
        self.kafka_cluster_id = kafka_cluster_id

        class Handler(BaseHTTPRequestHandler):
            def _record(self, method: str) -> bytes:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                recorder.requests.append((method, self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                return body

            def do_GET(self) -> None:
                self._record("GET")
                if self.path.startswith("/connector-plugins"):
                    self._send(200, [{"class": "org.example.Sink", "type": "sink", "version": "1"}])
                elif self.path == "/":
                    self._send(
                        200, {"version": "4.1.1", "commit": "c0ffee", "kafka_cluster_id": recorder.kafka_cluster_id}
                    )
                elif self.path.startswith("/connectors?"):
                    self._send(200, {})
                elif self.path == "/connectors":
                    self._send(200, [])
                else:
                    self._send(404, {"error_code": 404, "message": "not found"})

            def do_PUT(self) -> None:
                body = self._record("PUT")
                if self.path.endswith("/config/validate"):
                    config = json.loads(body or b"{}")
                    configs = [
                        {"value": {"name": key, "value": value, "errors": [f"{key}: the value {value} is refused"]}}
                        for key, value in sorted(config.items())
                    ]
                    self._send(200, {"name": "x", "error_count": len(configs), "groups": [], "configs": configs})
                else:
                    self._send(404, {"error_code": 404, "message": "not found"})

            def do_POST(self) -> None:
                self._record("POST")
                self._send(500, {"error_code": 500, "message": "not here"})

            def _send(self, status: int, payload: Any) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *_: Any) -> None:
                pass

        class Server(ThreadingHTTPServer):
            def get_request(self) -> Any:
                conn, address = super().get_request()
                recorder.connections += 1
                if ssl_context is not None:
                    conn = ssl_context.wrap_socket(conn, server_side=True)
                return conn, address

        self.server = Server((ELSEWHERE, 0), Handler)
        self.scheme = "https" if ssl_context is not None else "http"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    @property
    def url(self) -> str:
        return f"{self.scheme}://{ELSEWHERE}:{self.port}"

    def authorizations(self) -> list[str]:
        return [h["authorization"] for _, _, h, _ in self.requests if "authorization" in h]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> ConnectLike:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def hostile_mirrors(
    listeners: list[CountingListener], target: str, prefix: str, count: int, **source_connector: Any
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Clusters and mirrors of one KafkaMirrorMaker2 whose ``count`` sources are the listeners (in
    turn) and whose target is ``target``; aliases ``<prefix><i>`` keep each resource's connector
    names its own. The source connectors are STOPPED: they exist in Connect (so their lag is
    measured) and copy nothing."""
    clusters = [
        {"alias": f"{prefix}{i}", "bootstrapServers": listeners[i % len(listeners)].address} for i in range(count)
    ]
    clusters.append({"alias": "west", "bootstrapServers": target})
    mirrors = [
        {
            "sourceCluster": f"{prefix}{i}",
            "targetCluster": "west",
            "sourceConnector": {"state": "stopped", **source_connector},
        }
        for i in range(count)
    ]
    return clusters, mirrors
