"""The one way status is written: conditions merged, unchanged status never written again,
refusals by the API server turned into a condition that waits for a change; and the one way an
outcome is recorded as an Event (``record_event``).
"""

from __future__ import annotations

import json
import logging
from datetime import datetime
from typing import Any, TypeVar

from pydantic import ValidationError

from connect_offsets import (
    fencing,
    metrics,
)
from connect_offsets.clients.kubernetes import (
    KubernetesApi,
    KubernetesError,
    KubernetesRejected,
    KubernetesUnavailable,
)
from connect_offsets.models.crds import (
    Condition,
    ConnectClusterStatus,
    KafkaConnectorResource,
    KafkaConnectorStatus,
    KafkaMirrorMaker2Resource,
    KafkaMirrorMaker2Status,
    StatusModel,
)
from connect_offsets.planning import (
    ConditionSpec,
)
from connect_offsets.planning.outcomes import MAX_CONDITION_MESSAGE, truncate
from connect_offsets.reconcile.settings import Outcome, now_utc
from connect_offsets.vocabulary import (
    API_GROUP,
    API_VERSION,
    CLUSTERS,
    CONNECTORS,
    MIRRORS,
    cluster_of,
    iso,
)

log = logging.getLogger(__name__)


#: The wire names of a Condition's fields, in the order they are written (``merge_conditions``).
CONDITION_KEYS = _TYPE, _STATUS, _REASON, _MESSAGE, _TRANSITION, _GENERATION = tuple(
    Condition.model_fields[name].alias or name
    for name in ("type", "status", "reason", "message", "last_transition_time", "observed_generation")
)


def merge_conditions(
    previous: list[Condition], wanted: list[ConditionSpec], generation: int, now: str
) -> list[dict[str, Any]]:
    """Conditions per API conventions: keep lastTransitionTime unless the status flips."""
    by_type = {c.type: c for c in previous}
    merged: list[dict[str, Any]] = []
    seen: set[str] = set()
    for spec in wanted:
        if spec.type in seen:
            continue
        seen.add(spec.type)
        old = by_type.get(spec.type)
        transition = old.last_transition_time if old is not None and old.status == spec.status else now
        message = spec.message if len(spec.message) <= MAX_CONDITION_MESSAGE else truncate(spec.message)
        # A plain dict, keyed by the Condition model's wire names: this runs on every pass, and
        # building the model costs ten times as much. Every field is written, as the model has them.
        merged.append(
            {
                _TYPE: spec.type,
                _STATUS: spec.status,
                _REASON: spec.reason,
                _MESSAGE: message,
                _TRANSITION: transition,
                _GENERATION: generation,
            }
        )
    return merged


#: The status model of each kind, by plural: what a status write may set.
STATUS_MODELS: dict[str, type[StatusModel]] = {
    CLUSTERS: ConnectClusterStatus,
    CONNECTORS: KafkaConnectorStatus,
    MIRRORS: KafkaMirrorMaker2Status,
}

#: Status fields the writer itself sets on every write.
_WRITER_FIELDS = frozenset({"conditions", "observed_generation"})


def status_fields(update: StatusModel) -> dict[str, Any]:
    """The fields a status update sets, as they go into the resource: camelCase JSON, nested
    models without their None fields, and None kept for a field being removed (a merge patch
    needs an explicit null). The one place status is serialized.
    """
    fields = update.model_fields_set
    if fields & _WRITER_FIELDS:
        raise TypeError(f"conditions and observedGeneration are the writer's, not set by {type(update).__name__}")
    data = update.model_dump(by_alias=True, include=set(fields), exclude_none=True, mode="json")
    for name in fields:
        if getattr(update, name) is None:
            data[type(update).model_fields[name].alias or name] = None
    return data


def merge_patch(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """The JSON merge patch (RFC 7386) that turns ``old`` into ``new``: what changed, and an
    explicit null for every key that went away, at any depth.

    Why not ``new`` itself: the API server merges nested objects key by key, so a record written
    over the previous one (``lastOffsetsOperation`` of a reset over that of a dry run) kept the
    previous one's fields that the new one leaves out (issue 36: a real reset showing ``dryRun:
    true``). Lists, such as conditions, are replaced whole.
    """
    patch: dict[str, Any] = {}
    for key, value in new.items():
        before = old.get(key)
        if isinstance(value, dict) and isinstance(before, dict):
            nested = merge_patch(before, value)
            if nested:
                patch[key] = nested
        elif key not in old or before != value:
            patch[key] = value
    patch.update({key: None for key in old if key not in new})
    return patch


def _canonical(status: dict[str, Any]) -> dict[str, Any]:
    """Status as plain JSON data, so two statuses compare equal whatever their Python types."""
    return json.loads(json.dumps(status, sort_keys=True))  # type: ignore[no-any-return]


ResourceT = TypeVar("ResourceT", KafkaConnectorResource, KafkaMirrorMaker2Resource)


async def load_resource(
    kube: KubernetesApi, plural: str, model: type[ResourceT], namespace: str, name: str, now: datetime
) -> tuple[dict[str, Any], ResourceT] | None:
    """The resource as the watch stream last showed it, parsed; None when it is gone, being
    deleted, or invalid. Not a GET: freshness is checked where it decides something
    (``offsets_changes.confirm_request``, right before offsets change).

    An invalid spec is reported (Ready=False, InvalidSpec, with the field paths) right here.
    """
    body = await kube.cached_resource(plural, namespace, name)
    if body is None or body["metadata"].get("deletionTimestamp"):
        metrics.forget_connector(model.__name__.removesuffix("Resource"), namespace, name)
        return None
    fenced_pass_on(kube, plural, body)
    try:
        return body, model.model_validate(body)
    except ValidationError as error:
        invalid = [ConditionSpec("Ready", "False", "InvalidSpec", validation_text(error))]
        await write_status(kube, plural, body, invalid, now)
        return None


#: The condition (and Event reason) of an API server refusal a retry cannot fix: written by
#: :func:`report_refusal`, kept by :func:`standing_refusal`.
API_SERVER_REFUSED = "ApiServerRefused"

#: How an API server refusal reads in a condition: what the user (or the platform team) can change.
_REFUSAL_HINTS = {
    400: "the request was malformed",
    403: "the operator's ServiceAccount may not do this here (RBAC, or a ResourceQuota)",
    404: "the object it names does not exist",
    413: "the object would be too large",
    422: "the API server refused the object as invalid (a name, a size, an immutable ConfigMap, a policy)",
}


def standing_refusal(body: dict[str, Any]) -> list[ConditionSpec]:
    """The resource's ApiServerRefused condition, kept by every status write of a pass that failed
    for a transient reason (``write_status(transient=True)``): that pass fixed nothing, so the
    refusal still stands. Dropped, the next pass would report it again, with a second Event for one
    unchanged problem (a Connect rebalance between two passes did that, test_shared_refusals). Only
    a pass that gets past it clears it. Kept in the one writer, not by each pass's conditions: a
    KafkaConnector's or a KafkaMirrorMaker2's pass fails transiently in more than one place (its
    Connect cluster unreachable, a Connect error in a step)."""
    return [
        ConditionSpec(c["type"], c.get("status", "True"), c.get("reason", ""), c.get("message", ""))
        for c in (body.get("status") or {}).get("conditions", [])
        if isinstance(c, dict) and c.get("type") == API_SERVER_REFUSED
    ]


async def report_refusal(
    kube: KubernetesApi, plural: str, namespace: str, name: str, error: KubernetesRejected
) -> Outcome:
    """An API server refusal a retry cannot fix: a condition that names it, then wait for a change.

    Why not the transient back-off: a 403, 404 or 422 on an object the user named (their
    ConfigMap, a Secret, the resource itself) answers the same until someone changes something, and
    the exponential retry loop would redo everything before it each time. The resource is checked
    again on its next change or drift pass, and the condition is gone once a pass succeeds.
    """
    hint = _REFUSAL_HINTS.get(error.status, "the API server refused it")
    reason = {403: "Forbidden", 404: "NotFound", 422: "Invalid"}.get(error.status, "Refused")
    message = truncate(f"{error} ({hint}); nothing more was done in this pass, it runs again on the next change")
    log.warning("%s/%s: %s", namespace, name, message)
    body = await kube.get_resource(plural, namespace, name)
    if body is None:
        return Outcome()
    old = [Condition.model_validate(c) for c in (body.get("status") or {}).get("conditions", []) if isinstance(c, dict)]
    kept = [ConditionSpec(c.type, c.status, c.reason, c.message) for c in old if c.type != API_SERVER_REFUSED]
    if any(c.type == API_SERVER_REFUSED and c.message == message for c in old):
        return Outcome()  # reported already: nothing is written again until something changes
    try:
        await write_status(
            kube, plural, body, [*kept, ConditionSpec(API_SERVER_REFUSED, "True", reason, message)], now_utc()
        )
    except KubernetesError as write_error:  # the status itself refused: the Event still tells
        log.warning("%s/%s: the condition could not be written either: %s", namespace, name, write_error)
    await kube.post_event(involved=body, event_type="Warning", reason=API_SERVER_REFUSED, message=message)
    return Outcome()


async def record_event(kube: KubernetesApi, body: dict[str, Any], event_type: str, reason: str, message: str) -> None:
    """Record one outcome as an Event on the resource (and in the log); best effort, never raises."""
    log.info("%s/%s %s: %s", body["metadata"]["namespace"], body["metadata"]["name"], reason, message)
    await kube.post_event(involved=body, event_type=event_type, reason=reason, message=message)


def owner_reference(body: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": body.get("apiVersion", f"{API_GROUP}/{API_VERSION}"),
        "kind": body.get("kind", "KafkaConnector"),
        "name": body["metadata"]["name"],
        "uid": body["metadata"]["uid"],
        "controller": False,
        "blockOwnerDeletion": False,
    }


async def write_status(
    kube: KubernetesApi,
    plural: str,
    body: dict[str, Any],
    conditions: list[ConditionSpec],
    now: datetime,
    update: StatusModel | None = None,
    *,
    transient: bool = False,
    claim: bool = False,
) -> None:
    """Write status only if it differs from what the resource already has.

    ``update`` is the kind's status model (``STATUS_MODELS``) built with only the fields to set; a
    field set to None is removed. Conditions and observedGeneration are always written here.
    ``transient``: the pass failed for a reason a retry can fix, so a standing refusal is kept
    (:func:`standing_refusal`).
    ``claim``: write even if nothing changes - the claim before a pass's first Connect write, a
    conditional write that fails if the resource changed since the pass read it. Otherwise a
    claim alone is not worth a write: a new Lease term re-checks every resource of its clusters,
    and writing a claim into each idle one cost one status write per resource (20,000 in a
    minute at a take-over, bench/README.md); the first write that matters carries it.
    """
    model = STATUS_MODELS[plural]
    if update is not None and type(update) is not model:
        raise TypeError(f"a {plural} status update is a {model.__name__}, not a {type(update).__name__}")
    extra = status_fields(update) if update is not None else {}
    conditions_key, generation_key = (model.model_fields[n].alias or n for n in ("conditions", "observed_generation"))
    old: dict[str, Any] = body.get("status") or {}
    previous = [Condition.model_validate(c) for c in old.get(conditions_key, []) if isinstance(c, dict)]
    generation = int(body["metadata"].get("generation", 0))
    new = dict(old)
    new.update({k: v for k, v in extra.items() if v is not None})
    # None removes a field (a finished pending operation); a merge patch needs an explicit null.
    removed = {k for k, v in extra.items() if v is None and k in old}
    for key in removed:
        new.pop(key)
    if transient and not any(c.type == API_SERVER_REFUSED for c in conditions):
        conditions = [*conditions, *standing_refusal(body)]
    new[conditions_key] = merge_conditions(previous, conditions, generation, iso(now))
    new[generation_key] = generation
    fence = fencing.current() if plural in CLAIMED else None
    if fence is not None:
        unclaimed = {k: v for k, v in new.items() if k != CLAIMED_BY}
        if CLAIMED_BY in old:
            unclaimed[CLAIMED_BY] = old[CLAIMED_BY]
        if not claim and _canonical(unclaimed) == _canonical(old):
            return
        new[CLAIMED_BY] = fence.holder
    if _canonical(new) == _canonical(old) and not (claim and fence is not None):
        return  # (a claim is written even when status says it already: the write is the check)
    try:
        if fence is None:
            written = await kube.patch_status(
                plural,
                body["metadata"]["namespace"],
                body["metadata"]["name"],
                merge_patch(_canonical(old), _canonical(new)),
            )
        else:
            written = await _fenced_patch(kube, plural, body, fence, old, new)
    except KubernetesError as error:
        log.warning("status not written: %s", error)
        raise
    # Later writes in the same pass (checkpoints, then the final one) compare against this one.
    body["status"] = new
    if written is not None and _same_but_status(written, body):
        # Our own write is the only change since the pass read the body: the body is the written
        # version now, so a pass that found nothing to do is recognised as such by the next check
        # (the quiet path compares resourceVersions) instead of needing one more full pass.
        # Anything else changed meanwhile (a label, a request annotation): the old version stays
        # and the next check looks at the resource in full.
        body["metadata"]["resourceVersion"] = written["metadata"].get("resourceVersion")


#: The kinds whose passes claim them (``status.claimedBy``) under a Lease: those that write to Connect.
CLAIMED = frozenset({CONNECTORS, MIRRORS})
CLAIMED_BY = KafkaConnectorStatus.model_fields["claimed_by"].alias or "claimed_by"
#: Conditional writes tried before a resource that keeps changing is left to the next pass.
FENCED_ATTEMPTS = 3


def fenced_pass_on(kube: KubernetesApi, plural: str, body: dict[str, Any]) -> None:
    """A pass under a Lease (``fencing``) is about to work on ``body``: its first Connect write
    claims the resource first (``claim``), unless the body already says this term holds it."""
    fence = fencing.current()
    if fence is None or plural not in CLAIMED:
        return
    holder = (body.get("status") or {}).get(CLAIMED_BY)
    fence.read_holder = holder if isinstance(holder, str) else None
    fence.claimed = holder == fence.holder
    fence.resource_version = body["metadata"].get("resourceVersion")

    async def claim() -> None:
        kept = [
            ConditionSpec(c.type, c.status, c.reason, c.message)
            for c in (Condition.model_validate(c) for c in (body.get("status") or {}).get("conditions", []))
        ]
        await write_status(kube, plural, body, kept, now_utc(), claim=True)

    fence.claim = claim
    meta = body["metadata"]

    def still_claimed() -> bool:
        watched = kube.cache.peek(plural, meta["namespace"], meta["name"])
        if watched is None:
            return False  # gone: another replica finished its deletion
        labels = (watched.get("metadata") or {}).get("labels") or {}
        if fence.cluster is not None and cluster_of(plural, meta["namespace"], meta["name"], labels) != fence.cluster:
            return False  # bound to another ConnectCluster since: its Lease's holder works on it
        holder = (watched.get("status") or {}).get(CLAIMED_BY)
        return holder in (None, fence.holder, fence.read_holder)

    fence.still_claimed = still_claimed


async def _fenced_patch(
    kube: KubernetesApi,
    plural: str,
    body: dict[str, Any],
    fence: fencing.Fence,
    old: dict[str, Any],
    new: dict[str, Any],
) -> dict[str, Any] | None:
    """Write status only if the resource is still at the version the pass knows, or changed since
    only outside status and the claim is still the one the pass read (another controller's label or
    annotation): the fencing of issue 44. The status the pass knows differing means another writer
    (a replica that took the Lease over) wrote it: the claim went to it, and ``FencedOff`` ends
    this pass before anything else is written; any other difference is retried by the next pass."""
    meta = body["metadata"]
    namespace, name = meta["namespace"], meta["name"]
    version = fence.resource_version or meta.get("resourceVersion")
    patch = merge_patch(_canonical(old), _canonical(new))
    taken_from = old.get(CLAIMED_BY)
    if taken_from not in (None, fence.holder) and fence.confirm is not None and not await fence.confirm(False):
        raise fencing.FencedOff(
            f"{plural} {namespace}/{name}: not claimed from {taken_from!r}, the Lease is no longer {fence.holder!r}"
        )
    for _ in range(FENCED_ATTEMPTS):
        try:
            written = await kube.patch_status(plural, namespace, name, patch, resource_version=version)
        except KubernetesUnavailable as error:
            if error.status != 409:
                raise
            fresh = await kube.fresh_resource(plural, namespace, name)
            if fresh is None:
                raise
            status = fresh.get("status") or {}
            labels = (fresh.get("metadata") or {}).get("labels") or {}
            if fence.cluster is not None and cluster_of(plural, namespace, name, labels) != fence.cluster:
                raise fencing.FencedOff(
                    f"{plural} {namespace}/{name} is bound to another ConnectCluster now, its Lease's holder's"
                ) from error
            if status.get(CLAIMED_BY) not in (fence.read_holder, fence.holder, old.get(CLAIMED_BY)):
                raise fencing.FencedOff(
                    f"{plural} {namespace}/{name} is claimed by {status.get(CLAIMED_BY)!r} now, not {fence.holder!r}"
                ) from error
            if _canonical(status) != _canonical(old):
                raise KubernetesUnavailable(
                    f"status of {plural} {namespace}/{name} changed while this pass ran; it looks again", 409
                ) from error
            version = fresh["metadata"].get("resourceVersion")
            continue
        fence.claimed = True
        fence.read_holder = fence.holder
        fence.resource_version = written["metadata"].get("resourceVersion") if written is not None else None
        return written
    raise KubernetesUnavailable(f"status of {plural} {namespace}/{name}: the resource kept changing", 409)


#: Metadata that changes with every write, whoever writes: not what a pass read.
_WRITE_METADATA = frozenset({"resourceVersion", "managedFields"})


def _same_but_status(written: dict[str, Any], body: dict[str, Any]) -> bool:
    """Whether ``written`` (the API server's answer to our status patch) is ``body`` apart from
    status and the bookkeeping of the write itself. Both are parsed JSON, so plain ``==`` compares
    them structurally."""

    def read(resource: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        metadata = resource.get("metadata") or {}
        kept = {k: v for k, v in metadata.items() if k not in _WRITE_METADATA}
        return kept, {k: v for k, v in resource.items() if k not in ("metadata", "status")}

    return read(written) == read(body)


async def write_status_fields(
    kube: KubernetesApi, plural: str, body: dict[str, Any], now: datetime, update: StatusModel
) -> None:
    """A checkpoint in the middle of a pass: these fields now, the conditions as they are."""
    old = [Condition.model_validate(c) for c in (body.get("status") or {}).get("conditions", []) if isinstance(c, dict)]
    kept = [ConditionSpec(c.type, c.status, c.reason, c.message) for c in old]
    await write_status(kube, plural, body, kept, now, update)


def merge_same_type(conditions: list[ConditionSpec]) -> list[ConditionSpec]:
    """One condition per type (API conventions): messages of several connectors are joined."""
    merged: dict[str, ConditionSpec] = {}
    for item in conditions:
        if item.type in merged:
            old = merged[item.type]
            merged[item.type] = ConditionSpec(item.type, old.status, old.reason, f"{old.message}; {item.message}")
        else:
            merged[item.type] = item
    return list(merged.values())


def validation_text(error: ValidationError) -> str:
    parts = []
    for item in error.errors()[:5]:
        path = ".".join(str(p) for p in item["loc"])
        parts.append(f"{path}: {item['msg']}")
    return "; ".join(parts)
