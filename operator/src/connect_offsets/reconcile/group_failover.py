"""A KafkaMirrorMaker2's consumer-group failovers: translate a group's offsets through a mirror's
checkpoints and commit them for the group on the mirror's target cluster, exactly once.

Order, each step recorded before the next (``status.groupFailovers``): translate
(``sources.translate_group``; a partial translation - untranslatable partitions, or the source's
offsets unread - refuses the whole failover unless the request allows it: ``allowPartial``), pin the
translated offsets in a ConfigMap of the resource (a dry run stops here: the ConfigMap is its
report), check that the group has no active members on the target, record the intent
(``step: Committing``), commit, record the outcome. A restarted operator that finds ``Committing``
reads the group's offsets on the target first: at or past the pinned ones, the commit happened and
is not made again (committing again would rewind consumers that started meanwhile); otherwise it
commits the pinned offsets, never a newer translation. Which failovers a pass works on, and their
identity, is ``planning.failover_requests``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from connect_offsets.clients.kafka import KafkaAdminError
from connect_offsets.clients.kafka_groups import GroupActive, KafkaGroups
from connect_offsets.clients.kubernetes import KubernetesApi
from connect_offsets.clients.offsets_configmaps import OffsetsConfigMapStore, OffsetsStoreError
from connect_offsets.lag import mirror_kafka_config
from connect_offsets.models.crds import GroupFailoverStatus, KafkaMirrorMaker2Resource, KafkaMirrorMaker2Status
from connect_offsets.planning import HANDLED_REQUEST_IDS, Action, ConditionSpec, mirror_targets
from connect_offsets.planning.failover import Translation, mirror_facts, offsets_document
from connect_offsets.planning.failover_requests import FailoverRequest, failover_requests, handled_id, kept_records
from connect_offsets.planning.outcomes import MAX_OPERATION_MESSAGE, truncate
from connect_offsets.planning.plan import PlannedRefusal
from connect_offsets.reconcile.context import OffsetsRequestInvalid, PassEvent
from connect_offsets.reconcile.pins import read_pin, write_pin
from connect_offsets.reconcile.sources import MirrorKafka, mirror_kafka, translate_group
from connect_offsets.reconcile.status import write_status_fields
from connect_offsets.vocabulary import MIRRORS, iso, request_view

__all__ = ["FailoverResult", "GroupFailovers"]

TP = tuple[str, int]


@dataclass
class FailoverResult:
    """What a pass's failovers leave for the KafkaMirrorMaker2's status write and its end."""

    conditions: list[ConditionSpec] = field(default_factory=list)
    removals: list[Action] = field(default_factory=list)
    events: list[PassEvent] = field(default_factory=list)
    transient_error: str | None = None
    superseded: bool = False  # the request changed under us: plan again from the fresh body


class _Outcome(Exception):
    def __init__(self, result: str, reason: str, message: str, partitions: int | None = None) -> None:
        super().__init__(message)
        self.result, self.reason, self.message, self.partitions = result, reason, message, partitions


def _offsets(document: dict[str, Any]) -> dict[TP, int]:
    """A pinned translation (KIP-875 sink form) back as (topic, partition) -> offset."""
    found: dict[TP, int] = {}
    for entry in document.get("offsets") or []:
        partition, offset = entry.get("partition") or {}, entry.get("offset") or {}
        topic, number, position = (
            partition.get("kafka_topic"),
            partition.get("kafka_partition"),
            offset.get("kafka_offset"),
        )
        if isinstance(topic, str) and type(number) is int and type(position) is int:
            found[(topic, number)] = position
    return found


def _resume_target(
    resource: KafkaMirrorMaker2Resource, values: dict[tuple[str, str], str], mirror: str
) -> dict[str, Any] | None:
    """The target cluster of ``mirror`` (``<source>-><target>``) from a connector the spec still
    declares for it (its checkpoint connector first), or None."""
    source_alias, _, target_alias = mirror.partition("->")
    found = [
        t
        for t in mirror_targets(resource, values).targets
        if (t.config.get("source.cluster.alias"), t.config.get("target.cluster.alias")) == (source_alias, target_alias)
        and "target.cluster.bootstrap.servers" in t.config
    ]
    found.sort(key=lambda t: not t.name.endswith(".MirrorCheckpointConnector"))
    return mirror_kafka_config(found[0], "target") if found else None


class GroupFailovers:
    """Runs the failovers a KafkaMirrorMaker2 asks for (``run``, once per reconcile pass)."""

    def __init__(self, kube: KubernetesApi, kafka: KafkaGroups | None = None) -> None:
        self.kube = kube
        self.store = OffsetsConfigMapStore(kube)
        self.kafka = kafka if kafka is not None else KafkaGroups()

    async def run(
        self,
        body: dict[str, Any],
        resource: KafkaMirrorMaker2Resource,
        values: dict[tuple[str, str], str],
        now: datetime,
    ) -> FailoverResult:
        """Work on this pass's failovers; ``values``: the mirrors' secretConfig values (for Kafka)."""
        requests, conditions, finish = failover_requests(resource)
        result = FailoverResult(conditions=list(conditions), removals=list(finish))
        for request in requests:
            try:
                await self._one(body, resource, values, request, now, result)
            except KafkaAdminError as error:
                # The target cluster did not answer: nothing recorded as an outcome, tried again.
                result.transient_error = result.transient_error or str(error)
                result.conditions.append(
                    ConditionSpec("GroupFailoverInProgress", "True", "KafkaUnavailable", f"{request.group}: {error}")
                )
            if result.superseded:
                break
        return result

    def _records(self, body: dict[str, Any]) -> list[GroupFailoverStatus]:
        return KafkaMirrorMaker2Status.model_validate(body.get("status") or {}).group_failovers

    async def _record(
        self,
        body: dict[str, Any],
        resource: KafkaMirrorMaker2Resource,
        record: GroupFailoverStatus,
        now: datetime,
        handled: str | None = None,
    ) -> None:
        """Write ``record`` in place of the group's previous one (a checkpoint: at once)."""
        records = [
            r
            for r in self._records(body)
            if not (r.source == record.source and (r.mirror, r.group) == (record.mirror, record.group))
            or (record.source == "annotation" and r.request_key != record.request_key)
        ]
        update = KafkaMirrorMaker2Status(group_failovers=kept_records(resource, [*records, record]))
        if handled is not None:
            ids = [i for i in resource.status.handled_request_ids if i != handled]
            update = update.updated(KafkaMirrorMaker2Status(handled_request_ids=[*ids, handled][-HANDLED_REQUEST_IDS:]))
        await write_status_fields(self.kube, MIRRORS, body, now, update)

    async def _confirm(self, body: dict[str, Any]) -> bool:
        """The request still stands on the API server (the cache may lag one event): commit nothing otherwise.

        Asked for a declared failover too: a new generation (``groupFailover.allowPartial`` withdrawn,
        the group removed) means planning again, never committing what the old spec allowed."""
        meta = body["metadata"]
        fresh = await self.kube.fresh_resource(MIRRORS, meta["namespace"], meta["name"])
        return fresh is not None and request_view(fresh) == request_view(body)

    async def _one(
        self,
        body: dict[str, Any],
        resource: KafkaMirrorMaker2Resource,
        values: dict[tuple[str, str], str],
        request: FailoverRequest,
        now: datetime,
        result: FailoverResult,
    ) -> None:
        namespace = resource.metadata.namespace
        base = GroupFailoverStatus(
            mirror=request.mirror or f"{request.source_alias or '?'}->?",
            group=request.group,
            source=request.source,
            time=iso(now),
            generation=resource.metadata.generation,
            request_id=request.request_id,
            request_key=request.request_key,
            dry_run=True if request.dry_run else None,
            pinned=request.resume.pinned if request.resume else None,
        )
        try:
            if request.resume is not None:
                # A commit cut short needs only its target cluster: the mirror's facts (a spec change
                # may refuse them now) never turn it Failed unchecked - it might be committed again later.
                target = _resume_target(resource, values, request.resume.mirror)
                if target is None:
                    result.conditions.append(
                        ConditionSpec(
                            "GroupFailoverInProgress",
                            "True",
                            "MirrorNotFound",
                            f"{request.group}: the commit through mirror {request.resume.mirror} was cut short "
                            "and the spec no longer declares a connector of that mirror, so its target cluster is "
                            "unknown; it stays Committing until the mirror is back in the spec",
                        )
                    )
                    return
                message, count = await self._resume(request, target, namespace)
                raise _Outcome("Succeeded", "", message, count)
            facts = mirror_facts(resource, request.source_alias)
            if isinstance(facts, PlannedRefusal):
                raise _Outcome("Failed", facts.reason, facts.message)
            base = base.model_copy(update={"mirror": facts.name})
            clusters = mirror_kafka(resource, values, facts)
            message, count, base = await self._new(body, resource, request, clusters, facts, base, now, result)
            if result.superseded:
                return
            raise _Outcome("Succeeded", "", message, count)
        except _Outcome as outcome:
            final = base.model_copy(
                update={
                    "step": None,
                    "result": outcome.result,
                    "reason": outcome.reason,
                    "message": truncate(outcome.message, MAX_OPERATION_MESSAGE),
                    "partitions": outcome.partitions,
                    "time": iso(now),
                    "instance": request.instance,
                }
            )
        handled = handled_id(request.request_id, request.dry_run) if request.request_id else None
        await self._record(body, resource, final, now, handled)
        who = f"group {request.group} ({final.mirror or request.source_alias or 'mirror'})"
        if final.result == "Succeeded":
            result.removals += request.removals
            reason = "GroupFailoverDryRun" if request.dry_run else "GroupFailoverSucceeded"
            result.events.append(PassEvent("Normal", reason, f"{who}: {final.message}"))
        else:
            result.conditions.append(
                ConditionSpec("GroupFailoverFailed", "True", final.reason, f"{who}: {final.message}")
            )
            result.events.append(PassEvent("Warning", "GroupFailoverFailed", f"{who}: {final.message}"))

    async def _resume(self, request: FailoverRequest, target: dict[str, Any], namespace: str) -> tuple[str, int]:
        """A commit cut short (recorded Committing): done if the group's offsets already got there."""
        record = request.resume
        assert record is not None
        try:
            document = await read_pin(self.store, self.kube, namespace, record.pinned) if record.pinned else None
        except (OffsetsStoreError, ValueError) as error:
            document, reason = None, str(error)
        else:
            reason = "it is gone"
        if document is None:
            raise _Outcome(
                "Failed",
                "PinnedCopyMissing",
                f"the translated offsets pinned in ConfigMap {record.pinned} cannot be read ({reason}); whether they "
                "were committed is unknown, so nothing is committed again: compare the group's offsets on the target "
                "and ask again",
            )
        offsets = _offsets(document)
        current = await self.kafka.committed(target, request.group, namespace=namespace)
        if all(current.get(tp, -1) >= offset for tp, offset in offsets.items()):
            return (
                f"{len(offsets)} partition(s) committed before the operator restarted (the group is at or past the "
                f"translated offsets of ConfigMap {record.pinned}); not committed again",
                len(offsets),
            )
        await self._commit(request.group, offsets, target, namespace)
        return f"committed {len(offsets)} partition(s) from ConfigMap {record.pinned}", len(offsets)

    async def _commit(self, group: str, offsets: dict[TP, int], target: dict[str, Any], namespace: str) -> None:
        state = await self.kafka.describe(target, group, namespace=namespace)
        if state.members:
            raise _Outcome(
                "Failed",
                "ConsumerGroupActive",
                f"group {group} has {state.members} active member(s) on the target cluster (state {state.state}): "
                "its offsets are committed only while it has none; stop its consumers there, then ask again. "
                "Nothing was committed",
            )
        try:
            await self.kafka.commit(target, group, offsets, namespace=namespace)
        except GroupActive as error:
            raise _Outcome("Failed", "ConsumerGroupActive", f"{error}; nothing was committed") from error

    async def _new(
        self,
        body: dict[str, Any],
        resource: KafkaMirrorMaker2Resource,
        request: FailoverRequest,
        clusters: MirrorKafka,
        facts: Any,
        base: GroupFailoverStatus,
        now: datetime,
        result: FailoverResult,
    ) -> tuple[str, int, GroupFailoverStatus]:
        namespace = resource.metadata.namespace
        translation = await translate_group(self.kafka, facts, clusters, request.group, namespace)
        if isinstance(translation, PlannedRefusal):
            raise _Outcome("Failed", translation.reason, translation.message)
        refusal = translation.refusal(request.allow_partial)
        if refusal is not None:
            raise _Outcome("Failed", refusal.reason, refusal.message)
        assert isinstance(translation, Translation)
        document = json.dumps(offsets_document(translation.offsets), indent=2) + "\n"
        description = f"group {request.group} translated through mirror {facts.name}"
        try:
            pinned, _ = await write_pin(
                self.kube,
                self.store,
                body,
                "failover",
                f"{facts.name}/{request.group}",
                document,
                source=description,
                now=now,
            )
        except OffsetsRequestInvalid as error:
            raise _Outcome("Failed", error.reason, str(error)) from error
        base = base.model_copy(update={"pinned": pinned})
        notes = "".join(f"; {note}" for note in translation.notes)
        count = len(translation.offsets)
        partial = (
            "; partial (allowPartial): the partitions not translated start from auto.offset.reset"
            if translation.partial
            else ""
        )
        listing = "\nPartitions:\n" + "\n".join(translation.partition_lines())
        if request.dry_run:
            return (
                f"dry run: {count} partition(s) would be committed for group {request.group} on cluster "
                f"{facts.target_alias} (translated offsets in ConfigMap {pinned}){partial}{notes}; nothing was "
                f"committed{listing}",
                count,
                base,
            )
        state = await self.kafka.describe(clusters.target, request.group, namespace=namespace)
        if state.members:
            raise _Outcome(
                "Failed",
                "ConsumerGroupActive",
                f"group {request.group} has {state.members} active member(s) on cluster {facts.target_alias} "
                f"(state {state.state}): its offsets are committed only while it has none; stop its consumers "
                f"there, then ask again. Nothing was committed (translated offsets in ConfigMap {pinned})",
            )
        # the last look before the intent: annotation and spec alike (allowPartial may have been withdrawn)
        if not await self._confirm(body):
            result.superseded = True
            return "", 0, base
        intent = base.model_copy(update={"step": "Committing", "time": iso(now)})
        await self._record(body, resource, intent, now)
        await self._commit(request.group, translation.offsets, clusters.target, namespace)
        return (
            f"committed {count} partition(s) for group {request.group} on cluster {facts.target_alias} "
            f"(translated offsets in ConfigMap {pinned}){partial}{notes}" + (listing if translation.partial else ""),
            count,
            base,
        )
