"""Fixtures shared by the unit tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.reconcile_pass import Stack, running_stack
from tests.simulation import EXPLORED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The size and run time of the exactly-once simulation (tests/unit/test_simulation.py)."""
    lines = [
        str(value)
        for report in terminalreporter.stats.get("passed", [])
        for key, value in getattr(report, "user_properties", [])
        if key == EXPLORED
    ]
    if lines:
        terminalreporter.section(EXPLORED)
        for line in lines:
            terminalreporter.write_line(line)


@pytest.fixture
async def stack() -> AsyncIterator[Stack]:
    """One namespace, ConnectCluster, KafkaConnector and fake worker, driven pass by pass."""
    async with running_stack() as stack:
        yield stack
