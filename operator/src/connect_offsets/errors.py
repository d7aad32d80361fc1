"""The root of every error the package raises on purpose, and the three ways one ends.

Why a shared root: a caller that must not crash (a reconcile loop, the CLI's ``main``, the
plugin) catches ``ConnectOffsetsError`` and knows it is one of ours, with a message written for the
user; anything else is a bug and is logged with its traceback.

Why the three kinds are types, not strings in messages: what happens next depends on them.

* ``TransientError`` — the same call may work later with nothing changed (Connect or the API
  server unreachable, a rebalance, a Kafka cluster that does not answer). Retried with back-off.
* ``UserError`` — only a change by a person fixes it (bad input, a refusal by the API server or by
  Connect, a policy). Reported as a condition naming the field; nothing is retried until the
  resource or what it references changes.
* anything else under the root — a failure of ours whose retry behaviour the raiser decides;
  ``retryable`` says it.

Some subclasses decide per instance (an HTTP 429 is retryable, a 400 is not): ``retryable`` is the
one question to ask; the two kinds are the common static answers.
"""

from __future__ import annotations

__all__ = ["ConnectOffsetsError", "TransientError", "UserError"]


class ConnectOffsetsError(Exception):
    """Base of every error this package raises on purpose."""

    @property
    def retryable(self) -> bool:
        """True when the same operation may succeed later without any change by anyone."""
        return False


class TransientError(ConnectOffsetsError):
    """A retry with back-off can fix it."""

    @property
    def retryable(self) -> bool:
        return True


class UserError(ConnectOffsetsError):
    """Only a change by a person fixes it: report it where they look, then wait for the change."""
