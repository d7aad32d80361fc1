"""kopf's one line per watch event is dropped (handlers/main.QuietWatchHandlers), nothing else."""

from __future__ import annotations

import logging

import kopf
import pytest

import connect_offsets.handlers  # noqa: F401  (registers the handlers)
from connect_offsets.handlers.main import WATCH_HANDLERS, QuietWatchHandlers

pytestmark = pytest.mark.unit


def record(message: str, level: int = logging.INFO) -> logging.LogRecord:
    return logging.LogRecord("kopf.objects", level, __file__, 1, message, None, None)


def test_the_names_are_the_watch_event_handlers_kopf_runs() -> None:
    registered = {handler.id for handler in kopf.get_default_registry()._watching.get_all_handlers()}
    assert registered == set(WATCH_HANDLERS)


def test_only_a_watch_handlers_success_is_dropped() -> None:
    quiet = QuietWatchHandlers()
    for name in WATCH_HANDLERS:
        assert not quiet.filter(record(f"Handler {name!r} succeeded."))
    kept = [
        "Handler 'delete_connector' succeeded.",  # deletion runs once: its outcome stays in the log
        "Handler 'connector_changed' failed with an exception. Will retry.",
        "Deletion is processed: 1 succeeded; 0 failed.",
    ]
    assert all(quiet.filter(record(message, logging.ERROR)) for message in kept)
