"""tools/kafka.py: every confluent_kafka client of the tools gets a ``logger`` (no raw librdkafka lines on
stderr), and a Kafka that cannot be reached is one line naming the servers, the cause and what to check.

The clients are fakes that behave as confluent_kafka does with a logger: librdkafka's lines are queued
and handed to the logger in ``poll``. The real thing against 127.0.0.1:1 is
tests/integration/test_tool_errors.py."""

from __future__ import annotations

import ast
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from connect_offsets.tools import cli
from connect_offsets.tools import kafka as tool_kafka
from connect_offsets.tools.offline import store
from connect_offsets.tools.offline.store import PlannedWrite, WorkerStoreError
from connect_offsets.tools.pipeline import preflight
from connect_offsets.tools.pipeline.jobs import KafkaSource, PipelineError

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
REFUSED = (
    "[thrd:127.0.0.1:1/bootstrap]: 127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: "
    "Connection refused (after 0ms in state CONNECT)"
)


class FakeClient:
    """A client that cannot reach its broker: every call fails, the FAIL lines arrive on poll."""

    made: list[tuple[str, dict[str, Any]]] = []

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.queued = [REFUSED, REFUSED]
        FakeClient.made.append((type(self).__name__, config))

    def _fail(self, *args: Any, **kwargs: Any) -> Any:
        raise KafkaException(KafkaError(KafkaError._TRANSPORT))

    list_topics = _fail
    init_transactions = _fail

    def poll(self, timeout: float | None = None) -> None:
        logger = self.config.get("logger")
        for line in self.queued:
            if logger is not None:
                logger.log(logging.ERROR, "%s [%s] %s", "FAIL", "rdkafka#fake-1", line)
        self.queued = []

    def close(self) -> None:
        self.poll(0)

    def abort_transaction(self, timeout: float) -> None:
        self._fail()


class FakeConsumer(FakeClient):
    pass


class FakeProducer(FakeClient):
    pass


@pytest.fixture
def fakes(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, dict[str, Any]]]]:
    FakeClient.made = []
    monkeypatch.setattr(tool_kafka, "Consumer", FakeConsumer)
    monkeypatch.setattr(tool_kafka, "Producer", FakeProducer)
    yield FakeClient.made
    tool_kafka.LOG.handlers = [h for h in tool_kafka.LOG.handlers if not getattr(h, "_librdkafka", False)]
    tool_kafka.LOG.setLevel(logging.NOTSET)


SETTINGS = {"bootstrap.servers": "127.0.0.1:1"}
STORE_LINE = f"cannot reach Kafka at 127.0.0.1:1 (connection refused): {store.UNREACHABLE_HINT}"


@pytest.mark.parametrize(
    ("site", "kind"),
    [
        ("topic_partition_count", "FakeConsumer"),
        ("read_offsets_topic", "FakeConsumer"),
        ("read_config_topic", "FakeConsumer"),
        ("write_transaction", "FakeProducer"),
    ],
)
def test_every_store_client_has_a_logger_and_fails_in_one_line(
    site: str, kind: str, fakes: list[tuple[str, dict[str, Any]]]
) -> None:
    with pytest.raises(WorkerStoreError) as caught:
        if site == "write_transaction":
            store.write_transaction(
                SETTINGS, [PlannedWrite("t", 0, b"k", b"v", "c", "new key")], transactional_id="x", timeout=1
            )
        else:
            getattr(store, site)(SETTINGS, "connect-offsets", timeout=1)
    assert str(caught.value) == STORE_LINE
    assert [made[0] for made in fakes] == [kind]
    assert isinstance(fakes[0][1]["logger"], tool_kafka.LibrdkafkaLog)


def test_the_preflight_client_has_a_logger_and_fails_in_one_line(fakes: list[tuple[str, dict[str, Any]]]) -> None:
    with pytest.raises(PipelineError) as caught:
        preflight.check_topic(KafkaSource("127.0.0.1:1", "connect-offsets"), timeout=1)
    assert str(caught.value) == (
        "cannot reach Kafka at 127.0.0.1:1 (connection refused): check --bootstrap-servers (or SERVERS/ of --topic) "
        "and that the brokers are up"
    )
    assert isinstance(fakes[0][1]["logger"], tool_kafka.LibrdkafkaLog)


def test_no_client_is_built_outside_tools_kafka() -> None:
    """Consumer(...), Producer(...) and AdminClient(...) are called in tools/kafka.py only."""
    offenders = []
    for path in (REPO / "operator" / "src" / "connect_offsets" / "tools").rglob("*.py"):
        if path.name == "kafka.py" and path.parent.name == "tools":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
                if name in ("Consumer", "Producer", "AdminClient"):
                    offenders.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert not offenders, offenders


@pytest.mark.parametrize(
    ("line", "cause"),
    [
        (REFUSED, "connection refused"),
        # librdkafka folds repeats of a line into a count (the clean-clone CI met it under load).
        (
            "[thrd:127.0.0.1:1/bootstrap]: 127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: "
            "Connection refused (after 0ms in state CONNECT, 1 identical error(s) suppressed)",
            "connection refused",
        ),
        (
            "[thrd:nohost:9092/bootstrap]: nohost:9092/bootstrap: Failed to resolve 'nohost:9092': Name or service "
            "not known (after 1ms in state CONNECT)",
            "cannot resolve nohost:9092: Name or service not known",
        ),
        (
            "[thrd:ssl://k:9093/bootstrap]: ssl://k:9093/bootstrap: SSL handshake failed: certificate verify failed "
            "(after 5ms in state SSL_HANDSHAKE)",
            "SSL handshake failed: certificate verify failed",
        ),
    ],
)
def test_cause_of_the_last_failure(line: str, cause: str) -> None:
    log = tool_kafka.LibrdkafkaLog()
    assert log.cause() is None
    log.log(logging.ERROR, "%s [%s] %s", "FAIL", "rdkafka#consumer-1", line)
    assert log.cause() == cause


def test_security_failures_point_at_the_security_settings() -> None:
    client = FakeConsumer({})
    log = tool_kafka.LibrdkafkaLog()
    log.log(logging.ERROR, "%s [%s] %s", "FAIL", "c", "k:9093/bootstrap: SASL authentication error: bad password")
    message = tool_kafka.failure_message(
        client, log, KafkaException(KafkaError(KafkaError._TRANSPORT)), servers="k:9093", what="w", hint="check X"
    )
    assert (
        message
        == "cannot reach Kafka at k:9093 (SASL authentication error: bad password): check X and the security settings"
    )


def test_other_failures_keep_their_own_text() -> None:
    client = FakeConsumer({})
    client.queued = []
    log = tool_kafka.LibrdkafkaLog()
    error = KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED))
    message = tool_kafka.failure_message(client, log, error, servers="k:1", what="topic t", hint="check X")
    assert message.startswith("topic t: ") and "cannot reach" not in message
    # A timeout without any connection failure is not called "unreachable" either.
    timed_out = KafkaException(KafkaError(KafkaError._TIMED_OUT))
    assert tool_kafka.failure_message(client, log, timed_out, servers="k:1", what="w", hint="h").startswith("w: ")
    unreachable = KafkaException(KafkaError(KafkaError._TRANSPORT))
    assert tool_kafka.failure_message(client, log, unreachable, servers="k:1", what="w", hint="h", timeout=3) == (
        "cannot reach Kafka at k:1 (no answer within 3s): h"
    )


def test_librdkafka_lines_stay_quiet_unless_verbose(
    tmp_path: Path, fakes: list[tuple[str, dict[str, Any]]], capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "worker.properties"
    config.write_text(
        "bootstrap.servers=127.0.0.1:1\ngroup.id=g\noffset.storage.topic=o\nconfig.storage.topic=c\n"
        "status.storage.topic=s\n"
    )
    assert cli.main(["export", "-w", str(config), "--timeout", "1"]) == cli.EXIT_FAILED
    assert capsys.readouterr().err.splitlines() == [f"connect-offsets: error: {STORE_LINE}"]
    assert cli.main(["export", "-w", str(config), "--timeout", "1", "-v"]) == cli.EXIT_FAILED
    err = capsys.readouterr().err
    assert "librdkafka ERROR: FAIL [rdkafka#fake-1] [thrd:127.0.0.1:1/bootstrap]" in err
    assert f"connect-offsets: error: {STORE_LINE}" in err
