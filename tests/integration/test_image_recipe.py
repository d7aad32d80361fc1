"""The image recipe without a container engine: build the wheel, install it into a fresh venv the
way operator/Dockerfile does (only wheels, pinned by constraints.txt), run that entry point against
the stack, and see it manage a connector.
"""

from __future__ import annotations

import subprocess
import sys
import venv
from pathlib import Path
from typing import Any

import httpx

from tests.conftest import REPO, OperatorProcess
from tests.integration.support import FILE_SOURCE, create_cluster, create_connector, wait_condition


def test_wheel_in_a_fresh_venv_runs_the_operator(
    custom: Any,
    namespace: str,
    stack: dict[str, Any],
    connect: httpx.Client,
    connect_url: str,
    tmp_path: Path,
    unique: str,
) -> None:
    wheels = tmp_path / "wheels"
    pip = [sys.executable, "-m", "pip"]
    subprocess.run([*pip, "wheel", "-q", "--no-deps", "--wheel-dir", str(wheels), str(REPO)], check=True)
    built = list(wheels.glob("connect_offsets_operator-*.whl"))
    assert len(built) == 1, built
    subprocess.run(
        [*pip, "wheel", "-q", "--wheel-dir", str(wheels), "-c", str(REPO / "constraints.txt"), str(built[0])],
        check=True,
    )
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "-q",
            "--no-index",
            "--find-links",
            str(wheels),
            "connect-offsets-operator",
        ],
        check=True,
    )
    entry = env_dir / "bin" / "connect-offsets-operator"
    assert "--metrics-port" in subprocess.run([str(entry), "--help"], check=True, capture_output=True, text=True).stdout
    # The package, not the source tree: nothing from the repository is importable there.
    where = subprocess.run(
        [str(python), "-c", "import connect_offsets; print(connect_offsets.__file__)"],
        check=True,
        capture_output=True,
        text=True,
        cwd=tmp_path,
    ).stdout
    assert str(env_dir) in where

    operator = OperatorProcess(stack["kubeconfig"], namespace, tmp_path / "op.log")
    operator.executable = str(entry)
    source = tmp_path / "s.txt"
    source.write_text("i\n")
    name = f"image-{unique}"
    operator.start()
    try:
        create_cluster(custom, namespace, connect_url)
        create_connector(
            custom, namespace, name, {"class": FILE_SOURCE, "config": {"file": str(source), "topic": name}}
        )
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorRunning")
    finally:
        operator.stop()
        connect.delete(f"/connectors/{name}")
