"""errors.py: one root for every error the package raises on purpose, and the kinds as types.

Walks every module of the package (pyspark-only modules included when importable) so that a new
exception class outside the tree fails here, not in a user's traceback.
"""

from __future__ import annotations

import inspect

import pytest

from connect_offsets.clients.connect import ConnectBadRequest, ConnectConflict, ConnectServerError, ConnectUnavailable
from connect_offsets.clients.kafka import KafkaAdminError
from connect_offsets.clients.kubernetes import KubernetesRejected, KubernetesUnavailable
from connect_offsets.errors import ConnectOffsetsError, TransientError, UserError
from connect_offsets.offsets import OffsetsValidationError
from tests.unit.package_modules import package_modules


def public_exception_classes() -> list[type[BaseException]]:
    found: list[type[BaseException]] = []
    for module in package_modules():
        for name, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == module.__name__
                and not name.startswith("_")
            ):
                found.append(value)
    return found


def test_every_public_exception_class_has_the_one_root() -> None:
    classes = public_exception_classes()
    assert len(classes) >= 20, classes
    outside = [f"{c.__module__}.{c.__qualname__}" for c in classes if not issubclass(c, ConnectOffsetsError)]
    assert outside == []


def test_no_two_public_exception_classes_share_a_name() -> None:
    names = [c.__qualname__ for c in public_exception_classes()]
    assert sorted({n for n in names if names.count(n) > 1}) == []


@pytest.mark.parametrize(
    ("error", "retryable", "kind"),
    [
        (ConnectUnavailable("connection refused"), True, TransientError),
        (KubernetesUnavailable("503"), True, TransientError),
        (KafkaAdminError("describe cluster: timed out"), True, TransientError),
        (KubernetesRejected("403 forbidden", 403), False, UserError),
        (OffsetsValidationError("offsets[0].partition: expected an object"), False, UserError),
    ],
)
def test_the_kind_is_a_type_and_says_whether_a_retry_helps(
    error: ConnectOffsetsError, retryable: bool, kind: type[ConnectOffsetsError]
) -> None:
    assert isinstance(error, kind)
    assert error.retryable is retryable


@pytest.mark.parametrize(("status", "retryable"), [(400, False), (404, False), (429, True)])
def test_connect_http_errors_decide_per_answer(status: int, retryable: bool) -> None:
    error = ConnectBadRequest(method="PUT", path="/connectors/x/config", status_code=status, message="no")
    assert error.retryable is retryable


def test_server_errors_and_conflicts_are_retried() -> None:
    assert ConnectServerError(method="GET", path="/", status_code=500, message="Request timed out").retryable
    assert ConnectConflict(method="PATCH", path="/connectors/x/offsets", status_code=409, message="rebalance").retryable


def test_validation_errors_are_still_value_errors() -> None:
    """Callers that parse with ``except ValueError`` keep working."""
    assert issubclass(OffsetsValidationError, ValueError)
