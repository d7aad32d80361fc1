"""The records of Connect's offsets store, byte for byte: keys and values as the worker writes them,
the Kafka partition a key lands on, and stored records decoded; pure, no I/O.

Why byte-exact matters: a source connector's offsets live in a compacted topic (or, standalone, a
file) keyed by the *serialised* ``["<connector>", {partition}]``. Connect finds a partition's
offset by comparing raw key bytes, so a key written by another tool must equal what the worker
itself writes: the same key order, ``0`` not ``0.0``, ``1.0E20`` not ``1e+20``, ``\\u001F`` not
``\\u001f``, no spaces. A key that differs by one byte is a *different* partition to Connect: the
connector never sees it, and the old key keeps winning. The same holds for the Kafka partition a
record lands on: Connect's producer uses Java's murmur2 partitioner; a record on another
partition is a second copy that compaction never removes and that may win on read.

What Connect does (JsonConverter with ``schemas.enable=false``, Jackson 2.x; checked against the
real converter from the stack's Kafka jars by tests/integration/test_offline_cli.py):

- maps come from ``JsonConverter.toConnectData``, i.e. a ``java.util.HashMap`` filled in input
  order, and are written in that HashMap's iteration order (``java_hashmap_order``);
- integers are ``Long`` (plain digits), other numbers ``Double`` written by ``Double.toString``
  (``java_double_str``);
- strings are UTF-8 with Jackson's escapes: ``\\"``, ``\\\\``, ``\\b \\t \\n \\f \\r``, other control
  characters as upper-case ``\\u00XX``; ``/`` and non-ASCII are written raw.

So the keys this module writes are exactly what a ``PATCH /connectors/{c}/offsets`` writes. Keys
written by a connector's own ``Map`` (a ``LinkedHashMap``, ``Map.of``...) may use another order;
the import therefore reuses the exact bytes of a key already in the store for the same partition
(``StoredKey.raw``) and only encodes a new key when there is none.

What is elsewhere: the export and import documents (``documents``), the standalone worker's
offsets file (``offsets_file``), reading and writing the store itself (``store``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from connect_offsets.offsets import Primitive, partition_key

__all__ = [
    "JAVA_HASHMAP_CAPACITY",
    "JAVA_HASHMAP_LOAD_FACTOR",
    "KafkaPosition",
    "StoredKey",
    "StoredRecord",
    "decode_key",
    "decode_value",
    "encode_connect_json",
    "encode_key",
    "encode_value",
    "java_double_str",
    "java_hashmap_order",
    "java_string_hash",
    "last_per_key",
    "latest",
    "murmur2",
    "murmur2_partition",
]

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1

# --------------------------------------------------------------------------- Java's HashMap order

#: java.util.HashMap constants (JDK 8+): default capacity, load factor, bin treeification.
JAVA_HASHMAP_CAPACITY = 16
JAVA_HASHMAP_LOAD_FACTOR = 0.75
_TREEIFY_THRESHOLD = 8
_MIN_TREEIFY_CAPACITY = 64


def java_string_hash(text: str) -> int:
    """``String.hashCode()``: ``31*h + c`` over UTF-16 code units, as an unsigned 32-bit int."""
    units = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h


def _spread(h: int) -> int:
    return h ^ (h >> 16)


def java_hashmap_order(keys: Sequence[str]) -> list[str]:
    """The iteration order of a ``new HashMap<>()`` after ``put`` of ``keys`` in this order.

    Buckets are ``spread(hashCode) & (capacity - 1)``; the capacity doubles from 16 whenever the
    size exceeds 0.75 x capacity, or when a bucket reaches 9 entries while the capacity is below
    64 (``treeifyBin``). A resize splits each bucket keeping relative order, so the result is:
    by final bucket, then insertion order. A real tree bin (9+ keys with the same bucket at
    capacity >= 64) is not modelled; ``ValueError`` says so rather than guessing.
    """
    unique = list(dict.fromkeys(keys))
    hashes = {key: _spread(java_string_hash(key)) for key in unique}
    capacity = JAVA_HASHMAP_CAPACITY
    buckets_seen: dict[int, int] = {}  # bucket -> entries, at the current capacity
    for size, key in enumerate(unique, start=1):
        bucket = hashes[key] & (capacity - 1)
        buckets_seen[bucket] = buckets_seen.get(bucket, 0) + 1
        if buckets_seen[bucket] > _TREEIFY_THRESHOLD:
            if capacity >= _MIN_TREEIFY_CAPACITY:
                raise ValueError(
                    f"{buckets_seen[bucket]} keys share one HashMap bucket; Java's tree-bin order is not modelled"
                )
            capacity *= 2
            buckets_seen = _count_buckets(unique[:size], hashes, capacity)
        if size > capacity * JAVA_HASHMAP_LOAD_FACTOR:
            capacity *= 2
            buckets_seen = _count_buckets(unique[:size], hashes, capacity)
    position = {key: i for i, key in enumerate(unique)}
    return sorted(unique, key=lambda k: (hashes[k] & (capacity - 1), position[k]))


def _count_buckets(keys: Sequence[str], hashes: Mapping[str, int], capacity: int) -> dict[int, int]:
    counts: dict[int, int] = {}
    for key in keys:
        bucket = hashes[key] & (capacity - 1)
        counts[bucket] = counts.get(bucket, 0) + 1
    return counts


# --------------------------------------------------------------------------- JSON as Connect writes it

_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def _jackson_string(text: str) -> str:
    out = ['"']
    for char in text:
        if char in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[char])
        elif ord(char) < 0x20:
            out.append(f"\\u{ord(char):04X}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def java_double_str(value: float) -> str:
    """``Double.toString(value)``: plain for 1e-3 <= |v| < 1e7 (``100.0``), else ``1.5E-7``.

    Digits are the shortest that round-trip (Python's ``repr``), which is what JDK 19+ prints and
    what JDK 17 prints for all but rare values (JDK-4511638).
    """
    if not math.isfinite(value):
        raise ValueError(f"{value} cannot be stored: Connect offsets hold finite numbers only")
    if value == 0.0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign = "-" if value < 0 else ""
    _, digit_tuple, exponent = Decimal(repr(abs(value))).as_tuple()
    digits = "".join(map(str, digit_tuple)).rstrip("0") or "0"
    assert isinstance(exponent, int)
    # value = 0.d1d2d3... x 10^point
    point = len(digit_tuple) + exponent
    if 1e-3 <= abs(value) < 1e7:
        if point <= 0:
            return f"{sign}0.{'0' * -point}{digits}"
        whole = digits[:point].ljust(point, "0")
        fraction = digits[point:] or "0"
        return f"{sign}{whole}.{fraction}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{point - 1}"


def encode_connect_json(value: object, path: str = "$") -> str:
    """Serialise like ``JsonConverter.fromConnectData(toConnectData(json))`` with schemas off.

    ``ValueError`` (naming ``path``) for what Connect cannot hold: non-finite numbers, integers
    outside a Java ``long``, non-string map keys, unknown types.
    """
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        if not _INT64_MIN <= value <= _INT64_MAX:
            raise ValueError(f"{path}: {value} does not fit a Java long")
        return str(value)
    if isinstance(value, float):
        try:
            return java_double_str(value)
        except ValueError as error:
            raise ValueError(f"{path}: {error}") from None
    if isinstance(value, str):
        _check_encodable(value, path)
        return _jackson_string(value)
    if isinstance(value, Mapping):
        for key in value:
            if not isinstance(key, str):
                raise ValueError(f"{path}: map keys must be strings, got {key!r}")
            _check_encodable(key, path)
        parts = [
            f"{_jackson_string(key)}:{encode_connect_json(value[key], f'{path}.{key}')}"
            for key in java_hashmap_order(list(value))
        ]
        return "{" + ",".join(parts) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(encode_connect_json(item, f"{path}[{i}]") for i, item in enumerate(value)) + "]"
    raise ValueError(f"{path}: cannot store a {type(value).__name__} in Connect's offsets")


def _check_encodable(text: str, path: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{path}: {text!r} holds a lone UTF-16 surrogate, which UTF-8 cannot carry") from None


def encode_key(connector: str, partition: Mapping[str, Primitive]) -> bytes:
    """The offsets-topic key Connect writes for ``partition`` of ``connector``."""
    return encode_connect_json([connector, dict(partition)]).encode("utf-8")


def encode_value(offset: Mapping[str, Primitive] | None) -> bytes | None:
    """The record value for ``offset``; None (a tombstone) removes the partition's offset."""
    return None if offset is None else encode_connect_json(dict(offset), "offset").encode("utf-8")


# --------------------------------------------------------------------------- murmur2 (Kafka's Utils.murmur2)

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK32 = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """``org.apache.kafka.common.utils.Utils.murmur2``: a signed 32-bit int, as in Java."""
    length = len(data)
    h = (_SEED ^ length) & _MASK32
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = data[i] | data[i + 1] << 8 | data[i + 2] << 16 | data[i + 3] << 24
        k = (k * _M) & _MASK32
        k ^= k >> 24
        k = (k * _M) & _MASK32
        h = ((h * _M) & _MASK32) ^ k
    rest = length % 4
    if rest == 3:
        h ^= data[whole + 2] << 16
    if rest >= 2:
        h ^= data[whole + 1] << 8
    if rest >= 1:
        h ^= data[whole]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def murmur2_partition(key: bytes, num_partitions: int) -> int:
    """The partition Java's default partitioner picks for a non-null key: ``toPositive(murmur2) % n``."""
    if num_partitions < 1:
        raise ValueError(f"a topic has at least one partition, got {num_partitions}")
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


# --------------------------------------------------------------------------- decoding stored records


@dataclass(frozen=True)
class StoredKey:
    """A decoded offsets key; ``raw`` are the exact stored bytes (reused on import)."""

    connector: str
    partition: dict[str, Any]
    raw: bytes

    @property
    def partition_id(self) -> str:
        return partition_key(self.partition)


def decode_key(raw: bytes | None) -> StoredKey | None:
    """``["<connector>", {partition}]`` or None for what Connect itself skips.

    Connect ignores keys that are not a two-element list with a string first and a map second
    (``OffsetUtils.processPartitionKey``), including ``["c", null]`` from a null partition.
    """
    if raw is None:
        return None
    try:
        decoded = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if not (isinstance(decoded, list) and len(decoded) == 2):
        return None
    connector, partition = decoded
    if not isinstance(connector, str) or not isinstance(partition, dict):
        return None
    return StoredKey(connector=connector, partition=partition, raw=bytes(raw))


def decode_value(raw: bytes | None) -> dict[str, Any] | None:
    """An offset map, or None for a tombstone. ``ValueError`` if it is not a JSON object."""
    if raw is None:
        return None
    try:
        decoded = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        raise ValueError(f"offset value is not JSON: {error}") from None
    if decoded is None:
        return None
    if not isinstance(decoded, dict):
        raise ValueError(f"offset value is not a JSON object: {raw[:80]!r}")
    return decoded


@dataclass(frozen=True)
class KafkaPosition:
    """Where a record sits in Kafka (the ``"kafka"`` object of a ``--from-beginning`` export)."""

    topic: str
    partition: int
    offset: int
    timestamp: int | None

    def to_json_obj(self) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition, "offset": self.offset, "timestamp": self.timestamp}


@dataclass(frozen=True)
class StoredRecord:
    """One offsets record: decoded key, offset (None = tombstone) and, for topics, its position."""

    key: StoredKey
    offset: dict[str, Any] | None
    kafka: KafkaPosition | None = None

    def to_json_obj(self, *, with_kafka: bool) -> dict[str, Any]:
        entry: dict[str, Any] = {"partition": self.key.partition, "offset": self.offset}
        if with_kafka and self.kafka is not None:
            entry["kafka"] = self.kafka.to_json_obj()
        return entry


def last_per_key(records: Iterable[StoredRecord]) -> list[StoredRecord]:
    """The last record per exact key bytes, tombstones kept, in the order of those last writes.

    What compaction would leave: reducing a stream with it holds one record per key, not the whole
    history, and ``latest`` of its result equals ``latest`` of the stream. Records must be in log
    order per Kafka partition (a key always lands on one partition).
    """
    last: dict[bytes, StoredRecord] = {}
    for record in records:
        last.pop(record.key.raw, None)  # re-insert: order of the latest write
        last[record.key.raw] = record
    return list(last.values())


def latest(records: Iterable[StoredRecord]) -> list[StoredRecord]:
    """The last record per (connector, exact key bytes), tombstones dropped; first-seen order.

    Records must be in log order per Kafka partition (a key always lands on one partition).
    """
    return [r for r in last_per_key(records) if r.offset is not None]
