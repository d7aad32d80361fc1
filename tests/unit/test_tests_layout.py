"""The test suite's own layout: helpers live in tests/*.py (fakes, chart, reconcile_pass, ...) and
tests/integration/support.py, never in a test module another test module imports.

Why: a test module imported by another runs its module-level code twice and drags its fixtures
along by name; a helper moved into a test file is the first step to two copies of it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

TESTS = Path(__file__).resolve().parents[1]


def imported_modules(path: Path) -> set[str]:
    modules: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            modules.add(node.module)
        elif isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
    return modules


def test_no_test_module_imports_another_test_module() -> None:
    offenders = [
        f"{path.relative_to(TESTS.parent)} imports {module}"
        for path in sorted(TESTS.rglob("*.py"))
        for module in sorted(imported_modules(path))
        if module.startswith("tests.") and module.rsplit(".", 1)[-1].startswith("test_")
    ]
    assert offenders == [], "move the shared helpers to a tests/*.py helper module:\n" + "\n".join(offenders)


def test_the_scan_sees_an_import_of_a_test_module(tmp_path: Path) -> None:
    sample = tmp_path / "test_sample.py"
    sample.write_text("from tests.unit.test_chart import render\nimport tests.fakes\n", encoding="utf-8")
    assert imported_modules(sample) == {"tests.unit.test_chart", "tests.fakes"}
