"""Offsets history as Spark tables: decode, latest, history, as-of.

Why Spark: a worker's offsets topic keeps every commit until the log cleaner removes it, which on a
busy Connect cluster is millions of records; answering "what were the offsets at 14:02 yesterday" means
scanning all of them. The scan is embarrassingly parallel per Kafka partition and the reduction is a
group-by, so it runs in Spark (embedded ``local[*]`` or on a cluster) with the decoding in Spark SQL's
JSON functions: no Python UDF, no per-record Python at all on the hot path.

Semantics, matched to the worker (reference: connect-offsets-api.md §8.2):

- a key is ``["<connector>", {partition}]``; anything else (not JSON, not a two-element array with a
  string and an object, ``["c", null]``) is skipped, as Connect's ``OffsetUtils.processPartitionKey`` does;
- a null value (or the JSON text ``null``) is a tombstone: "no offset";
- records of one source partition are ordered by record timestamp, then by topic (the order the
  sources were given, so a connector's own topic can be listed after the worker's), Kafka partition
  and offset. Within one Kafka partition that is log order whenever timestamps do not go backwards
  (Connect's producer stamps wall-clock CreateTime);
- a source partition is identified by its canonical JSON text (sorted keys, compact; see
  _CANONICAL_PARTITION), so ``{"a":1,"b":2}`` and ``{"b":2,"a":1}`` are one partition, as they are for
  Connect's ``connectorPartitions``. Numbers compare as the worker's JsonConverter reads them: an
  integer is a ``Long`` and anything with a fraction or an exponent a ``Double``, so ``1`` and ``1.0``
  are two partitions while ``1.0``, ``1.00`` and ``1e0`` are one. The documents carry the partition
  exactly as it was stored (``1.0`` stays a double), so applying them addresses the same key.

How the work is laid out (issue 8, bench/bench_pipeline.py): parsing JSON is what costs, so records
are read with their key and value as undecoded text (``RECORD_COLUMNS``) and the reductions
(``latest``, ``as_of``) first reduce per *stored key text*, which needs no parsing and leaves one row
per key written (thousands, not millions). Only those rows are decoded (``from_json``), checked and
canonicalised, then combined per canonical partition. Both steps take the maximum
(or minimum) of a struct that starts with the ordering fields, so the two-step reduction picks exactly
the record a one-step one would. ``decode_records`` gives the per-record view (``DECODED_COLUMNS``)
for the history table.

Compaction cannot be seen record by record, but it leaves holes in the Kafka offsets. Each record
carries ``removed_before``: how many offsets below it in its Kafka partition are missing (compacted,
deleted by retention, aborted or transaction markers). A source partition whose first retained record is
after T and has ``removed_before > 0`` may have had an offset at T that is gone: as-of lists it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from connect_offsets.errors import ConnectOffsetsError

if TYPE_CHECKING:  # pragma: no cover - typing only
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = [
    "AsOfResult",
    "KafkaSource",
    "PipelineError",
    "as_of",
    "decode_kafka",
    "decode_records",
    "history_summary",
    "latest",
    "read_export",
    "read_kafka",
    "write_history",
]

#: Where a record was, in every record layout.
_POSITION_COLUMNS = (
    "kafka_topic",  # string (null for an export without Kafka positions)
    "kafka_partition",  # int
    "kafka_offset",  # long
    "timestamp",  # timestamp (UTC), null when the source has none
    "source_rank",  # int: position of the source in the list given
    "seq",  # long: order within the source when it has no Kafka positions
    "removed_before",  # long: missing Kafka offsets below this record in its Kafka partition (null: unknown)
)

#: Records as read, whatever the source: key and value still undecoded text (see decode_records).
RECORD_COLUMNS = (
    "key_text",  # the record key as stored: ``["<connector>", {partition}]`` when Connect would use it
    "value_text",  # the record value as stored (null: a tombstone; so is the JSON text ``null``)
    *_POSITION_COLUMNS,
)

#: One row per record with a key Connect would use, decoded (decode_records; the history table).
DECODED_COLUMNS = (
    "connector",  # string
    "partition",  # canonical JSON text of the partition map
    "partition_stored",  # the partition map as stored (key order and number types of the writer)
    "offset",  # offset map JSON text as stored; null for a tombstone
    "tombstone",  # boolean
    *_POSITION_COLUMNS,
)

#: What ``history`` writes (the internal ordering helpers are left out).
HISTORY_COLUMNS = (
    "connector",
    "partition",
    "offset",
    "tombstone",
    "kafka_topic",
    "kafka_partition",
    "kafka_offset",
    "timestamp",
    "removed_before",
)

_EXPORT_SCHEMA = (
    "map<string, array<struct<partition: string, offset: string, "
    "kafka: struct<topic: string, partition: int, offset: bigint, timestamp: bigint>>>>"
)


#: ``fetch.max.wait.ms`` for the batch reads (see read_kafka); a source's own ``options`` win.
FETCH_MAX_WAIT_MS = "10"

#: ``max.poll.records`` for the batch reads (see read_kafka); a source's own ``options`` win.
MAX_POLL_RECORDS = "10000"

#: Later records win: by timestamp, then source, Kafka partition and offset, then order in the file.
_ORDER = ("timestamp", "source_rank", "kafka_partition", "kafka_offset", "seq")


#: The canonical text of a (valid) stored partition object: keys sorted, compact, each number written
#: as the Java type JsonConverter gives it. VARIANT alone will not do: it reads ``1.0`` as the decimal 1
#: (printed ``1``, equal to the integer 1) but ``1e0`` as a double (``1.0``), where Connect has
#: ``Double`` 1.0 for both and ``Long`` 1 for ``1``. So each value is typed first: decimals and doubles
#: are printed as doubles, everything else as VARIANT prints it. Source partitions are flat maps of
#: primitives (Connect's ``OffsetUtils.validateFormat``); a nested value written by some other tool is
#: compared by VARIANT's rules. Two steps, as columns, so each field's value is looked up once:
#: ``_fields`` are the sorted keys with their values (a key given twice keeps its last value, as
#: Jackson does), and _CANONICAL_PARTITION prints them.
_PARTITION_FIELDS = """
transform(
    array_sort(array_distinct(map_keys(from_json(partition_stored, 'map<string, variant>')))),
    k -> named_struct('k', k, 'v', element_at(
        filter(map_entries(from_json(partition_stored, 'map<string, variant>')), e -> e.key = k), -1).value))
"""
_CANONICAL_PARTITION = """
concat('{', array_join(transform(_fields, f -> concat(
    substr(to_json(array(f.k)), 2, length(to_json(array(f.k))) - 2), ':',
    CASE WHEN schema_of_variant(f.v) RLIKE '^(DOUBLE|FLOAT|DECIMAL)' THEN string(cast(f.v AS double))
         ELSE to_json(f.v) END)), ','), '}')
"""


class PipelineError(ConnectOffsetsError):
    """A job cannot produce a correct answer; the message names the source, connector or time."""


@dataclass(frozen=True)
class KafkaSource:
    """One offsets topic: the worker's ``offset.storage.topic`` or a connector's own (KIP-618)."""

    bootstrap_servers: str
    topic: str
    options: dict[str, str] = field(default_factory=dict)  # kafka.* consumer settings (security, ...)
    isolation_level: str = "read_committed"

    def describe(self) -> str:
        return f"{self.topic} at {self.bootstrap_servers}"


# --------------------------------------------------------------------------- reading


def read_kafka(spark: SparkSession, source: KafkaSource, rank: int = 0) -> DataFrame:
    """Every record of ``source`` (batch, earliest to latest), as RECORD_COLUMNS."""
    reader = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", source.bootstrap_servers)
        .option("subscribe", source.topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .option("kafka.isolation.level", source.isolation_level)
        # Offsets vanish under compaction between planning and reading; that is expected here.
        .option("failOnDataLoss", "false")
        # The read has a known end, so there is nothing to wait for at the broker: with Kafka's default
        # (500 ms) every Kafka partition of the topic costs half a second of idle waiting.
        .option("kafka.fetch.max.wait.ms", FETCH_MAX_WAIT_MS)
        # Spark's reader asks the broker for the partition's earliest and latest offsets (two ListOffsets
        # round trips, which the task waits for) after every poll, and a poll returns at most
        # max.poll.records: with Kafka's 500 that is 40,000 round trips for 10 M records, a third of a
        # task's time. Spark keeps a task's last poll cached after it ends, so this is not unbounded:
        # 10,000 records are a few MB per Kafka partition (bench_pipeline.py).
        .option("kafka.max.poll.records", MAX_POLL_RECORDS)
    )
    for key, value in source.options.items():
        reader = reader.option(key if key.startswith("kafka.") else f"kafka.{key}", value)
    return decode_kafka(reader.load(), rank)


def decode_kafka(raw: DataFrame, rank: int = 0) -> DataFrame:
    """The Kafka source's rows (key/value binary, topic, partition, offset, timestamp) as RECORD_COLUMNS.

    Must be applied straight to the source: ``removed_before`` uses each row's position inside its
    Spark partition, which for Spark's Kafka batch source is exactly one Kafka partition's offset range
    read from the earliest offset, in log order.
    """
    from pyspark.sql import functions as F

    return raw.select(
        F.col("key").cast("string").alias("key_text"),
        F.col("value").cast("string").alias("value_text"),
        F.col("topic").alias("kafka_topic"),
        F.col("partition").cast("int").alias("kafka_partition"),
        F.col("offset").alias("kafka_offset"),
        F.col("timestamp"),
        F.lit(rank).alias("source_rank"),
        F.col("offset").alias("seq"),
        # row index inside the Spark partition = records of this Kafka partition read before this one
        (F.col("offset") - F.expr("monotonically_increasing_id() & 8589934591")).alias("removed_before"),
    )


def _decode_key(frame: DataFrame) -> DataFrame:
    """Add connector, partition_stored and partition (canonical) from ``key_text``.

    All three are null for a key Connect would skip. Callers filter on them *after* their reduction
    (see _per_key): a filter on the key alone would be pushed below a group-by on the key.
    """
    from pyspark.sql import functions as F

    parts = F.col("_key_parts")
    # JSON types of the elements: the array<string> parse below cannot tell {...} from "{...}".
    types = F.expr("transform(from_json(key_text, 'array<variant>'), element -> schema_of_variant(element))")
    valid_key = (F.size(types) == 2) & (types[0] == "STRING") & types[1].startswith("OBJECT")
    return (
        frame.withColumn("_key_parts", F.expr("from_json(key_text, 'array<string>')"))
        .withColumn("connector", F.when(valid_key, parts[0]))
        .withColumn("partition_stored", F.when(valid_key, parts[1]))
        .withColumn("_fields", F.expr(_PARTITION_FIELDS))
        .withColumn("partition", F.expr(_CANONICAL_PARTITION))
        .drop("_key_parts", "_fields")
    )


def _offset(value_text: Column) -> Column:
    """The offset JSON text, null for a tombstone (a null value or the JSON text ``null``)."""
    from pyspark.sql import functions as F

    return F.when(F.trim(value_text) == "null", F.lit(None)).otherwise(value_text)


def decode_records(records: DataFrame) -> DataFrame:
    """RECORD_COLUMNS -> DECODED_COLUMNS: one row per record whose key Connect would use.

    Parses every record's key, so it costs what the jobs avoid; the history table needs it.
    """
    from pyspark.sql import functions as F

    return (
        _decode_key(records)
        .where(F.col("connector").isNotNull())
        .select(
            "connector",
            "partition",
            "partition_stored",
            _offset(F.col("value_text")).alias("offset"),
            _offset(F.col("value_text")).isNull().alias("tombstone"),
            *_POSITION_COLUMNS,
        )
    )


def read_export(spark: SparkSession, path: str, rank: int = 0) -> DataFrame:
    """A ``connect-offsets export`` file (KIP-199), with or without ``--from-beginning`` Kafka positions.

    The file is one JSON document, so it is read whole (one task): fine for what the exporter writes;
    for the full history of a large cluster read the topics instead.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.window import Window

    text = spark.read.text(path, wholetext=True)
    by_connector = text.select(F.explode(F.expr(f"from_json(value, '{_EXPORT_SCHEMA}')")).alias("connector", "entries"))
    entries = by_connector.select("connector", F.posexplode("entries").alias("seq", "entry"))
    stored = F.col("entry.partition")
    offset = F.col("entry.offset")
    frame = entries.select(
        "connector",
        stored.alias("stored"),
        offset.alias("value_text"),
        F.col("entry.kafka.topic").alias("kafka_topic"),
        F.col("entry.kafka.partition").alias("kafka_partition"),
        F.col("entry.kafka.offset").alias("kafka_offset"),
        F.timestamp_millis(F.col("entry.kafka.timestamp")).alias("timestamp"),
        F.col("seq").cast("long").alias("seq"),
    ).where(stored.isNotNull() & F.col("entry.partition").startswith("{"))
    in_partition = Window.partitionBy("kafka_topic", "kafka_partition").orderBy("kafka_offset")
    removed = F.when(F.col("kafka_offset").isNotNull(), F.col("kafka_offset") - (F.row_number().over(in_partition) - 1))
    # The key Connect would have written for the entry (to_json quotes and escapes the name), so the
    # jobs decode exports and topics alike; from_json gives back ``stored`` as it is here.
    named = F.to_json(F.array("connector"))  # ["<connector>"]
    key_text = F.concat(F.regexp_replace(named, r"\]$", ","), F.col("stored"), F.lit("]"))
    return frame.select(
        key_text.alias("key_text"),
        "value_text",
        "kafka_topic",
        "kafka_partition",
        "kafka_offset",
        "timestamp",
        F.lit(rank).alias("source_rank"),
        "seq",
        removed.alias("removed_before"),
    )


def union_sources(frames: Sequence[DataFrame]) -> DataFrame:
    if not frames:
        raise PipelineError("no source given: name at least one offsets topic or an export file")
    result = frames[0]
    for frame in frames[1:]:
        result = result.unionByName(frame)
    return result


def only_connectors(records: DataFrame, connectors: Sequence[str] | None) -> DataFrame:
    """The records whose key names one of ``connectors`` (keys Connect would skip are dropped later)."""
    from pyspark.sql import functions as F

    if not connectors:
        return records
    return records.where(F.expr("from_json(key_text, 'array<string>')")[0].isin(list(connectors)))


# --------------------------------------------------------------------------- the jobs


def _ranked(*payload: str | Column) -> Column:
    """A struct of the ordering fields then ``payload``: its max is the latest record, its min the first."""
    from pyspark.sql import functions as F

    return F.struct(*_ORDER, *payload)


def _per_key(records: DataFrame, **aggregates: Column) -> DataFrame:
    """Reduce to one row per stored key, then decode that key (_decode_key: null for keys Connect skips).

    This is the pass over every record, so nothing in it parses JSON.
    """
    return _decode_key(records.groupBy("key_text").agg(*(c.alias(n) for n, c in aggregates.items())))


def _valid(column: str) -> Column:
    """``column`` of a per-key row whose key Connect uses, else null (so the aggregates leave it out)."""
    from pyspark.sql import functions as F

    return F.when(F.col("partition_stored").isNotNull(), F.col(column))


def _combine(latest_of: str) -> Column:
    """Latest of the per-key ``latest_of`` structs of one partition, with the stored text of its key.

    Null when no valid key of the group has one: the group of skipped keys comes out null.
    """
    from pyspark.sql import functions as F

    return F.max(
        F.when(
            F.col(latest_of).isNotNull() & F.col("partition_stored").isNotNull(),
            F.struct(F.col(latest_of).alias("r"), F.col("partition_stored").alias("s")),
        )
    )


def latest(records: DataFrame) -> DataFrame:
    """connector, partition, partition_stored, offset, timestamp: the current offsets (tombstones honoured)."""
    from pyspark.sql import functions as F

    keys = _per_key(records, last=F.max(_ranked("value_text")))
    last = keys.groupBy("connector", "partition").agg(_combine("last").alias("last"))
    offset = _offset(F.col("last.r.value_text"))
    return last.where(F.col("last").isNotNull() & offset.isNotNull()).select(
        "connector",
        "partition",
        F.col("last.s").alias("partition_stored"),
        offset.alias("offset"),
        F.col("last.r.timestamp").alias("timestamp"),
    )


@dataclass
class AsOfResult:
    at: datetime
    documents: dict[str, dict[str, Any]]  # connector -> {"offsets": [...]} (only non-empty ones)
    compacted: list[dict[str, Any]]  # partitions whose offset at T may have been removed from the log
    not_covered: list[str]  # connectors whose retained history starts after T
    rows: int  # source partitions considered


def as_of(records: DataFrame, at: datetime) -> AsOfResult:
    """Per connector, the offsets at ``at``: the last record with timestamp <= at; tombstone = no offset.

    Documents list every partition that has an offset at T, plus ``"offset": null`` for partitions that
    have one now but had none at T, so applying the document through ``alterOffsets`` puts the connector
    exactly where it was (a PATCH leaves unlisted partitions alone).
    """
    from pyspark.sql import functions as F

    at_utc = _utc(at)
    cutoff = F.timestamp_millis(F.lit(_millis(at_utc)))
    before = F.col("timestamp") <= cutoff
    keys = _per_key(
        records,
        now=F.max(_ranked("value_text")),
        then=F.max(F.when(before, _ranked("value_text"))),
        first=F.min(_ranked("removed_before")),
        earliest=F.min("timestamp"),
    )
    per_partition = keys.groupBy("connector", "partition").agg(
        _combine("now").alias("now"),
        _combine("then").alias("then"),
        F.min(_valid("first")).alias("first"),
        F.min(_valid("earliest")).alias("earliest"),
    )
    # One pass over the records: the earliest time comes back with the (small) per-partition rows.
    rows = (
        per_partition.where(F.col("now").isNotNull())
        .select(
            "connector",
            "partition",
            F.col("now.s").alias("stored_now"),
            _offset(F.col("now.r.value_text")).isNotNull().alias("has_now"),
            F.col("then.s").alias("stored_then"),
            _offset(F.col("then.r.value_text")).alias("offset_then"),
            F.unix_millis("first.timestamp").alias("first_time"),
            F.col("first.removed_before").alias("removed_before"),
            F.unix_millis("earliest").alias("earliest"),
        )
        .collect()
    )
    if not rows:
        raise PipelineError("the sources hold no offsets records for the selected connectors")
    earliest = [r["earliest"] for r in rows if r["earliest"] is not None]
    if not earliest:
        raise PipelineError(
            "the records carry no timestamps (an export without --from-beginning?): as-of needs the topic "
            "or an export made with `connect-offsets export --from-beginning`"
        )
    first = _from_millis(min(earliest))
    assert first is not None
    if at_utc < first:
        raise PipelineError(
            f"time {_iso(at_utc)} is before the earliest retained record ({_iso(first)}): nothing is known about "
            "the offsets then (older records were compacted or deleted)"
        )
    documents: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    compacted: list[dict[str, Any]] = []
    covered: set[str] = set()
    connectors: set[str] = set()
    for row in rows:
        connector, partition = row["connector"], row["partition"]
        connectors.add(connector)
        if row["stored_then"] is not None:
            covered.add(connector)
        if row["stored_then"] is not None and row["offset_then"] is not None:
            entry = {"partition": json.loads(row["stored_then"]), "offset": json.loads(row["offset_then"])}
        elif row["has_now"]:
            entry = {"partition": json.loads(row["stored_now"]), "offset": None}
        else:
            entry = None
        if entry is not None:
            documents.setdefault(connector, []).append((partition, entry))
        if row["stored_then"] is None and (row["removed_before"] or 0) > 0:
            compacted.append(
                {
                    "connector": connector,
                    "partition": json.loads(partition),
                    "first_retained": _iso(_from_millis(row["first_time"])),
                    "missing_offsets_before": int(row["removed_before"]),
                }
            )
    compacted.sort(key=lambda c: (c["connector"], json.dumps(c["partition"], sort_keys=True)))
    return AsOfResult(
        at=at_utc,
        documents={
            c: {"offsets": [e for _, e in sorted(entries, key=lambda x: x[0])]}
            for c, entries in sorted(documents.items())
        },
        compacted=compacted,
        not_covered=sorted(connectors - covered),
        rows=len(rows),
    )


def latest_documents(records: DataFrame) -> dict[str, dict[str, Any]]:
    """connector -> ``{"offsets": [...]}`` of its current offsets (partitions sorted canonically)."""
    found: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for row in latest(records).collect():
        entry = {"partition": json.loads(row["partition_stored"]), "offset": json.loads(row["offset"])}
        found.setdefault(row["connector"], []).append((row["partition"], entry))
    return {c: {"offsets": [e for _, e in sorted(entries, key=lambda x: x[0])]} for c, entries in sorted(found.items())}


def history_table(decoded: DataFrame) -> DataFrame:
    return decoded.select(*HISTORY_COLUMNS)


def write_history(decoded: DataFrame, path: str, mode: str = "overwrite") -> None:
    """The history (DECODED_COLUMNS) as Parquet, partitioned by connector, sorted in log order."""
    (
        history_table(decoded)
        .repartition("connector")
        .sortWithinPartitions("connector", "partition", "timestamp", "kafka_offset")
        .write.mode(mode)
        .partitionBy("connector")
        .parquet(path)
    )


def history_summary(decoded: DataFrame) -> list[dict[str, Any]]:
    """Per connector (DECODED_COLUMNS): records, tombstones, source partitions, first/last time, topics."""
    from pyspark.sql import functions as F

    rows = (
        decoded.groupBy("connector")
        .agg(
            F.count(F.lit(1)).alias("records"),
            F.sum(F.col("tombstone").cast("long")).alias("tombstones"),
            F.countDistinct("partition").alias("partitions"),
            F.unix_millis(F.min("timestamp")).alias("first"),
            F.unix_millis(F.max("timestamp")).alias("last"),
            F.array_sort(F.collect_set("kafka_topic")).alias("topics"),
        )
        .orderBy("connector")
        .collect()
    )
    return [
        {
            "connector": r["connector"],
            "records": int(r["records"]),
            "tombstones": int(r["tombstones"]),
            "partitions": int(r["partitions"]),
            "first": _iso(_from_millis(r["first"])),
            "last": _iso(_from_millis(r["last"])),
            "topics": list(r["topics"]),
        }
        for r in rows
    ]


# --------------------------------------------------------------------------- time helpers


# Times cross the Python/JVM boundary as epoch milliseconds: Python datetimes collected from Spark are
# naive and in the driver's local zone, which is not something a result should depend on.


def _utc(value: datetime) -> datetime:
    """Naive datetimes given by users mean UTC."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _millis(value: datetime) -> int:
    return int(_utc(value).timestamp() * 1000)


def _from_millis(millis: int | None) -> datetime | None:
    return None if millis is None else datetime.fromtimestamp(millis / 1000, tz=UTC)


def _iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_time(text: str) -> datetime:
    """``--at``: ISO-8601 (``Z`` or an offset; no zone means UTC) or epoch milliseconds."""
    stripped = text.strip()
    if stripped.isdigit():
        millis = int(stripped)
        return datetime.fromtimestamp(millis / 1000, tz=UTC)
    try:
        parsed = datetime.fromisoformat(stripped.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise PipelineError(
            f"--at {text!r}: expected an ISO-8601 time such as 2026-11-22T14:02:00Z or epoch milliseconds"
        ) from None
    return _utc(parsed)
