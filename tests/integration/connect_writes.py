"""What reached a Connect worker, counted per connector in its request log: the witness of the
"one writer, exactly once" scenarios (operator replicas as processes in test_replicas.py, as the
chart's Pods on the stack's node in test_node_chart.py)."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from tests.integration.support import GROUP, VERSION, request_lines

LINE = 3  # bytes per line of the source files ("a0\n")
REQUEST = re.compile(
    r'"(?P<method>PUT|PATCH|DELETE|POST) (?P<path>/connectors[^ ?"]*)\S* HTTP/[\d.]+" (?P<status>\d{3})'
)


def writes(log: Path, seen: int, names: set[str]) -> Counter[tuple[str, str]]:
    """The accepted writes to these connectors since line ``seen``: (method, path) -> count."""
    found: Counter[tuple[str, str]] = Counter()
    for line in request_lines(log)[seen:]:
        match = REQUEST.search(line)
        if match is None or not match.group("status").startswith("2"):
            continue
        parts = match.group("path").split("/")
        if len(parts) >= 3 and parts[2] in names:
            found[(match.group("method"), match.group("path"))] += 1
    return found


def once_each(found: Counter[tuple[str, str]], expected: list[tuple[str, str]]) -> None:
    """Each expected write exactly once, and no other write to these connectors."""
    assert found == Counter(expected), sorted(found.items())


def stopped_changed_resumed(name: str, change: tuple[str, str]) -> list[tuple[str, str]]:
    return [("PUT", f"/connectors/{name}/stop"), change, ("PUT", f"/connectors/{name}/resume")]


def holders(coordination: Any, namespace: str) -> dict[str, str]:
    """Lease name -> holder identity (pod name part) of the namespace's Leases."""
    leases = coordination.list_namespaced_lease(namespace).items
    return {lease.metadata.name: (lease.spec.holder_identity or "").split("_")[0] for lease in leases}


def source_lines(path: Path, lines: int = 10) -> Path:
    path.write_text("".join(f"a{i}\n" for i in range(lines)))
    return path


def position_doc(path: Path, position: int) -> str:
    return json.dumps({"offsets": [{"partition": {"filename": str(path)}, "offset": {"position": position}}]})


def resets_and_deletions_once(
    custom: Any, namespace: str, log: Path, seen: int, resets: list[str], deletions: list[str]
) -> None:
    """Each reset (stop, ``DELETE .../offsets``, resume) and each deletion with ``offsetsOnDelete:
    reset`` (stop, ``DELETE .../offsets``, ``DELETE`` of the connector) reached Connect once, and
    nothing else did; every reset's status says it succeeded."""
    expected = [w for n in resets for w in stopped_changed_resumed(n, ("DELETE", f"/connectors/{n}/offsets"))]
    for name in deletions:
        expected += [
            ("PUT", f"/connectors/{name}/stop"),
            ("DELETE", f"/connectors/{name}/offsets"),
            ("DELETE", f"/connectors/{name}"),
        ]
    once_each(writes(log, seen, set(resets + deletions)), expected)
    for name in resets:
        last = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, "kafkaconnectors", name)["status"][
            "lastOffsetsOperation"
        ]
        assert last["result"] == "Succeeded", last
