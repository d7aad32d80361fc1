"""With ``--log-format json`` every line the operator writes is JSON: Python's warnings too (an
insecure kubeconfig's ``InsecureRequestWarning`` was two raw lines that broke line-by-line parsing,
issue 49's new-user run)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.unit

SCRIPT = """
import warnings
import urllib3
from connect_offsets.handlers import main

async def no_operator(**kwargs):
    return None

main.kopf.operator = no_operator
main.main(["--log-format", "json"])
warnings.warn("Unverified HTTPS request", urllib3.exceptions.InsecureRequestWarning)
"""


def test_a_python_warning_is_a_json_log_line() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert any("Unverified HTTPS request" in line for line in lines), lines
    for line in lines:
        record = json.loads(line)  # every line, the warning's included
        assert isinstance(record, dict)
