"""The krew archive of the kubectl plugin, and the manifest's checksum of it.

krew installs a plugin from an archive named by the manifest (``deploy/krew/connect-offsets.yaml``)
and checks its sha256. The plugin is Python, so the archive holds only the shim
``deploy/krew/kubectl-connect_offsets``; the shim
runs ``python3 -m connect_offsets.tools.kubectl``. The archive is built byte for byte the same on
every machine (fixed order, times, owners, modes; gzip without a timestamp), so the checksum in the
manifest can be checked in and verified:

    python3 hack/krew.py            # build dist/connect-offsets-krew-vVERSION.tar.gz, print its sha256
    python3 hack/krew.py --write    # also write the version, uri and sha256 into the manifest
    python3 hack/krew.py --check    # exit 1 if the manifest does not match the archive (tests run this)

Until a release publishes the archive at the manifest's ``uri``, install it locally:
``kubectl krew install --manifest=deploy/krew/connect-offsets.yaml --archive=dist/connect-offsets-krew-v0.1.0.tar.gz``.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import re
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHIM = ROOT / "deploy" / "krew" / "kubectl-connect_offsets"
MANIFEST = ROOT / "deploy" / "krew" / "connect-offsets.yaml"
#: Where a release publishes the archive (the GitHub project behind ghcr.io/connect-offsets, see the chart).
RELEASES = "https://github.com/connect-offsets/connect-offsets-operator/releases/download"


def version() -> str:
    """The package version, from pyproject.toml."""
    found = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.MULTILINE)
    if found is None:
        raise SystemExit("pyproject.toml has no version")
    return found.group(1)


def archive_name(release: str) -> str:
    return f"connect-offsets-krew-v{release}.tar.gz"


def archive_bytes() -> bytes:
    """The archive: the shim alone, with fixed metadata so that the same shim gives the same bytes."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
        data = SHIM.read_bytes()
        info = tarfile.TarInfo(SHIM.name)
        info.size, info.mode, info.mtime = len(data), 0o755, 0
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        tar.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue(), mtime=0)


def sha256() -> str:
    return hashlib.sha256(archive_bytes()).hexdigest()


def expected_fields() -> dict[str, str]:
    release = version()
    return {
        "version": f"v{release}",
        "uri": f"{RELEASES}/v{release}/{archive_name(release)}",
        "sha256": sha256(),
    }


def mismatches(text: str) -> list[str]:
    """The manifest lines that disagree with the archive and the package version."""
    problems = []
    for key, value in expected_fields().items():
        found = re.findall(rf"^\s*(?:- )?{key}: (\S+)$", text, re.MULTILINE)
        if not found or any(v != value for v in found):
            problems.append(f"{key}: manifest has {found or 'nothing'}, expected {value}")
    return problems


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write version, uri and sha256 into the manifest")
    parser.add_argument("--check", action="store_true", help="exit 1 if the manifest does not match")
    args = parser.parse_args(argv)
    release = version()
    if args.check:
        problems = mismatches(MANIFEST.read_text())
        for problem in problems:
            print(f"{MANIFEST.relative_to(ROOT)}: {problem}", file=sys.stderr)
        return 1 if problems else 0
    target = ROOT / "dist" / archive_name(release)
    target.parent.mkdir(exist_ok=True)
    target.write_bytes(archive_bytes())
    print(f"{target.relative_to(ROOT)} sha256 {sha256()}")
    if args.write:
        text = MANIFEST.read_text()
        for key, value in expected_fields().items():
            text = re.sub(rf"^(\s*(?:- )?{key}: )\S+$", rf"\g<1>{value}", text, flags=re.MULTILINE)
        MANIFEST.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
