"""Config provider references found as Kafka's ConfigTransformer finds them (issue 43, point 1).

The first cases are Kafka's own ``ConfigTransformerTest`` (which references a value holds; what the
transformer asks its providers for); then the matcher's rules that a policy reading references
another way would miss: every match, no ``}`` inside a reference but ``${`` and line terminators
allowed, no escaping. Last, the RE2 matcher against Python's backtracking ``re`` (Java's
semantics for this pattern) on generated values. The same cases against Kafka's own class, in a
JVM: ``tests/integration/test_config_transformer.py``.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connect_offsets.models.config_references import ConfigReference, config_references

pytestmark = pytest.mark.unit


def found(value: str) -> list[tuple[str, str, str]]:
    return [(r.provider, r.path, r.key) for r in config_references(value)]


# --- Kafka's ConfigTransformerTest ----------------------------------------------------------------


def test_replace_variable() -> None:
    assert config_references("${test:testPath:testKey}") == [
        ConfigReference("test", "testPath", "testKey", "${test:testPath:testKey}")
    ]


def test_replace_multiple_variables_in_value() -> None:
    value = "hello, ${test:testPath:testKey}; goodbye, ${test:testPath:testKeyWithTTL}!!!"
    assert found(value) == [("test", "testPath", "testKey"), ("test", "testPath", "testKeyWithTTL")]


def test_no_replacement_still_a_reference() -> None:
    # The transformer leaves a missing key as it was, but it did ask the provider for it.
    assert found("${test:testPath:missingKey}") == [("test", "testPath", "missingKey")]


def test_single_level_of_indirection() -> None:
    # A provider's answer is not transformed again: only the value's own reference counts.
    assert found("${test:testPath:testIndirection}") == [("test", "testPath", "testIndirection")]


def test_no_path_is_the_empty_path() -> None:
    assert found("${env:HOME}") == [("env", "", "HOME")]
    assert found("${a::b}") == [("a", "", "b")]


# --- the matcher's rules ------------------------------------------------------------------------


def test_every_reference_of_a_value() -> None:
    assert found("${nope:x:y}${secrets:other-ns/db:password}") == [
        ("nope", "x", "y"),
        ("secrets", "other-ns/db", "password"),
    ]


def test_the_second_reference_counts_as_much_as_the_first() -> None:
    # The value: Connect resolves the second reference whatever the first is.
    assert found("${nope:x}${secrets:other-ns/db:password}") == [
        ("nope", "", "x"),
        ("secrets", "other-ns/db", "password"),
    ]
    assert found("${a:b}" * 3) == [("a", "", "b")] * 3
    # No part holds a "}": "${USD}" is text, the reference after it is one.
    assert found("${USD} at ${time:now}") == [("time", "", "now")]
    # A part may hold "${": the outer reference is the one Connect reads.
    assert found("${secrets:${x:y}}") == [("secrets", "${x", "y")]


def test_not_references() -> None:
    for value in ("price ${USD}", "${", "${}", "{a:b}", "$ {a:b}", "\uff04\uff5bsecrets:a:b\uff5d", "plain"):
        assert found(value) == [], value


def test_a_lone_surrogate_is_text() -> None:
    assert found("${a\ud800:b}") == [("a?", "", "b")]


def test_no_escaping() -> None:
    assert found("$${secrets:other/db:pw}") == [("secrets", "other/db", "pw")]
    assert found("\\${secrets:other/db:pw}") == [("secrets", "other/db", "pw")]


@pytest.mark.parametrize("terminator", ["\n", "\r", "\u0085", "\u2028", "\u2029"])
def test_a_reference_may_span_a_line_terminator(terminator: str) -> None:
    """Kafka's pattern is made of negated classes, which match line terminators in Java too."""
    assert found(f"${{a:b{terminator}c}}") == [("a", "", f"b{terminator}c")]
    assert found(f"${{a{terminator}:b}}") == [(f"a{terminator}", "", "b")]


def test_a_long_hostile_value_is_scanned_in_linear_time() -> None:
    """Three lazy groups backtrack polynomially in ``re``: RE2 must not. Completing is the assertion
    (timings live in bench/); ``re`` on the same value takes minutes."""
    value = "${a:" * 50_000 + ":" * 50_000
    assert found(value) == []
    assert len(found("${a:b:c}" * 20_000)) == 20_000


# --- RE2 against a backtracking engine ------------------------------------------------------------

_BACKTRACKING = re.compile(r"\$\{([^}]*?):(([^}]*?):)?([^}]*?)\}")


@settings(max_examples=400, deadline=None, derandomize=True)
@given(st.text(alphabet="${}:/ab\n\u2028 ", max_size=40))
def test_re2_finds_what_a_backtracking_engine_finds(value: str) -> None:
    expected = [(m.group(1), m.group(3) or "", m.group(4)) for m in _BACKTRACKING.finditer(value)]
    assert found(value) == expected
