"""A Connect worker that is still starting answers every path with Jetty's HTML 404 for a few seconds
(seen on the local stack: about 7 s between "Started http" and "REST resources initialized"). That
404 says nothing about the connector: reading it as "connector absent" would make the operator
create a connector that exists, or release a finalizer while the connector still runs. The client
therefore raises the retryable ConnectUnavailable for a 404 without Connect's JSON error body, and
keeps ``None`` / ConnectNotFound for Connect's own 404s. (A real server cannot be held in that
window on demand, hence the mock transport.)"""

from __future__ import annotations

import httpx
import pytest

from connect_offsets.clients.connect import ConnectClient, ConnectEndpoint, ConnectNotFound, ConnectUnavailable

#: What Kafka Connect 4.1's Jetty serves before the REST resources are registered (captured).
STARTING_404 = httpx.Response(
    404,
    headers={"content-type": "text/html;charset=iso-8859-1"},
    text=(
        '<html>\n<head>\n<meta http-equiv="Content-Type" content="text/html;charset=ISO-8859-1"/>\n'
        "<title>Error 404 Not Found</title>\n</head>\n<body>\n<h2>HTTP ERROR 404 Not Found</h2>\n</body>\n</html>\n"
    ),
)
CONNECT_404 = httpx.Response(404, json={"error_code": 404, "message": "Connector orders not found"})


def client_answering(response: httpx.Response) -> ConnectClient:
    transport = httpx.MockTransport(lambda request: response)
    return ConnectClient(ConnectEndpoint(url="http://connect:8083"), transport=transport)


@pytest.mark.parametrize(
    "call",
    [
        lambda c: c.get_connector_config("orders"),
        lambda c: c.get_connector_status("orders"),
        lambda c: c.delete_connector("orders"),
        lambda c: c.get_offsets("orders"),
        lambda c: c.get_offsets_raw("orders"),
        lambda c: c.create_connector("orders", {"connector.class": "X"}),
    ],
    ids=["config", "status", "delete", "offsets", "offsets-raw", "create"],
)
async def test_html_404_of_a_starting_worker_is_retryable_not_absent(call: object) -> None:
    async with client_answering(STARTING_404) as client:
        with pytest.raises(ConnectUnavailable) as info:
            await call(client)  # type: ignore[operator]
    assert info.value.retryable
    assert "worker is still starting" in str(info.value)
    assert str(info.value).startswith(("GET /connectors", "DELETE /connectors/orders", "POST /connectors"))


async def test_connects_own_404_still_means_absent() -> None:
    async with client_answering(CONNECT_404) as client:
        assert await client.get_connector_config("orders") is None
        assert await client.get_connector_status("orders") is None
        assert await client.delete_connector("orders") is False
        with pytest.raises(ConnectNotFound) as info:
            await client.get_offsets_raw("orders")
    assert info.value.message == "Connector orders not found" and not info.value.retryable
