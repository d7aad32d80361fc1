"""Deterministic crash points for crash-safety tests.

The operator must finish every multi-step offsets change exactly once even if it dies between two
steps. Tests prove that by killing it at named points: with ``CONNECT_OFFSETS_FAULT_POINTS`` set
(comma-separated names), reaching a listed point kills the process with SIGKILL -- no cleanup, no
status write, exactly like the OOM killer. Unset (always, outside tests) it costs one dict lookup.

Points: ``after-intent``, ``after-stop``, ``after-backup``, ``mid-patch``, ``after-patch``,
``before-resume``, ``initial-after-create``, ``initial-after-patch``, ``after-status``, ``delete-after-reset``
(``spec.offsetsOnDelete: reset``: Connect has deleted the offsets, ``status.deletion`` does not say so yet) (a request's
outcome is in status, its annotations not yet removed). Every other write is covered by the
simulation in tests/unit/test_simulation.py, which crashes after each one in turn. ``after-backup`` and
``after-patch`` are reached both inside stop -> change -> resume and by a change on a connector that
is already STOPPED.
"""

from __future__ import annotations

import logging
import os
import signal

__all__ = ["FAULT_POINTS_ENV", "POINTS", "fault_point"]

FAULT_POINTS_ENV = "CONNECT_OFFSETS_FAULT_POINTS"
POINTS = (
    "after-intent",
    "after-stop",
    "after-backup",
    "mid-patch",
    "after-patch",
    "before-resume",
    "initial-after-create",
    "initial-after-patch",
    "after-status",
    "delete-after-reset",
)
log = logging.getLogger(__name__)


def fault_point(name: str) -> None:
    """Die here (SIGKILL) if the environment names this point."""
    assert name in POINTS, name
    enabled = os.environ.get(FAULT_POINTS_ENV)
    if enabled and name in {p.strip() for p in enabled.split(",")}:
        log.warning("fault point %s reached: killing the operator (SIGKILL)", name)
        logging.shutdown()
        os.kill(os.getpid(), signal.SIGKILL)
