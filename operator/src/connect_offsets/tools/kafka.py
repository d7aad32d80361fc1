"""Every confluent_kafka client the tools create (offline export/import, the pipeline's preflight).

Why one place: without a ``logger`` setting librdkafka writes its own lines straight to stderr from
its threads (``%3|...|FAIL|...``), about one per second and broker while Kafka cannot be reached,
before the tool says anything. Every client made here gets a ``LibrdkafkaLog`` as its logger
instead (as clients/kafka.py does for the operator): the lines go to Python logging at DEBUG (the
CLI's ``--verbose`` shows them, see ``show_librdkafka_log``), and the last connection failures are
kept so that a failed call becomes one line naming the servers, the cause and what to check
(``failure_message``)::

    cannot reach Kafka at 127.0.0.1:1 (connection refused): check bootstrap.servers in the worker
    config and that the brokers are up

confluent_kafka queues the lines of a client with a logger and hands them over in ``poll``/``close``,
so ``failure_message`` polls the client once (without waiting) before it reads them.
"""

from __future__ import annotations

import contextlib
import logging
import re
import sys
from collections import deque
from collections.abc import Mapping
from typing import Any, Final, TextIO

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer

__all__ = [
    "LOG",
    "LibrdkafkaLog",
    "consumer",
    "failure_message",
    "producer",
    "show_librdkafka_log",
]

#: Where librdkafka's lines go (DEBUG).
LOG: Final = logging.getLogger(__name__)

#: Error codes with which a call fails when no broker answered.
_UNREACHABLE_CODES: Final = frozenset({KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._RESOLVE})
#: Codes that mean "unreachable" only when librdkafka logged a connection failure.
_TIMEOUT_CODES: Final = frozenset({KafkaError._TIMED_OUT, KafkaError._MSG_TIMED_OUT})
#: librdkafka's suffix of a failure line; the count appears when it folded repeats of the same line.
_AFTER = re.compile(r"\s*\(after \d+ms in state [A-Z_]+(?:, \d+ identical error\(s\) suppressed)?\)\s*$")
_THREAD = re.compile(r"^\[thrd:[^\]]*\]:\s*")
_BROKER = re.compile(r"^\S+/(?:bootstrap|\d+):\s*")
_CONNECT = re.compile(r"^Connect to \S+ failed:\s*(.+)$")
_RESOLVE = re.compile(r"^Failed to resolve '([^']*)':\s*(.+)$")


class LibrdkafkaLog:
    """The ``logger`` of every client the tools create: librdkafka's lines at DEBUG, failures kept."""

    def __init__(self) -> None:
        self.failures: deque[str] = deque(maxlen=10)

    def log(self, level: int, fmt: str, *args: object) -> None:
        """What confluent_kafka calls, as on a ``logging.Logger`` (``"%s [%s] %s"``, facility, client, text)."""
        text = fmt % args if args else fmt
        LOG.debug("librdkafka %s: %s", logging.getLevelName(level), text)
        if len(args) == 3 and args[0] in ("FAIL", "ERROR") and level >= logging.WARNING:
            self.failures.append(str(args[2]))

    def cause(self) -> str | None:
        """The last connection failure, short ("connection refused"), or None if there was none."""
        if not self.failures:
            return None
        text = _BROKER.sub("", _THREAD.sub("", _AFTER.sub("", self.failures[-1])))
        if match := _CONNECT.match(text):
            text = match.group(1)
        elif match := _RESOLVE.match(text):
            text = f"cannot resolve {match.group(1)}: {match.group(2)}"
        # "Connection refused" reads as "connection refused" inside a sentence; "SSL ..." stays.
        return text[:1].lower() + text[1:] if text[1:2].islower() else text


def consumer(settings: Mapping[str, Any], log: LibrdkafkaLog) -> Consumer:
    """A Consumer whose librdkafka lines go to ``log``."""
    return Consumer({**settings, "logger": log})


def producer(settings: Mapping[str, Any], log: LibrdkafkaLog) -> Producer:
    """A Producer whose librdkafka lines go to ``log``."""
    return Producer({**settings, "logger": log})


def failure_message(
    client: Consumer | Producer,
    log: LibrdkafkaLog,
    error: KafkaException | KafkaError,
    *,
    servers: str,
    what: str,
    hint: str,
    timeout: float | None = None,
) -> str:
    """One line for a failed call: Kafka unreachable (servers, cause, ``hint``) or ``what: error``."""
    kafka_error = error.args[0] if isinstance(error, KafkaException) and error.args else error
    code = kafka_error.code() if isinstance(kafka_error, KafkaError) else None
    text = kafka_error.str() if isinstance(kafka_error, KafkaError) else str(kafka_error)
    with contextlib.suppress(KafkaException, RuntimeError):
        client.poll(0)  # hands over the lines librdkafka queued for the logger
    cause = log.cause()
    if code in _UNREACHABLE_CODES or (code in _TIMEOUT_CODES and cause is not None):
        if cause is None:
            cause = f"no answer within {timeout:g}s" if timeout is not None else text
        security = any(word in cause.lower() for word in ("ssl", "sasl", "authentication", "certificate"))
        extra = " and the security settings" if security else ""
        return f"cannot reach Kafka at {servers} ({cause}): {hint}{extra}"
    return f"{what}: {text}"


def show_librdkafka_log(stream: TextIO | None = None) -> None:
    """Print librdkafka's lines (``LOG`` at DEBUG) on ``stream`` (stderr): the CLI's ``--verbose``."""
    if any(getattr(handler, "_librdkafka", False) for handler in LOG.handlers):
        return
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    handler._librdkafka = True  # type: ignore[attr-defined]
    LOG.addHandler(handler)
    LOG.setLevel(logging.DEBUG)
