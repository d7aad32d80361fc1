"""The documented examples produce exactly the text the docs show.

Covers: the operator guide's invalid ``offsets.json`` (every problem at once, in the document's
order, each with its path) as the operator's ``OffsetsOperationFailed`` message (the planner, as a
pass runs it) and as the kubectl plugin prints it (``alter --from-file``, through the plugin's
runner and renderer).
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any, cast

import pytest

from connect_offsets.offsets import FILE_STREAM_SOURCE_CLASS
from connect_offsets.planning import plan_connector
from connect_offsets.tools import kubectl as kp
from connect_offsets.tools.kubectl.render import render_single
from tests.unit.planning_fixtures import alter_resource, conditions, observe, offsets_cm

pytestmark = pytest.mark.unit

DOCS = Path(__file__).resolve().parents[2] / "docs"

#: Where the example starts in the operator guide, and what its connector is.
GUIDE_MARKER = "whose `file` is `/data/orders.txt`, has four problems:"
PLUGIN_MARKER = "kubectl connect-offsets alter orders -n kafka --from-file offsets.json` prints"
FILE = "/data/orders.txt"


def fenced_blocks(text: str, after: str, count: int) -> list[str]:
    """The first ``count`` fenced code blocks after ``after`` (their content, without the fences)."""
    start = text.index(after)
    blocks = re.findall(r"```[a-z]*\n(.*?)```", text[start:], flags=re.DOTALL)
    assert len(blocks) >= count, f"the example after {after!r} lost its code blocks"
    return [block.rstrip("\n") for block in blocks[:count]]


def guide_example() -> tuple[str, str]:
    """(the offsets.json, the condition message) as docs/operator-guide.md shows them."""
    document, message = fenced_blocks((DOCS / "operator-guide.md").read_text(), GUIDE_MARKER, 2)
    json.loads(document)  # the example itself is valid JSON, only not a valid offsets document
    return document, message


def test_the_guides_invalid_document_is_refused_with_exactly_the_lines_shown() -> None:
    document, shown = guide_example()
    resource = alter_resource(
        name="orders",
        connector_class=FILE_STREAM_SOURCE_CLASS,
        config={"file": FILE, "topic": "orders"},
        alter_from="orders-offsets",
    )
    configmap = offsets_cm(document, name="orders-offsets")
    plan = plan_connector(resource, observe(resource, "STOPPED", configmap=configmap))
    [failed] = conditions(plan, "OffsetsOperationFailed")
    assert failed.reason == "InvalidOffsets"
    assert failed.message == shown
    assert not [a for a in plan.actions if a.kind.endswith("_offsets")], "nothing may be sent for it"


def test_the_plugin_prints_exactly_the_lines_shown_for_the_same_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    document, _ = guide_example()
    monkeypatch.chdir(tmp_path)
    Path("offsets.json").write_text(document)
    [shown] = fenced_blocks((DOCS / "kubectl-plugin.md").read_text(), PLUGIN_MARKER, 1)
    body: dict[str, Any] = {
        "apiVersion": "connect-offsets.io/v1beta1",
        "kind": "KafkaConnector",
        "metadata": {"name": "orders", "namespace": "kafka", "uid": "u", "resourceVersion": "1", "annotations": {}},
        "spec": {
            "class": FILE_STREAM_SOURCE_CLASS,
            "config": {"file": FILE, "topic": "orders"},
            "alterOffsets": {"fromConfigMap": {"name": "orders-offsets"}},
        },
    }
    options, _ = kp.parse_options(["alter", "orders", "-n", "kafka", "--from-file", "offsets.json"])
    # Refused before any API call: the runner is given the body and no client at all.
    outcome = asyncio.run(kp.Runner(cast(Any, None), options).run(kp.CONNECTOR, "kafka", "orders", body))
    assert (outcome.result, outcome.code) == ("Invalid", kp.EXIT_USAGE)
    out, err = render_single(outcome, options)
    assert out == ""
    assert err == shown
