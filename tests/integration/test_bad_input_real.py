"""Bad input on the real stack (issue 10): a deterministic sample of the inputs the planner fuzz
(tests/unit/test_planner_fuzz.py) generates, applied to a real connector with the operator running.

Why on the real stack as well: the fuzz proves the planner's decisions, but only the real path shows
that a refusal actually reaches the resource (a condition the API server accepts), that the operator
process survives, and that Connect is untouched. After every case: the expected condition, the
operator alive, Connect's offsets and status as before, and no PATCH/DELETE of the connector's
offsets in the worker's own request log.

One operator and one connector per test; the cases run one after the other on it (running, then
stopped), each cleared before the next, so the whole file stays within a few minutes.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import OperatorProcess, wait_for
from tests.integration.support import (
    GROUP,
    VERSION,
    OffsetsRequest,
    annotate,
    connect_offsets,
    create_cluster,
    create_connector,
    events_for,
    file_source_spec,
    get_connector,
    offsets_requests,
    patch_connector,
    wait_condition,
    wait_connect_state,
)
from tests.offsets_documents import SPECIAL_DOCS

pytestmark = pytest.mark.local_stack  # reads the local worker's request log

PREFIX = f"{GROUP}/"
LINES = 10
#: The same seed every run: the sample is deterministic.
SAMPLE = random.Random(20261122)


@dataclass(frozen=True)
class Case:
    """Annotations (key without prefix -> value) and ConfigMap data to apply, and what must follow."""

    name: str
    annotations: dict[str, str]
    condition: str
    reason: str
    fragments: tuple[str, ...] = ()
    configmap: dict[str, str] | None = None
    event: str | None = None  # reason of a Warning Event that must be posted
    states: tuple[str, ...] = ("running", "stopped")  # connector states the case runs in


@dataclass
class Connector:
    """The connector under test as Connect reports it."""

    name: str
    client: httpx.Client
    log: Path
    snapshots: list[tuple[Any, Any]] = field(default_factory=list)

    def snapshot(self) -> tuple[Any, Any]:
        status = self.client.get(f"/connectors/{self.name}/status").json()
        state = (status["connector"]["state"], sorted((t["id"], t["state"]) for t in status["tasks"]))
        return state, connect_offsets(self.client, self.name)

    def offsets_changes(self) -> list[OffsetsRequest]:
        """PATCH/DELETE offsets requests for this connector, answered or refused: any is a bug here."""
        return [r for r in offsets_requests(self.log, {self.name}) if r.method != "GET"]


def document_cases(path: Path) -> list[Case]:
    """ConfigMap contents: a sample of the fuzz's special documents plus the ones that matter most."""
    sampled = SAMPLE.sample(SPECIAL_DOCS, 5)
    own = str(path)
    many_wrong = {
        "offsets": [{"partition": {"filename": f"{own}.{i}"}, "offset": {"position": i}} for i in range(6_500)]
    }
    texts: list[tuple[str, str, tuple[str, ...]]] = [
        (f"sampled-{i}", text, ("ConfigMap bad-offsets key offsets.json is invalid",)) for i, text in enumerate(sampled)
    ]
    stopped_too = {"unpaired-surrogate", "huge", "duplicate-key"}
    texts += [
        ("truncated", json.dumps({"offsets": [{"partition": {"filename": own}}]})[:-3], ("not valid JSON",)),
        ("nan", f'{{"offsets": [{{"partition": {{"filename": "{own}"}}, "offset": {{"position": NaN}}}}]}}', ("NaN",)),
        (
            "duplicate-key",
            f'{{"offsets": [{{"partition": {{"filename": "{own}", "filename": "{own}"}}, "offset": null}}]}}',
            ("appears twice",),
        ),
        (
            "unpaired-surrogate",
            f'{{"offsets": [{{"partition": {{"filename": "{own}\\ud800"}}, "offset": {{"position": 1}}}}]}}',
            ("unpaired surrogate",),
        ),
        (
            "unicode-filename",
            json.dumps({"offsets": [{"partition": {"filename": own + "é🚀"}, "offset": {"position": 3}}]}),
            ("offsets[0].partition.filename",),
        ),
        ("wrong-type", json.dumps({"offsets": [{"partition": {"filename": own}, "offset": {"position": "ten"}}]}), ()),
        ("huge", json.dumps(many_wrong), ("... and 6490 more",)),  # ~900 kB of 1 MiB
        ("empty", "", ("not valid JSON",)),
    ]
    cases = [
        Case(
            f"configmap-{label}",
            {"connector-offsets": "alter"},
            "OffsetsOperationFailed",
            "InvalidOffsets",
            fragments,
            configmap={"offsets.json": text},
            event="OffsetsOperationFailed",
            states=("running", "stopped") if label in stopped_too else ("running",),
        )
        for label, text, fragments in texts
    ]
    # With stop -> change -> resume asked for: still refused before anything (never stopped).
    cases.append(
        Case(
            "stop-connector-with-invalid-offsets",
            {"connector-offsets": "alter", "stop-connector": "true"},
            "OffsetsOperationFailed",
            "InvalidOffsets",
            ("offsets[0].partition.filename",),
            configmap={"offsets.json": json.dumps({"offsets": [{"partition": {"filename": "/x"}, "offset": None}]})},
            states=("running",),
        )
    )
    cases.append(
        Case(
            "configmap-key-missing",
            {"connector-offsets": "alter"},
            "OffsetsOperationFailed",
            "OffsetsKeyMissing",
            ("has no key offsets.json", "keys: case, note"),
            configmap={"note": "{}"},
        )
    )
    return cases


def annotation_cases() -> list[Case]:
    """Annotation values: empty, case and unicode variants, typos in the flags, unknown restarts."""
    unknown = ["", " ", "ALTER", "réset", "list,alter", "🚀", "x" * 5000]
    cases = [
        Case(
            f"offsets-value-{i}",
            {"connector-offsets": value},
            "InvalidAnnotation",
            "UnknownValue",
            ("is not one of list, alter, reset, restore",),
            states=("running",),
        )
        for i, value in enumerate(SAMPLE.sample(unknown, 3))
    ]
    for flag, value in (("dry-run", "yes"), ("dry-run", ""), ("stop-connector", "1"), ("stop-connector", "TRUE")):
        cases.append(
            Case(
                f"{flag}-{value or 'empty'}",
                {"connector-offsets": "reset", flag: value},
                "OffsetsOperationFailed",
                "InvalidAnnotation",
                (f"{PREFIX}{flag}={value!r} must be true or false",),
                event="OffsetsOperationFailed",
            )
        )
    cases += [
        Case(
            "restart-unknown",
            {"restart": "sometimes"},
            "InvalidAnnotation",
            "UnknownValue",
            ("restart='sometimes'",),
            states=("running",),
        ),
        Case("restart-task-superscript", {"restart-task": "²"}, "InvalidAnnotation", "UnknownValue", ("task id",)),
        Case(
            "restore-missing-backup",
            {"connector-offsets": "restore", "restore-from": "no-such-backup"},
            "OffsetsOperationFailed",
            "BackupNotFound",
            ("backup no-such-backup",),
        ),
        Case(
            "reset-while-running",
            {"connector-offsets": "reset"},
            "OffsetsOperationFailed",
            "ConnectorNotStopped",
            ("needs it STOPPED",),
            states=("running",),
        ),
    ]
    return cases


def put_configmap(core: Any, namespace: str, name: str, data: dict[str, str]) -> None:
    body = {"metadata": {"name": name}, "data": data}
    try:
        core.replace_namespaced_config_map(name, namespace, body)
    except Exception:
        core.create_namespaced_config_map(namespace, body)


def run_case(
    case: Case,
    *,
    phase: str,
    custom: Any,
    core: Any,
    namespace: str,
    connector: Connector,
    operator: OperatorProcess,
    before: tuple[Any, Any],
    settle: Callable[[], None],
) -> None:
    if case.configmap is not None:
        # A marker key per case and phase: a new resourceVersion, so it is a new request (not "Unchanged").
        put_configmap(core, namespace, "bad-offsets", {**case.configmap, "case": f"{phase}-{case.name}"})
    warnings_before = [e for e in events_for(core, namespace, connector.name) if e.reason == case.event]
    annotate(custom, namespace, connector.name, **{k.replace("-", "_"): v for k, v in case.annotations.items()})
    try:
        found = wait_condition(custom, namespace, connector.name, case.condition, reason=case.reason, timeout=30)
        for fragment in case.fragments:
            assert fragment in found["message"], (case.name, found["message"][:2000])
        assert found["message"].strip(), case.name
        if case.event is not None:
            wait_for(
                f"{case.name}: Warning Event {case.event}",
                lambda: (
                    len([e for e in events_for(core, namespace, connector.name) if e.reason == case.event])
                    > len(warnings_before)
                ),
                timeout=20,
            )
        settle()  # a few more passes: still nothing may happen
        assert operator.process is not None and operator.process.poll() is None, f"{case.name}: operator died"
        assert connector.snapshot() == before, f"{case.name}: Connect changed"
        assert connector.offsets_changes() == [], f"{case.name}: offsets request sent"
    finally:
        annotate(custom, namespace, connector.name, **{k.replace("-", "_"): None for k in case.annotations})
        wait_for(
            f"{case.name}: condition {case.condition} cleared",
            lambda: all(
                c["type"] != case.condition
                for c in (get_connector(custom, namespace, connector.name).get("status") or {}).get("conditions", [])
            ),
            timeout=30,
        )


def test_bad_input_never_changes_connect(
    custom: Any,
    core: Any,
    namespace: str,
    stack: dict[str, Any],
    connect: httpx.Client,
    connect_url: str,
    tmp_path: Path,
    unique: str,
    operator: OperatorProcess,
) -> None:
    source = tmp_path / "bad.txt"
    source.write_text("".join(f"b{i}\n" for i in range(LINES)))
    name = f"bad-{unique}"
    connector = Connector(name, connect, Path(stack["logs"]) / "connect.log")
    create_cluster(custom, namespace, connect_url)
    spec = file_source_spec(source, f"bad-{unique}", "bad-offsets")
    spec["listOffsets"] = {"toConfigMap": {"name": "bad-list"}}
    create_connector(custom, namespace, name, spec)
    cases = document_cases(source) + annotation_cases()
    assert len(cases) >= 20
    try:
        for state, connect_state_name, ready in (
            ("running", "RUNNING", "ConnectorRunning"),
            ("stopped", "STOPPED", "ConnectorStopped"),
        ):
            if state == "stopped":
                patch_connector(custom, namespace, name, {"spec": {"state": "stopped"}})
            wait_condition(custom, namespace, name, "Ready", reason=ready, timeout=60)
            wait_connect_state(connect, name, connect_state_name)
            wait_for(
                f"{name} read the whole file",
                lambda: (
                    connect_offsets(connect, name)
                    and connect_offsets(connect, name)[0]["offset"]["position"] == LINES * 3
                ),
            )
            before = connector.snapshot()
            for case in cases:
                if state in case.states:
                    run_case(
                        case,
                        phase=state,
                        custom=custom,
                        core=core,
                        namespace=namespace,
                        connector=connector,
                        operator=operator,
                        before=before,
                        settle=lambda: time.sleep(0.5),
                    )
        log = operator.log()
        for crash in ("UnicodeEncodeError", "AssertionError", "KeyError", "TypeError", "RecursionError"):
            assert crash not in log, f"{crash} in the operator log"
    finally:
        connect.delete(f"/connectors/{name}")


@pytest.mark.xdist_group("mirrormaker2")  # runs MirrorMaker 2: see test_mirrormaker2.py
def test_bad_mirrormaker2_selector(
    custom: Any,
    namespace: str,
    stack: dict[str, Any],
    connect: httpx.Client,
    connect_url: str,
    unique: str,
    operator: OperatorProcess,
) -> None:
    """An unknown or empty connector selector on a KafkaMirrorMaker2: InvalidAnnotation, nothing changed."""
    east, west = f"east{unique}", f"west{unique}"
    heartbeat = f"{east}->{west}.MirrorHeartbeatConnector"
    connector = Connector(heartbeat, connect, Path(stack["logs"]) / "connect.log")
    create_cluster(custom, namespace, connect_url)
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "KafkaMirrorMaker2",
        "metadata": {"name": "mirror", "namespace": namespace, "labels": {f"{GROUP}/cluster": "local"}},
        "spec": {
            "clusters": [
                {"alias": east, "bootstrapServers": stack["kafka_b"]},
                {"alias": west, "bootstrapServers": stack["kafka_a"]},
            ],
            "mirrors": [
                {
                    "sourceCluster": east,
                    "targetCluster": west,
                    "heartbeatConnector": {
                        "config": {"heartbeats.topic.replication.factor": 1},
                        "alterOffsets": {"fromConfigMap": {"name": "mm2-offsets"}},
                    },
                }
            ],
        },
    }
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "kafkamirrormaker2s", body)

    def mm2_condition(kind: str, reason: str) -> dict[str, Any] | None:
        mm2 = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, "kafkamirrormaker2s", "mirror")
        for item in (mm2.get("status") or {}).get("conditions", []):
            if item["type"] == kind and item["status"] == "True" and item["reason"] == reason:
                return dict(item)
        return None

    def set_annotations(values: dict[str, str | None]) -> None:
        custom.patch_namespaced_custom_object(
            GROUP,
            VERSION,
            namespace,
            "kafkamirrormaker2s",
            "mirror",
            {"metadata": {"annotations": {PREFIX + k: v for k, v in values.items()}}},
        )

    try:
        wait_connect_state(connect, heartbeat, "RUNNING", timeout=90)
        # Settled: its task runs and its (constant) heartbeat offset is committed.
        before = wait_for(
            "heartbeat task running with its offset committed",
            lambda: (lambda snap: snap if snap[0][1] == [(0, "RUNNING")] and snap[1] else None)(connector.snapshot()),
            timeout=90,
        )
        for selector, reason, fragment in (
            (f"{east}->{west}.MirrorSourceConnector", "UnknownConnector", "matches no connector"),
            ("", "UnknownConnector", f"valid names: {heartbeat}"),
            (heartbeat.upper(), "UnknownConnector", "matches no connector"),
        ):
            set_annotations({"connector-offsets": "reset", "mirrormaker-connector": selector})
            found = wait_for(
                f"InvalidAnnotation {reason} for {selector!r}",
                lambda r=reason: mm2_condition("InvalidAnnotation", r),
                30,
            )
            assert fragment in found["message"], found
            time.sleep(0.5)
            assert operator.process is not None and operator.process.poll() is None
            assert connector.snapshot() == before
            assert connector.offsets_changes() == []
            set_annotations({"connector-offsets": None, "mirrormaker-connector": None})
            wait_for("condition cleared", lambda r=reason: mm2_condition("InvalidAnnotation", r) is None, 30)
        # A selector without an operation is explained too.
        set_annotations({"mirrormaker-connector": heartbeat})
        found = wait_for("MissingAnnotation", lambda: mm2_condition("InvalidAnnotation", "MissingAnnotation"), 30)
        assert "needs connect-offsets.io/connector-offsets" in found["message"]
        assert connector.snapshot() == before and connector.offsets_changes() == []
    finally:
        custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, "kafkamirrormaker2s", "mirror")
        wait_for("heartbeat connector deleted", lambda: connect.get(f"/connectors/{heartbeat}").status_code == 404, 60)
