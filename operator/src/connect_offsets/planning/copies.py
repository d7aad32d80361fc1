"""Copies of offsets from elsewhere, pure: who may read another connector's offsets, which document
a copy applies (the source as read now, or the copy pinned at the request's first attempt), and
what of it will not match this connector (shown by a copy's dry run).

Why pinned: the source connector keeps moving while a copy is carried out (stop -> change ->
resume takes seconds, a retry after a failure or a restart may come minutes later). The request
reads the source once, at its first attempt, and keeps that document in a ConfigMap of the resource
(``pin_offsets``; its name in ``status.offsetsProgress.pinned``, and in
``status.pendingOffsetsOperation.pinned`` once a staged change began): every retry applies that
copy, never a newer position. Initial offsets from elsewhere are pinned the same way, in
``status.initialOffsets`` (``pin_initial_offsets``), before the connector is created. A staged
alter from its own ConfigMap pins that document when it begins (``pinned_document``, issue 44): an
edit made while the connector stops is a request of its own.
"""

from __future__ import annotations

import re

from connect_offsets.models.crds import NAMESPACE_NAME
from connect_offsets.offsets import OffsetsValidationError, validated_compact_json
from connect_offsets.planning.plan import Action, Observed, PlannedRefusal, configmap_text
from connect_offsets.planning.targets import ConnectorTarget, request_key, target_config, target_fingerprint
from connect_offsets.vocabulary import (
    ANNOTATION_ALTER_FROM_CONNECTOR,
    ANNOTATION_OFFSETS_READERS,
    ANNOTATION_SEEK_TO,
    MIRROR_CLASSES,
)

__all__ = [
    "COPY_REFUSALS",
    "copy_document",
    "copy_problem",
    "copy_read_needed",
    "offsets_readers",
    "pin_action",
    "pinned_copy",
    "pinned_document",
    "source_refusal",
    "typed_problems",
]

#: Reasons a copy is refused for (conditions, lastOffsetsOperation.reason, the plugin's exit 1).
COPY_REFUSALS = (
    "SourceConnectorNotFound",
    "SourceConnectorNotAllowed",
    "NothingToCopy",
    "PinnedCopyMissing",
    "UntranslatablePartitions",
)

#: A document without entries, as ``validated_compact_json`` writes it.
EMPTY_DOCUMENT = '{"offsets":[]}'

#: The readers annotation is the owner's; its length is bounded before it is split (hostile input).
MAX_READERS_TEXT = 4096


def offsets_readers(annotations: dict[str, str]) -> frozenset[str]:
    """The namespaces a resource's owner lets copy its connectors' offsets (``offsets-readers``);
    entries that are not namespace names are ignored (they could never match one)."""
    raw = annotations.get(ANNOTATION_OFFSETS_READERS, "")[:MAX_READERS_TEXT]
    return frozenset(n for n in (e.strip() for e in raw.split(",")) if len(n) <= 63 and re.fullmatch(NAMESPACE_NAME, n))


def source_refusal(
    description: str, owner: str | None, namespace: str, readers: frozenset[str] | None
) -> PlannedRefusal | None:
    """May a resource of ``namespace`` copy the offsets of the connector ``description`` names?

    The rule: it owns the connector (its owner key names a resource of ``namespace``), or the
    owning resource lists ``namespace`` in its annotation connect-offsets.io/offsets-readers
    (``readers``; None: that resource could not be read). Connectors no resource of this operator
    created are never copied: nobody here could have said who may read them.
    """
    rule = (
        f"only connectors created by a resource of namespace {namespace}, or whose resource lists it in its "
        f"annotation {ANNOTATION_OFFSETS_READERS}, are copied; nothing was read"
    )
    if not owner:
        return PlannedRefusal(
            "SourceConnectorNotAllowed", f"{description} was not created by a resource of this operator: {rule}"
        )
    owner_namespace = owner.partition("/")[0]
    if owner_namespace == namespace:
        return None
    if readers is None:
        return PlannedRefusal(
            "SourceConnectorNotAllowed",
            f"{description} is managed by {owner}, which could not be read to see whom it allows: {rule}",
        )
    if namespace in readers:
        return None
    return PlannedRefusal(
        "SourceConnectorNotAllowed",
        f"{description} is managed by {owner} (namespace {owner_namespace}), which does not list namespace "
        f"{namespace} in its annotation {ANNOTATION_OFFSETS_READERS}: {rule}",
    )


def pinned_copy(target: ConnectorTarget) -> str | None:
    """The ConfigMap holding this request's pinned copy, if its first attempt made one (a staged
    change keeps it in its pending record, a direct one in ``offsetsProgress`` with the request's key)."""
    if target.pending is not None:
        return target.pending.pinned
    progress = target.chunk_progress
    if progress is not None and progress.pinned and progress.request_key == request_key(target):
        return progress.pinned
    return None


def copy_problem(target: ConnectorTarget) -> PlannedRefusal | None:
    """A copy that cannot be asked as written (nothing is read then)."""
    if not target.accepts_copies:
        return PlannedRefusal(
            "InvalidAnnotation", f"{ANNOTATION_ALTER_FROM_CONNECTOR} applies to KafkaConnectors only; nothing was done"
        )
    if target.seek_to() is not None:
        return PlannedRefusal(
            "InvalidAnnotation",
            f"{ANNOTATION_ALTER_FROM_CONNECTOR} names where the offsets come from, and so does {ANNOTATION_SEEK_TO} "
            f"(or {target.spec_path}.alterOffsets.toTimestamp); use one of them; nothing was done",
        )
    return None


def copy_read_needed(target: ConnectorTarget) -> bool:
    """Whether a pass must read an alter-from-connector request's source now: a copy not pinned yet
    that is not refused as written and did not already fail for these annotations (a copy's
    fingerprint leaves the pinned copy out, so a failed copy waits for the request to change)."""
    if not target.copies() or copy_problem(target) is not None or pinned_copy(target) is not None:
        return False
    last = target.last_offsets_operation
    return not (last is not None and last.result == "Failed" and last.request == target_fingerprint(target, None))


def _typed(target: ConnectorTarget, observed: Observed, text: str) -> str:
    is_sink = observed.status.type == "sink" if observed.status and observed.status.type else None
    return validated_compact_json(text, target.class_name, target_config(target), is_sink=is_sink)


def typed_problems(target: ConnectorTarget, observed: Observed, text: str) -> tuple[str, ...]:
    """What this connector's typed checks find in ``text`` (one line each; empty: all of it fits)."""
    try:
        _typed(target, observed, text)
    except OffsetsValidationError as error:
        return tuple(str(error).splitlines())
    return ()


def copy_document(target: ConnectorTarget, observed: Observed, *, dry_run: bool) -> str | PlannedRefusal:
    """The document an alter-from-connector request applies, checked for this connector: its pinned
    copy once there is one, else the source as read now. A dry run previews the source whatever it
    holds (what will not match is listed in its report: ``typed_problems``)."""
    problem = copy_problem(target)
    if problem is not None:
        return problem
    pinned = pinned_copy(target)
    if pinned is not None:
        text = configmap_text(observed.pinned_copy, pinned, target.configmap_key)
        if isinstance(text, PlannedRefusal):
            return PlannedRefusal(
                "PinnedCopyMissing",
                f"the copy pinned at this request's first attempt is unreadable ({text.message}); it is not read "
                "again from the source (a newer position): ask again with a new request",
            )
        try:
            return _typed(target, observed, text)
        except OffsetsValidationError as error:
            return PlannedRefusal("InvalidOffsets", f"the pinned copy in ConfigMap {pinned} is invalid:\n{error}")
    source = observed.copy_source
    if source is None:
        return PlannedRefusal("SourceUnavailable", "the source connector was not read; trying again")
    if source.reason is not None or source.document_json is None:
        return PlannedRefusal(source.reason or "SourceUnavailable", source.message or f"{source.description}: unread")
    try:
        generic = validated_compact_json(source.document_json, allow_empty=True)
    except OffsetsValidationError as error:
        return PlannedRefusal("InvalidOffsets", f"the offsets of {source.description} are not a document:\n{error}")
    if generic == EMPTY_DOCUMENT:
        return PlannedRefusal("NothingToCopy", f"{source.description} has no offsets; nothing to copy")
    if dry_run:
        return generic
    try:
        return _typed(target, observed, generic)
    except OffsetsValidationError as error:
        return PlannedRefusal(
            "InvalidOffsets", f"the offsets of {source.description} do not fit this connector:\n{error}"
        )


def pinned_document(target: ConnectorTarget, observed: Observed, pinned: str) -> str | PlannedRefusal:
    """The document a staged alter pinned when it began (its pending record names the pin): a copy's
    source as read then, or its ConfigMap's document as it was then (issue 44), checked for this
    connector again. Never read again from the source: an edit of the ConfigMap made since is a
    request of its own, applied (applyOnChange) or asked for after this one."""
    text = configmap_text(observed.pinned_copy, pinned, target.configmap_key)
    if isinstance(text, PlannedRefusal):
        return PlannedRefusal(
            "PinnedCopyMissing",
            f"the document pinned when this request began is unreadable ({text.message}); it is not read again "
            "from its source (which may have changed since): ask again with a new request",
        )
    is_sink = observed.status.type == "sink" if observed.status and observed.status.type else None
    try:  # checked as when it was read (a MirrorSourceConnector's replayFrom is in stored terms by now)
        return validated_compact_json(
            text,
            target.class_name,
            target_config(target),
            is_sink=is_sink,
            translate_replay=target.class_name == MIRROR_CLASSES["MirrorSourceConnector"],
        )
    except OffsetsValidationError as error:
        return PlannedRefusal(
            "InvalidOffsets", f"the document pinned in ConfigMap {pinned} when this request began is invalid:\n{error}"
        )


def pin_action(observed: Observed, document: str, key: str | None) -> Action:
    """Keep the source's document for request ``key`` before anything else happens (``pin_offsets``)."""
    source = observed.copy_source
    return Action("pin_offsets", offsets_json=document, source=source.description if source else None, request=key)
