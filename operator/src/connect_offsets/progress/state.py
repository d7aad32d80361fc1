"""What the operator knows of each connector's progress, and what status says about it (pure).

``ConnectorProgress`` is the latest measurement of one KafkaConnector's connector: for a sink, its
consumer group's committed offsets against the end offsets; for a source, a digest of Connect's
offsets. ``ProgressRegistry`` keeps them in memory, one per resource, written by the monitor (the
ConnectCluster's pass) and read by the resource's own pass, the one place that writes its status.

``judge`` decides the ``Progressing`` condition and the bounded ``status.progress`` summary:

* a sink with nothing waiting (lag 0) is ``True/UpToDate``; on topics written in transactions
  "waiting" is what a read_committed consumer can still be given: up to the last stable offset,
  and not the commit/abort markers and aborted records after the last record it read (the monitor
  reads such tails, ``clients.kafka.sink_positions``). Records of a transaction still open are not
  waiting yet; a sink caught up to one is ``UpToDate`` and its message says so;
* a connector whose offsets moved within ``stallAfter`` is ``True/Advancing``;
* a RUNNING sink with records waiting whose offsets have not moved for ``stallAfter`` (counted from
  the last move seen, or from when the operator began watching it) is ``False/NotAdvancing``; so is
  a source with ``expectSourceRecords``; other sources are ``True/Idle``;
* not measurable (no Kafka access, Kafka unreachable): ``Unknown/NotMeasured`` with the reason.

Status churn is bounded: the numbers in ``status.progress`` are refreshed at most every
``STATUS_REFRESH_S`` while the condition stays the same (metrics carry every measurement).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from connect_offsets.models.crds import ProgressSpec, ProgressStatus
from connect_offsets.planning import ConditionSpec
from connect_offsets.vocabulary import iso

__all__ = [
    "CONDITION",
    "STATUS_REFRESH_S",
    "ConnectorProgress",
    "ProgressRegistry",
    "SinkLag",
    "judge",
    "sink_lag",
]

CONDITION = "Progressing"
#: While the condition does not change, status.progress is rewritten at most this often: an
#: active sink's lag changes on every measurement, and a status write per connector per interval
#: is the cost Strimzi refused offsets in status for.
STATUS_REFRESH_S = 60.0

TP = tuple[str, int]


@dataclass(frozen=True)
class SinkLag:
    total: int
    behind: int  # partitions with records waiting
    partitions: int


def sink_lag(
    partitions: list[TP],
    committed: dict[TP, int],
    ends: dict[TP, int],
    starts: dict[TP, int],
    *,
    from_latest: bool = False,
) -> SinkLag:
    """The records waiting for a consumer group: per partition the end offset minus the committed
    offset, never negative; a partition without a commit counts from where the group will start
    (``auto.offset.reset``: the log start, which Connect's sinks use unless overridden, or the end)."""
    total = behind = counted = 0
    for tp in partitions:
        end = ends.get(tp)
        if end is None:
            continue
        counted += 1
        position = committed.get(tp)
        if position is None:
            position = end if from_latest else starts.get(tp, 0)
        waiting = max(0, end - position)
        total += waiting
        behind += 1 if waiting else 0
    return SinkLag(total, behind, counted)


@dataclass(frozen=True)
class ConnectorProgress:
    """The latest measurement of one connector (``kind``: sink or source)."""

    connector: str
    kind: str
    watching_since: datetime  # when the operator first saw it RUNNING (the stall clock's start)
    running: bool = True
    lag: SinkLag | None = None
    committed: dict[TP, int] | None = None  # sink: the group's committed offsets last read
    ends: dict[TP, int] = field(default_factory=dict)  # sink: last stable offsets of its partitions last read
    highs: dict[TP, int] = field(default_factory=dict)  # sink: their high watermarks (above: an open transaction)
    #: sink: tails known to hold nothing its consumer is given (partition, from, to; to: the last
    #: stable offset, or the high watermark for a sink reading uncommitted records).
    empty_tails: frozenset[tuple[TP, int, int]] = frozenset()
    #: sink: tails known to hold a record (records wait): not read again while they stand.
    full_tails: frozenset[tuple[TP, int, int]] = frozenset()
    #: sink: records of transactions still open past the last stable offset of partitions it caught
    #: up to, and on how many partitions.
    open_records: int = 0
    open_partitions: int = 0
    digest: str | None = None  # source: digest of Connect's offsets last read
    partitions: int | None = None  # source: partitions in Connect's offsets
    last_moved: datetime | None = None
    measured_at: datetime | None = None
    error: str | None = None  # why the last attempt could not measure

    def moved(self, at: datetime) -> ConnectorProgress:
        return replace(self, last_moved=at)


def judge(
    progress: ConnectorProgress | None, spec: ProgressSpec, now: datetime
) -> tuple[ProgressStatus | None, ConditionSpec | None]:
    """``status.progress`` and the ``Progressing`` condition for a connector (None, None: nothing to say)."""
    if progress is None or not progress.running:
        return None, None
    stall_after = timedelta(seconds=spec.stall_after_seconds)
    last_moved = None if progress.last_moved is None else iso(progress.last_moved)
    if progress.measured_at is None:
        why = progress.error or "not measured yet"
        return (
            ProgressStatus(type=progress.kind, last_moved=last_moved, message=why[:512]),
            ConditionSpec(CONDITION, "Unknown", "NotMeasured", why),
        )
    since = progress.last_moved or progress.watching_since
    still = now - since >= stall_after
    if progress.kind == "sink":
        lag = progress.lag or SinkLag(0, 0, 0)
        open_note = (
            f"{progress.open_records} record(s) of a transaction still open on {progress.open_partitions} "
            "partition(s), past the last stable offset: a read_committed consumer gets them once their "
            "transaction commits"
            if progress.open_records
            else ""
        )
        status = ProgressStatus(
            type="sink",
            total_lag=lag.total,
            partitions_behind=lag.behind,
            partitions=lag.partitions,
            last_moved=last_moved,
            message=(progress.error or open_note)[:512],
        )
        if lag.total == 0:
            return status, ConditionSpec(
                CONDITION, "True", "UpToDate", f"no records waiting; {open_note}" if open_note else "no records waiting"
            )
        if not still:
            return status, ConditionSpec(
                CONDITION, "True", "Advancing", f"{lag.total} record(s) waiting on {lag.behind} partition(s)"
            )
        return status, ConditionSpec(
            CONDITION,
            "False",
            "NotAdvancing",
            f"RUNNING with {lag.total} record(s) waiting on {lag.behind} partition(s), and its committed "
            f"offsets have not moved since {iso(since)} (spec.progress.stallAfter {spec.stall_after}): check "
            "the tasks (a blocked put(), a sink system that does not answer)",
        )
    status = ProgressStatus(
        type="source", partitions=progress.partitions, last_moved=last_moved, message=(progress.error or "")[:512]
    )
    if not still:
        return status, ConditionSpec(CONDITION, "True", "Advancing", "its offsets moved within stallAfter")
    if spec.expect_source_records:
        return status, ConditionSpec(
            CONDITION,
            "False",
            "NotAdvancing",
            f"RUNNING, and its offsets have not changed since {iso(since)} (spec.progress.stallAfter "
            f"{spec.stall_after}, spec.progress.expectSourceRecords)",
        )
    return status, ConditionSpec(
        CONDITION,
        "True",
        "Idle",
        f"its offsets have not changed since {iso(since)}; a source connector is reported stalled only with "
        "spec.progress.expectSourceRecords",
    )


@dataclass
class _Shown:
    status: ProgressStatus | None
    condition: ConditionSpec | None
    at: datetime
    version: int


class ProgressRegistry:
    """The latest ``ConnectorProgress`` per resource, and what its status last showed of it."""

    def __init__(self) -> None:
        self._progress: dict[tuple[str, str], ConnectorProgress] = {}
        self._shown: dict[tuple[str, str], _Shown] = {}
        #: Resources whose status would show something else now (``would_change``): their next
        #: check runs a full pass instead of the idle skip.
        self._dirty: set[tuple[str, str]] = set()

    def get(self, namespace: str, name: str) -> ConnectorProgress | None:
        return self._progress.get((namespace, name))

    def put(self, namespace: str, name: str, progress: ConnectorProgress) -> None:
        self._progress[(namespace, name)] = progress

    def forget(self, namespace: str, name: str) -> None:
        self._progress.pop((namespace, name), None)
        self._shown.pop((namespace, name), None)
        self._dirty.discard((namespace, name))

    def mark(self, namespace: str, name: str) -> None:
        self._dirty.add((namespace, name))

    def is_dirty(self, namespace: str, name: str) -> bool:
        return (namespace, name) in self._dirty

    def resources(self) -> list[tuple[str, str]]:
        return list(self._progress)

    def report(
        self, namespace: str, name: str, spec: ProgressSpec, now: datetime
    ) -> tuple[ProgressStatus | None, ConditionSpec | None, int]:
        """What the resource's status should show now, and a version that changes whenever that
        does (the idle skip compares it). The numbers stay as last shown while the condition is
        the same and they were shown less than ``STATUS_REFRESH_S`` ago."""
        key = (namespace, name)
        self._dirty.discard(key)
        status, condition = judge(self._progress.get(key), spec, now)
        shown = self._shown.get(key)
        if shown is not None:
            same_condition = _key(shown.condition) == _key(condition)
            recent = (now - shown.at).total_seconds() < STATUS_REFRESH_S
            if (shown.status == status and shown.condition == condition) or (
                same_condition and recent and _same_kind(shown.status, status)
            ):
                return shown.status, shown.condition, shown.version
        version = 1 if shown is None else shown.version + 1
        self._shown[key] = _Shown(status, condition, now, version)
        return status, condition, version

    def would_change(self, namespace: str, name: str, spec: ProgressSpec, now: datetime) -> bool:
        """Whether ``report`` would now show something else than it last did (the monitor wakes the
        resource then)."""
        key = (namespace, name)
        shown = self._shown.get(key)
        status, condition = judge(self._progress.get(key), spec, now)
        if shown is None:
            return status is not None or condition is not None
        if _key(shown.condition) != _key(condition):
            return True
        return shown.status != status and (
            (now - shown.at).total_seconds() >= STATUS_REFRESH_S or not _same_kind(shown.status, status)
        )


def _key(condition: ConditionSpec | None) -> tuple[str, str] | None:
    """What a condition says, without its message: the numbers in the message change with every
    measurement and are refreshed with status.progress (``STATUS_REFRESH_S``), not on each."""
    return None if condition is None else (condition.status, condition.reason)


def _same_kind(a: ProgressStatus | None, b: ProgressStatus | None) -> bool:
    """Whether ``b`` only refreshes ``a``'s numbers: the same type and the same fields known. A field
    known for the first time (a source's first ``lastMoved``), or a message appearing or going (a
    transaction still open ahead of a caught-up sink), is news, shown at once."""
    return (
        a is not None
        and b is not None
        and a.type == b.type
        and a.model_dump(exclude_none=True).keys() == b.model_dump(exclude_none=True).keys()
        and bool(a.message) == bool(b.message)
    )
