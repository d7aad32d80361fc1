"""A worker refusing the credentials (401/403) gets its own ConnectCluster reason, not ``Unreachable``.

The same condition on a real worker demanding a bearer token is in
tests/integration/test_connect_bearer.py (with token rotation).
"""

from __future__ import annotations

import pytest

from connect_offsets.clients.connect import ConnectBadRequest, ConnectServerError, ConnectUnavailable
from connect_offsets.reconcile.cluster_service import unreachable_condition

pytestmark = pytest.mark.unit

BEARER = {"url": "http://connect.test:8083", "authentication": {"type": "bearer", "secretName": "connect-token"}}


@pytest.mark.parametrize(("status", "reason"), [(401, "Unauthorized"), (403, "Forbidden")])
def test_refused_credentials_name_the_secret(status: int, reason: str) -> None:
    error = ConnectBadRequest(method="GET", path="/", status_code=status, message="invalid bearer token")
    found = unreachable_condition(error, BEARER)
    assert (found.status, found.reason) == ("False", reason)
    assert f"GET /: {status} invalid bearer token" in found.message
    assert "check spec.authentication (Secret connect-token)" in found.message


def test_a_worker_demanding_credentials_none_given() -> None:
    error = ConnectBadRequest(method="GET", path="/", status_code=401, message="Unauthorized")
    found = unreachable_condition(error, {"url": "http://connect.test:8083"})
    assert found.reason == "Unauthorized" and "set spec.authentication" in found.message


@pytest.mark.parametrize(
    "error",
    [
        ConnectUnavailable("ConnectError: connection refused", method="GET", path="/"),
        ConnectServerError(method="GET", path="/", status_code=500, message="boom"),
    ],
)
def test_other_failures_stay_unreachable(error: Exception) -> None:
    found = unreachable_condition(error, BEARER)  # type: ignore[arg-type]
    assert found.reason == "Unreachable" and "spec.authentication" not in found.message


def test_the_message_stays_capped() -> None:
    error = ConnectBadRequest(method="GET", path="/", status_code=401, message="x" * 5000)
    assert len(unreachable_condition(error, BEARER).message) < 1100
