"""The presence daemon (handlers/presence.py) puts no finalizer on the peering object: a stopped
operator's finalizer blocked the deletion of the object's namespace and of the peering CRD."""

from __future__ import annotations

import pytest

from connect_offsets.handlers import presence

pytestmark = pytest.mark.unit


def test_the_presence_daemon_requires_no_finalizer() -> None:
    presence.register("unit-presence", clusterwide=False)
    assert presence.requires_finalizer() is False
