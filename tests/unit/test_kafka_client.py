"""clients/kafka.py: Java client settings mapped to librdkafka's names, credentials from JAAS."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from connect_offsets.clients.kafka import ClusterIdCache, KafkaAdminError, librdkafka_config

pytestmark = pytest.mark.unit


def test_plain_cluster() -> None:
    assert librdkafka_config("a:9092", {}) == {"bootstrap.servers": "a:9092"}


def test_scram_jaas_credentials_and_renamed_keys() -> None:
    jaas = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="mm2" password="s3cret";'
    config = librdkafka_config(
        "a:9092",
        {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": jaas},
    )
    assert config == {
        "bootstrap.servers": "a:9092",
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": "mm2",
        "sasl.password": "s3cret",
    }


def test_java_only_settings_are_dropped() -> None:
    config = librdkafka_config("a:9092", {"ssl.truststore.location": "/x/truststore.jks", "linger.ms": "5"})
    assert config == {"bootstrap.servers": "a:9092"}
    assert librdkafka_config("a:9092", {"ssl.truststore.location": "/x/ca.pem"})["ssl.ca.location"] == "/x/ca.pem"


class Probe:
    """A cluster-id probe that answers from a script: an id, or an error to raise."""

    def __init__(self, *answers: str | Exception) -> None:
        self.answers = list(answers)
        self.calls = 0

    async def __call__(self, config: dict[str, Any], namespace: str) -> str:
        self.calls += 1
        await asyncio.sleep(0)  # concurrent askers arrive while it is in flight
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_cluster_ids_are_kept_for_the_ttl_per_settings() -> None:
    probe, clock = Probe("id-a", "id-b", "id-a2"), Clock()
    cache = ClusterIdCache(ttl=300, probe=probe, clock=clock)
    a, b = {"bootstrap.servers": "a:9092"}, {"bootstrap.servers": "b:9092"}
    assert asyncio.run(cache.get(a, namespace="ns")) == "id-a"
    assert asyncio.run(cache.get(b, namespace="ns")) == "id-b"
    clock.now += 299
    assert asyncio.run(cache.get(dict(a), namespace="ns")) == "id-a" and probe.calls == 2
    clock.now += 2  # past the ttl: a re-pointed address is seen
    assert asyncio.run(cache.get(a, namespace="ns")) == "id-a2" and probe.calls == 3


def test_a_failed_probe_is_not_kept_by_the_id_cache() -> None:
    """Failures are remembered by the tenant pool per namespace and address (test_tenant_io), not here."""
    probe = Probe(KafkaAdminError("describe cluster a:9092: no answer within 10 s"), "id-a")
    cache = ClusterIdCache(probe=probe, clock=Clock())
    with pytest.raises(KafkaAdminError, match="no answer"):
        asyncio.run(cache.get({"bootstrap.servers": "a:9092"}, namespace="ns"))
    assert asyncio.run(cache.get({"bootstrap.servers": "a:9092"}, namespace="ns")) == "id-a"
    assert probe.calls == 2


def test_different_credentials_are_different_entries() -> None:
    probe = Probe("id-1", "id-2")
    cache = ClusterIdCache(probe=probe, clock=Clock())
    asyncio.run(cache.get({"bootstrap.servers": "a:9092", "sasl.username": "x"}, namespace="ns"))
    asyncio.run(cache.get({"bootstrap.servers": "a:9092", "sasl.username": "y"}, namespace="ns"))
    assert probe.calls == 2


def test_concurrent_asks_for_the_same_settings_wait_for_one_probe() -> None:
    """A resource's mirrors share clusters: forty asks at once are one DescribeCluster per namespace."""
    probe = Probe("id-a", "id-a-for-b")
    cache = ClusterIdCache(probe=probe, clock=Clock())
    config = {"bootstrap.servers": "a:9092"}

    async def many() -> list[str]:
        return list(
            await asyncio.gather(
                *(cache.get(dict(config), namespace="ns-a") for _ in range(40)),
            )
        )

    assert asyncio.run(many()) == ["id-a"] * 40 and probe.calls == 1


def test_concurrent_asks_share_a_failure_too() -> None:
    probe = Probe(KafkaAdminError("describe cluster a:9092: no answer within 10 s"))
    cache = ClusterIdCache(probe=probe, clock=Clock())

    async def many() -> list[BaseException | str]:
        config = {"bootstrap.servers": "a:9092"}
        return list(
            await asyncio.gather(*(cache.get(config, namespace="ns") for _ in range(5)), return_exceptions=True)
        )

    results = asyncio.run(many())
    assert all(isinstance(r, KafkaAdminError) for r in results) and probe.calls == 1
