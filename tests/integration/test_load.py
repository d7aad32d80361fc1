"""Load (issue 10): 200 KafkaConnectors on one Connect worker, one operator, requests in bulk.

Why this test exists: every other integration test drives one or two resources, so nothing else
shows that concurrent requests are neither lost (a daemon that never wakes up, an annotation removed
before its status is written) nor repeated (a PATCH sent twice when two passes overlap). Here 100
``list`` requests land at once, then 50 ``alter`` requests with stop -> change -> resume, and the
worker's own request log is the ground truth for "exactly once".

The worker is a dedicated one (tests/integration/connect_worker.py): 50 connectors stopped and
resumed at once keep a worker rebalancing for a minute or two, which the shared worker's other
users would feel, and its request log then holds only this test's requests. Kept cheap for the
2-core machine: 150 connectors are created STOPPED (no task runs); the 50 RUNNING ones are
FileStreamSource connectors over a one-line file, which they read once; the altered positions lie
past the end of the file, so a resumed task reads nothing and its offset stays where the alter put
it. The operator runs with the default drift interval (30 s): at 200 resources the 5 s test
interval would spend the machine on idle drift checks instead of on the requests. At the end the
operator is stopped, the resources' finalizers are removed and the worker with its topics is
deleted, which removes every connector at once (200 DELETEs take the worker about a second each).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from tests.conftest import OperatorProcess, wait_for
from tests.integration.connect_worker import DedicatedWorker
from tests.integration.support import (
    GROUP,
    VERSION,
    annotate,
    condition,
    connect_offsets,
    connect_state,
    create_cluster,
    create_connector,
    file_source_spec,
    offsets_requests,
)

TOTAL = 200
RUNNING = 50  # connectors 0..49 run (and are altered); the rest are created STOPPED
LISTED = 100  # connectors 0..99 get a `list` request
LINE = "x\n"
T = TypeVar("T")


def in_parallel(func: Callable[[int], T], indexes: Iterable[int], workers: int = 8) -> list[T]:
    """Apply ``func`` to every index from a few threads: requests that land "at once"."""
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(func, indexes))


def connectors_by_name(custom: Any, namespace: str) -> dict[str, dict[str, Any]]:
    """All KafkaConnectors of the namespace in one list call (cheaper than 200 GETs per poll)."""
    items = custom.list_namespaced_custom_object(GROUP, VERSION, namespace, "kafkaconnectors")["items"]
    return {item["metadata"]["name"]: item for item in items}


def request_log_counts(log_path: Path, names: set[str]) -> Counter[tuple[str, str, str]]:
    """(method, connector, status class) -> offsets requests in the worker's log.

    "Applied exactly once" is one PATCH answered 2xx; a 409 or 500 (a rebalance) changed nothing.
    """
    return Counter((r.method, r.connector, f"{r.status // 100}xx") for r in offsets_requests(log_path, names))


def release(custom: Any, namespace: str) -> None:
    """Drop the finalizers of every KafkaConnector (the operator is stopped; the worker goes next)."""
    for name in connectors_by_name(custom, namespace):
        custom.patch_namespaced_custom_object(
            GROUP, VERSION, namespace, "kafkaconnectors", name, {"metadata": {"finalizers": None}}
        )


@pytest.fixture
def worker() -> Iterator[DedicatedWorker]:
    dedicated = DedicatedWorker(name="load")
    dedicated.start()
    yield dedicated
    dedicated.stop()


@pytest.mark.load  # minutes of 100 rebalances on 2 cores: `make test-load`, not part of `make test`
@pytest.mark.local_stack  # counts requests in the local worker's request log
@pytest.mark.timeout(1500)  # a shared 2-core machine under load: minutes, see bench/README.md
def test_200_connectors_100_lists_then_50_stop_change_resume(
    custom: Any,
    core: Any,
    namespace: str,
    stack: dict[str, Any],
    worker: DedicatedWorker,
    tmp_path: Path,
    unique: str,
) -> None:
    names = [f"ld-{unique}-{i:03d}" for i in range(TOTAL)]
    files = [tmp_path / f"in-{i:03d}.txt" for i in range(TOTAL)]
    for path in files[:RUNNING]:
        path.write_text(LINE)
    topic = f"ld-{unique}"
    connect = httpx.Client(base_url=worker.url, timeout=60)
    create_cluster(custom, namespace, worker.url)
    operator = OperatorProcess(
        stack["kubeconfig"], namespace, tmp_path / "operator.log", extra_env={"CONNECT_OFFSETS_DRIFT_INTERVAL": "30"}
    )
    operator.start()
    try:
        # --- 200 resources, one operator ------------------------------------------------
        started = time.monotonic()

        def create(i: int) -> None:
            state = "running" if i < RUNNING else "stopped"
            spec = file_source_spec(files[i], topic, f"{names[i]}-offsets", state=state)
            create_connector(custom, namespace, names[i], spec)

        in_parallel(create, range(TOTAL))

        def all_ready() -> bool:
            bodies = connectors_by_name(custom, namespace)
            ready = [
                n
                for i, n in enumerate(names)
                if (c := condition(bodies.get(n, {}), "Ready"))
                and c["status"] == "True"
                and c["reason"] == ("ConnectorRunning" if i < RUNNING else "ConnectorStopped")
            ]
            return len(ready) == TOTAL

        wait_for(f"{TOTAL} connectors Ready in Connect", all_ready, timeout=420, interval=3)
        created_in = time.monotonic() - started

        def listed(i: int) -> list[dict[str, Any]]:
            """What Connect holds before the alters: position 2 for the running ones, nothing else."""
            return [{"partition": {"filename": str(files[i])}, "offset": {"position": 2}}] if i < RUNNING else []

        # The running ones have read their one line (position 2) and committed it.
        wait_for(
            f"{RUNNING} running connectors committed their offsets",
            lambda: all(connect_offsets(connect, names[i]) == listed(i) for i in range(RUNNING)),
            timeout=60,
            interval=2,
        )

        # --- 100 list requests at once -------------------------------------------------
        before = request_log_counts(worker.log, set(names))  # our own GETs above are not the operator's
        started = time.monotonic()
        in_parallel(
            lambda i: annotate(custom, namespace, names[i], connector_offsets="list", request_id=f"list-{i}"),
            range(LISTED),
            workers=10,
        )

        def lists_done() -> dict[str, dict[str, Any]] | None:
            bodies = connectors_by_name(custom, namespace)
            done = [
                n
                for n in names[:LISTED]
                if "connect-offsets.io/connector-offsets" not in (bodies[n]["metadata"].get("annotations") or {})
            ]
            return bodies if len(done) == LISTED else None

        bodies = wait_for(f"{LISTED} list requests done", lists_done, timeout=300, interval=2)
        listed_in = time.monotonic() - started
        for i, name in enumerate(names[:LISTED]):
            last = bodies[name]["status"]["lastOffsetsOperation"]
            assert (last["operation"], last["result"], last["requestId"]) == ("list", "Succeeded", f"list-{i}"), last
            assert bodies[name]["status"]["handledRequestIds"] == [f"list-{i}"]
            stored = json.loads(core.read_namespaced_config_map(f"{name}-offsets", namespace).data["offsets.json"])
            assert stored == {"offsets": listed(i)}, f"{name}: ConfigMap holds {stored}"
        counts = request_log_counts(worker.log, set(names)) - before
        gets = {n: counts[("GET", n, "2xx")] for n in names[:LISTED]}
        assert set(gets.values()) == {1}, f"each list must GET the offsets exactly once: {gets}"
        assert not any(counts[("GET", n, "2xx")] for n in names[LISTED:]), "unlisted connectors were listed"

        # --- 50 alters with stop -> change -> resume, at once ------------------------------
        def request(i: int) -> dict[str, Any]:
            return {"offsets": [{"partition": {"filename": str(files[i])}, "offset": {"position": 1000 + i}}]}

        in_parallel(
            lambda i: core.patch_namespaced_config_map(
                f"{names[i]}-offsets", namespace, {"data": {"offsets.json": json.dumps(request(i))}}
            ),
            range(RUNNING),
        )
        started = time.monotonic()
        in_parallel(
            lambda i: annotate(
                custom, namespace, names[i], connector_offsets="alter", stop_connector="true", request_id=f"alter-{i}"
            ),
            range(RUNNING),
            workers=10,
        )

        def alters_done() -> dict[str, dict[str, Any]] | None:
            bodies = connectors_by_name(custom, namespace)
            done = [
                n
                for n in names[:RUNNING]
                if not {"connect-offsets.io/connector-offsets", "connect-offsets.io/stop-connector"}
                & set(bodies[n]["metadata"].get("annotations") or {})
            ]
            return bodies if len(done) == RUNNING else None

        # Stopping and resuming 50 connectors at once keeps the worker rebalancing; requests answered
        # 409/500 meanwhile are retried with the operator's back-off (2 s doubling to 60 s).
        bodies = wait_for(f"{RUNNING} alter requests done", alters_done, timeout=900, interval=3)
        altered_in = time.monotonic() - started
        for i, name in enumerate(names[:RUNNING]):
            status = bodies[name]["status"]
            last = status["lastOffsetsOperation"]
            assert (last["operation"], last["result"], last["requestId"]) == ("alter", "Succeeded", f"alter-{i}"), last
            assert status["handledRequestIds"] == [f"list-{i}", f"alter-{i}"], status["handledRequestIds"]
            assert "pendingOffsetsOperation" not in status, status["pendingOffsetsOperation"]
            assert connect_offsets(connect, name) == request(i)["offsets"], f"{name}: offsets differ from the request"
        wait_for(
            f"{RUNNING} altered connectors RUNNING again",
            lambda: all(connect_state(connect, n) == "RUNNING" for n in names[:RUNNING]),
            timeout=60,
            interval=2,
        )
        counts = request_log_counts(worker.log, set(names))
        patches = {n: counts[("PATCH", n, "2xx")] for n in names}
        assert [patches[n] for n in names[:RUNNING]] == [1] * RUNNING, f"one applied PATCH per alter: {patches}"
        assert not any(counts[("PATCH", n, c)] for n in names[RUNNING:] for c in ("2xx", "4xx", "5xx")), (
            "connectors without a request were altered"
        )
        assert not any(counts[("DELETE", n, "2xx")] for n in names), "nothing was reset"
        refused = sum(counts[("PATCH", n, c)] for n in names for c in ("4xx", "5xx"))
        # Positions past the end of the file: the resumed tasks read nothing, the offsets stay put.
        time.sleep(2)
        assert all(connect_offsets(connect, names[i]) == request(i)["offsets"] for i in range(RUNNING))
        print(
            f"{TOTAL} connectors Ready in {created_in:.0f}s, {LISTED} lists done in {listed_in:.1f}s, "
            f"{RUNNING} stop-alter-resume done in {altered_in:.1f}s ({refused} PATCHes refused during "
            "rebalances and retried)"
        )
    except BaseException:
        print("---- operator log (tail) ----\n" + operator.log()[-6000:])
        raise
    finally:
        operator.stop()
        connect.close()
        release(custom, namespace)
