"""spec.version checked before it is sent, on a real Kafka Connect 4.3.1 worker (issue 49 item 4).

Asked for ``[9.0,10.0)`` where only 4.3.1 is installed, Connect 4.3.1 itself answers ``POST
/connectors`` with a 500 NullPointerException. The operator reads what the worker lists (``GET
/connector-plugins?connectorsOnly=false``), refuses the spec naming the version installed, posts
one Warning Event and sends nothing; set to the installed version, the connector is created.

Why a worker of its own (``DedicatedWorker``): its request log counts only this test's requests,
so "no ``POST /connectors`` while refused, exactly one once accepted" is read exactly, whatever
other tests do on the shared worker meanwhile.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import OperatorProcess, wait_for
from tests.integration.connect_worker import DedicatedWorker
from tests.integration.support import (
    FILE_SOURCE,
    connector_config,
    create_cluster,
    create_connector,
    patch_connector,
    request_lines,
    wait_condition,
    wait_events,
)

pytestmark = [pytest.mark.local_stack, pytest.mark.timeout(300)]  # a worker from the stack's jars


@pytest.fixture(scope="module")
def worker() -> Iterator[DedicatedWorker]:
    w = DedicatedWorker(heap="-Xmx512m", name="pluginver")
    w.start()
    yield w
    w.stop()


def test_a_version_no_worker_has_is_refused_before_anything_is_sent_and_the_installed_one_is_accepted(
    custom: Any, core: Any, namespace: str, operator: OperatorProcess, worker: DedicatedWorker, tmp_path: Path
) -> None:
    with httpx.Client(base_url=worker.url, timeout=30) as rest:
        listed = rest.get("/connector-plugins", params={"connectorsOnly": "false"}).json()
        installed = sorted({p["version"] for p in listed if p["class"] == FILE_SOURCE})
        assert installed == [worker.version]  # 4.3.1: what Connect lists is what the refusal names
        source = tmp_path / "pv.txt"
        source.write_text("a\nb\n")
        name = "versioned"
        create_cluster(custom, namespace, worker.url, name="pv")
        spec = {
            "class": FILE_SOURCE,
            "tasksMax": 1,
            "version": "[9.0,10.0)",
            "config": {"file": str(source), "topic": f"pv-{namespace}"},
        }
        create_connector(custom, namespace, name, spec, cluster="pv")
        refused = wait_condition(custom, namespace, name, "Ready", "False", reason="PluginVersionNotInstalled")
        assert refused["message"].startswith(
            f"spec.version '[9.0,10.0)' matches no installed version of {FILE_SOURCE}: the Connect worker of "
            f"ConnectCluster pv has {worker.version}. Nothing was created or changed"
        )
        [event] = wait_events(core, namespace, name, "PluginVersionNotInstalled")
        assert event.type == "Warning" and event.message == refused["message"]
        lines = request_lines(worker.log)
        listings = [line for line in lines if '"GET /connector-plugins?connectorsOnly=false ' in line]
        assert [line for line in listings if "connect-offsets-operator/" in line], lines  # the operator asked
        assert not any('"POST /connectors ' in line or f"/connectors/{name}" in line for line in lines), lines
        assert rest.get("/connectors").json() == []

        patch_connector(custom, namespace, name, {"spec": {"version": worker.version}})
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorRunning", timeout=120)
        assert connector_config(rest, name)["connector.plugin.version"] == worker.version
        posts = wait_for(
            "the create in the worker's request log",
            lambda: [line for line in request_lines(worker.log) if '"POST /connectors ' in line] or None,
        )
        assert len(posts) == 1 and '" 201 ' in posts[0], posts
        assert not any("PluginVersionNotInstalled" in line and "ERROR" in line for line in operator.log().splitlines())
