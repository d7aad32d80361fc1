"""A counting reverse proxy in front of the kube-apiserver, for benchmarks only.

Why: the API server's own ``apiserver_request_total`` cannot tell one client from another, and
other engineers' tests use the same API server at the same time. Pointing only the operator at
this proxy (a kubeconfig of its own) counts exactly the operator's requests — kopf's watches and
patches as well as the operator's own client — by verb and resource, without changing the operator.

The proxy speaks plain HTTP to the operator and HTTPS to the API server, forwards the bearer token
unchanged and streams responses (watches stay open), so it adds well under a millisecond per call.
"""

from __future__ import annotations

import asyncio
import json
import re
import ssl
import threading
import time
from collections import Counter, deque
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

__all__ = ["KubeProxy", "request_kind"]

HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailers",
    "transfer-encoding",
    "upgrade",
    "content-length",
    "host",
}

_NAMESPACED = re.compile(
    r"^/(?:api/v1|apis/[^/]+/[^/]+)/namespaces/[^/]+/(?P<resource>[^/]+)(?P<rest>/[^/]+)?(?P<sub>/\w+)?"
)
_CLUSTER = re.compile(r"^/(?:api/v1|apis/[^/]+/[^/]+)/(?P<resource>[^/]+)(?P<rest>/[^/]+)?")


def request_kind(method: str, path: str, query: str) -> str:
    """``verb resource[/subresource]`` as the API server's audit log names it, e.g. ``get kafkaconnectors``."""
    found = _NAMESPACED.match(path) or _CLUSTER.match(path)
    if found is None:
        return f"{method.lower()} {path}"
    resource = found.group("resource")
    named = found.group("rest") is not None
    sub = found.groupdict().get("sub")
    if sub:
        resource += sub
    if method == "GET":
        verb = "watch" if "watch=true" in query or "watch=1" in query else ("get" if named else "list")
    else:
        verb = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(method, method.lower())
    return f"{verb} {resource}"


class KubeProxy:
    """Start with :meth:`start` (a thread with its own event loop); read :attr:`counts` at any time."""

    def __init__(self, upstream: str, token: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.token = token
        self.counts: Counter[str] = Counter()
        # When each request arrived (monotonic clock) and its kind: the last few thousand, to show
        # where a single operation's time goes.
        self.timeline: deque[tuple[float, str]] = deque(maxlen=4096)
        self.port = 0
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._ready = threading.Event()
        self._paused = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kube-proxy", daemon=True)

    @classmethod
    def for_kubeconfig(cls, kubeconfig: str) -> KubeProxy:
        config = json.loads(Path(kubeconfig).read_text())
        return cls(config["clusters"][0]["cluster"]["server"], config["users"][0]["user"]["token"])

    def write_kubeconfig(self, path: Path) -> Path:
        """A kubeconfig that sends the holder through this proxy with the same token."""
        path.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "proxy", "cluster": {"server": f"http://127.0.0.1:{self.port}"}}],
                    "users": [{"name": "admin", "user": {"token": self.token}}],
                    "contexts": [{"name": "proxy", "context": {"cluster": "proxy", "user": "admin"}}],
                    "current-context": "proxy",
                }
            )
        )
        path.chmod(0o600)
        return path

    def pause(self) -> None:
        """The API server stops answering this client: requests and watch events wait here
        (tests/integration/test_replicas.py: a replica cut off from the API server)."""
        self._paused.set()

    def resume(self) -> None:
        self._paused.clear()

    async def _while_paused(self) -> None:
        while self._paused.is_set():
            await asyncio.sleep(0.05)

    def snapshot(self) -> Counter[str]:
        with self._lock:
            return Counter(self.counts)

    def start(self) -> None:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the counting proxy did not start within 10 s")

    def stop(self) -> None:
        if self._loop is not None and self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(30)
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def _run(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._loop.run_until_complete(self._serve())
        self._ready.set()
        self._loop.run_forever()

    async def _serve(self) -> None:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE  # the local stack's self-signed API server, as in its kubeconfig
        session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=context, limit=0),
            auto_decompress=False,
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
        )

        async def handle(request: web.Request) -> web.StreamResponse:
            kind = request_kind(request.method, request.path, request.query_string)
            with self._lock:
                self.counts[kind] += 1
                self.timeline.append((time.monotonic(), kind))
            headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
            body = await request.read()
            await self._while_paused()
            # The kubernetes client sends POST bodies without a Content-Type (the API server reads
            # them as JSON); aiohttp would add application/octet-stream, which it refuses (415).
            skip = () if "Content-Type" in request.headers else ("Content-Type",)
            async with session.request(
                request.method,
                self.upstream + request.path_qs,
                headers=headers,
                data=body or None,
                skip_auto_headers=skip,
            ) as upstream:
                response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
                for key, value in upstream.headers.items():
                    if key.lower() not in HOP_BY_HOP:
                        response.headers[key] = value
                await response.prepare(request)
                try:
                    async for chunk in upstream.content.iter_any():
                        await self._while_paused()
                        await response.write(chunk)
                    await response.write_eof()
                except (ConnectionResetError, aiohttp.ClientError):
                    pass  # the operator closed a watch, or the API server ended it
                return response

        async def close_session(_: Any) -> None:
            await session.close()

        app = web.Application(client_max_size=64 * 2**20)
        app.router.add_route("*", "/{tail:.*}", handle)
        app.on_cleanup.append(close_session)
        # Watches stay open until the operator goes away: don't wait the default 60 s for them on stop.
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=2.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
