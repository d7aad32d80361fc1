"""Config provider references (``${provider:[path:]key}``) found exactly as Kafka's ConfigTransformer finds them.

Why exact: the Connect worker resolves every reference its ``ConfigTransformer`` pattern finds in a
connector's config values, through whatever config providers the workers have (a file, the
environment, Kubernetes Secrets). A policy that reads references another way (only the first of a
value, or a stricter pattern) misses the ones Connect resolves, and a tenant reads what the
workers can read. So this module keeps Kafka's pattern and its matching rules, and nothing else:

* the pattern is Kafka's ``DEFAULT_PATTERN``, ``\\$\\{([^}]*?):(([^}]*?):)?([^}]*?)\\}`` (since
  before 3.6, the oldest Connect the operator supports; checked against the jars of the version
  matrix): the provider is everything up to the first ``:``, the optional path everything up to
  the next ``:``, the key everything up to the first ``}``; none of them holds a ``}``, but each
  may hold ``${``, whitespace and line terminators (a negated class matches those in Java);
* ``Matcher.find`` in a loop: every match, left to right, the next search starting where the last
  match ended;
* no escaping: Kafka has none, so ``$${a:b}`` is a reference too.

Why RE2 and not ``re``: both give Java's (leftmost, lazy-first) matches, but three lazy groups
backtrack in time polynomial in the value's length with ``re`` (``${a:`` repeated, no ``}``), and a
tenant writes the value. RE2 finds the same matches in linear time (checked against ``re``, and
against Kafka's own ConfigTransformer in a JVM: ``tests/integration/test_config_transformer.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import re2

__all__ = ["ConfigReference", "config_references"]

#: Kafka's ConfigTransformer.DEFAULT_PATTERN.
_PATTERN: Final = re2.compile(r"\$\{([^}]*?):(([^}]*?):)?([^}]*?)\}")


@dataclass(frozen=True)
class ConfigReference:
    """One reference as Connect reads it: the provider's name, the path (``""`` when the reference
    has none, Kafka's ``EMPTY_PATH``), the key, and the reference's text in the value."""

    provider: str
    path: str
    key: str
    text: str


def config_references(value: str) -> list[ConfigReference]:
    """Every reference Connect's ConfigTransformer finds in ``value``, in order."""
    if "${" not in value:  # the common case, without the engine
        return []
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate (RE2 reads UTF-8): it is no ``$``, ``{``, ``:`` or ``}``, so as "?" it
        # changes no match, only how its text is shown.
        value = value.encode("utf-8", "replace").decode("utf-8")
    return [
        ConfigReference(match.group(1), match.group(3) or "", match.group(4), match.group(0))
        for match in _PATTERN.finditer(value)
    ]
