"""Unit tests for connect_offsets.lag: MirrorMaker 2 replication lag without any I/O.

Covers: topic selection as MirrorSourceConnector does it (include/exclude lists, internal topics,
cycles, heartbeats, separators, custom filters); parsing Connect's offsets; the lag arithmetic
(offset + 1, never negative, whole backlog without an offset); the ReplicationLagging decision
(threshold, duration, Unknown on failures or old numbers); the status document (stale numbers
kept with their time); the registry's report and change signature; the metrics (series removed on
failure and when mirrors disappear; per-partition series capped); measure_mirror's Connect error
paths (MockTransport); the monitor's binding and owner checks (nothing read for a refused resource
or another resource's connector).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from connect_offsets import metrics
from connect_offsets.clients.connect import ConnectClient, ConnectEndpoint
from connect_offsets.clients.reference_policy import ReferenceRule
from connect_offsets.lag import (
    LagRegistry,
    MirrorLag,
    PartitionLag,
    lagging_condition,
    measure_mirror,
    next_above_since,
    partition_lags,
    replicated_offsets,
    status_document,
)
from connect_offsets.lag.measure import settled, tails_to_read
from connect_offsets.models.crds import (
    KafkaMirrorMaker2Resource,
    KafkaMirrorMaker2Status,
    ReplicationLagSpec,
    ReplicationLagStatus,
)
from connect_offsets.planning import BindingRefusal, mirror_targets
from connect_offsets.planning.mirror_topics import mirrored_topic_filter
from connect_offsets.reconcile.status import status_fields

pytestmark = pytest.mark.unit

T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


# --- topic selection -----------------------------------------------------------------------------


def select(config: dict[str, str], topic: str) -> bool:
    accepts = mirrored_topic_filter({"target.cluster.alias": "west", **config})
    assert accepts is not None
    return accepts(topic)


def test_default_filter_takes_every_plain_topic_but_internal_ones() -> None:
    assert select({}, "orders")
    for internal in ("__consumer_offsets", ".hidden", "connect-offsets-internal", "x.internal", "a.replica"):
        assert not select({}, internal), internal
    assert not select({}, "mm2-offset-syncs.west.internal")


def test_topics_is_a_comma_separated_list_of_full_match_regexes() -> None:
    config = {"topics": "orders.* , payments"}
    assert select(config, "orders-eu")
    assert select(config, "payments")
    assert not select(config, "payments2")  # full match, as Java's matcher().matches()
    assert not select(config, "my-orders")
    assert not select({"topics": ""}, "orders")  # an empty list matches nothing


def test_exclude_and_its_legacy_alias() -> None:
    assert not select({"topics": "orders.*", "topics.exclude": "orders-test.*"}, "orders-test-1")
    assert select({"topics": "orders.*", "topics.exclude": "orders-test.*"}, "orders-prod")
    assert not select({"topics.blacklist": "secret"}, "secret")
    # topics.exclude replaces the default list: internal topics stay out anyway (policy check)
    assert not select({"topics.exclude": "nothing"}, "__consumer_offsets")


def test_cycles_are_not_replicated_back() -> None:
    assert not select({}, "west.orders")  # came from the target cluster
    assert not select({}, "east.west.orders")  # two hops, the first from the target
    assert select({}, "east.orders")  # a remote topic of a third cluster: replicated onwards
    assert not select({"replication.policy.separator": "_"}, "west_orders")
    assert select({"replication.policy.separator": "_"}, "west.orders")


def test_heartbeats_follow_their_own_switch() -> None:
    assert select({"topics": "orders"}, "heartbeats")
    assert select({"topics": "orders"}, "east.heartbeats")
    assert not select({"topics": "orders", "heartbeats.replication.enabled": "false"}, "heartbeats")


def test_identity_policy_has_no_remote_topic_names() -> None:
    identity = {"replication.policy.class": "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"}
    assert select(identity, "west.orders")


def test_custom_filter_cannot_be_evaluated_and_bad_regex_is_reported() -> None:
    assert mirrored_topic_filter({"topic.filter.class": "com.example.Filter"}) is None
    with pytest.raises(ValueError, match=r"topics: the pattern '\(' cannot be evaluated in linear time \(missing \)"):
        mirrored_topic_filter({"topics": "("})


# --- offsets and arithmetic -----------------------------------------------------------------------


def test_replicated_offsets_keeps_the_source_cluster_entries_only() -> None:
    document = {
        "offsets": [
            {"partition": {"cluster": "east", "topic": "t", "partition": 0}, "offset": {"offset": 9}},
            {"partition": {"cluster": "east", "topic": "t", "partition": 1}, "offset": {"offset": 0}},
            {"partition": {"cluster": "other", "topic": "t", "partition": 2}, "offset": {"offset": 5}},
            {"partition": {"cluster": "east", "topic": "t", "partition": "3"}, "offset": {"offset": 5}},
            {"partition": {"cluster": "east", "topic": "t", "partition": 4}, "offset": {"offset": True}},
            {"partition": {"cluster": "east", "topic": "t", "partition": 5}, "offset": None},
            "garbage",
        ]
    }
    assert replicated_offsets(document, "east") == {("t", 0): 9, ("t", 1): 0}
    assert replicated_offsets({}, "east") == {}


def test_partition_lags() -> None:
    replicated = {("t", 0): 9, ("t", 1): 20, ("gone", 0): 3}
    ends = {("t", 0): 15, ("t", 1): 20, ("t", 2): 7}
    starts = {("t", 2): 2}
    assert partition_lags(replicated, ends, starts) == [
        PartitionLag("t", 0, 5, 15, 9),  # offsets 10..14 not copied yet
        PartitionLag("t", 1, 0, 20, 20),  # an end read before MM2's newer commit: 0, not -1
        PartitionLag("t", 2, 5, 7, None),  # nothing replicated: the whole backlog 2..6
    ]


def test_caught_up_partition_has_zero_lag() -> None:
    assert partition_lags({("t", 0): 9}, {("t", 0): 10}, {}) == [PartitionLag("t", 0, 0, 10, 9)]


def test_next_above_since() -> None:
    assert next_above_since(None, 10, None, at(0)) is None  # no threshold
    assert next_above_since(None, 10, 10, at(0)) is None  # not above
    assert next_above_since(None, 11, 10, at(0)) == at(0)
    assert next_above_since(at(0), 11, 10, at(5)) == at(0)  # the run goes on
    assert next_above_since(at(0), 3, 10, at(5)) is None  # the run ended


# --- condition and status ---------------------------------------------------------------------------


def mirror(total_lags: list[int], measured: float | None = 0, **changes: Any) -> MirrorLag:
    lags = tuple(PartitionLag("t", i, lag, lag + 10, 9) for i, lag in enumerate(total_lags))
    base = MirrorLag(
        "east->west.MirrorSourceConnector",
        "east",
        "west",
        lags=lags,
        measured_at=None if measured is None else at(measured),
        attempted_at=None if measured is None else at(measured),
    )
    return MirrorLag(**{**base.__dict__, **changes})


SPEC = ReplicationLagSpec(interval_seconds=2, threshold=100, for_seconds=10)


def test_lagging_only_after_the_duration() -> None:
    young = mirror([150], measured=5, above_since=at(0))
    old = mirror([150], measured=12, above_since=at(0))
    assert lagging_condition([("e->w", young)], SPEC, at(5)).status == "False"
    found = lagging_condition([("e->w", old)], SPEC, at(12))
    assert (found.type, found.status, found.reason) == ("ReplicationLagging", "True", "LagAboveThreshold")
    assert "150 records behind (threshold 100) since 2026-01-02T03:04:05Z" in found.message


def test_no_threshold_is_false_with_a_hint() -> None:
    found = lagging_condition([("e->w", mirror([5, 6]))], ReplicationLagSpec(), at(0))
    assert (found.status, found.reason) == ("False", "NoThreshold")
    assert "e->w: 11" in found.message


def test_failed_or_old_measurements_are_unknown_not_false() -> None:
    failed = mirror([1], measured=0, attempted_at=at(4), error="source cluster east: unreachable")
    found = lagging_condition([("e->w", failed)], SPEC, at(4))
    assert (found.status, found.reason) == ("Unknown", "ReplicationLagUnknown")
    assert "unreachable" in found.message
    old = mirror([1], measured=0)
    assert lagging_condition([("e->w", old)], SPEC, at(61)).status == "Unknown"  # 3 intervals, at least 60 s
    assert lagging_condition([("e->w", old)], SPEC, at(59)).status == "False"
    assert lagging_condition([("e->w", None)], SPEC, at(0)).message == "e->w: not measured yet"


def test_a_lagging_mirror_wins_over_an_unknown_one() -> None:
    lagging = mirror([500], measured=20, above_since=at(0))
    found = lagging_condition([("a->b", lagging), ("c->d", None)], SPEC, at(20))
    assert found.status == "True"


DECLARED = [("east->west.MirrorSourceConnector", "east", "west")]


def written(document: ReplicationLagStatus) -> dict[str, Any]:
    """status.replicationLag as the status writer puts it into the resource."""
    data: dict[str, Any] = status_fields(KafkaMirrorMaker2Status(replication_lag=document))["replicationLag"]
    return data


def test_status_document_fresh() -> None:
    doc = written(status_document([(DECLARED[0][0], mirror([3, 7, 7]))], DECLARED, SPEC, at(1)))
    assert doc == {
        "mirrors": [
            {
                "sourceCluster": "east",
                "targetCluster": "west",
                "connector": "east->west.MirrorSourceConnector",
                "total": 17,
                "max": 7,
                "partitions": 3,
                "measuredAt": "2026-01-02T03:04:05Z",
                "worstPartition": {"topic": "t", "partition": 1, "lag": 7},
                "stale": False,
                "message": "",
            }
        ],
        "stale": False,
        "message": "",
        "total": 17,
        "max": 7,
        "measuredAt": "2026-01-02T03:04:05Z",
        "worstPartition": {"topic": "t", "partition": 1, "lag": 7, "mirror": "east->west"},
    }


def test_status_document_keeps_the_last_good_numbers_marked_stale() -> None:
    failed = mirror([4], measured=0, attempted_at=at(30), error="source cluster east: down")
    doc = written(status_document([(DECLARED[0][0], failed)], DECLARED, SPEC, at(30)))
    assert doc["stale"] is True and doc["total"] == 4
    assert doc["measuredAt"] == "2026-01-02T03:04:05Z"  # the last good one, not now
    assert doc["mirrors"][0]["stale"] is True
    assert doc["message"] == "east->west: source cluster east: down"


def test_status_document_before_any_measurement_has_no_numbers() -> None:
    doc = written(status_document([], DECLARED, SPEC, at(0)))
    assert "total" not in doc and doc["mirrors"][0]["stale"] is False
    assert doc["mirrors"][0]["message"] == "not measured yet" and doc["stale"] is True


def resource(**lag: Any) -> KafkaMirrorMaker2Resource:
    return KafkaMirrorMaker2Resource.model_validate(
        {
            "metadata": {"name": "mm2", "namespace": "ns", "labels": {"connect-offsets.io/cluster": "c"}},
            "spec": {
                "clusters": [
                    {"alias": "east", "bootstrapServers": "east:9092", "config": {"security.protocol": "PLAINTEXT"}},
                    {"alias": "west", "bootstrapServers": "west:9092"},
                ],
                "mirrors": [
                    {"sourceCluster": "east", "targetCluster": "west", "topicsPattern": "t", "sourceConnector": {}},
                    {"sourceCluster": "west", "targetCluster": "east", "checkpointConnector": {}},
                ],
                "replicationLag": lag,
            },
        }
    )


def test_registry_report_and_signature() -> None:
    registry = LagRegistry()
    res = resource(intervalSeconds=2, threshold=5, forSeconds=0)
    document, conditions = registry.report(res, at(0))
    assert [m.connector for m in document.mirrors] == [DECLARED[0][0]]
    assert conditions[0].status == "Unknown"
    before = registry.signature(res, at(0))
    registry.put("ns", "mm2", [mirror([9], measured=0, above_since=at(0))])
    document, conditions = registry.report(res, at(1))
    assert document.total == 9
    assert conditions[0].status == "True"
    after = registry.signature(res, at(1))
    assert before != after
    # a new measurement with the same numbers changes nothing but the time: no reconcile needed
    registry.put("ns", "mm2", [mirror([9], measured=2, above_since=at(0))])
    assert registry.signature(res, at(2)) == after
    registry.forget("ns", "mm2")
    assert registry.get("ns", "mm2", DECLARED[0][0]) is None


def test_report_when_off_or_without_source_connector() -> None:
    registry = LagRegistry()
    document, conditions = registry.report(resource(enabled=False), at(0))
    assert written(document) == {"stale": True, "message": "replication lag monitoring is off", "mirrors": []}
    assert conditions == []


# --- metrics ---------------------------------------------------------------------------------------


def samples() -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    text = generate_latest(metrics.REGISTRY).decode()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


MIRROR_LABELS = {"namespace": "ns1", "mirror": "m", "source": "east", "target": "west"}


def key(name: str, **extra: str) -> tuple[str, frozenset[tuple[str, str]]]:
    return (name, frozenset({**MIRROR_LABELS, **extra}.items()))


def test_metrics_series_follow_the_latest_measurement() -> None:
    metrics.set_mirror_lag("ns1", "m", "east", "west", [("t", 0, 3), ("t", 1, 5)], 1700000000.0)
    metrics.set_mirror_lag("ns1", "m", "east", "south", [("u", 0, 1)], 1700000000.0)
    seen = samples()
    assert seen[key("connect_offsets_mm2_replication_lag", topic="t", partition="1")] == 5
    assert seen[key("connect_offsets_mm2_mirror_lag")] == 8
    assert seen[key("connect_offsets_mm2_mirror_lag_max")] == 5
    assert seen[key("connect_offsets_mm2_lag_measurement_timestamp_seconds")] == 1700000000.0
    assert seen[key("connect_offsets_mm2_lag_stale")] == 0
    # a failed measurement: lag series gone, time of the last good one kept, stale=1
    metrics.set_mirror_lag("ns1", "m", "east", "west", None, 1700000000.0)
    seen = samples()
    assert key("connect_offsets_mm2_replication_lag", topic="t", partition="1") not in seen
    assert key("connect_offsets_mm2_mirror_lag") not in seen
    assert seen[key("connect_offsets_mm2_lag_stale")] == 1
    assert seen[key("connect_offsets_mm2_lag_measurement_timestamp_seconds")] == 1700000000.0
    # mirrors that disappear drop out
    metrics.forget_mirror_lag("ns1", "m", keep={("east", "west")})
    assert not any(("target", "south") in labels for _, labels in samples())
    metrics.forget_mirror_lag("ns1", "m")
    assert not any(("namespace", "ns1") in labels for _, labels in samples())


# --- measure_mirror error paths (Connect via MockTransport; Kafka is never reached) --------------------


def connect_answering(response: httpx.Response) -> ConnectClient:
    return ConnectClient(
        ConnectEndpoint(url="http://connect:8083"), transport=httpx.MockTransport(lambda request: response)
    )


async def test_missing_connector_is_a_failed_measurement_keeping_previous_numbers() -> None:
    res = resource(threshold=5)
    target = next(t for t in mirror_targets(res, {}).targets if t.name.endswith("MirrorSourceConnector"))
    previous = mirror([4], measured=0)
    client = connect_answering(httpx.Response(404, json={"error_code": 404, "message": "Connector not found"}))
    async with client:
        result = await measure_mirror(client, target, previous, 5, namespace="ns", clock=lambda: at(10))
    assert result.error == f"connector {target.name} does not exist in Connect (yet)"
    assert result.measured_at == at(0) and result.attempted_at == at(10) and result.total == 4
    assert result.requests == 1


async def test_connect_server_error_is_reported() -> None:
    res = resource()
    target = next(t for t in mirror_targets(res, {}).targets if t.name.endswith("MirrorSourceConnector"))
    client = connect_answering(httpx.Response(500, json={"error_code": 500, "message": "boom"}))
    async with client:
        result = await measure_mirror(client, target, None, None, namespace="ns", clock=lambda: at(0))
    assert result.error is not None and result.error.startswith(f"Connect offsets of {target.name}:")
    assert "boom" in result.error and result.measured_at is None


# --- the series cap --------------------------------------------------------------------------------


def test_partition_series_are_the_most_lagging_few_and_the_totals_cover_all() -> None:
    partitions = [("t", p, p % 7) for p in range(200)]
    metrics.set_mirror_lag("ns2", "wide", "east", "west", partitions, 1700000000.0)
    labels = {"namespace": "ns2", "mirror": "wide", "source": "east", "target": "west"}
    seen = samples()
    per_partition = [
        value
        for (name, found), value in seen.items()
        if name == "connect_offsets_mm2_replication_lag" and ("mirror", "wide") in found
    ]
    assert len(per_partition) == metrics.MAX_LAG_SERIES_PER_MIRROR
    assert sorted(per_partition, reverse=True) == sorted((p[2] for p in partitions), reverse=True)[: len(per_partition)]
    assert seen[("connect_offsets_mm2_mirror_lag", frozenset(labels.items()))] == sum(p[2] for p in partitions)
    assert seen[("connect_offsets_mm2_mirror_partitions", frozenset(labels.items()))] == 200
    metrics.forget_mirror_lag("ns2", "wide")


# --- the monitor goes through the reconcile's checks -----------------------------------------------


class Resolver:
    """The service's resolver, scripted: a binding refusal, or a client and the connectors' configs."""

    def __init__(self, configs: dict[str, dict[str, str]], refusal: Exception | None = None) -> None:
        self.configs = configs
        self.refusal = refusal
        self.asked: list[tuple[str, list[str]]] = []

    async def __call__(self, namespace: str, labels: dict[str, str], names: Any) -> Any:
        self.asked.append((namespace, list(names)))
        if self.refusal is not None:
            raise self.refusal
        offsets_read.clear()

        async def config_of(name: str) -> dict[str, str] | None:
            return self.configs.get(name)

        def answer(request: httpx.Request) -> httpx.Response:
            offsets_read.append(request.url.path)
            return httpx.Response(404, json={"error_code": 404, "message": "Connector not found"})

        client = ConnectClient(ConnectEndpoint(url="http://connect:8083"), transport=httpx.MockTransport(answer))
        return client, config_of, ReferenceRule()


offsets_read: list[str] = []


class NoSecrets:
    """The resource has no secretConfig: nothing to read; the policy check is mirror_secrets' (tested elsewhere)."""

    async def read(self, resource: KafkaMirrorMaker2Resource, **_: Any) -> dict[tuple[str, str], str]:
        return {}

    def forget(self, namespace: str, name: str) -> None:
        pass


def monitor(resolver: Resolver) -> Any:
    from connect_offsets.lag import LagMonitor

    return LagMonitor(None, LagRegistry(), resolver, secrets=NoSecrets())  # type: ignore[arg-type]


def body() -> dict[str, Any]:
    return resource(intervalSeconds=2).model_dump(by_alias=True, exclude_none=True, mode="json")


async def test_a_refused_binding_reads_nothing() -> None:
    from connect_offsets.reconcile.clusters import ClusterBindingRefused

    refusal = ClusterBindingRefused(
        BindingRefusal(
            "ConnectorNameNotAllowed", "ConnectCluster p/shared requires connector names to start with 'ns-'"
        )
    )
    resolver = Resolver({}, refusal)
    lag = monitor(resolver)
    offsets_read.clear()
    await lag.measure(body())
    [(namespace, names)] = resolver.asked
    assert namespace == "ns" and sorted(names) == sorted(t.name for t in mirror_targets(resource(), {}).targets)
    connector = DECLARED[0][0]
    measured = lag.registry.get("ns", "mm2", connector)
    assert measured is not None and measured.lags == () and "start with 'ns-'" in (measured.error or "")
    assert offsets_read == []


async def test_a_connector_of_another_resource_is_not_read() -> None:
    connector = DECLARED[0][0]
    lag = monitor(Resolver({connector: {"connect-offsets.io/owner": "ns/someone-else"}}))
    lag.registry.put("ns", "mm2", [mirror([9], measured=0)])  # even numbers from before are dropped
    await lag.measure(body())
    measured = lag.registry.get("ns", "mm2", connector)
    assert measured is not None and measured.lags == () and measured.measured_at is None
    assert (
        measured.error
        == f"connector {connector} belongs to resource ns/someone-else: its offsets are not read for ns/mm2"
    )
    assert offsets_read == []


async def test_the_owned_connector_is_measured() -> None:
    connector = DECLARED[0][0]
    lag = monitor(Resolver({connector: {"connect-offsets.io/owner": "ns/mm2"}}))
    await lag.measure(body())
    assert offsets_read == [f"/connectors/{connector}/offsets"]  # (it answered 404: Kafka never reached)


def test_a_transactional_tail_is_read_only_once_the_mirror_stands_still() -> None:
    """Issue 46: MirrorMaker 2 never replicates commit/abort markers, so a source partition ending in
    one is at lag 1 by the offsets. Its tail is read only when the replicated offset did not move
    since the last measurement; a tail of markers and aborted records only is lag 0."""
    now = (PartitionLag("t", 0, 1, 8, 6), PartitionLag("t", 1, 5, 20, 14), PartitionLag("t", 2, 3, 3, None))
    assert tails_to_read(now, ()) == {}  # first measurement: nothing to compare with
    moved = (PartitionLag("t", 0, 4, 8, 3), PartitionLag("t", 1, 5, 20, 14))
    assert tails_to_read(now, moved) == {("t", 1): (15, 20)}  # partition 0 moved: catching up
    still = (PartitionLag("t", 0, 1, 8, 6), PartitionLag("t", 1, 5, 20, 14))
    assert tails_to_read(now, still) == {("t", 0): (7, 8), ("t", 1): (15, 20)}
    after = settled(now, frozenset({(("t", 0), 7, 8)}))
    assert [p.lag for p in after] == [0, 5, 3]
    assert settled(now, frozenset({(("t", 0), 7, 9)})) == now  # another end: not this tail


@pytest.mark.parametrize(
    ("config", "committed"),
    [
        ({}, False),  # MirrorMaker 2's default: it replicates aborted and open transactions' records
        ({"consumer.isolation.level": "read_committed"}, True),
        ({"source.consumer.isolation.level": "read_committed"}, True),
        ({"consumer.isolation.level": "read_committed", "source.consumer.isolation.level": "read_uncommitted"}, False),
    ],
)
async def test_a_mirror_is_measured_as_its_consumer_reads(
    monkeypatch: pytest.MonkeyPatch, config: dict[str, str], committed: bool
) -> None:
    """Attacker review of issue 46, F4: the end (last stable offset or high watermark) and the tail
    read follow the isolation level of MirrorMaker 2's consumer (``consumer.`` then
    ``source.consumer.``); a mirror reading uncommitted records was measured to the last stable
    offset with a read_committed tail read, which calls aborted records it never replicated gone."""
    from connect_offsets.clients.kafka import LogOffsets
    from connect_offsets.lag import measure as measure_module

    seen: list[tuple[str, bool]] = []

    async def offsets(*args: Any, read_committed: bool = False, **kwargs: Any) -> LogOffsets:
        seen.append(("log_offsets", read_committed))
        return LogOffsets(ends={("t", 0): 12}, starts={}, requests=2)

    async def tails(*args: Any, read_committed: bool = True, **kwargs: Any) -> Any:
        seen.append(("tails", read_committed))
        return frozenset(), frozenset()

    monkeypatch.setattr(measure_module, "log_offsets", offsets)
    monkeypatch.setattr(measure_module, "empty_tails", tails)
    res = resource()
    res.spec.mirrors[0].source_connector.config.update(config)  # type: ignore[union-attr]
    target = next(t for t in mirror_targets(res, {}).targets if t.name.endswith("MirrorSourceConnector"))
    document = {"offsets": [{"partition": {"cluster": "east", "topic": "t", "partition": 0}, "offset": {"offset": 5}}]}
    client = connect_answering(httpx.Response(200, json=document))
    async with client:
        first = await measure_module.measure_mirror(client, target, None, None, namespace="ns", clock=lambda: at(0))
        await measure_module.measure_mirror(client, target, first, None, namespace="ns", clock=lambda: at(10))
    assert seen == [("log_offsets", committed), ("log_offsets", committed), ("tails", committed)]
