#!/usr/bin/env python3
"""``make test``'s pytest run: the parallel part, then the serial part, then one summary.

Why three pytest sessions: most integration tests wait (for Connect, the API server, the operator),
so ``-n WORKERS --dist loadgroup`` runs them side by side on the one stack, isolated by namespace and
unique names; tests marked ``serial`` need the stack to themselves (they restart the API server,
freeze Connect workers, or measure latency or CPU) and run afterwards in a session of their own, one
at a time. The unit tests need no stack and only CPU, which the serial tests mostly leave idle: they
run during the serial part under ``nice`` at the lowest priority, so that the serial tests' timing is
theirs (issue 32: this took the unit tests' ~1.5 minutes off the wall time). An integration test
that fails is run once more, alone, right after its part (:func:`retry_failures`), and the run says
so by name in the part's output and again in the summary: the suite shares one Connect cluster and
one API server between tests, and a race one of them meets once in many runs must be seen and
fixed, but need not hide the other 1,800 results. Unit tests are never run again. All sessions share one
run id (``CONNECT_OFFSETS_TEST_RUN``, tests/conftest.py), so a stack the first one started is
stopped at the end of the serial part (unless ``CONNECT_OFFSETS_KEEP_STACK=1``). The summary adds
the parts up from their JUnit reports and ends with the wall time and one ``total: N passed, N
failed`` line. ``--workers 1`` runs the three parts one after the other.

Usage::

    hack/suite.py [--workers N] [--python .venv/bin/python] -m "MARKER EXPRESSION" [PYTEST ARGS ...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field
from pathlib import Path

#: pytest's exit code when a session selected no test: one part may have none (a selection of files).
NO_TESTS = 5
#: How many of the slowest tests the summary names.
SLOWEST = 25
#: xdist workers of the unit part (beside the serial part, on the CPU it leaves idle).
UNIT_WORKERS = 2
#: pytest's exit code when tests ran and some failed (any other code is not something a retry fixes).
TESTS_FAILED = 1
#: More failures than this in one part is a broken change, not a race: nothing is run again.
MOST_RETRIED = 3
#: How much of a failure's message the retry line quotes.
MESSAGE_CHARS = 300


@dataclass
class Part:
    name: str
    seconds: float
    exit_code: int
    tests: int = 0
    failed: int = 0
    skipped: int = 0
    #: (seconds, test id) of every test, from the JUnit report.
    timings: list[tuple[float, str]] = field(default_factory=list)
    #: (CPU seconds, test id): the test process's and its waited-for children's (tests/conftest.py).
    cpu: list[tuple[float, str]] = field(default_factory=list)
    #: node id -> the first failure's message, of every test that failed or errored.
    failures: dict[str, str] = field(default_factory=dict)
    #: Node ids of every test case in the report.
    cases: set[str] = field(default_factory=set)
    #: node id -> seconds, of every test case in the report (``remember_durations``).
    durations: dict[str, float] = field(default_factory=dict)
    #: (node id, passed the second time) of each test run again after failing here.
    retried: list[tuple[str, bool]] = field(default_factory=list)

    @property
    def passed(self) -> int:
        return self.tests - self.failed - self.skipped

    @property
    def ok(self) -> bool:
        return self.exit_code in (0, NO_TESTS) and self.failed == 0


def read_report(part: Part, report: Path) -> None:
    """Counts of a JUnit report (pytest's ``--junitxml``): errors count as failures."""
    if not report.exists():
        return
    root = ElementTree.parse(report).getroot()
    for suite in [root] if root.tag == "testsuite" else root.iter("testsuite"):
        part.tests += int(suite.get("tests", 0))
        part.failed += int(suite.get("failures", 0)) + int(suite.get("errors", 0))
        part.skipped += int(suite.get("skipped", 0))
    for case in root.iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        part.timings.append((float(case.get("time", 0) or 0), name))
        test = node_id(case)
        part.cases.add(test)
        part.durations[test] = float(case.get("time", 0) or 0)
        for outcome in (*case.iter("failure"), *case.iter("error")):
            message = (outcome.get("message") or outcome.text or "").strip().replace("\n", " ")
            part.failures.setdefault(test, message[:MESSAGE_CHARS])
        for prop in case.iter("property"):
            if prop.get("name") == "cpu_seconds":
                part.cpu.append((float(prop.get("value", 0) or 0), name))


def test_durations_file() -> Path:
    """Where the last runs' test durations are kept (the same path as ``tests/parallel.py``'s)."""
    cache = Path(os.environ.get("CONNECT_OFFSETS_CACHE", Path.home() / ".cache" / "connect-offsets"))
    return cache / "test-durations.json"


def remember_durations(part: Part) -> None:
    """Keep the parallel part's test durations for the next run's order (``tests/parallel.py``:
    longest first, so that no long test starts last and runs alone at the end)."""
    path = test_durations_file()
    try:
        known = json.loads(path.read_text()) if path.exists() else {}
    except (OSError, ValueError):
        known = {}
    known.update({test: round(seconds, 1) for test, seconds in part.durations.items()})
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f"{path.name}.{os.getpid()}")
    partial.write_text(json.dumps(known, sort_keys=True))
    partial.replace(path)


def node_id(case: ElementTree.Element) -> str:
    """pytest's node id of a JUnit test case: its ``classname`` is the module's dotted path, then
    any class names (``tests.integration.test_x.TestY``), so the longest prefix that names a file
    is the module."""
    parts = case.get("classname", "").split(".")
    repo = Path(__file__).resolve().parent.parent
    for cut in range(len(parts), 0, -1):
        module = repo.joinpath(*parts[:cut]).with_suffix(".py")
        if module.is_file():
            return "::".join([str(module.relative_to(repo)), *parts[cut:], case.get("name", "")])
    return f"{case.get('classname', '')}::{case.get('name', '')}"


def retry_failures(part: Part, command: list[str], env: dict[str, str], report: Path) -> None:
    """Run the part's failed tests once more, alone (no xdist), and print each by name.

    A test that passes the second time counts as passed, and is named in the summary as retried;
    one that fails again fails the run. Only a part whose pytest ended with "tests failed" is
    retried, and only a few tests: an interrupted session or a change that breaks many tests is
    not a race.
    """
    if part.exit_code != TESTS_FAILED or not part.failures or len(part.failures) > MOST_RETRIED:
        if part.failures and part.exit_code == TESTS_FAILED:
            print(f"\n==== {len(part.failures)} tests failed in the {part.name}: none is run again", flush=True)
        return
    print(f"\n==== {part.name}: {len(part.failures)} failed test(s) run once more, alone", flush=True)
    for test, message in part.failures.items():
        print(f"RETRY {test}\n  first failure: {message}", flush=True)
    again = run_part(f"retry of the {part.name}", [*command, *part.failures], env, report)
    for test in part.failures:
        passed = test in again.cases and test not in again.failures and again.exit_code in (0, TESTS_FAILED)
        part.retried.append((test, passed))
        print(f"RETRIED {test}: {'passed the second time' if passed else 'FAILED AGAIN'}", flush=True)
    still = [test for test, passed in part.retried if not passed]
    part.failed = len(still)
    part.exit_code = TESTS_FAILED if still else 0
    part.seconds += again.seconds


def run_part(name: str, command: list[str], env: dict[str, str], report: Path) -> Part:
    print(f"\n==== {name}: {' '.join(command)}", flush=True)
    began = time.monotonic()
    exit_code = subprocess.run([*command, f"--junitxml={report}"], env=env).returncode
    part = Part(name, time.monotonic() - began, exit_code)
    read_report(part, report)
    return part


@dataclass
class Background:
    """A part running beside another; its output goes to a file, printed once it ends."""

    name: str
    process: subprocess.Popen[bytes]
    output: Path
    report: Path
    began: float

    def finish(self) -> Part:
        exit_code = self.process.wait()
        print(f"\n==== {self.name} (ran beside the serial part; its output)", flush=True)
        sys.stdout.write(self.output.read_text(errors="replace"))
        sys.stdout.flush()
        part = Part(self.name, time.monotonic() - self.began, exit_code)
        read_report(part, self.report)
        return part


def start_part(name: str, command: list[str], env: dict[str, str], folder: Path, stem: str) -> Background:
    """Start a part at the lowest CPU priority (``nice -n 19``), its output into a file."""
    output, report = folder / f"{stem}.log", folder / f"{stem}.xml"
    print(f"\n==== {name} (beside the serial part, nice 19): {' '.join(command)}", flush=True)
    with output.open("wb") as sink:
        process = subprocess.Popen(
            ["nice", "-n", "19", *command, f"--junitxml={report}"], env=env, stdout=sink, stderr=subprocess.STDOUT
        )
    return Background(name, process, output, report, time.monotonic())


class BusyStack:
    """Other work on the stack while the parallel part runs (``--busy``; ``hack/busy_stack.py run``).

    Why: a test that passes only on a worker nobody else uses fails for every user who ran the demo
    first (issue 48); with connectors running, stopped, a mirror of its own and one created and
    deleted every few seconds beside every run, such a test fails here first. Only the parallel
    part: the serial tests measure timings and restart components, and need the stack alone. The
    stack is started here when it is not running, under the run's marker, so that the serial part
    stops it at the end as it stops a stack the tests started (tests/conftest.py).
    """

    def __init__(self, python: str, env: dict[str, str]) -> None:
        hack = Path(__file__).resolve().parent
        info = json.loads(
            subprocess.run([python, str(hack / "stack.py"), "info"], check=True, capture_output=True, text=True).stdout
        )
        if not all(info["running"][name] for name in ("etcd", "apiserver", "kafka-a", "kafka-b", "connect")):
            subprocess.run([python, str(hack / "stack.py"), "up"], check=True)
            Path(info["run_dir"], f"test-run-{env['CONNECT_OFFSETS_TEST_RUN']}.started-stack").touch()
        elif info.get("stale"):  # running with a former checkout's settings (a listener added): restarted
            subprocess.run([python, str(hack / "stack.py"), "up"], check=True)
        print("\n==== other work on the stack during the parallel part: hack/busy_stack.py run", flush=True)
        self.process = subprocess.Popen([python, str(hack / "busy_stack.py"), "run", "--seconds", "5400"], env=env)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(120)
        except subprocess.TimeoutExpired:
            self.process.kill()


def names_tests(arg: str) -> bool:
    """Whether a pytest argument is a file, folder or node id (then pytest collects only that)."""
    return not arg.startswith("-") and Path(arg.split("::", 1)[0]).exists()


def minutes(seconds: float) -> str:
    return f"{int(seconds // 60)}m{seconds % 60:04.1f}s"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=int(os.environ.get("TEST_WORKERS", "5")))
    parser.add_argument("--python", default=sys.executable, help="the interpreter that has pytest (the venv's)")
    parser.add_argument("-m", dest="markers", required=True, help="the marker expression of the whole run")
    parser.add_argument("--busy", action="store_true", help="other work on the stack during the parallel part")
    args, pytest_args = parser.parse_known_args(argv)
    began = time.monotonic()
    env = {**os.environ}
    env.setdefault("CONNECT_OFFSETS_TEST_RUN", uuid.uuid4().hex)
    pytest = [args.python, "-m", "pytest"]
    # Without paths of its own, each part collects only its folder (the tiers are folders, see
    # tests/conftest.py): importing the other tier's modules cost each of the seven pytest
    # processes ~4 s of CPU, on two cores already busy with the integration tests.
    whole = not any(names_tests(arg) for arg in pytest_args)
    tests = Path(__file__).resolve().parent.parent / "tests"
    stack_tests, unit_tests = ([str(tests / "integration")], [str(tests / "unit")]) if whole else ([], [])
    parallel = [*pytest, "-m", f"({args.markers}) and not serial and not unit", *pytest_args, *stack_tests]
    units = [*pytest, "-m", f"({args.markers}) and unit and not serial", *pytest_args, *unit_tests]
    if args.workers > 1:
        parallel += ["-n", str(args.workers), "--dist", "loadgroup"]
        units += ["-n", str(UNIT_WORKERS)]
    serial = [*pytest, "-m", f"({args.markers}) and serial", *pytest_args, *stack_tests]
    keep = {**env, "CONNECT_OFFSETS_KEEP_STACK": "1"}
    with tempfile.TemporaryDirectory(prefix="connect-offsets-suite-") as folder:
        where = Path(folder)
        # The serial part still needs a stack the parallel part started: only it may stop it.
        # A retry runs without xdist, with the part's marker expression and the failed node ids.
        options = [arg for arg in pytest_args if not names_tests(arg)]
        alone = [*pytest, "-m", f"({args.markers}) and not unit", *options]
        busy = BusyStack(args.python, env) if args.busy else None
        try:
            first = run_part(f"parallel part ({args.workers} workers)", parallel, keep, where / "parallel.xml")
            remember_durations(first)
            retry_failures(first, alone, keep, where / "parallel-retry.xml")
        finally:
            if busy is not None:
                busy.stop()
        parts = [first]
        if args.workers > 1:
            beside = start_part(f"unit part ({UNIT_WORKERS} workers)", units, keep, where, "unit")
            last = run_part("serial part", serial, env, where / "serial.xml")
            parts += [last, beside.finish()]
        else:
            parts.append(run_part("unit part", units, keep, where / "unit.xml"))
            last = run_part("serial part", serial, env, where / "serial.xml")
            parts.append(last)
        # The serial part stopped the stack it ended; a retry of it starts one again (tests/conftest.py).
        retry_failures(last, alone, env, where / "serial-retry.xml")
    wall = time.monotonic() - began
    print("\n==== summary")
    for part in parts:
        outcome = "ok" if part.ok else f"FAILED (pytest exit code {part.exit_code})"
        print(
            f"{part.name}: {part.passed} passed, {part.failed} failed, {part.skipped} skipped "
            f"in {minutes(part.seconds)}: {outcome}"
        )
    retried = [(test, passed) for part in parts for test, passed in part.retried]
    if retried:
        print(f"run again after failing once ({len(retried)}): each is a race to find and fix")
        for test, passed in retried:
            print(f"  RETRIED {test}: {'passed the second time' if passed else 'failed again'}")
    # The slowest tests: where the next minute of `make test` is (issue 32 keeps it under 15 minutes).
    timings = sorted((t for p in parts for t in p.timings), reverse=True)
    if timings:
        print(f"slowest of {len(timings)} tests (sum {minutes(sum(t for t, _ in timings))}):")
        for seconds, name in timings[:SLOWEST]:
            print(f"  {seconds:6.1f}s {name}")
    # And the ones that cost the most CPU: on two cores the parallel part is CPU-bound, so a test's
    # CPU (with the operator, CLI and JVMs it ran) is what it takes from the tests beside it.
    cpu = sorted((c for p in parts for c in p.cpu), reverse=True)
    if cpu:
        print(f"most CPU of {len(cpu)} tests (sum {minutes(sum(c for c, _ in cpu))}):")
        for seconds, name in cpu[:SLOWEST]:
            print(f"  {seconds:6.1f}s {name}")
    total = sum(p.tests for p in parts)
    failed = sum(p.failed for p in parts)
    skipped = sum(p.skipped for p in parts)
    print(f"wall time {minutes(wall)} (pytest {minutes(sum(p.seconds for p in parts))})")
    print(f"total: {total - failed - skipped} passed, {failed} failed" + (f", {skipped} skipped" if skipped else ""))
    if total == 0:
        return NO_TESTS
    return 0 if all(p.ok for p in parts) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
