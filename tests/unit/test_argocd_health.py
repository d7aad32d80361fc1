"""deploy/argocd/health.lua, run by a real Lua interpreter (lupa) against sample objects."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from lupa import LuaRuntime

pytestmark = pytest.mark.unit

SCRIPT = (Path(__file__).resolve().parents[2] / "deploy" / "argocd" / "health.lua").read_text()


def health(obj: dict[str, Any]) -> tuple[str, str]:
    lua = LuaRuntime(unpack_returned_tuples=True)
    to_lua = lua.eval("function(convert) return convert end")

    def convert(value: Any) -> Any:
        if isinstance(value, dict):
            return lua.table_from({k: convert(v) for k, v in value.items()})
        if isinstance(value, list):
            return lua.table_from([convert(v) for v in value])
        return value

    lua.globals().obj = to_lua(convert(obj))
    result = lua.execute(SCRIPT)
    return str(result["status"]), str(result["message"])


def resource(conditions: list[dict[str, str]] | None, generation: int = 2, observed: int | None = 2) -> dict[str, Any]:
    obj: dict[str, Any] = {"metadata": {"name": "c", "generation": generation}}
    if conditions is not None:
        obj["status"] = {"conditions": conditions}
        if observed is not None:
            obj["status"]["observedGeneration"] = observed
    return obj


def ready(status: str, reason: str, message: str = "m") -> dict[str, str]:
    return {"type": "Ready", "status": status, "reason": reason, "message": message}


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (resource(None), "Progressing"),
        (resource([ready("True", "ConnectorRunning")], generation=3, observed=2), "Progressing"),
        (resource([ready("True", "ConnectorRunning")], observed=None), "Progressing"),
        (resource([ready("True", "ConnectorRunning")]), "Healthy"),
        (resource([ready("True", "ConnectorStopped")]), "Healthy"),
        (resource([ready("False", "Progressing")]), "Progressing"),
        (resource([ready("False", "Creating")]), "Progressing"),
        (resource([ready("False", "ConnectorFailed", "task 0 FAILED")]), "Degraded"),
        (resource([ready("False", "ConnectClusterUnavailable")]), "Degraded"),
        (resource([ready("False", "InvalidSpec")]), "Degraded"),
        (
            resource(
                [
                    ready("True", "ConnectorRunning"),
                    {"type": "OffsetsOperationFailed", "status": "True", "reason": "InvalidOffsets", "message": "bad"},
                ]
            ),
            "Degraded",
        ),
        (
            resource([{"type": "InvalidAnnotation", "status": "True", "reason": "UnknownValue", "message": "x"}]),
            "Progressing",
        ),
    ],
)
def test_health_mapping(obj: dict[str, Any], expected: str) -> None:
    assert health(obj)[0] == expected


def test_degraded_message_carries_the_reason() -> None:
    status, message = health(resource([ready("False", "ConnectorFailed", "task 0 FAILED: boom")]))
    assert status == "Degraded" and message == "ConnectorFailed: task 0 FAILED: boom"


def ignore_differences_blocks(markdown: str) -> list[Any]:
    import re

    import yaml

    blocks = re.findall(r"```yaml\n(.*?)```", markdown, re.S)
    return [yaml.safe_load(b) for b in blocks if "ignoreDifferences" in b]


def test_the_gitops_advice_is_one_stanza_everywhere() -> None:
    """The Argo CD notes and the operator guide once disagreed (never commit vs commit with an id)."""
    repo = Path(__file__).resolve().parents[2]
    guide = ignore_differences_blocks((repo / "docs" / "operator-guide.md").read_text())
    argocd = ignore_differences_blocks((repo / "deploy" / "argocd" / "README.md").read_text())
    assert len(guide) == 1 and guide == argocd
    entries = guide[0]["spec"]["ignoreDifferences"]
    assert {e["kind"] for e in entries} == {"KafkaConnector", "KafkaMirrorMaker2"}
    assert all(
        e["jqPathExpressions"] == ['.metadata.annotations["connect-offsets.io/connector-offsets"]'] for e in entries
    )
