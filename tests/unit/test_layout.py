"""The package's layout (issue 19, "one house"): a newcomer finds a name, and a module, at first try.

- No two public classes anywhere in ``connect_offsets`` share a name: ``Progress`` in two rooms
  means reading the imports to know which one a line uses.
- No module is over 600 lines unless its docstring gives the reason, with the word "lines": a long
  module is split by job where a clean cut exists.

Walks every module of the package (pyspark-only modules included when importable), as
tests/unit/test_errors.py does for the exception classes.
"""

from __future__ import annotations

import ast
import inspect
from collections import defaultdict
from pathlib import Path

import pytest

import connect_offsets
from tests.unit.package_modules import package_modules

pytestmark = pytest.mark.unit

PACKAGE = Path(connect_offsets.__file__).parent
MAX_LINES = 600


def public_classes_by_name() -> dict[str, list[str]]:
    found: dict[str, list[str]] = defaultdict(list)
    for module in package_modules():
        for name, value in vars(module).items():
            if inspect.isclass(value) and value.__module__ == module.__name__ and not name.startswith("_"):
                found[name].append(module.__name__)
    return found


def test_no_two_public_classes_share_a_name() -> None:
    classes = public_classes_by_name()
    assert len(classes) >= 150, sorted(classes)  # the walk found the package, not an empty tree
    assert {name: modules for name, modules in classes.items() if len(modules) > 1} == {}


def modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_no_module_is_over_600_lines_without_a_reason_in_its_docstring() -> None:
    assert len(modules()) >= 90
    unexplained = []
    for path in modules():
        text = path.read_text()
        lines = len(text.splitlines())
        where = path.relative_to(PACKAGE).as_posix()
        if lines <= MAX_LINES:
            continue
        docstring = ast.get_docstring(ast.parse(text)) or ""
        if "lines" not in docstring:
            unexplained.append(f"{where}: {lines} lines")
    assert unexplained == []
