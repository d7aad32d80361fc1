"""Tenants' regular expressions: linear-time full matches (RE2), refusals that name field and reason.

The hostile pattern of issue 18 (``(a+)+`` against 40 ``a`` and a ``!``) never finishes with a
backtracking engine; here every call below returns at once, so the test's own 300 s timeout is the
guard (no timing assertion).
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from connect_offsets import metrics
from connect_offsets.models.java_regex import MAX_PATTERN_LENGTH, PatternRefused, compile_java
from connect_offsets.offsets import OffsetsValidationError, parse_offsets_document, validate_sink
from connect_offsets.planning.mirror_topics import mirrored_topic_filter

pytestmark = pytest.mark.unit

HOSTILE_TOPIC = "a" * 40 + "!"


def test_a_catastrophic_pattern_is_matched_in_linear_time() -> None:
    pattern = compile_java("(a+)+", "config[topics.regex]")
    assert not pattern.full_match(HOSTILE_TOPIC * 1000)
    assert pattern.full_match("a" * 100_000)


@pytest.mark.parametrize(
    ("pattern", "topic", "expected"),
    [
        ("orders.*", "orders-eu", True),
        ("orders", "orders-eu", False),  # Java's matches(): the whole topic, not a prefix
        ("orders|payments", "payments", True),
        ("orders|payments", "xpayments", False),  # the alternation is anchored as a whole
        (".*", "a\nb", False),  # '.' does not match a line terminator, as in Java
        (r"\p{L}+\d", "topic1", True),
    ],
)
def test_full_match_as_java_matches(pattern: str, topic: str, expected: bool) -> None:
    assert compile_java(pattern, "f").full_match(topic) is expected


@pytest.mark.parametrize(
    ("pattern", "why"),
    [
        (r"(a)\1", "invalid escape sequence"),  # back-reference
        (r"a(?=b)", "invalid perl operator"),  # lookahead
        ("a++", "bad repetition operator"),  # possessive quantifier
        ("(unclosed", "missing )"),
    ],
)
def test_patterns_re2_cannot_evaluate_are_refused_with_the_field_and_reason(pattern: str, why: str) -> None:
    with pytest.raises(PatternRefused) as refused:
        compile_java(pattern, "config[topics.regex]")
    message = str(refused.value)
    assert message.startswith(f"config[topics.regex]: the pattern {pattern!r} cannot be evaluated in linear time")
    assert why in message and refused.value.why.startswith(why)


def test_an_overlong_pattern_is_refused_before_compiling() -> None:
    with pytest.raises(PatternRefused, match=f"more than {MAX_PATTERN_LENGTH}"):
        compile_java("a" * (MAX_PATTERN_LENGTH + 1), "topics")


def test_sink_validation_with_a_hostile_regex_finishes_and_refuses_the_foreign_topic() -> None:
    entry = {"partition": {"kafka_topic": HOSTILE_TOPIC, "kafka_partition": 0}, "offset": {"kafka_offset": 1}}
    doc = parse_offsets_document(json.dumps({"offsets": [entry]}))
    with pytest.raises(OffsetsValidationError) as refused:
        validate_sink(doc, topics=None, topics_regex="(a+)+")
    assert "is not consumed by this connector" in str(refused.value)


def test_sink_validation_refuses_a_pattern_it_cannot_check() -> None:
    doc = parse_offsets_document(
        '{"offsets":[{"partition":{"kafka_topic":"t","kafka_partition":0},"offset":{"kafka_offset":1}}]}'
    )
    with pytest.raises(OffsetsValidationError) as refused:
        validate_sink(doc, topics=None, topics_regex="(t)\\1")
    assert "config[topics.regex]" in str(refused.value) and "back-references" in str(refused.value)


def test_mirror_topic_filters_use_the_linear_engine() -> None:
    accepts = mirrored_topic_filter({"target.cluster.alias": "west", "topics": "(a+)+, orders"})
    assert accepts is not None
    assert not accepts(HOSTILE_TOPIC) and accepts("orders") and accepts("a" * 200)
    with pytest.raises(ValueError, match="topics: the pattern"):
        mirrored_topic_filter({"topics": "(x)\\1"})


async def test_event_loop_lag_is_measured() -> None:
    probe = asyncio.create_task(metrics.measure_event_loop_lag(interval=0.01, window=5))
    await asyncio.sleep(0.05)
    blocked_for = 0.3
    time.sleep(blocked_for)  # a stall of the loop, as CPU work on it would cause
    await asyncio.sleep(0.05)
    probe.cancel()
    assert metrics.EVENT_LOOP_LAG._value.get() >= blocked_for * 0.9
    assert metrics.REGISTRY.get_sample_value("connect_offsets_event_loop_lag_probe_seconds_count") >= 3
