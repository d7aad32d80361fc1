"""Backups of a connector's offsets: written before every alter, reset or restore, pruned to the
newest few, and found again for a restore.

Why separate: a backup is the promise that nothing is lost, and its rules (named per connector
hash, labelled so a restore finds it, refused changes when it cannot be written, pruning that never
blocks the change) are read and changed together, apart from the change it protects.
"""

from __future__ import annotations

import secrets
from datetime import UTC, datetime

from connect_offsets.clients.kubernetes import KubernetesError, KubernetesRejected, label_value
from connect_offsets.clients.offsets_configmaps import NOT_A_SHARD, OffsetsStoreError
from connect_offsets.planning import ConnectorTarget, RestoreSource, request_key
from connect_offsets.reconcile.context import OffsetsRequestInvalid, Pass, managed_labels
from connect_offsets.reconcile.settings import backup_retention
from connect_offsets.reconcile.status import owner_reference
from connect_offsets.vocabulary import API_GROUP, OFFSETS_KEY, name_stem, short_hash

#: Marks the backup ``spec.offsetsOnDelete`` writes (``reconcile.deletion``): it outlives its
#: resource, so a resource re-created under the same name finds it for a restore, and pruning never
#: deletes it (it is the only copy of what a reset on delete removed).
FINAL_BACKUP_LABEL = f"{API_GROUP}/final-backup"


def connector_hash(name: str) -> str:
    """Connector names (``a->b.X``) are not valid label values; their hash is."""
    return short_hash(name, 8)


def _newest_first(item: tuple[str, dict[str, str]]) -> tuple[str, str]:
    return item[1].get(f"{API_GROUP}/time", ""), item[0]


def pinned_restore(target: ConnectorTarget) -> str | None:
    """The backup a restore of this request chose at its first attempt, if it made one.

    Why pinned: "the newest backup" changes as soon as the request writes its own backup (of the
    offsets it is about to replace), so a retry that chose again would restore that one and undo
    nothing. A staged restore pins it in ``pendingOffsetsOperation``, a direct one in
    ``offsetsProgress`` before its backup is taken.
    """
    if target.pending is not None:
        return target.pending.restore_from
    progress = target.chunk_progress
    if progress is not None and progress.restore_from and progress.request_key == request_key(target):
        return progress.restore_from
    return None


async def backup(p: Pass, operation: str, restoring: str | None = None) -> str:
    """Save the connector's current offsets in a new ConfigMap; keep the newest BACKUP_RETENTION
    and ``restoring`` (the backup a restore is putting back), whatever its age: the older ones are
    pruned once the request is answered (``Pass.after_answer``)."""
    meta = p.body["metadata"]
    namespace = p.namespace
    hashed = connector_hash(p.target.name)
    stamp = p.now.strftime("%Y%m%dt%H%M%Sz")
    # The random suffix keeps two backups within one second apart.
    name = f"{name_stem(meta['name'])}-backup-{hashed}-{stamp}-{secrets.token_hex(2)}"
    created = datetime.now(UTC).isoformat()
    offsets = await p.client.get_offsets_raw(p.target.name)
    backup_of = label_value(meta["name"])
    selector = ",".join(
        (
            f"{API_GROUP}/backup-of={backup_of}",
            f"{API_GROUP}/connector-hash={hashed}",
            NOT_A_SHARD,
            f"!{FINAL_BACKUP_LABEL}",
        )
    )
    try:
        await p.store.write(
            namespace,
            name,
            OFFSETS_KEY,
            offsets,
            labels={
                **managed_labels(p.body),
                f"{API_GROUP}/backup-of": backup_of,
                f"{API_GROUP}/connector-hash": hashed,
            },
            annotations={
                f"{API_GROUP}/connector": p.target.name,
                f"{API_GROUP}/operation": operation,
                f"{API_GROUP}/time": created,
            },
            owner_references=[owner_reference(p.body)],
            new_name=True,
        )
    except KubernetesRejected as error:
        # A quota, a policy or missing RBAC: retrying changes nothing, and without a backup
        # the change must not run (nothing is lost). The request waits for a fix.
        raise OffsetsRequestInvalid(
            "BackupFailed",
            f"the backup ConfigMap {name} could not be written, so nothing was changed: {error}; "
            "fix the cause (ResourceQuota on ConfigMaps, an admission policy, the operator's RBAC), "
            f"then ask again with a new {API_GROUP}/request-id",
        ) from error
    del offsets
    keep = {n for n in (pinned_restore(p.target), restoring) if n}
    p.after_answer(lambda: _prune(p, selector, keep))
    return name


async def _prune(p: Pass, selector: str, keep: set[str]) -> None:
    """Keep the newest ``backup_retention()`` backups of this connector, and ``keep`` (the backup
    a restore is using); delete the older ones.

    A refusal (no RBAC ``delete``, a webhook) must neither block nor repeat the change this
    backup protects: the change goes on, the backups that stay are named in a Warning Event,
    and the next change prunes again.
    """
    left: list[str] = []
    error_text = ""
    try:
        backups = await p.kube.list_configmaps(p.namespace, selector)
        backups.sort(key=_newest_first, reverse=True)
        for old, _ in backups[backup_retention() :]:
            if old in keep:
                continue
            try:
                await p.kube.delete_configmap(p.namespace, old)
            except KubernetesError as error:
                left.append(old)
                error_text = error_text or str(error)
    except KubernetesError as error:
        error_text = f"listing the backups failed: {error}"
    if error_text:
        kept = f" {len(left)} backup(s) beyond the retention of {backup_retention()} kept" if left else ""
        p.cleanup_failed(f"{p.target.name}: old backups not pruned;{kept}: {error_text}")


async def restore_source(p: Pass, wanted: str | None) -> RestoreSource:
    """The backup to restore (named by restore-from, else the newest) and the current offsets."""
    selector = f"{API_GROUP}/connector-hash={connector_hash(p.target.name)},{NOT_A_SHARD}"
    backups = [
        (name, annotations)
        for name, annotations in await p.kube.list_configmaps(p.namespace, selector)
        if annotations.get(f"{API_GROUP}/connector") == p.target.name
    ]
    if wanted:
        backups = [item for item in backups if item[0] == wanted]
    backups.sort(key=_newest_first, reverse=True)
    if not backups:
        return RestoreSource(None)
    chosen = await p.kube.get_configmap(p.namespace, backups[0][0])
    if chosen is None:
        return RestoreSource(None)
    try:
        backup_json = (await p.store.read_from(p.namespace, chosen, OFFSETS_KEY)).document.decode()
    except (OffsetsStoreError, UnicodeDecodeError) as error:
        backup_json = f"unreadable: {error}"  # the planner reports it as an unreadable backup
    # The text, not the parsed answer: the planner streams it (a million partitions parsed
    # whole would be a gigabyte of dicts).
    current_json = (await p.client.get_offsets_raw(p.target.name)).decode()
    return RestoreSource(
        name=chosen.name,
        resource_version=chosen.resource_version,
        backup_json=backup_json,
        current_json=current_json,
    )
