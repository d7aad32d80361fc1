"""What a tenant's input puts into labels and status stays within what the API server accepts.

Issue 18, point 7: a resource name of more than 63 characters used as a label value, and a
connector with many failing tasks whose full traces went into ``status.connectorStatus``, each
made every later write of that resource fail.
"""

from __future__ import annotations

import json
import re

import pytest
from pydantic import ValidationError

from connect_offsets.clients.kubernetes import LABEL_VALUE_MAX, label_value
from connect_offsets.models.connect import STATUS_MAX_TASKS, STATUS_TRACE_CHARS, ConnectorStatus
from connect_offsets.models.crds import (
    DNS1123_SUBDOMAIN,
    AuthenticationSpec,
    ClientCertificateSpec,
    ConfigMapRef,
    SecretKeyRef,
)
from connect_offsets.models.schema import crd_documents

pytestmark = pytest.mark.unit

LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


@pytest.mark.parametrize("name", ["a", "orders", "x" * 63])
def test_names_that_fit_are_their_own_label_value(name: str) -> None:
    assert label_value(name) == name


@pytest.mark.parametrize("name", ["x" * 64, "a" * 100, "a" * 49 + "-." + "b" * 200, "my.connector-" * 19])
def test_longer_names_become_a_valid_label_value_unique_per_name(name: str) -> None:
    value = label_value(name)
    assert len(value) <= LABEL_VALUE_MAX and LABEL_VALUE.match(value), value
    assert value.startswith(name[:20])
    assert label_value(name + "z") != value and label_value(name) == value


def test_status_of_many_failing_tasks_is_bounded() -> None:
    trace = "org.apache.kafka.connect.errors.ConnectException: " + "boom " * 400 + "\n" + "\tat x.y.Z(Z.java:1)\n" * 500
    status = ConnectorStatus.model_validate(
        {
            "name": "c",
            "connector": {"state": "RUNNING", "worker_id": "w:8083"},
            "tasks": [{"id": i, "state": "FAILED", "worker_id": "w:8083", "trace": trace} for i in range(1000)],
            "type": "source",
        }
    )
    full = len(json.dumps(status.model_dump()))
    bounded = status.for_status()
    size = len(json.dumps(bounded))
    assert full > 10_000_000 and size < 40_000, (full, size)
    assert len(bounded["tasks"]) == STATUS_MAX_TASKS and bounded["tasksOmitted"] == 1000 - STATUS_MAX_TASKS
    first = bounded["tasks"][0]
    assert first == {
        "id": 0,
        "state": "FAILED",
        "worker_id": "w:8083",
        "trace": trace.splitlines()[0][:STATUS_TRACE_CHARS] + "…",
    }
    assert bounded["connector"] == {"state": "RUNNING", "worker_id": "w:8083"} and bounded["type"] == "source"


def test_a_small_status_keeps_its_shape() -> None:
    status = ConnectorStatus.model_validate(
        {"name": "c", "connector": {"state": "FAILED", "trace": "E: bad\n\tat a"}, "tasks": []}
    )
    assert status.for_status() == {"name": "c", "connector": {"state": "FAILED", "trace": "E: bad"}, "tasks": []}


@pytest.mark.parametrize("bad", ["Bad_Name", "../other", "a/b", "-a", "a-", "x" * 254, ""])
def test_configmap_and_secret_names_must_be_dns_subdomains(bad: str) -> None:
    for model, data in (
        (ConfigMapRef, {"name": bad}),
        (SecretKeyRef, {"name": bad, "key": "k"}),
        (AuthenticationSpec, {"type": "basic", "secretName": bad}),
        (ClientCertificateSpec, {"secretName": bad}),
    ):
        with pytest.raises(ValidationError) as refused:
            model.model_validate(data)
        assert refused.value.errors()[0]["loc"][-1] in ("name", "secretName", "secret_name"), model


def test_every_configmap_and_secret_name_in_the_crds_has_the_pattern() -> None:
    names = 0
    for document in crd_documents().values():
        text = json.dumps(document)
        for field in ('"secretName": {', '"toConfigMap": {', '"fromConfigMap": {'):
            for start in [m.start() for m in re.finditer(re.escape(field), text)]:
                pattern = json.dumps(DNS1123_SUBDOMAIN)[1:-1]  # as it appears inside the JSON text
                assert pattern in text[start : start + 1500], (document["metadata"]["name"], field)
                names += 1
    assert names >= 6
