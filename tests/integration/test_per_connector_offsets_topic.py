"""Per-connector offsets topics (KIP-618) and the offline tool's removals and selection, for real.

Issue 21, items 4 and 7. A source connector may name its own ``offsets.storage.topic``; Connect
then writes its offsets there (and to the worker's topic) and reads them from there first. Until
now nothing proved that path:

- the operator's ``list`` and ``alter`` on such a connector (Connect's REST API does the routing;
  the alter must land in the connector's own topic, byte-exact keys, and a ``list`` afterwards must
  return exactly what was altered);
- the offline round trip on the on-demand ``connect-offline`` worker: export finds the own topic,
  ``--connectors`` leaves every other connector out, an import with ``"offset": null`` removes a
  partition, the import lands in the own topic, and once the worker is back Connect reports exactly
  the imported entry and the connector resumes from it.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from connect_offsets.tools.offline.records import encode_key
from tests.conftest import STACK, wait_for
from tests.integration.support import (
    FILE_SOURCE,
    annotate,
    configmap_offsets,
    connect_offsets,
    create_cluster,
    create_connector,
    end_offset,
    file_source_spec,
    patch_connector,
    raw_records,
    run_cli,
    wait_annotation_removed,
    wait_connect_state,
)

pytestmark = pytest.mark.integration

LINE = "line-{:02d}\n"  # 8 bytes per line: position n*8 is the start of line n
OFFLINE_URL = "http://127.0.0.1:18086"


def position(file: Path, at: int) -> list[dict[str, Any]]:
    return [{"partition": {"filename": str(file)}, "offset": {"position": at}}]


def test_operator_lists_and_alters_a_connector_with_its_own_offsets_topic(
    stack: dict[str, Any],
    operator: Any,
    connect: httpx.Client,
    connect_url: str,
    core: Any,
    custom: Any,
    namespace: str,
    tmp_path: Path,
) -> None:
    create_cluster(custom, namespace, connect_url)
    name = f"own-topic-{namespace[-6:]}"
    own_topic = f"offsets-{name}"
    source = tmp_path / "in.txt"
    source.write_text("".join(LINE.format(i) for i in range(6)))
    spec = file_source_spec(source, f"own-{namespace}", f"{name}-offsets")
    spec["config"]["offsets.storage.topic"] = own_topic
    spec["offsetsPolicy"] = {"stopConnector": True}
    create_connector(custom, namespace, name, spec)
    try:
        wait_for(f"{name} at 48", lambda: connect_offsets(connect, name) == position(source, 48), timeout=90)
        key = encode_key(name, {"filename": str(source)})
        wait_for(
            "the connector's own topic to hold its record",
            lambda: key in [k for _, k, _ in raw_records(stack["kafka_a"], own_topic, name)],
        )
        annotate(custom, namespace, name, connector_offsets="list")
        wait_annotation_removed(custom, namespace, name)
        assert configmap_offsets(core, namespace, f"{name}-offsets")["offsets"] == position(source, 48)

        # alter to position 16 through the ConfigMap: stop -> change -> resume by the operator.
        core.patch_namespaced_config_map(
            f"{name}-offsets", namespace, {"data": {"offsets.json": json.dumps({"offsets": position(source, 16)})}}
        )
        before = len(raw_records(stack["kafka_a"], own_topic, name))
        annotate(custom, namespace, name, connector_offsets="alter")
        wait_annotation_removed(custom, namespace, name, timeout=120)
        written = raw_records(stack["kafka_a"], own_topic, name)[before:]
        assert b'{"position":16}' in [value for _, _, value in written]  # the alter went to the own topic
        # resumed from 16: lines 2..5 produced again (6 + 4 records), then back at 48
        wait_for("lines re-read from 16", lambda: end_offset(stack["kafka_a"], f"own-{namespace}") == 10, timeout=90)
        wait_for(f"{name} back at 48", lambda: connect_offsets(connect, name) == position(source, 48), timeout=60)
    finally:
        patch_connector(custom, namespace, name, {"spec": {"state": "stopped"}})


@pytest.mark.local_stack
@pytest.mark.xdist_group("connect-offline")  # stops the worker that another test uses (docs/development.md#tests)
def test_offline_round_trip_with_own_topic_removal_and_selection(
    stack: dict[str, Any], tmp_path: Path, unique: str
) -> None:
    subprocess.run([*STACK, "up", "connect-offline"], check=True, capture_output=True, timeout=180)
    worker_config = str(Path(stack["run_dir"]) / "connect-offline.properties")
    own, other = f"kip618-{unique}", f"kip618-other-{unique}"
    own_topic = f"offsets-{own}"
    source, other_source = tmp_path / "own.txt", tmp_path / "other.txt"
    source.write_text("".join(LINE.format(i) for i in range(10)))
    other_source.write_text("".join(LINE.format(i) for i in range(3)))
    extra = {"filename": f"{source}.rotated"}
    with httpx.Client(base_url=OFFLINE_URL, timeout=30) as client:
        for name, file, topic_config in (
            (own, source, {"offsets.storage.topic": own_topic}),
            (other, other_source, {}),
        ):
            config = {
                "connector.class": FILE_SOURCE,
                "tasks.max": "1",
                "file": str(file),
                "topic": name,
                **topic_config,
            }
            assert client.post("/connectors", json={"name": name, "config": config}).status_code == 201
        wait_for(f"{own} at 80", lambda: connect_offsets(client, own) == position(source, 80), timeout=90)
        wait_for(f"{other} at 24", lambda: connect_offsets(client, other) == position(other_source, 24), timeout=90)
        for name in (own, other):
            assert client.put(f"/connectors/{name}/stop").status_code == 204
            wait_connect_state(client, name, "STOPPED")
        # a second partition for the own-topic connector, to be removed by the import below
        patch = {"offsets": [{"partition": extra, "offset": {"position": 8}}]}
        assert client.patch(f"/connectors/{own}/offsets", json=patch).status_code == 200
        expected_before = sorted([*position(source, 80), patch["offsets"][0]], key=json.dumps)
        assert sorted(connect_offsets(client, own), key=json.dumps) == expected_before

        # export: --connectors selects, the own topic is found, and the entries equal Connect's GET
        exported = run_cli("export", "-w", worker_config, "--connectors", own)
        assert exported.returncode == 0, exported.stderr
        document = json.loads(exported.stdout)
        assert list(document) == [own]  # the other connector is left out
        assert sorted(document[own], key=json.dumps) == expected_before
        both = json.loads(run_cli("export", "-w", worker_config, "--connectors", f"{own},{other}").stdout)
        assert both[other] == position(other_source, 24)

    subprocess.run([*STACK, "stop", "connect-offline"], check=True, capture_output=True, timeout=180)
    try:
        document = {own: [*position(source, 40), {"partition": extra, "offset": None}]}
        imported = run_cli("import", "-w", worker_config, stdin=json.dumps(document))
        assert imported.returncode == 0, imported.stderr
        # the own topic now ends with our two records: the new position and the removal (tombstone)
        records = raw_records(stack["kafka_a"], own_topic, own)
        latest = {key: value for _, key, value in records}
        assert latest[encode_key(own, {"filename": str(source)})] == b'{"position":40}'
        assert latest[encode_key(own, extra)] is None
    finally:
        subprocess.run([*STACK, "up", "connect-offline"], check=True, capture_output=True, timeout=180)
    with httpx.Client(base_url=OFFLINE_URL, timeout=30) as client:
        assert connect_offsets(client, own) == position(source, 40)  # exactly the imported entry
        assert connect_offsets(client, other) == position(other_source, 24)  # untouched
        assert client.put(f"/connectors/{own}/resume").status_code == 202
        wait_for("lines 5..9 re-read", lambda: end_offset(stack["kafka_a"], own) == 15, timeout=90)
        for name in (own, other):
            client.delete(f"/connectors/{name}")
