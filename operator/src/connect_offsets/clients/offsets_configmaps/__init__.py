"""Offsets documents in ConfigMaps, including documents far larger than one ConfigMap.

Why: Strimzi's list/alter exchange offsets through one ConfigMap key (``offsets.json``), and a
ConfigMap holds at most 1 MiB of data, so they break at roughly 10,000 source partitions. Source
connectors that track one partition per file or table can carry a million (about 100 MB of JSON).
This package stores such a document in one of three forms and reads all three back:

``plain``
    ``data[<key>]``: the JSON text, as Strimzi users know it. Used whenever it fits.
``gzip``
    ``binaryData[<key>.gz]``: the gzip of the document, when the plain text does not fit but the
    compressed one does (JSON offsets compress about 10:1).
``sharded``
    ``data[<key>.shards]``: an index (JSON) naming shard ConfigMaps
    ``<name>-shard-<generation>-0000``, ``-0001``, ... Each shard holds one slice of a single gzip
    stream in ``binaryData[<key>.gz.<nnnn>]``; the slices, concatenated in index order, are one
    gzip file of the document. The index records, per shard, its name, key, size and sha256, and
    for the whole document its size, sha256, compressed size and partition count.

Reading takes the first form present, in this order: ``data[<key>]`` (plain text), ``binaryData[<key>]``
(plain bytes, as ``kubectl create configmap --from-file`` stores non-UTF-8 files), ``binaryData[<key>.gz]``,
then the index. So a ConfigMap a user edited in plain form is always accepted: the operator
removes the other forms of a key whenever it writes one, so several forms only coexist after a
hand edit, and then the hand-written plain text wins (:attr:`StoredOffsets.ignored` names the
forms that were passed over).

Shards are written *before* the index that names them, under a fresh generation, and the old
shards are deleted only after the main ConfigMap points at the new ones: a reader never sees a
half-written set, and a crash leaves unreferenced shards that the next write of that key sweeps
away. A ConfigMap created here gets the caller's labels and owner references; one that existed
keeps its metadata untouched (it may be an application's: an owner reference would let garbage
collection delete it with the caller's resource). Shards carry the caller's labels and owner
references (garbage collection follows the resource) plus an owner reference to the main
ConfigMap (deleting it removes its shards), the label
``connect-offsets.io/offsets-shard-of=<hash of the ConfigMap name>`` and annotations naming the
ConfigMap, key, generation and position.

Memory: the document exists once as bytes; compression and decompression stream over slices of
it, and only one shard is held in transit at a time. CPU-heavy steps (gzip, hashing, counting
partitions) run in a thread so the operator's event loop stays responsive.

The package, one module per job (later ones never import earlier ones):

``store``   :class:`OffsetsConfigMapStore`: the Kubernetes I/O, writing and reading every form
``codec``   gzip, bounded inflating, hashing, counting partitions (CPU work, run in threads)
``layout``  the format: forms, keys, shard index, names, labels, limits; the store's errors

Import from the package; the module names are for finding the code.
"""

from __future__ import annotations

from connect_offsets.clients.offsets_configmaps.layout import (
    CONFIGMAP_MAX_BYTES,
    FORMAT,
    FORMAT_VERSION,
    GZIP_SUFFIX,
    INDEX_SUFFIX,
    MAX_PAYLOAD_BYTES,
    NOT_A_SHARD,
    SHARD_LABEL,
    OffsetsCorrupt,
    OffsetsKeyMissing,
    OffsetsStoreError,
    OffsetsTooLarge,
    ShardIndex,
    ShardInfo,
    StoredForm,
    StoredOffsets,
    WriteResult,
    name_hash,
)
from connect_offsets.clients.offsets_configmaps.store import OffsetsConfigMapStore

__all__ = [
    "CONFIGMAP_MAX_BYTES",
    "FORMAT",
    "FORMAT_VERSION",
    "GZIP_SUFFIX",
    "INDEX_SUFFIX",
    "MAX_PAYLOAD_BYTES",
    "NOT_A_SHARD",
    "SHARD_LABEL",
    "OffsetsConfigMapStore",
    "OffsetsCorrupt",
    "OffsetsKeyMissing",
    "OffsetsStoreError",
    "OffsetsTooLarge",
    "ShardIndex",
    "ShardInfo",
    "StoredForm",
    "StoredOffsets",
    "WriteResult",
    "name_hash",
]
