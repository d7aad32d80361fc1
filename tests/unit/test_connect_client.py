"""Unit tests for connect_offsets.clients.connect, against httpx.MockTransport only (no network)."""

from __future__ import annotations

import base64
import json
import logging
import os
import shutil
import ssl
import stat
import subprocess
import tempfile
import zlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import certifi
import httpx
import pytest

from connect_offsets.clients import connect as connect_mod
from connect_offsets.clients.connect import (
    ConnectAuth,
    ConnectBadRequest,
    ConnectClient,
    ConnectConflict,
    ConnectEndpoint,
    ConnectError,
    ConnectHTTPError,
    ConnectNotFound,
    ConnectorStatus,
    ConnectResponseTooLarge,
    ConnectServerError,
    ConnectUnavailable,
    build_ssl_context,
    parse_version,
    supports_initial_state,
)
from connect_offsets.clients.limits import MAX_SMALL_RESPONSE_BYTES

pytestmark = pytest.mark.unit

URL = "http://connect:8083"
MM2 = "east->west.MirrorSourceConnector"
PASSWORD = "s3cr3t-P4ssw0rd-xyz"
TOKEN = "eyJhbGciOiJIUzI1NiJ9.tok3n-value.sig"

Handler = Callable[[httpx.Request], httpx.Response]


class Recorder:
    """A MockTransport handler that records requests and answers with canned responses."""

    def __init__(self, *responses: httpx.Response | Exception) -> None:
        self.responses = list(responses)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.responses.pop(0) if len(self.responses) > 1 else self.responses[0]
        if isinstance(answer, Exception):
            raise answer
        return answer

    @property
    def last(self) -> httpx.Request:
        return self.requests[-1]


def client_for(handler: Handler, *, url: str = URL, auth: ConnectAuth | None = None) -> ConnectClient:
    return ConnectClient(ConnectEndpoint(url=url, auth=auth), transport=httpx.MockTransport(handler))


def body_of(request: httpx.Request) -> Any:
    return json.loads(request.content)


STATUS_JSON: dict[str, Any] = {
    "name": MM2,
    "connector": {"state": "RUNNING", "worker_id": "10.0.0.1:8083"},
    "tasks": [
        {"id": 0, "state": "RUNNING", "worker_id": "10.0.0.1:8083"},
        {"id": 1, "state": "FAILED", "worker_id": "10.0.0.2:8083", "trace": "boom\n\tat X"},
        {"id": 2, "state": "FAILED", "worker_id": "10.0.0.2:8083", "trace": "boom"},
    ],
    "type": "source",
    "some_future_field": {"x": 1},
}


# --------------------------------------------------------------------------------------------------
# Successful calls: methods, paths, bodies, parsing
# --------------------------------------------------------------------------------------------------


async def test_server_info_ignores_unknown_fields() -> None:
    rec = Recorder(httpx.Response(200, json={"version": "3.9.0", "commit": "abc", "kafka_cluster_id": "K1", "new": 1}))
    async with client_for(rec) as c:
        info = await c.server_info()
    assert (info.version, info.commit, info.kafka_cluster_id) == ("3.9.0", "abc", "K1")
    assert rec.last.method == "GET"
    assert rec.last.url.raw_path == b"/"
    assert rec.last.headers["accept"] == "application/json"


async def test_connector_plugins_asks_for_connectors_only() -> None:
    rec = Recorder(
        httpx.Response(
            200,
            json=[
                {"class": "org.apache.kafka.connect.mirror.MirrorSourceConnector", "type": "source"},
                {"class": "org.apache.kafka.connect.file.FileStreamSinkConnector", "type": "sink"},
            ],
        )
    )
    async with client_for(rec) as c:
        plugins = await c.connector_plugins()
    assert plugins == [
        "org.apache.kafka.connect.mirror.MirrorSourceConnector",
        "org.apache.kafka.connect.file.FileStreamSinkConnector",
    ]
    assert rec.last.url.path == "/connector-plugins"
    assert dict(rec.last.url.params) == {"connectorsOnly": "true"}


async def test_list_connectors() -> None:
    rec = Recorder(httpx.Response(200, json=["a", MM2]))
    async with client_for(rec) as c:
        assert await c.list_connectors() == ["a", MM2]
    assert (rec.last.method, rec.last.url.raw_path) == ("GET", b"/connectors")


async def test_connector_name_is_quoted_in_path() -> None:
    rec = Recorder(httpx.Response(200, json=STATUS_JSON), httpx.Response(200, json={}))
    async with client_for(rec) as c:
        await c.get_connector_status(MM2)
        await c.get_connector_config("with/slash and space")
    assert rec.requests[0].url.raw_path == b"/connectors/east-%3Ewest.MirrorSourceConnector/status"
    assert rec.requests[1].url.raw_path == b"/connectors/with%2Fslash%20and%20space/config"


async def test_base_url_path_prefix_is_kept() -> None:
    rec = Recorder(httpx.Response(200, json=[]))
    async with client_for(rec, url="https://gw.example/kafka/connect/") as c:
        await c.list_connectors()
    assert str(rec.last.url) == "https://gw.example/kafka/connect/connectors"


async def test_empty_connector_name_is_rejected() -> None:
    async with client_for(Recorder(httpx.Response(200, json={}))) as c:
        with pytest.raises(ValueError):
            await c.get_connector_config("")


async def test_get_connector_config_and_404_is_none() -> None:
    rec = Recorder(
        httpx.Response(200, json={"connector.class": "X", "tasks.max": "1"}),
        httpx.Response(404, json={"error_code": 404, "message": "Connector nope not found"}),
    )
    async with client_for(rec) as c:
        assert await c.get_connector_config("a") == {"connector.class": "X", "tasks.max": "1"}
        assert await c.get_connector_config("nope") is None
    assert rec.requests[1].url.raw_path == b"/connectors/nope/config"


async def test_get_connector_status_parses_and_404_is_none() -> None:
    rec = Recorder(
        httpx.Response(200, json=STATUS_JSON),
        httpx.Response(404, json={"error_code": 404, "message": "No status found for connector nope"}),
    )
    async with client_for(rec) as c:
        status = await c.get_connector_status(MM2)
        missing = await c.get_connector_status("nope")
    assert missing is None
    assert status is not None
    assert status.name == MM2
    assert status.type == "source"
    assert status.tasks[1].trace == "boom\n\tat X"


@pytest.mark.parametrize("initial_state", [None, "STOPPED"])
async def test_create_connector_initial_state_only_when_given(initial_state: str | None) -> None:
    rec = Recorder(httpx.Response(201, json={"name": "a", "config": {}, "tasks": []}))
    config = {"connector.class": "X", "tasks.max": "1"}
    async with client_for(rec) as c:
        await c.create_connector("a", config, initial_state=initial_state)
    assert (rec.last.method, rec.last.url.raw_path) == ("POST", b"/connectors")
    assert rec.last.headers["content-type"] == "application/json"
    expected: dict[str, Any] = {"name": "a", "config": config}
    if initial_state is not None:
        expected["initial_state"] = initial_state
    assert body_of(rec.last) == expected
    assert ("initial_state" in body_of(rec.last)) is (initial_state is not None)


async def test_put_config_and_delete() -> None:
    rec = Recorder(
        httpx.Response(200, json={"name": MM2, "config": {}, "tasks": []}),
        httpx.Response(204),
        httpx.Response(404, json={"error_code": 404, "message": "Connector gone not found"}),
    )
    async with client_for(rec) as c:
        await c.put_connector_config(MM2, {"tasks.max": "2"})
        assert await c.delete_connector(MM2) is True
        assert await c.delete_connector("gone") is False
    put, delete, delete_missing = rec.requests
    assert (put.method, put.url.raw_path) == ("PUT", b"/connectors/east-%3Ewest.MirrorSourceConnector/config")
    assert body_of(put) == {"tasks.max": "2"}
    assert (delete.method, delete.url.raw_path) == (
        "DELETE",
        b"/connectors/east-%3Ewest.MirrorSourceConnector",
    )
    assert delete_missing.url.raw_path == b"/connectors/gone"


async def test_stop_pause_resume() -> None:
    rec = Recorder(httpx.Response(204), httpx.Response(202), httpx.Response(202))
    async with client_for(rec) as c:
        await c.stop_connector("a")
        await c.pause_connector("a")
        await c.resume_connector("a")
    assert [(r.method, r.url.raw_path) for r in rec.requests] == [
        ("PUT", b"/connectors/a/stop"),
        ("PUT", b"/connectors/a/pause"),
        ("PUT", b"/connectors/a/resume"),
    ]


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({}, {"includeTasks": "false", "onlyFailed": "false"}),
        ({"include_tasks": True}, {"includeTasks": "true", "onlyFailed": "false"}),
        ({"include_tasks": True, "only_failed": True}, {"includeTasks": "true", "onlyFailed": "true"}),
    ],
)
async def test_restart_connector_query_params(kwargs: dict[str, bool], expected: dict[str, str]) -> None:
    rec = Recorder(httpx.Response(202, json=STATUS_JSON))
    async with client_for(rec) as c:
        await c.restart_connector(MM2, **kwargs)
    assert rec.last.method == "POST"
    assert rec.last.url.raw_path.split(b"?")[0] == b"/connectors/east-%3Ewest.MirrorSourceConnector/restart"
    assert dict(rec.last.url.params) == expected


async def test_restart_task() -> None:
    rec = Recorder(httpx.Response(204))
    async with client_for(rec) as c:
        await c.restart_task(MM2, 3)
    assert rec.last.method == "POST"
    assert rec.last.url.raw_path == b"/connectors/east-%3Ewest.MirrorSourceConnector/tasks/3/restart"


async def test_get_connector_topics() -> None:
    rec = Recorder(httpx.Response(200, json={MM2: {"topics": ["t1", "t2"]}}))
    async with client_for(rec) as c:
        assert await c.get_connector_topics(MM2) == ["t1", "t2"]
    assert rec.last.url.raw_path == b"/connectors/east-%3Ewest.MirrorSourceConnector/topics"


async def test_get_offsets_returns_connect_document_untouched() -> None:
    raw = (
        b'{"offsets":[{"partition":{"cluster":"east","topic":"t","partition":0},'
        b'"offset":{"offset":18446744073709551615}}]}'
    )
    rec = Recorder(httpx.Response(200, content=raw, headers={"content-type": "application/json"}))
    async with client_for(rec) as c:
        doc = await c.get_offsets(MM2)
        got_raw = await c.get_offsets_raw(MM2)
    assert doc == json.loads(raw)
    assert doc["offsets"][0]["offset"]["offset"] == 18446744073709551615
    assert got_raw == raw
    assert all(r.url.raw_path == b"/connectors/east-%3Ewest.MirrorSourceConnector/offsets" for r in rec.requests)


async def test_alter_and_reset_offsets_return_message() -> None:
    altered = "The offsets for this connector have been altered successfully"
    reset = "The offsets for this connector have been reset successfully"
    rec = Recorder(httpx.Response(200, json={"message": altered}), httpx.Response(200, json={"message": reset}))
    document = {"offsets": [{"partition": {"kafka_topic": "t", "kafka_partition": 0}, "offset": {"kafka_offset": 5}}]}
    async with client_for(rec) as c:
        assert await c.alter_offsets("sink", document) == altered
        assert await c.reset_offsets("sink") == reset
    patch, delete = rec.requests
    assert (patch.method, patch.url.raw_path) == ("PATCH", b"/connectors/sink/offsets")
    assert body_of(patch) == document
    assert (delete.method, delete.url.raw_path) == ("DELETE", b"/connectors/sink/offsets")


# --------------------------------------------------------------------------------------------------
# Error mapping
# --------------------------------------------------------------------------------------------------


async def test_404_raises_not_found_where_not_tolerated() -> None:
    rec = Recorder(httpx.Response(404, json={"error_code": 404, "message": "Connector x not found"}))
    async with client_for(rec) as c:
        with pytest.raises(ConnectNotFound) as info:
            await c.get_connector_topics("x")
    err = info.value
    assert isinstance(err, ConnectHTTPError)
    assert (err.status_code, err.error_code, err.method, err.path) == (
        404,
        404,
        "GET",
        "/connectors/x/topics",
    )
    assert err.message == "Connector x not found"
    assert str(err) == "GET /connectors/x/topics: 404 Connector x not found"
    assert err.retryable is False


async def test_400_keeps_connect_message_verbatim() -> None:
    message = (
        "Connectors must be in the STOPPED state before their offsets can be modified. This can be done "
        "for the specified connector by issuing a 'PUT' request to the '/connectors/x/stop' endpoint"
    )
    rec = Recorder(httpx.Response(400, json={"error_code": 400, "message": message}))
    async with client_for(rec) as c:
        with pytest.raises(ConnectBadRequest) as info:
            await c.alter_offsets("x", {"offsets": []})
    err = info.value
    assert err.message == message
    assert err.error_code == 400
    assert str(err) == f"PATCH /connectors/x/offsets: 400 {message}"
    assert err.retryable is True and err.not_stopped  # someone resumed it: a fresh pass plans again


async def test_409_conflict_on_create_is_retryable_and_flags_already_exists() -> None:
    rec = Recorder(
        httpx.Response(409, json={"error_code": 409, "message": "Connector a already exists"}),
        httpx.Response(
            409,
            json={
                "error_code": 409,
                "message": "Cannot complete request momentarily due to "
                "stale configuration (typically caused by a concurrent config change)",
            },
        ),
    )
    async with client_for(rec) as c:
        with pytest.raises(ConnectConflict) as exists:
            await c.create_connector("a", {"connector.class": "X"})
        with pytest.raises(ConnectConflict) as stale:
            await c.put_connector_config("a", {"connector.class": "X"})
    assert exists.value.retryable is True
    assert exists.value.already_exists is True
    assert str(exists.value) == "POST /connectors: 409 Connector a already exists"
    assert stale.value.already_exists is False


async def test_500_request_timed_out_flag() -> None:
    timed_out = "Request timed out. The worker is currently waiting for the herder to complete"
    rec = Recorder(
        httpx.Response(500, json={"error_code": 500, "message": timed_out}),
        httpx.Response(500, json={"error_code": 500, "message": "Failed to perform operation"}),
    )
    async with client_for(rec) as c:
        with pytest.raises(ConnectServerError) as first:
            await c.stop_connector("a")
        with pytest.raises(ConnectServerError) as second:
            await c.stop_connector("a")
    assert first.value.is_request_timeout is True
    assert first.value.retryable is True
    assert first.value.status_code == 500
    assert str(first.value) == f"PUT /connectors/a/stop: 500 {timed_out}"
    assert second.value.is_request_timeout is False
    assert second.value.retryable is True


async def test_non_json_error_body_uses_truncated_text() -> None:
    html = "<html><body>" + "x" * 2000 + "</body></html>"
    rec = Recorder(httpx.Response(502, text=html), httpx.Response(503, content=b""))
    async with client_for(rec) as c:
        with pytest.raises(ConnectServerError) as bad_gateway:
            await c.list_connectors()
        with pytest.raises(ConnectServerError) as empty:
            await c.list_connectors()
    assert bad_gateway.value.message == html[:512]
    assert bad_gateway.value.error_code is None
    assert bad_gateway.value.status_code == 502
    assert empty.value.message == "Service Unavailable"


async def test_json_error_body_without_message_uses_text() -> None:
    rec = Recorder(httpx.Response(400, json={"errors": ["nope"]}))
    async with client_for(rec) as c:
        with pytest.raises(ConnectBadRequest) as info:
            await c.list_connectors()
    assert info.value.message == '{"errors":["nope"]}'


@pytest.mark.parametrize(
    ("status", "retryable"),
    [(400, False), (401, False), (403, False), (405, False), (422, False), (429, True)],
)
async def test_other_4xx_are_bad_request(status: int, retryable: bool) -> None:
    rec = Recorder(httpx.Response(status, json={"error_code": status, "message": f"m{status}"}))
    async with client_for(rec) as c:
        with pytest.raises(ConnectBadRequest) as info:
            await c.create_connector("a", {})
    assert info.value.status_code == status
    assert info.value.message == f"m{status}"
    assert info.value.retryable is retryable


async def test_connection_refused_is_unavailable_and_chained() -> None:
    cause = httpx.ConnectError("[Errno 111] Connection refused")
    async with client_for(Recorder(cause)) as c:
        with pytest.raises(ConnectUnavailable) as info:
            await c.get_connector_status("a")
    err = info.value
    assert err.__cause__ is cause
    assert err.retryable is True
    assert not isinstance(err, ConnectHTTPError)
    assert (err.method, err.path) == ("GET", "/connectors/a/status")
    assert str(err) == "GET /connectors/a/status: ConnectError: [Errno 111] Connection refused"


async def test_a_refused_client_certificate_is_unavailable_and_says_what_to_check() -> None:
    """TLS 1.3: the worker's alert arrives on the first read, as a bare ssl.SSLError httpx does not wrap."""
    cause = ssl.SSLError(1, "[SSL: SSLV3_ALERT_BAD_CERTIFICATE] sslv3 alert bad certificate (_ssl.c:2580)")
    async with client_for(Recorder(cause)) as c:
        with pytest.raises(ConnectUnavailable) as info:
            await c.get_connector_status("a")
        with pytest.raises(ConnectUnavailable) as offsets:
            await c.get_offsets_raw("a")
    assert info.value.__cause__ is cause and offsets.value.__cause__ is cause
    assert "ALERT_BAD_CERTIFICATE" in str(info.value)
    assert str(info.value).endswith("check spec.tls.clientCertificate)")


@pytest.mark.parametrize("cause", [httpx.ReadTimeout("timed out"), httpx.ConnectTimeout(""), httpx.PoolTimeout("pool")])
async def test_timeouts_are_unavailable(cause: httpx.TimeoutException) -> None:
    async with client_for(Recorder(cause)) as c:
        with pytest.raises(ConnectUnavailable) as info:
            await c.reset_offsets("a")
    assert info.value.__cause__ is cause
    assert info.value.retryable is True
    assert str(info.value).startswith(f"DELETE /connectors/a/offsets: {type(cause).__name__}")


async def test_success_with_invalid_json_is_plain_connect_error() -> None:
    rec = Recorder(httpx.Response(200, text="not json"))
    async with client_for(rec) as c:
        with pytest.raises(ConnectError) as info:
            await c.list_connectors()
    assert type(info.value) is ConnectError
    assert info.value.retryable is False


async def test_success_with_wrong_shape_does_not_echo_body() -> None:
    rec = Recorder(httpx.Response(200, json={"database.password": 12345678}))
    async with client_for(rec) as c:
        with pytest.raises(ConnectError) as info:
            await c.get_connector_config("a")
    assert type(info.value) is ConnectError
    assert "12345678" not in str(info.value)
    assert "database.password" in str(info.value)
    assert info.value.__cause__ is None


# --------------------------------------------------------------------------------------------------
# Credentials never leak
# --------------------------------------------------------------------------------------------------


def _assert_absent(secret: str, *objects: object) -> None:
    for obj in objects:
        assert secret not in str(obj), obj
        assert secret not in repr(obj), obj


async def test_basic_auth_sent_but_never_in_errors_or_reprs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    auth = ConnectAuth(kind="basic", username="admin", password=PASSWORD)
    endpoint = ConnectEndpoint(url=URL, auth=auth)
    rec = Recorder(
        httpx.Response(200, json=[]),
        # A proxy/Connect that echoes the credentials back must still not leak them.
        httpx.Response(401, text=f"bad credentials admin:{PASSWORD}"),
        httpx.ConnectError(f"refused while using {PASSWORD}"),
    )
    async with ConnectClient(endpoint, transport=httpx.MockTransport(rec)) as c:
        await c.list_connectors()
        with pytest.raises(ConnectBadRequest) as unauthorized:
            await c.list_connectors()
        with pytest.raises(ConnectUnavailable) as refused:
            await c.list_connectors()
        client_repr = repr(c)
    expected = "Basic " + base64.b64encode(f"admin:{PASSWORD}".encode()).decode()
    assert rec.requests[0].headers["authorization"] == expected
    assert repr(auth) == "ConnectAuth(kind='basic', username='admin', password=***)"
    _assert_absent(PASSWORD, auth, endpoint, client_repr, unauthorized.value, refused.value)
    assert "***" in unauthorized.value.message
    assert PASSWORD not in caplog.text
    assert expected.split()[1] not in caplog.text
    assert "GET /connectors -> 200" in caplog.text


async def test_bearer_token_sent_but_never_in_errors_or_reprs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    auth = ConnectAuth.bearer(TOKEN)
    endpoint = ConnectEndpoint(url="https://connect:8443", auth=auth)
    rec = Recorder(httpx.Response(403, json={"error_code": 403, "message": f"token {TOKEN} rejected"}))
    async with ConnectClient(endpoint, transport=httpx.MockTransport(rec)) as c:
        with pytest.raises(ConnectBadRequest) as forbidden:
            await c.server_info()
    assert rec.last.headers["authorization"] == f"Bearer {TOKEN}"
    assert repr(auth) == "ConnectAuth(kind='bearer', token=***)"
    _assert_absent(TOKEN, auth, endpoint, forbidden.value)
    assert forbidden.value.message == "token *** rejected"
    assert TOKEN not in caplog.text


def test_endpoint_repr_masks_key_and_url_password() -> None:
    endpoint = ConnectEndpoint(
        url=f"https://user:{PASSWORD}@connect:8443",
        ca_pem="-----BEGIN CERTIFICATE-----\nCAFE\n-----END CERTIFICATE-----\n",
        client_cert_pem="-----BEGIN CERTIFICATE-----\nBEEF\n-----END CERTIFICATE-----\n",
        client_key_pem="-----BEGIN PRIVATE KEY-----\nPRIVATEKEYMATERIAL\n-----END PRIVATE KEY-----\n",
    )
    text = repr(endpoint)
    assert PASSWORD not in text
    assert "PRIVATEKEYMATERIAL" not in text
    assert "BEEF" not in text
    assert "https://user:***@connect:8443" in text
    assert "client_key_pem=***" in text


def test_endpoint_and_auth_validation() -> None:
    with pytest.raises(ValueError):
        ConnectEndpoint(url="connect:8083")
    with pytest.raises(ValueError):
        ConnectEndpoint(url=URL, timeout_seconds=0)
    with pytest.raises(ValueError):
        ConnectEndpoint(url=URL, client_key_pem="key")
    with pytest.raises(ValueError):
        ConnectAuth(kind="basic", username="u", password=None)
    with pytest.raises(ValueError):
        ConnectAuth(kind="bearer", token=None)
    with pytest.raises(ValueError) as bad_url:
        ConnectEndpoint(url=f"ftp://u:{PASSWORD}@host")
    assert PASSWORD not in str(bad_url.value)


# --------------------------------------------------------------------------------------------------
# Models and versions
# --------------------------------------------------------------------------------------------------


def test_status_helpers() -> None:
    status = ConnectorStatus.model_validate(STATUS_JSON)
    assert status.state == "RUNNING"
    assert status.failed_task_ids == [1, 2]
    assert status.any_failed is True
    assert status.is_stopped is False

    stopped = ConnectorStatus.model_validate({"name": "a", "connector": {"state": "STOPPED"}, "tasks": []})
    assert stopped.is_stopped is True
    assert stopped.any_failed is False
    assert stopped.failed_task_ids == []
    assert stopped.type is None

    stopping = ConnectorStatus.model_validate(
        {"name": "a", "connector": {"state": "STOPPED"}, "tasks": [{"id": 0, "state": "RUNNING"}]}
    )
    assert stopping.is_stopped is False

    failed = ConnectorStatus.model_validate({"name": "a", "connector": {"state": "FAILED", "trace": "t"}})
    assert failed.any_failed is True
    assert failed.failed_task_ids == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("3.7.0", (3, 7, 0)),
        ("4.1.1", (4, 1, 1)),
        ("3.9.0-SNAPSHOT", (3, 9, 0)),
        ("3.8", (3, 8, 0)),
        ("v3.6.2", (3, 6, 2)),
        ("7.6.0-ccs", (7, 6, 0)),
        ("", (0, 0, 0)),
        ("unknown", (0, 0, 0)),
    ],
)
def test_parse_version(text: str, expected: tuple[int, int, int]) -> None:
    assert parse_version(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("3.6.2", False),
        ("3.7.0", True),
        ("3.9.0-SNAPSHOT", True),
        ("4.1.1", True),
        ("garbage", False),
        ("7.6.0-ccs", False),  # Confluent Platform 7.6 ships Kafka 3.6
        ("7.7.1-ce", True),
        ("8.0.0-ccs", True),
    ],
)
def test_supports_initial_state(text: str, expected: bool) -> None:
    assert supports_initial_state(text) is expected


def test_all_is_sorted_and_complete() -> None:
    assert connect_mod.__all__ == sorted(connect_mod.__all__)
    assert all(hasattr(connect_mod, name) for name in connect_mod.__all__)


# --------------------------------------------------------------------------------------------------
# TLS
# --------------------------------------------------------------------------------------------------


def _first_certifi_cert() -> str:
    bundle = Path(certifi.where()).read_text()
    end = "-----END CERTIFICATE-----"
    start = bundle.index("-----BEGIN CERTIFICATE-----")
    return bundle[start : bundle.index(end, start) + len(end)] + "\n"


def test_ssl_context_from_ca_pem_and_insecure() -> None:
    ctx = build_ssl_context(ConnectEndpoint(url="https://c:8443", ca_pem=_first_certifi_cert()))
    assert ctx.verify_mode == ssl.CERT_REQUIRED
    assert ctx.check_hostname is True
    assert len(ctx.get_ca_certs()) == 1

    insecure = build_ssl_context(ConnectEndpoint(url="https://c:8443", insecure_skip_verify=True))
    assert insecure.verify_mode == ssl.CERT_NONE
    assert insecure.check_hostname is False


def test_endpoints_trusting_the_public_cas_share_one_context_and_the_others_get_their_own() -> None:
    plain = build_ssl_context(ConnectEndpoint(url="https://a:8443"))
    assert build_ssl_context(ConnectEndpoint(url="http://b:8083", timeout_seconds=5)) is plain
    assert plain.verify_mode == ssl.CERT_REQUIRED and plain.check_hostname is True
    assert len(plain.get_ca_certs()) > 100  # certifi's bundle
    insecure = build_ssl_context(ConnectEndpoint(url="https://c:8443", insecure_skip_verify=True))
    own_ca = build_ssl_context(ConnectEndpoint(url="https://c:8443", ca_pem=_first_certifi_cert()))
    assert insecure is not plain and own_ca is not plain
    # Building the others changed nothing of the shared one.
    assert plain.verify_mode == ssl.CERT_REQUIRED and plain.check_hostname is True
    assert len(plain.get_ca_certs()) > 100


def test_invalid_ca_pem_is_value_error() -> None:
    with pytest.raises(ValueError, match="ca_pem"):
        ConnectClient(ConnectEndpoint(url="https://c:8443", ca_pem="not a pem"))


@pytest.fixture(scope="module")
def client_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, str]:
    """(cert PEM, unencrypted key PEM, encrypted key PEM), made with the openssl CLI."""
    openssl = shutil.which("openssl")
    assert openssl is not None, "the openssl CLI is required (Debian package openssl)"
    d = tmp_path_factory.mktemp("pki")
    key, cert, encrypted = str(d / "k.pem"), str(d / "c.pem"), str(d / "ke.pem")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    req = [openssl, "req", "-x509", *ec, "-keyout", key, "-out", cert, "-subj", "/CN=test", "-days", "1"]
    subprocess.run(req, check=True, capture_output=True)
    pkey = [openssl, "pkey", "-in", key, "-aes256", "-passout", "pass:pw", "-out", encrypted]
    subprocess.run(pkey, check=True, capture_output=True)
    return (d / "c.pem").read_text(), (d / "k.pem").read_text(), (d / "ke.pem").read_text()


def test_client_cert_loaded_from_private_temp_files(
    client_pair: tuple[str, str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, key, _ = client_pair
    seen: list[tuple[str, int, int]] = []
    original = ssl.SSLContext.load_cert_chain

    def spy(self: ssl.SSLContext, certfile: str, keyfile: str | None = None, password: Any = None) -> None:
        assert keyfile is not None
        for path in (certfile, keyfile):
            seen.append(
                (
                    path,
                    stat.S_IMODE(os.stat(path).st_mode),
                    stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode),
                )
            )
        original(self, certfile, keyfile, password)

    monkeypatch.setattr(ssl.SSLContext, "load_cert_chain", spy)
    build_ssl_context(ConnectEndpoint(url="https://c:8443", client_cert_pem=cert, client_key_pem=key))
    assert len(seen) == 2
    for path, file_mode, dir_mode in seen:
        assert file_mode == 0o600
        assert dir_mode == 0o700
        assert not os.path.exists(path)
        assert os.path.dirname(path).startswith(tempfile.gettempdir())
        assert not os.path.exists(os.path.dirname(path))


def test_client_cert_with_key_in_same_pem_and_bad_inputs(client_pair: tuple[str, str, str]) -> None:
    cert, key, encrypted = client_pair
    build_ssl_context(ConnectEndpoint(url="https://c:8443", client_cert_pem=cert + key))
    with pytest.raises(ValueError, match="encrypted"):
        build_ssl_context(ConnectEndpoint(url="https://c:8443", client_cert_pem=cert, client_key_pem=encrypted))
    with pytest.raises(ValueError) as info:
        build_ssl_context(ConnectEndpoint(url="https://c:8443", client_cert_pem=cert, client_key_pem="junk"))
    assert "junk" not in str(info.value)


async def test_waiting_for_a_pooled_connection_has_no_deadline() -> None:
    """Every resource of a cluster shares one client: queueing for a connection is not an outage."""
    async with ConnectClient(ConnectEndpoint(url=URL, timeout_seconds=7)) as c:
        timeout = c._client.timeout
    assert timeout.pool is None
    # Connecting is capped apart (CONNECT_TIMEOUT_S, issue 45); reading and writing keep the request timeout.
    assert (timeout.connect, timeout.read, timeout.write) == (5, 7, 7)


# --- answers are read up to a cap (issue 18: a tenant's spec.url decides what comes back) ------


def _gzip_zeros(size: int) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    return packer.compress(bytes(size)) + packer.flush()


async def test_a_huge_gzip_answer_to_get_root_is_refused_at_the_small_cap() -> None:
    bomb = _gzip_zeros(64 << 20)  # ~64 KB on the wire

    class Wire(httpx.AsyncByteStream):
        """The body as a network would deliver it: 64 KiB reads, not decoded ahead of time."""

        async def __aiter__(self) -> AsyncIterator[bytes]:
            for start in range(0, len(bomb), 65536):
                yield bomb[start : start + 65536]

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.headers["Accept-Encoding"] == "gzip, deflate"
        return httpx.Response(200, headers={"Content-Encoding": "gzip"}, stream=Wire())

    async with client_for(handler) as client:
        with pytest.raises(
            ConnectResponseTooLarge, match=rf"GET /: the answer is larger than {MAX_SMALL_RESPONSE_BYTES}"
        ):
            await client.server_info()
        with pytest.raises(ConnectResponseTooLarge) as refused:
            await client.get_connector_status("c")
    assert not refused.value.retryable


async def test_offsets_answers_use_the_document_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    document = json.dumps({"offsets": [{"partition": {"p": i}, "offset": {"o": i}} for i in range(2000)]}).encode()

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=document)

    async with client_for(handler) as client:
        assert await client.get_offsets_raw("c") == document  # default cap: far larger
        monkeypatch.setenv("CONNECT_OFFSETS_MAX_DOCUMENT_BYTES", str(len(document) - 1))
        with pytest.raises(ConnectResponseTooLarge, match=r"GET /connectors/c/offsets"):
            await client.get_offsets_raw("c")
        with pytest.raises(ConnectResponseTooLarge):
            await client.get_offsets("c")
        monkeypatch.setenv("CONNECT_OFFSETS_MAX_DOCUMENT_BYTES", str(len(document)))
        assert len((await client.get_offsets("c"))["offsets"]) == 2000


async def test_endless_compressed_input_that_inflates_to_little_is_capped() -> None:
    """Empty deflate blocks decode to nothing: the wire bytes are capped too, or a server that
    never stops sending would hold the reconcile for ever."""
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"  # gzip member header
    empty_block = b"\x00\x00\x00\xff\xff"  # a stored deflate block of length 0, not the last one

    class Endless(httpx.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            yield header
            while True:  # never the end of the stream; the client must stop reading
                yield empty_block * 10_000

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"Content-Encoding": "gzip"}, stream=Endless())

    async with client_for(handler) as client:
        with pytest.raises(ConnectResponseTooLarge, match="GET /"):
            await client.server_info()


async def test_a_huge_error_body_is_cut_and_the_status_decides() -> None:
    body = b"<html>" + b"x" * (3 * MAX_SMALL_RESPONSE_BYTES)

    class Wire(httpx.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            for start in range(0, len(body), 65536):
                yield body[start : start + 65536]

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(500, stream=Wire())

    async with client_for(handler) as client:
        with pytest.raises(ConnectServerError) as failed:
            await client.server_info()
    assert failed.value.retryable and failed.value.status_code == 500
    assert len(failed.value.message) <= connect_mod.MAX_ERROR_TEXT
