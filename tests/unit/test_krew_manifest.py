"""The krew manifest of the one-file kubectl plugin: hack/krew.py renders it from the template, with
the archive of both executables pinned by its sha256, and the completion executable of that archive
really answers through the plugin next to it. (The real binary, without the venv:
tests/integration/test_plugin_binary.py.)"""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from tests.hack_scripts import load_hack_script

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "deploy" / "krew" / "connect-offsets.yaml"
COMPLETION = ROOT / "deploy" / "krew" / "kubectl_complete-connect_offsets"


def krew_script() -> ModuleType:
    return load_hack_script("krew")


@pytest.fixture
def plugin_dir(tmp_path: Path) -> Path:
    """What make plugin leaves in build/plugin/, with a stand-in for the binary: a script that answers
    ``__complete`` as the real one does (the real one: the integration test)."""
    directory = tmp_path / "plugin"
    directory.mkdir()
    binary = directory / "kubectl-connect_offsets"
    binary.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = __complete ]; then shift; echo "args:$*"; echo "oops" >&2; echo ":4"; exit 0; fi\n'
        "exit 9\n"
    )
    binary.chmod(0o755)
    (directory / "kubectl_complete-connect_offsets").write_bytes(COMPLETION.read_bytes())
    (directory / "kubectl_complete-connect_offsets").chmod(0o755)
    return directory


def rendered(plugin_dir: Path) -> tuple[dict[str, Any], bytes]:
    krew = krew_script()
    assert krew.main(["--plugin-dir", str(plugin_dir)]) == 0
    os_name, arch = krew.build_platform()
    archive = plugin_dir / "krew" / krew.archive_name(krew.version(), os_name, arch)
    manifest: dict[str, Any] = yaml.safe_load((plugin_dir / "krew" / "connect-offsets.yaml").read_text())
    return manifest, archive.read_bytes()


def test_the_manifest_pins_the_archive_of_both_executables(plugin_dir: Path) -> None:
    krew = krew_script()
    manifest, archive = rendered(plugin_dir)
    assert manifest["apiVersion"] == "krew.googlecontainertools.github.com/v1alpha2"
    assert manifest["kind"] == "Plugin"
    # krew links kubectl-<name with - as _>, which is what kubectl runs for `kubectl connect-offsets`
    assert manifest["metadata"]["name"] == "connect-offsets"
    spec = manifest["spec"]
    assert spec["version"] == f"v{krew.version()}"
    assert spec["shortDescription"] and spec["description"]
    assert "no Python is needed" in spec["caveats"]
    assert f"store/connect-offsets/{spec['version']}/kubectl_complete-connect_offsets" in spec["caveats"]
    (platform,) = spec["platforms"]
    os_name, arch = krew.build_platform()
    assert platform["selector"] == {"matchLabels": {"os": os_name, "arch": arch}}  # a frozen binary runs there only
    assert platform["bin"] == "kubectl-connect_offsets"
    assert platform["files"] == [
        {"from": "kubectl-connect_offsets", "to": "."},
        {"from": "kubectl_complete-connect_offsets", "to": "."},
    ]
    release = spec["version"]
    assert platform["uri"].endswith(f"/{release}/connect-offsets-krew-{release}-{os_name}-{arch}.tar.gz")
    assert platform["sha256"] == hashlib.sha256(archive).hexdigest()
    assert krew.main(["--check", "--plugin-dir", str(plugin_dir)]) == 0


def test_the_archive_holds_regular_executable_files_and_is_reproducible(plugin_dir: Path) -> None:
    krew = krew_script()
    _, archive = rendered(plugin_dir)
    assert krew.archive_bytes(plugin_dir) == archive  # the same files give the same bytes
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        members = tar.getmembers()
        # krew's unpacker takes regular files and directories only: no links
        assert [(m.name, m.isreg(), m.mode) for m in members] == [
            ("kubectl-connect_offsets", True, 0o755),
            ("kubectl_complete-connect_offsets", True, 0o755),
        ]
        for member in members:
            extracted = tar.extractfile(member)
            assert extracted is not None and extracted.read() == (plugin_dir / member.name).read_bytes()


def test_check_fails_on_a_manifest_that_does_not_pin_the_archive(plugin_dir: Path, capsys: Any) -> None:
    krew = krew_script()
    rendered(plugin_dir)
    manifest = plugin_dir / "krew" / "connect-offsets.yaml"
    good = manifest.read_text()
    sha = yaml.safe_load(good)["spec"]["platforms"][0]["sha256"]
    manifest.write_text(good.replace(sha, "0" * 64))
    assert krew.main(["--check", "--plugin-dir", str(plugin_dir)]) == 1
    assert f"sha256: manifest has ['{'0' * 64}'], expected {sha}" in capsys.readouterr().err
    # the binary changed after rendering: the manifest no longer pins it
    manifest.write_text(good)
    (plugin_dir / "kubectl-connect_offsets").write_text("#!/bin/sh\nexit 0\n")
    assert krew.main(["--check", "--plugin-dir", str(plugin_dir)]) == 1


def test_without_a_build_it_says_to_run_make_plugin(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match=r"kubectl-connect_offsets: missing; build it first \(make plugin\)"):
        krew_script().main(["--plugin-dir", str(tmp_path)])


def test_the_template_is_not_a_manifest_to_install() -> None:
    """Its sha256 is a placeholder that krew refuses: only a rendered manifest carries a checksum."""
    template = yaml.safe_load(TEMPLATE.read_text())
    (platform,) = template["spec"]["platforms"]
    assert platform["sha256"] == "rendered-by-hack-krew-py"
    assert template["spec"]["version"] == f"v{krew_script().version()}"


def test_the_completion_executable_asks_the_plugin_next_to_it(plugin_dir: Path, tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin"}
    completion = plugin_dir / "kubectl_complete-connect_offsets"
    done = subprocess.run([str(completion), "reset", ""], capture_output=True, text=True, env=env, timeout=30)
    assert (done.returncode, done.stdout, done.stderr) == (0, "args:reset \n:4\n", "")  # stderr kept off the terminal
    # linked into another directory (krew's bin, as the caveats say): the plugin found there or on PATH
    elsewhere = tmp_path / "bin"
    elsewhere.mkdir()
    (elsewhere / completion.name).symlink_to(completion)
    env = {"PATH": f"{plugin_dir}:/usr/bin:/bin"}
    done = subprocess.run([str(elsewhere / completion.name), "li"], capture_output=True, text=True, env=env, timeout=30)
    assert (done.returncode, done.stdout) == (0, "args:li\n:4\n")
    # no plugin anywhere: no candidates, no file names, nothing on stderr
    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / completion.name).write_bytes(completion.read_bytes())
    (alone / completion.name).chmod(0o755)
    done = subprocess.run(
        [str(alone / completion.name), ""], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"}, timeout=30
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, ":4\n", "")


def test_the_plugin_answers_complete_as_the_completion_executable() -> None:
    """``kubectl-connect_offsets __complete WORDS`` is ``kubectl_complete-connect_offsets WORDS`` (cobra's name)."""
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["kubectl-connect_offsets"] == "connect_offsets.tools.kubectl.main:main"
    env = {**os.environ, "KUBECONFIG": "/nonexistent/kubeconfig"}
    command = [sys.executable, "-m", "connect_offsets.tools.kubectl", "__complete", "reset", "--dry-run="]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0
    assert done.stdout.splitlines()[-1] == ":4" and "server\t" in done.stdout
    assert done.stderr == ""
