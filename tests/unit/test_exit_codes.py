"""One exit-code table for every command line tool (tools/exit_codes.py): the ``--help`` epilogs and
docs/reference.md#exit-codes are rendered from it, and no tool defines a number of its own."""

from __future__ import annotations

import argparse
import ast
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from connect_offsets.tools import cli
from connect_offsets.tools import kubectl as kp
from connect_offsets.tools.exit_codes import TOOL_DETAILS, TOOLS, ExitCode, Tool, epilog, markdown_table
from connect_offsets.tools.kubectl import common as kubectl_common
from connect_offsets.tools.pipeline import command as pipeline

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
TOOLS_SRC = REPO / "operator" / "src" / "connect_offsets" / "tools"
BEGIN, END = "<!-- exit-codes:begin", "<!-- exit-codes:end -->"


def test_docs_table_is_the_one_rendered_from_the_code() -> None:
    text = (REPO / "docs" / "reference.md").read_text()
    start = text.index(BEGIN)
    table = text[text.index("\n", start) + 1 : text.index(END)]
    assert table == markdown_table(), "docs/reference.md#exit-codes differs from tools/exit_codes.py: regenerate it"
    assert "docs/reference.md#exit-codes" in (REPO / "README.md").read_text()


def test_one_meaning_per_number() -> None:
    assert len({int(code) for code in ExitCode}) == len(list(ExitCode))  # no aliases
    assert all(code.meaning for code in ExitCode)
    assert set(TOOL_DETAILS) == set(TOOLS)
    used = {code for details in TOOL_DETAILS.values() for code in details}
    assert used == set(ExitCode), "a code no tool returns, or a tool code missing from ExitCode"


def test_every_tool_uses_the_shared_constants() -> None:
    assert (cli.EXIT_OK, cli.EXIT_FAILED, cli.EXIT_INVALID, cli.EXIT_REFUSED, cli.EXIT_INTERRUPTED) == (
        ExitCode.OK,
        ExitCode.FAILED,
        ExitCode.INVALID,
        ExitCode.REFUSED,
        ExitCode.INTERRUPTED,
    )
    assert (pipeline.EXIT_OK, pipeline.EXIT_FAILED, pipeline.EXIT_INVALID) == (0, 1, 2)
    assert (
        kubectl_common.EXIT_OK,
        kubectl_common.EXIT_FAILED,
        kubectl_common.EXIT_USAGE,
        kubectl_common.EXIT_TIMEOUT,
        kubectl_common.EXIT_KUBE,
        kubectl_common.EXIT_INTERRUPTED,
    ) == (
        ExitCode.OK,
        ExitCode.FAILED,
        ExitCode.INVALID,
        ExitCode.TIMEOUT,
        ExitCode.KUBERNETES,
        ExitCode.INTERRUPTED,
    )


def test_no_tool_assigns_an_exit_code_number_itself() -> None:
    """``EXIT_X = 3`` anywhere under tools/ would be a second definition."""
    offenders = []
    for path in TOOLS_SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            targets = (
                node.targets
                if isinstance(node, ast.Assign)
                else [node.target]
                if isinstance(node, ast.AnnAssign)
                else []
            )
            value = getattr(node, "value", None)
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            names += [e.id for t in targets if isinstance(t, ast.Tuple) for e in t.elts if isinstance(e, ast.Name)]
            if any(re.fullmatch(r"EXIT_[A-Z_]+", n) for n in names) and isinstance(value, (ast.Constant, ast.Tuple)):
                offenders.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert not offenders, offenders


def _help(parser: argparse.ArgumentParser, argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit):
        parser.parse_args([*argv, "--help"])
    return capsys.readouterr().out


@pytest.mark.parametrize(
    ("tool", "parser", "argv"),
    [
        ("connect-offsets", cli.build_parser, []),
        ("connect-offsets", cli.build_parser, ["export"]),
        ("connect-offsets", cli.build_parser, ["import"]),
        ("pipeline", cli.build_parser, ["pipeline"]),
        ("pipeline", cli.build_parser, ["pipeline", "as-of"]),
        ("pipeline", pipeline.build_parser, ["latest"]),
        ("kubectl", kp.build_parser, []),
        ("kubectl", kp.build_parser, ["alter"]),
    ],
)
def test_help_epilogs_are_rendered_from_the_table(
    tool: Tool, parser: Callable[[], argparse.ArgumentParser], argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert epilog(tool) in _help(parser(), argv, capsys)


def test_refused_is_five_and_timeout_three() -> None:
    """The one renumbering: import's "refused for safety" moved from 3 to 5 (3 is the plugin's timeout)."""
    assert ExitCode.REFUSED == 5 and ExitCode.TIMEOUT == 3 and ExitCode.KUBERNETES == 4
    assert "  5   refused for safety" in epilog("connect-offsets")
    assert "  3 " not in epilog("connect-offsets") and "  5 " not in epilog("kubectl")
