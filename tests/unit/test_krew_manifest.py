"""The krew manifest of the kubectl plugin: it parses, names the console script's binary, pins the
archive hack/krew.py builds, and the shim in that archive really runs the plugin."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

from tests.hack_scripts import load_hack_script

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "deploy" / "krew" / "connect-offsets.yaml"
SHIM = ROOT / "deploy" / "krew" / "kubectl-connect_offsets"


def krew_script() -> ModuleType:
    return load_hack_script("krew")


def manifest() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(MANIFEST.read_text())
    return loaded


def test_the_manifest_is_a_krew_plugin_named_for_the_console_script() -> None:
    plugin = manifest()
    assert plugin["apiVersion"] == "krew.googlecontainertools.github.com/v1alpha2"
    assert plugin["kind"] == "Plugin"
    # krew links kubectl-<name with - as _>, which is what kubectl runs for `kubectl connect-offsets`
    assert plugin["metadata"]["name"] == "connect-offsets"
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["kubectl-connect_offsets"] == "connect_offsets.tools.kubectl.main:main"
    spec = plugin["spec"]
    assert spec["shortDescription"] and spec["description"]
    assert "Python 3.11" in spec["caveats"] and "pip install connect-offsets-operator" in spec["caveats"]
    assert spec["platforms"], "at least one platform"
    for platform in spec["platforms"]:
        assert platform["bin"] == "kubectl-connect_offsets"
        assert platform["files"] == [{"from": "kubectl-connect_offsets", "to": "."}]
        expressions = platform["selector"]["matchExpressions"]
        assert expressions == [{"key": "os", "operator": "In", "values": ["linux", "darwin"]}]  # a sh shim
        assert platform["uri"].endswith(f"/{spec['version']}/connect-offsets-krew-{spec['version']}.tar.gz")
        assert len(platform["sha256"]) == 64 and int(platform["sha256"], 16) >= 0


def test_the_manifest_pins_the_archive_of_the_current_shim() -> None:
    krew = krew_script()
    assert krew.mismatches(MANIFEST.read_text()) == []
    assert manifest()["spec"]["version"] == f"v{krew.version()}"
    first, second = krew.archive_bytes(), krew.archive_bytes()
    assert first == second  # byte for byte: the checked-in checksum stays valid
    with tarfile.open(fileobj=io.BytesIO(first), mode="r:gz") as tar:
        (member,) = tar.getmembers()
        assert member.name == "kubectl-connect_offsets" and member.mode == 0o755
        extracted = tar.extractfile(member)
        assert extracted is not None and extracted.read() == SHIM.read_bytes()
    # a changed shim no longer matches the manifest
    assert krew.mismatches(MANIFEST.read_text().replace(krew.sha256(), "0" * 64)) != []


def shim(*args: str, python: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CONNECT_OFFSETS_PYTHON": python}
    return subprocess.run(["sh", str(SHIM), *args], capture_output=True, text=True, env=env, timeout=60)


def test_the_shim_runs_the_plugin() -> None:
    assert os.access(SHIM, os.X_OK)
    version = shim("--version", python=sys.executable)
    assert version.returncode == 0, version.stderr
    assert version.stdout.strip() == "kubectl connect-offsets 0.1.0"
    usage = shim("list", python=sys.executable)
    assert usage.returncode == 2
    assert usage.stderr.startswith("error: list: give a resource NAME or -l SELECTOR")


def test_the_shim_says_what_is_missing(tmp_path: Path) -> None:
    missing = shim("--version", python=str(tmp_path / "no-such-python"))
    assert missing.returncode == 127
    assert "needs Python 3.11 or newer" in missing.stderr and "not found" in missing.stderr
    without_package = tmp_path / "python-without-the-package"
    without_package.write_text("#!/bin/sh\nexit 1\n")  # what the shim's check gets from such a Python
    without_package.chmod(0o755)
    lacking = shim("--version", python=str(without_package))
    assert lacking.returncode == 127
    assert "pip install connect-offsets-operator" in lacking.stderr
