"""The krew archive of the one-file kubectl plugin, and the krew manifest that pins it.

krew installs a plugin from an archive named by a manifest and checks the archive's sha256. The
archive holds what ``make plugin`` (hack/build_plugin.py) builds into ``build/plugin/``: the
self-contained ``kubectl-connect_offsets`` (no Python needed) and ``kubectl_complete-connect_offsets``,
kubectl's completion executable. Both as regular files: krew's unpacker takes nothing else (no
links). The manifest is rendered from the template ``deploy/krew/connect-offsets.yaml`` with the
package version, the platform the binary was built for (krew's ``os``/``arch`` selector: a frozen
binary runs only there), the release ``uri`` and the archive's sha256 — a checksum belongs to one
build, so it is never checked in. The archive itself is the same bytes for the same two files (fixed
order, times, owners, modes; gzip without a timestamp), so a release can rebuild and compare it:

    python3 hack/krew.py            # build/plugin/krew/: the archive and connect-offsets.yaml
    python3 hack/krew.py --check    # exit 1 if the rendered manifest does not pin that archive

Install from a checkout (until a release publishes the archive at the manifest's ``uri``):
``kubectl krew install --manifest=build/plugin/krew/connect-offsets.yaml
--archive=build/plugin/krew/connect-offsets-krew-v0.1.0-linux-amd64.tar.gz``.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import platform
import re
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "deploy" / "krew" / "connect-offsets.yaml"
PLUGIN_DIR = ROOT / "build" / "plugin"
#: The archive's files, in this order (the manifest's ``files``; ``bin`` is the first).
EXECUTABLES = ("kubectl-connect_offsets", "kubectl_complete-connect_offsets")
#: Where a release publishes the archive (the GitHub project behind ghcr.io/connect-offsets, see the chart).
RELEASES = "https://github.com/connect-offsets/connect-offsets-operator/releases/download"
#: krew's names (Go's GOOS/GOARCH) for what Python's platform module says.
OS_NAMES = {"Linux": "linux", "Darwin": "darwin"}
ARCH_NAMES = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}


def version() -> str:
    """The package version, from pyproject.toml."""
    found = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.MULTILINE)
    if found is None:
        raise SystemExit("pyproject.toml has no version")
    return found.group(1)


def build_platform() -> tuple[str, str]:
    """krew's (os, arch) of this machine, which the binary was frozen on."""
    system, machine = platform.system(), platform.machine()
    if system not in OS_NAMES or machine not in ARCH_NAMES:
        raise SystemExit(f"no krew platform for {system}/{machine}")
    return OS_NAMES[system], ARCH_NAMES[machine]


def archive_name(release: str, os_name: str, arch: str) -> str:
    return f"connect-offsets-krew-v{release}-{os_name}-{arch}.tar.gz"


def archive_bytes(plugin_dir: Path) -> bytes:
    """The archive of the two executables in ``plugin_dir``, with fixed metadata (same files, same bytes)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name in EXECUTABLES:
            path = plugin_dir / name
            if not path.is_file():
                raise SystemExit(f"{path}: missing; build it first (make plugin)")
            data = path.read_bytes()
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o755, 0
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue(), mtime=0)


def render(template: str, release: str, os_name: str, arch: str, sha256: str) -> str:
    """The manifest: the template with this version, platform, uri and checksum."""
    previous = re.search(r"^  version: v(\S+)$", template, re.MULTILINE)
    if previous is None:
        raise SystemExit(f"{TEMPLATE}: no spec.version")
    text = template.replace(f"v{previous.group(1)}", f"v{release}")  # spec.version and the caveats' store path
    fields = {
        "os": os_name,
        "arch": arch,
        "uri": f"{RELEASES}/v{release}/{archive_name(release, os_name, arch)}",
        "sha256": sha256,
    }
    for key, value in fields.items():
        text, count = re.subn(rf"^(\s*(?:- )?{key}: )\S+$", rf"\g<1>{value}", text, flags=re.MULTILINE)
        if count != 1:
            raise SystemExit(f"{TEMPLATE}: expected one {key}: line, found {count}")
    return text


def mismatches(manifest: str, archive: bytes, release: str, os_name: str, arch: str) -> list[str]:
    """What in a rendered manifest disagrees with the archive, the version and the platform."""
    expected = {
        "version": f"v{release}",
        "os": os_name,
        "arch": arch,
        "uri": f"{RELEASES}/v{release}/{archive_name(release, os_name, arch)}",
        "sha256": hashlib.sha256(archive).hexdigest(),
        "bin": EXECUTABLES[0],
    }
    problems = []
    for key, value in expected.items():
        found = re.findall(rf"^\s*(?:- )?{key}: (\S+)$", manifest, re.MULTILINE)
        if found != [value]:
            problems.append(f"{key}: manifest has {found or 'nothing'}, expected {value}")
    listed = re.findall(r"^\s*- from: (\S+)$", manifest, re.MULTILINE)
    if listed != list(EXECUTABLES):
        problems.append(f"files: manifest has {listed}, expected {list(EXECUTABLES)}")
    return problems


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the rendered manifest does not match")
    parser.add_argument("--plugin-dir", type=Path, default=PLUGIN_DIR, help="where make plugin put the executables")
    args = parser.parse_args(argv)
    release, (os_name, arch) = version(), build_platform()
    out = args.plugin_dir / "krew"
    archive = archive_bytes(args.plugin_dir)
    manifest_path = out / TEMPLATE.name
    if args.check:
        if not manifest_path.exists():
            print(f"{manifest_path}: missing; run python3 hack/krew.py", file=sys.stderr)
            return 1
        problems = mismatches(manifest_path.read_text(), archive, release, os_name, arch)
        for problem in problems:
            print(f"{manifest_path}: {problem}", file=sys.stderr)
        return 1 if problems else 0
    out.mkdir(parents=True, exist_ok=True)
    (out / archive_name(release, os_name, arch)).write_bytes(archive)
    sha256 = hashlib.sha256(archive).hexdigest()
    manifest_path.write_text(render(TEMPLATE.read_text(), release, os_name, arch, sha256))
    print(f"{out / archive_name(release, os_name, arch)} sha256 {sha256}")
    print(f"{manifest_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
