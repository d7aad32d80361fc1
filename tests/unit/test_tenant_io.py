"""clients/tenant_io.py: tenants' network calls cannot starve each other (issue 31, point 4).

* a namespace has at most ``per_namespace`` calls in flight; another namespace's calls run meanwhile;
* a failure is remembered per namespace and address: later calls get it at once, with the same
  text, until the back-off (doubling, capped) has passed; a success forgets it; another namespace
  is never held back by it;
* Kafka calls go through it (``clients.kafka``): a remembered failure makes no client at all.
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from connect_offsets.clients import kafka
from connect_offsets.clients.kafka import KafkaAdminError
from connect_offsets.clients.tenant_io import TenantNetwork, address_key
from connect_offsets.errors import TransientError

pytestmark = pytest.mark.unit


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def remember(error: TransientError, backoff: float) -> TransientError:
    return KafkaAdminError(f"{error} (remembered {backoff:.0f} s)")


async def test_a_namespace_has_at_most_its_limit_in_flight_and_others_run_meanwhile() -> None:
    network = TenantNetwork(threads=8, per_namespace=3)
    release = threading.Event()
    running = {"now": 0, "peak": 0}
    lock = threading.Lock()

    def hanging() -> str:
        with lock:
            running["now"] += 1
            running["peak"] = max(running["peak"], running["now"])
        release.wait(5)
        with lock:
            running["now"] -= 1
        return "done"

    calls = [asyncio.create_task(network.run("team-a", f"hole-{i}:9092", hanging, remember)) for i in range(10)]
    await asyncio.sleep(0.2)
    assert running["now"] == 3  # the other seven wait on team-a's own limit, holding no thread
    # team-b is served while team-a's calls hang.
    assert await asyncio.wait_for(network.run("team-b", "k:9092", lambda: "b", remember), 2) == "b"
    release.set()
    assert await asyncio.gather(*calls) == ["done"] * 10
    assert running["peak"] == 3


async def test_a_failure_is_remembered_per_namespace_and_address_with_back_off() -> None:
    clock = Clock()
    network = TenantNetwork(threads=2, per_namespace=2, first_backoff=30, max_backoff=100, clock=clock)
    attempts: list[str] = []

    def failing() -> str:
        attempts.append("x")
        raise KafkaAdminError("list topics on cluster hole:9092: timed out")

    with pytest.raises(KafkaAdminError) as first:
        await network.run("team-a", "hole:9092", failing, remember)
    assert str(first.value) == "list topics on cluster hole:9092: timed out" and len(attempts) == 1
    texts = set()
    for _ in range(5):  # within the back-off: no attempt, the same text every time
        clock.now += 5
        with pytest.raises(KafkaAdminError) as again:
            await network.run("team-a", "hole:9092", failing, remember)
        texts.add(str(again.value))
    assert len(attempts) == 1 and texts == {"list topics on cluster hole:9092: timed out (remembered 30 s)"}
    # Another namespace asking the same address is not held back by team-a's failure.
    assert await network.run("team-b", "hole:9092", lambda: "fine", remember) == "fine"
    clock.now += 6  # 31 s after the failure: one attempt, and the back-off doubles
    with pytest.raises(KafkaAdminError):
        await network.run("team-a", "hole:9092", failing, remember)
    assert len(attempts) == 2
    clock.now += 59
    with pytest.raises(KafkaAdminError, match="remembered 60 s"):
        await network.run("team-a", "hole:9092", failing, remember)
    assert len(attempts) == 2
    for backoff in (60, 100, 100):  # doubling, capped
        clock.now += backoff + 1
        with pytest.raises(KafkaAdminError):
            await network.run("team-a", "hole:9092", failing, remember)
    assert len(attempts) == 5 and network.remembered("team-a", "hole:9092") is not None
    recovered: list[tuple[str, str]] = []
    network.on_recovered = lambda namespace, address: recovered.append((namespace, address))
    clock.now += 101
    assert await network.run("team-a", "hole:9092", lambda: "back", remember) == "back"
    assert network.remembered("team-a", "hole:9092") is None  # a success forgets it
    # ... and wakes the namespace's resources (issue 45), once: later answers are ordinary.
    assert recovered == [("team-a", "hole:9092")]
    assert await network.run("team-a", "hole:9092", lambda: "again", remember) == "again"
    assert recovered == [("team-a", "hole:9092")]


async def test_calls_that_queued_behind_a_failure_fail_without_asking() -> None:
    """Forty mirrors on one unreachable address: the first attempt fails, the ones that waited on
    the namespace's limit meanwhile get its failure instead of trying again."""
    network = TenantNetwork(threads=4, per_namespace=1, clock=Clock())
    attempts: list[int] = []

    def failing() -> str:
        attempts.append(1)
        raise KafkaAdminError("describe cluster hole:9092: no answer")

    results = await asyncio.gather(
        *(network.run("team-a", "hole:9092", failing, remember) for _ in range(40)), return_exceptions=True
    )
    assert all(isinstance(r, KafkaAdminError) for r in results) and len(attempts) == 1


def test_addresses_are_one_spelling() -> None:
    assert address_key(" B:9092,a:9092, ") == address_key("a:9092,b:9092") == "a:9092,b:9092"


async def test_kafka_calls_go_through_the_tenant_network(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    network = TenantNetwork(threads=2, per_namespace=2, clock=clock)
    monkeypatch.setattr(kafka, "tenant_network", lambda: network)
    made: list[dict[str, object]] = []

    class Refusing:
        def __init__(self, settings: dict[str, object]) -> None:
            made.append(settings)

        def list_topics(self, timeout: float) -> None:
            raise kafka.KafkaException("broker down")

    monkeypatch.setattr(kafka, "AdminClient", Refusing)
    config = {"bootstrap.servers": "hole:9092"}
    for _ in range(3):
        with pytest.raises(KafkaAdminError, match="list topics on cluster hole:9092"):
            await kafka.log_offsets(config, lambda _: True, (), namespace="team-a", timeout=1)
    assert len(made) == 1  # remembered: no client for the next two
    settings = made[0]
    assert settings["receive.message.max.bytes"] == kafka.MAX_KAFKA_RESPONSE_BYTES
    assert settings["reconnect.backoff.ms"] == settings["socket.timeout.ms"] == 1000


async def test_an_address_in_doubt_gets_one_attempt_at_a_time_then_calls_run_side_by_side() -> None:
    network = TenantNetwork(threads=8, per_namespace=8)
    running = {"now": 0, "peak": 0}
    lock = threading.Lock()
    gate = threading.Event()

    def answering() -> str:
        with lock:
            running["now"] += 1
            running["peak"] = max(running["peak"], running["now"])
        gate.wait(0.2)
        with lock:
            running["now"] -= 1
        return "ok"

    # Ten at once to an address never asked: the first goes alone, the others wait for its answer.
    first_round = [asyncio.create_task(network.run("team-a", "k:9092", answering, remember)) for _ in range(10)]
    await asyncio.sleep(0.1)
    assert running["now"] == 1
    assert await asyncio.gather(*first_round) == ["ok"] * 10
    # It answered: now they run side by side (up to the namespace's limit).
    running["peak"] = 0
    assert await asyncio.gather(*(network.run("team-a", "k:9092", answering, remember) for _ in range(6))) == ["ok"] * 6
    assert running["peak"] == 6


def test_a_failed_call_releases_its_client_before_it_returns() -> None:
    """The client in a failed call's frames is dropped in the call's own thread (its connection
    closes before the namespace's next call may start), not when the error is."""
    from connect_offsets.clients.tenant_io import _released

    closed: list[str] = []

    class Client:
        def __del__(self) -> None:
            closed.append("closed")

    def failing() -> None:
        client = Client()  # noqa: F841 - held by the frame, as a Kafka client is
        raise KafkaAdminError("timed out")

    with pytest.raises(KafkaAdminError) as caught:
        _released(failing)
    assert closed == ["closed"] and caught.value is not None


async def test_after_a_failure_the_retry_goes_alone_even_for_an_address_that_answered_before() -> None:
    """A broker that answered, then hung: once its back-off has passed, one call tries again and
    the others wait for it, instead of all of them trying at once."""
    clock = Clock()
    network = TenantNetwork(threads=8, per_namespace=8, first_backoff=30, clock=clock)
    assert await network.run("team-a", "k:9092", lambda: "ok", remember) == "ok"
    attempts: list[int] = []

    def hanging_up() -> str:
        attempts.append(1)
        raise KafkaAdminError("list topics on cluster k:9092: timed out")

    with pytest.raises(KafkaAdminError):
        await network.run("team-a", "k:9092", hanging_up, remember)
    clock.now += 31
    results = await asyncio.gather(
        *(network.run("team-a", "k:9092", hanging_up, remember) for _ in range(8)), return_exceptions=True
    )
    assert all(isinstance(r, KafkaAdminError) for r in results) and len(attempts) == 2


async def test_settings_librdkafka_refuses_are_a_kafka_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """SASL_SSL without a mechanism asks for GSSAPI, which this librdkafka lacks: a condition, not a crash."""
    monkeypatch.setattr(kafka, "tenant_network", lambda: TenantNetwork(threads=1, per_namespace=1, clock=Clock()))
    config = {"bootstrap.servers": "k:9093", "security.protocol": "SASL_SSL", "sasl.mechanisms": "NOPE"}
    with pytest.raises(KafkaAdminError, match="client settings for cluster k:9093"):
        await kafka.cluster_id(config, namespace="team-a", timeout=1)
