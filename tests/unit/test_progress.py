"""Progress and stall detection without I/O: the lag arithmetic, the Progressing decision, how often
status.progress is rewritten, and the monitor's choices (which connectors, which groups are read,
who is woken) against a fake Kafka round.

Covers ``progress.state`` (``sink_lag``, ``judge``, ``ProgressRegistry``) and ``progress.monitor``
(``ProgressMonitor.measure`` with ``sink_positions`` replaced by a recorder), plus
``spec.progress.stallAfter``'s parsing.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import ValidationError

from connect_offsets.clients.connect import ExpandedConnector
from connect_offsets.clients.kafka import MAX_TAIL_PROBES, KafkaAdminError, SinkPositions, Tail
from connect_offsets.clients.resource_cache import ResourceCache
from connect_offsets.models.connect import ConnectorStatus
from connect_offsets.models.crds import ProgressSpec
from connect_offsets.progress import (
    STATUS_REFRESH_S,
    ConnectorProgress,
    ProgressMonitor,
    ProgressRegistry,
    SinkLag,
    judge,
    sink_lag,
)
from connect_offsets.progress import monitor as monitor_module
from connect_offsets.reconcile.clusters import ClusterUnusable
from connect_offsets.vocabulary import API_GROUP, CONNECTORS, OWNER_CONFIG_KEY

pytestmark = pytest.mark.unit

T0 = datetime(2026, 11, 26, 10, 0, tzinfo=UTC)
SPEC = ProgressSpec(stall_after="15m")


def test_stall_after_is_a_duration_of_at_least_one_second() -> None:
    assert ProgressSpec(stall_after="1h30m").stall_after_seconds == 5400
    assert ProgressSpec().stall_after_seconds == 900
    for bad in ("0s", "15", "15 m", "1d", "-5m", "5m" * 4):
        with pytest.raises(ValidationError):
            ProgressSpec(stall_after=bad)


def test_sink_lag_counts_from_the_commit_or_where_the_group_will_start() -> None:
    parts = [("t", 0), ("t", 1), ("t", 2), ("gone", 0)]
    ends = {("t", 0): 10, ("t", 1): 5, ("t", 2): 7}
    committed = {("t", 0): 4, ("t", 2): 9}  # 9 > 7: a commit read just after the end offsets
    starts = {("t", 1): 2}
    assert sink_lag(parts, committed, ends, starts) == SinkLag(total=6 + 3 + 0, behind=2, partitions=3)
    assert sink_lag(parts, committed, ends, starts, from_latest=True) == SinkLag(total=6, behind=1, partitions=3)


def progress(**changes: Any) -> ConnectorProgress:
    base = ConnectorProgress("orders", "sink", watching_since=T0, measured_at=T0, lag=SinkLag(20, 1, 1))
    return ConnectorProgress(**{**vars(base), **changes})


def test_judge_a_sink() -> None:
    _, condition = judge(progress(lag=SinkLag(0, 0, 3)), SPEC, T0 + timedelta(hours=1))
    assert condition is not None and (condition.status, condition.reason) == ("True", "UpToDate")
    _, condition = judge(progress(), SPEC, T0 + timedelta(minutes=14))
    assert condition is not None and (condition.status, condition.reason) == ("True", "Advancing")
    status, condition = judge(progress(), SPEC, T0 + timedelta(minutes=15))
    assert condition is not None and (condition.status, condition.reason) == ("False", "NotAdvancing")
    assert "20 record(s) waiting on 1 partition(s)" in condition.message and "2026-11-26T10:00:00Z" in condition.message
    assert status is not None and (status.total_lag, status.partitions_behind, status.last_moved) == (20, 1, None)
    moved = T0 + timedelta(minutes=10)
    status, condition = judge(progress(last_moved=moved), SPEC, T0 + timedelta(minutes=24))
    assert condition is not None and condition.reason == "Advancing"  # 14 minutes since it moved
    assert status is not None and status.last_moved == "2026-11-26T10:10:00Z"


def test_judge_a_source_and_what_is_not_measured() -> None:
    source = progress(kind="source", lag=None, partitions=4)
    later = T0 + timedelta(hours=1)
    _, condition = judge(source, SPEC, later)
    assert condition is not None and (condition.status, condition.reason) == ("True", "Idle")
    _, condition = judge(source, ProgressSpec(expect_source_records=True), later)
    assert condition is not None and (condition.status, condition.reason) == ("False", "NotAdvancing")
    status, condition = judge(progress(measured_at=None, error="no spec.kafka"), SPEC, later)
    assert condition is not None and (condition.status, condition.reason) == ("Unknown", "NotMeasured")
    assert status is not None and status.message == "no spec.kafka"
    assert judge(progress(running=False), SPEC, later) == (None, None)
    assert judge(None, SPEC, later) == (None, None)


def test_status_numbers_are_rewritten_at_most_every_refresh_while_the_condition_stays() -> None:
    registry = ProgressRegistry()
    registry.put("ns", "orders", progress(lag=SinkLag(20, 1, 1)))
    shown, condition, version = registry.report("ns", "orders", SPEC, T0)
    assert shown is not None and shown.total_lag == 20 and version == 1
    registry.put("ns", "orders", progress(lag=SinkLag(25, 1, 1)))
    soon = T0 + timedelta(seconds=STATUS_REFRESH_S / 2)
    assert not registry.would_change("ns", "orders", SPEC, soon)
    assert registry.report("ns", "orders", SPEC, soon)[0] == shown  # the same numbers, no status write
    later = T0 + timedelta(seconds=STATUS_REFRESH_S)
    assert registry.would_change("ns", "orders", SPEC, later)
    shown, _, version = registry.report("ns", "orders", SPEC, later)
    assert shown is not None and shown.total_lag == 25 and version == 2
    # a condition change is shown at once
    stalled = T0 + timedelta(minutes=15)
    assert registry.would_change("ns", "orders", SPEC, stalled)
    _, condition, _ = registry.report("ns", "orders", SPEC, stalled)
    assert condition is not None and condition.reason == "NotAdvancing"


def test_the_first_time_a_connector_is_seen_moving_is_shown_at_once() -> None:
    """A source's first ``lastMoved`` is news, not a refreshed number: it is shown at the next
    pass, not up to ``STATUS_REFRESH_S`` later (a user waiting for it waited a minute)."""
    registry = ProgressRegistry()
    registry.put("ns", "src", progress(kind="source", lag=None, partitions=1))
    shown, _, _ = registry.report("ns", "src", SPEC, T0)
    assert shown is not None and shown.last_moved is None
    soon = T0 + timedelta(seconds=5)
    registry.put("ns", "src", progress(kind="source", lag=None, partitions=1, last_moved=soon))
    assert registry.would_change("ns", "src", SPEC, soon)
    shown, _, version = registry.report("ns", "src", SPEC, soon)
    assert shown is not None and shown.last_moved is not None and version == 2
    # later moves only refresh the number: at most every STATUS_REFRESH_S
    moved_again = soon + timedelta(seconds=5)
    registry.put("ns", "src", progress(kind="source", lag=None, partitions=1, last_moved=moved_again))
    assert not registry.would_change("ns", "src", SPEC, moved_again)


# --- the monitor -------------------------------------------------------------------------------------

SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"


def resource(name: str, cluster: str = "local", **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "labels": {f"{API_GROUP}/cluster": cluster}},
        "spec": {"class": SINK, **spec},
    }


def connector(
    name: str, kind: str = "sink", state: str = "RUNNING", owner: str | None = None, committed: bool = False
) -> ExpandedConnector:
    """``committed``: its consumer reads committed records only (Connect's default reads uncommitted)."""
    config = {"connector.class": SINK, "topics": f"{name}-topic", OWNER_CONFIG_KEY: owner or f"ns/{name}"}
    if committed:
        config["consumer.override.isolation.level"] = "read_committed"
    status = ConnectorStatus.model_validate({"name": name, "connector": {"state": state}, "type": kind})
    return ExpandedConnector(config, status, name)


class Kafka:
    """Stands for ``clients.kafka.sink_positions``: records what each round asked."""

    def __init__(self) -> None:
        self.ends: dict[tuple[str, int], int] = {}
        self.committed: dict[str, dict[tuple[str, int], int]] = {}
        #: High watermarks where a transaction is open (else the last stable offset, ``ends``).
        self.highs: dict[tuple[str, int], int] = {}
        #: Tails (partition, from) holding only markers and aborted records.
        self.empty: set[tuple[tuple[str, int], int]] = set()
        self.tails: list[list[tuple[tuple[str, int], int]]] = []  # per round: the tails asked to be read
        self.topics: dict[str, int] | None = None  # the cluster's topics (default: one partition each)
        self.asked: list[list[Tail]] = []  # per round: the tails as asked, in order (cap applied)
        self.rounds: list[dict[str, Any]] = []
        self.fail: str | None = None

    async def __call__(self, config: dict[str, Any], **kwargs: Any) -> SinkPositions:
        if self.fail is not None:
            raise KafkaAdminError(self.fail)
        topics = kwargs["topics"] or self.topics or {"orders-topic": 1, "audit-topic": 1, "other-topic": 1}
        partitions = kwargs["partitions_of"](topics)
        ends = {tp: self.ends.get(tp, 0) for tp in partitions}
        highs = {tp: self.highs.get(tp, ends[tp]) for tp in partitions}
        reads = kwargs["groups_to_read"](ends, highs)
        committed = {group: dict(self.committed.get(group, {})) for group in reads}
        asked = list(kwargs["tails_to_read"](committed, ends, highs))[:MAX_TAIL_PROBES]
        self.asked.append(asked)
        tails = sorted({(tp, offset) for tp, offset, _, _ in asked})
        self.rounds.append({"namespace": kwargs["namespace"], "partitions": partitions, "groups": sorted(reads)})
        self.tails.append(tails)
        empty = frozenset(tail for tail in asked if (tail[0], tail[1]) in self.empty)
        full = frozenset(asked) - empty
        requests = {"metadata": 0 if kwargs["topics"] else 1, "list_offsets": 2, "group_offsets": len(reads)}
        return SinkPositions(topics, ends, {tp: 0 for tp in partitions}, committed, {}, requests, highs, empty, full)


@pytest.fixture
def kafka(monkeypatch: pytest.MonkeyPatch) -> Kafka:
    fake = Kafka()
    monkeypatch.setattr(monitor_module, "sink_positions", fake)
    return fake


def make_monitor(bodies: list[dict[str, Any]], kafka_config: Any = None) -> tuple[ProgressMonitor, list[str]]:
    cache = ResourceCache()
    for body in bodies:
        cache.observe(CONNECTORS, "ns", body["metadata"]["name"], body)
    woken: list[str] = []

    async def settings(namespace: str, name: str) -> dict[str, Any]:
        if kafka_config is not None:
            raise kafka_config
        return {"bootstrap.servers": "kafka:9092"}

    registry = ProgressRegistry()
    monitor = ProgressMonitor(
        SimpleNamespace(cache=cache),  # type: ignore[arg-type]
        registry,
        settings,
        lambda namespace, name: woken.append(name),
    )
    return monitor, woken


CLIENT: Any = None  # sources are not in these rounds: no Connect call is made


async def test_only_running_connectors_of_this_clusters_resources_are_measured(kafka: Kafka) -> None:
    bodies = [
        resource("orders"),
        resource("audit", cluster="elsewhere"),
        resource("quiet", progress={"enabled": False}),
    ]
    monitor, woken = make_monitor(bodies)
    snapshot = {
        "orders": connector("orders"),
        "audit": connector("audit"),  # its resource uses another ConnectCluster
        "quiet": connector("quiet"),  # progress disabled
        "stolen": connector("stolen", owner="ns/orders"),  # the owner key names another connector
        "paused": connector("paused", state="PAUSED"),
    }
    kafka.ends = {("orders-topic", 0): 20}
    await monitor.measure("ns", "local", CLIENT, snapshot)
    assert kafka.rounds == [{"namespace": "ns", "partitions": [("orders-topic", 0)], "groups": ["connect-orders"]}]
    assert monitor.registry.resources() == [("ns", "orders")]
    assert woken == ["orders"]  # its status would show something new


async def test_idle_groups_are_not_read_again(kafka: Kafka) -> None:
    monitor, _ = make_monitor([resource("orders", progress={"stallAfter": "1s"})])
    snapshot = {"orders": connector("orders")}
    kafka.ends, kafka.committed = {("orders-topic", 0): 5}, {"connect-orders": {("orders-topic", 0): 5}}
    await monitor.measure("ns", "local", CLIENT, snapshot)
    monitor.registry.report("ns", "orders", SPEC, datetime.now(UTC))
    await monitor.measure("ns", "local", CLIENT, snapshot)
    assert [r["groups"] for r in kafka.rounds] == [["connect-orders"], []]  # nothing moved, nothing waits
    kafka.ends = {("orders-topic", 0): 9}  # input arrives: the group is read again
    await monitor.measure("ns", "local", CLIENT, snapshot)
    assert kafka.rounds[-1]["groups"] == ["connect-orders"]
    entry = monitor.registry.get("ns", "orders")
    assert entry is not None and entry.lag == SinkLag(4, 1, 1) and entry.last_moved is None


async def test_kafka_trouble_is_not_measured_never_stalled(kafka: Kafka) -> None:
    monitor, _ = make_monitor(
        [resource("orders")], kafka_config=ClusterUnusable("ConnectCluster local has no spec.kafka")
    )
    await monitor.measure("ns", "local", CLIENT, {"orders": connector("orders")})
    _, condition = judge(monitor.registry.get("ns", "orders"), SPEC, datetime.now(UTC) + timedelta(hours=1))
    assert condition is not None and (condition.status, condition.reason) == ("Unknown", "NotMeasured")
    assert "sink progress needs Kafka access: ConnectCluster local has no spec.kafka" in condition.message
    monitor, _ = make_monitor([resource("orders")])
    kafka.fail = "list topics on cluster kafka:9092: _TRANSPORT"
    await monitor.measure("ns", "local", CLIENT, {"orders": connector("orders")})
    entry = monitor.registry.get("ns", "orders")
    assert entry is not None and entry.measured_at is None and "_TRANSPORT" in (entry.error or "")


# --- topics written in transactions (issue 46, item 3) ----------------------------------------------

TP0 = ("orders-topic", 0)


async def test_a_caught_up_sink_on_a_transactional_topic_is_up_to_date(kafka: Kafka) -> None:
    """Its last record + 1 is committed, the commit marker sits there: the tail up to the last stable
    offset is read once, holds nothing a read_committed consumer is given, and the lag is 0."""
    monitor, _ = make_monitor([resource("orders", progress={"stallAfter": "1s"})])
    snapshot = {"orders": connector("orders", committed=True)}
    kafka.ends, kafka.committed = {TP0: 8}, {"connect-orders": {TP0: 7}}
    kafka.empty = {(TP0, 7)}
    await monitor.measure("ns", "local", CLIENT, snapshot)
    assert kafka.tails == [[(TP0, 7)]]
    entry = monitor.registry.get("ns", "orders")
    assert entry is not None and entry.lag == SinkLag(0, 0, 1) and entry.empty_tails == {(TP0, 7, 8)}
    _, condition = judge(entry, ProgressSpec(stall_after="1s"), datetime.now(UTC) + timedelta(hours=1))
    assert condition is not None and (condition.status, condition.reason) == ("True", "UpToDate")
    # Idle from then on: the group is not read, the tail not read again.
    monitor.registry.report("ns", "orders", SPEC, datetime.now(UTC))
    await monitor.measure("ns", "local", CLIENT, snapshot)
    assert [r["groups"] for r in kafka.rounds] == [["connect-orders"], []] and kafka.tails[-1] == []


async def test_a_blocked_sink_on_a_transactional_topic_is_not_advancing(kafka: Kafka) -> None:
    monitor, _ = make_monitor([resource("orders", progress={"stallAfter": "1s"})])
    snapshot = {"orders": connector("orders", committed=True)}
    kafka.ends, kafka.committed = {TP0: 8}, {"connect-orders": {TP0: 7}}
    kafka.empty = {(TP0, 7)}
    await monitor.measure("ns", "local", CLIENT, snapshot)
    kafka.ends = {TP0: 20}  # a committed transaction of 11 records and its marker: not read by the sink
    kafka.empty = set()  # from offset 7 on, records are there now
    await monitor.measure("ns", "local", CLIENT, snapshot)
    assert kafka.tails[-1] == [(TP0, 7)]  # its tail to the new last stable offset is read
    entry = monitor.registry.get("ns", "orders")
    assert entry is not None and entry.lag == SinkLag(13, 1, 1) and entry.empty_tails == frozenset()
    _, condition = judge(entry, ProgressSpec(stall_after="1s"), datetime.now(UTC) + timedelta(hours=1))
    assert condition is not None and (condition.status, condition.reason) == ("False", "NotAdvancing")


async def test_a_moving_sink_is_not_read_for_its_tail(kafka: Kafka) -> None:
    monitor, _ = make_monitor([resource("orders")])
    snapshot = {"orders": connector("orders", committed=True)}
    kafka.ends, kafka.committed = {TP0: 30}, {"connect-orders": {TP0: 10}}
    await monitor.measure("ns", "local", CLIENT, snapshot)
    kafka.committed = {"connect-orders": {TP0: 20}}
    await monitor.measure("ns", "local", CLIENT, snapshot)
    assert kafka.tails == [[(TP0, 10)], []]  # the first look, then it moved: Advancing, no read
    entry = monitor.registry.get("ns", "orders")
    assert entry is not None and entry.lag == SinkLag(10, 1, 1)


async def test_a_sink_behind_an_open_transaction_says_so(kafka: Kafka) -> None:
    monitor, _ = make_monitor([resource("orders", progress={"stallAfter": "1s"})])
    snapshot = {"orders": connector("orders", committed=True)}
    kafka.ends, kafka.committed = {TP0: 8}, {"connect-orders": {TP0: 8}}
    await monitor.measure("ns", "local", CLIENT, snapshot)
    monitor.registry.report("ns", "orders", SPEC, datetime.now(UTC))
    kafka.highs = {TP0: 13}  # a transaction opened: 5 records past the last stable offset
    await monitor.measure("ns", "local", CLIENT, snapshot)
    assert kafka.rounds[-1]["groups"] == ["connect-orders"]  # the high watermark moved: read again
    entry = monitor.registry.get("ns", "orders")
    assert entry is not None and (entry.open_records, entry.open_partitions) == (5, 1)
    status, condition = judge(entry, ProgressSpec(stall_after="1s"), datetime.now(UTC) + timedelta(hours=1))
    assert condition is not None and (condition.status, condition.reason) == ("True", "UpToDate")
    assert "5 record(s) of a transaction still open on 1 partition(s)" in condition.message
    assert status is not None and status.total_lag == 0 and "transaction still open" in (status.message or "")


def test_an_open_transaction_ahead_of_a_caught_up_sink_is_shown_at_once() -> None:
    registry = ProgressRegistry()
    caught_up = ConnectorProgress("orders", "sink", watching_since=T0, lag=SinkLag(0, 0, 1), measured_at=T0)
    registry.put("ns", "orders", caught_up)
    registry.report("ns", "orders", SPEC, T0)
    behind_open = replace(caught_up, open_records=3, open_partitions=1)
    registry.put("ns", "orders", behind_open)
    later = T0 + timedelta(seconds=5)  # well within STATUS_REFRESH_S
    assert registry.would_change("ns", "orders", SPEC, later)
    status, condition, _ = registry.report("ns", "orders", SPEC, later)
    assert status is not None and "3 record(s) of a transaction still open" in (status.message or "")
    assert condition is not None and condition.reason == "UpToDate" and "still open" in condition.message


# --- attacker review of issue 46: shared partitions, the cap, sinks reading uncommitted ----------


def _topic_sink(name: str, topic: str, committed: bool = False) -> ExpandedConnector:
    entry = connector(name, committed=committed)
    assert entry.config is not None
    entry.config["topics"] = topic
    return entry


async def test_two_sinks_on_one_partition_each_have_their_own_tail(kafka: Kafka) -> None:
    """F2: the tails were keyed by partition, so the first sink's committed offset was read for both:
    a caught-up sink next to a stuck one on the same partition showed NotAdvancing."""
    bodies = [resource(n, progress={"stallAfter": "1s"}) for n in ("aaa", "zzz")]
    monitor, _ = make_monitor(bodies)
    snapshot = {n: _topic_sink(n, "orders-topic", committed=True) for n in ("aaa", "zzz")}
    kafka.ends = {TP0: 8}
    kafka.committed = {"connect-aaa": {TP0: 0}, "connect-zzz": {TP0: 7}}
    kafka.empty = {(TP0, 7)}
    await monitor.measure("ns", "local", CLIENT, snapshot)
    assert sorted(kafka.asked[0]) == [(TP0, 0, 8, True), (TP0, 7, 8, True)]
    later = datetime.now(UTC) + timedelta(hours=1)
    for name, reason in (("aaa", "NotAdvancing"), ("zzz", "UpToDate")):
        entry = monitor.registry.get("ns", name)
        assert entry is not None
        _, condition = judge(entry, ProgressSpec(stall_after="1s"), later)
        assert condition is not None and condition.reason == reason, (name, condition)


async def test_a_stuck_sinks_tail_is_not_read_again_while_it_stands(kafka: Kafka) -> None:
    """F2: a tail known to hold records is remembered as an empty one is: not read every round."""
    monitor, _ = make_monitor([resource("orders", progress={"stallAfter": "1s"})])
    snapshot = {"orders": connector("orders", committed=True)}
    kafka.ends, kafka.committed = {TP0: 8}, {"connect-orders": {TP0: 3}}
    await monitor.measure("ns", "local", CLIENT, snapshot)
    await monitor.measure("ns", "local", CLIENT, snapshot)
    assert kafka.tails == [[(TP0, 3)], []]
    entry = monitor.registry.get("ns", "orders")
    assert entry is not None and entry.full_tails == {(TP0, 3, 8)} and entry.lag == SinkLag(5, 1, 1)
    kafka.ends = {TP0: 9}  # the end moved: that tail is another one
    await monitor.measure("ns", "local", CLIENT, snapshot)
    assert kafka.tails[-1] == [(TP0, 3)]


async def test_one_stuck_sink_does_not_keep_the_others_out_of_the_tail_cap(kafka: Kafka) -> None:
    """F3: the MAX_TAIL_PROBES cap was filled in sink order: a stuck sink with as many partitions
    stopped every later sink's tail reads. Taken in turns across sinks, rotating each round."""
    bodies = [resource(n, progress={"stallAfter": "1s"}) for n in ("aaa", "zzz")]
    monitor, _ = make_monitor(bodies)
    kafka.topics = {"wide": 300, "txn": 1}
    snapshot = {"aaa": _topic_sink("aaa", "wide", committed=True), "zzz": _topic_sink("zzz", "txn", committed=True)}
    wide = {("wide", p): 1 for p in range(300)}
    kafka.ends = {**wide, ("txn", 0): 6}
    kafka.committed = {"connect-aaa": {tp: 0 for tp in wide}, "connect-zzz": {("txn", 0): 5}}
    kafka.empty = {(("txn", 0), 5)}
    await monitor.measure("ns", "local", CLIENT, snapshot)
    assert (("txn", 0), 5, 6, True) in kafka.asked[0] and len(kafka.asked[0]) == MAX_TAIL_PROBES
    entry = monitor.registry.get("ns", "zzz")
    assert entry is not None and entry.lag == SinkLag(0, 0, 1)
    # the next round: the stuck sink's partitions not read yet get their turn
    await monitor.measure("ns", "local", CLIENT, snapshot)
    first = {tail[0] for tail in kafka.asked[0]}
    assert {("wide", p) for p in range(300)} <= first | {tail[0] for tail in kafka.asked[1]}


def test_tails_are_taken_in_turns_rotating_each_round() -> None:
    a = [(("a", p), 0, 1, True) for p in range(3)]
    z = [(("z", 0), 0, 1, True)]
    assert monitor_module._fair([a, z], 0) == [a[0], z[0], a[1], a[2]]
    assert monitor_module._fair([a, z], 1) == [z[0], a[1], a[2], a[0]]


async def test_a_sink_reading_uncommitted_is_measured_to_the_high_watermark(kafka: Kafka) -> None:
    """F4: Connect's sink consumers read uncommitted records unless the connector says otherwise;
    such a sink stuck at an aborted transaction's first record is blocked (a read_committed tail
    read would call it empty: UpToDate), and one that read an open transaction's records is not
    behind it. Its end is the high watermark, its tail read read_uncommitted."""
    monitor, _ = make_monitor([resource("orders", progress={"stallAfter": "1s"})])
    snapshot = {"orders": connector("orders")}
    kafka.ends, kafka.committed = {TP0: 12}, {"connect-orders": {TP0: 6}}  # 6..10 aborted, marker 11
    await monitor.measure("ns", "local", CLIENT, snapshot)
    assert kafka.asked[-1] == [(TP0, 6, 12, False)]  # read_uncommitted: the aborted records are there
    entry = monitor.registry.get("ns", "orders")
    assert entry is not None and entry.lag == SinkLag(6, 1, 1)
    _, condition = judge(entry, ProgressSpec(stall_after="1s"), datetime.now(UTC) + timedelta(hours=1))
    assert condition is not None and condition.reason == "NotAdvancing"
    # it reads an open transaction's records: measured to the high watermark, nothing "open" ahead
    kafka.ends, kafka.highs, kafka.committed = {TP0: 12}, {TP0: 20}, {"connect-orders": {TP0: 19}}
    kafka.empty = {(TP0, 19)}  # a marker at 19
    await monitor.measure("ns", "local", CLIENT, snapshot)
    assert kafka.asked[-1] == []  # it moved: no tail read
    await monitor.measure("ns", "local", CLIENT, snapshot)
    assert kafka.asked[-1] == [(TP0, 19, 20, False)]
    entry = monitor.registry.get("ns", "orders")
    assert entry is not None and entry.lag == SinkLag(0, 0, 1) and entry.open_records == 0


def test_which_sinks_read_committed() -> None:
    assert monitor_module.reads_committed({"consumer.override.isolation.level": "read_committed"})
    assert not monitor_module.reads_committed({})
    assert not monitor_module.reads_committed({"consumer.override.isolation.level": "read_uncommitted"})
