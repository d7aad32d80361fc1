"""Check the Kafka sources before Spark touches them.

Why: Spark's Kafka source reports an unreachable broker only after its admin timeout, as a long JVM
stack trace, and a topic that does not exist reads as empty (or, with broker-side auto-creation, gets
created). A metadata request with confluent-kafka answers both questions in seconds with a message
that names the topic and the servers, and the watermarks give the record count that the progress
output shows.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from connect_offsets.tools import kafka
from connect_offsets.tools.pipeline.jobs import KafkaSource, PipelineError

#: What to check when a source's Kafka cannot be reached.
UNREACHABLE_HINT = "check --bootstrap-servers (or SERVERS/ of --topic) and that the brokers are up"


@dataclass(frozen=True)
class TopicExtent:
    topic: str
    partitions: int
    records: int  # sum of (high - low) watermarks: an upper bound of what a read returns


def _consumer_settings(source: KafkaSource) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "bootstrap.servers": source.bootstrap_servers,
        "group.id": f"connect-offsets-pipeline-{uuid.uuid4().hex[:12]}",  # never joins, never commits
        "enable.auto.commit": False,
        "isolation.level": source.isolation_level,
    }
    for key, value in source.options.items():
        name = key.removeprefix("kafka.")
        # Java client settings librdkafka does not know (e.g. sasl.jaas.config) only matter to Spark.
        if name not in ("sasl.jaas.config", "ssl.truststore.location", "ssl.truststore.password"):
            settings[name] = value
    return settings


def check_topic(source: KafkaSource, timeout: float = 15.0) -> TopicExtent:
    """The topic's partition count and record count; PipelineError if Kafka or the topic is missing."""
    log = kafka.LibrdkafkaLog()
    try:
        consumer = kafka.consumer(_consumer_settings(source), log)
    except KafkaException as error:
        raise PipelineError(f"Kafka settings for {source.describe()} rejected: {error.args[0]}") from None

    def failure(error: KafkaException, what: str) -> PipelineError:
        message = kafka.failure_message(
            consumer,
            log,
            error,
            servers=source.bootstrap_servers,
            what=what,
            hint=UNREACHABLE_HINT,
            timeout=timeout,
        )
        return PipelineError(message)

    try:
        try:
            metadata = consumer.list_topics(source.topic, timeout=timeout)
        except KafkaException as error:
            raise failure(error, f"Kafka at {source.bootstrap_servers}: no metadata for {source.topic}") from None
        described = metadata.topics.get(source.topic)
        if described is None or described.error is not None:
            code = described.error.code() if described is not None and described.error is not None else None
            if code in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC) or described is None:
                raise PipelineError(
                    f"topic {source.topic} does not exist on Kafka at {source.bootstrap_servers} "
                    "(the worker's offset.storage.topic, or the connector's offsets.storage.topic?)"
                )
            raise PipelineError(f"topic {source.topic} at {source.bootstrap_servers} cannot be read: {described.error}")
        records = 0
        for partition in described.partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(source.topic, partition), timeout=timeout)
            records += max(0, high - low)
        return TopicExtent(source.topic, len(described.partitions), records)
    except KafkaException as error:
        raise failure(error, f"topic {source.describe()}") from None
    finally:
        consumer.close()
