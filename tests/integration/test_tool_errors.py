"""The command line tools against a Kafka that is not there (127.0.0.1:1; no stack needed): one line
on stderr naming the servers, no raw librdkafka ``%3|...|FAIL|...`` lines, within a few seconds.

Run as subprocesses because librdkafka writes its own lines to file descriptor 2 from its threads,
which pytest's capsys would not see. ``python -m`` with the inherited PYTHONPATH runs this checkout."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

WORKER = """bootstrap.servers=127.0.0.1:1
group.id=unreachable
offset.storage.topic=connect-offsets
config.storage.topic=connect-configs
status.storage.topic=connect-status
"""


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=60)


def test_export_and_import_print_one_line(tmp_path: Path) -> None:
    worker = tmp_path / "worker.properties"
    worker.write_text(WORKER)
    document = tmp_path / "in.json"
    document.write_text('{"src": [{"partition": {"filename": "/a"}, "offset": {"position": 1}}]}')
    for command in (["export"], ["import", "-i", str(document), "--dry-run"]):
        started = time.monotonic()
        result = run("-m", "connect_offsets.tools.cli", *command, "-w", str(worker), "--timeout", "2")
        assert time.monotonic() - started < 20
        assert result.returncode == 1, result.stderr
        assert "%3|" not in result.stderr and "FAIL" not in result.stderr, result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, result.stderr
        assert lines[0].startswith("connect-offsets: error: cannot reach Kafka at 127.0.0.1:1 (connection refused)")
        assert "check bootstrap.servers in the worker config" in lines[0]


def test_verbose_shows_librdkafka_lines(tmp_path: Path) -> None:
    worker = tmp_path / "worker.properties"
    worker.write_text(WORKER)
    result = run("-m", "connect_offsets.tools.cli", "export", "-w", str(worker), "--timeout", "2", "-v")
    assert result.returncode == 1
    assert "librdkafka ERROR: FAIL" in result.stderr and "%3|" not in result.stderr


def test_pipeline_preflight_prints_one_line(tmp_path: Path) -> None:
    started = time.monotonic()
    result = run(
        "-m", "connect_offsets.tools.cli", "pipeline", "latest", "-b", "127.0.0.1:1", "-t", "connect-offsets",
        "-o", str(tmp_path / "out"), "-q",
    )  # fmt: skip
    assert time.monotonic() - started < 40  # the preflight waits up to 15 s for metadata
    assert result.returncode == 2, result.stderr
    assert "%3|" not in result.stderr, result.stderr
    assert result.stderr.strip().splitlines() == [
        "connect-offsets pipeline: error: cannot reach Kafka at 127.0.0.1:1 (connection refused): "
        "check --bootstrap-servers (or SERVERS/ of --topic) and that the brokers are up"
    ]
