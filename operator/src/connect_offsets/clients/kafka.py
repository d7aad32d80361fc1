"""Direct Kafka access, used only where Connect's REST API cannot help.

Today that is MirrorMaker 2's full reset: its ``mm2-offset-syncs.<alias>.internal`` topic lives
in Kafka, not behind Connect. confluent-kafka's AdminClient is synchronous (futures), so calls run
in a thread. Java client settings from a resource are mapped to librdkafka's names; settings
librdkafka does not know are dropped rather than passed (it rejects unknown keys).
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

__all__ = ["KafkaAdminError", "delete_topic", "librdkafka_config"]

#: Java client settings with the same meaning (and name) in librdkafka.
_SAME = {
    "security.protocol",
    "ssl.endpoint.identification.algorithm",
    "client.id",
}
_RENAMED = {
    "sasl.mechanism": "sasl.mechanisms",
}
_JAAS_USER = re.compile(r'username\s*=\s*"([^"]*)"')
_JAAS_PASSWORD = re.compile(r'password\s*=\s*"([^"]*)"')


class KafkaAdminError(Exception):
    """A Kafka admin call failed; the message has the operation and Kafka's error (no credentials)."""


def librdkafka_config(bootstrap_servers: str, java_config: dict[str, str]) -> dict[str, Any]:
    """Admin-client settings from a cluster's Java-style settings (PLAIN/SCRAM JAAS credentials included)."""
    config: dict[str, Any] = {"bootstrap.servers": bootstrap_servers}
    for key, value in java_config.items():
        if key in _SAME:
            config[key] = value
        elif key in _RENAMED:
            config[_RENAMED[key]] = value
        elif key == "sasl.jaas.config":
            user, password = _JAAS_USER.search(value), _JAAS_PASSWORD.search(value)
            if user and password:
                config["sasl.username"], config["sasl.password"] = user.group(1), password.group(1)
        elif key == "ssl.truststore.location" and value.endswith((".pem", ".crt")):
            config["ssl.ca.location"] = value
    return config


async def delete_topic(config: dict[str, Any], topic: str, *, timeout: float = 30.0) -> bool:
    """Delete a topic. Returns False if it did not exist (nothing to do), True if deleted."""

    def run() -> bool:
        admin = AdminClient(config)
        futures = admin.delete_topics([topic], operation_timeout=timeout, request_timeout=timeout)
        try:
            futures[topic].result(timeout=timeout + 5)
        except KafkaException as error:
            kafka_error = error.args[0] if error.args else None
            if isinstance(kafka_error, KafkaError) and kafka_error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                return False
            raise KafkaAdminError(f"delete topic {topic}: {kafka_error}") from error
        except Exception as error:  # timeouts surface as concurrent.futures errors
            raise KafkaAdminError(f"delete topic {topic}: {type(error).__name__}: {error}") from error
        return True

    return await asyncio.to_thread(run)
