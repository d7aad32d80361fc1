"""Which consumer-group failovers a KafkaMirrorMaker2 asks for this pass, pure: the one the
``connect-offsets.io/failover-group`` annotation asks (exactly once, as every offsets request), and
one per group of ``spec.mirrors[].groupFailover`` not failed over yet; and what status keeps.

Exactly once: a request is identified by its annotations (``failover_key``) and recorded in
``status.groupFailovers`` with that key and, once it ended, the ``instance`` it ended at; while its
annotations stay it is never carried out again, only their removal is finished (with the
``handled-request`` marker, as for offsets requests). A commit in progress is recorded first
(``step: Committing``, the translated offsets pinned in a ConfigMap): a restarted operator resumes
it and checks the group's offsets on the target before committing (``reconcile.group_failover``).
A declarative group is failed over once: a Succeeded record of it stays while the spec lists it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from connect_offsets.models.crds import GroupFailoverStatus, KafkaMirrorMaker2Resource
from connect_offsets.planning.plan import Action, ConditionSpec
from connect_offsets.planning.targets import handled_before
from connect_offsets.vocabulary import (
    ANNOTATION_ALLOW_PARTIAL,
    ANNOTATION_DRY_RUN,
    ANNOTATION_FAILOVER_FROM,
    ANNOTATION_FAILOVER_GROUP,
    ANNOTATION_HANDLED_REQUEST,
    ANNOTATION_OFFSETS,
    ANNOTATION_REQUEST_ID,
    short_hash,
)

__all__ = [
    "ANNOTATION_RECORDS_KEPT",
    "FailoverRequest",
    "failover_key",
    "failover_requests",
    "handled_id",
    "kept_records",
]

#: Records of annotation requests kept in status (the newest); declarative ones are kept per group.
ANNOTATION_RECORDS_KEPT = 10

#: The annotations a failover request consists of (removed together once it finished).
_REQUEST_KEYS = (
    ANNOTATION_FAILOVER_GROUP,
    ANNOTATION_FAILOVER_FROM,
    ANNOTATION_REQUEST_ID,
    ANNOTATION_DRY_RUN,
    ANNOTATION_ALLOW_PARTIAL,
)
#: Part of a request's identity only when present: requests made before it existed keep theirs.
_OPTIONAL_KEYS = frozenset({ANNOTATION_ALLOW_PARTIAL})


@dataclass(frozen=True)
class FailoverRequest:
    """One group to fail over (or to finish failing over) this pass."""

    source: Literal["annotation", "spec"]
    group: str
    source_alias: str | None  # which mirror: failover-from, or the spec's mirror
    dry_run: bool = False
    request_id: str | None = None
    request_key: str | None = None
    #: The record of an earlier pass to continue (step Committing), if any.
    resume: GroupFailoverStatus | None = None
    #: Annotation requests: their removal (each guarded by its value) and the handled marker.
    removals: tuple[Action, ...] = ()
    #: The resourceVersion this request is handled at (its record's ``instance``).
    instance: str | None = None
    #: ``<source>-><target>`` when known before the mirror is looked up (spec entries, resumed records).
    mirror: str | None = None
    #: A partial translation may be committed (``allow-partial`` annotation, ``groupFailover.allowPartial``).
    allow_partial: bool = False


def failover_key(annotations: dict[str, str]) -> str | None:
    """Identity of the failover request the annotations make (None: there is none)."""
    if ANNOTATION_FAILOVER_GROUP not in annotations:
        return None
    keys = [k for k in _REQUEST_KEYS if k not in _OPTIONAL_KEYS or k in annotations]
    return short_hash("\x00".join(["failover", *(f"{k}={annotations.get(k, '')}" for k in keys)]))


def _removals(annotations: dict[str, str], instance: str) -> tuple[Action, ...]:
    removals = [
        Action("remove_annotation", annotation=key, annotation_value=annotations[key])
        for key in _REQUEST_KEYS
        if key in annotations
    ]
    if instance:
        removals.append(Action("mark_handled", annotation=ANNOTATION_HANDLED_REQUEST, annotation_value=instance))
    return tuple(removals)


def handled_id(request_id: str, dry_run: bool) -> str:
    """How a failover's request id is kept in status.handledRequestIds (dry runs apart, as for offsets)."""
    return f"{request_id}/dry-run" if dry_run else request_id


def _handled_id(annotations: dict[str, str], handled: list[str]) -> bool:
    request_id = annotations.get(ANNOTATION_REQUEST_ID)
    return request_id is not None and handled_id(request_id, annotations.get(ANNOTATION_DRY_RUN) == "true") in handled


def _mirror_name(source: str, target: str) -> str:
    return f"{source}->{target}"


def failover_requests(
    resource: KafkaMirrorMaker2Resource,
) -> tuple[list[FailoverRequest], list[ConditionSpec], tuple[Action, ...]]:
    """The failovers to work on this pass, the conditions that say why others wait, and annotation
    removals to finish without doing anything (a request that already ended)."""
    meta = resource.metadata
    annotations = meta.annotations
    records = resource.status.group_failovers
    marker = annotations.get(ANNOTATION_HANDLED_REQUEST)
    requests: list[FailoverRequest] = []
    conditions: list[ConditionSpec] = []
    finish: tuple[Action, ...] = ()
    committing = [r for r in records if r.step == "Committing"]
    for record in committing:  # a commit cut short: finish it before anything new
        source_alias = record.mirror.split("->", 1)[0]
        requests.append(
            FailoverRequest(
                record.source,
                record.group,
                source_alias,
                request_id=record.request_id,
                request_key=record.request_key,
                resume=record,
                removals=_removals(annotations, meta.resource_version)
                if record.source == "annotation" and record.request_key == failover_key(annotations)
                else (),
                instance=meta.resource_version or None,
                mirror=record.mirror,
            )
        )
    busy = {(r.mirror, r.group) for r in committing}
    key = failover_key(annotations)
    last = next((r for r in reversed(records) if r.source == "annotation" and r.result == "Succeeded"), None)
    if key is None:
        if last is not None and last.instance and last.instance.isdigit() and not handled_before(marker, last.instance):
            # Its annotations went away without us: marked handled, so an identical request later runs.
            finish = (Action("mark_handled", annotation=ANNOTATION_HANDLED_REQUEST, annotation_value=last.instance),)
    elif not any(r.source == "annotation" for r in committing):
        group = annotations[ANNOTATION_FAILOVER_GROUP]
        mine = next((r for r in reversed(records) if r.request_key == key and r.result is not None), None)
        succeeded = mine is not None and mine.result == "Succeeded" and mine.instance is not None
        if annotations.get(ANNOTATION_OFFSETS) is not None:
            conditions.append(
                ConditionSpec(
                    "GroupFailoverWaiting",
                    "True",
                    "OtherRequestPending",
                    f"{ANNOTATION_FAILOVER_GROUP}={group!r} waits: an offsets request ({ANNOTATION_OFFSETS}) is "
                    "pending on this resource; one request at a time",
                )
            )
        elif succeeded and mine is not None and mine.instance and not handled_before(marker, mine.instance):
            finish = _removals(annotations, mine.instance)  # ended; only the removal was interrupted
        elif _handled_id(annotations, resource.status.handled_request_ids):
            conditions.append(
                ConditionSpec(
                    "OffsetsRequestIgnored",
                    "True",
                    "AlreadyHandled",
                    f"{ANNOTATION_REQUEST_ID}={annotations[ANNOTATION_REQUEST_ID]!r} was already handled; set a new "
                    "request id to fail the group over again",
                )
            )
        elif mine is not None and mine.result == "Failed" and mine.generation == meta.generation:
            conditions.append(
                ConditionSpec("GroupFailoverFailed", "True", mine.reason or "RequestFailed", mine.message)
            )
        elif len(group) > 249 or not group.strip():
            conditions.append(
                ConditionSpec(
                    "InvalidAnnotation",
                    "True",
                    "UnknownValue",
                    f"{ANNOTATION_FAILOVER_GROUP}: {group[:80]!r} is no group id",
                )
            )
        elif annotations.get(ANNOTATION_ALLOW_PARTIAL, "false") not in ("true", "false"):
            conditions.append(
                ConditionSpec(
                    "InvalidAnnotation",
                    "True",
                    "UnknownValue",
                    f"{ANNOTATION_ALLOW_PARTIAL}: {annotations[ANNOTATION_ALLOW_PARTIAL][:80]!r} is not 'true' or "
                    f"'false'; the failover of group {group[:80]!r} waits for it to be corrected, nothing was done",
                )
            )
        else:
            dry_run = annotations.get(ANNOTATION_DRY_RUN) == "true"
            requests.append(
                FailoverRequest(
                    "annotation",
                    group,
                    annotations.get(ANNOTATION_FAILOVER_FROM),
                    dry_run=dry_run,
                    request_id=annotations.get(ANNOTATION_REQUEST_ID),
                    request_key=key,
                    removals=_removals(annotations, meta.resource_version),
                    instance=meta.resource_version or None,
                    allow_partial=annotations.get(ANNOTATION_ALLOW_PARTIAL) == "true",
                )
            )
    for mirror in resource.spec.mirrors:
        if mirror.group_failover is None:
            continue
        name = _mirror_name(mirror.source_cluster, mirror.target_cluster)
        for group in mirror.group_failover.groups:
            if (name, group) in busy:
                continue
            found = next((r for r in records if r.source == "spec" and (r.mirror, r.group) == (name, group)), None)
            if found is not None and found.result == "Succeeded":
                continue
            if found is not None and found.result == "Failed" and found.generation == meta.generation:
                # Failed in this generation: told with its own record, not tried again until the spec
                # changes (the message as the pass that failed it said it).
                conditions.append(
                    ConditionSpec(
                        "GroupFailoverFailed",
                        "True",
                        found.reason or "RequestFailed",
                        f"group {group} ({found.mirror}): {found.message}",
                    )
                )
                continue
            requests.append(
                FailoverRequest(
                    "spec",
                    group,
                    mirror.source_cluster,
                    instance=meta.resource_version or None,
                    mirror=name,
                    allow_partial=mirror.group_failover.allow_partial,
                )
            )
    return requests, conditions, finish


def kept_records(resource: KafkaMirrorMaker2Resource, records: list[GroupFailoverStatus]) -> list[GroupFailoverStatus]:
    """status.groupFailovers to keep: one record per group the spec lists (the newest), records in
    progress, and the newest annotation records."""
    listed = {
        (_mirror_name(m.source_cluster, m.target_cluster), group)
        for m in resource.spec.mirrors
        if m.group_failover is not None
        for group in m.group_failover.groups
    }
    spec: dict[tuple[str, str], GroupFailoverStatus] = {}
    annotation: list[GroupFailoverStatus] = []
    for record in records:
        if record.source == "spec":
            if (record.mirror, record.group) in listed or record.step == "Committing":
                spec[(record.mirror, record.group)] = record
        else:
            annotation.append(record)
    committing = [r for r in annotation if r.step == "Committing"]
    done = [r for r in annotation if r.step != "Committing"][-ANNOTATION_RECORDS_KEPT:]
    return [*spec.values(), *committing, *done]
