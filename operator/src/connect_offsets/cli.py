"""``connect-offsets``: the command line. Reuses models and clients; never imports kopf."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

from connect_offsets import __version__
from connect_offsets.models.schema import crd_documents

__all__ = ["main", "render_crds"]

CRD_HEADER = "# Generated from operator/src/connect_offsets/models/crds.py by `connect-offsets crds`; do not edit.\n"


def render_crds() -> dict[str, str]:
    """File name -> YAML text of each CRD, exactly as committed in ``crds/``."""
    return {name: CRD_HEADER + yaml.safe_dump(doc, sort_keys=False) for name, doc in crd_documents().items()}


def _cmd_crds(args: argparse.Namespace) -> int:
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    for name, text in render_crds().items():
        (out / name).write_text(text)
        print(f"wrote {out / name}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="connect-offsets", description=__doc__)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    crds = sub.add_parser("crds", help="write the CRD manifests generated from the models")
    crds.add_argument("--output", "-o", default="crds", help="folder to write to (default: crds)")
    crds.set_defaults(func=_cmd_crds)
    args = parser.parse_args(argv)
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
