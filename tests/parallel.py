"""Parallel runs (``pytest -n N --dist loadgroup``): tests of one ``xdist_group`` run in one worker.

Why this module: pytest-xdist's own ``loadgroup`` scheduler finds a test's group in a ``@group`` suffix
that its workers append to ``item._nodeid``, and pytest 9 no longer builds node ids from that
attribute: every test ends up in a group of its own, and a module whose worker is started once
(``scope="module"``) starts it in every process that runs one of its tests. Here each xdist worker
writes the groups it collected (node id -> group) to a file named after the run
(``CONNECT_OFFSETS_TEST_RUN``), and the controller's scheduler, created once every worker has
collected, reads it. Tests without a group are scheduled one by one, as with ``loadgroup``.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
from xdist.remote import Producer
from xdist.scheduler import LoadScopeScheduling

__all__ = ["GroupScheduling", "groups_file", "longest_first", "record_groups"]

#: The duration assumed for a test the last runs did not time (a new one): put early, as a long one.
UNKNOWN_TEST_S = 60.0


def groups_file() -> Path:
    return Path(tempfile.gettempdir()) / f"connect-offsets-test-groups-{os.environ['CONNECT_OFFSETS_TEST_RUN']}.json"


def test_durations_file() -> Path:
    """The last runs' test durations, written by ``hack/suite.py`` after each parallel part."""
    cache = Path(os.environ.get("CONNECT_OFFSETS_CACHE", Path.home() / ".cache" / "connect-offsets"))
    return cache / "test-durations.json"


def longest_first(items: list[pytest.Item]) -> None:
    """Order the tests by their last known duration, longest first (a worker's collection).

    Why: the scheduler hands out work in collection order (after the groups, largest first), so
    a 90 s test collected late started when the others were nearly done and ran alone at the end:
    the parallel part's tail. Every worker reads the same file, so every worker's order is the same
    (the scheduler checks that). No file (a fresh machine): collection order."""
    path = test_durations_file()
    try:
        known = json.loads(path.read_text()) if path.exists() else {}
    except (OSError, ValueError):
        return
    if known:
        items.sort(key=lambda item: -float(known.get(item.nodeid, UNKNOWN_TEST_S)))


def record_groups(items: list[pytest.Item]) -> None:
    """Write every grouped test's group (a worker, after collection; all workers write the same)."""
    groups = {}
    for item in items:
        marks = item.iter_markers("xdist_group")
        names = sorted({str(mark.args[0] if mark.args else mark.kwargs.get("name", "default")) for mark in marks})
        if names:
            groups[item.nodeid] = "_".join(names)
    path = groups_file()
    partial = path.with_name(f"{path.name}.{os.getpid()}")
    partial.write_text(json.dumps(groups))
    partial.replace(path)  # atomic: a reader sees one worker's whole file


class GroupScheduling(LoadScopeScheduling):
    """xdist's load-by-scope scheduling, a test's scope being its group, or the test itself."""

    def __init__(self, config: pytest.Config, log: Producer | None = None) -> None:
        super().__init__(config, log)
        self.groups: dict[str, str] | None = None

    def _split_scope(self, nodeid: str) -> str:
        if self.groups is None:  # first called once every worker has collected (and written the file)
            path = groups_file()
            self.groups = json.loads(path.read_text()) if path.exists() else {}
        return self.groups.get(nodeid, nodeid)
