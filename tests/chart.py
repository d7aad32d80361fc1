"""Helm chart helpers shared by the chart and monitoring unit tests: the helm/promtool binaries
``make go-tools`` built, ``helm template`` renders, and picking objects out of them."""

from __future__ import annotations

import functools
import os
import subprocess
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
CHART = REPO / "charts" / "connect-offsets-operator"
RELEASE = "connect-offsets-operator"
NAMESPACE = "connect-offsets"


@functools.cache
def go_tool(name: str) -> str:
    """A binary ``hack/build-go-tools.sh`` built (helm, promtool), from the project's cache folder."""
    cache = Path(os.environ.get("CONNECT_OFFSETS_CACHE") or Path.home() / ".cache" / "connect-offsets")
    tool = cache / "bin" / name
    assert tool.is_file() and os.access(tool, os.X_OK), (
        f"{name} not found at {tool}: build it with `make go-tools` (hack/build-go-tools.sh); "
        "CONNECT_OFFSETS_CACHE selects the cache folder"
    )
    return str(tool)


def helm_binary() -> str:
    return go_tool("helm")


def run_helm(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([helm_binary(), *args], cwd=REPO, capture_output=True, text=True, check=False)


@functools.cache
def render_text(*values: str, include_crds: bool = False) -> str:
    """``helm template`` of the chart as the deploy/ render does it, plus ``--set`` values."""
    args = ["template", RELEASE, "charts/connect-offsets-operator", "--namespace", NAMESPACE]
    if include_crds:
        args.append("--include-crds")
    for value in values:
        args += ["--set", value]
    result = run_helm(*args)
    assert result.returncode == 0, f"helm template {' '.join(values)} failed:\n{result.stderr}"
    return result.stdout


def render(*values: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(render_text(*values)) if doc]


def objects(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [doc for doc in docs if doc["kind"] == kind]


def one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = objects(docs, kind)
    assert len(found) == 1, f"expected one {kind}, got {[d['metadata']['name'] for d in found]}"
    return found[0]


def workloads(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The operator's workloads: the Deployment, or one StatefulSet per shard of a sharded install."""
    found = objects(docs, "Deployment") + objects(docs, "StatefulSet")
    kinds = {w["kind"] for w in found}
    assert found and len(kinds) == 1, [w["kind"] for w in found]
    assert kinds == {"StatefulSet"} or len(found) == 1, [w["metadata"]["name"] for w in found]
    return found


def container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """The operator's container, in the Deployment (or in the first shard's StatefulSet of a sharded
    install: the shards' containers differ only in ``--shard-index``)."""
    containers = workloads(docs)[0]["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    result: dict[str, Any] = containers[0]
    return result
