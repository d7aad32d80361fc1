"""kopf runs the process, not the watches: no resource handler of ours is registered with kopf, so
kopf neither streams our resources nor logs a line per watch event (``handlers/watching.py`` and
``clients/watch.py`` do the watching)."""

from __future__ import annotations

import kopf
import pytest

import connect_offsets.handlers  # noqa: F401  (registers the handlers)

pytestmark = pytest.mark.unit


def test_kopf_has_no_resource_handlers_of_ours() -> None:
    registry = kopf.get_default_registry()
    assert registry._watching.get_all_handlers() == []
    assert registry._changing.get_all_handlers() == []
    assert registry._spawning.get_all_handlers() == []


def test_kopf_keeps_the_start_up_and_cleanup_handlers() -> None:
    ids = {handler.id for handler in kopf.get_default_registry()._activities.get_all_handlers()}
    assert {"configure", "close"} <= ids
    assert ids - {"configure", "close"} == {"login_via_client"}  # kopf's own credentials
