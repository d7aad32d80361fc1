"""Pinned copies: offsets read from elsewhere (another connector, a group translated through
MirrorMaker 2 checkpoints), kept in a ConfigMap of the resource at a request's first attempt, so
that every retry applies the same document while the source keeps moving. A staged alter from its
own ConfigMap pins that document the same way when it begins (``pin_document``): an edit of the
ConfigMap while the connector stops is a request of its own, never what the running one applies.

Why ConfigMaps and not status: a copy is as large as the source's offsets (a sink of thousands of
partitions), and the offsets ConfigMap store already keeps documents of any size (plain, gzip,
shards). Each pin is a new ConfigMap (named like a backup: resource, connector hash, time, a random
suffix), owned by the resource (deleted with it) and labelled ``connect-offsets.io/pinned-for``;
what points at it is in status (``offsetsProgress.pinned``, ``pendingOffsetsOperation.pinned``,
``initialOffsets.configMap``, ``groupFailovers[].pinned``). Older pins of the same kind are pruned
when a new one is written (best effort, like backups).
"""

from __future__ import annotations

import json
import secrets
from datetime import datetime
from typing import Any, Literal

from connect_offsets.clients.kubernetes import KubernetesApi, KubernetesError, KubernetesRejected, label_value
from connect_offsets.clients.offsets_configmaps import NOT_A_SHARD, OffsetsConfigMapStore
from connect_offsets.models.crds import (
    AppliedOffsetsStatus,
    InitialOffsetsStatus,
    KafkaConnectorStatus,
    OffsetsProgressStatus,
    PendingOffsetsOperation,
)
from connect_offsets.planning import Action, Plan
from connect_offsets.reconcile.context import OffsetsRequestInvalid, Pass, managed_labels
from connect_offsets.reconcile.status import owner_reference
from connect_offsets.vocabulary import API_GROUP, OFFSETS_KEY, PINNED_FOR_LABEL, iso, name_stem, short_hash

__all__ = ["PIN_KIND_LABEL", "PinKind", "pin_copy", "pin_document", "pin_initial", "read_pin", "write_pin"]

#: What a pin was made for: an alter's copy, initial offsets, a group failover.
PinKind = Literal["alter", "initial", "failover"]
PIN_KIND_LABEL = f"{API_GROUP}/pin-kind"


async def write_pin(
    kube: KubernetesApi,
    store: OffsetsConfigMapStore,
    body: dict[str, Any],
    kind: PinKind,
    subject: str,
    document: str,
    *,
    source: str,
    now: datetime,
    key: str = OFFSETS_KEY,
) -> tuple[str, str | None]:
    """Keep ``document`` in a new ConfigMap of ``body``'s resource; returns its name and, when older
    pins of this ``kind`` and ``subject`` (a connector, a mirror's group) could not be pruned, why.

    OffsetsRequestInvalid (``ConfigMapWriteFailed``) when the API server refuses the ConfigMap: without
    the pin nothing may go on (a retry would read a newer position of the source)."""
    meta = body["metadata"]
    namespace = meta["namespace"]
    hashed = short_hash(subject, 8)
    name = f"{name_stem(meta['name'])}-pinned-{hashed}-{now.strftime('%Y%m%dt%H%M%Sz')}-{secrets.token_hex(2)}"
    owner = label_value(meta["name"])
    labels = {
        **managed_labels(body),
        PINNED_FOR_LABEL: owner,
        PIN_KIND_LABEL: kind,
        f"{API_GROUP}/connector-hash": hashed,
    }
    try:
        await store.write(
            namespace,
            name,
            key,
            document.encode(),
            labels=labels,
            annotations={f"{API_GROUP}/pinned-from": source[:1024], f"{API_GROUP}/subject": subject[:512]},
            owner_references=[owner_reference(body)],
        )
    except KubernetesRejected as error:
        raise OffsetsRequestInvalid(
            "ConfigMapWriteFailed",
            f"the copy of {source} could not be kept in ConfigMap {name}, so nothing was changed: {error}",
        ) from error
    selector = f"{PINNED_FOR_LABEL}={owner},{PIN_KIND_LABEL}={kind},{API_GROUP}/connector-hash={hashed},{NOT_A_SHARD}"
    left: list[str] = []
    try:
        for old, _ in await kube.list_configmaps(namespace, selector):
            if old == name:
                continue
            try:
                await kube.delete_configmap(namespace, old)
            except KubernetesError:
                left.append(old)
    except KubernetesError as error:
        return name, f"listing older pinned copies failed: {error}"
    return name, (f"older pinned copies not deleted: {', '.join(left[:5])}" if left else None)


async def read_pin(
    store: OffsetsConfigMapStore, kube: KubernetesApi, namespace: str, name: str
) -> dict[str, Any] | None:
    """A pinned document as JSON data (a group failover's translated offsets), or None when it is gone."""
    configmap = await kube.get_configmap(namespace, name)
    if configmap is None:
        return None
    stored = await store.read_from(namespace, configmap, OFFSETS_KEY)
    data = json.loads(stored.document)
    return data if isinstance(data, dict) else None


async def pin_copy(p: Pass, plan: Plan, action: Action) -> None:
    """``pin_offsets``: keep an alter-from-connector request's source as read now, and record where
    (``status.offsetsProgress.pinned`` with the request's key) before the request goes on. A pin the
    API server refuses fails the request (nothing else was done)."""
    assert action.offsets_json is not None
    source = action.source or "the source connector"
    try:
        name, left = await write_pin(
            p.kube, p.store, p.body, "alter", p.target.name, action.offsets_json, source=source, now=p.now
        )
    except OffsetsRequestInvalid as error:
        text = f"alter refused: {error}"
        p.sink.failed(plan, "alter", error.reason, text, p.now)
        p.sink.handled(p.target, plan.request_id)
        p.event("Warning", "OffsetsOperationFailed", f"{p.target.name}: {text}")
        return
    await p.sink.fields(
        KafkaConnectorStatus(offsets_progress=OffsetsProgressStatus(request_key=action.request, pinned=name))
    )
    if left is not None:
        p.cleanup_failed(f"{p.target.name}: {left}")
    p.event("Normal", "OffsetsPinned", f"{p.target.name}: read {source} once; this request applies that copy ({name})")


async def pin_document(p: Pass, plan: Plan, action: Action) -> PendingOffsetsOperation | None:
    """``begin_offsets_change``: the intent to record, naming the pin of the document it applies.

    An alter from its ConfigMap (``action.offsets_json``, validated as read in this pass) is kept in
    a new pin before the intent is written: the intent is the request's claim, and from then on
    every step and retry applies the pinned bytes, so an edit made while the connector stops is
    applied afterwards as a request of its own (applyOnChange), never by this one. A crash between
    the pin and the intent leaves an unused pin (pruned by the next) and no claim: the next pass
    reads the ConfigMap again. Anything else begins as planned. None: the API server refused the
    pin; the request failed and nothing was touched (the caller must not stop the connector).
    """
    pending = action.pending
    assert pending is not None
    if action.offsets_json is None:
        return pending
    source = f"ConfigMap {action.configmap}" if action.configmap else "the alter ConfigMap"
    try:
        name, left = await write_pin(
            p.kube,
            p.store,
            p.body,
            "alter",
            p.target.name,
            action.offsets_json,
            source=source,
            now=p.now,
            key=p.target.configmap_key,
        )
    except OffsetsRequestInvalid as error:
        text = f"{pending.operation} refused: {error}"
        p.sink.conditions = [c for c in p.sink.conditions if c.type != "OffsetsOperationInProgress"]
        p.sink.failed(plan, pending.operation, error.reason, text, p.now)
        if pending.source == "applyOnChange" and pending.content_hash and p.target.alter_configmap:
            # Like refused content: tried again when the content changes, not on every pass.
            failed = AppliedOffsetsStatus(
                config_map=p.target.alter_configmap, content_hash=pending.content_hash, time=iso(p.now), result="Failed"
            )
            p.sink.report(KafkaConnectorStatus(applied_offsets=failed))
        p.sink.handled(p.target, plan.request_id)
        p.event("Warning", "OffsetsOperationFailed", f"{p.target.name}: {text}")
        return None
    if left is not None:
        p.cleanup_failed(f"{p.target.name}: {left}")
    return pending.model_copy(update={"pinned": name})


async def pin_initial(p: Pass, action: Action) -> None:
    """``pin_initial_offsets``: keep the offsets a new connector copies, then record them as its
    initial offsets' ConfigMap (``status.initialOffsets``, step Pinned); nothing is created yet."""
    assert action.offsets_json is not None and action.source is not None
    read = action.operation or action.source
    try:
        name, left = await write_pin(
            p.kube, p.store, p.body, "initial", p.target.name, action.offsets_json, source=read, now=p.now
        )
    except OffsetsRequestInvalid as error:
        p.sink.not_ready(error.reason, f"spec.initialOffsets: {error}")
        return
    pinned = InitialOffsetsStatus(
        config_map=name,
        step="Pinned",
        time=iso(p.now),
        source=action.source,
        request=action.request,
        message=f"copied from {read}",
    )
    await p.sink.fields(KafkaConnectorStatus(initial_offsets=pinned))
    if left is not None:
        p.cleanup_failed(f"{p.target.name}: {left}")
    p.event(
        "Normal", "OffsetsPinned", f"{p.target.name}: read {read} once; the connector starts from that copy ({name})"
    )
