"""``spec.offsetsOnDelete: backup | reset``: what deleting a KafkaConnector does to its offsets,
carried out through the finalizer, exactly once.

Why a module of its own: the deletion is a multi-step change like stop -> change -> resume, but it
runs in the controller's deletion pass (the resource is terminating and waits on our finalizer:
``controller/core.py`` ``_finish_deletion``, not the resource's reconcile), so its own record lives in
``status.deletion``, written before each step:

* ``Stopping`` (reset): the connector is stopped, then the handler comes back until Connect reports
  it STOPPED with no task (``DeletionPending``: the controller looks again after a short delay);
* the backup: a ConfigMap with a name derived from the resource's uid, created if absent, with no
  owner reference (it must outlive the resource), labelled like every backup so a resource
  re-created under the same name can ``restore`` it; recorded in ``status.deletion.backup``;
* ``Resetting`` (reset): ``DELETE .../offsets``, unless Connect already holds none (a crash after the
  DELETE and before its record must not delete twice: the second time there is nothing to delete);
* ``Deleting``: the connector is deleted (absent afterwards: done);
* ``Done``: written before the outcome Event is posted, so the Event is posted at most once (the
  project's rule: an outcome is reported after the status that records it).

A killed operator restarts, the controller runs the deletion again, and the record says where it was.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from connect_offsets.clients.connect import ConnectClient, ConnectError
from connect_offsets.clients.connect.state_changes import inherited_term_age
from connect_offsets.clients.kubernetes import KubernetesApi, KubernetesRejected, label_value
from connect_offsets.clients.offsets_configmaps import OffsetsConfigMapStore
from connect_offsets.errors import TransientError
from connect_offsets.faults import fault_point
from connect_offsets.models.crds import (
    DeletionStatus,
    KafkaConnectorResource,
    KafkaConnectorStatus,
    OffsetsOnDelete,
)
from connect_offsets.planning.plan import state_change_settling
from connect_offsets.reconcile.backups import FINAL_BACKUP_LABEL, connector_hash
from connect_offsets.reconcile.clusters import ClusterRegistry, ClusterUnreachable, ClusterUnusable, resolve_cluster
from connect_offsets.reconcile.context import managed_labels
from connect_offsets.reconcile.status import record_event, write_status_fields
from connect_offsets.vocabulary import API_GROUP, CONNECTORS, OFFSETS_KEY, OWNER_CONFIG_KEY, iso, name_stem

__all__ = ["DeletionPending", "final_backup_name", "offsets_on_delete"]

log = logging.getLogger(__name__)

#: How soon the handler looks again while the connector is stopping.
STOP_POLL_S = 2.0


class DeletionPending(TransientError):
    """The deletion waits for Connect (the connector is still stopping); the controller runs the
    deletion again after ``delay`` seconds."""

    def __init__(self, message: str, delay: float = STOP_POLL_S) -> None:
        super().__init__(message)
        self.delay = delay


def final_backup_name(resource_name: str, uid: str, connector: str) -> str:
    """The deletion's backup: one per resource instance (its uid), so a retried deletion finds the
    backup it already wrote instead of writing another."""
    return f"{name_stem(resource_name)}-final-{connector_hash(connector)}-{uid.replace('-', '')[:10]}"


@dataclass
class _Deletion:
    kube: KubernetesApi
    store: OffsetsConfigMapStore
    body: dict[str, Any]
    resource: KafkaConnectorResource
    client: ConnectClient
    record: DeletionStatus

    @property
    def connector(self) -> str:
        return self.resource.connector_name

    async def checkpoint(self, **changes: Any) -> None:
        """``status.deletion`` with these changes, written before the step they announce."""
        self.record = self.record.model_copy(update=changes)
        await write_status_fields(
            self.kube, CONNECTORS, self.body, datetime.now(UTC), KafkaConnectorStatus(deletion=self.record)
        )

    async def backup(self) -> str:
        """The final backup, written once: a ConfigMap that already exists (a crash after writing
        it) is kept as it is."""
        meta = self.body["metadata"]
        name = final_backup_name(meta["name"], str(meta.get("uid", "")), self.connector)
        if self.record.backup == name or await self.kube.get_configmap(self.resource.metadata.namespace, name):
            return name
        offsets = await self.client.get_offsets_raw(self.connector)
        hashed = connector_hash(self.connector)
        await self.store.write(
            self.resource.metadata.namespace,
            name,
            OFFSETS_KEY,
            offsets,
            labels={
                **managed_labels(self.body),
                f"{API_GROUP}/backup-of": label_value(meta["name"]),
                f"{API_GROUP}/connector-hash": hashed,
                FINAL_BACKUP_LABEL: "true",
            },
            annotations={
                f"{API_GROUP}/connector": self.connector,
                f"{API_GROUP}/operation": f"offsetsOnDelete-{self.record.mode}",
                f"{API_GROUP}/time": datetime.now(UTC).isoformat(),
            },
            # None: the backup must outlive the resource (garbage collection would delete it with it).
            owner_references=(),
        )
        return name


async def offsets_on_delete(
    kube: KubernetesApi,
    clusters: ClusterRegistry,
    store: OffsetsConfigMapStore,
    body: dict[str, Any],
    *,
    give_up: bool,
) -> str:
    """Carry out ``spec.offsetsOnDelete`` (backup or reset) for a KafkaConnector being deleted, and
    delete its connector; returns what happened. Raises ``DeletionPending`` or a retryable
    ``ConnectError`` to be called again (unless ``give_up``: then the connector is left as it is
    and a Warning Event says so)."""
    meta = body["metadata"]
    # The status this deletion wrote on an earlier call (the watch cache may be one event old).
    fresh = await kube.fresh_resource(CONNECTORS, meta["namespace"], meta["name"])
    body = fresh if fresh is not None else body
    try:
        resource = KafkaConnectorResource.model_validate(body)
    except ValidationError:
        return "resource invalid; nothing to delete in Connect"
    mode = resource.spec.offsets_on_delete
    record = resource.status.deletion
    if record is not None and record.step == "Done":
        return record.message or "done"
    try:
        client, _ = await resolve_cluster(clusters, resource.metadata.namespace, resource.metadata.labels)
    except ClusterUnusable as error:
        text = f"offsetsOnDelete {mode}: the ConnectCluster cannot be used, nothing was done in Connect: {error}"
        await record_event(kube, body, "Warning", "OffsetsOnDeleteFailed", text)
        return text
    except ClusterUnreachable as error:
        return await _retry_or_give_up(kube, body, str(error), give_up)
    if record is None:
        record = DeletionStatus(
            mode=mode.value,
            step="Stopping" if mode is OffsetsOnDelete.RESET else "Deleting",
            started=iso(datetime.now(UTC).replace(microsecond=0)),
        )
    deletion = _Deletion(kube, store, body, resource, client, record)
    try:
        return await _carry_out(deletion)
    except (ConnectError, DeletionPending) as error:
        if not give_up:
            raise
        return await _retry_or_give_up(kube, body, str(error), give_up)


async def _retry_or_give_up(kube: KubernetesApi, body: dict[str, Any], why: str, give_up: bool) -> str:
    if not give_up:
        raise ClusterUnreachable(why)
    text = (
        f"gave up carrying out spec.offsetsOnDelete: {why}; the connector and its offsets are left in "
        "Connect as they are (delete them there, or re-create the resource to manage them)"
    )
    await record_event(kube, body, "Warning", "OffsetsOnDeleteFailed", text)
    return text


async def _carry_out(d: _Deletion) -> str:
    owner = f"{d.resource.metadata.namespace}/{d.resource.metadata.name}"
    config = await d.client.get_connector_config(d.connector)
    if config is None:
        if d.record.step in ("Deleting", "Resetting") and (d.record.backup or d.record.reset):
            return await _done(d)  # deleted by an earlier call that died before recording it
        text = f"{d.connector}: already absent in Connect, nothing to back up or reset"
        await d.checkpoint(step="Done", message=text)
        await record_event(d.kube, d.body, "Warning", "OffsetsOnDeleteFailed", text)
        return text
    if config.get(OWNER_CONFIG_KEY) != owner:
        text = f"{d.connector}: owned by someone else, left in place with its offsets"
        await d.checkpoint(step="Done", message=text)
        await record_event(d.kube, d.body, "Warning", "OffsetsOnDeleteFailed", text)
        return text
    if d.record.mode == OffsetsOnDelete.RESET.value and not d.record.reset:
        status = await d.client.get_connector_status(d.connector)
        if status is None or not status.is_stopped:
            if d.resource.status.deletion is None:  # the record goes first, then the stop
                await d.checkpoint(step="Stopping")
            if (status is None or status.state != "STOPPED") and not _stop_settling(d.client, d.connector):
                await d.client.stop_connector(d.connector)
            raise DeletionPending(f"{d.connector}: waiting for Connect to report it STOPPED before the reset")
    if d.record.backup is None:
        try:
            name = await d.backup()
        except KubernetesRejected as error:
            text = (
                f"the backup ConfigMap could not be written, so the offsets were not deleted: {error}; "
                "the connector is left in Connect"
            )
            await d.checkpoint(step="Done", message=text)
            await record_event(d.kube, d.body, "Warning", "OffsetsOnDeleteFailed", text)
            return text
        step = "Resetting" if d.record.mode == OffsetsOnDelete.RESET.value else "Deleting"
        await d.checkpoint(step=step, backup=name)
    if d.record.mode == OffsetsOnDelete.RESET.value and not d.record.reset:
        current = await d.client.get_offsets(d.connector)
        if current.get("offsets"):
            # Only when there is something to delete: after a crash between this DELETE and its
            # record below, Connect holds none, and deleting again would be a second reset.
            await d.client.reset_offsets(d.connector)
            fault_point("delete-after-reset")
        await d.checkpoint(step="Deleting", reset=True)
    await d.client.delete_connector(d.connector)
    return await _done(d)


async def _done(d: _Deletion) -> str:
    if d.record.mode == OffsetsOnDelete.RESET.value:
        reason = "OffsetsResetOnDelete"
        text = (
            f"{d.connector}: stopped, offsets backed up in ConfigMap {d.record.backup} and deleted, connector "
            "deleted: one re-created under this name starts clean"
        )
    else:
        reason = "OffsetsBackedUpOnDelete"
        text = (
            f"{d.connector}: offsets backed up in ConfigMap {d.record.backup} (kept after the resource is gone), "
            "connector deleted (its offsets stay in Kafka)"
        )
    await d.checkpoint(step="Done", message=text)
    await record_event(d.kube, d.body, "Normal", reason, text)
    return text


def _stop_settling(client: ConnectClient, name: str) -> bool:
    """A stop sent moments ago (here or by the replica before us) that Connect's status may not
    show yet: not sent again (``planning.state_change_settling``)."""
    return state_change_settling("stop", client.state_changes.last(name), inherited_term_age())
