"""Unit tests for models.chunking and ConnectClient.alter_offsets_chunked (MockTransport only).

Covers: chunk boundaries respect both limits and are deterministic (hypothesis); the chunks
concatenate to the document in order; an oversized entry travels alone; an empty document is
one request; resuming skips exactly the applied chunks and only for the same fingerprint;
restore_entries adds nulls for partitions missing from the backup; invalid JSON is reported;
a failure mid-way keeps the error class and Connect's message and says which chunks were applied.
The real-server counterparts are in tests/integration/test_large_offsets.py.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connect_offsets.clients.connect import (
    ConnectBadRequest,
    ConnectClient,
    ConnectEndpoint,
    ConnectHTTPError,
    ConnectServerError,
    ConnectUnavailable,
)
from connect_offsets.offsets.chunking import (
    ChunkFailure,
    ChunkLimits,
    ChunkProgress,
    ChunkResume,
    OffsetsStreamError,
    count_entries,
    document_entries,
    iter_chunks,
    plan_chunks,
    restore_entries,
    serialize_entry,
)

pytestmark = pytest.mark.unit


def doc(n: int, offset: int = 0) -> bytes:
    entries = [{"partition": {"file": f"f-{i:05d}"}, "offset": {"position": i + offset}} for i in range(n)]
    return json.dumps({"offsets": entries}).encode()


def bodies(document: bytes, limits: ChunkLimits, start: int = 0) -> list[bytes]:
    source = document_entries(document)
    return [c.body for c in iter_chunks(source, plan_chunks(source, limits), start)]


primitive = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)
entry_strategy = st.fixed_dictionaries(
    {
        "partition": st.dictionaries(st.text(min_size=1, max_size=8), primitive, min_size=1, max_size=3),
        "offset": st.one_of(st.none(), st.dictionaries(st.text(min_size=1, max_size=8), primitive, max_size=3)),
    }
)


@settings(max_examples=150, deadline=None)
@given(
    entries=st.lists(entry_strategy, max_size=60),
    max_entries=st.integers(min_value=1, max_value=12),
    max_bytes=st.integers(min_value=20, max_value=600),
)
def test_chunks_respect_limits_keep_order_and_are_deterministic(
    entries: list[dict[str, Any]], max_entries: int, max_bytes: int
) -> None:
    document = json.dumps({"offsets": entries}, ensure_ascii=False).encode()
    limits = ChunkLimits(max_entries=max_entries, max_bytes=max_bytes)
    source = document_entries(document)
    plan = plan_chunks(source, limits)
    chunks = list(iter_chunks(source, plan))

    assert plan == plan_chunks(document_entries(document), limits)  # same boundaries every time
    assert plan.entries == len(entries)
    rebuilt: list[Any] = []
    for chunk, span in zip(chunks, plan.spans, strict=True):
        got = json.loads(chunk.body)["offsets"]
        assert len(got) == span.count <= max_entries
        assert len(chunk.body) == span.size
        # Only a single entry that is larger than the limit on its own may exceed max_bytes.
        assert len(chunk.body) <= max_bytes or span.count == 1
        rebuilt += got
    assert rebuilt == json.loads(document)["offsets"]
    assert [s.start for s in plan.spans] == [sum(s.count for s in plan.spans[:i]) for i in range(len(plan))]


def test_boundaries_fall_exactly_at_the_entry_limit() -> None:
    plan = plan_chunks(document_entries(doc(25)), ChunkLimits(max_entries=10, max_bytes=10**6))
    assert [(s.start, s.count) for s in plan.spans] == [(0, 10), (10, 10), (20, 5)]
    assert plan.describe(1) == "chunk 2/3 (partitions 11-20)"


def test_byte_limit_counts_the_envelope_and_commas() -> None:
    entry = {"partition": {"f": "a"}, "offset": {"p": 1}}
    size = len(serialize_entry(entry))
    document = json.dumps({"offsets": [entry] * 4}).encode()
    # Exactly two entries fit: {"offsets":[ e , e ]} = 12 + size + 1 + size + 2.
    limits = ChunkLimits(max_entries=100, max_bytes=12 + 2 * size + 1 + 2)
    plan = plan_chunks(document_entries(document), limits)
    assert [s.count for s in plan.spans] == [2, 2]
    limits = ChunkLimits(max_entries=100, max_bytes=12 + 2 * size + 1 + 1)
    assert [s.count for s in plan_chunks(document_entries(document), limits).spans] == [1, 1, 1, 1]


def test_an_entry_larger_than_max_bytes_is_sent_alone() -> None:
    big = {"partition": {"file": "x" * 500}, "offset": {"position": 1}}
    small = {"partition": {"file": "y"}, "offset": {"position": 2}}
    document = json.dumps({"offsets": [small, big, small]}).encode()
    chunks = bodies(document, ChunkLimits(max_entries=10, max_bytes=200))
    assert [len(json.loads(b)["offsets"]) for b in chunks] == [1, 1, 1]
    assert json.loads(chunks[1])["offsets"] == [big]


def test_empty_document_is_one_empty_chunk() -> None:
    plan = plan_chunks(document_entries(b'{"offsets": []}'))
    assert len(plan) == 1 and plan.entries == 0
    assert [c.body for c in iter_chunks(document_entries(b'{"offsets": []}'), plan)] == [b'{"offsets":[]}']
    assert plan.describe(0) == "chunk 1/1 (no partitions)"


def test_resume_skips_applied_chunks_only_for_the_same_plan() -> None:
    limits = ChunkLimits(max_entries=4)
    document = doc(10)
    plan = plan_chunks(document_entries(document), limits)
    assert bodies(document, limits, start=2) == bodies(document, limits)[2:]
    assert ChunkResume(plan.fingerprint, 2).start_for(plan) == 2
    other = plan_chunks(document_entries(doc(10, offset=1)), limits)
    assert other.fingerprint != plan.fingerprint
    assert ChunkResume(plan.fingerprint, 2).start_for(other) == 0
    # Same document, other limits: other boundaries, so no resume either.
    assert ChunkResume(plan.fingerprint, 2).start_for(plan_chunks(document_entries(document), ChunkLimits(5))) == 0
    assert list(iter_chunks(document_entries(document), plan, start_chunk=len(plan))) == []
    with pytest.raises(ValueError, match="start_chunk must be between 0 and 3"):
        list(iter_chunks(document_entries(document), plan, start_chunk=4))


def test_a_changed_source_is_detected_while_sending() -> None:
    plan = plan_chunks(document_entries(doc(10)), ChunkLimits(max_entries=4))
    with pytest.raises(ValueError, match=r"ended inside chunk 3/3"):
        list(iter_chunks(document_entries(doc(9)), plan))


def test_floats_big_integers_and_unicode_survive_the_round_trip() -> None:
    entries = [
        {"partition": {"t": "zürich/ß", "n": 2**70}, "offset": {"x": 1.5e-07, "y": 1e20, "z": None, "b": True}},
    ]
    document = json.dumps({"offsets": entries}, ensure_ascii=False).encode()
    (body,) = bodies(document, ChunkLimits())
    assert json.loads(body)["offsets"] == entries
    assert "zürich".encode() in body  # not \\u-escaped: the same bytes Jackson would read


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        (b'{"offsets": [{"partition": {}', "premature EOF"),
        (b"\xff\xfe", "invalid char"),
    ],
)
def test_invalid_json_is_reported(document: bytes, expected: str) -> None:
    with pytest.raises(OffsetsStreamError, match=f"not valid JSON: .*{expected}"):
        count_entries(document)


def test_numbers_beyond_a_double_are_refused_with_their_position() -> None:
    document = (
        b'{"offsets": [{"partition": {"f": "a"}, "offset": {"p": 1}}, {"partition": {"f": 1e400}, "offset": null}]}'
    )
    with pytest.raises(OffsetsStreamError, match=r"offsets\[1\] cannot be sent: the number 1E\+400 is out of range"):
        plan_chunks(document_entries(document))


def test_restore_entries_nulls_partitions_missing_from_the_backup() -> None:
    backup = json.dumps(
        {"offsets": [{"partition": {"f": "a"}, "offset": {"p": 1}}, {"partition": {"f": "b"}, "offset": {"p": 2}}]}
    ).encode()
    current = json.dumps(
        {
            "offsets": [
                {"partition": {"f": "b"}, "offset": {"p": 9}},
                {"partition": {"f": "c"}, "offset": {"p": 3}},
                {"partition": {"f": 1}, "offset": {"p": 3}},  # type differs from any backup key
            ]
        }
    ).encode()
    entries = list(restore_entries(backup, current)())
    assert entries == [
        {"partition": {"f": "a"}, "offset": {"p": 1}},
        {"partition": {"f": "b"}, "offset": {"p": 2}},
        {"partition": {"f": "c"}, "offset": None},
        {"partition": {"f": 1}, "offset": None},
    ]
    # Key order inside a partition does not make it a different partition.
    reordered = json.dumps({"offsets": [{"partition": {"y": 1, "x": 2}, "offset": {"p": 1}}]}).encode()
    same = json.dumps({"offsets": [{"partition": {"x": 2, "y": 1}, "offset": {"p": 5}}]}).encode()
    assert list(restore_entries(reordered, same)()) == [{"partition": {"y": 1, "x": 2}, "offset": {"p": 1}}]


def test_failure_rendering() -> None:
    failure = ChunkFailure("f" * 32, 2, 5, 20, 45, "chunk 3/5 (partitions 21-30)")
    assert failure.render() == (
        "chunk 3/5 (partitions 21-30) failed; chunks 1-2 of 5 (partitions 1-20) were applied; "
        "a retry of the same document resumes at chunk 3"
    )
    assert failure.resume == ChunkResume("f" * 32, 2)
    assert (failure.applied, failure.failed_chunk) == (2, 2)
    first = ChunkFailure("f", 0, 5, 0, 45, "chunk 1/5 (partitions 1-10)")
    assert "no chunk of 5 was applied" in first.render()
    assert "resumes at chunk 1" in first.render()


# --------------------------------------------------------------------------------------------------
# ConnectClient.alter_offsets_chunked against MockTransport (error paths a real server can't be made
# to produce on demand; the real-Connect test is in tests/integration/test_large_offsets.py)
# --------------------------------------------------------------------------------------------------

OK = {"message": "The Connect framework-managed offsets for this connector have been altered successfully."}


class Patches:
    """Answers PATCH requests in turn; records the bodies."""

    def __init__(self, *answers: httpx.Response | Exception) -> None:
        self.answers = list(answers)
        self.bodies: list[Any] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        assert request.method == "PATCH"
        assert request.headers["content-type"] == "application/json"
        self.bodies.append(json.loads(request.content))
        answer = self.answers.pop(0) if self.answers else httpx.Response(200, json=OK)
        if isinstance(answer, Exception):
            raise answer
        return answer


def client_for(handler: Patches) -> ConnectClient:
    return ConnectClient(ConnectEndpoint("http://connect:8083"), transport=httpx.MockTransport(handler))


async def test_chunked_alter_sends_every_chunk_and_reports_progress() -> None:
    handler = Patches()
    seen: list[ChunkProgress] = []

    async def record(progress: ChunkProgress) -> None:
        seen.append(progress)

    async with client_for(handler) as client:
        result = await client.alter_offsets_chunked(
            "src", doc(25), limits=ChunkLimits(max_entries=10), on_chunk_done=record
        )
    assert [len(b["offsets"]) for b in handler.bodies] == [10, 10, 5]
    assert [e for b in handler.bodies for e in b["offsets"]] == json.loads(doc(25))["offsets"]
    assert (result.chunks, result.partitions, result.started_at, result.requests) == (3, 25, 0, 3)
    assert result.message == OK["message"]
    assert [(p.applied, p.partitions_applied, p.partitions) for p in seen] == [(1, 10, 25), (2, 20, 25), (3, 25, 25)]
    assert seen[-1].fingerprint == result.fingerprint and seen[-1].chunks == 3


async def test_small_document_is_a_single_patch_with_the_same_body() -> None:
    handler = Patches()
    async with client_for(handler) as client:
        result = await client.alter_offsets_chunked("src", doc(3))
    assert handler.bodies == [json.loads(doc(3))]
    assert result.chunks == 1


async def test_document_as_text_is_accepted() -> None:
    handler = Patches()
    async with client_for(handler) as client:
        result = await client.alter_offsets_chunked("src", doc(12).decode(), limits=ChunkLimits(max_entries=5))
    assert [len(b["offsets"]) for b in handler.bodies] == [5, 5, 2] and result.partitions == 12


async def test_failure_midway_keeps_class_and_message_and_a_retry_resumes() -> None:
    timeout = "Request timed out. The worker is currently writing offsets, which began at 2026-01-01T00:00:00Z."
    handler = Patches(
        httpx.Response(200, json=OK),
        httpx.Response(200, json=OK),
        httpx.Response(500, json={"error_code": 500, "message": timeout}),
    )
    async with client_for(handler) as client:
        with pytest.raises(ConnectServerError) as caught:
            await client.alter_offsets_chunked("src", doc(45), limits=ChunkLimits(max_entries=10))
        error = caught.value
        assert error.message == timeout  # Connect's message verbatim
        assert error.retryable and error.is_request_timeout
        assert error.chunk_failure is not None
        assert error.chunk_failure.applied == 2
        assert str(error) == (
            f"PATCH /connectors/src/offsets: 500 {timeout} [chunk 3/5 (partitions 21-30) failed; "
            "chunks 1-2 of 5 (partitions 1-20) were applied; a retry of the same document resumes at chunk 3]"
        )
        assert isinstance(error.__cause__, ConnectServerError) and error.__cause__.chunk_failure is None

        handler.bodies.clear()
        result = await client.alter_offsets_chunked(
            "src", doc(45), limits=ChunkLimits(max_entries=10), resume=error.chunk_failure.resume
        )
    assert [b["offsets"][0]["partition"]["file"] for b in handler.bodies] == ["f-00020", "f-00030", "f-00040"]
    assert (result.started_at, result.requests, result.chunks) == (2, 3, 5)


async def test_rejection_and_transport_errors_keep_their_classes() -> None:
    stopped = "Connectors must be in the STOPPED state before their offsets can be modified."
    handler = Patches(httpx.Response(400, json={"error_code": 400, "message": stopped}))
    async with client_for(handler) as client:
        with pytest.raises(ConnectBadRequest) as caught:
            await client.alter_offsets_chunked("src", doc(15), limits=ChunkLimits(max_entries=10))
    assert caught.value.retryable and caught.value.not_stopped  # nothing changed: planned again, fresh
    assert caught.value.status_code == 400 and caught.value.message == stopped
    assert "no chunk of 2 was applied" in str(caught.value)

    handler = Patches(httpx.Response(200, json=OK), httpx.ConnectError("connection refused"))
    async with client_for(handler) as client:
        with pytest.raises(ConnectUnavailable) as unavailable:
            await client.alter_offsets_chunked("src", doc(15), limits=ChunkLimits(max_entries=10))
    assert unavailable.value.retryable
    assert unavailable.value.chunk_failure is not None and unavailable.value.chunk_failure.applied == 1


async def test_a_resume_from_another_document_starts_over() -> None:
    handler = Patches()
    async with client_for(handler) as client:
        result = await client.alter_offsets_chunked(
            "src", doc(25), limits=ChunkLimits(max_entries=10), resume=ChunkResume("0" * 32, 2)
        )
    assert result.started_at == 0 and len(handler.bodies) == 3


async def test_restore_source_is_chunked_like_a_document() -> None:
    handler = Patches()
    backup = doc(5)
    current = doc(8, offset=100)
    async with client_for(handler) as client:
        result = await client.alter_offsets_chunked(
            "src", restore_entries(backup, current), limits=ChunkLimits(max_entries=4)
        )
    sent = [e for b in handler.bodies for e in b["offsets"]]
    assert result.partitions == 8
    assert sent[:5] == json.loads(backup)["offsets"]
    assert sent[5:] == [{"partition": {"file": f"f-{i:05d}"}, "offset": None} for i in range(5, 8)]


def test_partition_identity_keeps_json_types_apart() -> None:
    from connect_offsets.offsets.chunking import canonical_partition_digest

    values = [1, 1.0, True, "1", None, 2**70]
    digests = {canonical_partition_digest({"p": v}) for v in values}
    assert len(digests) == len(values)
    assert canonical_partition_digest({"a": 1, "b": "x"}) == canonical_partition_digest({"b": "x", "a": 1})


# --------------------------------------------------------------------------------------------------
# ConnectClient.get_offsets_raw: streamed into one buffer; errors mapped like every other call
# --------------------------------------------------------------------------------------------------


def raw_client(handler: Any) -> ConnectClient:
    return ConnectClient(ConnectEndpoint("http://connect:8083"), transport=httpx.MockTransport(handler))


async def test_raw_get_streams_large_bodies_unchanged() -> None:
    body = doc(20_000)
    async with raw_client(lambda request: httpx.Response(200, content=body)) as client:
        assert await client.get_offsets_raw("src") == body


async def test_raw_get_maps_errors_with_connects_message() -> None:
    message = "Failed to retrieve offsets for source connector src"
    answers = iter(
        [
            httpx.Response(500, json={"error_code": 500, "message": message}),
            httpx.Response(404, json={"error_code": 404, "message": "Connector src not found"}),
        ]
    )
    async with raw_client(lambda request: next(answers)) as client:
        with pytest.raises(ConnectServerError) as server:
            await client.get_offsets_raw("src")
        assert server.value.message == message and server.value.retryable
        assert str(server.value) == f"GET /connectors/src/offsets: 500 {message}"
        with pytest.raises(ConnectHTTPError, match="404 Connector src not found"):
            await client.get_offsets_raw("src")

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused")

    async with raw_client(refuse) as client:
        with pytest.raises(ConnectUnavailable, match="GET /connectors/src/offsets: ConnectError: connection refused"):
            await client.get_offsets_raw("src")


@pytest.mark.parametrize("read_size", [1, 3, 7, 256 * 1024])
def test_text_documents_stream_like_their_bytes(monkeypatch: pytest.MonkeyPatch, read_size: int) -> None:
    """A str document is encoded a slice at a time as ijson reads it (no bytes copy of the whole);
    slices end between characters, so multi-byte characters are never split."""
    from connect_offsets.offsets import chunking

    monkeypatch.setattr(chunking, "_READ_SIZE", read_size)
    text = json.dumps(
        {
            "offsets": [
                {"partition": {"filename": f"/data/ü€😀/{i}.log", "n": 1.5}, "offset": {"position": i * 2**40}}
                for i in range(20)
            ]
        },
        ensure_ascii=False,
    )
    from_text = list(document_entries(text)())
    assert from_text == list(document_entries(text.encode())())
    assert [e["partition"]["filename"] for e in from_text] == [f"/data/ü€😀/{i}.log" for i in range(20)]
    assert plan_chunks(document_entries(text)) == plan_chunks(document_entries(text.encode()))
