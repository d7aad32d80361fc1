"""``--export`` files and import documents (tools/offline/export_file.py): bounded reads, the export
shape, JSON errors with line and column, and the pipeline refusing a bad file before Spark starts."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any, NoReturn

import pytest

from connect_offsets.offsets import OffsetsValidationError
from connect_offsets.tools import cli
from connect_offsets.tools.offline.export_file import (
    DocumentReadError,
    check_export_file,
    check_export_text,
    read_document,
)
from connect_offsets.tools.pipeline import command as pipeline

pytestmark = pytest.mark.unit

HISTORY = {
    "src": [
        {
            "partition": {"filename": "/a"},
            "offset": {"position": 8},
            "kafka": {"topic": "connect-offsets", "partition": 0, "offset": 3, "timestamp": 1763820120000},
        },
        {
            "partition": {"filename": "/a"},
            "offset": None,
            "kafka": {"topic": "connect-offsets", "partition": 0, "offset": 4, "timestamp": None},
        },
    ],
    "other": [],
}


@pytest.fixture
def no_spark(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Fail the test if anything tries to start a SparkSession or to reach Kafka."""
    calls: list[str] = []

    def refuse(*args: Any, **kwargs: Any) -> NoReturn:
        calls.append("spark")
        raise AssertionError("a SparkSession was requested")

    def no_kafka(*args: Any, **kwargs: Any) -> NoReturn:
        calls.append("kafka")
        raise AssertionError("Kafka was contacted")

    monkeypatch.setattr(pipeline, "build_session", refuse)
    monkeypatch.setattr("connect_offsets.tools.pipeline.session.build_session", refuse)
    monkeypatch.setattr("connect_offsets.tools.pipeline.preflight.check_topic", no_kafka)
    try:
        from pyspark.sql import SparkSession

        monkeypatch.setattr(SparkSession.Builder, "getOrCreate", refuse)
    except ImportError:  # pragma: no cover - the [spark] extra is installed in the dev venv
        pass
    return calls


def _problems(text: str) -> list[str]:
    with pytest.raises(OffsetsValidationError) as caught:
        check_export_text(text)
    return [str(p) for p in caught.value.problems]


# --------------------------------------------------------------------------- the shape


def test_history_and_latest_exports_pass() -> None:
    summary = check_export_text(json.dumps(HISTORY, indent=2))
    assert (summary.connectors, summary.entries, summary.with_positions) == (2, 2, 2)
    assert check_export_text("{}").connectors == 0
    latest = {"src": [{"partition": {"filename": "/a"}, "offset": {"position": 8}}]}
    assert check_export_text(json.dumps(latest)).with_positions == 0


@pytest.mark.parametrize(
    "text",
    [
        "{bad",
        "",
        "  ",
        '{"a": [}',
        '{"a": [1,]}',
        '{"a" []}',
        '{"a": []} x',
        '{"a": [{"partition": {}]}',
        "{\n\n  'a': 1}",
    ],
)
def test_json_errors_name_the_position_as_json_loads_does(text: str) -> None:
    with pytest.raises(json.JSONDecodeError) as expected:
        json.loads(text)
    (problem,) = _problems(text)
    assert f"at line {expected.value.lineno}, column {expected.value.colno}" in problem
    assert problem.startswith("$: not valid JSON: ")


def test_bad_json_message() -> None:
    assert _problems("{bad") == [
        "$: not valid JSON: Expecting property name enclosed in double quotes at line 1, column 2"
    ]


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ([1], "$: expected an object"),
        ({"src": {"offsets": []}}, "src: the KIP-875 form"),
        ({"src": 3}, "src: expected a list of"),
        ({"src": [{"partition": {"f": "/a"}}]}, "src[0].offset: missing"),
        ({"src": [{"partition": {"f": "/a"}, "offset": None, "extra": 1}]}, 'src[0]: unknown key(s) "extra"'),
        ({"src": [{"partition": {"f": [1]}, "offset": None}]}, "src[0].partition"),
        ({"src": [{"partition": {"f": "/a"}, "offset": None, "kafka": {"topic": 1}}]}, "src[0].kafka.topic"),
        ({"src": [{"partition": {"f": "/a"}, "offset": None, "kafka": {"offset": "3"}}]}, "src[0].kafka.offset"),
        ({"a b": [7]}, '"a b"[0]: expected an object'),
    ],
)
def test_shape_problems_name_the_entry(document: object, expected: str) -> None:
    problems = _problems(json.dumps(document))
    assert any(p.startswith(expected) for p in problems), problems


def test_duplicate_connectors_and_nan_are_refused() -> None:
    assert _problems('{"a": [], "a": []}') == ["$: connector a appears twice; keys must be unique"]
    assert "NaN is not allowed" in _problems('{"a": [{"partition": {"x": NaN}, "offset": null}]}')[0]


# --------------------------------------------------------------------------- bounded reads


def test_read_document_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "big.json"
    path.write_text('{"a": []}')
    assert read_document(path, limit=9) == '{"a": []}'
    with pytest.raises(DocumentReadError, match=r"big.json: larger than 8 bytes \(CONNECT_OFFSETS_MAX_DOCUMENT_BYTES"):
        read_document(path, limit=8)
    with pytest.raises(DocumentReadError, match="stdin: larger than 4 bytes"):
        read_document(None, stdin=io.BytesIO(b'{"a": []}'), limit=4)
    monkeypatch.setenv("CONNECT_OFFSETS_MAX_DOCUMENT_BYTES", "5")
    with pytest.raises(DocumentReadError, match="larger than 5 bytes"):
        check_export_file(path)
    with pytest.raises(DocumentReadError, match="No such file"):
        read_document(tmp_path / "missing.json")
    with pytest.raises(OffsetsValidationError, match="expected UTF-8"):
        read_document(None, stdin=io.BytesIO(b"\xff{}"), limit=10)


def test_import_reads_its_input_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    config = tmp_path / "worker.properties"
    config.write_text(f"offset.storage.file.filename={tmp_path / 'offsets.dat'}\nlisteners=http://127.0.0.1:1\n")
    source = tmp_path / "in.json"
    source.write_text(json.dumps({"src": [{"partition": {"f": "/a"}, "offset": {"position": 1}}]}))
    monkeypatch.setenv("CONNECT_OFFSETS_MAX_DOCUMENT_BYTES", "10")
    assert cli.main(["import", "-w", str(config), "-i", str(source), "--dry-run"]) == cli.EXIT_INVALID
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--input {source}: larger than 10 bytes" in err[0]


# --------------------------------------------------------------------------- the pipeline


@pytest.mark.parametrize("job", [["latest"], ["history"], ["as-of", "--at", "2026-11-22T14:02:00Z"]])
def test_pipeline_refuses_a_bad_export_before_spark(
    job: list[str], tmp_path: Path, no_spark: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{bad")
    code = cli.main(["pipeline", *job, "--export", str(bad), "-o", str(tmp_path / "out"), "-q"])
    assert code == cli.EXIT_INVALID == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"connect-offsets pipeline: error: --export {bad}: not a connect-offsets export: not valid JSON: "
        "Expecting property name enclosed in double quotes at line 1, column 2"
    ]
    assert no_spark == []  # neither Spark nor Kafka was asked
    assert not (tmp_path / "out").exists()


def test_pipeline_checks_every_export_and_names_the_bad_one(
    tmp_path: Path, no_spark: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps(HISTORY))
    bad.write_text(json.dumps({"src": [{"partition": {"f": "/a"}}], "x": {"offsets": []}}, indent=1))
    args = ["latest", "--export", str(good), "--export", str(bad), "-o", str(tmp_path / "out")]
    assert pipeline.main(args) == 2
    err = capsys.readouterr().err
    assert f"{good}: 2 connector(s), 2 entries (2 with Kafka positions)" in err  # the progress line
    assert f"--export {bad}: not a connect-offsets export: src[0].offset: missing" in err
    assert "(and 1 more problem(s))" in err
    assert no_spark == []


def test_pipeline_reaches_spark_only_with_good_exports(
    tmp_path: Path, no_spark: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    good = tmp_path / "good.json"
    good.write_text(json.dumps(HISTORY))
    with pytest.raises(AssertionError, match="SparkSession was requested"):
        pipeline.main(["latest", "--export", str(good), "-o", str(tmp_path / "out"), "-q"])
    assert no_spark == ["spark"]


def test_pipeline_export_too_large(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_spark: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    good = tmp_path / "good.json"
    good.write_text(json.dumps(HISTORY))
    monkeypatch.setenv("CONNECT_OFFSETS_MAX_DOCUMENT_BYTES", "100")
    assert pipeline.main(["latest", "--export", str(good), "-o", str(tmp_path / "out"), "-q"]) == 2
    assert f"--export {good}: larger than 100 bytes" in capsys.readouterr().err
    assert no_spark == []
