"""``kubectl_complete-connect_offsets``: what kubectl's plugin completion runs for ``kubectl connect-offsets
... <TAB>`` (kubectl 1.26+: the plugin's words, the last one being completed; candidates one a line,
then ``:<directive>``), without a cluster: names come from a fake, or from a fake API server behind
the real kubernetes client (the request: names only, bounded; the output: no credential)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import urllib3
import yaml

from connect_offsets.tools.kubectl import shell_completion as sc
from connect_offsets.tools.kubectl.common import MIRROR, Kind
from connect_offsets.vocabulary import API_GROUP, API_VERSION

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(sys.executable).parent / "kubectl_complete-connect_offsets"


class FakeNames:
    """The cluster's names, and what was asked for."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, Any]] = []
        self.connectors = ["orders", "shared"]
        self.mirrors = ["dr", "shared"]

    def resources(self, kind: Kind, namespace: str | None) -> list[str]:
        self.asked.append((kind.plural, namespace))
        return self.mirrors if kind is MIRROR else self.connectors

    def namespaces(self) -> list[str]:
        return ["kafka", "team-a"]

    def contexts(self) -> list[str]:
        return ["prod", "staging"]

    def clusters(self, namespace: str | None) -> list[str]:
        self.asked.append(("clusters", namespace))
        return ["connect-east", "connect-west"]

    def backups(self, namespace: str | None, resource: str) -> list[str]:
        self.asked.append(("backups", (namespace, resource)))
        return [f"{resource}-backup-1", f"{resource}-backup-2"]

    def mirror_connectors(self, namespace: str | None, mirror: str) -> list[str]:
        self.asked.append(("mirror_connectors", (namespace, mirror)))
        return ["east->west.MirrorSourceConnector", "east->west.MirrorCheckpointConnector"]


def complete(*words: str, names: FakeNames | None = None) -> tuple[list[str], int]:
    """The candidates (without descriptions) and the directive, as kubectl reads the output."""
    out = sc.complete(list(words), names or FakeNames())
    *lines, last = out.splitlines()
    assert last.startswith(":") and out.endswith("\n")
    return [line.split("\t", 1)[0] for line in lines], int(last[1:])


def test_the_output_is_cobras_candidates_then_the_directive() -> None:
    out = sc.complete([""], FakeNames())
    lines = out.splitlines()
    assert lines[-1] == ":4"  # ShellCompDirectiveNoFileComp
    assert lines[0] == "list\tWrite a connector's offsets to its listOffsets ConfigMap and print them as JSON."
    assert [line.split("\t")[0] for line in lines[:-1]] == [
        "list",
        "alter",
        "reset",
        "restore",
        "lag",
        "copy",
        "failover-group",
    ]
    assert complete("re") == (["reset", "restore"], 4)


def test_flags_of_the_command() -> None:
    flags, directive = complete("reset", "-")
    assert directive == 4
    assert {"-n", "--namespace", "--dry-run", "--stop-connector", "-o", "--context", "--as"} <= set(flags)
    assert "--from-file" not in flags  # alter's
    assert "--dry-run-strategy" not in flags  # hidden: --dry-run=STRATEGY is how it is written
    assert complete("alter", "x", "--st") == (["--stop-connector"], 4)
    assert complete("alter", "x", "--f") == (["--from-file"], 4)
    assert all(flag.startswith("--") for flag in complete("reset", "--")[0])
    # before the command: the options every command takes
    assert "--namespace" in complete("--")[0] and "--stop-connector" not in complete("--")[0]


@pytest.mark.parametrize(
    ("words", "expected", "directive"),
    [
        (("alter", "x", "-o", ""), ["text", "json", "yaml", "name", "jsonpath="], 4),  # one resource: no table
        (("alter", "-l", "a=b", "-o", ""), ["text", "wide", "json", "yaml", "name", "jsonpath="], 4),
        (("lag", "x", "-o", "w"), ["wide"], 4),
        (("copy", "a", "b", "-o", "w"), [], 4),
        (("alter", "x", "-o", "j"), ["json", "jsonpath="], 4),
        (("alter", "x", "-o", "jsonp"), ["jsonpath="], 6),  # no space after jsonpath=
        (("alter", "x", "--output=y"), ["yaml"], 4),  # --flag=value: the value (the shell keeps the flag)
        (("reset", "x", "--dry-run="), ["none", "client", "server", "operator"], 4),
        (("list", "x", "--dry-run="), ["none", "client", "server"], 4),  # no operator preview of a list
        (("reset", "x", "--dry-run=s"), ["server"], 4),
        (("reset", "--kind", ""), ["kafkaconnector", "kafkamirrormaker2"], 4),
        (("copy", "a", "b", "--state", ""), ["running", "paused", "stopped"], 4),
        (("alter", "x", "-f", ""), [], 0),  # a file: the shell's own file completion
        (("--kubeconfig", ""), [], 0),
        (("reset", "x", "--timeout", ""), [], 4),  # nothing to suggest, and no file names either
        (("-n", ""), ["kafka", "team-a"], 4),
        (("--context", "s"), ["staging"], 4),
        (("copy", "a", "b", "--to-cluster", ""), ["connect-east", "connect-west"], 4),
        (("failover-group", "app", "--mirror", ""), ["dr", "shared"], 4),
    ],
)
def test_option_values(words: tuple[str, ...], expected: list[str], directive: int) -> None:
    assert complete(*words) == (expected, directive)


def test_resource_names() -> None:
    # a bare NAME is a KafkaConnector; a KafkaMirrorMaker2 is written mm2/NAME
    assert complete("reset", "") == (["orders", "shared", "mm2/dr", "mm2/shared"], 4)
    assert complete("reset", "o") == (["orders"], 4)
    assert complete("reset", "mm2/") == (["mm2/dr", "mm2/shared"], 4)
    assert complete("reset", "cokc/s") == (["cokc/shared"], 4)
    assert complete("reset", "--kind", "mm2", "") == (["dr", "shared"], 4)
    assert complete("reset", "pods/") == ([], 4)
    # lag: either kind by its bare name; a name both have, with its type
    assert complete("lag", "") == (["orders", "dr", "cokc/shared", "mm2/shared"], 4)
    # copy: KafkaConnectors, FROM and TO
    assert complete("copy", "") == (["orders", "shared"], 4)
    assert complete("copy", "orders", "") == (["orders", "shared"], 4)
    # NAME given, or -l: no more names
    assert complete("reset", "orders", "") == ([], 4)
    assert complete("reset", "-l", "team=a", "") == ([], 4)
    assert complete("failover-group", "") == ([], 4)
    # after a bare --dry-run comes either its strategy or NAME
    assert complete("reset", "--dry-run", "") == (
        ["none", "client", "server", "operator", "orders", "shared", "mm2/dr", "mm2/shared"],
        4,
    )
    assert complete("reset", "--dry-run=client", "") == (["orders", "shared", "mm2/dr", "mm2/shared"], 4)


def test_names_are_read_in_the_namespace_of_the_line() -> None:
    names = FakeNames()
    complete("-n", "team-a", "reset", "", names=names)
    complete("reset", "--namespace=team-b", "", names=names)
    complete("reset", "-nteam-c", "", names=names)
    complete("reset", "", names=names)  # the context's
    assert [namespace for plural, namespace in names.asked if plural == "kafkaconnectors"] == [
        "team-a",
        "team-b",
        "team-c",
        None,
    ]


def test_backups_and_mirror_connectors_of_the_named_resource() -> None:
    names = FakeNames()
    assert complete("restore", "orders", "-n", "kafka", "--from-backup", "", names=names)[0] == [
        "orders-backup-1",
        "orders-backup-2",
    ]
    assert ("backups", ("kafka", "orders")) in names.asked
    connectors = complete("reset", "mm2/dr", "--mirrormaker-connector", "", names=names)[0]
    assert connectors == ["east->west.MirrorSourceConnector", "east->west.MirrorCheckpointConnector"]
    assert ("mirror_connectors", (None, "dr")) in names.asked
    assert complete("reset", "orders", "--mirrormaker-connector", "")[0] == []  # a KafkaConnector has none


def test_a_failure_is_no_candidates_never_an_error() -> None:
    class Broken(FakeNames):
        def resources(self, kind: Kind, namespace: str | None) -> list[str]:
            raise RuntimeError("boom")

    assert sc.complete(["reset", ""], Broken()) == ":4\n"


# --- names from a cluster: the real client against a fake API server ------------------------------


def kubeconfig(tmp_path: Path, server: str) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": server, "insecure-skip-tls-verify": True}}],
                "users": [{"name": "u", "user": {"token": "very-secret-token"}}],
                "contexts": [
                    {"name": "x", "context": {"cluster": "c", "user": "u", "namespace": "kafka"}},
                    {"name": "y", "context": {"cluster": "c", "user": "u"}},
                ],
                "current-context": "x",
            }
        )
    )
    return path


def test_names_from_the_api_server_are_names_only_bounded_and_print_no_credential(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import kubernetes.client.rest

    sent: list[tuple[str, dict[str, list[str]], dict[str, str]]] = []

    def answer(self: Any, method: str, url: str, **kwargs: Any) -> urllib3.HTTPResponse:
        split = urlsplit(url)
        sent.append((split.path, parse_qs(split.query), dict(kwargs.get("headers") or {})))
        items = [{"metadata": {"name": f"c{i:03}"}} for i in range(3)]
        body = json.dumps({"kind": "PartialObjectMetadataList", "items": items}).encode()
        return urllib3.HTTPResponse(
            body=io.BytesIO(body), status=200, headers={"Content-Type": "application/json"}, preload_content=False
        )

    monkeypatch.setattr(urllib3.PoolManager, "request", answer)
    assert kubernetes.client.rest  # the client's pool manager is a urllib3.PoolManager
    config = kubeconfig(tmp_path, "https://127.0.0.1:1")
    out = sc.complete(["--kubeconfig", str(config), "reset", ""])
    assert (
        out
        == "c000\tKafkaConnector\nc001\tKafkaConnector\nc002\tKafkaConnector\n"
        + "".join(f"mm2/c00{i}\tKafkaMirrorMaker2\n" for i in range(3))
        + ":4\n"
    )
    paths = sorted(path for path, _, _ in sent)
    assert paths == [
        f"/apis/{API_GROUP}/{API_VERSION}/namespaces/kafka/kafkaconnectors",  # the context's namespace
        f"/apis/{API_GROUP}/{API_VERSION}/namespaces/kafka/kafkamirrormaker2s",
    ]
    for _, query, headers in sent:
        assert query["limit"] == [str(sc.NAME_LIMIT)]
        assert headers["Accept"].startswith("application/json;as=PartialObjectMetadataList")
    assert "very-secret-token" not in out
    # --context: its namespace (none: default); contexts come from the kubeconfig
    sent.clear()
    sc.complete(["--kubeconfig", str(config), "--context", "y", "lag", ""])
    assert {path for path, _, _ in sent} == {
        f"/apis/{API_GROUP}/{API_VERSION}/namespaces/default/kafkaconnectors",
        f"/apis/{API_GROUP}/{API_VERSION}/namespaces/default/kafkamirrormaker2s",
    }
    assert sc.complete(["--kubeconfig", str(config), "--context", ""]) == "x\ny\n:4\n"


def test_an_unreachable_api_server_costs_at_most_the_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def hang(self: Any, method: str, url: str, **kwargs: Any) -> urllib3.HTTPResponse:
        time.sleep(30)
        raise AssertionError("not reached")

    monkeypatch.setattr(urllib3.PoolManager, "request", hang)
    monkeypatch.setattr(sc, "API_BUDGET_S", 0.5)
    config = kubeconfig(tmp_path, "https://127.0.0.1:1")
    started = time.monotonic()
    assert sc.complete(["--kubeconfig", str(config), "reset", ""]) == ":4\n"
    assert time.monotonic() - started < 2.0
    # and no kubeconfig at all: no names, no error
    assert sc.complete(["--kubeconfig", str(tmp_path / "none"), "reset", ""]) == ":4\n"


# --- the executable kubectl looks for ---------------------------------------------------------------


def test_the_console_script_is_the_executable_kubectl_looks_for() -> None:
    """kubectl runs kubectl_complete-<plugin>, the plugin's file name with _complete before its first -."""
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    plugin = "kubectl-connect_offsets"
    assert scripts[plugin] == "connect_offsets.tools.kubectl.main:main"
    assert scripts[plugin.replace("-", "_complete-", 1)] == "connect_offsets.tools.kubectl.shell_completion:main"
    assert os.access(SCRIPT, os.X_OK), f"{SCRIPT}: reinstall the package (make venv)"
    env = {**os.environ, "KUBECONFIG": "/nonexistent/kubeconfig"}
    done = subprocess.run([str(SCRIPT), "reset", "--dry-run="], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0
    assert done.stdout.splitlines()[-1] == ":4" and "server\t" in done.stdout
    assert done.stderr == ""  # kubectl would show it on the user's terminal


def test_the_krew_manifest_says_where_completion_comes_from() -> None:
    manifest = yaml.safe_load((ROOT / "deploy" / "krew" / "connect-offsets.yaml").read_text())
    assert "kubectl_complete-connect_offsets" in manifest["spec"]["caveats"]
