"""Gather what the planner needs to decide about one connector target: its config and status in
Connect, the offsets documents its ConfigMaps hold (and the one an alter dry run names with
``dry-run-from``), the backup a restore reads, the offsets a sink's seek-to-time finds in Kafka.

Why separate: this is every read of a pass and nothing else. The planner is pure, so all the I/O
it depends on happens here, before it runs; the execution modules never read state to decide.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable
from typing import TypeVar

from connect_offsets.clients.connect.state_changes import inherited_term_age
from connect_offsets.clients.kafka import KafkaAdminError, offsets_for_timestamp
from connect_offsets.clients.offsets_configmaps import OffsetsCorrupt, OffsetsKeyMissing, OffsetsTooLarge
from connect_offsets.models.connect import supports_initial_state
from connect_offsets.models.crds import FromConnectorSpec, parse_rfc3339
from connect_offsets.models.java_regex import PatternRefused, compile_java
from connect_offsets.planning import Observed, OffsetsConfigMap, RestoreSource, SeekOffsets, SourceOffsets
from connect_offsets.planning.copies import copy_read_needed, pinned_copy
from connect_offsets.planning.initial_offsets import initial_pin_due
from connect_offsets.reconcile.backups import pinned_restore, restore_source
from connect_offsets.reconcile.clusters import ClusterUnusable
from connect_offsets.reconcile.context import Pass
from connect_offsets.reconcile.snapshots import ConnectorRead
from connect_offsets.vocabulary import (
    ANNOTATION_DRY_RUN,
    ANNOTATION_OFFSETS,
    ANNOTATION_RESTORE_FROM,
    USER_CHANGE,
    asks_now,
)

A = TypeVar("A")
B = TypeVar("B")


async def observe(p: Pass, *, fresh: bool = False) -> tuple[Observed, str | None]:
    """What Connect, the ConfigMaps and (for a seek) Kafka hold for this target now, and the
    snapshot digest of the connector when it came from the snapshot (``ConnectorRead.digest``).
    ``fresh``: read the connector on its own whatever the pass is for."""
    target = p.target
    pending = target.pending
    operation = pending.operation if pending is not None else target.annotations.get(ANNOTATION_OFFSETS)
    # An alter dry run that names its own document (dry-run-from) reads that one, not the alter ConfigMap.
    dry_run_source = target.dry_run_source()
    # A staged alter that pinned its document when it began (a copy, or its ConfigMap's document)
    # reads the pin in place of the ConfigMap: an edit made since is not its business (issue 44).
    pinned_source = pending.pinned if pending is not None and pending.operation == "alter" else None
    alter_source: str | None = None
    if (
        target.alter_configmap
        and pinned_source is None
        and ((operation == "alter" and dry_run_source is None) or target.apply_on_change)
    ):
        alter_source = target.alter_configmap
    # What Connect holds and the documents to apply do not depend on each other: read both at once
    # (one round trip less on an alter's path, issue 35).
    dry_run_request = target.annotations.get(ANNOTATION_DRY_RUN) == "true"
    if pending is None and operation in ("alter", "reset", "restore") and not dry_run_request:
        p.read_resource_soon()  # the request is confirmed before offsets change (Pass.confirm_request)
    # Any request the controller put first (a restart, a spec change, an edit of a ConfigMap it
    # reads) does not wait for the cluster's first listing either: it reads its connector on its own.
    asked = operation is not None or asks_now(p.body) or USER_CHANGE.get()
    connector = read_connector(p, fresh=fresh or _needs_fresh(p, operation), asked=asked)
    documents: tuple[OffsetsConfigMap | None, OffsetsConfigMap | None] = (None, None)
    applied = pinned_source or alter_source
    if dry_run_source is None and applied is None:
        read = await connector
    else:
        read, documents = await _together(connector, _change_documents(p, dry_run_source, applied))
    dry_run, configmap = documents
    pinned_document: OffsetsConfigMap | None = None
    if pinned_source is not None:
        configmap, pinned_document = None, configmap
    config, status = read.config, read.status
    initial: OffsetsConfigMap | None = None
    initial_status = target.initial_status
    if target.initial_configmap and (
        (config is None and (initial_status is None or initial_status.step != "Applied"))
        or (initial_status is not None and initial_status.step == "Creating")
    ):
        initial = await _offsets_configmap(p, target.initial_configmap)
    seek: SeekOffsets | None = None
    when = target.seek_to()
    if operation == "alter" and when is not None and config is not None and status is not None:
        seek = await _seek(p, config, when)
    restore: RestoreSource | None = None
    if operation == "restore" and config is not None:
        restore = await restore_source(p, pinned_restore(target) or target.annotations.get(ANNOTATION_RESTORE_FROM))
    copy_source, pinned = await _copy(p, operation, config is not None)
    if pinned_source is not None:
        pinned = pinned_document
    observed = Observed(
        now=p.now,
        cluster_error=None,
        supports_initial_state=supports_initial_state(p.info.version),
        config=config,
        status=status,
        alter_configmap=configmap,
        restore=restore,
        initial_configmap=initial,
        seek=seek,
        dry_run_configmap=dry_run,
        copy_source=copy_source,
        pinned_copy=pinned,
        state_change_sent=p.client.state_changes.last(target.name),
        inherited_term_age=inherited_term_age(),
    )
    return observed, read.digest


async def _copy(p: Pass, operation: str | None, exists: bool) -> tuple[SourceOffsets | None, OffsetsConfigMap | None]:
    """What a copy reads: an alter-from-connector request's pinned copy, or its source before it is
    pinned (and for its dry run); the source of initial offsets from elsewhere before they are pinned.
    (A staged alter's pin is read with the connector, in ``observe``.)"""
    target = p.target
    if p.sources is None or not target.accepts_copies:
        return None, None
    if operation == "alter" and exists and target.copies() and target.pending is None:
        pinned = pinned_copy(target)
        if pinned is not None:
            return None, await _offsets_configmap(p, pinned)
        copy = target.copy_from()
        if copy is not None and copy_read_needed(target):
            return await p.sources.connector(*copy), None
    source = target.initial_source
    if not exists and source is not None and initial_pin_due(target):
        if isinstance(source, FromConnectorSpec):
            ref = source.cluster_ref
            cluster = None if ref is None else (f"{ref.namespace}/{ref.name}" if ref.namespace else ref.name)
            return await p.sources.connector(source.name, cluster), None
        return await p.sources.mirror(source), None
    return None, None


def _needs_fresh(p: Pass, operation: str | None) -> bool:
    """Whether this pass decides on the connector's state right now, so a snapshot up to one drift
    interval old will not do: an offsets change (it waits for STOPPED, then changes what it read)
    or initial offsets being applied. Idle passes and ``list`` read the snapshot."""
    target = p.target
    if target.pending is not None or operation in ("alter", "reset", "restore"):
        return True
    initial = target.initial_status
    copies = target.initial_configmap is not None or target.initial_source is not None
    return copies and (initial is None or initial.step != "Applied")


async def read_connector(p: Pass, *, fresh: bool = False, asked: bool = False) -> ConnectorRead:
    """The connector's config and status: from the cluster's snapshot, or on its own (``asked``:
    a user's request, which does not wait for a cluster's first snapshot)."""
    if p.snapshot is not None:
        return await p.snapshot.read(p.target.name, fresh=fresh, asked=asked, defer=p.defer_to_listing)
    # One after the other, not concurrently: against a frozen or overloaded worker each retry
    # must leave one request behind, not two (the fault tests bound the requests queued).
    config = await p.client.get_connector_config(p.target.name)
    status = await p.client.get_connector_status(p.target.name) if config is not None else None
    return ConnectorRead(config, status)


async def _seek(p: Pass, config: dict[str, str], when: str) -> SeekOffsets:
    """The offsets document of a sink seek: every consumed partition at the first offset >= the time."""
    moment = parse_rfc3339(when)
    if moment is None:
        return SeekOffsets(error=f"{when!r} is not an RFC 3339 time")  # the planner names the problem
    if p.kafka is None:
        return SeekOffsets(error="seeking to a time needs Kafka access (ConnectCluster spec.kafka)")
    try:
        settings = await p.kafka()
    except ClusterUnusable as error:  # as sink progress words it (progress/monitor.py)
        return SeekOffsets(error=f"seeking to a time needs Kafka access: {error}")
    topics = {t.strip() for t in config.get("topics", "").split(",") if t.strip()}
    try:  # the tenant's pattern: linear time (RE2), or refused with the reason
        pattern = compile_java(config["topics.regex"], "config[topics.regex]") if config.get("topics.regex") else None
    except PatternRefused as error:
        return SeekOffsets(error=str(error))

    def consumed(topic: str) -> bool:
        return topic in topics or (pattern is not None and pattern.full_match(topic))

    try:
        found = await offsets_for_timestamp(settings, consumed, int(moment.timestamp() * 1000), namespace=p.namespace)
    except KafkaAdminError as error:
        return SeekOffsets(error=f"Kafka: {error}", transient=True)
    if not found.offsets:
        wanted = ", ".join(sorted(topics)) or config.get("topics.regex", "")
        return SeekOffsets(error=f"none of the connector's topics exist in Kafka ({wanted})")
    entries = [
        {"partition": {"kafka_topic": topic, "kafka_partition": partition}, "offset": {"kafka_offset": offset}}
        for (topic, partition), offset in sorted(found.offsets.items())
    ]
    return SeekOffsets(json.dumps({"offsets": entries}, separators=(",", ":")), at_end=len(found.at_end))


async def _together(first: Awaitable[A], second: Awaitable[B]) -> tuple[A, B]:
    """Both at once, failing as one after the other would: ``first``'s error wins, and ``second``
    is then cancelled (its work is not wanted without the first's)."""
    task = asyncio.ensure_future(second)
    try:
        done = await first
    except BaseException:
        task.cancel()
        with contextlib.suppress(BaseException):
            await task
        raise
    return done, await task


async def _change_documents(
    p: Pass, dry_run_source: str | None, alter_source: str | None
) -> tuple[OffsetsConfigMap | None, OffsetsConfigMap | None]:
    """The documents a dry run and an alter read (None for no ConfigMap), one after the other."""
    dry_run = await _offsets_configmap(p, dry_run_source) if dry_run_source is not None else None
    return dry_run, await _offsets_configmap(p, alter_source) if alter_source is not None else None


async def _offsets_configmap(p: Pass, name: str) -> OffsetsConfigMap:
    """The ConfigMap with the target's key as document text, whichever form (plain, gzip, shards) holds it."""
    key = p.target.configmap_key
    cm = await p.kube.get_configmap(p.namespace, name)
    if cm is None:
        return OffsetsConfigMap(name, False)
    try:
        stored = await p.store.read_from(p.namespace, cm, key)
    except OffsetsKeyMissing:
        return OffsetsConfigMap(name, True, cm.resource_version, {**cm.data, **dict.fromkeys(cm.binary_data, "")})
    except OffsetsCorrupt as error:
        reason = "DocumentTooLarge" if isinstance(error, OffsetsTooLarge) else "InvalidOffsets"
        return OffsetsConfigMap(name, True, cm.resource_version, dict(cm.data), error=str(error), error_reason=reason)
    try:
        text = stored.document.decode()
    except UnicodeDecodeError as error:
        return OffsetsConfigMap(name, True, cm.resource_version, {}, error=f"key {key} is not UTF-8: {error}")
    return OffsetsConfigMap(name, True, cm.resource_version, {**cm.data, key: text})
