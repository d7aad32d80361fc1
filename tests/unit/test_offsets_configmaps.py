"""Unit tests for clients.offsets_configmaps (the plain / gzip / sharded ConfigMap format).

Runs against the shared in-memory stand-in for KubernetesApi (tests/fakes.py), with the API
server's rules that matter here (1 MiB of values, merge-patch semantics, 409 on an existing name or
a stale resourceVersion). The same behaviour is checked on the real kube-apiserver in
tests/integration/test_large_offsets.py.

Covers: round trip of each form; the form chosen at the exact size boundaries (other keys of the
ConfigMap count); stale forms and shards removed on overwrite; shards carry labels, owner
references (also to the main ConfigMap) and annotations; precedence when a user edited a key in
plain form; a corrupted, truncated, missing or resized shard and a broken index give an error
naming it; gzip bombs are refused; a failed shard write leaves no orphans.
"""

from __future__ import annotations

import base64
import copy
import gzip
import hashlib
import json
import tracemalloc
import zlib
from typing import Any

import pytest

from connect_offsets.clients.kubernetes import KubernetesRejected, KubernetesUnavailable
from connect_offsets.clients.offsets_configmaps import (
    INDEX_SUFFIX,
    SHARD_LABEL,
    OffsetsConfigMapStore,
    OffsetsCorrupt,
    OffsetsKeyMissing,
    OffsetsTooLarge,
    ShardIndex,
    StoredForm,
    name_hash,
)
from tests.fakes import FakeKube

pytestmark = pytest.mark.unit

NS = "ns"
OWNER = {"apiVersion": "connect-offsets.io/v1beta1", "kind": "KafkaConnector", "name": "c", "uid": "owner-uid"}


def document(n: int, width: int = 0) -> bytes:
    """n entries; ``width`` pads partitions with pseudo-random text so gzip can't shrink it much."""
    entries = []
    for i in range(n):
        noise = hashlib.sha256(str(i).encode()).hexdigest() * (width // 64 + 1) if width else ""
        entries.append({"partition": {"file": f"/data/f-{i:07d}{noise[:width]}"}, "offset": {"position": i}})
    return json.dumps({"offsets": entries}, separators=(",", ":")).encode()


@pytest.fixture
def kube() -> FakeKube:
    return FakeKube()


def store(kube: FakeKube, payload: int = 4096) -> OffsetsConfigMapStore:
    return OffsetsConfigMapStore(kube, max_payload_bytes=payload)  # type: ignore[arg-type]


def counted_reads(kube: FakeKube) -> list[str]:
    """The names of the ConfigMaps read from now on (GETs)."""
    reads: list[str] = []
    original = kube.get_configmap

    async def counted(namespace: str, name: str) -> Any:
        reads.append(name)
        return await original(namespace, name)

    kube.get_configmap = counted  # type: ignore[method-assign]
    return reads


async def test_small_document_is_plain_pretty_json(kube: FakeKube) -> None:
    doc = document(3)
    result = await store(kube).write(NS, "cm", "offsets.json", doc, labels={"a": "b"}, owner_references=[OWNER])
    assert (result.form, result.partitions, result.shards) == (StoredForm.PLAIN, 3, ())
    text = kube.objects["cm"]["data"]["offsets.json"]
    assert text.startswith('{\n  "offsets": [') and json.loads(text) == json.loads(doc)
    read = await store(kube).read(NS, "cm", "offsets.json")
    assert read is not None and read.form is StoredForm.PLAIN and json.loads(read.document) == json.loads(doc)
    assert kube.objects["cm"]["metadata"]["ownerReferences"] == [OWNER]


async def test_writing_an_existing_configmap_reads_it_once(kube: FakeKube) -> None:
    """A `list` into its existing ConfigMap: one GET and one PATCH, not a second GET before the
    PATCH (issue 35's protocol floor); a conflict still reads again."""
    await store(kube).write(NS, "cm", "offsets.json", document(3))
    reads = counted_reads(kube)
    await store(kube).write(NS, "cm", "offsets.json", document(4))
    assert reads == ["cm"]
    assert json.loads(kube.objects["cm"]["data"]["offsets.json"])["offsets"] == json.loads(document(4))["offsets"]


async def test_writing_again_starts_from_our_last_write_and_reads_after_anyone_elses_change(kube: FakeKube) -> None:
    """The answer to our own patch is where the next write of that ConfigMap starts (no GET, issue
    35); its resourceVersion guards the patch, so a change by someone else, or a deletion, since
    then makes the write read again and keep what they wrote."""
    offsets = store(kube)
    await offsets.write(NS, "cm", "offsets.json", document(1))  # created
    await offsets.write(NS, "cm", "offsets.json", document(2))  # read, patched, remembered
    reads = counted_reads(kube)
    await offsets.write(NS, "cm", "offsets.json", document(3))
    assert reads == []

    await kube.patch_configmap(NS, "cm", {"data": {"app.properties": "mine"}})  # someone else's key
    await offsets.write(NS, "cm", "offsets.json", document(4))
    assert reads == ["cm"]
    data = kube.objects["cm"]["data"]
    assert data["app.properties"] == "mine" and json.loads(data["offsets.json"]) == json.loads(document(4))

    await kube.delete_configmap(NS, "cm")
    await offsets.write(NS, "cm", "offsets.json", document(5))
    assert reads == ["cm", "cm"] and json.loads(kube.objects["cm"]["data"]["offsets.json"]) == json.loads(document(5))


async def test_only_small_configmaps_are_remembered(kube: FakeKube) -> None:
    offsets = store(kube)
    offsets.remembered.payload_max = 200
    for _ in range(2):
        await offsets.write(NS, "small", "offsets.json", document(1))
        await offsets.write(NS, "large", "offsets.json", document(40))
    assert len(offsets.remembered) == 1 and offsets.remembered.take(NS, "small") is not None
    offsets.remembered.entries = 1
    for name in ("a", "b", "c"):
        await offsets.write(NS, name, "offsets.json", document(1))
        await offsets.write(NS, name, "offsets.json", document(1))
    assert len(offsets.remembered) == 1 and offsets.remembered.take(NS, "c") is not None


@pytest.mark.parametrize("form", [StoredForm.PLAIN, StoredForm.GZIP, StoredForm.SHARDED])
async def test_round_trip_of_every_form(kube: FakeKube, form: StoredForm) -> None:
    doc = {StoredForm.PLAIN: document(20), StoredForm.GZIP: document(400), StoredForm.SHARDED: document(300, 80)}[form]
    s = store(kube)
    result = await s.write(NS, "cm", "k.json", doc, labels={"x": "1"}, owner_references=[OWNER], pretty=False)
    assert result.form is form
    read = await s.read(NS, "cm", "k.json")
    assert read is not None
    assert read.document == doc  # byte for byte (pretty=False keeps the bytes)
    assert read.form is form
    if form is StoredForm.SHARDED:
        assert len(result.shards) >= 3 and read.shards == result.shards
        assert read.partitions == 300
        index = ShardIndex.from_json(kube.objects["cm"]["data"]["k.json" + INDEX_SUFFIX], "test")
        assert index.size == len(doc) and index.sha256 == hashlib.sha256(doc).hexdigest()
        assert index.compressed_size == sum(s.size for s in index.shards)
        # Concatenated in order, the shards are one gzip file of the document.
        stream = b"".join(base64.b64decode(kube.objects[s.name]["binaryData"][s.key]) for s in index.shards)
        assert gzip.decompress(stream) == doc


async def test_form_boundaries_count_the_other_keys(kube: FakeKube) -> None:
    budget = 4096
    await kube.create_configmap_uid(NS, {"metadata": {"name": "cm"}, "data": {"other": "x" * 96}})
    s = store(kube, budget)
    exact = b'{"offsets":[],"pad":"' + b"p" * (budget - 96 - 23) + b'"}'
    assert len(exact) == budget - 96
    assert (await s.write(NS, "cm", "k", exact, pretty=False)).form is StoredForm.PLAIN
    one_more = exact[:-2] + b'p"}'
    result = await s.write(NS, "cm", "k", one_more, pretty=False)
    assert result.form is StoredForm.GZIP
    assert "k" not in kube.objects["cm"]["data"] and kube.objects["cm"]["data"]["other"] == "x" * 96
    read = await s.read(NS, "cm", "k")
    assert read is not None and read.document == one_more


async def test_pretty_form_falls_back_to_the_given_bytes_when_only_they_fit(kube: FakeKube) -> None:
    doc = document(25)  # compact 1.7 KB, indented 3.1 KB
    result = await store(kube, 2048).write(NS, "cm", "k", doc)
    assert result.form is StoredForm.PLAIN and kube.objects["cm"]["data"]["k"] == doc.decode()


async def test_overwrite_removes_stale_forms_and_shards(kube: FakeKube) -> None:
    s = store(kube)
    first = await s.write(NS, "cm", "k", document(300, 80), owner_references=[OWNER])
    assert first.form is StoredForm.SHARDED and kube.shards() == sorted(first.shards)
    second = await s.write(NS, "cm", "k", document(300, 81), owner_references=[OWNER])
    assert second.form is StoredForm.SHARDED and set(second.removed_shards) == set(first.shards)
    assert kube.shards() == sorted(second.shards)
    third = await s.write(NS, "cm", "k", document(400))
    assert third.form is StoredForm.GZIP and kube.shards() == [] and set(third.removed_shards) == set(second.shards)
    assert set(kube.objects["cm"].get("data", {})) == set()
    fourth = await s.write(NS, "cm", "k", document(2))
    assert fourth.form is StoredForm.PLAIN and "k.gz" not in kube.objects["cm"].get("binaryData", {})


async def test_a_refused_shard_delete_is_reported_and_never_fails_the_write(kube: FakeKube) -> None:
    """No RBAC ``delete`` (or a webhook refusing it): the document is written, the stale shards are
    named in the result for a Warning, and the next write with ``delete`` allowed sweeps them."""
    s = store(kube)
    first = await s.write(NS, "cm", "k", document(300, 80), owner_references=[OWNER])

    async def refuse(namespace: str, name: str) -> None:
        raise KubernetesRejected(f"delete ConfigMap {namespace}/{name}: 403 forbidden", 403)

    allowed = kube.delete_configmap
    kube.delete_configmap = refuse  # type: ignore[method-assign]
    second = await s.write(NS, "cm", "k", document(300, 81), owner_references=[OWNER])
    assert second.form is StoredForm.SHARDED and second.removed_shards == ()
    assert set(second.left_shards) == set(first.shards) and "403 forbidden" in second.cleanup_error
    read = await s.read(NS, "cm", "k")
    assert read is not None and read.document == document(300, 81)
    kube.delete_configmap = allowed  # type: ignore[method-assign]
    third = await s.write(NS, "cm", "k", document(300, 82), owner_references=[OWNER])
    assert set(third.removed_shards) == set(first.shards) | set(second.shards) and third.left_shards == ()
    assert kube.shards() == sorted(third.shards)


async def test_shards_of_other_keys_and_configmaps_are_left_alone(kube: FakeKube) -> None:
    s = store(kube)
    a = await s.write(NS, "cm", "a.json", document(300, 80))
    b = await s.write(NS, "cm", "b.json", document(300, 80))
    other = await s.write(NS, "cm2", "a.json", document(300, 80))
    await s.write(NS, "cm", "a.json", document(1))
    assert kube.shards() == sorted(b.shards + other.shards)
    assert a.shards and not set(a.shards) & set(kube.shards())
    read = await s.read(NS, "cm", "b.json")
    assert read is not None and read.form is StoredForm.SHARDED


async def test_shards_carry_labels_owners_and_annotations(kube: FakeKube) -> None:
    result = await store(kube).write(
        NS, "cm", "k", document(300, 80), labels={"team": "a"}, owner_references=[OWNER], annotations={"n": "1"}
    )
    main_uid = kube.objects["cm"]["metadata"]["uid"]
    for position, name in enumerate(result.shards):
        meta = kube.objects[name]["metadata"]
        assert name == f"cm-shard-{meta['annotations']['connect-offsets.io/offsets-shard-generation']}-{position:04d}"
        assert meta["labels"] == {"team": "a", SHARD_LABEL: name_hash("cm")}
        assert meta["ownerReferences"][0] == OWNER
        assert meta["ownerReferences"][1]["kind"] == "ConfigMap" and meta["ownerReferences"][1]["uid"] == main_uid
        assert meta["annotations"]["connect-offsets.io/offsets-shard-configmap"] == "cm"
        assert meta["annotations"]["connect-offsets.io/offsets-shard-key"] == "k"
        assert meta["annotations"]["connect-offsets.io/offsets-shard-position"] == str(position)
    assert kube.objects["cm"]["metadata"]["annotations"] == {"n": "1"}


async def test_plain_edit_by_a_user_wins_over_stale_forms(kube: FakeKube) -> None:
    s = store(kube)
    await s.write(NS, "cm", "k", document(300, 80))
    edited = b'{"offsets":[{"partition":{"file":"a"},"offset":{"position":7}}]}'
    await kube.patch_configmap(NS, "cm", {"data": {"k": edited.decode()}})
    read = await s.read(NS, "cm", "k")
    assert read is not None
    assert (read.form, read.document, read.ignored) == (StoredForm.PLAIN, edited, ("k.shards",))
    # A user-made gzip (kubectl create configmap --from-file=k.gz=...) is read too.
    await kube.create_configmap_uid(
        NS, {"metadata": {"name": "mine"}, "binaryData": {"k.gz": _b64(gzip.compress(edited))}}
    )
    mine = await s.read(NS, "mine", "k")
    assert mine is not None and (mine.form, mine.document) == (StoredForm.GZIP, edited)
    # kubectl stores a file that is not UTF-8 text in binaryData under its own name.
    await kube.create_configmap_uid(NS, {"metadata": {"name": "bin"}, "binaryData": {"k": _b64(edited)}})
    binary = await s.read(NS, "bin", "k")
    assert binary is not None and (binary.form, binary.document) == (StoredForm.PLAIN, edited)


async def test_missing_configmap_and_missing_key(kube: FakeKube) -> None:
    s = store(kube)
    assert await s.read(NS, "nope", "k") is None
    await kube.create_configmap_uid(NS, {"metadata": {"name": "cm"}, "data": {"other.json": "{}"}})
    with pytest.raises(
        OffsetsKeyMissing, match=r"ConfigMap cm has no key k \(nor k.gz or k.shards\); keys: other.json"
    ):
        await s.read(NS, "cm", "k")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


async def _sharded(kube: FakeKube) -> tuple[OffsetsConfigMapStore, list[str]]:
    s = store(kube)
    result = await s.write(NS, "cm", "k", document(300, 80))
    assert len(result.shards) >= 3
    return s, list(result.shards)


async def test_corrupted_shard_is_named(kube: FakeKube) -> None:
    s, shards = await _sharded(kube)
    binary = kube.objects[shards[1]]["binaryData"]
    key = next(iter(binary))
    raw = bytearray(base64.b64decode(binary[key]))
    raw[100] ^= 0xFF
    binary[key] = _b64(bytes(raw))
    with pytest.raises(OffsetsCorrupt) as caught:
        await s.read(NS, "cm", "k")
    message = str(caught.value)
    assert message.startswith(f"ConfigMap cm key k.shards: shard {shards[1]} (2 of {len(shards)}) has sha256 ")
    assert "it was changed" in message


async def test_missing_resized_and_emptied_shards_are_named(kube: FakeKube) -> None:
    s, shards = await _sharded(kube)
    saved = copy.deepcopy(kube.objects[shards[2]])
    del kube.objects[shards[2]]
    with pytest.raises(OffsetsCorrupt, match=rf"shard {shards[2]} \(3 of {len(shards)}\) does not exist"):
        await s.read(NS, "cm", "k")
    kube.objects[shards[2]] = saved
    key = next(iter(saved["binaryData"]))
    kube.objects[shards[2]]["binaryData"][key] = _b64(base64.b64decode(saved["binaryData"][key])[:-1])
    with pytest.raises(OffsetsCorrupt, match=rf"shard {shards[2]} .* bytes, the index says"):
        await s.read(NS, "cm", "k")
    kube.objects[shards[2]]["binaryData"] = {}
    with pytest.raises(OffsetsCorrupt, match=rf"shard {shards[2]} .* has no binaryData key {key}"):
        await s.read(NS, "cm", "k")


async def test_index_errors_are_clear(kube: FakeKube) -> None:
    s, shards = await _sharded(kube)
    index = json.loads(kube.objects["cm"]["data"]["k.shards"])

    async def read_with(changed: dict[str, Any] | str) -> str:
        text = changed if isinstance(changed, str) else json.dumps(changed)
        kube.objects["cm"]["data"]["k.shards"] = text
        with pytest.raises(OffsetsCorrupt) as caught:
            await s.read(NS, "cm", "k")
        return str(caught.value)

    assert "not valid JSON" in await read_with("{")
    assert "this operator reads 1" in await read_with({**index, "version": 2})
    assert "incomplete or mistyped" in await read_with({**index, "shards": [{"name": shards[0]}]})
    assert "ends early" in await read_with({**index, "shards": index["shards"][:-1]})
    assert "lists no shards" in await read_with({**index, "shards": []})
    assert "does not match the index" in await read_with({**index, "sha256": "0" * 64})


async def test_gzip_bombs_are_refused(kube: FakeKube) -> None:
    bomb = gzip.compress(b" " * (2 * 1024 * 1024))
    await kube.create_configmap_uid(NS, {"metadata": {"name": "cm"}, "binaryData": {"k.gz": _b64(bomb)}})
    small = OffsetsConfigMapStore(kube, max_document_bytes=1024 * 1024)  # type: ignore[arg-type]
    with pytest.raises(OffsetsCorrupt, match=r"inflates beyond 1048576 bytes"):
        await small.read(NS, "cm", "k")
    truncated = gzip.compress(b"{}")[:-4]
    kube.objects["cm"]["binaryData"]["k.gz"] = _b64(truncated)
    kube.objects["cm"]["metadata"]["resourceVersion"] = kube._bump()  # a changed ConfigMap is read again
    with pytest.raises(OffsetsCorrupt, match=r"ConfigMap cm key k\.gz: the gzip stream ends early"):
        await small.read(NS, "cm", "k")


def _bomb(inflated: int) -> bytes:
    """gzip of ``inflated`` zero bytes, made a MiB at a time (about 1/1000 of the size)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = bytes(1 << 20)
    parts = [packer.compress(zeros) for _ in range(inflated >> 20)]
    return b"".join([*parts, packer.flush()])


async def test_a_gzip_bomb_is_refused_without_inflating_it_into_memory(kube: FakeKube) -> None:
    """Issue 18: 200 KB that inflate to 200 MiB. Refused as DocumentTooLarge, counted in 1 MiB steps
    and never kept (Python's allocations stay a few MiB); refused again without inflating until
    the ConfigMap changes."""
    bomb = _bomb(200 << 20)
    assert len(bomb) < 300_000
    await kube.create_configmap_uid(NS, {"metadata": {"name": "cm"}, "binaryData": {"k.gz": _b64(bomb)}})
    capped = OffsetsConfigMapStore(kube, max_document_bytes=16 << 20)  # type: ignore[arg-type]
    tracemalloc.start()
    try:
        with pytest.raises(OffsetsTooLarge, match=r"inflates beyond 16777216 bytes") as refused:
            await capped.read(NS, "cm", "k")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, peak
    assert refused.value.reason == "DocumentTooLarge"
    inflations = 0
    real = zlib.decompressobj

    def counting(*args: Any) -> Any:
        nonlocal inflations
        inflations += 1
        return real(*args)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(zlib, "decompressobj", counting)
        with pytest.raises(OffsetsTooLarge):
            await capped.read(NS, "cm", "k")
        assert inflations == 0  # same resourceVersion: the refusal stands, nothing inflated
        small = gzip.compress(b'{"offsets":[]}')
        kube.objects["cm"]["binaryData"]["k.gz"] = _b64(small)
        kube.objects["cm"]["metadata"]["resourceVersion"] = kube._bump()
        read = await capped.read(NS, "cm", "k")
        assert read is not None and read.document == b'{"offsets":[]}' and inflations == 2


async def test_a_failed_shard_write_leaves_no_orphans_and_the_old_document(kube: FakeKube) -> None:
    s = store(kube)
    old = document(2)
    await s.write(NS, "cm", "k", old)
    kube.fail_create_after = kube.creates + 2
    with pytest.raises(KubernetesUnavailable, match="503"):
        await s.write(NS, "cm", "k", document(300, 80))
    assert kube.shards() == []
    read = await s.read(NS, "cm", "k")
    assert read is not None and json.loads(read.document) == json.loads(old)


async def test_decoded_documents_and_long_names(kube: FakeKube) -> None:
    obj = json.loads(document(300, 80))
    name = "n" * 250
    result = await store(kube).write(NS, name, "k", obj)
    assert result.form is StoredForm.SHARDED and result.partitions == 300
    assert all(len(shard) <= 253 for shard in result.shards)
    read = await store(kube).read(NS, name, "k")
    assert read is not None and json.loads(read.document) == obj


@pytest.mark.parametrize("doc", [document(3), document(400), document(300, 80)], ids=["plain", "gzip", "sharded"])
async def test_an_existing_configmap_keeps_its_labels_and_gets_no_owner(kube: FakeKube, doc: bytes) -> None:
    """Listing into an application's ConfigMap: an owner reference would let garbage collection
    delete it with the KafkaConnector, and the operator's labels would overwrite the app's."""
    app_labels = {"app.kubernetes.io/managed-by": "helm", "team": "a"}
    await kube.create_configmap_uid(
        NS, {"metadata": {"name": "cm", "labels": dict(app_labels)}, "data": {"app.properties": "x=1"}}
    )
    s = store(kube, payload=2048)
    operator_labels = {"app.kubernetes.io/managed-by": "connect-offsets-operator", "a": "b"}
    result = await s.write(NS, "cm", "offsets.json", doc, labels=operator_labels, owner_references=[OWNER])
    meta = kube.objects["cm"]["metadata"]
    assert meta["labels"] == app_labels
    assert "ownerReferences" not in meta
    assert meta.get("annotations", {}) == {}
    assert kube.objects["cm"]["data"]["app.properties"] == "x=1"
    read = await s.read(NS, "cm", "offsets.json")
    assert read is not None and json.loads(read.document) == json.loads(doc)
    # Shards are the operator's own: they carry its labels, its owner and the main ConfigMap's.
    for shard in result.shards:
        shard_meta = kube.objects[shard]["metadata"]
        assert shard_meta["labels"]["a"] == "b"
        assert [o["uid"] for o in shard_meta["ownerReferences"]] == ["owner-uid", meta["uid"]]


async def test_a_configmap_created_by_the_store_keeps_its_labels_and_owner_on_rewrite(kube: FakeKube) -> None:
    s = store(kube)
    await s.write(NS, "cm", "offsets.json", document(3), labels={"a": "b"}, owner_references=[OWNER])
    await s.write(NS, "cm", "offsets.json", document(4), labels={"a": "b"}, owner_references=[OWNER])
    meta = kube.objects["cm"]["metadata"]
    assert meta["labels"] == {"a": "b"}
    assert meta["ownerReferences"] == [OWNER]
