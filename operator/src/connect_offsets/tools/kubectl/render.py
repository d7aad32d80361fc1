"""What the plugin prints: one result, or a kubectl-style table of many, and the error lines."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence

from connect_offsets.tools.kubectl.common import EXIT_OK, MIRROR, PLUGIN
from connect_offsets.tools.kubectl.completion import RequestOutcome
from connect_offsets.tools.kubectl.request import Options

# --- rendering ---------------------------------------------------------------------------


def render_table(outcomes: Sequence[RequestOutcome], *, with_namespace: bool) -> str:
    """kubectl-style columns (no borders, no wrapping), so the output stays greppable."""
    headers = (["NAMESPACE"] if with_namespace else []) + ["NAME", "CONNECTOR", "OPERATION", "RESULT", "MESSAGE"]
    rows = [
        ([o.namespace] if with_namespace else [])
        + [o.name, o.connector, o.operation, o.result, " ".join((o.message or o.reason).split())]
        for o in outcomes
    ]
    widths = [max(len(row[i]) for row in [headers, *rows]) for i in range(len(headers) - 1)]
    lines = []
    for row in [headers, *rows]:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        lines.append("   ".join([*cells, row[-1]]).rstrip())
    return "\n".join(lines)


def render_single(outcome: RequestOutcome, options: Options) -> tuple[str, str]:
    """(stdout, stderr) for one resource. stdout carries only the result (JSON for list)."""
    if options.output == "json":
        out = json.dumps(outcome.to_json_obj(), indent=2, ensure_ascii=False)
        return out, error_text(outcome, options) if outcome.code else ""
    if outcome.code != EXIT_OK:
        return "", error_text(outcome, options)
    if outcome.result == "Requested":
        return f"{outcome.kind} {outcome.namespace}/{outcome.name}: {outcome.message}", ""
    if outcome.offsets is not None:
        return json.dumps(outcome.offsets, indent=2, ensure_ascii=False), ""
    lines = [f"{outcome.kind} {outcome.namespace}/{outcome.name}: {outcome.message or outcome.operation + ' done'}"]
    if outcome.dry_run is not None:
        lines = [json.dumps(outcome.dry_run, indent=2, ensure_ascii=False)]
    if outcome.backup:
        lines.append(
            f"backup of the previous offsets: ConfigMap {outcome.backup} (undo: {PLUGIN} restore {outcome.name} "
            f"-n {outcome.namespace} --from-backup {outcome.backup}"
            + (
                f" --kind kafkamirrormaker2 --mirrormaker-connector {outcome.connector}"
                if outcome.kind == MIRROR.kind
                else ""
            )
            + ")"
        )
    return "\n".join(lines), ""


def error_text(outcome: RequestOutcome, options: Options) -> str:
    if outcome.result == "Failed":
        where = f"{outcome.kind} {outcome.namespace}/{outcome.name}"
        if outcome.kind == MIRROR.kind:
            where += f" (connector {outcome.connector})"
        text = f"error: {where}: {outcome.operation} failed ({outcome.reason or 'Failed'}): {outcome.message}"
        if outcome.reason != "Withdrawn":
            text += "\nthe request annotations were removed; the failure stays in status.lastOffsetsOperation"
    else:
        text = f"error: {outcome.message}"
    if outcome.hint:
        text += f"\nhint: {outcome.hint}"
    if options.verbose:
        if outcome.detail:
            text += f"\ndetail:\n{outcome.detail}"
        if outcome.record:
            text += f"\nlastOffsetsOperation: {json.dumps(outcome.record, ensure_ascii=False)}"
        if outcome.request_id:
            text += f"\nrequest id: {outcome.request_id}"
    return text


def report(outcomes: Sequence[RequestOutcome], options: Options) -> int:
    if options.selector is None:
        out, err = render_single(outcomes[0], options)
        if out:
            print(out)
        if err:
            print(err, file=sys.stderr)
        return outcomes[0].code
    if options.output == "json":
        print(json.dumps([o.to_json_obj() for o in outcomes], indent=2, ensure_ascii=False))
    else:
        print(render_table(outcomes, with_namespace=len({o.namespace for o in outcomes}) > 1))
    failed = [o for o in outcomes if o.code != EXIT_OK]
    if failed:
        print(f"error: {len(failed)} of {len(outcomes)} failed", file=sys.stderr)
        if options.verbose:
            for outcome in failed:
                print(error_text(outcome, options), file=sys.stderr)
    return max((o.code for o in outcomes), default=EXIT_OK)
