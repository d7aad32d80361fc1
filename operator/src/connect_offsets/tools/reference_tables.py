"""The tables of docs/reference.md that are rendered from the code: the columns ``kubectl get`` shows
(the CRDs' printer columns) and the columns of the kubectl plugin's tables.

Why rendered: a column added to a CRD or to the plugin must not go undocumented, and a documented
column must exist. ``tests/unit/test_reference_tables.py`` fails when docs/reference.md differs from
``render_blocks`` (run ``python -m connect_offsets.tools.reference_tables`` in a checkout to rewrite
the marked blocks). The plugin's headers are read from its renderers' own output, so the table is
what users see, not a copy of a constant.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from connect_offsets.models.schema import crd_documents
from connect_offsets.tools.kubectl.completion import RequestOutcome
from connect_offsets.tools.kubectl.lag import render_connector_lag, render_lag
from connect_offsets.tools.kubectl.render import render_table, render_wide

__all__ = ["BLOCKS", "plugin_columns_table", "printer_columns_table", "render_blocks"]


def _markdown(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def printer_columns_table() -> str:
    """``kubectl get`` of each kind: its columns, where each comes from, and when it shows."""
    rows = []
    for document in crd_documents().values():
        kind = document["spec"]["names"]["kind"]
        for column in document["spec"]["versions"][0]["additionalPrinterColumns"]:
            shown = "`-o wide` only" if column.get("priority", 0) > 0 else "always"
            rows.append([kind, column["name"].upper(), f"`{column['jsonPath']}`", shown])
    return _markdown(["Kind", "Column", "From", "Shown"], rows)


def _header(text: str) -> list[str]:
    """The column names of a rendered table's first line (columns are two or more spaces apart)."""
    return re.split(r" {2,}", text.splitlines()[0].strip())


def _sample(kind: str = "KafkaConnector") -> RequestOutcome:
    return RequestOutcome("ns", "name", kind, "connector", "list", "Succeeded", 0, message="message")


def plugin_columns_table() -> str:
    """The plugin's tables: ``-l`` (text), ``-l -o wide`` and ``lag``, their columns as printed."""
    mirror = {
        "status": {
            "replicationLag": {
                "mirrors": [{"sourceCluster": "a", "targetCluster": "b", "connector": "c", "message": "m"}]
            }
        }
    }
    connector = {"metadata": {"name": "c"}, "status": {"progress": {"type": "sink", "totalLag": 1}}}
    tables: list[tuple[str, Callable[[], str]]] = [
        ("`-l` (text); `NAMESPACE` only when several", lambda: render_table([_sample()], with_namespace=True)),
        ("`-l -o wide`", lambda: render_wide([_sample()])),
        ("`lag`", lambda: render_lag(mirror)),
        ("`lag -o wide`", lambda: render_lag(mirror, wide=True)),
        ("`lag cokc/NAME`", lambda: render_connector_lag(connector)),
        ("`lag cokc/NAME -o wide`", lambda: render_connector_lag(connector, wide=True)),
    ]
    rows = [[table, " ".join(f"`{name}`" for name in _header(render()))] for table, render in tables]
    return _markdown(["Table", "Columns"], rows)


#: Marker name -> renderer; docs/reference.md holds each between ``<!-- NAME:begin ... -->`` and
#: ``<!-- NAME:end -->``.
BLOCKS: dict[str, Callable[[], str]] = {
    "printer-columns": printer_columns_table,
    "plugin-columns": plugin_columns_table,
}


def render_blocks(text: str) -> str:
    """``text`` (docs/reference.md) with every marked block rendered from the code."""
    for name, render in BLOCKS.items():
        begin, end = f"<!-- {name}:begin", f"<!-- {name}:end -->"
        start = text.index(begin)
        body_start = text.index("\n", start) + 1
        body_end = text.index(end, body_start)
        text = text[:body_start] + render() + text[body_end:]
    return text


def main(argv: Sequence[str] | None = None) -> int:
    """Rewrite the marked blocks of the given file (default docs/reference.md)."""
    args = list(sys.argv[1:] if argv is None else argv)
    path = Path(args[0] if args else "docs/reference.md")
    path.write_text(render_blocks(path.read_text()))
    print(f"rendered {', '.join(BLOCKS)} in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
