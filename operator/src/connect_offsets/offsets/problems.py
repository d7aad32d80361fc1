"""Problems found in an offsets document, and the checks that find them.

Why a module of its own: parsing (``document``) and the per-connector checks (``validate``) both
report into one ``ProblemList``, so every problem of a document is collected in one pass with a
path (``offsets[3].partition.kafka_partition``) and a message saying what was expected; a user
fixes a ConfigMap in one round trip.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NoReturn

from connect_offsets.errors import UserError

#: A JSON scalar, the only values Connect accepts inside a partition or an offset map.
Primitive = str | int | float | bool | None


#: Problems shown in a message (a condition, the plugin's error); the rest are counted ("... and N more").
MAX_LISTED_PROBLEMS = 10

#: Problems kept in one ``ProblemList``; past it they are only counted. A million bad entries are
#: still checked to the end (so the count is true) without holding a million messages.
MAX_KEPT_PROBLEMS = 200

#: Longest rendering of a found value inside a message; ConfigMaps can hold large values.
MAX_SHOWN_VALUE = 80


@dataclass(frozen=True)
class OffsetsProblem:
    """One problem in an offsets document: where (``path``) and what (``message``)."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class OffsetsValidationError(UserError, ValueError):
    """An offsets document is invalid; ``problems`` lists every problem found (up to
    ``MAX_KEPT_PROBLEMS``), ``count`` says how many there were in all."""

    def __init__(self, problems: Iterable[OffsetsProblem], *, uncounted: int = 0) -> None:
        self.problems: list[OffsetsProblem] = list(problems)
        #: Every problem found, also those not kept.
        self.count = len(self.problems) + uncounted
        super().__init__(self._render())

    def _render(self) -> str:
        if not self.problems:
            return "invalid offsets document"
        lines = [str(p) for p in self.problems[:MAX_LISTED_PROBLEMS]]
        hidden = self.count - min(len(self.problems), MAX_LISTED_PROBLEMS)
        if hidden > 0:
            lines.append(f"... and {hidden} more")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self._render()


class ProblemList:
    """Accumulates problems in the order they are found; raises them all at once.

    Keeps the first ``MAX_KEPT_PROBLEMS`` and counts the rest, so checking a huge document to the
    end costs no more memory than checking a small one.
    """

    def __init__(self) -> None:
        self.items: list[OffsetsProblem] = []
        self.uncounted = 0  # problems found beyond MAX_KEPT_PROBLEMS: counted, not kept

    def __len__(self) -> int:
        return len(self.items) + self.uncounted

    def add(self, path: str, message: str) -> None:
        if len(self.items) < MAX_KEPT_PROBLEMS:
            self.items.append(OffsetsProblem(path, message))
        else:
            self.uncounted += 1

    def error(self) -> OffsetsValidationError:
        return OffsetsValidationError(self.items, uncounted=self.uncounted)

    def raise_if_any(self) -> None:
        if len(self):
            raise self.error()

    def fail(self, path: str, message: str) -> NoReturn:
        """Add a problem after which nothing more can be checked, and raise everything so far."""
        self.add(path, message)
        raise self.error()


# --------------------------------------------------------------------------- documents


def type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, dict):
        return "object"
    return f"Python {type(value).__name__}"


def describe_value(value: object) -> str:
    """``"abc" (string)``, ``3 (integer)``, ``null``, ``{"a": 1} (object)``: what was found."""
    if value is None:
        return "null"
    try:
        shown = json.dumps(value, ensure_ascii=False, allow_nan=True)
    except (TypeError, ValueError, RecursionError):
        shown = repr(value)
    if len(shown) > MAX_SHOWN_VALUE:
        shown = shown[: MAX_SHOWN_VALUE - 3] + "..."
    return f"{shown} ({type_name(value)})"


def quote_all(names: Iterable[str]) -> str:
    return ", ".join(json.dumps(n, ensure_ascii=False) for n in names)


def child_path(path: str, key: str) -> str:
    """``offsets[0].partition`` + ``kafka_topic``; keys that are not identifiers get brackets."""
    if key.isidentifier():
        return f"{path}.{key}"
    return f"{path}[{json.dumps(key, ensure_ascii=False)}]"


def is_primitive(value: object) -> bool:
    if value is None or isinstance(value, str | bool | int):
        return True
    return isinstance(value, float) and math.isfinite(value)


def is_non_negative_int(value: object) -> bool:
    # bool is a subclass of int; true/false are not offsets.
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


# --------------------------------------------------------------------------- generic parsing


def check_keys(
    mapping: Mapping[str, Primitive], expected: tuple[str, ...], path: str, what: str, problems: ProblemList
) -> bool:
    """Exactly ``expected`` keys; one problem naming the missing and the unexpected ones."""
    missing = [k for k in expected if k not in mapping]
    extra = [k for k in mapping if k not in expected]
    if not missing and not extra:
        return True
    found = []
    if missing:
        found.append(f"missing {quote_all(missing)}")
    if extra:
        found.append(f"unexpected {quote_all(extra)}")
    problems.add(path, f"{what} must contain exactly the keys {quote_all(expected)}; {', '.join(found)}")
    return False


def check_non_negative_int(value: Primitive, path: str, problems: ProblemList, hint: str = "") -> None:
    if not is_non_negative_int(value):
        problems.add(path, f"expected an integer >= 0, got {describe_value(value)}{hint}")


def check_string(value: Primitive, path: str, problems: ProblemList, *, non_empty: bool = False) -> bool:
    if not isinstance(value, str) or (non_empty and not value):
        kind = "a non-empty string" if non_empty else "a string"
        problems.add(path, f"expected {kind}, got {describe_value(value)}")
        return False
    return True
