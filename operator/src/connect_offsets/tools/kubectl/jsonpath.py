"""``-o jsonpath=TEMPLATE``: kubectl's JSONPath templates (https://kubernetes.io/docs/reference/kubectl/jsonpath/),
evaluated on the document ``-o json`` prints.

What kubectl's templates use: text outside braces printed as it is; ``{.a.b}``, ``{.a['b.c']}``,
``{.list[0]}``, ``{.list[-1]}``, ``{.list[1:3]}``, ``{.list[*]}``, ``{.map.*}``, ``{..name}`` (recursive),
``{.list[0,2]}`` / ``{['a','b']}`` (unions), ``{.list[?(@.result=="Failed")]}`` (filters: ``==``, ``!=``,
``<``, ``<=``, ``>``, ``>=``, or a bare ``@.field`` for "has it"), ``{range .list[*]}...{end}``, string
literals ``{"\\n"}``, and ``$`` / ``@`` for the root / the current element. As kubectl's printer does, a
missing key prints nothing (no error); several results of one expression are joined by spaces;
strings are printed raw, anything else as compact JSON. A template without braces is taken as one
expression (``-o jsonpath=.result``).

Pure and self-contained (the standard library and the package's error root): the plugin checks a template
when it reads the command line, before anything is written.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Union

from connect_offsets.errors import ConnectOffsetsError

__all__ = ["JsonPathError", "Template", "compile_template", "render"]


class JsonPathError(ConnectOffsetsError, ValueError):
    """The template cannot be parsed (its position and what was expected)."""


# --- the syntax tree -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Field:
    name: str


@dataclass(frozen=True)
class Wildcard:
    pass


@dataclass(frozen=True)
class Index:
    index: int


@dataclass(frozen=True)
class Slice:
    start: int | None
    stop: int | None
    step: int | None


@dataclass(frozen=True)
class Union_:
    members: tuple[int | str, ...]


@dataclass(frozen=True)
class Filter:
    left: Path | Literal
    op: str | None  # None: "the left path exists"
    right: Path | Literal | None


@dataclass(frozen=True)
class Recursive:
    then: Step


@dataclass(frozen=True)
class Path:
    root: str  # "$" (the document) or "@" (the current element)
    steps: tuple[Step, ...]


@dataclass(frozen=True)
class Literal:
    value: Any


Step = Union[Field, Wildcard, Index, Slice, Union_, Filter, Recursive]  # noqa: UP007 (a runtime alias)


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class Expression:
    value: Path | Literal


@dataclass(frozen=True)
class Range:
    over: Path
    body: tuple[Node, ...]


Node = Union[Text, Expression, Range]  # noqa: UP007


@dataclass(frozen=True)
class Template:
    source: str
    nodes: tuple[Node, ...]


# --- parsing ---------------------------------------------------------------------------------------

_NAME = re.compile(r"[^.\[\]\s(),=!<>'\"{}]+")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_INT = re.compile(r"-?\d+")


def _actions(source: str) -> Iterator[tuple[bool, str, int]]:
    """(is an action, text, position): the template split into literal text and ``{...}`` actions."""
    position = 0
    while position < len(source):
        start = source.find("{", position)
        if start < 0:
            yield False, source[position:], position
            return
        if start > position:
            yield False, source[position:start], position
        end, quote = start + 1, ""
        while end < len(source):
            char = source[end]
            if quote:
                if char == "\\":
                    end += 1
                elif char == quote:
                    quote = ""
            elif char in "'\"":
                quote = char
            elif char == "}":
                break
            end += 1
        if end >= len(source):
            raise JsonPathError(f"unclosed action at position {start}: {source[start:][:40]!r}")
        yield True, source[start + 1 : end].strip(), start
        position = end + 1


def compile_template(source: str) -> Template:
    """Parse a template; raises JsonPathError."""
    text = source if "{" in source else "{" + source + "}"
    stack: list[tuple[Path | None, list[Node]]] = [(None, [])]
    for is_action, part, position in _actions(text):
        if not is_action:
            stack[-1][1].append(Text(part))
            continue
        if not part:
            raise JsonPathError(f"empty action {{}} at position {position}")
        if part == "end":
            if len(stack) == 1:
                raise JsonPathError(f"{{end}} at position {position} without a {{range}}")
            over, body = stack.pop()
            assert over is not None
            stack[-1][1].append(Range(over, tuple(body)))
            continue
        if part.startswith("range ") or part == "range":
            stack.append((_parse_path(part[len("range") :].strip(), position), []))
            continue
        if part[0] in "'\"":
            stack[-1][1].append(Expression(_Parser(part, position).literal_only()))
            continue
        stack[-1][1].append(Expression(_parse_path(part, position)))
    if len(stack) > 1:
        raise JsonPathError("{range} without its {end}")
    return Template(source, tuple(stack[0][1]))


def _parse_path(text: str, position: int) -> Path:
    if not text:
        raise JsonPathError(f"empty expression at position {position}")
    parser = _Parser(text, position)
    path = parser.path()
    if not parser.done():
        raise JsonPathError(parser.problem("unexpected text"))
    return path


class _Parser:
    def __init__(self, text: str, offset: int) -> None:
        self.text = text
        self.at = 0
        self.offset = offset

    def done(self) -> bool:
        return self.at >= len(self.text)

    def peek(self, count: int = 1) -> str:
        return self.text[self.at : self.at + count]

    def problem(self, what: str) -> str:
        return f"{what} at {self.text[self.at :][:30]!r} in {{{self.text}}} (position {self.offset + self.at + 1})"

    def expect(self, token: str) -> None:
        if self.peek(len(token)) != token:
            raise JsonPathError(self.problem(f"expected {token!r}"))
        self.at += len(token)

    def skip_spaces(self) -> None:
        while self.peek() == " ":
            self.at += 1

    def literal_only(self) -> Literal:
        literal = self.literal()
        if not self.done():
            raise JsonPathError(self.problem("unexpected text after the string"))
        return literal

    def literal(self) -> Literal:
        quote = self.peek()
        if quote in "'\"":
            end = self.at + 1
            while end < len(self.text) and self.text[end] != quote:
                end += 2 if self.text[end] == "\\" else 1
            if end >= len(self.text):
                raise JsonPathError(self.problem("unclosed string"))
            raw = self.text[self.at + 1 : end]
            self.at = end + 1
            try:
                return Literal(json.loads('"' + raw.replace('"', '\\"').replace("\\'", "'") + '"', strict=False))
            except ValueError as error:
                raise JsonPathError(self.problem(f"bad escape in string ({error})")) from None
        for word, value in (("true", True), ("false", False), ("null", None)):
            if self.text.startswith(word, self.at):
                self.at += len(word)
                return Literal(value)
        number = _NUMBER.match(self.text, self.at)
        if number is None:
            raise JsonPathError(self.problem("expected a string, a number, true, false or null"))
        self.at = number.end()
        found = number.group()
        return Literal(float(found) if any(c in found for c in ".eE") else int(found))

    def path(self) -> Path:
        root = "@"
        if self.peek() in ("$", "@"):
            root = self.peek()
            self.at += 1
        steps: list[Step] = []
        while not self.done() and self.peek() not in (" ", ")", "=", "!", "<", ">", "&", "|"):
            steps.append(self.step())
        if root == "@" and not steps and self.text[self.at - 1 : self.at] != "@":
            raise JsonPathError(self.problem("expected a path"))
        return Path(root, tuple(steps))

    def step(self) -> Step:
        if self.peek(2) == "..":
            self.at += 2
            if self.peek() == "[":
                return Recursive(self.bracket())
            return Recursive(self.name_or_wildcard())
        if self.peek() == ".":
            self.at += 1
            return self.name_or_wildcard()
        if self.peek() == "[":
            return self.bracket()
        raise JsonPathError(self.problem("expected '.', '..' or '['"))

    def name_or_wildcard(self) -> Step:
        if self.peek() == "*":
            self.at += 1
            return Wildcard()
        name = _NAME.match(self.text, self.at)
        if name is None:
            raise JsonPathError(self.problem("expected a field name"))
        self.at = name.end()
        return Field(name.group())

    def bracket(self) -> Step:
        self.expect("[")
        self.skip_spaces()
        if self.peek() == "*":
            self.at += 1
            self.skip_spaces()
            self.expect("]")
            return Wildcard()
        if self.peek(2) == "?(":
            self.at += 2
            found = self.filter()
            self.expect(")")
            self.skip_spaces()
            self.expect("]")
            return found
        members: list[int | str] = []
        bounds: list[int | None] = []
        while True:
            self.skip_spaces()
            if self.peek() in "'\"":
                value = self.literal().value
                members.append(str(value))
            else:
                number = _INT.match(self.text, self.at)
                if number is not None:
                    self.at = number.end()
                if self.peek() == ":" or bounds:
                    bounds.append(int(number.group()) if number else None)
                    if self.peek() == ":":
                        self.at += 1
                        continue
                elif number is None:
                    raise JsonPathError(self.problem("expected an index, a slice, a quoted name, '*' or '?('"))
                else:
                    members.append(int(number.group()))
            self.skip_spaces()
            if self.peek() == "," and not bounds:
                self.at += 1
                continue
            self.expect("]")
            break
        if bounds:
            if members or len(bounds) > 3:
                raise JsonPathError(self.problem("a slice is [start:stop] or [start:stop:step]"))
            start, stop, step = (*bounds, None, None)[:3]
            if step == 0:
                raise JsonPathError(self.problem("a slice's step cannot be 0"))
            return Slice(start, stop, step)
        if len(members) == 1 and isinstance(members[0], int):
            return Index(members[0])
        if len(members) == 1:
            return Field(str(members[0]))
        return Union_(tuple(members))

    def filter(self) -> Filter:
        self.skip_spaces()
        left = self.operand()
        self.skip_spaces()
        for op in ("==", "!=", "<=", ">=", "<", ">"):
            if self.peek(len(op)) == op:
                self.at += len(op)
                self.skip_spaces()
                right = self.operand()
                self.skip_spaces()
                return Filter(left, op, right)
        if not isinstance(left, Path):
            raise JsonPathError(self.problem("a filter without a comparison tests a path (@.field)"))
        return Filter(left, None, None)

    def operand(self) -> Path | Literal:
        if self.peek() in ("@", "$"):
            return self.path()
        return self.literal()


# --- evaluation ------------------------------------------------------------------------------------


def _children(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return list(value.values())
    if isinstance(value, list):
        return list(value)
    return []


def _descendants(value: Any) -> Iterator[Any]:
    yield value
    for child in _children(value):
        yield from _descendants(child)


def _apply(step: Step, value: Any, root: Any) -> list[Any]:
    if isinstance(step, Field):
        return [value[step.name]] if isinstance(value, dict) and step.name in value else []
    if isinstance(step, Wildcard):
        return _children(value)
    if isinstance(step, Index):
        if isinstance(value, list) and -len(value) <= step.index < len(value):
            return [value[step.index]]
        return []
    if isinstance(step, Slice):
        return list(value[step.start : step.stop : step.step]) if isinstance(value, list) else []
    if isinstance(step, Union_):
        found: list[Any] = []
        for member in step.members:
            found += _apply(Index(member) if isinstance(member, int) else Field(member), value, root)
        return found
    if isinstance(step, Filter):
        items = value if isinstance(value, list) else []
        return [item for item in items if _test(step, item, root)]
    found = []
    for node in _descendants(value):
        found += _apply(step.then, node, root)
    return found


def _evaluate(path: Path | Literal, current: Any, root: Any) -> list[Any]:
    if isinstance(path, Literal):
        return [path.value]
    values = [root if path.root == "$" else current]
    for step in path.steps:
        values = [result for value in values for result in _apply(step, value, root)]
    return values


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _test(condition: Filter, item: Any, root: Any) -> bool:
    left = _evaluate(condition.left, item, root)
    if condition.op is None or condition.right is None:
        return bool(left)
    right = _evaluate(condition.right, item, root)
    if not left or not right:
        return False
    a, b = left[0], right[0]
    if condition.op in ("==", "!="):
        same = _number(a) == _number(b) if _number(a) is not None and _number(b) is not None else a == b
        return same if condition.op == "==" else not same
    if _number(a) is not None and _number(b) is not None:
        x, y = _number(a), _number(b)
    elif isinstance(a, str) and isinstance(b, str):
        x, y = a, b  # type: ignore[assignment]
    else:
        return False
    assert x is not None and y is not None
    return {"<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y}[condition.op]


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _render(nodes: tuple[Node, ...], current: Any, root: Any, out: list[str]) -> None:
    for node in nodes:
        if isinstance(node, Text):
            out.append(node.text)
        elif isinstance(node, Expression):
            out.append(" ".join(_text(value) for value in _evaluate(node.value, current, root)))
        else:
            results = _evaluate(node.over, current, root)
            if len(results) == 1 and isinstance(results[0], list):
                results = results[0]
            for element in results:
                _render(node.body, element, root, out)


def render(template: Template | str, data: Any) -> str:
    """The template applied to ``data`` (JSON-like values), as kubectl prints it (no newline added)."""
    compiled = compile_template(template) if isinstance(template, str) else template
    out: list[str] = []
    _render(compiled.nodes, data, data, out)
    return "".join(out)
