"""Settings read from the environment, and what a reconcile pass returns to its loop."""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from connect_offsets.offsets.chunking import (
    DEFAULT_MAX_ENTRIES,
    ChunkLimits,
)

log = logging.getLogger(__name__)


#: Back-off for transient failures: 2, 4, 8 ... seconds, capped so recovery is noticed quickly.
MAX_RETRY_DELAY_S = 60.0


#: Backups kept per connector (newest first); CONNECT_OFFSETS_BACKUP_RETENTION overrides it.
DEFAULT_BACKUP_RETENTION = 5


#: Namespaces the operator watches (set by the entry point); None: the whole cluster.
WATCHED_NAMESPACES: tuple[str, ...] | None = None


#: Where the owner records of connector names are kept (``reconcile.owners``): a namespace only the
#: operator writes to. The chart sets it to its release namespace.
OWNER_RECORDS_NAMESPACE_ENV = "CONNECT_OFFSETS_OWNER_RECORDS_NAMESPACE"
#: Where a Pod finds its own namespace (the fallback when the variable is not set).
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def owner_records_namespace() -> str | None:
    """``CONNECT_OFFSETS_OWNER_RECORDS_NAMESPACE``, else the operator's own Pod's namespace, else None
    (run outside a cluster without the variable: each resource's own namespace, as before, where
    its tenant can write records too)."""
    configured = os.environ.get(OWNER_RECORDS_NAMESPACE_ENV, "").strip()
    if configured:
        return configured
    try:
        return SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or None
    except OSError:
        return None


def patch_limits() -> ChunkLimits:
    """Partitions per PATCH: CONNECT_OFFSETS_PATCH_MAX_PARTITIONS, default 50,000 (about 2.4 s per
    PATCH on a local worker, far below Connect's fixed 90 s request timeout)."""
    raw = os.environ.get("CONNECT_OFFSETS_PATCH_MAX_PARTITIONS", "")
    try:
        value = int(raw) if raw else DEFAULT_MAX_ENTRIES
    except ValueError:
        log.warning("CONNECT_OFFSETS_PATCH_MAX_PARTITIONS=%r is not an integer; using %d", raw, DEFAULT_MAX_ENTRIES)
        value = DEFAULT_MAX_ENTRIES
    return ChunkLimits(max_entries=max(value, 1))


def backup_retention() -> int:
    raw = os.environ.get("CONNECT_OFFSETS_BACKUP_RETENTION", "")
    return int(raw) if raw.isdigit() and int(raw) > 0 else DEFAULT_BACKUP_RETENTION


#: A replaced Connect client is closed this long after its replacement, once requests drain.
RETIRE_AFTER_S = 300.0


def now_utc() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


@dataclass
class Outcome:
    """What the caller (the controller) should do next."""

    requeue_after: float | None = None
    transient_error: str | None = None
    referenced_configmaps: set[str] = field(default_factory=set)
    #: The connectors in Connect this resource declares: a snapshot that finds one of them changed
    #: behind the operator's back wakes the resource.
    connectors: set[str] = field(default_factory=set)
    #: What the pass accounted for: the request view (``vocabulary.request_view``) of the body it
    #: planned from, less the annotations it removed. A resource whose watched body differs from
    #: it asks for something this pass did not see, and is checked again at once (None: unknown).
    seen: tuple[Any, ...] | None = None
    #: Check again when this completes, rather than at the next slot: the pass gave its worker back
    #: instead of waiting for its cluster's first connector listing (``ListingPending``).
    after: asyncio.Future[Any] | None = None
