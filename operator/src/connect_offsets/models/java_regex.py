"""Regular expressions that tenants write (Connect's ``topics.regex``, MirrorMaker 2's topic lists).

Why not ``re``: Java's and Python's engines both backtrack, so ``(a+)+`` against ``aaaa…!`` takes
exponential time, and in Python the match holds the GIL: one tenant's pattern would freeze the
operator for every other tenant (its health endpoint too). RE2 (``google-re2``) matches in time
linear in the text, whatever the pattern, with bounded memory.

Semantics kept from Java: Connect and MirrorMaker 2 test a topic with
``Pattern.matcher(topic).matches()``, a full match, and so does ``JavaPattern.full_match``; ``.``
does not match line terminators in either. What RE2 cannot evaluate in linear time (back-references,
lookaround, possessive quantifiers, atomic groups) or does not know (some Java-only classes such as
``\\p{javaLowerCase}``) is refused with RE2's reason, never approximated: a pattern we cannot evaluate
exactly as Connect does must not decide which offsets are accepted.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Final

import re2

from connect_offsets.errors import UserError

__all__ = ["MAX_PATTERN_LENGTH", "JavaPattern", "PatternRefused", "compile_java"]

#: A topic pattern longer than this is refused before it is compiled (compile time and memory
#: grow with the pattern; Kafka topic names are at most 249 characters).
MAX_PATTERN_LENGTH: Final = 4096
#: RE2's memory budget for one compiled pattern (its default, 8 MiB, stated so it is visible).
_MAX_MEMORY: Final = 8 << 20


class PatternRefused(UserError, ValueError):
    """A tenant's pattern that cannot be evaluated safely; the message names the field and why."""

    def __init__(self, field: str, pattern: str, why: str) -> None:
        shown = pattern if len(pattern) <= 200 else pattern[:200] + "…"
        #: The message without the field, for reports that name the field themselves.
        self.detail = (
            f"the pattern {shown!r} cannot be evaluated in linear time ({why}); "
            "the operator matches tenants' regular expressions with RE2, which has no "
            "back-references, lookaround, possessive quantifiers or atomic groups"
        )
        super().__init__(f"{field}: {self.detail}")
        self.field = field
        self.pattern = pattern
        self.why = why


@dataclass(frozen=True)
class JavaPattern:
    """A compiled tenant pattern; ``full_match`` is Java's ``matcher(text).matches()``."""

    source: str
    _compiled: Any

    def full_match(self, text: str) -> bool:
        return self._compiled.fullmatch(text) is not None


def _options() -> Any:
    options = re2.Options()
    options.log_errors = False  # a refused pattern is reported to its author, not logged by C++
    options.max_mem = _MAX_MEMORY
    return options


@functools.lru_cache(maxsize=512)
def _compile(pattern: str) -> Any:
    return re2.compile(pattern, options=_options())


def compile_java(pattern: str, field: str) -> JavaPattern:
    """Compile ``pattern`` (Java syntax) for linear-time full matches, or raise ``PatternRefused``.

    ``field`` names where the pattern came from (``config["topics.regex"]``), for the message.
    Compiled patterns are cached: every reconcile of a connector asks for the same one.
    """
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise PatternRefused(field, pattern, f"{len(pattern)} characters, more than {MAX_PATTERN_LENGTH}")
    try:
        return JavaPattern(pattern, _compile(pattern))
    except re2.error as error:
        reason = error.args[0] if error.args else error
        why = reason.decode(errors="replace") if isinstance(reason, bytes) else str(reason)
        raise PatternRefused(field, pattern, why) from None
