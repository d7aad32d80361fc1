"""Status fields that GitOps tools read: kstatus (Flux) and Argo CD must not see Ready too early.

After a spec change, whenever status.observedGeneration equals metadata.generation and Ready is
True, Connect must already be in the new desired state; Ready and every condition carry the
observedGeneration they were computed for.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx

from tests.conftest import OperatorProcess
from tests.integration.support import (
    FILE_SOURCE,
    condition,
    connect_state,
    create_cluster,
    create_connector,
    get_connector,
    patch_connector,
    wait_condition,
)


def test_ready_is_not_reported_before_connect_reaches_the_new_generation(
    custom: Any,
    namespace: str,
    operator: OperatorProcess,
    connect: httpx.Client,
    connect_url: str,
    tmp_path: Path,
    unique: str,
) -> None:
    source = tmp_path / "s.txt"
    source.write_text("k\n")
    name = f"kstatus-{unique}"
    create_cluster(custom, namespace, connect_url)
    create_connector(custom, namespace, name, {"class": FILE_SOURCE, "config": {"file": str(source), "topic": name}})
    try:
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorRunning")
        body = get_connector(custom, namespace, name)
        assert body["status"]["observedGeneration"] == body["metadata"]["generation"] == 1
        patch_connector(custom, namespace, name, {"spec": {"state": "paused"}})
        deadline = time.monotonic() + 30
        saw_ready = False
        while time.monotonic() < deadline and not saw_ready:
            body = get_connector(custom, namespace, name)
            status = body.get("status") or {}
            ready = condition(body, "Ready")
            if (
                status.get("observedGeneration") == body["metadata"]["generation"] == 2
                and ready
                and (ready["status"] == "True")
            ):
                # The moment a GitOps tool would call it done, Connect must agree.
                assert ready["reason"] == "ConnectorPaused"
                assert ready["observedGeneration"] == 2
                assert connect_state(connect, name) == "PAUSED"
                saw_ready = True
            time.sleep(0.1)
        assert saw_ready, "Ready never became True for generation 2"
    finally:
        connect.delete(f"/connectors/{name}")
