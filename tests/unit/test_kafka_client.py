"""clients/kafka.py: Java client settings mapped to librdkafka's names, credentials from JAAS."""

from __future__ import annotations

import pytest

from connect_offsets.clients.kafka import librdkafka_config

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
