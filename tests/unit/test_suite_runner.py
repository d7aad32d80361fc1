"""hack/suite.py's one retry of a failed integration test: run alone, named when it is run and in
the summary, counted as passed only if it passes the second time, and never for an interrupted
session or a change that breaks many tests.

The "pytest" here is a small script that writes the JUnit report pytest would: these tests are
about what the runner does with the report, not about pytest.
"""

from __future__ import annotations

import sys
import textwrap
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from types import ModuleType

import pytest

from tests.hack_scripts import load_hack_script

pytestmark = pytest.mark.unit

#: A module that exists, so that the runner can turn the report's class name into a node id.
MODULE = "tests/integration/test_shared_rbac.py"
CLASSNAME = "tests.integration.test_shared_rbac"

#: Writes a JUnit report for the node ids it is given: each fails if its name is in FAIL.
FAKE_PYTEST = textwrap.dedent(
    """
    import sys
    fail = set(sys.argv[1].split(",")) if sys.argv[1] else set()
    report = next(a for a in sys.argv if a.startswith("--junitxml=")).split("=", 1)[1]
    ids = [a for a in sys.argv[2:] if "::" in a]
    cases = []
    for node in ids:
        module, name = node.split("::", 1)
        classname = module[:-3].replace("/", ".")
        body = '<failure message="again">x</failure>' if name in fail else ""
        cases.append(f'<testcase classname="{classname}" name="{name}" time="0.1">{body}</testcase>')
    failed = sum(1 for node in ids if node.split("::", 1)[1] in fail)
    with open(report, "w") as out:
        out.write(f'<testsuites><testsuite tests="{len(ids)}" failures="{failed}" errors="0" skipped="0">')
        out.write("".join(cases) + "</testsuite></testsuites>")
    sys.exit(1 if failed else 0)
    """
)


@pytest.fixture(scope="module")
def suite() -> ModuleType:
    return load_hack_script("suite")


def failed_part(suite: ModuleType, tmp_path: Path, names: list[str], exit_code: int = 1) -> object:
    """A part whose report says that ``names`` failed (one with a teardown error as well)."""
    cases = "".join(
        f'<testcase classname="{CLASSNAME}" name="{name}" time="1"><failure message="boom {name}">trace</failure>'
        + ('<error message="teardown">t</error>' if i == 0 else "")
        + "</testcase>"
        for i, name in enumerate(names)
    )
    report = tmp_path / "first.xml"
    report.write_text(
        f'<testsuites><testsuite tests="{len(names) + 1}" failures="{len(names)}" errors="1" skipped="0">'
        f'<testcase classname="{CLASSNAME}" name="test_fine" time="1"/>{cases}</testsuite></testsuites>'
    )
    part = suite.Part("parallel part", 10.0, exit_code)
    suite.read_report(part, report)
    return part


def fake_pytest(fail: list[str]) -> list[str]:
    return [sys.executable, "-c", FAKE_PYTEST, ",".join(fail)]


def test_a_node_id_is_built_from_the_module_that_exists(suite: ModuleType) -> None:
    case = ElementTree.fromstring(f'<testcase classname="{CLASSNAME}" name="test_x[a-b]"/>')
    assert suite.node_id(case) == f"{MODULE}::test_x[a-b]"
    in_class = ElementTree.fromstring(f'<testcase classname="{CLASSNAME}.TestGroup" name="test_y"/>')
    assert suite.node_id(in_class) == f"{MODULE}::TestGroup::test_y"


def test_a_test_that_passes_the_second_time_counts_as_passed_and_is_named(
    suite: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    part = failed_part(suite, tmp_path, ["test_a[x-y]"])
    assert (part.failed, part.passed) == (2, 0)  # type: ignore[attr-defined]
    suite.retry_failures(part, fake_pytest([]), {}, tmp_path / "retry.xml")
    assert part.retried == [(f"{MODULE}::test_a[x-y]", True)]  # type: ignore[attr-defined]
    assert (part.failed, part.exit_code, part.ok) == (0, 0, True)  # type: ignore[attr-defined]
    out = capsys.readouterr().out
    assert f"RETRY {MODULE}::test_a[x-y]\n  first failure: boom test_a[x-y]" in out
    assert f"RETRIED {MODULE}::test_a[x-y]: passed the second time" in out


def test_a_test_that_fails_again_fails_the_part(suite: ModuleType, tmp_path: Path) -> None:
    part = failed_part(suite, tmp_path, ["test_a", "test_b"])
    suite.retry_failures(part, fake_pytest(["test_b"]), {}, tmp_path / "retry.xml")
    assert part.retried == [(f"{MODULE}::test_a", True), (f"{MODULE}::test_b", False)]  # type: ignore[attr-defined]
    assert (part.failed, part.exit_code, part.ok) == (1, 1, False)  # type: ignore[attr-defined]


def test_a_test_the_retry_did_not_run_is_not_counted_as_passed(suite: ModuleType, tmp_path: Path) -> None:
    part = failed_part(suite, tmp_path, ["test_a"])
    # A "pytest" that ran nothing (a node id it could not find) and wrote an empty report.
    silent = [sys.executable, "-c", FAKE_PYTEST.replace('"::" in a', "False"), ""]
    suite.retry_failures(part, silent, {}, tmp_path / "retry.xml")
    assert part.retried == [(f"{MODULE}::test_a", False)]  # type: ignore[attr-defined]
    assert part.ok is False  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("names", "exit_code"),
    [(["test_a"], 2), (["test_a", "test_b", "test_c", "test_d"], 1)],
    ids=["interrupted", "many-failures"],
)
def test_nothing_is_run_again_for_an_interrupted_session_or_many_failures(
    suite: ModuleType, tmp_path: Path, names: list[str], exit_code: int
) -> None:
    part = failed_part(suite, tmp_path, names, exit_code)
    failed = part.failed  # type: ignore[attr-defined]
    suite.retry_failures(part, [sys.executable, "-c", "raise SystemExit('must not run')"], {}, tmp_path / "r.xml")
    assert part.retried == [] and part.failed == failed and part.ok is False  # type: ignore[attr-defined]


def test_the_parallel_parts_durations_order_the_next_run_longest_first(
    suite: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The durations a run remembers (merged with the older ones) order the next run's tests,
    longest first; a test never timed counts as a long one; the same file gives every worker the
    same order."""
    from types import SimpleNamespace

    from tests.parallel import UNKNOWN_TEST_S, longest_first

    monkeypatch.setenv("CONNECT_OFFSETS_CACHE", str(tmp_path))
    older = suite.Part("parallel part", 10.0, 0)
    older.durations = {f"{MODULE}::test_gone": 5.0, f"{MODULE}::test_fine": 99.0}
    suite.remember_durations(older)
    part = failed_part(suite, tmp_path, ["test_slow"])  # test_fine and test_slow, 1 s each
    part.durations[f"{MODULE}::test_slow"] = 80.0
    suite.remember_durations(part)
    assert suite.test_durations_file() == tmp_path / "test-durations.json"

    names = ["test_fine", "test_gone", "test_new", "test_slow"]
    orders = []
    for _ in range(2):  # two workers
        items = [SimpleNamespace(nodeid=f"{MODULE}::{name}") for name in names]
        longest_first(items)  # type: ignore[arg-type]
        orders.append([item.nodeid.split("::")[1] for item in items])
    assert UNKNOWN_TEST_S > 5.0
    assert orders == [["test_slow", "test_new", "test_gone", "test_fine"]] * 2
