"""MirrorMaker 2 replication lag: what a MirrorSourceConnector has not copied yet.

Why this exists: MM2's consumers use no consumer group, so the usual consumer-lag metric cannot see
them. What MM2 does record is, in Connect's offsets, the last upstream offset it replicated for
every source partition (``{cluster, topic, partition}`` -> ``{"offset": n}``). Compared with the
source cluster's log end offsets that is the lag: ``end - (n + 1)``, never negative; a partition
of a mirrored topic with no offset yet counts its whole backlog (``end - start``).

One module a job, so that exactly one place writes status (the MM2 service, from the registry):

* ``measure``: one measurement of one mirror (``measure_mirror``: Connect's offsets, the source
  cluster's log end offsets) and the pure arithmetic on them;
* ``report``: what status says — ``status.replicationLag`` (``status_document``), the
  ``ReplicationLagging`` condition (``lagging_condition``) — and ``LagRegistry``, the latest
  measurement per mirror, in memory, which ``MirrorMaker2Service`` reads (``report``) for its
  single status write;
* ``secrets``: the mirrors' ``secretConfig`` values (``MirrorSecrets``), shared by the service and
  the monitor;
* ``monitor``: ``LagMonitor`` measures one resource's mirrors, updates the metrics and the registry,
  and tells its caller (the controller's lag key) whether the status would change, so that it wakes the
  reconcile.

Which topics a mirror replicates (MM2's DefaultTopicFilter restated) is the planner's
(``planning/mirror_topics.py``). Nothing here imports kopf or the service layer. Callers import from
this package; which file holds a name is the package's business.
"""

from __future__ import annotations

from connect_offsets.lag.measure import (
    MirrorLag,
    PartitionLag,
    measure_mirror,
    mirror_kafka_config,
    next_above_since,
    partition_lags,
    replicated_offsets,
)
from connect_offsets.lag.monitor import LagMonitor, LagTick
from connect_offsets.lag.report import CONDITION, LagRegistry, lagging_condition, status_document
from connect_offsets.lag.secrets import MirrorSecrets, check_mirror_configs, mirror_secrets

__all__ = [
    "CONDITION",
    "LagMonitor",
    "LagRegistry",
    "LagTick",
    "MirrorLag",
    "MirrorSecrets",
    "PartitionLag",
    "check_mirror_configs",
    "lagging_condition",
    "measure_mirror",
    "mirror_kafka_config",
    "mirror_secrets",
    "next_above_since",
    "partition_lags",
    "replicated_offsets",
    "status_document",
]
