"""Expected waits are not errors in the operator's log, on a real Kafka Connect worker (issue 49
item 5): a stop -> change -> resume alter (the passes wait for Connect to report STOPPED) and
``offsetsOnDelete: reset`` (the deletion waits for it too, before the reset) leave no WARNING or
ERROR line. The operator used to log ``[ERROR] Handler 'delete_connector' failed temporarily``
for that wait, which tripped log-based alerting.

Why a worker of its own (``DedicatedWorker``): on the shared worker another engineer's tests may
make it rebalance, and a 409 "rebalance in progress" is rightly a WARNING; this test is about the
waits, not the neighbours.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import REPO, OperatorProcess, wait_for
from tests.integration.connect_worker import DedicatedWorker
from tests.integration.support import (
    GROUP,
    VERSION,
    CrdKeeper,
    annotate,
    connect_offsets,
    create_cluster,
    create_connector_kept,
    file_source_spec,
    get_connector,
    wait_annotation_removed,
    wait_condition,
)

pytestmark = [pytest.mark.local_stack, pytest.mark.timeout(300)]  # a worker from the stack's jars

LINES, LINE = 10, 3  # "a0\n" ... "a9\n"


@pytest.fixture(autouse=True)
def this_branch_crds(stack: dict[str, Any]) -> Iterator[None]:
    """This checkout's CRDs (spec.offsetsOnDelete), put back if another session applies older ones."""
    with CrdKeeper(stack, REPO / "crds"):
        yield


@pytest.fixture(scope="module")
def worker() -> Iterator[DedicatedWorker]:
    w = DedicatedWorker(heap="-Xmx512m", name="waits")
    w.start()
    yield w
    w.stop()


def warnings_and_errors(operator: OperatorProcess, resource: str) -> list[str]:
    """The WARNING and ERROR lines about ``resource`` (namespace/name): another session changing
    the shared stack's CRDs meanwhile may make the operator's watches warn, which is not this
    resource's waits."""
    return [
        line for line in operator.log().splitlines() if ("[WARNING " in line or "[ERROR " in line) and resource in line
    ]


def test_stop_change_resume_and_a_reset_on_delete_log_no_warning_or_error(
    custom: Any, core: Any, namespace: str, operator: OperatorProcess, worker: DedicatedWorker, tmp_path: Path
) -> None:
    name, configmap = "waits", "waits-offsets"
    source = tmp_path / "waits.txt"
    source.write_text("".join(f"a{i}\n" for i in range(LINES)))
    create_cluster(custom, namespace, worker.url)
    spec = {
        **file_source_spec(source, f"waits-{namespace}", configmap),
        "offsetsPolicy": {"stopConnector": True},
        "offsetsOnDelete": "reset",
    }
    create_connector_kept(custom, namespace, name, spec)
    wait_condition(custom, namespace, name, "Ready", reason="ConnectorRunning", timeout=120)
    with httpx.Client(base_url=worker.url, timeout=30) as rest:
        wait_for(
            "the connector read its file",
            lambda: (found := connect_offsets(rest, name)) and found[0]["offset"]["position"] == LINES * LINE,
        )
        document = {"offsets": [{"partition": {"filename": str(source)}, "offset": {"position": 3}}]}
        core.create_namespaced_config_map(
            namespace, {"metadata": {"name": configmap}, "data": {"offsets.json": json.dumps(document)}}
        )
        annotate(custom, namespace, name, connector_offsets="alter")
        wait_annotation_removed(custom, namespace, name, timeout=120)
        assert get_connector(custom, namespace, name)["status"]["lastOffsetsOperation"]["result"] == "Succeeded"
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorRunning", timeout=120)

        custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, "kafkaconnectors", name)
        wait_for("the connector deleted in Connect", lambda: rest.get(f"/connectors/{name}").status_code == 404, 120)
    assert "OffsetsResetOnDelete" in operator.log()  # the deletion ran its reset
    assert warnings_and_errors(operator, f"{namespace}/{name}") == []
