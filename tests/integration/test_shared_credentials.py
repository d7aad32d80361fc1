"""Credentials go only where their owner meant them to go (issue 18, point 5; point 7's binary Secret).

The operator runs as a platform team installs it (``chart_operator``: the chart's ServiceAccount
token, RBAC, env and values). A tenant points ConnectClusters at small HTTP servers this test starts
on 127.0.0.1; each server records every request it receives (method, path, headers), so "nothing was
sent" is checked where it matters: at the receiving end.

* A Secret without ``connect-offsets.io/credentials=true`` is never sent (``SecretNotOptedIn``); once
  its owner adds the label, the next drift pass uses it.
* With the chart's ``credentials.allowPlaintext=false`` (its default), a labelled Secret is not sent
  to an ``http://`` URL (``PlaintextCredentials``), nor a MirrorMaker 2 ``secretConfig`` to a
  PLAINTEXT Kafka; an http URL without credentials still works.
* A host outside the chart's ``allowedHosts`` gets ``HostNotAllowed`` and not a single request.
* ``spec.url`` with ``user:password@`` is refused and the password is never echoed.
* A Strimzi-style Secret with a binary ``user.p12`` and a text key the cluster uses works.
* Text the URL sends back (an error body echoing the token, 20 KB long) reaches status capped and
  redacted.
* No Secret value appears in the operator's log, in any status or in any Event.
"""

from __future__ import annotations

import base64
import json
import secrets
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from tests.conftest import wait_for
from tests.integration.chart_install import chart_operator, tenant_namespaces
from tests.integration.support import GROUP, VERSION, condition, create_cluster, create_connector, wait_condition

LABEL = {"connect-offsets.io/credentials": "true"}


@dataclass
class Recorder:
    """An HTTP server on 127.0.0.1 that answers like a Connect worker and records what it got."""

    #: Answer every request with a 500 whose body echoes the Authorization header, 20 KB long.
    echo: bool = False
    requests: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    @property
    def port(self) -> int:
        assert self.server is not None
        return int(self.server.server_address[1])

    def authorizations(self) -> list[str]:
        return [h["authorization"] for _, _, h in self.requests if "authorization" in h]

    def start(self) -> None:
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                headers = {k.lower(): v for k, v in self.headers.items()}
                recorder.requests.append(("GET", self.path, headers))
                if recorder.echo:
                    body = json.dumps(
                        {"error_code": 500, "message": f"you sent {headers.get('authorization')} " + "x" * 20_000}
                    )
                    self._send(500, body)
                elif self.path.startswith("/connector-plugins"):
                    self._send(200, json.dumps([{"class": "org.example.Sink", "type": "sink", "version": "1"}]))
                elif self.path == "/":
                    self._send(200, json.dumps({"version": "4.1.1", "commit": "c0ffee", "kafka_cluster_id": "k1"}))
                else:
                    self._send(404, json.dumps({"error_code": 404, "message": "not found"}))

            def _send(self, status: int, body: str) -> None:
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


@pytest.fixture
def servers() -> Iterator[dict[str, Recorder]]:
    made = {"plain": Recorder(), "echo": Recorder(echo=True), "outside": Recorder()}
    for recorder in made.values():
        recorder.start()
    yield made
    for recorder in made.values():
        recorder.stop()


def cluster_body(custom: Any, namespace: str, name: str) -> dict[str, Any]:
    result: dict[str, Any] = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, "connectclusters", name)
    return result


def wait_cluster(
    custom: Any, namespace: str, name: str, status: str, reason: str, timeout: float = 60
) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        ready = condition(cluster_body(custom, namespace, name), "Ready")
        return ready if ready and ready["status"] == status and ready["reason"] == reason else None

    return wait_for(f"ConnectCluster {namespace}/{name} Ready={status} ({reason})", check, timeout)


def secret(core: Any, namespace: str, name: str, labels: dict[str, str] | None = None, **data: bytes) -> None:
    core.create_namespaced_secret(
        namespace,
        {
            "metadata": {"name": name, "labels": labels or {}},
            "data": {k.replace("_", "."): base64.b64encode(v).decode() for k, v in data.items()},
        },
    )


def bearer(secret_name: str) -> dict[str, Any]:
    return {"authentication": {"type": "bearer", "secretName": secret_name}}


def create_mirror(custom: Any, namespace: str, name: str, cluster: str, clusters: list[dict[str, Any]]) -> None:
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "KafkaMirrorMaker2",
        "metadata": {"name": name, "namespace": namespace, "labels": {f"{GROUP}/cluster": cluster}},
        "spec": {
            "clusters": clusters,
            "mirrors": [{"sourceCluster": "east", "targetCluster": "west", "sourceConnector": {}}],
        },
    }
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "kafkamirrormaker2s", body)


def mirror_ready(custom: Any, namespace: str, name: str, reason: str) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        body = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, "kafkamirrormaker2s", name)
        ready = condition(body, "Ready")
        return ready if ready and ready["status"] == "False" and ready["reason"] == reason else None

    return wait_for(f"KafkaMirrorMaker2 {namespace}/{name} Ready=False ({reason})", check, 60)


def everything_written(custom: Any, core: Any, namespaces: list[str], log: str) -> list[str]:
    """The operator's log, every status and every Event it wrote in these namespaces."""
    texts = [log]
    for ns in namespaces:
        for plural in ("connectclusters", "kafkaconnectors", "kafkamirrormaker2s"):
            items = custom.list_namespaced_custom_object(GROUP, VERSION, ns, plural)["items"]
            texts += [json.dumps(item.get("status") or {}) for item in items]
        texts += [f"{e.reason} {e.message}" for e in core.list_namespaced_event(ns).items]
    return texts


@pytest.mark.local_stack
def test_credentials_go_only_where_their_owner_meant(
    custom: Any,
    core: Any,
    namespace: str,
    stack: dict[str, Any],
    tmp_path: Path,
    servers: dict[str, Recorder],
) -> None:
    plain, echo, outside = servers["plain"], servers["echo"], servers["outside"]
    values = [
        # The platform allows only the two servers it knows; "outside" is another port on the same host.
        f"allowedHosts={{127.0.0.1:{plain.port},127.0.0.1:{echo.port}}}",
    ]
    token, binary_token, echo_token, url_password = (secrets.token_hex(16) for _ in range(4))
    with (
        tenant_namespaces(core, custom, namespace, 1) as (tenant,),
        chart_operator(stack, core, custom, tmp_path, [tenant], values=values) as op,
    ):
        assert op.chart_env["CONNECT_OFFSETS_ALLOW_PLAINTEXT_CREDENTIALS"] == "true"  # the stack has no TLS
        assert op.chart_env["CONNECT_OFFSETS_ALLOWED_HOSTS"] == f"127.0.0.1:{plain.port},127.0.0.1:{echo.port}"

        # 1. A Secret that did not opt in is not sent; with the label, the next drift pass uses it.
        secret(core, tenant, "not-for-you", token=token.encode())
        create_cluster(custom, tenant, plain.url, name="grab", **bearer("not-for-you"))
        ready = wait_cluster(custom, tenant, "grab", "False", "SecretNotOptedIn")
        assert "not-for-you" in ready["message"] and "connect-offsets.io/credentials=true" in ready["message"]
        assert plain.requests == []  # refused before any connection, let alone an Authorization header
        # The tenant's connectors on that cluster say why, too.
        create_connector(custom, tenant, "sink", {"class": "org.example.Sink", "config": {}}, cluster="grab")
        ready = wait_condition(custom, tenant, "sink", "Ready", "False", reason="SecretNotOptedIn")
        assert "not-for-you" in ready["message"]
        custom.delete_namespaced_custom_object(GROUP, VERSION, tenant, "kafkaconnectors", "sink")
        wait_for(
            "connector deleted",
            lambda: not custom.list_namespaced_custom_object(GROUP, VERSION, tenant, "kafkaconnectors")["items"],
        )
        assert plain.requests == []
        core.patch_namespaced_secret("not-for-you", tenant, {"metadata": {"labels": LABEL}})
        wait_cluster(custom, tenant, "grab", "True", "Reachable")
        assert plain.authorizations() and set(plain.authorizations()) == {f"Bearer {token}"}

        # 2. A host outside the allow-list: a condition, and not one request.
        secret(core, tenant, "ok-creds", LABEL, token=token.encode())
        create_cluster(custom, tenant, outside.url, name="elsewhere", **bearer("ok-creds"))
        ready = wait_cluster(custom, tenant, "elsewhere", "False", "HostNotAllowed")
        assert f"127.0.0.1:{outside.port}" in ready["message"]
        create_cluster(custom, tenant, outside.url, name="elsewhere-anonymous")
        wait_cluster(custom, tenant, "elsewhere-anonymous", "False", "HostNotAllowed")

        # 3. User info in spec.url: refused (by the CRD schema, or by the operator if an older CRD
        # let it in), and never echoed.
        with_userinfo = plain.url.replace("http://", f"http://admin:{url_password}@")
        try:
            create_cluster(custom, tenant, with_userinfo, name="userinfo")
        except ApiException as rejected:
            assert rejected.status == 422 and "spec.url" in str(rejected.body)
        else:
            ready = wait_cluster(custom, tenant, "userinfo", "False", "InvalidSpec")
            assert "user info" in ready["message"]
        # httpx would have turned the user info into a basic Authorization header: none arrived.
        assert set(plain.authorizations()) == {f"Bearer {token}"}

        # 4. A Strimzi KafkaUser-like Secret: binary user.p12 next to the text key the cluster uses.
        p12 = bytes(range(256)) * 4  # not UTF-8
        secret(core, tenant, "kafka-user", LABEL, user_p12=p12, token=binary_token.encode())
        create_cluster(custom, tenant, plain.url, name="strimzi", **bearer("kafka-user"))
        wait_cluster(custom, tenant, "strimzi", "True", "Reachable")
        assert f"Bearer {binary_token}" in plain.authorizations()
        # ... and a key that is used but binary gets a clear condition, not a crash.
        create_cluster(
            custom,
            tenant,
            plain.url,
            name="binary-key",
            authentication={"type": "bearer", "secretName": "kafka-user", "tokenKey": "user.p12"},
        )
        ready = wait_cluster(custom, tenant, "binary-key", "False", "SecretKeyNotText")
        assert "user.p12" in ready["message"]

        # 5. What the URL answers is capped and redacted, whatever it echoes.
        secret(core, tenant, "echo-creds", LABEL, token=echo_token.encode())
        create_cluster(custom, tenant, echo.url, name="echo", **bearer("echo-creds"))
        ready = wait_cluster(custom, tenant, "echo", "False", "Unreachable")
        assert f"Bearer {echo_token}" in echo.authorizations()  # it was sent (allowed host, opted in)
        assert "you sent Bearer ***" in ready["message"]
        assert len(ready["message"].encode()) <= 1024 + 200  # Connect's text capped at 1 KiB, plus "GET /: 500"

        # 6. MirrorMaker 2 secretConfig: the same opt-in.
        secret(core, tenant, "east-jaas", None, jaas=b"org.apache.kafka.common.security.scram.ScramLoginModule x;")
        create_mirror(
            custom,
            tenant,
            "mm2",
            "strimzi",
            [
                {
                    "alias": "east",
                    "bootstrapServers": f"127.0.0.1:{plain.port}",
                    "config": {"security.protocol": "SASL_SSL"},
                    "secretConfig": {"sasl.jaas.config": {"name": "east-jaas", "key": "jaas"}},
                },
                {"alias": "west", "bootstrapServers": f"127.0.0.1:{echo.port}"},
            ],
        )
        ready = mirror_ready(custom, tenant, "mm2", "SecretNotOptedIn")
        assert "east-jaas" in ready["message"]

        texts = everything_written(custom, core, [tenant], op.operator.log())
        for value in (token, binary_token, echo_token, url_password, base64.b64encode(p12[:60]).decode()):
            for text in texts:
                assert value not in text


@pytest.mark.local_stack
def test_no_credentials_over_plain_http_unless_the_platform_allows_it(
    custom: Any,
    core: Any,
    namespace: str,
    stack: dict[str, Any],
    tmp_path: Path,
    servers: dict[str, Recorder],
) -> None:
    plain = servers["plain"]
    token = secrets.token_hex(16)
    with (
        tenant_namespaces(core, custom, namespace, 1) as (tenant,),
        chart_operator(stack, core, custom, tmp_path, [tenant], values=["credentials.allowPlaintext=false"]) as op,
    ):
        assert op.chart_env["CONNECT_OFFSETS_ALLOW_PLAINTEXT_CREDENTIALS"] == "false"
        secret(core, tenant, "labelled", LABEL, token=token.encode())
        create_cluster(custom, tenant, plain.url, name="plain-http", **bearer("labelled"))
        ready = wait_cluster(custom, tenant, "plain-http", "False", "PlaintextCredentials")
        assert "https" in ready["message"]
        # Without credentials, plain http is fine (nothing secret travels).
        create_cluster(custom, tenant, plain.url, name="anonymous")
        wait_cluster(custom, tenant, "anonymous", "True", "Reachable")
        assert plain.authorizations() == []

        # MirrorMaker 2: a labelled secretConfig over a PLAINTEXT Kafka is refused too.
        secret(core, tenant, "east-jaas", LABEL, jaas=b"org.apache.kafka.common.security.plain.PlainLoginModule y;")
        create_mirror(
            custom,
            tenant,
            "mm2",
            "anonymous",
            [
                {
                    "alias": "east",
                    "bootstrapServers": "127.0.0.1:9",
                    "secretConfig": {"sasl.jaas.config": {"name": "east-jaas", "key": "jaas"}},
                },
                {"alias": "west", "bootstrapServers": "127.0.0.1:9"},
            ],
        )
        ready = mirror_ready(custom, tenant, "mm2", "PlaintextCredentials")
        assert "clusters[east]" in ready["message"] and "SSL" in ready["message"]
        # Nothing about the mirror's connectors reached the worker; only the ConnectCluster's own
        # snapshot (``GET /connectors?expand=...``, which holds no credentials) did.
        assert [
            p for _, p, _ in plain.requests if p.startswith("/connectors") and not p.startswith("/connectors?")
        ] == []

        for text in everything_written(custom, core, [tenant], op.operator.log()):
            assert token not in text
            assert "PlainLoginModule y" not in text
