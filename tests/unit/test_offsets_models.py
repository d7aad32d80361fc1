"""Unit tests for ``connect_offsets.offsets``.

Covers:
* the error type: paths, message rendering, the 10-problem cut-off;
* generic parsing: JSON errors with line/column, NaN/Infinity, root shape, unknown keys, empty lists,
  entry shape, missing ``offset``, ``offset: null``, nested values, booleans vs integers, duplicates,
  collecting every problem;
* serialisation: key order, pretty/compact JSON, round trip, ``partition_key``;
* family validators: sink (topics / topics.regex), FileStream source, MirrorSource, MirrorCheckpoint,
  MirrorHeartbeat, dispatch by connector class;
* diffs for dry runs;
* a property test: any input either parses or raises ``OffsetsValidationError``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connect_offsets import offsets
from connect_offsets.offsets import (
    OffsetEntry,
    OffsetsDocument,
    OffsetsProblem,
    OffsetsValidationError,
    diff_offsets,
    parse_for_connector,
    parse_offsets_document,
    parse_offsets_obj,
    partition_key,
    reset_diff,
    stream,
    validate_file_stream_source,
    validate_for_connector,
    validate_mirror_checkpoint,
    validate_mirror_heartbeat,
    validate_mirror_source,
    validate_sink,
)

pytestmark = pytest.mark.unit

STRIMZI_DOC = '{"offsets":[{"partition":{"filename":"/opt/kafka/LICENSE"},"offset":{"position":15295}}]}'
SINK_DOC = '{"offsets":[{"partition":{"kafka_topic":"t","kafka_partition":3},"offset":{"kafka_offset":1000}}]}'
MM2_SOURCE_DOC = json.dumps(
    {"offsets": [{"partition": {"cluster": "A", "partition": 0, "topic": "orders"}, "offset": {"offset": 41}}]}
)
MM2_CHECKPOINT_DOC = json.dumps(
    {"offsets": [{"partition": {"partition": 0, "topic": "A.orders", "group": "g"}, "offset": {"offset": 0}}]}
)
MM2_HEARTBEAT_DOC = json.dumps(
    {"offsets": [{"partition": {"sourceClusterAlias": "A", "targetClusterAlias": "B"}, "offset": {"offset": 0}}]}
)


def doc_of(*entries: tuple[dict[str, Any], dict[str, Any] | None]) -> str:
    return json.dumps({"offsets": [{"partition": p, "offset": o} for p, o in entries]})


def problems_of(text: str | bytes, **kwargs: Any) -> list[OffsetsProblem]:
    with pytest.raises(OffsetsValidationError) as info:
        parse_offsets_document(text, **kwargs)
    return info.value.problems


def assert_problem(problems: list[OffsetsProblem], path: str, fragment: str) -> None:
    matching = [p for p in problems if p.path == path and fragment in p.message]
    assert matching, f"no problem at {path!r} containing {fragment!r} in {problems}"


def validation_problems(fn: Any, *args: Any, **kwargs: Any) -> list[OffsetsProblem]:
    with pytest.raises(OffsetsValidationError) as info:
        fn(*args, **kwargs)
    return info.value.problems


# --------------------------------------------------------------------------- error type


class TestError:
    def test_is_value_error_with_problems(self) -> None:
        err = OffsetsValidationError([OffsetsProblem("offsets", "bad")])
        assert isinstance(err, ValueError)
        assert err.problems == [OffsetsProblem("offsets", "bad")]
        assert str(err) == "offsets: bad"

    def test_lists_ten_then_and_n_more(self) -> None:
        err = OffsetsValidationError([OffsetsProblem(f"offsets[{i}]", "x") for i in range(13)])
        lines = str(err).splitlines()
        assert len(lines) == 11
        assert lines[0] == "offsets[0]: x"
        assert lines[9] == "offsets[9]: x"
        assert lines[10] == "... and 3 more"

    def test_exactly_ten_has_no_tail(self) -> None:
        err = OffsetsValidationError([OffsetsProblem("$", "x")] * 10)
        assert "more" not in str(err)

    def test_problem_is_frozen(self) -> None:
        problem = OffsetsProblem("$", "x")
        with pytest.raises(AttributeError):
            problem.path = "y"  # type: ignore[misc]


# --------------------------------------------------------------------------- generic parsing


class TestParseGeneric:
    def test_strimzi_blog_document(self) -> None:
        doc = parse_offsets_document(STRIMZI_DOC)
        assert doc.entries == (OffsetEntry({"filename": "/opt/kafka/LICENSE"}, {"position": 15295}),)
        assert len(doc) == 1

    def test_bytes_input(self) -> None:
        assert parse_offsets_document(STRIMZI_DOC.encode()) == parse_offsets_document(STRIMZI_DOC)

    def test_bytes_with_bom(self) -> None:
        assert len(parse_offsets_document(b"\xef\xbb\xbf" + STRIMZI_DOC.encode())) == 1

    def test_invalid_utf8(self) -> None:
        assert_problem(problems_of(b'{"offsets": "\xff"}'), "$", "UTF-8")

    def test_invalid_json_has_line_and_column(self) -> None:
        problems = problems_of('{\n  "offsets": [\n    {"partition": }\n  ]\n}')
        assert len(problems) == 1
        assert_problem(problems, "$", "not valid JSON")
        assert_problem(problems, "$", "line 3, column 19")

    def test_empty_text(self) -> None:
        assert_problem(problems_of(""), "$", "line 1, column 1")

    @pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
    def test_rejects_nan_and_infinity(self, constant: str) -> None:
        text = doc_of(({"filename": "f"}, None)).replace("null", constant)
        assert_problem(problems_of(text), "$", constant)

    def test_rejects_overflowing_float(self) -> None:
        text = doc_of(({"filename": "f"}, None)).replace("null", '{"position": 1e999}')
        assert_problem(problems_of(text), "$", "out of range")

    def test_rejects_huge_integer_without_crashing(self) -> None:
        text = doc_of(({"filename": "f"}, None)).replace("null", '{"position": ' + "9" * 5000 + "}")
        assert_problem(problems_of(text), "$", "not valid JSON")

    def test_deep_nesting(self) -> None:
        assert_problem(problems_of("[" * 100_000 + "]" * 100_000), "$", "not valid JSON")

    @pytest.mark.parametrize(
        ("text", "fragment"),
        [("[]", "[] (array)"), ("null", "got null"), ('"x"', '"x" (string)'), ("3", "3 (integer)")],
    )
    def test_root_must_be_object(self, text: str, fragment: str) -> None:
        problems = problems_of(text)
        assert_problem(problems, "$", 'expected an object with the key "offsets"')
        assert_problem(problems, "$", fragment)

    def test_missing_offsets(self) -> None:
        assert_problem(problems_of("{}"), "offsets", "missing")

    def test_unknown_top_level_keys_named(self) -> None:
        problems = problems_of('{"offsets": [], "extra": 1, "more": 2}', allow_empty=True)
        assert_problem(problems, "$", '"extra", "more"')
        assert_problem(problems, "$", 'only "offsets" is allowed')

    def test_unknown_top_level_keys_with_missing_offsets_reports_both(self) -> None:
        problems = problems_of('{"ofsets": []}')
        assert_problem(problems, "$", '"ofsets"')
        assert_problem(problems, "offsets", "missing")

    @pytest.mark.parametrize("value", ['{"a": 1}', '"x"', "null", "1"])
    def test_offsets_must_be_list(self, value: str) -> None:
        assert_problem(problems_of('{"offsets": ' + value + "}"), "offsets", "expected a list, got")

    def test_empty_list_rejected_by_default(self) -> None:
        assert_problem(problems_of('{"offsets": []}'), "offsets", "at least one entry")

    def test_empty_list_allowed(self) -> None:
        assert len(parse_offsets_document('{"offsets": []}', allow_empty=True)) == 0

    @pytest.mark.parametrize("entry", ["1", "null", '"x"', "[]"])
    def test_entry_must_be_object(self, entry: str) -> None:
        problems = problems_of('{"offsets": [' + entry + "]}")
        assert_problem(problems, "offsets[0]", 'expected an object with the keys "partition" and "offset"')

    def test_missing_offset_key(self) -> None:
        problems = problems_of('{"offsets": [{"partition": {"filename": "f"}}]}')
        assert_problem(problems, "offsets[0].offset", "missing")
        assert_problem(problems, "offsets[0].offset", "null to remove")

    def test_missing_partition_key(self) -> None:
        assert_problem(problems_of('{"offsets": [{"offset": null}]}'), "offsets[0].partition", "missing")

    def test_null_offset_means_remove(self) -> None:
        doc = parse_offsets_document(doc_of(({"filename": "f"}, None)))
        assert doc.entries[0].offset is None

    def test_null_partition_rejected(self) -> None:
        problems = problems_of('{"offsets": [{"partition": null, "offset": null}]}')
        assert_problem(problems, "offsets[0].partition", "expected an object, got null")

    def test_partition_must_be_object(self) -> None:
        problems = problems_of('{"offsets": [{"partition": [1], "offset": null}]}')
        assert_problem(problems, "offsets[0].partition", "expected an object, got [1] (array)")

    def test_offset_must_be_object_or_null(self) -> None:
        problems = problems_of('{"offsets": [{"partition": {"a": 1}, "offset": 5}]}')
        assert_problem(problems, "offsets[0].offset", "expected an object or null, got 5 (integer)")

    def test_unknown_entry_keys(self) -> None:
        problems = problems_of('{"offsets": [{"partition": {"a": 1}, "offset": null, "ofset": 1}]}')
        assert_problem(problems, "offsets[0]", '"ofset"')
        assert_problem(problems, "offsets[0]", 'exactly "partition" and "offset"')

    def test_nested_partition_value(self) -> None:
        problems = problems_of(doc_of(({"a": {"b": 1}}, None)))
        assert_problem(problems, "offsets[0].partition.a", "Connect rejects nested values")
        assert_problem(problems, "offsets[0].partition.a", '{"b": 1} (object)')

    def test_nested_offset_value(self) -> None:
        problems = problems_of(doc_of(({"a": 1}, {"pos": [1, 2]})))
        assert_problem(problems, "offsets[0].offset.pos", "[1, 2] (array)")

    def test_odd_key_path_uses_brackets(self) -> None:
        problems = problems_of(doc_of(({"a b": {}}, None)))
        assert_problem(problems, 'offsets[0].partition["a b"]', "nested")

    def test_primitive_values_accepted(self) -> None:
        doc = parse_offsets_document(doc_of(({"s": "x", "i": 1, "f": 1.5, "b": True, "n": None}, {"o": 0})))
        assert doc.entries[0].partition == {"s": "x", "i": 1, "f": 1.5, "b": True, "n": None}

    def test_duplicate_partitions_name_both_indices(self) -> None:
        problems = problems_of(doc_of(({"a": 1, "b": "x"}, {"o": 1}), ({"c": 2}, None), ({"b": "x", "a": 1}, None)))
        assert_problem(problems, "offsets[2].partition", "duplicate of offsets[0].partition")

    def test_partitions_differing_in_type_are_not_duplicates(self) -> None:
        doc = parse_offsets_document(doc_of(({"a": 1}, None), ({"a": 1.0}, None), ({"a": True}, None)))
        assert len(doc) == 3

    def test_duplicate_json_keys(self) -> None:
        problems = problems_of('{"offsets": [{"partition": {"a": 1}, "offset": null, "offset": {"o": 1}}]}')
        assert_problem(problems, "$", '"offset" appears twice')

    def test_collects_all_problems(self) -> None:
        text = json.dumps(
            {
                "offsets": [
                    {"partition": None, "offset": None},
                    {"partition": {"a": [1]}},
                    "nope",
                    {"partition": {"a": 1}, "offset": None},
                ],
                "junk": True,
            }
        )
        problems = problems_of(text)
        paths = [p.path for p in problems]
        assert "$" in paths
        assert "offsets[0].partition" in paths
        assert "offsets[1].partition.a" in paths
        assert "offsets[1].offset" in paths
        assert "offsets[2]" in paths
        assert not any(p.startswith("offsets[3]") for p in paths)
        assert len(problems) >= 5

    def test_parse_obj(self) -> None:
        assert parse_offsets_obj(json.loads(STRIMZI_DOC)) == parse_offsets_document(STRIMZI_DOC)

    @pytest.mark.parametrize("bad", [float("nan"), float("inf"), object(), (1, 2)])
    def test_parse_obj_rejects_non_json_values(self, bad: object) -> None:
        with pytest.raises(OffsetsValidationError) as info:
            parse_offsets_obj({"offsets": [{"partition": {"a": bad}, "offset": None}]})
        assert info.value.problems[0].path == "offsets[0].partition.a"

    def test_parse_obj_rejects_non_string_keys(self) -> None:
        with pytest.raises(OffsetsValidationError) as info:
            parse_offsets_obj({"offsets": [{"partition": {1: "a"}, "offset": None}]})
        assert_problem(info.value.problems, "offsets[0].partition", "expected string keys")


# --------------------------------------------------------------------------- serialisation


class TestSerialisation:
    def test_to_json_obj(self) -> None:
        doc = parse_offsets_document(doc_of(({"filename": "f"}, {"position": 1}), ({"filename": "g"}, None)))
        assert doc.to_json_obj() == {
            "offsets": [
                {"partition": {"filename": "f"}, "offset": {"position": 1}},
                {"partition": {"filename": "g"}, "offset": None},
            ]
        }

    def test_to_json_obj_is_a_copy(self) -> None:
        doc = parse_offsets_document(STRIMZI_DOC)
        doc.to_json_obj()["offsets"][0]["partition"]["filename"] = "changed"
        assert doc.entries[0].partition["filename"] == "/opt/kafka/LICENSE"

    def test_compact_json_of_strimzi_document(self) -> None:
        assert parse_offsets_document(STRIMZI_DOC).to_compact_json() == STRIMZI_DOC

    def test_pretty_json_keeps_key_order_and_unicode(self) -> None:
        text = doc_of(({"topic": "ü", "partition": 0, "cluster": "A"}, {"offset": 1}))
        pretty = parse_offsets_document(text).to_pretty_json()
        assert pretty.index('"topic"') < pretty.index('"partition": 0') < pretty.index('"cluster"')
        assert '"ü"' in pretty
        assert '\n  "offsets": [\n' in pretty

    def test_round_trip_preserves_order(self) -> None:
        text = doc_of(
            ({"z": 1, "a": "x", "m": None}, {"b": 2, "a": 1.5}),
            ({"filename": "f"}, None),
            ({"k": True}, {"o": 0}),
        )
        doc = parse_offsets_document(text)
        again = parse_offsets_document(doc.to_pretty_json())
        assert again == doc
        assert [list(e.partition) for e in again.entries] == [["z", "a", "m"], ["filename"], ["k"]]
        assert parse_offsets_document(doc.to_compact_json()) == doc

    def test_partition_key_is_canonical(self) -> None:
        a = OffsetEntry({"b": 1, "a": "x"}, None)
        b = OffsetEntry({"a": "x", "b": 1}, {"o": 1})
        assert partition_key(a) == partition_key(b) == '{"a":"x","b":1}'
        assert OffsetsDocument.partition_key(a) == partition_key(a)
        assert partition_key({"a": 1}) != partition_key({"a": True})

    def test_entry_is_frozen(self) -> None:
        entry = OffsetEntry({"a": 1}, None)
        with pytest.raises(AttributeError):
            entry.offset = {}  # type: ignore[misc]


# --------------------------------------------------------------------------- sink


class TestSink:
    def test_reference_example(self) -> None:
        doc = parse_offsets_document(SINK_DOC)
        validate_sink(doc, topics=None, topics_regex=None)
        validate_sink(doc, topics=["t"], topics_regex=None)

    def test_null_offset(self) -> None:
        validate_sink(
            parse_offsets_document(doc_of(({"kafka_topic": "t", "kafka_partition": 0}, None))),
            topics=None,
            topics_regex=None,
        )

    def test_missing_and_extra_partition_keys(self) -> None:
        doc = parse_offsets_document(doc_of(({"kafka_topic": "t", "partition": 0}, None)))
        problems = validation_problems(validate_sink, doc, topics=None, topics_regex=None)
        assert_problem(problems, "offsets[0].partition", 'missing "kafka_partition"')
        assert_problem(problems, "offsets[0].partition", 'unexpected "partition"')

    @pytest.mark.parametrize("topic", ["", 3, None, True])
    def test_topic_must_be_non_empty_string(self, topic: object) -> None:
        doc = parse_offsets_document(doc_of(({"kafka_topic": topic, "kafka_partition": 0}, None)))
        problems = validation_problems(validate_sink, doc, topics=None, topics_regex=None)
        assert_problem(problems, "offsets[0].partition.kafka_topic", "expected a non-empty string")

    def test_partition_as_string_rejected(self) -> None:
        doc = parse_offsets_document(doc_of(({"kafka_topic": "t", "kafka_partition": "3"}, None)))
        problems = validation_problems(validate_sink, doc, topics=None, topics_regex=None)
        assert_problem(problems, "offsets[0].partition.kafka_partition", 'expected an integer >= 0, got "3" (string)')

    @pytest.mark.parametrize("value", [-1, 1.0, True, None])
    def test_partition_must_be_non_negative_integer(self, value: object) -> None:
        doc = parse_offsets_document(doc_of(({"kafka_topic": "t", "kafka_partition": value}, None)))
        problems = validation_problems(validate_sink, doc, topics=None, topics_regex=None)
        assert_problem(problems, "offsets[0].partition.kafka_partition", "expected an integer >= 0")

    def test_boolean_is_not_an_integer(self) -> None:
        doc = parse_offsets_document(doc_of(({"kafka_topic": "t", "kafka_partition": 0}, {"kafka_offset": True})))
        problems = validation_problems(validate_sink, doc, topics=None, topics_regex=None)
        assert_problem(problems, "offsets[0].offset.kafka_offset", "got true (boolean)")

    @pytest.mark.parametrize("value", [-5, "10", 1.5])
    def test_offset_must_be_non_negative_integer(self, value: object) -> None:
        doc = parse_offsets_document(doc_of(({"kafka_topic": "t", "kafka_partition": 0}, {"kafka_offset": value})))
        problems = validation_problems(validate_sink, doc, topics=None, topics_regex=None)
        assert_problem(problems, "offsets[0].offset.kafka_offset", "expected an integer >= 0")

    def test_offset_keys_exact(self) -> None:
        doc = parse_offsets_document(doc_of(({"kafka_topic": "t", "kafka_partition": 0}, {"kafka_offset": 1, "x": 1})))
        problems = validation_problems(validate_sink, doc, topics=None, topics_regex=None)
        assert_problem(problems, "offsets[0].offset", 'unexpected "x"')

    def test_offset_wrong_key(self) -> None:
        doc = parse_offsets_document(doc_of(({"kafka_topic": "t", "kafka_partition": 0}, {"offset": 1})))
        problems = validation_problems(validate_sink, doc, topics=None, topics_regex=None)
        assert_problem(problems, "offsets[0].offset", 'missing "kafka_offset"')

    def test_topic_not_in_topics(self) -> None:
        doc = parse_offsets_document(doc_of(({"kafka_topic": "other", "kafka_partition": 0}, None)))
        problems = validation_problems(validate_sink, doc, topics=["a", "b"], topics_regex=None)
        assert_problem(problems, "offsets[0].partition.kafka_topic", 'topic "other" is not consumed')
        assert_problem(problems, "offsets[0].partition.kafka_topic", '"a", "b"')

    def test_topics_regex(self) -> None:
        ok = parse_offsets_document(doc_of(({"kafka_topic": "orders-eu", "kafka_partition": 0}, None)))
        validate_sink(ok, topics=None, topics_regex=r"orders-.*")
        bad = parse_offsets_document(doc_of(({"kafka_topic": "x-orders-eu", "kafka_partition": 0}, None)))
        problems = validation_problems(validate_sink, bad, topics=None, topics_regex=r"orders-.*")
        assert_problem(problems, "offsets[0].partition.kafka_topic", 'topics.regex "orders-.*"')

    def test_regex_the_linear_engine_cannot_take_is_refused(self) -> None:
        # Unchecked before (a pattern Python's re could not compile was skipped); now the
        # document is refused with RE2's reason: a check that cannot run must not pass silently.
        doc = parse_offsets_document(doc_of(({"kafka_topic": "x", "kafka_partition": 0}, None)))
        problems = validation_problems(validate_sink, doc, topics=None, topics_regex="(?<name")
        assert_problem(problems, "config[topics.regex]", "the pattern '(?<name' cannot be evaluated in linear time")

    def test_collects_all_problems(self) -> None:
        doc = parse_offsets_document(
            doc_of(
                ({"kafka_topic": "", "kafka_partition": 0}, None),
                ({"kafka_topic": "t", "kafka_partition": "1"}, None),
                ({"kafka_topic": "t", "kafka_partition": 2}, {"kafka_offset": -1}),
            )
        )
        problems = validation_problems(validate_sink, doc, topics=None, topics_regex=None)
        assert [p.path for p in problems] == [
            "offsets[0].partition.kafka_topic",
            "offsets[1].partition.kafka_partition",
            "offsets[2].offset.kafka_offset",
        ]


# --------------------------------------------------------------------------- FileStream source


class TestFileStreamSource:
    def test_strimzi_document(self) -> None:
        validate_file_stream_source(parse_offsets_document(STRIMZI_DOC), file="/opt/kafka/LICENSE")

    @pytest.mark.parametrize("file", [None, ""])
    def test_stdin_cannot_be_altered(self, file: str | None) -> None:
        problems = validation_problems(validate_file_stream_source, parse_offsets_document(STRIMZI_DOC), file=file)
        assert len(problems) == 1
        assert_problem(problems, "$", "stdin")
        assert_problem(problems, "$", "'file'")

    def test_filename_must_match(self) -> None:
        problems = validation_problems(
            validate_file_stream_source, parse_offsets_document(STRIMZI_DOC), file="/tmp/other"
        )
        assert_problem(problems, "offsets[0].partition.filename", '"/tmp/other"')
        assert_problem(problems, "offsets[0].partition.filename", '"/opt/kafka/LICENSE"')

    def test_partition_keys_exact(self) -> None:
        doc = parse_offsets_document(doc_of(({"filename": "f", "x": 1}, None), ({"file": "f"}, None)))
        problems = validation_problems(validate_file_stream_source, doc, file="f")
        assert_problem(problems, "offsets[0].partition", 'unexpected "x"')
        assert_problem(problems, "offsets[1].partition", 'missing "filename"')

    def test_filename_must_be_string(self) -> None:
        doc = parse_offsets_document(doc_of(({"filename": 1}, None)))
        problems = validation_problems(validate_file_stream_source, doc, file="f")
        assert_problem(problems, "offsets[0].partition.filename", "expected a string, got 1 (integer)")

    def test_position_string_rejected(self) -> None:
        doc = parse_offsets_document(doc_of(({"filename": "f"}, {"position": "abc"})))
        problems = validation_problems(validate_file_stream_source, doc, file="f")
        assert problems == [
            OffsetsProblem("offsets[0].offset.position", 'expected an integer >= 0, got "abc" (string)')
        ]

    def test_negative_position(self) -> None:
        doc = parse_offsets_document(doc_of(({"filename": "f"}, {"position": -1})))
        problems = validation_problems(validate_file_stream_source, doc, file="f")
        assert_problem(problems, "offsets[0].offset.position", "got -1 (integer)")

    def test_offset_key_exact(self) -> None:
        doc = parse_offsets_document(doc_of(({"filename": "f"}, {"pos": 1})))
        problems = validation_problems(validate_file_stream_source, doc, file="f")
        assert_problem(problems, "offsets[0].offset", 'missing "position"')

    def test_null_offset(self) -> None:
        validate_file_stream_source(parse_offsets_document(doc_of(({"filename": "f"}, None))), file="f")


# --------------------------------------------------------------------------- MirrorMaker 2


class TestMirror:
    def test_source_reference_example(self) -> None:
        validate_mirror_source(parse_offsets_document(MM2_SOURCE_DOC), source_alias="A")

    def test_source_cluster_must_match_alias(self) -> None:
        problems = validation_problems(validate_mirror_source, parse_offsets_document(MM2_SOURCE_DOC), source_alias="B")
        assert_problem(problems, "offsets[0].partition.cluster", 'source.cluster.alias "B", got "A"')

    def test_source_field_checks(self) -> None:
        doc = parse_offsets_document(
            doc_of(
                ({"cluster": "A", "partition": -1, "topic": ""}, {"offset": -2}),
                ({"cluster": "A", "topic": "t"}, {"offset": 1}),
            )
        )
        problems = validation_problems(validate_mirror_source, doc, source_alias="A")
        assert_problem(problems, "offsets[0].partition.partition", "expected an integer >= 0")
        assert_problem(problems, "offsets[0].partition.topic", "non-empty string")
        assert_problem(problems, "offsets[0].offset.offset", "got -2 (integer)")
        assert_problem(problems, "offsets[1].partition", 'missing "partition"')

    def test_source_tombstone(self) -> None:
        doc = parse_offsets_document(doc_of(({"cluster": "A", "partition": 0, "topic": "t"}, None)))
        validate_mirror_source(doc, source_alias="A")

    def test_checkpoint_reference_example(self) -> None:
        validate_mirror_checkpoint(parse_offsets_document(MM2_CHECKPOINT_DOC))

    def test_checkpoint_offset_only_zero(self) -> None:
        doc = parse_offsets_document(doc_of(({"group": "g", "topic": "t", "partition": 0}, {"offset": 5})))
        problems = validation_problems(validate_mirror_checkpoint, doc)
        assert_problem(problems, "offsets[0].offset.offset", "checkpoint tasks don't use offsets")
        assert_problem(problems, "offsets[0].offset.offset", "the only accepted value is 0")

    def test_checkpoint_partition_checks(self) -> None:
        doc = parse_offsets_document(doc_of(({"group": 1, "topic": "t", "partition": "0"}, None)))
        problems = validation_problems(validate_mirror_checkpoint, doc)
        assert_problem(problems, "offsets[0].partition.group", "expected a string")
        assert_problem(problems, "offsets[0].partition.partition", "expected an integer >= 0")

    def test_heartbeat_reference_example(self) -> None:
        validate_mirror_heartbeat(parse_offsets_document(MM2_HEARTBEAT_DOC))

    def test_heartbeat_checks(self) -> None:
        doc = parse_offsets_document(
            doc_of(
                ({"sourceClusterAlias": "A", "targetClusterAlias": 2}, {"offset": False}),
                ({"sourceClusterAlias": "A"}, None),
            )
        )
        problems = validation_problems(validate_mirror_heartbeat, doc)
        assert_problem(problems, "offsets[0].partition.targetClusterAlias", "expected a string")
        assert_problem(problems, "offsets[0].offset.offset", "heartbeat tasks don't use offsets")
        assert_problem(problems, "offsets[1].partition", 'missing "targetClusterAlias"')


# --------------------------------------------------------------------------- dispatch


class TestDispatch:
    def test_file_stream_source_uses_file(self) -> None:
        doc = parse_offsets_document(STRIMZI_DOC)
        validate_for_connector(doc, offsets.FILE_STREAM_SOURCE_CLASS, {"file": "/opt/kafka/LICENSE"})
        problems = validation_problems(validate_for_connector, doc, offsets.FILE_STREAM_SOURCE_CLASS, {})
        assert_problem(problems, "$", "stdin")

    @pytest.mark.parametrize("cls", ["FileStreamSource", "FileStreamSourceConnector"])
    def test_class_aliases(self, cls: str) -> None:
        problems = validation_problems(validate_for_connector, parse_offsets_document(STRIMZI_DOC), cls, {})
        assert_problem(problems, "$", "stdin")

    def test_sink_by_class_name_with_topics(self) -> None:
        doc = parse_offsets_document(SINK_DOC)
        validate_for_connector(doc, offsets.FILE_STREAM_SINK_CLASS, {"topics": " x , t ,,"})
        problems = validation_problems(validate_for_connector, doc, "com.example.JdbcSinkConnector", {"topics": "a, b"})
        assert_problem(problems, "offsets[0].partition.kafka_topic", '"a", "b"')

    def test_sink_topics_regex(self) -> None:
        doc = parse_offsets_document(SINK_DOC)
        validate_for_connector(doc, "com.example.S3SinkConnector", {"topics.regex": "t|u"})
        problems = validation_problems(
            validate_for_connector, doc, "com.example.S3SinkConnector", {"topics.regex": "u.*"}
        )
        assert_problem(problems, "offsets[0].partition.kafka_topic", "topics.regex")

    def test_is_sink_flag(self) -> None:
        doc = parse_offsets_document(STRIMZI_DOC)
        problems = validation_problems(validate_for_connector, doc, "com.example.Whatever", {}, is_sink=True)
        assert_problem(problems, "offsets[0].partition", 'missing "kafka_topic"')
        validate_for_connector(doc, "com.example.Whatever", {})

    def test_mirror_source_alias(self) -> None:
        doc = parse_offsets_document(MM2_SOURCE_DOC)
        validate_for_connector(doc, offsets.MIRROR_SOURCE_CLASS, {"source.cluster.alias": "A"})
        problems = validation_problems(validate_for_connector, doc, offsets.MIRROR_SOURCE_CLASS, {})
        assert_problem(problems, "offsets[0].partition.cluster", '"source"')

    def test_mirror_checkpoint_and_heartbeat(self) -> None:
        validate_for_connector(parse_offsets_document(MM2_CHECKPOINT_DOC), offsets.MIRROR_CHECKPOINT_CLASS, {})
        validate_for_connector(parse_offsets_document(MM2_HEARTBEAT_DOC), offsets.MIRROR_HEARTBEAT_CLASS, {})
        problems = validation_problems(
            validate_for_connector, parse_offsets_document(MM2_SOURCE_DOC), "MirrorHeartbeatConnector", {}
        )
        assert_problem(problems, "offsets[0].partition", 'missing "sourceClusterAlias"')

    def test_unknown_source_class_generic_only(self) -> None:
        validate_for_connector(parse_offsets_document(STRIMZI_DOC), "io.debezium.connector.mysql.MySqlConnector", {})

    def test_same_simple_name_other_package_is_not_mirror(self) -> None:
        validate_for_connector(parse_offsets_document(STRIMZI_DOC), "com.example.MirrorSourceConnector", {})


# --------------------------------------------------------------------------- diffs


def _sink_doc(*items: tuple[int, int | None]) -> OffsetsDocument:
    return parse_offsets_document(
        doc_of(
            *(
                ({"kafka_topic": "t", "kafka_partition": p}, None if o is None else {"kafka_offset": o})
                for p, o in items
            )
        ),
        allow_empty=True,
    )


class TestDiff:
    def test_added_changed_removed_unchanged(self) -> None:
        current = _sink_doc((0, 10), (1, 20), (2, 30), (3, 40), (4, 50))
        requested = _sink_doc((0, 10), (1, 21), (2, None), (5, 0), (6, None))
        diff = diff_offsets(current, requested)
        assert [e.partition["kafka_partition"] for e in diff.added] == [5]
        assert [(o.offset, n.offset) for o, n in diff.changed] == [({"kafka_offset": 20}, {"kafka_offset": 21})]
        assert diff.removed == [current.entries[2]]
        # 0 (same), 3 and 4 (not listed), 6 (null for an absent partition)
        assert diff.unchanged == 4
        assert diff.summary() == "1 added, 1 changed, 1 removed, 4 unchanged"
        assert diff.has_changes

    def test_matches_partitions_regardless_of_key_order(self) -> None:
        current = parse_offsets_document(doc_of(({"a": 1, "b": 2}, {"o": 1})))
        requested = parse_offsets_document(doc_of(({"b": 2, "a": 1}, {"o": 1})))
        diff = diff_offsets(current, requested)
        assert diff.summary() == "0 added, 0 changed, 0 removed, 1 unchanged"
        assert not diff.has_changes

    def test_type_change_is_a_change(self) -> None:
        current = parse_offsets_document(doc_of(({"a": 1}, {"o": 1})))
        requested = parse_offsets_document(doc_of(({"a": 1}, {"o": True})))
        assert len(diff_offsets(current, requested).changed) == 1

    def test_to_json_obj(self) -> None:
        diff = diff_offsets(_sink_doc((0, 1), (1, 2)), _sink_doc((0, 5), (1, None), (2, 7)))
        obj = diff.to_json_obj()
        assert obj == {
            "added": [{"partition": {"kafka_topic": "t", "kafka_partition": 2}, "offset": {"kafka_offset": 7}}],
            "changed": [
                {
                    "partition": {"kafka_topic": "t", "kafka_partition": 0},
                    "old": {"kafka_offset": 1},
                    "new": {"kafka_offset": 5},
                }
            ],
            "removed": [{"partition": {"kafka_topic": "t", "kafka_partition": 1}, "offset": {"kafka_offset": 2}}],
            "unchanged": 0,
        }
        json.dumps(obj)

    def test_reset_diff(self) -> None:
        current = _sink_doc((0, 1), (1, 2))
        diff = reset_diff(current)
        assert diff.removed == list(current.entries)
        assert diff.summary() == "0 added, 0 changed, 2 removed, 0 unchanged"

    def test_reset_diff_of_empty(self) -> None:
        assert not reset_diff(_sink_doc()).has_changes


# --------------------------------------------------------------------------- module surface


def test_all_is_sorted_and_complete() -> None:
    assert offsets.__all__ == sorted(offsets.__all__)
    public = {
        name
        for name, value in vars(offsets).items()
        if not name.startswith("_")
        and getattr(value, "__module__", offsets.__name__) == offsets.__name__
        and (callable(value) or name.isupper())
    }
    assert public <= set(offsets.__all__)
    for name in offsets.__all__:
        assert hasattr(offsets, name)


# --------------------------------------------------------------------------- property tests

_primitives = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
_json_values = st.recursive(
    _primitives,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=20,
)
_KEYS = [
    "kafka_topic",
    "kafka_partition",
    "kafka_offset",
    "filename",
    "position",
    "cluster",
    "topic",
    "partition",
    "offset",
    "group",
    "sourceClusterAlias",
    "targetClusterAlias",
]
_keys = st.sampled_from(_KEYS) | st.text(max_size=4)
_near_entries = st.fixed_dictionaries(
    {},
    optional={
        "partition": st.none() | st.dictionaries(_keys, _json_values, max_size=4),
        "offset": st.none() | st.dictionaries(_keys, _json_values, max_size=3),
        "extra": _json_values,
    },
)
_near_documents = st.fixed_dictionaries(
    {}, optional={"offsets": st.lists(_near_entries | _json_values, max_size=5), "other": _json_values}
)


def _run_all_validators(doc: OffsetsDocument) -> None:
    calls: list[Callable[[], None]] = [
        lambda: validate_sink(doc, topics=None, topics_regex=None),
        lambda: validate_sink(doc, topics=["t"], topics_regex="a.*"),
        lambda: validate_file_stream_source(doc, file="f"),
        lambda: validate_file_stream_source(doc, file=None),
        lambda: validate_mirror_source(doc, source_alias="A"),
        lambda: validate_mirror_checkpoint(doc),
        lambda: validate_mirror_heartbeat(doc),
    ]
    for call in calls:
        try:
            call()
        except OffsetsValidationError as e:
            assert e.problems
            assert str(e)


def _check_text(text: str | bytes) -> None:
    try:
        doc = parse_offsets_document(text, allow_empty=True)
    except OffsetsValidationError as e:
        assert e.problems
        assert all(p.path and p.message for p in e.problems)
        assert str(e)
        return
    assert parse_offsets_document(doc.to_pretty_json(), allow_empty=True) == doc
    assert parse_offsets_document(doc.to_compact_json(), allow_empty=True) == doc
    _run_all_validators(doc)
    diff_offsets(doc, doc)
    assert diff_offsets(doc, doc).unchanged == len(doc)


@settings(max_examples=300)
@given(_json_values | _near_documents)
def test_property_json_values_parse_or_raise_validation_error(value: Any) -> None:
    _check_text(json.dumps(value))


@settings(max_examples=300)
@given(st.text(max_size=60) | st.binary(max_size=60))
def test_property_random_text_parses_or_raises_validation_error(text: str | bytes) -> None:
    _check_text(text)


@settings(max_examples=300)
@given(_near_documents)
def test_property_objects_parse_or_raise_validation_error(value: Any) -> None:
    try:
        doc = parse_offsets_obj(value)
    except OffsetsValidationError as e:
        assert e.problems
        return
    _run_all_validators(doc)


def test_compact_json_is_json_dumps_of_the_document_written_entry_by_entry() -> None:
    text = json.dumps(
        {
            "offsets": [
                {"partition": {"filename": "/data/ü/a.log", "n": 1.5, "flag": True}, "offset": {"position": 10}},
                {"partition": {"kafka_topic": "t", "kafka_partition": 0}, "offset": None},
                {"partition": {"b": 2, "a": 'x"y'}, "offset": {"s": None, "big": 2**62}},
            ]
        }
    )
    doc = parse_offsets_document(text)
    assert doc.to_compact_json() == json.dumps(doc.to_json_obj(), separators=(",", ":"), ensure_ascii=False)
    assert json.loads(doc.to_compact_json()) == json.loads(text)
    assert OffsetsDocument(entries=()).to_compact_json() == '{"offsets":[]}'


def test_parsed_entries_share_the_decoded_dicts() -> None:
    """Validation keeps the decoded maps instead of copying them (a million entries would double)."""
    raw = {"offsets": [{"partition": {"file": "a"}, "offset": {"line": 1}}]}
    doc = parse_offsets_obj(raw)
    assert doc.entries[0].partition is raw["offsets"][0]["partition"]
    assert doc.entries[0].offset is raw["offsets"][0]["offset"]


# --------------------------------------------------------------------------- streamed validation

# The streamed path (alter and restore of documents of any size) must answer exactly what the
# whole-document path answers: the same text for a valid document, the same problems otherwise.

_CLASSES = [
    (None, {}, None, False),
    ("org.apache.kafka.connect.file.FileStreamSourceConnector", {"file": "f"}, None, False),
    ("org.apache.kafka.connect.file.FileStreamSourceConnector", {}, None, False),
    ("com.example.SomeSinkConnector", {"topics": "t,u"}, True, False),
    ("com.example.Anything", {"topics.regex": "a.*"}, True, False),
    ("MirrorSourceConnector", {"source.cluster.alias": "A"}, None, True),
    ("MirrorCheckpointConnector", {}, None, False),
    ("MirrorHeartbeatConnector", {}, None, False),
    ("com.example.GenericSource", {}, False, False),
]


def _whole_path(text: str, cls: str | None, config: dict[str, str], is_sink: bool | None, translate: bool) -> str:
    if cls is None:
        document = parse_offsets_document(text)
        return (offsets.translate_replay_from(document) if translate else document).to_compact_json()
    return parse_for_connector(text, cls, config, is_sink=is_sink, translate_replay=translate).to_compact_json()


def _outcome(call: Callable[[], str]) -> tuple[str, Any]:
    try:
        return ("ok", call())
    except OffsetsValidationError as error:
        return ("error", [str(p) for p in error.problems])


def _assert_same_as_whole(text: str) -> None:
    for cls, config, is_sink, translate in _CLASSES:
        streamed = _outcome(
            partial(offsets.validated_compact_json, text, cls, config, is_sink=is_sink, translate_replay=translate)
        )
        assert streamed == _outcome(partial(_whole_path, text, cls, config, is_sink, translate)), (cls, text)


_plausible_entries = st.fixed_dictionaries(
    {
        "partition": st.dictionaries(st.sampled_from(_KEYS), _primitives, min_size=1, max_size=3),
        "offset": st.none() | st.dictionaries(st.sampled_from([*_KEYS, "replayFrom"]), _primitives, max_size=2),
    }
)


@settings(max_examples=300)
@given(
    st.one_of(
        _near_documents,
        st.fixed_dictionaries({"offsets": st.lists(_plausible_entries, max_size=6)}),
        _json_values,
    ),
    st.sampled_from([None, 0, 2, "compact"]),
    st.integers(min_value=1, max_value=3),
)
def test_property_streamed_validation_answers_as_the_whole_document(
    value: Any, indent: int | str | None, batch: int
) -> None:
    saved = offsets.ENTRIES_PER_BATCH
    offsets.ENTRIES_PER_BATCH = batch  # several batches even for small documents
    try:
        if indent == "compact":  # the text the streamed path returns as it is
            _assert_same_as_whole(json.dumps(value, separators=(",", ":"), ensure_ascii=False))
        else:
            _assert_same_as_whole(json.dumps(value, indent=indent, ensure_ascii=False))
    finally:
        offsets.ENTRIES_PER_BATCH = saved


@pytest.mark.parametrize(
    "text",
    [
        ' \n{ "offsets" :\t[ ] } \r\n',
        '{"offsets":[{"partition":{"a":1},"offset":null},]}',
        '{"offsets":[{"partition":{"a":1},"offset":null}]}}',
        '{"offsets":[{"partition":{"a":NaN},"offset":null}]}',
        '{"offsets":[{"partition":{"a":1e999},"offset":null}]}',
        '{"offsets":[{"partition":{"a":"\\ud800"},"offset":null}]}',
        '{"offsets":[{"partition":{"a":"\\ud83d\\ude00"},"offset":null}]}',
        '{"offsets":[{"partition":{"a":1,"a":2},"offset":null}]}',
        '{"offsets":[],"offsets":[{"partition":{"a":1},"offset":null}]}',
        '{"\\u006ffsets":[{"partition":{"a":1},"offset":null}]}',
        '\ufeff{"offsets":[{"partition":{"a":1},"offset":null}]}',
        '{"offsets":[{"partition":{"b":1,"a":2},"offset":{"x":1}},{"partition":{"a":2,"b":1},"offset":null}]}',
        '{"offsets":[{"partition":{"a":1},"offset":null}], "more": 1}',
    ],
)
def test_streamed_validation_edge_cases_answer_as_the_whole_document(text: str) -> None:
    _assert_same_as_whole(text)


def test_valid_documents_are_never_parsed_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """The point of the streamed path: a valid document is checked in batches, not as one tree."""
    entries = [
        {"partition": {"kafka_topic": "t", "kafka_partition": p}, "offset": {"kafka_offset": p}} for p in range(25)
    ]
    text = json.dumps({"offsets": entries}, indent=1)
    monkeypatch.setattr(stream, "ENTRIES_PER_BATCH", 10)
    seen: list[int] = []
    real_validate = offsets.validate_for_connector

    def spy(doc: OffsetsDocument, *args: Any, **kwargs: Any) -> None:
        seen.append(len(doc))
        real_validate(doc, *args, **kwargs)

    def whole(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("parse_offsets_document was called for a valid document")

    monkeypatch.setattr(stream, "validate_for_connector", spy)
    monkeypatch.setattr(stream, "parse_offsets_document", whole)
    monkeypatch.setattr(stream, "parse_for_connector", whole)
    result = offsets.validated_compact_json(text, "SomeSinkConnector", {"topics": "t"}, is_sink=True)
    assert seen == [10, 10, 5]
    assert json.loads(result) == {"offsets": entries}


def test_a_problem_in_a_later_batch_is_reported_with_its_index_in_the_document(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stream, "ENTRIES_PER_BATCH", 2)
    entries = [
        {"partition": {"kafka_topic": "t", "kafka_partition": p}, "offset": {"kafka_offset": 1}} for p in range(5)
    ]
    entries[3]["offset"] = {"kafka_offset": -1}
    entries.append({"partition": {"kafka_partition": 1, "kafka_topic": "t"}, "offset": None})  # duplicate of [1]
    with pytest.raises(OffsetsValidationError) as raised:
        offsets.validated_compact_json(json.dumps({"offsets": entries}), "SinkConnector", {}, is_sink=True)
    # every problem, generic and typed, in the document's order, as with the whole document
    assert [str(p) for p in raised.value.problems] == [
        "offsets[3].offset.kafka_offset: expected an integer >= 0, got -1 (integer)",
        'offsets[5].partition: duplicate of offsets[1].partition ({"kafka_partition":1,"kafka_topic":"t"}); '
        "list each partition once",
    ]
    del entries[5]
    with pytest.raises(OffsetsValidationError) as raised:
        offsets.validated_compact_json(json.dumps({"offsets": entries}), "SinkConnector", {}, is_sink=True)
    assert [p.path for p in raised.value.problems] == ["offsets[3].offset.kafka_offset"]


def _old_restore(backup_text: str, current: list[Any]) -> tuple[str, int]:
    """The restore document as the planner built it before streaming: whole backup + nulls."""
    document = parse_offsets_document(backup_text, allow_empty=True)
    kept = {partition_key(entry) for entry in document.entries}
    nulls = tuple(
        OffsetEntry(partition=entry["partition"], offset=None)
        for entry in current
        if isinstance(entry, dict)
        and isinstance(entry.get("partition"), dict)
        and entry.get("offset") is not None
        and partition_key(entry["partition"]) not in kept
    )
    restored = OffsetsDocument(entries=document.entries + nulls)
    return restored.to_compact_json(), len(restored)


_partitions = st.dictionaries(
    st.sampled_from(["a", "b", "c"]), st.integers(0, 3) | st.sampled_from([1.0, True, "1"]), min_size=1, max_size=2
)
_offset_maps = st.none() | st.fixed_dictionaries({"position": st.integers(0, 9)})


@settings(max_examples=300)
@given(
    st.lists(st.fixed_dictionaries({"partition": _partitions, "offset": _offset_maps}), max_size=6),
    st.lists(st.fixed_dictionaries({"partition": _partitions, "offset": _offset_maps}), max_size=6),
    st.sampled_from([None, 2, "compact"]),
    st.integers(min_value=1, max_value=3),
)
def test_property_streamed_restore_equals_backup_plus_nulls(
    backup: list[Any], current: list[Any], indent: int | str | None, batch: int
) -> None:
    saved = offsets.ENTRIES_PER_BATCH
    offsets.ENTRIES_PER_BATCH = batch
    style: dict[str, Any] = {"separators": (",", ":")} if indent == "compact" else {"indent": indent}
    try:
        backup_text = json.dumps({"offsets": backup}, **style)
        current_text = json.dumps({"offsets": current}, **style)
        try:
            expected: Any = _old_restore(backup_text, current)
        except OffsetsValidationError as error:
            with pytest.raises(OffsetsValidationError) as raised:
                offsets.restore_compact_json(backup_text, current_text)
            assert raised.value.problems == error.problems
            return
        restored = offsets.restore_compact_json(backup_text, current_text)
        assert (restored.json, restored.entries) == expected
    finally:
        offsets.ENTRIES_PER_BATCH = saved


@pytest.mark.parametrize(
    "current_text",
    ["", "{}", '{"offsets": null}', "[1]", '{"offsets":[{"partition":{"a":1},"offset":{"x":1}}], "x": 1}'],
)
def test_restore_tolerates_unusual_get_answers(current_text: str) -> None:
    restored = offsets.restore_compact_json('{"offsets":[{"partition":{"b":1},"offset":{"x":2}}]}', current_text)
    nulls = 1 if '"a"' in current_text else 0
    assert restored.entries == 1 + nulls
    assert json.loads(restored.json)["offsets"][0] == {"partition": {"b": 1}, "offset": {"x": 2}}


def test_a_compact_document_is_returned_as_it_is_not_copied(monkeypatch: pytest.MonkeyPatch) -> None:
    """Connect's answers and the operator's own lists are already compact: a 100 MB alter or
    restore of one is sent without a second copy of the text."""
    monkeypatch.setattr(stream, "ENTRIES_PER_BATCH", 2)
    entries = [{"partition": {"filename": f"/f/{i}", "n": 1.5}, "offset": {"position": i}} for i in range(5)]
    text = json.dumps({"offsets": entries}, separators=(",", ":"))
    assert offsets.validated_compact_json(text, "com.example.GenericSource", {}) is text
    assert offsets.validated_compact_json(text) is text
    assert offsets.restore_compact_json(text, text).json is text
    assert offsets.validated_compact_json('{"offsets":[]}', allow_empty=True) == '{"offsets":[]}'


@pytest.mark.parametrize("odd", [0, 1, 2, 3, 4])
def test_a_document_that_is_compact_only_in_part_is_written_where_it_differs(
    monkeypatch: pytest.MonkeyPatch, odd: int
) -> None:
    monkeypatch.setattr(stream, "ENTRIES_PER_BATCH", 2)
    parts = [json.dumps({"partition": {"p": i}, "offset": {"o": i}}, separators=(",", ":")) for i in range(5)]
    parts[odd] = parts[odd].replace('"o":', '"o": ').replace(f"{odd}}}}}", f"{odd}.50}}}}")  # space and 1.50
    text = '{"offsets":[' + ",".join(parts) + "]}"
    expected = parse_offsets_document(text).to_compact_json()
    assert expected != text
    assert offsets.validated_compact_json(text) == expected
    assert offsets.restore_compact_json(text, '{"offsets":[{"partition":{"q":1},"offset":{"o":1}}]}').json == (
        expected[:-2] + ',{"partition":{"q":1},"offset":null}]}'
    )


# --------------------------------------------------------------------------- every problem at once


def test_generic_and_family_problems_come_together_in_the_documents_order() -> None:
    """Issue 36: an unknown key, a wrong partition key and "ten" as an offset used to be reported one
    per round trip (the unknown key first; fixing it revealed the next)."""
    text = json.dumps(
        {
            "offsets": [
                {"partition": {"kafka_topic": "t", "kafka_partition": 0}, "offset": {"kafka_offset": 1}, "x": 1},
                {"partition": {"kafka_topic": "t", "partition": 1}, "offset": {"kafka_offset": 2}},
                {"partition": {"kafka_topic": "t", "kafka_partition": 2}, "offset": {"kafka_offset": "ten"}},
                {"partition": {"kafka_topic": "t", "kafka_partition": {"n": 3}}, "offset": {"kafka_offset": -1}},
            ]
        }
    )
    for check in (
        partial(parse_for_connector, text, "SomeSinkConnector", {"topics": "t"}, is_sink=True),
        partial(offsets.validated_compact_json, text, "SomeSinkConnector", {"topics": "t"}, is_sink=True),
    ):
        with pytest.raises(OffsetsValidationError) as raised:
            check()
        assert [p.path for p in raised.value.problems] == [
            "offsets[0]",
            "offsets[1].partition",
            "offsets[2].offset.kafka_offset",
            "offsets[3].partition.kafka_partition",  # nested: generic; its offset is still checked
            "offsets[3].offset.kafka_offset",
        ]
        assert raised.value.count == 5


def test_a_problem_of_the_connector_comes_first_and_the_entries_are_still_checked() -> None:
    text = doc_of(({"filename": "f"}, {"position": "ten"}), ({"filename": "f"}, None))
    with pytest.raises(OffsetsValidationError) as raised:
        parse_for_connector(text, offsets.FILE_STREAM_SOURCE_CLASS, {})
    assert [p.path for p in raised.value.problems] == ["$", "offsets[1].partition"]
    assert "stdin" in raised.value.problems[0].message and "duplicate" in raised.value.problems[1].message
    with pytest.raises(OffsetsValidationError) as raised:
        parse_for_connector(doc_of(({"kafka_topic": 1, "kafka_partition": 0}, None)), "X", {}, is_sink=True)
    assert [p.path for p in raised.value.problems] == ["offsets[0].partition.kafka_topic"]
    with pytest.raises(OffsetsValidationError) as raised:
        parse_for_connector("{nope", offsets.FILE_STREAM_SOURCE_CLASS, {})
    assert [p.path for p in raised.value.problems] == ["$", "$"]  # stdin, then: not valid JSON


def test_problems_past_the_cap_are_counted_not_kept() -> None:
    count = offsets.MAX_KEPT_PROBLEMS + 50
    text = json.dumps({"offsets": [{"partition": {"a": 1}, "offset": {"o": -i}, "x": i} for i in range(count)]})
    with pytest.raises(OffsetsValidationError) as raised:
        parse_offsets_document(text)
    error = raised.value
    assert len(error.problems) == offsets.MAX_KEPT_PROBLEMS
    assert error.count == count + (count - 1)  # every entry's unknown key, and every later one a duplicate
    lines = str(error).splitlines()
    assert len(lines) == offsets.MAX_LISTED_PROBLEMS + 1
    assert lines[-1] == f"... and {error.count - offsets.MAX_LISTED_PROBLEMS} more"
