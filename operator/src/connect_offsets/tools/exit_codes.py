"""The exit codes of every command line tool, defined once.

The tools: ``connect-offsets`` (``export``, ``import``, ``crds``), its ``pipeline`` sub-command (also
``python -m connect_offsets.tools.pipeline``) and the kubectl plugin (``kubectl connect-offsets``).
One number has one meaning whichever tool returns it; ``TOOL_DETAILS`` says what it covers in each
tool. The ``--help`` epilogs (``epilog``) and the table in docs/reference.md (``markdown_table``; a
unit test compares them) are rendered from here, so the three cannot drift apart.

Why 3 and 5: the kubectl plugin has returned 3 for "timed out waiting for the operator" and 4 for
"the Kubernetes API could not be used" since it exists, and with ``-l`` it returns the highest code of
all resources, an order scripts rely on. ``connect-offsets import`` returned 3 for "refused for
safety"; that meaning moved to 5 so that 3 means the same thing everywhere.
"""

from __future__ import annotations

import textwrap
from enum import IntEnum
from typing import Final, Literal

__all__ = ["TOOLS", "TOOL_DETAILS", "ExitCode", "Tool", "epilog", "markdown_table"]

Tool = Literal["connect-offsets", "pipeline", "kubectl"]

#: Display names, in table order.
TOOLS: Final[dict[Tool, str]] = {
    "connect-offsets": "connect-offsets export, import, crds, migrate-storage",
    "pipeline": "connect-offsets pipeline",
    "kubectl": "kubectl connect-offsets",
}


class ExitCode(IntEnum):
    """What a tool's exit status means; the docstring of each member is its one-line meaning."""

    OK = 0
    FAILED = 1
    INVALID = 2
    TIMEOUT = 3
    KUBERNETES = 4
    REFUSED = 5
    INTERRUPTED = 130

    @property
    def meaning(self) -> str:
        return _MEANINGS[self]


_MEANINGS: Final[dict[ExitCode, str]] = {
    ExitCode.OK: "success (a dry run included)",
    ExitCode.FAILED: "the operation failed",
    ExitCode.INVALID: "usage or input error: nothing was changed",
    ExitCode.TIMEOUT: "timed out waiting for the operator: the request stays pending",
    ExitCode.KUBERNETES: "the Kubernetes API could not be used (kubeconfig, connection, permissions)",
    ExitCode.REFUSED: "refused for safety: nothing was changed",
    ExitCode.INTERRUPTED: "interrupted (Ctrl-C)",
}

#: Per tool, the codes it returns and what each covers there ("" when the meaning says it all).
TOOL_DETAILS: Final[dict[Tool, dict[ExitCode, str]]] = {
    "connect-offsets": {
        ExitCode.OK: "",
        ExitCode.FAILED: "the store could not be read or written (Kafka unreachable, a topic or file error); "
        "migrate-storage: an object the API server would not write back (its message is printed)",
        ExitCode.INVALID: "bad flags, document or worker config",
        ExitCode.KUBERNETES: "migrate-storage: the Kubernetes API could not be used (kubeconfig, connection, "
        "permissions)",
        ExitCode.REFUSED: "a connector not STOPPED or unknown, a running standalone worker; "
        "--force / --allow-unknown override; migrate-storage: CRDs that store another version than this "
        "release's (apply the new CRDs first)",
        ExitCode.INTERRUPTED: "",
    },
    "pipeline": {
        ExitCode.OK: "",
        ExitCode.FAILED: "a Spark job or Kubernetes failed",
        ExitCode.INVALID: "bad flags, a malformed --export file, a missing topic, unreachable Kafka "
        "(all checked before Spark starts), a time the data cannot answer",
        ExitCode.INTERRUPTED: "",
    },
    "kubectl": {
        ExitCode.OK: "",
        ExitCode.FAILED: "the operator's reason and Connect's (or Kafka's) message are printed; also a refused copy or "
        "failover (its reason names the rule)",
        ExitCode.INVALID: "also a resource or backup that does not exist, or a request already pending",
        ExitCode.TIMEOUT: "the error says how to cancel it",
        ExitCode.KUBERNETES: "",
        ExitCode.INTERRUPTED: "",
    },
}

_TRAILERS: Final[dict[Tool, str]] = {"kubectl": "with -l: the highest code of all resources"}


def epilog(tool: Tool) -> str:
    """The ``exit codes:`` block of a tool's ``--help``."""
    lines = ["exit codes:"]
    for code, detail in TOOL_DETAILS[tool].items():
        text = code.meaning + (f" — {detail}" if detail else "")
        lines += textwrap.wrap(text, width=100, initial_indent=f"  {int(code):<4}", subsequent_indent=" " * 8)
    if tool in _TRAILERS:
        lines.append(f"  {_TRAILERS[tool]}")
    return "\n".join(lines) + "\n"


def markdown_table() -> str:
    """The table of docs/reference.md#exit-codes: one row per code, one column per tool."""
    header = "| Code | Meaning | " + " | ".join(f"`{name}`" for name in TOOLS.values()) + " |"
    rows = [header, "|---|---|" + "---|" * len(TOOLS)]
    for code in ExitCode:
        cells = []
        for tool in TOOLS:
            details = TOOL_DETAILS[tool]
            cells.append("—" if code not in details else (details[code] or "yes"))
        rows.append(f"| `{int(code)}` | {code.meaning} | " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"
