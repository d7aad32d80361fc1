"""The standalone worker's offsets file (``offset.storage.file.filename``): what
``FileOffsetBackingStore`` reads and writes, a Java-serialised ``HashMap<byte[], byte[]>`` of the
records' keys and values (``records``); pure, no I/O.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping

import javaobj.v1 as javaobj
from javaobj.v1 import beans as javaobj_beans

from connect_offsets.errors import UserError
from connect_offsets.tools.offline.records import JAVA_HASHMAP_CAPACITY, JAVA_HASHMAP_LOAD_FACTOR

__all__ = ["OffsetsFileError", "decode_offsets_file", "encode_offsets_file"]

#: serialVersionUIDs of java.util.HashMap and byte[] (fixed by the JDK).
_HASHMAP_SUID = 0x0507DAC1C31660D1
_BYTE_ARRAY_SUID = -0x530CE807F9F7AB20
_SC_SERIALIZABLE, _SC_WRITE_METHOD = 0x02, 0x01


class OffsetsFileError(UserError, ValueError):
    """A standalone offsets file is not a serialised ``HashMap<byte[], byte[]>``."""


def decode_offsets_file(data: bytes) -> dict[bytes, bytes | None]:
    """The entries of ``FileOffsetBackingStore``'s file (an ``ObjectOutputStream`` of a HashMap).

    javaobj's v1 reader handles it (its v2 fails on byte[] keys, which are unhashable there).
    An empty file is an empty store, as the worker treats it.
    """
    if not data:
        return {}
    try:
        loaded = javaobj.loads(data)
    except Exception as error:  # javaobj raises assorted errors on foreign or truncated input
        raise OffsetsFileError(f"not a Java-serialised HashMap ({type(error).__name__}: {error})") from None
    if not isinstance(loaded, dict):
        raise OffsetsFileError(f"expected a serialised java.util.HashMap, got {type(loaded).__name__}")
    entries: dict[bytes, bytes | None] = {}
    for key, value in loaded.items():
        if key is None:
            continue  # the worker never writes a null key; Connect would skip it too
        entries[_java_bytes(key)] = None if value is None else _java_bytes(value)
    return entries


def _java_bytes(value: object) -> bytes:
    if not isinstance(value, javaobj_beans.JavaByteArray):
        raise OffsetsFileError(f"expected byte[] keys and values, got {type(value).__name__}")
    return bytes(b & 0xFF for b in value)


def encode_offsets_file(entries: Mapping[bytes, bytes | None]) -> bytes:
    """What ``FileOffsetBackingStore.save()`` writes for ``entries``: a ``new HashMap<>()`` filled by
    ``put``, so capacity 16 doubled while size > 0.75 x capacity (threshold 0 while empty), then
    key/value pairs, ``null`` values kept (tombstones). Entry order is irrelevant to the reader.
    """
    capacity = JAVA_HASHMAP_CAPACITY
    while len(entries) > capacity * JAVA_HASHMAP_LOAD_FACTOR:
        capacity *= 2
    hashmap = javaobj_beans.JavaClass()
    hashmap.name, hashmap.serialVersionUID = "java.util.HashMap", _HASHMAP_SUID
    hashmap.flags = _SC_SERIALIZABLE | _SC_WRITE_METHOD
    hashmap.fields_names = ["loadFactor", "threshold"]
    hashmap.fields_types = [javaobj_beans.JavaString("F"), javaobj_beans.JavaString("I")]
    byte_array = javaobj_beans.JavaClass()
    byte_array.name, byte_array.serialVersionUID, byte_array.flags = "[B", _BYTE_ARRAY_SUID, _SC_SERIALIZABLE
    obj = javaobj_beans.JavaObject()
    obj.classdesc = hashmap
    obj.loadFactor = JAVA_HASHMAP_LOAD_FACTOR
    obj.threshold = int(capacity * JAVA_HASHMAP_LOAD_FACTOR) if entries else 0
    annotations: list[object] = [struct.pack(">ii", capacity, len(entries)).decode("latin-1")]
    for key, value in entries.items():
        annotations.append(javaobj_beans.JavaByteArray(key, byte_array))
        annotations.append(None if value is None else javaobj_beans.JavaByteArray(value, byte_array))
    obj.annotations = annotations
    data: bytes = javaobj.dumps(obj)
    return data
