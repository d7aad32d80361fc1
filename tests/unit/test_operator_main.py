"""The operator's entry point: process-wide settings made before kopf starts."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.unit


def test_malloc_arenas_are_limited_on_glibc() -> None:
    # In a child process: the setting is process-wide and one-way.
    code = "from connect_offsets.handlers.main import limit_malloc_arenas as f; print(f())"
    answer = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    libc = subprocess.run(["ldd", "--version"], capture_output=True, text=True, check=False)
    expected = "True" if "GLIBC" in (libc.stdout + libc.stderr).upper() else "False"
    assert answer.stdout.strip() == expected
