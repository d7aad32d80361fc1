"""What the plugin prints: one result, or a kubectl-style table of many, and the error lines.

The output formats, as kubectl users know them (``-o``), with one meaning per command whether it
works on one resource or on many (``-l``): ``text`` (default: the result - ``list`` the offsets
document, a preview the report, a change the operator's message; with ``-l`` the table of one row
per resource), ``wide`` (that table with every column: reason, backup, request id; only where
there is a table, so not for one resource: parser.check_wide), ``json`` and
``yaml`` (the result record per resource; a list with ``-l``), ``jsonpath=TEMPLATE`` (kubectl's
JSONPath on what ``-o json`` prints), ``name`` (``TYPE.GROUP/NAME`` of each resource whose request
succeeded, one a line, for pipes). Errors always go to stderr.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any, TextIO

import yaml

from connect_offsets.tools.kubectl.common import EXIT_OK, JSONPATH_PREFIX, MIRROR, PLUGIN
from connect_offsets.tools.kubectl.completion import RequestOutcome
from connect_offsets.tools.kubectl.jsonpath import render as render_jsonpath
from connect_offsets.tools.kubectl.request import Options
from connect_offsets.vocabulary import API_GROUP


def to_json(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False)


def to_yaml(data: Any) -> str:
    """Block-style YAML in the order the JSON has (as ``kubectl -o yaml``), without a trailing newline."""
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, default_flow_style=False).rstrip("\n")


def serialize(data: Any, output: str) -> str:
    """``data`` as ``-o json``, ``-o yaml`` or ``-o jsonpath=TEMPLATE`` (kubectl prints a template's
    result without a newline of its own: ``emit`` adds none either)."""
    if output.startswith(JSONPATH_PREFIX):
        return render_jsonpath(output[len(JSONPATH_PREFIX) :], data)
    return to_yaml(data) if output == "yaml" else to_json(data)


def is_document(output: str) -> bool:
    """``-o json``, ``yaml`` or ``jsonpath=...``: the record(s), not text or a table."""
    return output in ("json", "yaml") or output.startswith(JSONPATH_PREFIX)


def emit(text: str, output: str, stream: TextIO | None = None) -> None:
    """Print ``text`` on stdout: a line, except a JSONPath template's result, printed exactly (kubectl)."""
    target = stream or sys.stdout
    if output.startswith(JSONPATH_PREFIX):
        target.write(text)
        target.flush()
    else:
        print(text, file=target)


def resource_name(kind: str, name: str) -> str:
    """``-o name``: ``kafkaconnector.connect-offsets.io/NAME``, as kubectl prints (and accepts) it."""
    return f"{kind.lower()}.{API_GROUP}/{name}"


def columns(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """kubectl-style columns (no borders, no wrapping; the last column unpadded), so output stays greppable."""
    widths = [max(len(row[i]) for row in [headers, *rows]) for i in range(len(headers) - 1)]
    lines = []
    for row in [headers, *rows]:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        lines.append("   ".join([*cells, row[-1]]).rstrip())
    return "\n".join(lines)


def one_line(text: str) -> str:
    return " ".join(text.split())


def render_table(outcomes: Sequence[RequestOutcome], *, with_namespace: bool) -> str:
    """The summary table of ``-l`` (``-o text``)."""
    headers = (["NAMESPACE"] if with_namespace else []) + ["NAME", "CONNECTOR", "OPERATION", "RESULT", "MESSAGE"]
    rows = [
        ([o.namespace] if with_namespace else [])
        + [o.name, o.connector, o.operation, o.result, one_line(o.message or o.reason)]
        for o in outcomes
    ]
    return columns(headers, rows)


WIDE_HEADERS = (
    "NAMESPACE",
    "KIND",
    "NAME",
    "CONNECTOR",
    "OPERATION",
    "RESULT",
    "REASON",
    "BACKUP",
    "REQUEST ID",
    "MESSAGE",
)


def render_wide(outcomes: Sequence[RequestOutcome]) -> str:
    """``-o wide``: the ``-l`` table (``render_table``) with every column, one row per resource. One
    resource prints no table, so no ``-o wide`` either (parser.check_wide)."""
    rows = [
        [
            o.namespace,
            o.kind,
            o.name,
            o.connector,
            o.operation,
            o.result,
            o.reason or "-",
            o.backup or "-",
            o.request_id or "-",
            one_line(o.message or o.reason),
        ]
        for o in outcomes
    ]
    return columns(WIDE_HEADERS, rows)


def render_names(outcomes: Sequence[RequestOutcome]) -> str:
    """``-o name``: the resources whose request succeeded (or, with --no-wait, was made)."""
    return "\n".join(resource_name(o.kind, o.name) for o in outcomes if o.code == EXIT_OK)


class WaitProgress:
    """The progress lines of a wait, on stderr: one line each time a resource's progress changes."""

    def __init__(self, enabled: bool, stream: TextIO | None = None) -> None:
        self.enabled = enabled
        self.stream = stream
        self._last: dict[str, str] = {}

    def show(self, resource: str, operation: str, text: str) -> None:
        if not self.enabled or self._last.get(resource) == text:
            return
        self._last[resource] = text
        print(f"{resource}: {operation}: {text}", file=self.stream or sys.stderr, flush=True)


#: How kubectl says what a write did (``configmap/x configured (server dry run)``).
WRITE_VERBS = {"create": "created", "patch": "configured", "annotate": "annotated"}


def write_lines(outcome: RequestOutcome) -> list[str]:
    """``--dry-run=client|server``: one kubectl-style line per write (``TYPE/NAME VERBED (client dry run)``)."""
    lines = []
    for write in outcome.writes:
        kind = str(write.get("kind", ""))
        what = f"configmap/{write.get('name')}" if kind == "ConfigMap" else resource_name(kind, str(write.get("name")))
        lines.append(
            f"{what} {WRITE_VERBS.get(str(write.get('verb')), write.get('verb'))} ({outcome.dry_run_strategy} dry run)"
        )
    return lines


def render_single(outcome: RequestOutcome, options: Options) -> tuple[str, str]:
    """(stdout, stderr) for one resource. stdout carries only the result (JSON for list)."""
    if is_document(options.output):
        out = serialize(outcome.to_json_obj(), options.output)
        return out, error_text(outcome, options) if outcome.code else ""
    if outcome.code != EXIT_OK:
        return "", error_text(outcome, options)
    if options.output == "name":
        return render_names([outcome]), ""
    if outcome.result == "Requested":
        return f"{outcome.kind} {outcome.namespace}/{outcome.name}: {outcome.message}", ""
    if outcome.offsets is not None:
        return to_json(outcome.offsets), ""
    if outcome.result == "DryRun" and outcome.dry_run is None:
        return "\n".join(write_lines(outcome)), ""
    lines = [f"{outcome.kind} {outcome.namespace}/{outcome.name}: {outcome.message or outcome.operation + ' done'}"]
    if outcome.dry_run is not None:
        # A preview's report; copy to a new TO: the KafkaConnector that would be created, as YAML
        # (ready for kubectl apply -f -)
        created = outcome.result == "DryRun" and outcome.operation == "copy"
        lines = [to_yaml(outcome.dry_run) if created else to_json(outcome.dry_run)]
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
        if outcome.operation == "failover-group":
            where += f" ({outcome.connector})"
        elif outcome.kind == MIRROR.kind:
            where += f" (connector {outcome.connector})"
        if outcome.refused_here:
            # Refused by the plugin before anything was written: no request, no status record.
            return _with_hint(
                f"error: {where}: {outcome.operation} refused ({outcome.reason or 'Refused'}): {outcome.message}",
                outcome,
                options,
            )
        text = f"error: {where}: {outcome.operation} failed ({outcome.reason or 'Failed'}): {outcome.message}"
        kept = {"failover-group": "status.groupFailovers"}.get(outcome.operation, "status.lastOffsetsOperation")
        if outcome.reason != "Withdrawn" and not (outcome.operation == "copy" and outcome.hint):
            text += f"\nthe request annotations were removed; the failure stays in {kept}"
    else:
        text = f"error: {outcome.message}"
    return _with_hint(text, outcome, options)


def _with_hint(text: str, outcome: RequestOutcome, options: Options) -> str:
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
            emit(out, options.output)
        if err:
            print(err, file=sys.stderr)
        return outcomes[0].code
    if is_document(options.output):
        emit(serialize([o.to_json_obj() for o in outcomes], options.output), options.output)
    elif options.output == "wide":
        print(render_wide(outcomes))
    elif options.output == "name":
        names = render_names(outcomes)
        if names:
            print(names)
    else:
        print(render_table(outcomes, with_namespace=len({o.namespace for o in outcomes}) > 1))
    failed = [o for o in outcomes if o.code != EXIT_OK]
    if failed:
        print(f"error: {len(failed)} of {len(outcomes)} failed", file=sys.stderr)
        if options.verbose:
            for outcome in failed:
                print(error_text(outcome, options), file=sys.stderr)
    return max((o.code for o in outcomes), default=EXIT_OK)
