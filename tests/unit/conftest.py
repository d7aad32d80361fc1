"""Fixtures shared by the unit tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.reconcile_pass import Stack, running_stack


@pytest.fixture
async def stack() -> AsyncIterator[Stack]:
    """One namespace, ConnectCluster, KafkaConnector and fake worker, driven pass by pass."""
    async with running_stack() as stack:
        yield stack
