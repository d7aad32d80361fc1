"""Is it moving? Progress and stall detection of KafkaConnectors (issue 33).

One module a job:

* ``state``: ``ConnectorProgress`` (the latest measurement of one connector), ``ProgressRegistry``
  (one per resource, in memory, and what its status last showed), and the pure decisions:
  ``sink_lag`` (a consumer group against the end offsets) and ``judge`` (``status.progress`` and
  the ``Progressing`` condition);
* ``monitor``: ``ProgressMonitor``, one round per ConnectCluster per drift interval, called from the
  ConnectCluster's pass: sinks through Kafka (one batched ListOffsets per cluster, groups only
  when their input moved or records wait), sources through Connect's offsets at a low cadence.

The monitor measures and wakes; the KafkaConnector's own pass writes what ``ProgressRegistry.report``
says. Nothing here imports kopf or the reconcile layer. Callers import from this package.
"""

from __future__ import annotations

from connect_offsets.progress.monitor import (
    METADATA_REFRESH_S,
    PROGRESS_ENV,
    ProgressMonitor,
    progress_enabled,
    source_interval,
)
from connect_offsets.progress.state import (
    CONDITION,
    STATUS_REFRESH_S,
    ConnectorProgress,
    ProgressRegistry,
    SinkLag,
    judge,
    sink_lag,
)

__all__ = [
    "CONDITION",
    "METADATA_REFRESH_S",
    "PROGRESS_ENV",
    "STATUS_REFRESH_S",
    "ConnectorProgress",
    "ProgressMonitor",
    "ProgressRegistry",
    "SinkLag",
    "judge",
    "progress_enabled",
    "sink_lag",
    "source_interval",
]
