"""The pipeline's Spark jobs on hand-made records (no Kafka): decoding, latest, as-of, history, export.

Records are built as Spark's Kafka source delivers them (binary key/value, topic, partition, offset,
timestamp), one Spark partition per Kafka partition in log order, and go through the same decoding
as a real read. One local SparkSession serves every test (session fixture, local[2]).
"""

from __future__ import annotations

import argparse
import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from connect_offsets.tools.pipeline import register
from connect_offsets.tools.pipeline.command import (
    build_parser,
    configmap_names,
    connector_file,
    kafka_sources,
)
from connect_offsets.tools.pipeline.jobs import (
    PipelineError,
    as_of,
    decode_kafka,
    decode_records,
    history_summary,
    latest,
    latest_documents,
    only_connectors,
    parse_time,
    read_export,
    write_history,
)
from connect_offsets.tools.pipeline.session import SparkSetupError, find_kafka_jars

T0 = datetime(2026, 11, 1, 12, 0, 0, tzinfo=UTC)
RAW_SCHEMA = "key binary, value binary, topic string, partition int, offset long, timestamp timestamp"
# One xdist worker runs the Spark tests (here and tests/integration/test_pipeline.py): one SparkSession JVM.
pytestmark = pytest.mark.xdist_group("spark-session")


Record = tuple[str | None, str | None, int, int, int]  # key, value, kafka partition, kafka offset, seconds after T0


def raw_frame(spark: Any, records: list[Record], topic: str = "connect-offsets") -> Any:
    """A DataFrame shaped like Spark's Kafka source: one Spark partition per Kafka partition, log order."""
    partitions = sorted({r[2] for r in records})
    rows = [
        (
            None if key is None else key.encode(),
            None if value is None else value.encode(),
            topic,
            p,
            offset,
            (T0 + timedelta(seconds=secs)).replace(tzinfo=None),
        )
        for p in partitions
        for key, value, kp, offset, secs in sorted(records, key=lambda r: r[3])
        if kp == p
    ]
    # One local relation per Kafka partition, each a single Spark partition; their union keeps that.
    frames = [spark.createDataFrame([r for r in rows if r[3] == p], RAW_SCHEMA).coalesce(1) for p in partitions]
    result = frames[0]
    for frame in frames[1:]:
        result = result.union(frame)
    return result


def key(connector: str, partition: dict[str, Any]) -> str:
    return json.dumps([connector, partition], separators=(",", ":"))


FILE_A = {"filename": "/data/a.txt"}
FILE_B = {"filename": "/data/b.txt"}


def test_decoding_skips_what_connect_skips_and_canonicalises_partitions(spark: Any) -> None:
    records: list[Record] = [
        (key("src", {"b": 2, "a": "x"}), '{"position":1}', 0, 0, 0),
        ('["src",{"a":"x","b":2}]', '{"position":2}', 0, 1, 1),  # same partition, other key order
        ("not json", '{"position":3}', 0, 2, 2),
        ('["src",null]', '{"position":4}', 0, 3, 3),
        ('[1,{"a":1}]', '{"position":5}', 0, 4, 4),
        ('["src",{"a":1},3]', '{"position":6}', 0, 5, 5),
        (None, '{"position":7}', 0, 6, 6),
        (key("src", FILE_A), "null", 0, 7, 7),  # JSON null value: a tombstone, as JsonConverter reads it
        (key("src", FILE_A), None, 0, 8, 8),
    ]
    rows = decode_records(decode_kafka(raw_frame(spark, records))).orderBy("kafka_offset").collect()
    assert [(r["connector"], r["partition"], r["offset"], r["tombstone"], r["kafka_offset"]) for r in rows] == [
        ("src", '{"a":"x","b":2}', '{"position":1}', False, 0),
        ("src", '{"a":"x","b":2}', '{"position":2}', False, 1),
        ("src", '{"filename":"/data/a.txt"}', None, True, 7),
        ("src", '{"filename":"/data/a.txt"}', None, True, 8),
    ]
    assert rows[0]["partition_stored"] == '{"b":2,"a":"x"}'  # as written, for the documents


def test_latest_honours_tombstones_and_keeps_number_types(spark: Any) -> None:
    records: list[Record] = [
        (key("src", FILE_A), '{"position":10}', 0, 0, 0),
        (key("src", FILE_B), '{"position":5}', 1, 0, 1),
        (key("src", FILE_A), '{"position":20}', 0, 1, 2),
        (key("src", FILE_B), None, 1, 1, 3),  # reset: B has no offset any more
        ('["mm2",{"cluster":"A","partition":0,"ratio":1.0}]', '{"offset":9007199254740993,"f":1.5E-7}', 2, 0, 4),
        (key("gone", FILE_A), '{"position":1}', 2, 1, 5),
        (key("gone", FILE_A), None, 2, 2, 6),
    ]
    frame = decode_kafka(raw_frame(spark, records))
    documents = latest_documents(frame)
    assert documents == {
        "mm2": {
            "offsets": [
                {
                    "partition": {"cluster": "A", "partition": 0, "ratio": 1.0},
                    "offset": {"offset": 9007199254740993, "f": 1.5e-7},
                }
            ]
        },
        "src": {"offsets": [{"partition": FILE_A, "offset": {"position": 20}}]},
    }
    ratio = documents["mm2"]["offsets"][0]["partition"]["ratio"]
    assert isinstance(ratio, float)  # 1.0 stays a double: the key bytes Connect matches keep "1.0"
    assert (
        json.dumps(documents["src"])
        == '{"offsets": [{"partition": {"filename": "/data/a.txt"}, "offset": {"position": 20}}]}'
    )
    assert latest(frame).count() == 2


def test_as_of_each_instant_with_a_reset_in_between(spark: Any) -> None:
    records: list[Record] = [
        (key("src", FILE_A), '{"position":100}', 0, 0, 10),
        (key("src", FILE_A), '{"position":200}', 0, 1, 20),
        (key("src", FILE_A), None, 0, 2, 30),  # reset (DELETE offsets)
        (key("src", FILE_A), '{"position":50}', 0, 3, 40),
        (key("src", FILE_B), '{"position":7}', 1, 0, 35),  # B appears after the reset
    ]
    frame = decode_kafka(raw_frame(spark, records)).cache()

    def at(seconds: float) -> dict[str, Any]:
        return as_of(frame, T0 + timedelta(seconds=seconds)).documents

    assert at(10) == {
        "src": {"offsets": [{"partition": FILE_A, "offset": {"position": 100}}, {"partition": FILE_B, "offset": None}]}
    }
    assert at(25)["src"]["offsets"][0] == {"partition": FILE_A, "offset": {"position": 200}}
    # at the reset: no offset for A, and B (which exists now) did not exist yet -> both removed
    assert at(30) == {
        "src": {"offsets": [{"partition": FILE_A, "offset": None}, {"partition": FILE_B, "offset": None}]}
    }
    assert at(36) == {
        "src": {"offsets": [{"partition": FILE_A, "offset": None}, {"partition": FILE_B, "offset": {"position": 7}}]}
    }
    assert at(40) == latest_documents(frame)
    result = as_of(frame, T0 + timedelta(seconds=10))
    assert result.compacted == [] and result.not_covered == []
    with pytest.raises(PipelineError, match=r"before the earliest retained record \(2026-11-01T12:00:10.000Z\)"):
        as_of(frame, T0 + timedelta(seconds=9))
    frame.unpersist()


def test_as_of_lists_partitions_whose_history_may_have_been_compacted(spark: Any) -> None:
    # Kafka partition 0 lost offsets 0-2 (compacted); partition 1 is complete.
    records: list[Record] = [
        (key("src", FILE_A), '{"position":300}', 0, 3, 50),  # first retained record of A, after T
        (key("src", FILE_B), '{"position":1}', 1, 0, 5),
        (key("src", FILE_B), '{"position":2}', 1, 1, 60),
        (key("new", FILE_A), '{"position":1}', 1, 2, 70),  # no gap before it: truly did not exist at T
    ]
    frame = decode_kafka(raw_frame(spark, records))
    result = as_of(frame, T0 + timedelta(seconds=10))
    assert result.compacted == [
        {
            "connector": "src",
            "partition": FILE_A,
            "first_retained": "2026-11-01T12:00:50.000Z",
            "missing_offsets_before": 3,
        }
    ]
    assert result.not_covered == ["new"]
    assert result.documents["src"] == {
        "offsets": [{"partition": FILE_A, "offset": None}, {"partition": FILE_B, "offset": {"position": 1}}]
    }
    assert result.documents["new"] == {"offsets": [{"partition": FILE_A, "offset": None}]}


def test_reduction_per_stored_key_then_per_canonical_partition(spark: Any) -> None:
    # The jobs reduce per stored key text first, then per canonical partition: the winner must be the
    # record a single reduction would pick, with the stored text of *its* key.
    records: list[Record] = [
        ('["src",{"b":2,"a":"x"}]', '{"position":1}', 0, 0, 5),
        ('["src", {"a":"x", "b":2}]', '{"position":2}', 1, 0, 5),  # same instant, same partition, later Kafka partition
        ('["src",{"b":2,"a":"x"}]', '{"position":3}', 0, 1, 4),  # later offset but an earlier timestamp: loses
        ('["src",{"n":1}]', '{"position":4}', 0, 2, 6),
        ('["src",{"n":"1"}]', None, 0, 3, 7),  # "1" is another partition than 1 (a tombstone here)
        ('["src",{"n":"1"}]', '{"position":5}', 1, 1, 3),
        ("not json", '{"position":0}', 0, 4, 0),  # skipped keys count for nothing (not even as earliest time)
        ('["src","{"]', '{"position":0}', 1, 2, 0),  # a string, not an object, though it starts with {
        ('["src","{\\"n\\":1}"]', '{"position":0}', 1, 3, 0),
    ]
    frame = decode_kafka(raw_frame(spark, records))
    rows = {r["partition"]: r for r in latest(frame).collect()}
    assert sorted(rows) == ['{"a":"x","b":2}', '{"n":1}']
    assert (rows['{"a":"x","b":2}']["partition_stored"], rows['{"a":"x","b":2}']["offset"]) == (
        '{"a":"x","b":2}',  # from the winning key (from_json re-serialises the stored object compactly)
        '{"position":2}',
    )
    result = as_of(frame, T0 + timedelta(seconds=5))
    assert result.documents == {
        "src": {
            "offsets": [
                {"partition": {"a": "x", "b": 2}, "offset": {"position": 2}},
                {"partition": {"n": "1"}, "offset": {"position": 5}},  # canonical '{"n":"1"}' sorts first
                {"partition": {"n": 1}, "offset": None},  # has an offset now, had none at T
            ]
        }
    }
    assert result.rows == 3
    with pytest.raises(PipelineError, match=r"before the earliest retained record \(2026-11-01T12:00:03.000Z\)"):
        as_of(frame, T0 + timedelta(seconds=2))
    only = only_connectors(frame, ["other"])
    assert latest(only).count() == 0
    assert latest(only_connectors(frame, ["src"])).count() == 2


def test_numbers_identify_partitions_as_the_worker_reads_them(spark: Any) -> None:
    # JsonConverter reads integers as Long and anything with a fraction or an exponent as Double, and
    # Jackson keeps the last value of a key given twice: 1 and 1.0 are two partitions, 1.0 and 1e0 one.
    records: list[Record] = [
        ('["src",{"n":1}]', '{"position":1}', 0, 0, 1),
        ('["src",{"n":1.0}]', '{"position":2}', 0, 1, 2),
        ('["src",{"n":1e0}]', '{"position":3}', 1, 0, 3),  # the same Double 1.0: wins with its own text
        ('["src",{"n":1.5E-7}]', '{"position":4}', 1, 1, 4),
        ('["src",{"n":0.00000015}]', None, 0, 2, 5),  # the same Double again: a tombstone for it
        ('["src",{"a":1,"a":2}]', '{"position":6}', 0, 3, 6),
        ('["src",{"a":2.0}]', '{"position":7}', 1, 2, 7),  # a Double, not the Long 2 above
        ('["src",{"a":2}]', '{"position":8}', 1, 3, 8),  # the Long 2: the same partition as {"a":1,"a":2}
    ]
    frame = decode_kafka(raw_frame(spark, records))
    rows = {r["partition"]: (r["partition_stored"], r["offset"]) for r in latest(frame).collect()}
    assert rows == {
        '{"n":1}': ('{"n":1}', '{"position":1}'),
        '{"n":1.0}': ('{"n":1.0}', '{"position":3}'),  # from_json re-serialises 1e0 as the double 1.0
        '{"a":2.0}': ('{"a":2.0}', '{"position":7}'),
        '{"a":2}': ('{"a":2}', '{"position":8}'),
    }
    documents = latest_documents(frame)
    partitions = [entry["partition"] for entry in documents["src"]["offsets"]]
    assert partitions == [{"a": 2.0}, {"a": 2}, {"n": 1.0}, {"n": 1}]  # sorted by canonical text
    assert [type(next(iter(p.values()))) for p in partitions] == [float, int, float, int]
    history = decode_records(frame).where("kafka_partition = 0 AND kafka_offset = 3").collect()
    assert [(r["partition"], r["partition_stored"]) for r in history] == [('{"a":2}', '{"a":1,"a":2}')]


def test_export_keys_round_trip_names_that_need_escaping(spark: Any, tmp_path: Path) -> None:
    name = 'a "quoted" \\ name \u00e9'
    path = tmp_path / "export.json"
    path.write_text(json.dumps({name: [{"partition": {"b": 1, "a": "x"}, "offset": {"p": 1}}]}))
    frame = read_export(spark, str(path))
    assert latest_documents(frame) == {name: {"offsets": [{"partition": {"b": 1, "a": "x"}, "offset": {"p": 1}}]}}
    decoded = decode_records(frame).collect()
    assert [(r["connector"], r["partition"], r["partition_stored"]) for r in decoded] == [
        (name, '{"a":"x","b":1}', '{"b":1,"a":"x"}')
    ]


def test_random_history_matches_a_plain_python_replay(spark: Any) -> None:
    rng = random.Random(875)
    partitions = [{"filename": f"/f/{i}", "shard": i % 3} for i in range(12)]
    records: list[Record] = []
    next_offset = dict.fromkeys(range(4), 0)
    for step in range(600):
        connector = f"c{rng.randrange(3)}"
        index = rng.randrange(len(partitions))
        kp = (int(connector[1]) + index) % 4  # a key always lands on the same Kafka partition
        value = None if rng.random() < 0.15 else json.dumps({"position": rng.randrange(10**12)})
        records.append((key(connector, partitions[index]), value, kp, next_offset[kp], step))
        next_offset[kp] += 1
    frame = decode_kafka(raw_frame(spark, records)).cache()

    def replay(cut: int) -> dict[str, list[str]]:
        then: dict[tuple[str, str], str | None] = {}
        now: dict[tuple[str, str], str | None] = {}
        for k, v, _, _, secs in records:
            connector, partition = json.loads(k or "")
            ident = (connector, json.dumps(partition, sort_keys=True))
            now[ident] = v
            if secs <= cut:
                then[ident] = v
        expected: dict[str, list[str]] = {}
        for ident in set(then) | set(now):
            if then.get(ident) is None and now.get(ident) is None:
                continue
            value = then.get(ident)
            entry = {"partition": json.loads(ident[1]), "offset": None if value is None else json.loads(value)}
            expected.setdefault(ident[0], []).append(json.dumps(entry, sort_keys=True))
        return {c: sorted(entries) for c, entries in expected.items()}

    for cut in (0, 150, 333, 599):
        got = as_of(frame, T0 + timedelta(seconds=cut)).documents
        assert {c: sorted(json.dumps(e, sort_keys=True) for e in d["offsets"]) for c, d in got.items()} == replay(cut)
    frame.unpersist()


def test_export_file_with_and_without_kafka_positions(spark: Any, tmp_path: Path) -> None:
    history = {
        "src": [
            {
                "partition": FILE_A,
                "offset": {"position": 1},
                "kafka": {"topic": "o", "partition": 0, "offset": 0, "timestamp": 1_700_000_000_000},
            },
            {
                "partition": FILE_A,
                "offset": None,
                "kafka": {"topic": "o", "partition": 0, "offset": 4, "timestamp": 1_700_000_001_000},
            },
            {
                "partition": FILE_A,
                "offset": {"position": 3},
                "kafka": {"topic": "o", "partition": 0, "offset": 5, "timestamp": 1_700_000_002_000},
            },
        ]
    }
    path = tmp_path / "history.json"
    path.write_text(json.dumps(history))
    frame = read_export(spark, str(path))
    assert [r["removed_before"] for r in frame.orderBy("kafka_offset").collect()] == [0, 3, 3]
    assert as_of(frame, datetime.fromtimestamp(1_700_000_001.5, tz=UTC)).documents == {
        "src": {"offsets": [{"partition": FILE_A, "offset": None}]}
    }
    assert latest_documents(frame) == {"src": {"offsets": [{"partition": FILE_A, "offset": {"position": 3}}]}}

    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({"a b": [{"partition": FILE_B, "offset": {"position": 9}}]}))
    plain_frame = read_export(spark, str(plain))
    assert latest_documents(plain_frame) == {"a b": {"offsets": [{"partition": FILE_B, "offset": {"position": 9}}]}}
    with pytest.raises(PipelineError, match="no timestamps"):
        as_of(plain_frame, T0)


def test_history_parquet_and_summary(spark: Any, tmp_path: Path) -> None:
    records: list[Record] = [
        (key("src", FILE_A), '{"position":1}', 0, 0, 0),
        (key("src", FILE_A), None, 0, 1, 5),
        (key("other", FILE_B), '{"position":2}', 1, 0, 9),
    ]
    frame = decode_records(decode_kafka(raw_frame(spark, records)))
    write_history(frame, str(tmp_path / "history"))
    assert sorted(p.name for p in (tmp_path / "history").iterdir() if p.is_dir()) == [
        "connector=other",
        "connector=src",
    ]
    table = spark.read.parquet(str(tmp_path / "history")).where("connector = 'src'").orderBy("kafka_offset").collect()
    assert [(r["partition"], r["offset"], r["tombstone"]) for r in table] == [
        ('{"filename":"/data/a.txt"}', '{"position":1}', False),
        ('{"filename":"/data/a.txt"}', None, True),
    ]
    assert history_summary(frame) == [
        {
            "connector": "other",
            "records": 1,
            "tombstones": 0,
            "partitions": 1,
            "first": "2026-11-01T12:00:09.000Z",
            "last": "2026-11-01T12:00:09.000Z",
            "topics": ["connect-offsets"],
        },
        {
            "connector": "src",
            "records": 2,
            "tombstones": 1,
            "partitions": 1,
            "first": "2026-11-01T12:00:00.000Z",
            "last": "2026-11-01T12:00:05.000Z",
            "topics": ["connect-offsets"],
        },
    ]


# --------------------------------------------------------------------------- command line (no Spark)


def test_parse_time_forms() -> None:
    assert parse_time("2026-11-01T12:00:00Z") == T0
    assert parse_time("2026-11-01T13:00:00+01:00") == T0
    assert parse_time("2026-11-01T12:00:00") == T0  # no zone = UTC
    assert parse_time(str(int(T0.timestamp() * 1000))) == T0
    with pytest.raises(PipelineError, match="expected an ISO-8601 time"):
        parse_time("yesterday")


def test_sources_and_names_from_flags() -> None:
    args = build_parser().parse_args(
        [
            "latest",
            "-b",
            "k1:9092",
            "-t",
            "connect-offsets",
            "-t",
            "k2:9092,k3:9092/own-offsets",
            "-o",
            "out",
            "--kafka-option",
            "security.protocol=SSL",
        ]
    )
    sources = kafka_sources(args)
    assert [(s.bootstrap_servers, s.topic, s.options) for s in sources] == [
        ("k1:9092", "connect-offsets", {"security.protocol": "SSL"}),
        ("k2:9092,k3:9092", "own-offsets", {"security.protocol": "SSL"}),
    ]
    assert sources[0].isolation_level == "read_committed"
    no_servers = build_parser().parse_args(["latest", "-t", "connect-offsets", "-o", "out"])
    with pytest.raises(PipelineError, match="no Kafka to read it from"):
        kafka_sources(no_servers)
    assert configmap_names("rewind-{connector}", ["a", "b"]) == {"a": "rewind-a", "b": "rewind-b"}
    with pytest.raises(PipelineError, match="2 connectors selected"):
        configmap_names("rewind", ["a", "b"])
    assert connector_file(Path("out"), "A->B.MirrorSourceConnector").name == "A-%3EB.MirrorSourceConnector.json"


def test_register_adds_the_pipeline_command() -> None:
    parser = argparse.ArgumentParser(prog="connect-offsets")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["pipeline", "as-of", "--at", "2026-11-01T12:00:00Z", "--export", "f.json", "-o", "x"])
    assert (args.command, args.pipeline_command, args.at, args.export) == (
        "pipeline",
        "as-of",
        "2026-11-01T12:00:00Z",
        ["f.json"],
    )
    assert callable(args.func)
    with pytest.raises(SystemExit):
        parser.parse_args(["pipeline", "as-of", "-o", "x"])  # --at is required


def test_missing_jars_are_named_with_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONNECT_OFFSETS_CACHE", str(tmp_path))
    with pytest.raises(SparkSetupError, match=r"spark-sql-kafka-0-10.*make spark-jars"):
        find_kafka_jars()
    with pytest.raises(SparkSetupError, match="no such file"):
        find_kafka_jars([str(tmp_path / "nope.jar")])


def test_no_source_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = build_parser().parse_args(["latest", "-o", str(tmp_path)])
    assert args.func(args) == 2
    assert "no source given" in capsys.readouterr().err
