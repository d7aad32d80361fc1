"""Build the kubectl plugin as one file that needs no Python: ``build/plugin/kubectl-connect_offsets``.

Why a frozen binary (PyInstaller, ``--onefile``) and not a zipapp: the plugin reuses the operator's
models and validation, and they need two compiled extensions, pydantic-core (pydantic) and
google-re2 (the operator's linear-time regexes). A zipapp cannot import an extension from inside
the zip, so one that vendors them (shiv, pex) unpacks them and then runs only on the CPython minor
version and platform they were built for: it would still need "Python 3.11" on every workstation,
the very thing the plugin was faulted for. The frozen binary carries its own interpreter, so it
needs nothing but the platform it was built on (this machine's: Linux x86_64, glibc), and it
bundles only what the plugin imports: PyInstaller follows the imports from
``connect_offsets/tools/kubectl/__main__.py``; kopf, confluent-kafka and PySpark, the operator's and
the other tools' own dependencies, are excluded so that an import of one by the plugin fails the
no-venv test (tests/integration/test_plugin_binary.py) instead of growing the file.

Next to it, ``build/plugin/kubectl_complete-connect_offsets`` (``deploy/krew/``'s three-line ``sh``
script): kubectl's completion executable, which runs the binary's ``__complete``. krew unpacks only
regular files (no links), so the krew archive (``hack/krew.py``) carries the script, not a link.

Cached: PyInstaller runs in its own virtualenv (``$CONNECT_OFFSETS_CACHE/plugin/venv-KEY``, the
package's runtime dependencies pinned by constraints.txt plus the ``plugin`` extra of
pyproject.toml), and a build is kept under ``$CONNECT_OFFSETS_CACHE/plugin/builds/KEY``, KEY being a
hash of this script, the pins, the interpreter and every file of the package that went into the
binary (the list the last build recorded: a change that adds an import changes one of those files).
So ``make plugin`` and the test that uses it rebuild (about a minute) only when the plugin's own
sources or pins change, in any clone on this machine.

    python3 hack/build_plugin.py            # build (or take from the cache), print the binary's path
"""

from __future__ import annotations

import ast
import contextlib
import fcntl
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import tomllib
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "operator" / "src"
ENTRY = SRC / "connect_offsets" / "tools" / "kubectl" / "__main__.py"
COMPLETION_SCRIPT = ROOT / "deploy" / "krew" / "kubectl_complete-connect_offsets"
OUT = ROOT / "build" / "plugin"
BINARY = "kubectl-connect_offsets"
COMPLETION = "kubectl_complete-connect_offsets"
#: The operator's and the other tools' dependencies, never the plugin's (see the module docstring).
EXCLUDED = ("kopf", "confluent_kafka", "pyspark", "tkinter", "httpx", "httpcore", "prometheus_client")
#: Builds kept in the cache (other clones, other branches); older ones are removed.
KEEP_BUILDS = 4


def cache_dir() -> Path:
    base = os.environ.get("CONNECT_OFFSETS_CACHE") or str(Path.home() / ".cache" / "connect-offsets")
    return Path(base) / "plugin"


def requirements() -> list[str]:
    """The package's runtime dependencies and the ``plugin`` extra (PyInstaller), from pyproject.toml."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [*project["dependencies"], *project["optional-dependencies"]["plugin"]]


def digest(*parts: bytes) -> str:
    hashed = hashlib.sha256()
    for part in parts:
        hashed.update(len(part).to_bytes(8, "big") + part)
    return hashed.hexdigest()[:16]


def interpreter() -> str:
    """The Python PyInstaller freezes: the base interpreter of whoever runs this (make: .venv's)."""
    return str(Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}")


def venv_key() -> str:
    pins = "\n".join(requirements()).encode() + (ROOT / "constraints.txt").read_bytes()
    return digest(pins, interpreter().encode(), sys.version.encode(), platform.machine().encode())


def build_venv() -> Path:
    """PyInstaller's virtualenv with the plugin's dependencies (made once per pins)."""
    if not sysconfig.get_config_var("Py_ENABLE_SHARED"):
        raise SystemExit(
            f"{interpreter()} was built without --enable-shared, and PyInstaller bundles libpython: "
            "run this with a Python that has it (pyenv: PYTHON_CONFIGURE_OPTS=--enable-shared)"
        )
    venv = cache_dir() / f"venv-{venv_key()}"
    python = venv / "bin" / "python"
    if (venv / ".complete").exists():
        return python
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([interpreter(), "-m", "venv", str(venv)], check=True)
    install = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*install, "-c", str(ROOT / "constraints.txt"), *requirements()], check=True)
    (venv / ".complete").touch()
    return python


def sources_key(sources: list[str]) -> str:
    """The key of a build from these package files (paths relative to operator/src)."""
    contents = [(SRC / s).read_bytes() if (SRC / s).is_file() else b"<missing>" for s in sources]
    return digest(
        Path(__file__).read_bytes(),
        COMPLETION_SCRIPT.read_bytes(),
        venv_key().encode(),
        "\n".join(sources).encode(),
        *contents,
    )


def bundled_sources(workpath: Path) -> list[str]:
    """The package's files PyInstaller put into the binary (its PYZ table of contents), and the entry."""
    toc = ast.literal_eval((workpath / BINARY / "PYZ-00.toc").read_text())
    found = {ENTRY.relative_to(SRC).as_posix()}
    for _name, path, _kind in toc[1]:
        with contextlib.suppress(ValueError):
            found.add(Path(path).resolve().relative_to(SRC.resolve()).as_posix())
    return sorted(found)


def freeze(python: Path, target: Path) -> list[str]:
    """Run PyInstaller; the binary lands in ``target``; returns the package files it took."""
    with tempfile.TemporaryDirectory(prefix="plugin-build-", dir=cache_dir()) as scratch:
        work = Path(scratch)
        command = [
            str(python), "-m", "PyInstaller", "--onefile", "--noconfirm", "--clean", "--log-level", "WARN",
            "--name", BINARY, "--paths", str(SRC),
            "--distpath", str(work / "dist"), "--workpath", str(work / "work"), "--specpath", str(work),
        ]  # fmt: skip
        for module in EXCLUDED:
            command += ["--exclude-module", module]
        env = {**os.environ, "PYTHONHASHSEED": "0", "SOURCE_DATE_EPOCH": "0"}
        done = subprocess.run([*command, str(ENTRY)], cwd=work, env=env, capture_output=True, text=True)
        if done.returncode != 0:  # its INFO lines are printed before --log-level applies: only on failure
            raise SystemExit(f"PyInstaller failed ({done.returncode}):\n{done.stdout}{done.stderr}")
        target.mkdir(parents=True, exist_ok=True)
        shutil.move(str(work / "dist" / BINARY), target / BINARY)
        return bundled_sources(work / "work")


@contextlib.contextmanager
def locked() -> Iterator[None]:
    """One build at a time on this machine (parallel test processes, two clones)."""
    cache_dir().mkdir(parents=True, exist_ok=True)
    with open(cache_dir() / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def prune(builds: Path) -> None:
    kept = sorted(builds.iterdir(), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in kept[KEEP_BUILDS:]:
        shutil.rmtree(old, ignore_errors=True)


def build() -> Path:
    """The binary and the completion executable in build/plugin/, from the cache when the key matches."""
    with locked():
        builds = cache_dir() / "builds"
        listing = cache_dir() / "sources.txt"
        sources = listing.read_text().split() if listing.exists() else []
        cached = builds / sources_key(sources) / BINARY
        if not sources or not cached.exists():
            python = build_venv()
            with tempfile.TemporaryDirectory(prefix="plugin-", dir=cache_dir()) as fresh:
                sources = freeze(python, Path(fresh))
                cached = builds / sources_key(sources) / BINARY
                cached.parent.mkdir(parents=True, exist_ok=True)
                shutil.move(str(Path(fresh) / BINARY), cached)
            listing.write_text("\n".join(sources) + "\n")
            prune(builds)
        cached.parent.touch()  # most recently used: kept by prune()
        OUT.mkdir(parents=True, exist_ok=True)
        for source, name in ((cached, BINARY), (COMPLETION_SCRIPT, COMPLETION)):
            if not (OUT / name).exists() or (OUT / name).read_bytes() != source.read_bytes():
                # a new file renamed over the old one: a test may be running the old one (a file
                # being executed cannot be written to: ETXTBSY)
                fresh = OUT / f".{name}.new"
                shutil.copyfile(source, fresh)
                fresh.chmod(0o755)
                os.replace(fresh, OUT / name)
    return OUT / BINARY


def main() -> int:
    print(build().relative_to(ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
