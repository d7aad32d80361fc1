"""Large offsets on the real stack: the ConfigMap store on kube-apiserver, chunked PATCH on Connect.

Covers: 200,000 source partitions stored as shards and read back byte for byte; overwriting with
smaller documents removes the stale shards (gzip, then plain); a plain document at the store's
size limit is accepted by the API server; a shard altered behind the store's back is named in the
error; deleting the main ConfigMap garbage-collects its shards (kube-controller-manager); a chunked
PATCH of 15,000 partitions to a framework-managed source connector (MonitorableSourceConnector from
connect-runtime's test jar: it accepts any offsets) matches Connect's GET; a real failure mid-way
(the connector leaves STOPPED between chunks) reports the applied chunks and a retry resumes.
The 1,000,000-partition run is bench/bench_large_offsets.py.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx
import pytest

from connect_offsets.clients.connect import (
    ChunkedAlterResult,
    ConnectBadRequest,
    ConnectClient,
    ConnectConflict,
    ConnectEndpoint,
    ConnectError,
    ConnectServerError,
)
from connect_offsets.clients.kubernetes import KubernetesApi
from connect_offsets.clients.offsets_configmaps import (
    MAX_PAYLOAD_BYTES,
    NOT_A_SHARD,
    SHARD_LABEL,
    OffsetsConfigMapStore,
    OffsetsCorrupt,
    StoredForm,
    name_hash,
)
from connect_offsets.offsets.chunking import ChunkLimits, ChunkProgress, ChunkResume
from tests.conftest import wait_for
from tests.integration.support import MONITORABLE_SOURCE, connect_send, wait_connect_state


def source_document(n: int, salt: str = "") -> bytes:
    """n partitions shaped like a per-file source connector's (path partition, position + line offset)."""
    entries = [
        {
            "partition": {"filename": f"/data/incoming/{salt}2026/11/{i // 1000:04d}/events-{i:07d}.jsonl"},
            "offset": {"position": i * 4096 + 17, "line": i % 977},
        }
        for i in range(n)
    ]
    return json.dumps({"offsets": entries}, separators=(",", ":")).encode()


def shard_names(core: Any, namespace: str, configmap: str) -> set[str]:
    items = core.list_namespaced_config_map(namespace, label_selector=f"{SHARD_LABEL}={name_hash(configmap)}").items
    return {item.metadata.name for item in items}


@pytest.fixture
def kube_api(kube: Any) -> KubernetesApi:
    return KubernetesApi(kube)


OWNER_KIND = {"apiVersion": "v1", "kind": "ConfigMap"}


async def test_200k_partitions_shard_round_trip_and_overwrite(
    kube_api: KubernetesApi, core: Any, namespace: str
) -> None:
    store = OffsetsConfigMapStore(kube_api)
    # An owner whose deletion must not matter here: a ConfigMap standing in for the resource.
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "owner"}})
    owner_uid = core.read_namespaced_config_map("owner", namespace).metadata.uid
    owner = {**OWNER_KIND, "name": "owner", "uid": owner_uid, "controller": False, "blockOwnerDeletion": False}
    document = source_document(200_000)

    result = await store.write(
        namespace, "big", "offsets.json", document, labels={"app": "t"}, owner_references=[owner], partitions=200_000
    )
    assert result.form is StoredForm.SHARDED
    assert result.size == len(document) > 20 * MAX_PAYLOAD_BYTES  # really far beyond one ConfigMap
    assert shard_names(core, namespace, "big") == set(result.shards)
    # A selector on the caller's labels matches the shards too, unless it excludes them.
    labelled = core.list_namespaced_config_map(namespace, label_selector="app=t").items
    assert {i.metadata.name for i in labelled} == {"big", *result.shards}
    only_main = core.list_namespaced_config_map(namespace, label_selector=f"app=t,{NOT_A_SHARD}").items
    assert [i.metadata.name for i in only_main] == ["big"]
    for name in result.shards:
        meta = core.read_namespaced_config_map(name, namespace).metadata
        assert meta.labels["app"] == "t"
        assert {ref.uid for ref in meta.owner_references} == {
            owner_uid,
            core.read_namespaced_config_map("big", namespace).metadata.uid,
        }
    main = core.read_namespaced_config_map("big", namespace)
    index = json.loads(main.data["offsets.json.shards"])
    assert (index["partitions"], index["size"], len(index["shards"])) == (200_000, len(document), len(result.shards))
    assert "offsets.json" not in (main.data or {})

    read = await store.read(namespace, "big", "offsets.json")
    assert read is not None and read.form is StoredForm.SHARDED
    assert read.document == document and read.partitions == 200_000

    # Overwrite with a document that fits gzip inline: the shards go.
    smaller = source_document(20_000, salt="b")
    second = await store.write(namespace, "big", "offsets.json", smaller, owner_references=[owner])
    assert second.form is StoredForm.GZIP and set(second.removed_shards) == set(result.shards)
    assert shard_names(core, namespace, "big") == set()
    main = core.read_namespaced_config_map("big", namespace)
    assert set(main.binary_data or {}) == {"offsets.json.gz"} and "offsets.json.shards" not in (main.data or {})
    read = await store.read(namespace, "big", "offsets.json")
    assert read is not None and read.document == smaller

    # And with a small one: plain, indented like Strimzi's.
    third = await store.write(namespace, "big", "offsets.json", source_document(3))
    assert third.form is StoredForm.PLAIN
    main = core.read_namespaced_config_map("big", namespace)
    assert main.data["offsets.json"].startswith('{\n  "offsets": [') and not main.binary_data
    assert main.metadata.labels["app"] == "t"  # labels of the first write kept


async def test_plain_at_the_size_limit_is_accepted_by_the_api_server(
    kube_api: KubernetesApi, core: Any, namespace: str
) -> None:
    store = OffsetsConfigMapStore(kube_api)
    pad = MAX_PAYLOAD_BYTES - len(b'{"offsets":[],"pad":""}')
    exact = b'{"offsets":[],"pad":"' + b"p" * pad + b'"}'
    assert len(exact) == MAX_PAYLOAD_BYTES
    result = await store.write(namespace, "edge", "offsets.json", exact, pretty=False)
    assert result.form is StoredForm.PLAIN
    assert len(core.read_namespaced_config_map("edge", namespace).data["offsets.json"]) == MAX_PAYLOAD_BYTES
    over = exact[:-2] + b'p"}'
    assert (await store.write(namespace, "edge", "offsets.json", over, pretty=False)).form is StoredForm.GZIP


async def test_altered_shard_is_named_and_gc_follows_the_main_configmap(
    kube_api: KubernetesApi, core: Any, namespace: str
) -> None:
    store = OffsetsConfigMapStore(kube_api, max_payload_bytes=128 * 1024)  # several shards from a small document
    result = await store.write(namespace, "cm", "k.json", source_document(60_000))
    assert result.form is StoredForm.SHARDED and len(result.shards) >= 2
    victim = result.shards[1]
    cm = core.read_namespaced_config_map(victim, namespace)
    ((key, value),) = cm.binary_data.items()
    raw = bytearray(base64.b64decode(value))
    raw[0] ^= 0x01
    core.patch_namespaced_config_map(victim, namespace, {"binaryData": {key: base64.b64encode(raw).decode()}})
    with pytest.raises(
        OffsetsCorrupt, match=rf"ConfigMap cm key k\.json\.shards: shard {victim} \(2 of \d+\) has sha256"
    ):
        await store.read(namespace, "cm", "k.json")

    core.delete_namespaced_config_map("cm", namespace)
    wait_for(
        "shards garbage-collected after their main ConfigMap was deleted",
        lambda: not shard_names(core, namespace, "cm"),
        timeout=60,
    )


# --------------------------------------------------------------------------------------------------
# Chunked PATCH against the real Connect worker
# --------------------------------------------------------------------------------------------------


@pytest.fixture
async def connect_client(connect_url: str) -> AsyncIterator[ConnectClient]:
    async with ConnectClient(ConnectEndpoint(connect_url, timeout_seconds=120)) as client:
        yield client


@pytest.fixture
def stopped_source(connect: httpx.Client) -> Iterator[str]:
    """A MonitorableSourceConnector created STOPPED; its offsets are reset and it is deleted after."""
    name = f"large-offsets-{uuid.uuid4().hex[:8]}"
    config = {"connector.class": MONITORABLE_SOURCE, "tasks.max": "1", "topic": f"{name}-topic"}
    response = connect_send(
        connect, "POST", "/connectors", {"name": name, "config": config, "initial_state": "STOPPED"}
    )
    assert response.status_code == 201, response.text
    wait_connect_state(connect, name, "STOPPED", timeout=180)
    yield name
    connect_send(connect, "PUT", f"/connectors/{name}/stop")
    wait_connect_state(connect, name, "STOPPED", timeout=180)
    # Offsets outlive the connector in the shared worker's topic: tombstone them first. A reset
    # right after a large PATCH can hit Connect's own race (see get_offsets_settled), so retry.
    wait_for("offsets reset", lambda: slow(connect).delete(f"/connectors/{name}/offsets").status_code == 200, 300, 2)
    connect_send(connect, "DELETE", f"/connectors/{name}")


def refused_for_a_rebalance(error: ConnectError) -> bool:
    """The shared worker rebalances whenever another test creates or deletes a connector; it then
    refuses a PATCH (409, or 500 "rebalance is expected") without applying it."""
    return isinstance(error, ConnectConflict) or (isinstance(error, ConnectServerError) and error.is_rebalance)


async def alter_once_settled(
    client: ConnectClient,
    name: str,
    document: bytes,
    limits: ChunkLimits,
    on_chunk_done: Callable[[ChunkProgress], None],
) -> ChunkedAlterResult:
    """The chunked alter, resumed where it stopped while the worker refuses it for a rebalance (what
    the operator does too): every chunk is applied once, so ``on_chunk_done`` sees each once."""
    resume: ChunkResume | None = None
    deadline = time.monotonic() + 120
    while True:
        try:
            return await client.alter_offsets_chunked(
                name, document, limits=limits, resume=resume, on_chunk_done=on_chunk_done
            )
        except ConnectError as error:
            if not refused_for_a_rebalance(error) or error.chunk_failure is None or time.monotonic() > deadline:
                raise
            resume = error.chunk_failure.resume
            await asyncio.sleep(1)


def get_offsets_settled(connect: httpx.Client, name: str, expected: int) -> list[dict[str, Any]]:
    """GET offsets until Connect answers with ``expected`` partitions.

    Connect 4.1.1 answers 500 "Failed to retrieve offsets for source connector" while its offset
    store is still consuming a large write (a ConcurrentModificationException in
    ConnectorOffsetBackingStore.connectorPartitions); the next GET succeeds.
    """

    def check() -> list[dict[str, Any]] | None:
        response = slow(connect).get(f"/connectors/{name}/offsets")
        if response.status_code != 200:
            return None
        offsets: list[dict[str, Any]] = response.json()["offsets"]
        return offsets if len(offsets) == expected else None

    # Generous: on a loaded 2-core machine the shared worker needs minutes to catch up.
    return wait_for(f"{expected} offsets of {name}", check, timeout=300, interval=2)


def slow(connect: httpx.Client) -> httpx.Client:
    """The shared test client with room for Connect's own 90 s request timeout."""
    connect.timeout = httpx.Timeout(120)
    return connect


def by_partition(entries: list[dict[str, Any]]) -> dict[str, Any]:
    return {json.dumps(e["partition"], sort_keys=True): e["offset"] for e in entries}


async def test_chunked_patch_matches_get(
    connect_client: ConnectClient, connect: httpx.Client, stopped_source: str
) -> None:
    document = source_document(15_000)
    progress: list[ChunkProgress] = []
    result = await alter_once_settled(
        connect_client, stopped_source, document, ChunkLimits(max_entries=5_000), progress.append
    )
    assert (result.chunks, result.partitions) == (3, 15_000)
    assert "offsets for this connector have been altered successfully" in result.message
    assert [(p.applied, p.partitions_applied) for p in progress] == [(1, 5_000), (2, 10_000), (3, 15_000)]
    got = get_offsets_settled(connect, stopped_source, 15_000)
    assert by_partition(got) == by_partition(json.loads(document)["offsets"])


async def test_chunk_failure_midway_reports_applied_chunks_and_resumes(
    connect_client: ConnectClient, connect: httpx.Client, stopped_source: str
) -> None:
    document = source_document(12_000, salt="r")
    limits = ChunkLimits(max_entries=5_000)

    paused: list[bool] = []

    def leave_stopped(progress: ChunkProgress) -> None:
        # A real refusal: after the first chunk the connector is paused, so Connect rejects the next.
        if progress.applied == 1:
            assert connect_send(connect, "PUT", f"/connectors/{stopped_source}/pause").status_code == 202
            paused.append(True)
            wait_connect_state(connect, stopped_source, "PAUSED", timeout=180)
            time.sleep(1)  # the herder applies the target state after the status shows it

    # Connect refuses the next chunk either way: 400 once its herder has applied the pause, or 409
    # "stale configuration" while it has not read the pause from the config topic yet (seen in CI).
    # Before the pause, a 409 is the shared worker rebalancing for another test (the first chunk was
    # refused so in a make test with five workers): resumed where it stopped, as the operator does.
    resume: ChunkResume | None = None
    deadline = time.monotonic() + 120
    while True:
        with pytest.raises((ConnectBadRequest, ConnectConflict)) as caught:
            await connect_client.alter_offsets_chunked(
                stopped_source, document, limits=limits, resume=resume, on_chunk_done=leave_stopped
            )
        error = caught.value
        if paused or error.chunk_failure is None or time.monotonic() > deadline:
            break
        resume = error.chunk_failure.resume
        await asyncio.sleep(1)
    assert error.message.startswith(
        ("Connectors must be in the STOPPED state before their offsets can be modified", "Cannot complete request")
    ), error.message
    assert error.chunk_failure is not None and error.chunk_failure.applied == 1
    assert "chunk 2/3 (partitions 5001-10000) failed; chunk 1 of 3 (partitions 1-5000) was applied" in str(error)
    assert len(get_offsets_settled(connect, stopped_source, 5_000)) == 5_000

    assert connect_send(connect, "PUT", f"/connectors/{stopped_source}/stop").status_code == 204
    wait_connect_state(connect, stopped_source, "STOPPED", timeout=180)
    retried = await resume_alter(connect_client, stopped_source, document, limits, error.chunk_failure.resume)
    assert (retried.started_at, retried.requests) == (1, 2)
    got = get_offsets_settled(connect, stopped_source, 12_000)
    assert by_partition(got) == by_partition(json.loads(document)["offsets"])


async def resume_alter(
    client: ConnectClient, name: str, document: bytes, limits: ChunkLimits, resume: ChunkResume
) -> ChunkedAlterResult:
    """Retry the resumed alter until the stop is effective in the herder (the status shows it first),
    or while the worker refuses it for a rebalance; each retry starts from ``resume`` again
    (re-sending an applied chunk only overwrites), so the result counts from there."""
    deadline = time.monotonic() + 120
    while True:
        try:
            return await client.alter_offsets_chunked(name, document, limits=limits, resume=resume)
        except ConnectError as error:
            if not (isinstance(error, ConnectBadRequest) or refused_for_a_rebalance(error)):
                raise
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(1)
