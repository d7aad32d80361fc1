"""cli.py without Kafka: help texts, exit codes, one-line errors, and the standalone file commands
(which need only a file; the "worker is running" check probes a local port)."""

from __future__ import annotations

import io
import json
import socket
from pathlib import Path

import pytest

from connect_offsets.tools import cli
from connect_offsets.tools.exit_codes import epilog
from connect_offsets.tools.offline.offsets_file import decode_offsets_file, encode_offsets_file
from connect_offsets.tools.offline.records import encode_key, encode_value

pytestmark = pytest.mark.unit


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture
def standalone(tmp_path: Path) -> tuple[Path, Path]:
    offsets = tmp_path / "offsets.dat"
    offsets.write_bytes(
        encode_offsets_file(
            {
                encode_key("src", {"filename": "/a"}): encode_value({"position": 80}),
                encode_key("src", {"filename": "/gone"}): None,
                encode_key("other", {"filename": "/b"}): encode_value({"position": 5}),
            }
        )
    )
    config = tmp_path / "worker.properties"
    config.write_text(f"offset.storage.file.filename={offsets}\nlisteners=http://127.0.0.1:{free_port()}\n")
    return config, offsets


@pytest.mark.parametrize("command", ["export", "import", "crds"])
def test_every_command_has_help_with_examples(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main([command, "--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    assert "example" in text
    if command != "crds":
        assert epilog("connect-offsets") in text and "--worker-config" in text


def test_standalone_export(standalone: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    config, _ = standalone
    assert cli.main(["export", "-w", str(config)]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document == {
        "other": [{"partition": {"filename": "/b"}, "offset": {"position": 5}}],
        "src": [{"partition": {"filename": "/a"}, "offset": {"position": 80}}],
    }
    assert cli.main(["export", "-w", str(config), "-c", "src", "--format", "kip875"]) == 0
    assert json.loads(capsys.readouterr().out) == {"src": {"offsets": document["src"]}}
    assert cli.main(["export", "-w", str(config), "--from-beginning"]) == cli.EXIT_INVALID
    assert "standalone worker's file keeps only the latest" in capsys.readouterr().err


def test_standalone_import_dry_run_then_write(
    standalone: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config, offsets = standalone
    before = offsets.read_bytes()
    document = {
        "src": [
            {"partition": {"filename": "/a"}, "offset": {"position": 16}},
            {"partition": {"filename": "/new"}, "offset": None},
        ]
    }
    source = tmp_path / "in.json"
    source.write_text(json.dumps(document))
    assert cli.main(["import", "-w", str(config), "--dry-run", "-i", str(source)]) == 0
    out = capsys.readouterr().out
    assert "would write" in out and '= {"position":16}   (was {"position":80}; existing key)' in out
    assert '{"filename":"/new"}] = null (remove)   (was absent; new key)' in out
    assert offsets.read_bytes() == before

    assert cli.main(["import", "-w", str(config), "-i", str(source)]) == 0
    entries = decode_offsets_file(offsets.read_bytes())
    assert entries[encode_key("src", {"filename": "/a"})] == b'{"position":16}'
    assert entries[encode_key("src", {"filename": "/new"})] is None  # tombstone kept as a null value
    assert entries[encode_key("other", {"filename": "/b"})] == b'{"position":5}'  # untouched
    assert [p.read_bytes() for p in tmp_path.glob("offsets.dat.*.bak")] == [before]
    assert not list(tmp_path.glob(".offsets.dat.*.tmp"))


def test_running_standalone_worker_is_refused(
    standalone: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    config, offsets = standalone
    before = offsets.read_bytes()
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        config.write_text(f"offset.storage.file.filename={offsets}\nlisteners=http://:{listener.getsockname()[1]}\n")
        document = json.dumps({"src": [{"partition": {"filename": "/a"}, "offset": {"position": 0}}]})
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(document.encode())))
            assert cli.main(["import", "-w", str(config)]) == cli.EXIT_REFUSED
    err = capsys.readouterr().err
    assert err.startswith("connect-offsets: error: a standalone worker answers at 127.0.0.1:")
    assert offsets.read_bytes() == before


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"src": {"partition": {}, "offset": {}}}', "invalid import document: src: expected a list"),
        ('{"src": [{"partition": {"filename": "/a"}}]}', "src[0].offset: missing"),
        ("[1]", "$: expected an object"),
    ],
)
def test_bad_documents_exit_2_with_one_line(
    standalone: tuple[Path, Path], tmp_path: Path, text: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    config, offsets = standalone
    before = offsets.read_bytes()
    source = tmp_path / "bad.json"
    source.write_text(text)
    assert cli.main(["import", "-w", str(config), "-i", str(source)]) == cli.EXIT_INVALID
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]
    assert offsets.read_bytes() == before


def test_many_problems_point_to_verbose(
    standalone: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config, _ = standalone
    source = tmp_path / "bad.json"
    source.write_text(json.dumps({"a": 1, "b": 2}))
    assert cli.main(["import", "-w", str(config), "-i", str(source)]) == cli.EXIT_INVALID
    assert "(and 1 more)" in capsys.readouterr().err
    assert cli.main(["import", "-w", str(config), "-i", str(source), "--verbose"]) == cli.EXIT_INVALID
    verbose = capsys.readouterr().err
    assert "  a: expected a list" in verbose and "  b: expected a list" in verbose


def test_bad_worker_config_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "w.properties"
    config.write_text("foo=bar\n")
    assert cli.main(["export", "-w", str(config)]) == cli.EXIT_INVALID
    assert "not a Connect worker config" in capsys.readouterr().err
    assert cli.main(["export", "-w", str(tmp_path / "missing")]) == cli.EXIT_INVALID
    assert "cannot read worker config" in capsys.readouterr().err


def test_cli_never_imports_kopf() -> None:
    import subprocess
    import sys

    code = "import sys, connect_offsets.tools.cli; print('kopf' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"
