"""Helpers shared by the integration tests: resources, Connect and Kafka, all real."""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import urllib3
from confluent_kafka import Consumer, KafkaException, TopicPartition
from kubernetes import watch
from kubernetes.client.exceptions import ApiException

from connect_offsets.vocabulary import MIRRORS
from tests.conftest import wait_for

GROUP = "connect-offsets.io"
VERSION = "v1beta1"
FILE_SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
FILE_SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"
#: A test source connector of Connect's own test jar: any partitions and offsets, no external system.
MONITORABLE_SOURCE = "org.apache.kafka.connect.integration.MonitorableSourceConnector"
#: The offline offsets tool (``connect-offsets export|import``) of this environment.
CLI = str(Path(sys.executable).parent / "connect-offsets")
T = TypeVar("T")
#: Longest single watch before the resource is read again (a missed event costs at most this).
WATCH_WINDOW_S = 10


def run_cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, *args], input=stdin, capture_output=True, text=True, timeout=180)


def file_source_spec(path: Path, topic: str, configmap: str, state: str = "running") -> dict[str, Any]:
    return {
        "class": FILE_SOURCE,
        "tasksMax": 1,
        "state": state,
        "config": {"file": str(path), "topic": topic},
        "listOffsets": {"toConfigMap": {"name": configmap}},
        "alterOffsets": {"fromConfigMap": {"name": configmap}},
    }


def create_cluster(custom: Any, namespace: str, url: str, name: str = "local", **spec: Any) -> dict[str, Any]:
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ConnectCluster",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"url": url, **spec},
    }
    result: dict[str, Any] = custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "connectclusters", body)
    return result


def create_connector(
    custom: Any,
    namespace: str,
    name: str,
    spec: dict[str, Any],
    cluster: str = "local",
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "KafkaConnector",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {f"{GROUP}/cluster": cluster},
            "annotations": annotations or {},
        },
        "spec": spec,
    }
    result: dict[str, Any] = custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "kafkaconnectors", body)
    return result


def watch_until(
    custom: Any,
    namespace: str,
    plural: str,
    name: str,
    what: str,
    check: Callable[[dict[str, Any]], T | None],
    timeout: float,
) -> T:
    """Until ``check(body)`` of one custom resource is truthy: ``wait_for`` woken by the resource's changes.

    Why not a poll: a poll sees a change half an interval late on average, hundreds of times a run,
    and reads the whole resource each time. Here the resource is read once, then every change a
    watch delivers is checked as it happens; the watch is renewed every ``WATCH_WINDOW_S`` with a
    fresh read, so an expired resource version or a restarted API server costs one window at most.
    As with ``wait_for``, an exception from ``check`` means "not yet" and is reported on timeout.
    """
    deadline = time.monotonic() + timeout
    selector = f"metadata.name={name}"
    last_error: Exception | None = None

    def satisfied(body: dict[str, Any]) -> T | None:
        nonlocal last_error
        try:
            return check(body) or None
        except Exception as error:  # the next change may satisfy it; keep the error for the report
            last_error = error
            return None

    while (remaining := deadline - time.monotonic()) > 0:
        try:
            listed = custom.list_namespaced_custom_object(GROUP, VERSION, namespace, plural, field_selector=selector)
            for body in listed["items"]:
                if (found := satisfied(body)) is not None:
                    return found
            window = max(1, min(WATCH_WINDOW_S, int(remaining)))
            stream = watch.Watch()
            for event in stream.stream(
                custom.list_namespaced_custom_object,
                GROUP,
                VERSION,
                namespace,
                plural,
                field_selector=selector,
                resource_version=listed["metadata"]["resourceVersion"],
                timeout_seconds=window,
                _request_timeout=window + 5,
            ):
                if event["type"] in ("ADDED", "MODIFIED") and (found := satisfied(event["object"])) is not None:
                    stream.stop()
                    return found
                if time.monotonic() >= deadline:
                    stream.stop()
        except (ApiException, urllib3.exceptions.HTTPError) as error:  # 410 Gone, an API server restart
            last_error = error
            time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))
    raise AssertionError(
        f"timed out after {timeout:.0f}s waiting for {what}" + (f": {last_error!r}" if last_error else "")
    )


def get_connector(custom: Any, namespace: str, name: str) -> dict[str, Any]:
    result: dict[str, Any] = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, "kafkaconnectors", name)
    return result


def patch_connector(custom: Any, namespace: str, name: str, patch: dict[str, Any]) -> None:
    custom.patch_namespaced_custom_object(GROUP, VERSION, namespace, "kafkaconnectors", name, patch)


def annotate(custom: Any, namespace: str, name: str, **annotations: str | None) -> None:
    patch_connector(
        custom,
        namespace,
        name,
        {
            "metadata": {
                "annotations": {f"{GROUP}/{key.replace('_', '-')}": value for key, value in annotations.items()}
            }
        },
    )


def condition(body: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for item in (body.get("status") or {}).get("conditions", []):
        if item["type"] == kind:
            return dict(item)
    return None


def wait_condition(
    custom: Any,
    namespace: str,
    name: str,
    kind: str,
    status: str = "True",
    reason: str | None = None,
    timeout: float = 60,
) -> dict[str, Any]:
    def check(body: dict[str, Any]) -> dict[str, Any] | None:
        found = condition(body, kind)
        if found and found["status"] == status and (reason is None or found["reason"] == reason):
            return found
        return None

    what = f"{kind}={status} ({reason or 'any reason'}) on {namespace}/{name}"
    return watch_until(custom, namespace, "kafkaconnectors", name, what, check, timeout)


def annotation(body: dict[str, Any], key: str) -> str | None:
    value = (body["metadata"].get("annotations") or {}).get(f"{GROUP}/{key}")
    return None if value is None else str(value)


def wait_annotation_removed(
    custom: Any, namespace: str, name: str, key: str = "connector-offsets", timeout: float = 60
) -> dict[str, Any]:
    return watch_until(
        custom,
        namespace,
        "kafkaconnectors",
        name,
        f"annotation {key} removed from {name}",
        lambda body: body if annotation(body, key) is None else None,
        timeout,
    )


def rebalancing(response: httpx.Response) -> bool:
    """Connect's answer while its group rebalances: 409 (but not "already exists", the 409 of a
    taken name), or 500 with ``RebalanceNeededException``'s message (``GET /connectors/{name}``
    answers that way), which passes by itself."""
    if response.status_code == 409:
        return "already exists" not in response.text
    return response.status_code == 500 and "rebalance" in response.text


def connect_send(
    connect: httpx.Client,
    method: str,
    path: str,
    json: Any = None,
    timeout: float = 60,
    request_timeout: float | None = None,
) -> httpx.Response:
    """A request asked again while Connect refuses it for a rebalance (right after connectors are
    created, changed or deleted, by this test or another one): the worker did nothing then, so
    asking again does a write once. Any other answer is returned as it is.

    Every write a test asserts on goes through here: the suite runs tests in parallel on one
    Connect cluster, so any of them can meet another test's rebalance (CI: a 409 "stale
    configuration" on a test's own offsets PATCH). ``request_timeout`` bounds one request (a
    large PATCH takes longer than the client's default); ``timeout`` bounds the asking again.
    """
    deadline = time.monotonic() + timeout
    per_request = connect.timeout if request_timeout is None else httpx.Timeout(request_timeout)
    response = connect.request(method, path, json=json, timeout=per_request)
    while rebalancing(response) and time.monotonic() < deadline:
        time.sleep(0.25)
        response = connect.request(method, path, json=json, timeout=per_request)
    return response


def seed_offsets(connect: httpx.Client, name: str, entries: list[dict[str, Any]], chunk: int = 10_000) -> None:
    """Write ``entries`` to a STOPPED connector's offsets directly in Connect, ``chunk`` partitions
    per PATCH: small PATCHes, so that a worker loaded by the tests beside answers each within two
    minutes. Each must be answered 200."""
    for start in range(0, len(entries), chunk):
        seeded = connect_send(
            connect,
            "PATCH",
            f"/connectors/{name}/offsets",
            json={"offsets": entries[start : start + chunk]},
            request_timeout=120,
        )
        assert seeded.status_code == 200, seeded.text


def connect_get(connect: httpx.Client, path: str, timeout: float = 30) -> httpx.Response:
    """``GET path``, asked again while Connect is rebalancing (:func:`connect_send`)."""
    return connect_send(connect, "GET", path, timeout=timeout)


def connect_state(connect: httpx.Client, name: str) -> str | None:
    response = connect_get(connect, f"/connectors/{name}/status")
    if response.status_code == 404:
        return None
    response.raise_for_status()
    state: str = response.json()["connector"]["state"]
    return state


def connector_config(connect: httpx.Client, name: str, timeout: float = 30) -> dict[str, Any]:
    """The connector's config as Connect answers it once it can.

    Right after connectors are created or changed, the worker rebalances, and ``GET .../config`` is
    answered 409 ("rebalance is expected") or, on a worker that has not read the config topic yet,
    404. Both pass by themselves, so this asks again until 200 and reports the last answer if not.
    """
    answers: list[httpx.Response] = []

    def answered() -> bool:
        answers.append(connect.get(f"/connectors/{name}/config"))
        return answers[-1].status_code == 200

    try:
        wait_for(f"config of {name} in Connect", answered, timeout)
    except AssertionError as error:
        last = answers[-1] if answers else None
        raise AssertionError(f"{error}; last answer: {last and (last.status_code, last.text[:300])}") from None
    config: dict[str, Any] = answers[-1].json()
    return config


def wait_connect_state(connect: httpx.Client, name: str, state: str, timeout: float = 60) -> None:
    seen: list[str | None] = []

    def check() -> bool:
        seen.append(connect_state(connect, name))
        return seen[-1] == state

    try:
        wait_for(f"connector {name} {state} in Connect", check, timeout)
    except AssertionError as error:
        raise AssertionError(f"{error}; states seen: {sorted(set(map(str, seen)))}") from None


def connect_offsets(connect: httpx.Client, name: str) -> list[dict[str, Any]]:
    """The connector's offsets as Connect lists them, without ``"offset": null`` entries.

    Right after a reset (or a null PATCH) Connect 4.1 can still list a source partition with a null
    offset: it takes the partition set before ``offsets()`` reads the tombstone back from the topic.
    Null means "no offset" to Connect, so the tests compare what is really stored.
    """
    response = connect.get(f"/connectors/{name}/offsets")
    response.raise_for_status()
    offsets: list[dict[str, Any]] = [e for e in response.json()["offsets"] if e.get("offset") is not None]
    return offsets


def read_topic(bootstrap: str, topic: str, expected: int, timeout: float = 60) -> list[bytes]:
    """Read ``expected`` records (or more) from the start of every partition of ``topic``."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"test-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([topic])
        values: list[bytes] = []
        deadline = time.monotonic() + timeout
        while len(values) < expected and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None or message.error():
                continue
            values.append(message.value() or b"")
        return values
    finally:
        consumer.close()


def end_offset(bootstrap: str, topic: str, partition: int = 0) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"probe-{uuid.uuid4().hex[:6]}"})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
        return int(high)
    finally:
        consumer.close()


def topic_values(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    """The first ``expected`` records of ``topic``, once a writer (MirrorMaker 2) has written that many.

    Waiting for the end offset first: a consumer that subscribed before MirrorMaker 2 created the
    topic once began after its first record (one CI-like run in several: ['order-1', ...]).
    """

    def written() -> bool:
        try:
            return end_offset(bootstrap, topic) >= expected
        except KafkaException:  # the topic does not exist yet
            return False

    wait_for(f"{expected} records in {topic}", written, timeout=90)
    return read_topic(bootstrap, topic, expected, timeout=90)


def configmap_offsets(core: Any, namespace: str, name: str, key: str = "offsets.json") -> dict[str, Any]:
    cm = core.read_namespaced_config_map(name, namespace)
    document: dict[str, Any] = json.loads(cm.data[key])
    return document


def events_for(core: Any, namespace: str, name: str) -> list[Any]:
    events = core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}").items
    return list(events)


def wait_events(core: Any, namespace: str, name: str, reason: str, count: int = 1, timeout: float = 30) -> list[Any]:
    """The resource's Events of ``reason``, once there are at least ``count``.

    The operator posts an Event after the status write that records it (a crash in between must not
    leave an Event for a change status does not show), so a test that has just seen the status may
    list the Events a moment before it arrives.
    """
    found: list[Any] = []

    def enough() -> bool:
        found[:] = [e for e in events_for(core, namespace, name) if e.reason == reason]
        return len(found) >= count

    try:
        wait_for(f"{count} Event(s) {reason} of {name}", enough, timeout)
    except AssertionError as error:
        seen = [e.reason for e in events_for(core, namespace, name)]
        raise AssertionError(f"{error}; Events of {name}: {seen}") from None
    return found


def delete_with_offsets(connect: httpx.Client, name: str) -> None:
    """Delete a connector and the offsets it leaves behind in the shared worker.

    The worker keeps every connector's offsets in memory for the whole session (its offsets topic
    is read into a map), deleted connectors included: tests that write hundreds of thousands of
    partitions to the shared worker remove them (tombstones) so its heap does not grow run after run.
    Best effort: a clean-up that fails must not hide the test's own result.
    """
    try:
        connect.put(f"/connectors/{name}/stop", timeout=60)
        wait_for(
            f"{name} stopped",
            lambda: connect.get(f"/connectors/{name}/status").json().get("connector", {}).get("state") == "STOPPED",
            timeout=60,
        )
        connect.delete(f"/connectors/{name}/offsets", timeout=180)
    except (httpx.HTTPError, AssertionError):
        pass
    connect.delete(f"/connectors/{name}")


@dataclass(frozen=True)
class OffsetsRequest:
    """One ``/connectors/<name>/offsets`` request as the worker's request log recorded it."""

    method: str
    connector: str
    status: int

    @property
    def is_change(self) -> bool:
        """A PATCH or DELETE the worker answered 2xx: offsets changed (refusals changed nothing)."""
        return self.method in ("PATCH", "DELETE") and 200 <= self.status < 300


_OFFSETS_REQUEST = re.compile(r'"(GET|PATCH|DELETE) /connectors/([^/ ?]+)/offsets[^ "]* HTTP/[\d.]+" (\d{3})')


@dataclass
class _LogTail:
    """What of one log file has been read: its identity, how far, and the request lines in it."""

    identity: tuple[int, int]  # (device, inode): a log replaced under the same path is read afresh
    read_to: int
    lines: list[str]


_tails: dict[Path, _LogTail] = {}
_tails_lock = threading.Lock()


def request_lines(log: Path) -> list[str]:
    """The REST request lines (``"METHOD /path HTTP/x" status``) of a Connect worker's log so far.

    Why incremental: the shared worker's log grows by megabytes a minute while the suite runs
    (connector configs are logged whole), and tests ask it in polling loops; reading it from the
    start each time cost more CPU than any test (issue 32). Only what was appended since the last
    call is read; the log is only ever appended to.
    """
    with _tails_lock:
        stat = log.stat()
        identity = (stat.st_dev, stat.st_ino)
        tail = _tails.get(log)
        if tail is None or tail.identity != identity or stat.st_size < tail.read_to:
            tail = _tails[log] = _LogTail(identity, 0, [])
        with log.open("rb") as handle:
            handle.seek(tail.read_to)
            appended = handle.read()
        complete = appended.rfind(b"\n") + 1  # a line still being written is read next time
        tail.read_to += complete
        tail.lines += [
            line
            for line in appended[:complete].decode(errors="replace").splitlines()
            if " HTTP/" in line and '"' in line
        ]
        return list(tail.lines)


def offsets_requests(log: Path, connectors: Collection[str]) -> list[OffsetsRequest]:
    """Every offsets request for ``connectors`` in a worker's request log, oldest first.

    The log is the only witness of what reached Connect: tests prove "changed exactly once" or
    "never sent" from it. The status matters: a PATCH answered 409 or 500 (a rebalance) was refused
    before anything changed, and the operator retries it.
    """
    found: list[OffsetsRequest] = []
    for line in request_lines(log):
        match = _OFFSETS_REQUEST.search(line) if "/offsets" in line else None
        if match and match.group(2) in connectors:
            found.append(OffsetsRequest(match.group(1), match.group(2), int(match.group(3))))
    return found


def connect_log(stack: dict[str, Any]) -> Path:
    """The shared worker's log, request log included."""
    return Path(stack["logs"]) / "connect.log"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def create_mm2(
    custom: Any,
    namespace: str,
    name: str,
    clusters: list[dict[str, Any]],
    mirrors: list[dict[str, Any]],
    cluster: str = "local",
    **spec: Any,
) -> None:
    """A KafkaMirrorMaker2 bound to ConnectCluster ``cluster``; ``spec`` adds fields (camelCase)."""
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "KafkaMirrorMaker2",
        "metadata": {"name": name, "namespace": namespace, "labels": {f"{GROUP}/cluster": cluster}},
        "spec": {"clusters": clusters, "mirrors": mirrors, **spec},
    }
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, MIRRORS, body)


def get_mm2(custom: Any, namespace: str, name: str) -> dict[str, Any]:
    body: dict[str, Any] = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, MIRRORS, name)
    return body


def annotate_mm2(custom: Any, namespace: str, name: str, values: dict[str, str | None]) -> None:
    custom.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        namespace,
        MIRRORS,
        name,
        {"metadata": {"annotations": {f"{GROUP}/{k}": v for k, v in values.items()}}},
    )


def wait_mm2_annotations_removed(custom: Any, namespace: str, name: str) -> dict[str, Any]:
    def check(body: dict[str, Any]) -> dict[str, Any] | None:
        annotations = body["metadata"].get("annotations") or {}
        pending = [
            k
            for k in annotations
            if k.endswith(("/connector-offsets", "/mirrormaker-connector", "/reset-offset-syncs"))
        ]
        return None if pending else body

    try:
        return watch_until(custom, namespace, MIRRORS, name, "MM2 offsets annotations removed", check, timeout=90)
    except AssertionError as error:
        annotations = get_mm2(custom, namespace, name)["metadata"].get("annotations")
        raise AssertionError(f"{error}; annotations now: {annotations}") from None


def wait_mm2_condition(
    custom: Any,
    namespace: str,
    name: str,
    kind: str,
    reason: str | None = None,
    status: str = "True",
    fragment: str = "",
) -> dict[str, Any]:
    def check(body: dict[str, Any]) -> dict[str, Any] | None:
        found = condition(body, kind)
        if (
            found
            and found["status"] == status
            and (reason is None or found["reason"] == reason)
            and (fragment in found["message"])
        ):
            return found
        return None

    return watch_until(custom, namespace, MIRRORS, name, f"{kind}={status} ({reason}) on {name}", check, timeout=90)


def raw_records(bootstrap: str, topic: str, connector: str) -> list[tuple[int, bytes, bytes | None]]:
    """(partition, key, value) of every record of ``connector`` in ``topic``."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"probe-{uuid.uuid4().hex[:6]}",
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
        }
    )
    try:
        partitions = sorted(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
        consumer.assign([TopicPartition(topic, p, -2) for p in partitions])
        pending, found = set(partitions), []
        while pending:
            for message in consumer.consume(500, timeout=2):
                if message.error():
                    pending.discard(message.partition())
                    continue
                key = message.key() or b""
                if key.startswith(json.dumps([connector]).encode()[:-1] + b","):
                    found.append((message.partition(), key, message.value()))
        return found
    finally:
        consumer.close()


def ask_request(custom: Any, namespace: str, name: str, operation: str = "list") -> tuple[float, str]:
    """Annotate a KafkaConnector with an offsets request; when (monotonic) and the resourceVersion."""
    asked = time.monotonic()
    request = {"metadata": {"annotations": {f"{GROUP}/connector-offsets": operation}}}
    body = custom.patch_namespaced_custom_object(GROUP, VERSION, namespace, "kafkaconnectors", name, request)
    return asked, str(body["metadata"]["resourceVersion"])


def wait_answered(custom: Any, namespace: str, name: str, after: str, timeout: float) -> float:
    """Watch one KafkaConnector from resourceVersion ``after`` until its request annotation is gone;
    when (monotonic, taken on the watch event, not by polling)."""
    stream = watch.Watch()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            for event in stream.stream(
                custom.list_namespaced_custom_object,
                GROUP,
                VERSION,
                namespace,
                "kafkaconnectors",
                field_selector=f"metadata.name={name}",
                resource_version=after,
                timeout_seconds=max(1, int(deadline - time.monotonic())),
            ):
                body = event["object"]
                after = body["metadata"]["resourceVersion"]
                if annotation(body, "connector-offsets") is None:
                    return time.monotonic()
    finally:
        stream.stop()
    raise AssertionError(f"{namespace}/{name}: request not answered within {timeout:.0f}s")


@dataclass(frozen=True)
class Answers:
    """Requests made at once: seconds from each request to its answer, and from the first request
    to the last answer."""

    took: dict[str, float]
    makespan: float


def ask_all_at_once(custom: Any, namespace: str, names: list[str], timeout: float, clients: int = 8) -> Answers:
    """A `list` request on each of ``names``, made by ``clients`` threads at once; one watch on the
    namespace, begun before the first request, sees each answer. A request not answered within
    ``timeout`` fails the call."""
    since = custom.list_namespaced_custom_object(GROUP, VERSION, namespace, "kafkaconnectors")["metadata"][
        "resourceVersion"
    ]
    asked: dict[str, tuple[float, int]] = {}
    answered: dict[str, float] = {}
    watching = threading.Event()

    def watch_namespace() -> None:
        stream = watch.Watch()
        watching.set()
        for event in stream.stream(
            custom.list_namespaced_custom_object,
            GROUP,
            VERSION,
            namespace,
            "kafkaconnectors",
            resource_version=since,
            timeout_seconds=int(timeout),
        ):
            body = event["object"]
            name, version = body["metadata"]["name"], int(body["metadata"]["resourceVersion"])
            fresh = name in asked and name not in answered and version > asked[name][1]
            if fresh and annotation(body, "connector-offsets") is None:
                answered[name] = time.monotonic()
            if len(answered) == len(names):
                stream.stop()

    watcher = threading.Thread(target=watch_namespace)
    watcher.start()
    watching.wait()

    def ask(chunk: list[str]) -> None:
        for name in chunk:
            at, version = ask_request(custom, namespace, name)
            asked[name] = (at, int(version))

    askers = [threading.Thread(target=ask, args=(names[i::clients],)) for i in range(clients)]
    for thread in askers:
        thread.start()
    for thread in askers:
        thread.join()
    watcher.join(timeout=timeout + 5)
    missing = sorted(set(names) - set(answered))
    assert not missing, f"{len(missing)} request(s) not answered within {timeout:.0f}s: {missing[:5]}"
    first = min(at for at, _ in asked.values())
    return Answers({name: answered[name] - asked[name][0] for name in names}, max(answered.values()) - first)


PEERING_CRDS_TEMPLATE = "templates/peering-crds.yaml"


def install_peering_crds(stack: dict[str, Any]) -> None:
    """kopf's peering CRDs as the chart renders them (``replicaCount`` > 1), established."""
    env = {**os.environ, "KUBECONFIG": stack["kubeconfig"]}
    chart = str(Path(__file__).resolve().parents[2] / "charts" / "connect-offsets-operator")
    crds = subprocess.run(
        [
            stack["helm"],
            "template",
            "x",
            chart,
            "--set",
            "replicaCount=2",
            "--show-only",
            "templates/peering-crds.yaml",
        ],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    # A test that deleted them with --wait=false leaves them terminating for a moment; objects of a
    # terminating CRD are refused ("create not allowed while custom resource definition is terminating").
    for crd in ("crd/kopfpeerings.kopf.dev", "crd/clusterkopfpeerings.kopf.dev"):
        deleting = subprocess.run(
            [stack["kubectl"], "get", crd, "--ignore-not-found", "-o", "jsonpath={.metadata.deletionTimestamp}"],
            env=env,
            capture_output=True,
            text=True,
        ).stdout.strip()
        if deleting:
            # Its objects keep it terminating while they have finalizers: an operator of an older
            # version (its presence daemon had kopf's finalizer) left them behind when it stopped,
            # and no operator will remove them now.
            plural = crd.split("/")[1].split(".")[0]
            left = subprocess.run(
                [stack["kubectl"], "get", plural, "-A", "-o", "json"],
                env=env,
                capture_output=True,
                text=True,
            )
            for item in json.loads(left.stdout or '{"items": []}').get("items", []):
                meta = item["metadata"]
                where = ["-n", meta["namespace"]] if meta.get("namespace") else []
                subprocess.run(
                    [
                        stack["kubectl"],
                        "patch",
                        plural,
                        meta["name"],
                        *where,
                        "--type=merge",
                        "-p",
                        '{"metadata":{"finalizers":null}}',
                    ],
                    env=env,
                    capture_output=True,
                )
            subprocess.run([stack["kubectl"], "wait", "--for=delete", "--timeout=120s", crd], env=env, check=True)
    subprocess.run(
        [stack["kubectl"], "apply", "--server-side", "-f", "-"],
        input=crds,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    subprocess.run(
        [stack["kubectl"], "wait", "--for=condition=Established", "crd/kopfpeerings.kopf.dev"],
        env=env,
        check=True,
        capture_output=True,
    )


def _union_schema(server: Any, mine: Any) -> Any:
    """``mine`` with every property ``server`` has and ``mine`` lacks kept (at any depth)."""
    if not isinstance(server, dict) or not isinstance(mine, dict):
        return mine
    merged = dict(mine)
    if isinstance(server.get("properties"), dict) and isinstance(mine.get("properties"), dict):
        names = server["properties"].keys() | mine["properties"].keys()
        merged["properties"] = {
            n: _union_schema(server["properties"].get(n), mine["properties"][n])
            if n in mine["properties"]
            else server["properties"][n]
            for n in sorted(names)
        }
    return merged


class CrdKeeper:
    """Keeps this checkout's CRD fields served on a stack other engineers share.

    Each test session applies its own checkout's CRDs; another branch's older copy makes the API
    server prune the fields this branch added (spec.progress, status.progress, ...) from every
    write. While running, this re-applies every ``interval`` seconds, when a field is missing, the
    union of the served schema and this checkout's: fields of other branches stay served too, so
    their tests are not disturbed in turn.
    """

    def __init__(self, stack: dict[str, Any], crds: Path, interval: float = 1.0) -> None:
        import yaml

        self.kubectl, self.env = stack["kubectl"], {"KUBECONFIG": stack["kubeconfig"], "PATH": "/usr/bin:/bin"}
        self.mine = {
            doc["metadata"]["name"]: doc for doc in (yaml.safe_load(p.read_text()) for p in sorted(crds.glob("*.yaml")))
        }
        self.interval = interval
        self.stopped = threading.Event()
        self.applied = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> CrdKeeper:
        self._check()
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stopped.set()
        self.thread.join(timeout=10)

    def _run(self) -> None:
        while not self.stopped.wait(self.interval):
            with contextlib.suppress(subprocess.SubprocessError, ValueError, KeyError):
                self._check()  # else the next round tries again

    def _check(self) -> None:
        for name, mine in self.mine.items():
            served = json.loads(
                subprocess.run(
                    [self.kubectl, "get", "crd", name, "-o", "json"], env=self.env, capture_output=True, check=True
                ).stdout
            )
            # Each version by name: this checkout's CRDs serve v1beta1 (stored) and v1alpha1.
            served_versions = {v["name"]: v for v in served["spec"]["versions"]}
            stale = [
                v
                for v in mine["spec"]["versions"]
                if v["name"] not in served_versions
                or not _covers(served_versions[v["name"]]["schema"]["openAPIV3Schema"], v["schema"]["openAPIV3Schema"])
                or served_versions[v["name"]].get("additionalPrinterColumns") != v.get("additionalPrinterColumns")
            ]
            if not stale:
                continue
            document = json.loads(json.dumps(mine))
            for version in document["spec"]["versions"]:
                if version["name"] in served_versions:
                    version["schema"]["openAPIV3Schema"] = _union_schema(
                        served_versions[version["name"]]["schema"]["openAPIV3Schema"],
                        version["schema"]["openAPIV3Schema"],
                    )
            subprocess.run(
                [self.kubectl, "apply", "--server-side", "--force-conflicts", "-f", "-"],
                input=json.dumps(document).encode(),
                env=self.env,
                capture_output=True,
                check=True,
            )
            self.applied += 1


def _covers(served: Any, mine: Any) -> bool:
    """Whether every property of ``mine`` is served (at any depth)."""
    if not isinstance(mine, dict):
        return True
    mine_props, served_props = (
        mine.get("properties"),
        (served or {}).get("properties") if isinstance(served, dict) else None,
    )
    if isinstance(mine_props, dict):
        if not isinstance(served_props, dict) or not mine_props.keys() <= served_props.keys():
            return False
        return all(_covers(served_props[k], v) for k, v in mine_props.items())
    return True


def create_connector_kept(custom: Any, namespace: str, name: str, spec: dict[str, Any], timeout: float = 60) -> None:
    """``create_connector``, made again until the stored spec has every field of ``spec``: on a
    stack other engineers share, a CRD of another branch applied meanwhile prunes fields this
    branch added (see ``CrdKeeper``, which puts them back within a second)."""
    deadline = time.monotonic() + timeout
    while True:
        create_connector(custom, namespace, name, spec)
        stored = get_connector(custom, namespace, name)["spec"]
        if set(spec) <= set(stored) or time.monotonic() > deadline:
            return
        custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, "kafkaconnectors", name)
        wait_for(f"{name} deleted", lambda: connector_absent(custom, namespace, name))
        time.sleep(2)


def connector_absent(custom: Any, namespace: str, name: str) -> bool:
    try:
        custom.get_namespaced_custom_object(GROUP, VERSION, namespace, "kafkaconnectors", name)
    except Exception as error:  # kubernetes.client.ApiException
        return getattr(error, "status", None) == 404
    return False
