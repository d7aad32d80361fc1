"""The presence daemon (handlers/presence.py) puts no finalizer on the peering object: a stopped
operator's finalizer blocked the deletion of the object's namespace and of the peering CRD."""

from __future__ import annotations

import kopf
import pytest

from connect_offsets.handlers import presence

pytestmark = pytest.mark.unit


def test_the_presence_daemon_requires_no_finalizer() -> None:
    presence.register("unit-presence", clusterwide=False)
    registered = [h for h in kopf.get_default_registry()._spawning._handlers if h.id == "presence"]
    assert registered, "the presence daemon is registered"
    assert not any(h.requires_finalizer for h in registered)
