"""The core KafkaConnector flows against Connect workers of other versions (issue 21, item 1).

Why a module of its own: the rest of the suite runs against the stack's worker (KAFKA_VERSION in
hack/versions.env); this one starts a ``DedicatedWorker`` from another release's jars (fetched by
``hack/fetch-kafka.sh VERSION`` into its own libs dir) against the stack's 4.x brokers, one version
at a time (module-scoped, parametrized fixture), and runs the flows whose REST calls differ between
releases: create in each state (3.6 has no ``initial_state``: create, then stop or pause), list,
alter, reset, stop -> change -> resume, initial offsets; MirrorMaker 2 list/alter (a
KafkaMirrorMaker2 on that worker: connect-mirror of the same release is on its classpath); the
offline CLI round trip (``connect-offsets export``/``import`` on that worker's offsets topic, the
worker down meanwhile); and one Connect refusal whose words differ between releases, which the
status must carry verbatim as that worker answers it. A worker older than 3.6 has no offsets API:
the operator must say ``ConnectTooOld`` once, not retry.

Selection: every test here is marked ``compat``; all versions but the oldest of
``CONNECT_COMPAT_VERSIONS`` are also ``compat_extra``, which ``make test`` deselects (it runs the
oldest only: about 50 s with its worker's start, some 25 s of it the three later tests) and
``make test-compat`` runs. ``CONNECT_COMPAT_VERSIONS`` in the environment overrides hack/versions.env's list.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Producer

from connect_offsets.models.connect import health_endpoint_supported, plugin_version_refusal, supports_initial_state
from connect_offsets.vocabulary import MAX_QUOTED_TEXT, MIRRORS
from tests.conftest import REPO, OperatorProcess, wait_for
from tests.integration.connect_worker import DedicatedWorker, stack_versions
from tests.integration.support import (
    FILE_SOURCE,
    GROUP,
    VERSION,
    CrdKeeper,
    annotate,
    annotate_mm2,
    condition,
    configmap_offsets,
    connect_offsets,
    connect_state,
    connector_config,
    create_cluster,
    create_connector,
    create_connector_kept,
    create_mm2,
    events_for,
    file_source_spec,
    get_connector,
    patch_connector,
    read_topic,
    run_cli,
    topic_values,
    wait_annotation_removed,
    wait_condition,
    wait_connect_state,
    wait_mm2_annotations_removed,
    wait_mm2_condition,
)

# One xdist worker runs the module: each version's worker is started once for all of its tests. That is
# the worker of the other MirrorMaker 2 tests (test_mirrormaker2_list_alter runs a mirror): see
# test_mirrormaker2.py.
pytestmark = [
    pytest.mark.integration,
    pytest.mark.compat,
    pytest.mark.timeout(600),
    pytest.mark.xdist_group("mirrormaker2"),
]


VERSIONS = stack_versions()
#: CONNECT_COMPAT_VERSIONS in the environment (``make test-compat COMPAT_VERSIONS="4.3.1"``) runs a
#: selection, e.g. a release just added; otherwise every version hack/versions.env names.
COMPAT = sorted(
    (os.environ.get("CONNECT_COMPAT_VERSIONS") or VERSIONS["CONNECT_COMPAT_VERSIONS"]).split(),
    key=lambda v: tuple(int(p) for p in v.split(".")),
)
TOO_OLD = VERSIONS.get("CONNECT_TOO_OLD_VERSION", "")
LINE = 3  # "aN\n"


def _param(version: str) -> Any:
    return pytest.param(version, id=version, marks=[] if version == COMPAT[0] else [pytest.mark.compat_extra])


@pytest.fixture(scope="module", params=[_param(v) for v in COMPAT])
def worker(request: pytest.FixtureRequest, stack: dict[str, Any]) -> Iterator[DedicatedWorker]:
    """One worker of ``request.param`` at a time: two cores, and each JVM needs ~400 MiB."""
    w = DedicatedWorker(heap="-Xmx512m", name=f"v{request.param.replace('.', '')}", version=request.param)
    w.start()
    try:
        yield w
    finally:
        w.stop()


@pytest.fixture(autouse=True)
def this_branch_crds(stack: dict[str, Any]) -> Iterator[None]:
    """This checkout's CRD fields (spec.version, status.health) served on the shared stack
    (``CrdKeeper``): another session may apply an older copy at any time."""
    with CrdKeeper(stack, REPO / "crds"):
        yield


@pytest.fixture
def rest(worker: DedicatedWorker) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=worker.url, timeout=30) as client:
        yield client


def source_file(path: Path, lines: int = 10) -> Path:
    path.write_text("".join(f"a{i}\n" for i in range(lines)))
    return path


def test_worker_reports_its_version(worker: DedicatedWorker, rest: httpx.Client) -> None:
    assert rest.get("/").json()["version"] == worker.version


def test_create_in_each_state(
    worker: DedicatedWorker,
    rest: httpx.Client,
    custom: Any,
    namespace: str,
    operator: OperatorProcess,
    tmp_path: Path,
    unique: str,
) -> None:
    """RUNNING, PAUSED and STOPPED from the first reconcile: before 3.7 by create-then-stop/pause."""
    source = source_file(tmp_path / "states.txt")
    create_cluster(custom, namespace, worker.url)
    names = {state: f"{state}-{unique}" for state in ("running", "paused", "stopped")}
    for state, name in names.items():
        create_connector(custom, namespace, name, file_source_spec(source, f"states-{unique}", "unused", state=state))
    for state, name in names.items():
        wait_condition(custom, namespace, name, "Ready", reason=f"Connector{state.capitalize()}", timeout=120)
        assert connect_state(rest, name) == state.upper()
    for name in names.values():
        rest.delete(f"/connectors/{name}")


def test_list_alter_resume_reset(
    worker: DedicatedWorker,
    rest: httpx.Client,
    custom: Any,
    core: Any,
    namespace: str,
    operator: OperatorProcess,
    stack: dict[str, Any],
    tmp_path: Path,
    unique: str,
) -> None:
    """The blog flow: list -> stop -> alter -> resume (records replayed) -> stop -> reset."""
    source = source_file(tmp_path / "flow.txt", 6)
    size = source.stat().st_size
    name, topic, cm = f"flow-{unique}", f"flow-{unique}", "flow-offsets"
    create_cluster(custom, namespace, worker.url)
    create_connector(custom, namespace, name, file_source_spec(source, topic, cm))
    try:
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorRunning", timeout=120)
        assert len(read_topic(stack["kafka_a"], topic, 6)) == 6
        at_end = [{"partition": {"filename": str(source)}, "offset": {"position": size}}]
        wait_for("source offset at end of file", lambda: connect_offsets(rest, name) == at_end)

        annotate(custom, namespace, name, connector_offsets="list")
        wait_annotation_removed(custom, namespace, name)
        listed = configmap_offsets(core, namespace, cm)
        assert listed == {"offsets": at_end}

        patch_connector(custom, namespace, name, {"spec": {"state": "stopped"}})
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorStopped")
        listed["offsets"][0]["offset"]["position"] = 4 * LINE
        core.replace_namespaced_config_map(
            cm, namespace, {"metadata": {"name": cm}, "data": {"offsets.json": json.dumps(listed)}}
        )
        annotate(custom, namespace, name, connector_offsets="alter")
        body = wait_annotation_removed(custom, namespace, name)
        last = body["status"]["lastOffsetsOperation"]
        assert last["operation"] == "alter" and last["result"] == "Succeeded", last
        assert connect_offsets(rest, name) == [{"partition": {"filename": str(source)}, "offset": {"position": 12}}]
        # Connect's own words, verbatim (they differ between releases only in wording we keep as is).
        assert "altered successfully" in last["message"], last

        patch_connector(custom, namespace, name, {"spec": {"state": "running"}})
        records = read_topic(stack["kafka_a"], topic, 8)
        assert [json.loads(r) for r in records[6:]] == ["a4", "a5"]

        patch_connector(custom, namespace, name, {"spec": {"state": "stopped"}})
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorStopped")
        annotate(custom, namespace, name, connector_offsets="reset")
        body = wait_annotation_removed(custom, namespace, name)
        last = body["status"]["lastOffsetsOperation"]
        assert last["operation"] == "reset" and last["result"] == "Succeeded", last
        assert connect_offsets(rest, name) == []
    finally:
        rest.delete(f"/connectors/{name}")


def test_initial_offsets(
    worker: DedicatedWorker,
    rest: httpx.Client,
    custom: Any,
    core: Any,
    namespace: str,
    operator: OperatorProcess,
    stack: dict[str, Any],
    tmp_path: Path,
    unique: str,
) -> None:
    """spec.initialOffsets: created STOPPED, PATCHed, then RUNNING from the given position. Before
    3.7 (no ``initial_state``) a running connector would read first: refused, nothing created."""
    source = source_file(tmp_path / "init.txt")
    name, topic = f"init-{unique}", f"init-{unique}"
    doc = {"offsets": [{"partition": {"filename": str(source)}, "offset": {"position": 6 * LINE}}]}
    core.create_namespaced_config_map(
        namespace, {"metadata": {"name": "init"}, "data": {"offsets.json": json.dumps(doc)}}
    )
    spec = file_source_spec(source, topic, "init-list")
    spec["initialOffsets"] = {"fromConfigMap": {"name": "init"}}
    create_cluster(custom, namespace, worker.url)
    create_connector(custom, namespace, name, spec)
    try:
        if not supports_initial_state(worker.version):
            found = wait_condition(custom, namespace, name, "Ready", status="False", reason="InitialOffsetsUnsupported")
            assert "3.7" in found["message"], found
            assert connect_state(rest, name) is None
            return
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorRunning", timeout=120)
        assert [json.loads(r) for r in read_topic(stack["kafka_a"], topic, 4)] == ["a6", "a7", "a8", "a9"]
        assert get_connector(custom, namespace, name)["status"]["initialOffsets"]["step"] == "Applied"
    finally:
        rest.delete(f"/connectors/{name}")


@pytest.mark.compat_extra
def test_a_worker_without_the_offsets_api_is_named_once(
    stack: dict[str, Any], custom: Any, namespace: str, operator: OperatorProcess, tmp_path: Path, unique: str
) -> None:
    # No skip: 3.5.2 is fetchable here (hack/versions.env); a machine without it must fail, not pass.
    assert TOO_OLD, "hack/versions.env must name CONNECT_TOO_OLD_VERSION (a Connect release older than 3.6)"
    old = DedicatedWorker(heap="-Xmx512m", name="tooold", version=TOO_OLD)
    old.start()
    try:
        create_cluster(custom, namespace, old.url)
        create_connector(
            custom, namespace, f"old-{unique}", file_source_spec(source_file(tmp_path / "o.txt"), "o", "o")
        )
        found = wait_condition(custom, namespace, f"old-{unique}", "Ready", status="False", reason="ConnectTooOld")
        assert TOO_OLD in found["message"] and "3.6.0" in found["message"], found
        assert condition(get_connector(custom, namespace, f"old-{unique}"), "Ready") == found
    finally:
        old.stop()


def test_mirrormaker2_list_alter(
    worker: DedicatedWorker,
    rest: httpx.Client,
    custom: Any,
    core: Any,
    namespace: str,
    operator: OperatorProcess,
    stack: dict[str, Any],
    unique: str,
) -> None:
    """A KafkaMirrorMaker2 on this worker: list the source connector's offsets into the ConfigMap
    (what Connect of this version answers), stop, alter to replay from upstream offset 5, resume."""
    east, west = f"east{unique}", f"west{unique}"
    topic, cm, name = f"orders-{unique}", "mm2-offsets", f"mirror-{unique}"
    source_name = f"{east}->{west}.MirrorSourceConnector"
    source_key = f"{east}--{west}.MirrorSourceConnector.json"
    downstream = f"{east}.{topic}"
    producer = Producer({"bootstrap.servers": stack["kafka_b"]})
    for i in range(10):
        producer.produce(topic, key=f"k{i}".encode(), value=f"order-{i}".encode())
    producer.flush(10)
    source: dict[str, Any] = {
        "tasksMax": 1,
        "config": {
            "replication.factor": 1,
            "offset-syncs.topic.replication.factor": 1,
            "heartbeats.replication.enabled": False,  # B may hold others' heartbeats
            "sync.topic.acls.enabled": False,
            "refresh.topics.interval.seconds": 5,
        },
        "listOffsets": {"toConfigMap": {"name": cm}},
        "alterOffsets": {"fromConfigMap": {"name": cm}},
    }
    mirrors = [{"sourceCluster": east, "targetCluster": west, "topicsPattern": topic, "sourceConnector": source}]
    clusters = [
        {"alias": east, "bootstrapServers": stack["kafka_b"]},
        {"alias": west, "bootstrapServers": stack["kafka_a"]},
    ]
    create_cluster(custom, namespace, worker.url)
    create_mm2(custom, namespace, name, clusters, mirrors)

    def set_state(state: str) -> None:
        source["state"] = state
        custom.patch_namespaced_custom_object(GROUP, VERSION, namespace, MIRRORS, name, {"spec": {"mirrors": mirrors}})

    try:
        wait_mm2_condition(custom, namespace, name, "Ready", reason="ConnectorsReady")
        assert [v.decode() for v in topic_values(stack["kafka_a"], downstream, 10)] == [f"order-{i}" for i in range(10)]
        partition = {"cluster": east, "partition": 0, "topic": topic}

        def own_offsets() -> list[dict[str, Any]]:
            # Connect before 3.7 has no heartbeats.replication.enabled: a heartbeats topic another
            # mirror left on Kafka B is replicated (and listed) beside the test's own topic.
            return [e for e in connect_offsets(rest, source_name) if e["partition"]["topic"] == topic]

        wait_for("MM2 committed offset 9", lambda: own_offsets() == [{"partition": partition, "offset": {"offset": 9}}])

        annotate_mm2(custom, namespace, name, {"connector-offsets": "list", "mirrormaker-connector": source_name})
        wait_mm2_annotations_removed(custom, namespace, name)
        listed = json.loads(core.read_namespaced_config_map(cm, namespace).data[source_key])
        # What Connect listed (before 3.7 the heartbeats partition too, still moving): the test's own.
        assert [e for e in listed["offsets"] if e["partition"]["topic"] == topic] == own_offsets()

        set_state("stopped")
        wait_connect_state(rest, source_name, "STOPPED", timeout=120)
        [own] = [e for e in listed["offsets"] if e["partition"] == partition]
        own["offset"] = {"replayFrom": 5}
        listed["offsets"] = [own]  # the alter changes the test's own partition only
        core.patch_namespaced_config_map(cm, namespace, {"data": {source_key: json.dumps(listed)}})
        annotate_mm2(custom, namespace, name, {"connector-offsets": "alter", "mirrormaker-connector": source_name})
        body = wait_mm2_annotations_removed(custom, namespace, name)
        last = body["status"]["lastOffsetsOperation"]
        assert last["operation"] == "alter" and last["result"] == "Succeeded", last
        assert own_offsets() == [{"partition": partition, "offset": {"offset": 4}}]

        set_state("running")
        values = [v.decode() for v in topic_values(stack["kafka_a"], downstream, 15)]
        assert values[10:] == [f"order-{i}" for i in range(5, 10)]
    finally:
        custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, MIRRORS, name)
        wait_for("MM2 connectors removed with the resource", lambda: connect_state(rest, source_name) is None)


def test_offline_cli_round_trip(worker: DedicatedWorker, rest: httpx.Client, tmp_path: Path, unique: str) -> None:
    """``connect-offsets export`` of a stopped connector from this worker's offsets topic equals what
    Connect answers; with the worker down, ``import`` writes a changed entry; the worker of this
    version, started again, answers GET offsets with exactly that entry."""
    source = source_file(tmp_path / "offline.txt")
    name, topic = f"offline-{unique}", f"offline-{unique}"
    config = {"connector.class": FILE_SOURCE, "tasks.max": "1", "file": str(source), "topic": topic}
    response = rest.put(f"/connectors/{name}/config", json=config)
    assert response.status_code == 201, response.text
    worker_config = str(worker.config_path)
    try:
        at_end = [{"partition": {"filename": str(source)}, "offset": {"position": source.stat().st_size}}]
        wait_for("source offset at end of file", lambda: connect_offsets(rest, name) == at_end)
        assert rest.put(f"/connectors/{name}/stop").is_success
        wait_connect_state(rest, name, "STOPPED")

        exported = run_cli("export", "-w", worker_config, "-c", name)
        assert exported.returncode == 0, exported.stderr
        assert json.loads(exported.stdout) == {name: connect_offsets(rest, name)}
        assert "STOPPED" in exported.stderr

        changed = {name: [{"partition": {"filename": str(source)}, "offset": {"position": 3 * LINE}}]}
        worker.halt()
        try:
            imported = run_cli("import", "-w", worker_config, stdin=json.dumps(changed))
            assert imported.returncode == 0, imported.stderr
            assert "1 record(s) written" in imported.stderr, imported.stderr
        finally:
            worker.start()
        wait_connect_state(rest, name, "STOPPED")
        assert connect_offsets(rest, name) == changed[name]
    finally:
        rest.delete(f"/connectors/{name}")


def _carries(condition_message: str, answer: str) -> bool:
    """``condition_message`` is "<METHOD> <path>: " + ``answer``, or its first ``MAX_QUOTED_TEXT`` characters."""
    said = condition_message.partition(": ")[2]
    return said == answer or (len(condition_message) == MAX_QUOTED_TEXT and answer.startswith(said))


def test_connect_refusals_kept_verbatim(
    worker: DedicatedWorker,
    rest: httpx.Client,
    custom: Any,
    namespace: str,
    operator: OperatorProcess,
    tmp_path: Path,
    unique: str,
) -> None:
    """Two configs the worker refuses, in words that differ between releases:

    * a transform class it cannot load: 3.6 adds a second, derived error ("Not a Transformation"),
      3.7 and later do not;
    * a connector class it cannot find: 3.x answer 500, 4.x 400, the list of plugins it adds names
      the release, and 4.x answers a repeated request for the same class with the exception's class
      name first (``org.apache.kafka.connect.errors.ConnectException: Failed to find ...``).

    The operator's Ready condition carries this worker's answer verbatim ("<METHOD> <path>: <status>
    <Connect's message>", cut at the condition's 1,024 characters: the plugin list runs to about
    6,000). The same request (``POST /connectors``) sent to the same worker directly gives the text;
    the operator retries, so its condition then holds the answer to a repeated request, as ours is.
    """
    source = source_file(tmp_path / "refused.txt")
    cases = {
        f"transform-{unique}": {"transforms": "bad", "transforms.bad.type": f"com.example.NoSuchTransform{unique}"},
        f"class-{unique}": {"connector.class": f"com.example.NoSuchConnector{unique}"},
    }
    create_cluster(custom, namespace, worker.url)
    for name, extra in cases.items():
        spec = file_source_spec(source, name, "unused")
        spec["config"].update({k: v for k, v in extra.items() if k != "connector.class"})
        spec["class"] = extra.get("connector.class", FILE_SOURCE)
        create_connector(custom, namespace, name, spec)
    try:
        for name, extra in cases.items():
            wait_condition(custom, namespace, name, "Ready", status="False", reason="ConnectError", timeout=120)
            config = {"connector.class": FILE_SOURCE, "tasks.max": "1", "file": str(source), "topic": name, **extra}
            answer = rest.post("/connectors", json={"name": f"direct-{name}", "config": config})
            assert answer.status_code in (400, 500), answer.text
            message = answer.json()["message"]
            assert f"NoSuch{'Transform' if 'transforms' in extra else 'Connector'}{unique}" in message
            expected = f"{answer.status_code} {message}"

            def carried(name: str = name, expected: str = expected) -> dict[str, Any] | None:
                found = condition(get_connector(custom, namespace, name), "Ready")
                ok = found is not None and found["reason"] == "ConnectError" and _carries(found["message"], expected)
                return found if ok else None

            wait_for(f"{name}: Ready carries the worker's answer {expected[:80]!r}", carried, timeout=120)
            assert connect_state(rest, name) is None
    finally:
        for name in cases:
            rest.delete(f"/connectors/direct-{name}")


def test_readiness_from_the_health_endpoint(
    worker: DedicatedWorker, rest: httpx.Client, custom: Any, namespace: str, operator: OperatorProcess
) -> None:
    """3.9 and later: the ConnectCluster's readiness is the worker's own GET /health (KIP-1017),
    shown in status.health; older workers have no such endpoint (404) and stay on GET /."""
    create_cluster(custom, namespace, worker.url)

    def ready() -> dict[str, Any] | None:
        body = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, "connectclusters", "local")
        found = condition(body, "Ready")
        return body if found is not None and found["status"] == "True" else None

    body = wait_for("ConnectCluster Ready", ready, timeout=90)
    answer = rest.get("/health")
    if health_endpoint_supported(worker.version):
        assert answer.status_code == 200 and answer.json()["status"] == "healthy", answer.text
        assert body["status"]["health"] == "healthy"
    else:
        assert answer.status_code == 404, answer.text
        assert "health" not in body["status"]
        assert condition(body, "Ready")["reason"] == "Reachable"  # type: ignore[index]


def test_plugin_version_upgrade_or_refusal(
    worker: DedicatedWorker,
    rest: httpx.Client,
    custom: Any,
    core: Any,
    namespace: str,
    operator: OperatorProcess,
    tmp_path: Path,
    unique: str,
) -> None:
    """spec.version -> connector.plugin.version (KIP-891, 4.1+): the running version in
    status.pluginVersion, and a change of spec.version is an upgrade: the offsets are backed up
    first (status.pluginUpgrade, a PluginVersionChanged Event naming the backup). Older workers
    ignore the key, so spec.version is refused there, naming the version needed, nothing created."""
    name = f"pv-{unique}"
    create_cluster(custom, namespace, worker.url)
    spec = {**file_source_spec(source_file(tmp_path / "pv.txt"), name, f"{name}-offsets"), "version": worker.version}
    create_connector_kept(custom, namespace, name, spec)
    try:
        if plugin_version_refusal(worker.version) is not None:
            found = wait_condition(custom, namespace, name, "Ready", status="False", reason="PluginVersionUnsupported")
            assert "needs Kafka Connect 4.1.0 or newer" in found["message"] and worker.version in found["message"]
            assert connect_state(rest, name) is None  # nothing was created
            return
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorRunning", timeout=90)
        wait_for(
            "the first records read", lambda: (o := connect_offsets(rest, name)) and o[0]["offset"]["position"] > 0
        )
        body = wait_for(
            "status.pluginVersion",
            lambda: (
                (b := get_connector(custom, namespace, name))["status"].get("pluginVersion") == worker.version and b
            ),
        )
        assert connector_config(rest, name)["connector.plugin.version"] == worker.version
        major = int(worker.version.split(".")[0])
        wanted = f"[{major}.0,{major + 1}.0)"
        patch_connector(custom, namespace, name, {"spec": {"version": wanted}})
        wait_for(
            "the new connector.plugin.version in Connect",
            lambda: rest.get(f"/connectors/{name}/config").json().get("connector.plugin.version") == wanted,
            timeout=90,
        )
        body = get_connector(custom, namespace, name)
        upgrade = body["status"]["pluginUpgrade"]
        assert (upgrade["fromVersion"], upgrade["toVersion"]) == (worker.version, wanted)
        backup = core.read_namespaced_config_map(upgrade["backup"], namespace)
        assert json.loads(backup.data["offsets.json"])["offsets"][0]["offset"]["position"] > 0
        events = wait_for(
            "PluginVersionChanged Event",
            lambda: [e for e in events_for(core, namespace, name) if e.reason == "PluginVersionChanged"],
        )
        assert len(events) == 1 and upgrade["backup"] in events[0].message
        wait_condition(custom, namespace, name, "Ready", reason="ConnectorRunning", timeout=90)
    finally:
        rest.delete(f"/connectors/{name}")
