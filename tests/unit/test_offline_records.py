"""offline/records.py, documents.py, offsets_file.py: keys and values byte-identical to Connect's,
murmur2, the export and import documents, the standalone offsets file.

Expected bytes below were printed by Kafka 4.1.1's own ``JsonConverter`` (schemas off) and
``Utils.murmur2`` on JDK 17; tests/integration/test_offline_cli.py re-checks hundreds of random
maps against the real converter, so these are regression anchors, not the only proof.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from connect_offsets.offsets import OffsetsValidationError
from connect_offsets.tools.offline.documents import parse_import_document, render_export
from connect_offsets.tools.offline.offsets_file import OffsetsFileError, decode_offsets_file, encode_offsets_file
from connect_offsets.tools.offline.records import (
    KafkaPosition,
    StoredRecord,
    decode_key,
    decode_value,
    encode_connect_json,
    encode_key,
    encode_value,
    java_double_str,
    java_hashmap_order,
    java_string_hash,
    last_per_key,
    latest,
    murmur2,
    murmur2_partition,
)

pytestmark = pytest.mark.unit


# --------------------------------------------------------------------------- encoding


def test_key_matches_java_for_mixed_types_escapes_and_order() -> None:
    source = (
        '["c",{"zeta":1.5e-7,"b":1e20,"a":"x\\u001f\\u0001\\t/\u00e9","n":10,"f":1.0,'
        '"g":0.001,"h":1e7,"i":123456.789,"j":true,"k":null}]'
    )
    java = (
        '["c",{"zeta":1.5E-7,"a":"x\\u001F\\u0001\\t/\u00e9","b":1.0E20,"f":1.0,"g":0.001,"h":1.0E7,'
        '"i":123456.789,"j":true,"k":null,"n":10}]'
    )
    assert encode_connect_json(json.loads(source)) == java


def test_file_stream_partition_key_uses_hashmap_order_not_input_order() -> None:
    assert encode_key("c", {"filename": "/tmp/x", "q": 1}) == b'["c",{"q":1,"filename":"/tmp/x"}]'
    assert encode_key("c", {"q": 1, "filename": "/tmp/x"}) == b'["c",{"q":1,"filename":"/tmp/x"}]'


def test_value_and_tombstone() -> None:
    assert encode_value({"position": 42}) == b'{"position":42}'
    assert encode_value(None) is None


@pytest.mark.parametrize(
    ("value", "java"),
    [
        (0.0, "0.0"),
        (-0.0, "-0.0"),
        (1.0, "1.0"),
        (0.001, "0.001"),
        (9.99e-4, "9.99E-4"),
        (1234567.0, "1234567.0"),
        (1e7, "1.0E7"),
        (12345678.9, "1.23456789E7"),
        (-2.5e-10, "-2.5E-10"),
        (0.1, "0.1"),
        (100.5, "100.5"),
    ],
)
def test_double_to_string(value: float, java: str) -> None:
    assert java_double_str(value) == java


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), 2**63, -(2**63) - 1])
def test_unstorable_numbers_are_refused_with_the_path(bad: float) -> None:
    with pytest.raises(ValueError, match=r"\$\[1\]\.p"):
        encode_connect_json(["c", {"p": bad}])


def test_string_escapes_follow_jackson() -> None:
    assert (
        encode_connect_json('"\\\b\f\n\r\t\x00\x1f\x7f/\u2028é') == '"\\"\\\\\\b\\f\\n\\r\\t\\u0000\\u001F\x7f/\u2028é"'
    )


def test_lone_surrogate_is_refused() -> None:
    with pytest.raises(ValueError, match="surrogate"):
        encode_key("c", {"f": "\ud800"})


def test_string_hash_is_javas() -> None:
    # "Aa" and "BB" collide in Java (2112); "polygenelubricants" hashes to Integer.MIN_VALUE.
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    assert java_string_hash("polygenelubricants") == 0x80000000
    assert java_string_hash("\U0001f600") == (31 * 0xD83D + 0xDE00) & 0xFFFFFFFF  # UTF-16 code units


def test_hashmap_collisions_keep_insertion_order() -> None:
    assert java_hashmap_order(["BB", "Aa"]) == ["BB", "Aa"]
    assert java_hashmap_order(["Aa", "BB"]) == ["Aa", "BB"]


def test_hashmap_resizes_past_twelve_entries() -> None:
    keys = [f"k{i}" for i in range(13)]
    # with 13 entries the table has 32 buckets: the order is by (spread hash & 31)
    ordered = java_hashmap_order(keys)
    buckets = [(java_string_hash(k) ^ (java_string_hash(k) >> 16)) & 31 for k in ordered]
    assert buckets == sorted(buckets)
    small = java_hashmap_order(keys[:12])
    buckets12 = [(java_string_hash(k) ^ (java_string_hash(k) >> 16)) & 15 for k in small]
    assert buckets12 == sorted(buckets12)


@given(st.lists(st.text(max_size=6), max_size=40, unique=True))
def test_hashmap_order_is_a_permutation(keys: list[str]) -> None:
    assert sorted(java_hashmap_order(keys)) == sorted(keys)


# --------------------------------------------------------------------------- murmur2


@pytest.mark.parametrize(
    ("data", "expected"),
    [  # Kafka's UtilsTest.testMurmur2 vectors
        (b"21", -973932308),
        (b"foobar", -790332482),
        (b"a-little-bit-long-string", -985981536),
        (b"a-little-bit-longer-string", -1486304829),
        (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
        (b"abc", 479470107),
    ],
)
def test_murmur2_matches_kafka(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


def test_partition_is_positive_modulo() -> None:
    key = b'["c",{}]'
    assert murmur2(key) < 0
    assert murmur2_partition(key, 25) == (murmur2(key) & 0x7FFFFFFF) % 25
    with pytest.raises(ValueError):
        murmur2_partition(key, 0)


# --------------------------------------------------------------------------- decoding


def test_decode_key_keeps_raw_bytes_and_skips_what_connect_skips() -> None:
    raw = b'["c",{"filename":"/x"}]'
    key = decode_key(raw)
    assert key is not None and key.connector == "c" and key.partition == {"filename": "/x"} and key.raw == raw
    for bad in (None, b"not json", b'["c"]', b'["c",null]', b"[1,{}]", b'{"a":1}', b"\xff"):
        assert decode_key(bad) is None


def test_decode_value() -> None:
    assert decode_value(b'{"position":3}') == {"position": 3}
    assert decode_value(None) is None
    with pytest.raises(ValueError, match="not a JSON object"):
        decode_value(b"[1]")


# --------------------------------------------------------------------------- export documents


def _record(connector: str, partition: dict[str, object], offset: dict[str, object] | None, at: int) -> StoredRecord:
    key = decode_key(encode_key(connector, partition))  # type: ignore[arg-type]
    assert key is not None
    return StoredRecord(key, offset, KafkaPosition("connect-offsets", 3, at, 1700000000000 + at))


@given(
    st.lists(
        st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 4), st.one_of(st.none(), st.integers(0, 99))),
        max_size=60,
    )
)
def test_last_per_key_is_what_compaction_leaves(writes: list[tuple[str, int, int | None]]) -> None:
    """The streamed reduction keeps one record per key (tombstones too) and loses nothing ``latest`` needs."""
    records = [_record(c, {"f": str(p)}, None if o is None else {"p": o}, i) for i, (c, p, o) in enumerate(writes)]
    reduced = last_per_key(iter(records))
    assert len(reduced) == len({r.key.raw for r in records})
    assert latest(reduced) == latest(records)
    for kept in reduced:
        assert kept is [r for r in records if r.key.raw == kept.key.raw][-1]


def test_latest_export_drops_tombstones_and_history_keeps_everything() -> None:
    records = [
        _record("a", {"f": "x"}, {"p": 1}, 0),
        _record("b", {"f": "y"}, {"p": 9}, 1),
        _record("a", {"f": "x"}, {"p": 2}, 2),
        _record("a", {"f": "z"}, {"p": 5}, 3),
        _record("a", {"f": "z"}, None, 4),
    ]
    latest = render_export(records, connectors=["a", "missing"], history=False)
    assert latest == {"a": [{"partition": {"f": "x"}, "offset": {"p": 2}}], "missing": []}
    history = render_export(records, connectors=["a"], history=True)
    assert [e["offset"] for e in history["a"]] == [{"p": 1}, {"p": 2}, {"p": 5}, None]
    assert history["a"][3]["kafka"] == {
        "topic": "connect-offsets",
        "partition": 3,
        "offset": 4,
        "timestamp": 1700000000004,
    }
    kip875 = render_export(records, connectors=["b"], history=False, kip875=True)
    assert kip875 == {"b": {"offsets": [{"partition": {"f": "y"}, "offset": {"p": 9}}]}}


# --------------------------------------------------------------------------- import documents


def test_import_accepts_kip199_kip875_and_history_shapes() -> None:
    doc = parse_import_document(
        json.dumps(
            {
                "a": [{"partition": {"f": "x"}, "offset": {"p": 1}}, {"partition": {"f": "y"}, "offset": None}],
                "b": {"offsets": [{"partition": {"f": "z"}, "offset": {"p": 2}}]},
                "c": [{"partition": {"f": "w"}, "offset": None, "kafka": {"topic": "t", "partition": 0}}],
            }
        )
    )
    assert doc.names == ["a", "b", "c"] and len(doc) == 4
    assert doc.connectors[0].changes[1].offset is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[]", r"\$: expected an object"),
        ("{}", "no connectors"),
        ('{"a": 3}', "a: expected a list"),
        ('{"a": [{"partition": {"f": "x"}}]}', r"a\[0\]\.offset: missing"),
        ('{"a": [{"partition": {"f": {"n": 1}}, "offset": null}]}', r"a\[0\]\.partition\.f"),
        ('{"a": {"offsets": [1]}}', r"a\.offsets\[0\]"),
        ('{"my conn": [{"partition": null, "offset": null}]}', r'"my conn"\[0\]\.partition'),
        ('{"a": [], "a": []}', "appears twice"),
        ("{", "not valid JSON"),
        ('{"a": [{"partition": {"p": NaN}, "offset": null}]}', "not valid JSON"),
        ('{"a": [{"partition": {"p": 99999999999999999999}, "offset": null}]}', "does not fit a Java long"),
    ],
)
def test_bad_import_documents_name_the_place(text: str, message: str) -> None:
    with pytest.raises(OffsetsValidationError, match=message):
        parse_import_document(text)


def test_history_duplicates_are_refused_with_a_hint() -> None:
    entry = {"partition": {"f": "x"}, "offset": {"p": 1}}
    with pytest.raises(OffsetsValidationError, match=r"a\[1\]\.partition: duplicate of a\[0\].*--from-beginning"):
        parse_import_document(json.dumps({"a": [entry, entry]}))


# --------------------------------------------------------------------------- standalone offsets file

#: Written by JDK 17's ObjectOutputStream for a HashMap with one offset and one tombstone.
JAVA_FILE = bytes.fromhex(
    "aced0005737200116a6176612e7574696c2e486173684d61700507dac1c31660d103000246000a6c6f6164466163746f72"
    "4900097468726573686f6c6478703f4000000000000c770800000010000000027572"
    "00025b42acf317f8060854e002000078700000001"
    "75b2263222c7b2266696c656e616d65223a222f79227d5d707571007e00020000001"
    "75b2263222c7b2266696c656e616d65223a222f78227d5d7571007e00020000000e7b22706f736974696f6e223a357d78"
)
JAVA_EMPTY_FILE = bytes.fromhex(
    "aced0005737200116a6176612e7574696c2e486173684d61700507dac1c31660d103000246000a6c6f6164466163746f72"
    "4900097468726573686f6c6478703f400000000000007708000000100000000078"
)


def test_offsets_file_matches_java_bytes() -> None:
    entries = {b'["c",{"filename":"/y"}]': None, b'["c",{"filename":"/x"}]': b'{"position":5}'}
    assert decode_offsets_file(JAVA_FILE) == entries
    assert encode_offsets_file(entries) == JAVA_FILE
    assert encode_offsets_file({}) == JAVA_EMPTY_FILE
    assert decode_offsets_file(JAVA_EMPTY_FILE) == {} and decode_offsets_file(b"") == {}


def test_offsets_file_round_trips_many_binary_entries() -> None:
    entries: dict[bytes, bytes | None] = {bytes([i % 256]) * (i + 1): bytes(range(256)) for i in range(300)}
    entries[b"tomb"] = None
    assert decode_offsets_file(encode_offsets_file(entries)) == entries


def test_foreign_file_is_refused() -> None:
    with pytest.raises(OffsetsFileError, match="not a Java-serialised HashMap"):
        decode_offsets_file(b"{not java}")
    with pytest.raises(OffsetsFileError):
        decode_offsets_file(JAVA_FILE[:60])
