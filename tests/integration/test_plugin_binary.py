"""The one-file kubectl plugin (``make plugin``) on a machine path without the project's Python.

The binary hack/build_plugin.py builds (once; a no-op while the plugin's sources and pins are
unchanged) runs here as a workstation without the venv would: an environment of its own (no
VIRTUAL_ENV, no PYTHONPATH, HOME a fresh directory), PATH only ``build/plugin`` and the system's
``/usr/bin:/bin``, and ahead of them a ``python3`` that fails, so that nothing can quietly use a
Python. kubectl is the stack's real binary: it discovers the plugin on that PATH, and its own
completion (``kubectl __complete connect-offsets ...``) runs the completion executable beside it,
against the real API server and operator. The same two files, installed from ``make krew``'s
archive the way krew installs it, run the same way.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.conftest import OperatorProcess, wait_for
from tests.integration.support import (
    connect_offsets,
    create_cluster,
    create_connector,
    file_source_spec,
    wait_condition,
)

ROOT = Path(__file__).resolve().parents[2]
#: The first test's setup may build the binary (PyInstaller: 1-3 minutes on a busy machine, once per
#: change of the plugin's sources; otherwise a cache hit).
pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def plugin_dir() -> Path:
    """build/plugin/ with the binary and the completion executable (built once, cached)."""
    built = subprocess.run(
        [sys.executable, str(ROOT / "hack" / "build_plugin.py")], capture_output=True, text=True, timeout=600
    )
    assert built.returncode == 0, built.stdout + built.stderr
    directory = ROOT / "build" / "plugin"
    assert (directory / "kubectl-connect_offsets").is_file()
    assert (directory / "kubectl_complete-connect_offsets").is_file()
    return directory


def bare_env(plugin_dir: Path, stack: dict[str, Any], home: Path) -> dict[str, str]:
    """A workstation's environment without the venv: a failing python3 first on PATH."""
    trap = home / "no-python"
    trap.mkdir(parents=True, exist_ok=True)
    for name in ("python3", "python"):
        (trap / name).write_text("#!/bin/sh\necho 'a Python was run' >&2\nexit 99\n")
        (trap / name).chmod(0o755)
    return {"PATH": f"{trap}:{plugin_dir}:/usr/bin:/bin", "HOME": str(home), "KUBECONFIG": stack["kubeconfig"]}


def kubectl(stack: dict[str, Any], env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([stack["kubectl"], *args], capture_output=True, text=True, env=env, timeout=120)


def test_the_binary_is_a_program_not_a_script(plugin_dir: Path, stack: dict[str, Any], tmp_path: Path) -> None:
    binary = plugin_dir / "kubectl-connect_offsets"
    assert binary.read_bytes()[:4] == b"\x7fELF"  # no #! line: no interpreter to find
    env = bare_env(plugin_dir, stack, tmp_path / "home")
    version = kubectl(stack, env, "connect-offsets", "--version")
    assert (version.returncode, version.stdout.strip(), version.stderr) == (0, "kubectl connect-offsets 0.1.0", "")
    listed = kubectl(stack, env, "plugin", "list")
    assert f"{plugin_dir}/kubectl-connect_offsets" in listed.stdout


def test_completion_through_kubectl_lists_the_commands(plugin_dir: Path, stack: dict[str, Any], tmp_path: Path) -> None:
    env = bare_env(plugin_dir, stack, tmp_path / "home")
    done = kubectl(stack, env, "__complete", "connect-offsets", "")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    commands = [line.split("\t")[0] for line in lines[:-1]]
    assert commands == ["list", "alter", "reset", "restore", "lag", "copy", "failover-group"]
    assert lines[-1] == ":4"  # cobra's ShellCompDirectiveNoFileComp
    assert "About to call: " + str(plugin_dir / "kubectl_complete-connect_offsets") in done.stderr  # kubectl's debug
    assert "a Python was run" not in done.stderr


def test_list_and_names_from_the_cluster_without_the_venv(
    plugin_dir: Path,
    custom: Any,
    namespace: str,
    operator: OperatorProcess,
    connect: httpx.Client,
    connect_url: str,
    stack: dict[str, Any],
    tmp_path: Path,
    unique: str,
) -> None:
    source = tmp_path / "source.txt"
    source.write_text("".join(f"line-{i}\n" for i in range(3)))
    expected = [{"partition": {"filename": str(source)}, "offset": {"position": source.stat().st_size}}]
    name = f"pb-{unique}"
    create_cluster(custom, namespace, connect_url)
    create_connector(custom, namespace, name, file_source_spec(source, name, "pb-offsets"))
    wait_condition(custom, namespace, name, "Ready", reason="ConnectorRunning")
    wait_for("offsets at end of file", lambda: connect_offsets(connect, name) == expected)
    env = bare_env(plugin_dir, stack, tmp_path / "home")

    listed = kubectl(stack, env, "connect-offsets", "list", name, "-n", namespace)
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == {"offsets": expected}
    assert listed.stderr == ""

    as_record = kubectl(stack, env, "connect-offsets", "list", name, "-n", namespace, "-o", "jsonpath={.result}")
    assert (as_record.returncode, as_record.stdout) == (0, "Succeeded"), as_record.stderr

    # kubectl's completion, through the completion executable, reads the connector's name from the cluster
    names = kubectl(stack, env, "__complete", "connect-offsets", "reset", "-n", namespace, "")
    assert names.returncode == 0, names.stderr
    assert name in [line.split("\t")[0] for line in names.stdout.splitlines()]


def test_the_krew_archive_installs_what_runs_without_the_venv(
    plugin_dir: Path, stack: dict[str, Any], tmp_path: Path
) -> None:
    """make krew's archive, unpacked as krew does (regular files into the plugin's store, the manifest's
    ``bin`` linked into krew's bin, the completion executable linked as the caveats say)."""
    rendered = subprocess.run(
        [sys.executable, str(ROOT / "hack" / "krew.py"), "--plugin-dir", str(plugin_dir)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert rendered.returncode == 0, rendered.stderr
    checked = subprocess.run(
        [sys.executable, str(ROOT / "hack" / "krew.py"), "--check", "--plugin-dir", str(plugin_dir)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert checked.returncode == 0, checked.stderr
    manifest = yaml.safe_load((plugin_dir / "krew" / "connect-offsets.yaml").read_text())
    (platform,) = manifest["spec"]["platforms"]
    archive = plugin_dir / "krew" / platform["uri"].rsplit("/", 1)[1]
    assert hashlib.sha256(archive.read_bytes()).hexdigest() == platform["sha256"]

    store = tmp_path / "krew" / "store" / "connect-offsets" / manifest["spec"]["version"]
    store.mkdir(parents=True)
    with tarfile.open(archive, mode="r:gz") as tar:
        assert all(member.isreg() for member in tar.getmembers())  # krew unpacks nothing else
        tar.extractall(store, filter="data")
    krew_bin = tmp_path / "krew" / "bin"
    krew_bin.mkdir()
    (krew_bin / platform["bin"]).symlink_to(store / platform["bin"])
    (krew_bin / "kubectl_complete-connect_offsets").symlink_to(store / "kubectl_complete-connect_offsets")

    env = bare_env(krew_bin, stack, tmp_path / "home")
    version = kubectl(stack, env, "connect-offsets", "--version")
    assert (version.returncode, version.stdout.strip()) == (0, "kubectl connect-offsets 0.1.0"), version.stderr
    completed = kubectl(stack, env, "__complete", "connect-offsets", "re")
    assert completed.returncode == 0, completed.stderr
    assert [line.split("\t")[0] for line in completed.stdout.splitlines()] == ["reset", "restore", ":4"]
