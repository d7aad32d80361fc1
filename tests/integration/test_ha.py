"""High availability with kopf peering: two operators, one acts; kill it, the other takes over and
finishes the pending request. The measured take-over time is printed (targets belong in bench/)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import OperatorProcess, wait_for
from tests.integration.support import (
    annotate,
    connect_offsets,
    create_cluster,
    create_connector,
    file_source_spec,
    install_peering_crds,
    wait_annotation_removed,
    wait_condition,
)


# test_rbac's rendered chart deletes the kopfpeerings CRD this test applies: one xdist worker runs both.
@pytest.mark.xdist_group("kopf-peering-crds")
def test_standby_takes_over_pending_work(
    custom: Any,
    namespace: str,
    stack: dict[str, Any],
    connect: httpx.Client,
    connect_url: str,
    tmp_path: Path,
    unique: str,
) -> None:
    install_peering_crds(stack)
    custom.create_namespaced_custom_object(
        "kopf.dev",
        "v1",
        namespace,
        "kopfpeerings",
        {"apiVersion": "kopf.dev/v1", "kind": "KopfPeering", "metadata": {"name": "connect-offsets"}},
    )

    def peer(priority: int) -> OperatorProcess:
        return OperatorProcess(
            stack["kubeconfig"],
            namespace,
            tmp_path / f"op-{priority}.log",
            extra_args=["--peering", "connect-offsets", "--priority", str(priority)],
        )

    active, standby = peer(100), peer(10)
    active.start()
    time.sleep(2)  # the active peer registers first: the standby must find a higher priority and pause
    standby.start()
    source = tmp_path / "s.txt"
    source.write_text("h\na\n")
    name = f"ha-{unique}"
    try:
        create_cluster(custom, namespace, connect_url)
        create_connector(custom, namespace, name, file_source_spec(source, name, "ha-offsets"))
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorRunning")
        # The standby stays paused: kopf runs none of its handlers while a higher priority peer lives.
        assert "Resuming operations" in active.log()
        assert "Handler" not in standby.log() and "Created connector" not in standby.log()
        wait_for("offsets committed", lambda: connect_offsets(connect, name))

        active.kill()
        killed = time.monotonic()
        annotate(custom, namespace, name, connector_offsets="list")
        wait_annotation_removed(custom, namespace, name, timeout=90)
        print(f"take-over and list completed {time.monotonic() - killed:.1f}s after SIGKILL of the active operator")
        assert "Resuming operations" in standby.log()
        # The outcome is logged with its Event, after the annotation's removal (Events after status).
        assert wait_for(
            "the standby logged the list", lambda: "wrote 1 partition offset(s)" in standby.log(), timeout=10
        )
    finally:
        active.stop()
        standby.stop()
        connect.delete(f"/connectors/{name}")
