"""docs/reference.md against the code: no reason, Event or column the user can meet goes undocumented.

Covers:
* the columns tables (``kubectl get`` printer columns, the plugin's tables) are exactly what
  ``tools/reference_tables.py`` renders from the CRDs and the plugin's renderers;
* every condition reason in the code — found in the source: literals given to ``ConditionSpec``,
  ``PlannedRefusal``, ``_refuse``, ``OffsetsRequestInvalid``, ``not_ready``, a ``reason``
  argument, variable or dict key, and every CamelCase literal that is not a name in the code — is in
  the Conditions or Events section (issue 36: ``BackupNotFound`` and ConnectCluster ``Reachable``
  were in no doc);
* every Event reason (``event``/``record_event``/``post_event``) is a row of the Events table.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from connect_offsets.tools.reference_tables import render_blocks

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "operator" / "src" / "connect_offsets"
REFERENCE = REPO / "docs" / "reference.md"

#: Two or more capitalised words run together (``BackupNotFound``), or one (``Reachable``).
MULTI_WORD = re.compile(r"[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+")
ONE_WORD = re.compile(r"[A-Z][a-z]+")
#: Calls whose argument at this position is a reason (condition or Event).
REASON_ARGUMENT = {
    "ConditionSpec": 2,
    "PlannedRefusal": 0,
    "_refuse": 2,
    "OffsetsRequestInvalid": 0,
    "CredentialsRefused": 0,
    "not_ready": 0,
}
EVENT_REASON_ARGUMENT = {"event": 1, "record_event": 3, "post_event": 3}
#: CamelCase literals that are not reasons: Kubernetes kinds, Java class names, Event types.
NOT_REASONS = {
    "ConfigMap",
    "ConnectCluster",
    "CustomResourceDefinition",
    "KafkaConnector",
    "KafkaMirrorMaker2",
    "MirrorSourceConnector",
    "MirrorCheckpointConnector",
    "MirrorHeartbeatConnector",
    "SinkConnector",
    "Normal",
    "Warning",
    "BearerToken",  # the kubernetes client's auth setting (clients/annotations_patch.py)
    "PartialObjectMetadata",  # the API server's metadata-only kinds a watch asks for (clients/watch.py)
    "PartialObjectMetadataList",
    "ReplicationLag",  # the work queue's metric label of lag measurements (controller/core.py)
    # The kubernetes client's model names a response is read into (clients/kubernetes_core.py).
    "V1ConfigMap",
    "V1ConfigMapList",
    "V1Secret",
    "V1Status",
    "CoreV1Event",
}


def _modules() -> Iterator[tuple[Path, ast.Module]]:
    """The operator's modules (the command line tools report exit codes and their own results)."""
    for path in sorted(PACKAGE.rglob("*.py")):
        if "tools" not in path.relative_to(PACKAGE).parts:
            yield path, ast.parse(path.read_text())


def _strings(node: ast.AST | None, pattern: re.Pattern[str]) -> Iterator[str]:
    """The string literals of ``node`` that match ``pattern``, except those a comparison tests
    (``"Applied" if result == "Succeeded" else "ApplyFailed"`` gives two reasons, not three)."""
    if node is None or isinstance(node, ast.Compare):
        return
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and pattern.fullmatch(node.value):
        yield node.value
    for child in ast.iter_child_nodes(node):
        yield from _strings(child, pattern)


def _called(node: ast.Call) -> str:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _reason_targets(node: ast.Assign | ast.AnnAssign) -> Iterator[ast.AST | None]:
    """The values assigned to names containing "reason" (``reason, message = "Cancelled", ...`` too)."""
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    for target in targets:
        names = list(target.elts) if isinstance(target, ast.Tuple) else [target]
        values: list[ast.AST | None]
        if isinstance(node.value, ast.Tuple) and len(node.value.elts) == len(names):
            values = list(node.value.elts)
        else:
            values = [node.value] * len(names)
        for name, value in zip(names, values, strict=True):
            text = name.id if isinstance(name, ast.Name) else name.attr if isinstance(name, ast.Attribute) else ""
            if "reason" in text.lower():
                yield value


def code_reasons() -> tuple[dict[str, str], dict[str, str]]:
    """(condition reasons, Event reasons) found in the source, each with where it was found."""
    names: set[str] = set()
    reasons: dict[str, str] = {}
    events: dict[str, str] = {}
    for path, tree in _modules():
        where = str(path.relative_to(PACKAGE))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    if isinstance(target, ast.Name):
                        names.add(target.id)
                for value in _reason_targets(node):
                    reasons.update(dict.fromkeys(_strings(value, ONE_WORD), where))
            elif isinstance(node, ast.Call):
                called = _called(node)
                position = REASON_ARGUMENT.get(called)
                if position is not None and len(node.args) > position:
                    reasons.update(dict.fromkeys(_strings(node.args[position], ONE_WORD), where))
                position = EVENT_REASON_ARGUMENT.get(called)
                if position is not None and len(node.args) > position:
                    found = set(_strings(node.args[position], ONE_WORD)) | set(
                        _strings(node.args[position], MULTI_WORD)
                    )
                    events.update(dict.fromkeys(found, where))
                for keyword in node.keywords:
                    if keyword.arg is not None and "reason" in keyword.arg.lower():
                        reasons.update(dict.fromkeys(_strings(keyword.value, ONE_WORD), where))
            elif isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values, strict=True):
                    if isinstance(key, ast.Constant) and key.value == "reason":
                        reasons.update(dict.fromkeys(_strings(value, ONE_WORD), where))
            if isinstance(node, ast.Constant):
                reasons.update(dict.fromkeys(_strings(node, MULTI_WORD), where))
    reasons = {r: w for r, w in reasons.items() if r not in names and r not in NOT_REASONS}
    return reasons, {r: w for r, w in events.items() if r not in NOT_REASONS}


def section(text: str, heading: str) -> str:
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def backticked(text: str) -> set[str]:
    return set(re.findall(r"`([A-Za-z0-9]+)`", text))


def test_the_columns_tables_are_the_ones_rendered_from_the_code() -> None:
    text = REFERENCE.read_text()
    assert render_blocks(text) == text, (
        "docs/reference.md's columns differ from the code: python -m connect_offsets.tools.reference_tables"
    )


def test_the_scan_finds_the_reasons_it_is_meant_to_find() -> None:
    """Not vacuous: reasons given each way the code gives them are found."""
    reasons, events = code_reasons()
    for reason in ("BackupNotFound", "Reachable", "Cancelled", "Interrupted", "Refused", "InvalidURL", "StatusUnknown"):
        assert reason in reasons, reason
    for reason in ("OffsetsDryRun", "ConnectorNotDeleted", "CleanupFailed", "OffsetsChangeStarted"):
        assert reason in events, reason
    assert "KafkaConnectorStatus" not in reasons and "ConfigMap" not in reasons


def test_every_condition_reason_in_the_code_is_documented() -> None:
    reasons, _ = code_reasons()
    text = REFERENCE.read_text()
    documented = backticked(section(text, "Conditions")) | backticked(section(text, "Events"))
    missing = {reason: where for reason, where in reasons.items() if reason not in documented}
    assert missing == {}, f"add these reasons to docs/reference.md#conditions: {missing}"


def test_every_event_reason_is_a_row_of_the_events_table() -> None:
    _, events = code_reasons()
    rows = [line for line in section(REFERENCE.read_text(), "Events").splitlines() if line.startswith("| `")]
    documented = {reason for row in rows for reason in backticked(row.split("|")[1])}
    assert {reason: where for reason, where in events.items() if reason not in documented} == {}
