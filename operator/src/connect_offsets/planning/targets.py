"""One connector to plan for (``ConnectorTarget``), built from a KafkaConnector or one MirrorMaker 2
connector, with the fingerprints that make an offsets request level-based yet never repeated.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from connect_offsets.models.crds import (
    DNS1123_SUBDOMAIN,
    AppliedOffsetsStatus,
    AutoRestartSpec,
    AutoRestartStatus,
    ConnectorState,
    FromConnectorSpec,
    FromMirrorSpec,
    InitialOffsetsStatus,
    KafkaConnectorResource,
    OffsetsOperationStatus,
    OffsetsProgressStatus,
    PendingOffsetsOperation,
)
from connect_offsets.planning.plan import TASK_ID, OffsetsConfigMap
from connect_offsets.vocabulary import (
    ANNOTATION_ALTER_FROM_CLUSTER,
    ANNOTATION_ALTER_FROM_CONNECTOR,
    ANNOTATION_DRY_RUN,
    ANNOTATION_DRY_RUN_FROM,
    ANNOTATION_HANDLED_REQUEST,
    ANNOTATION_OFFSETS,
    ANNOTATION_RESTORE_FROM,
    ANNOTATION_SEEK_TO,
    OFFSETS_KEY,
    OWNER_CONFIG_KEY,
    REQUEST_ANNOTATIONS,
    short_hash,
)

#: The longest object name the API server accepts (a DNS-1123 subdomain).
MAX_NAME_LENGTH = 253


@dataclass(frozen=True)
class ConnectorTarget:
    """One connector as the planner sees it, whichever resource declares it.

    A KafkaConnector declares one; a KafkaMirrorMaker2 declares up to three per mirror. The
    resource-specific parts (naming, which annotations apply, where ConfigMaps live) are resolved
    by the builders, so the decisions below are shared.
    """

    name: str  # the connector name in Connect
    owner: str  # "<namespace>/<resource>", written into the connector config
    class_name: str
    config: dict[str, str]  # desired config without the owner key
    state: ConnectorState
    generation: int
    annotations: dict[str, str]  # the annotations that apply to this connector
    auto_restart: AutoRestartSpec | None = None
    auto_restart_status: AutoRestartStatus = field(default_factory=AutoRestartStatus)
    last_offsets_operation: OffsetsOperationStatus | None = None
    list_configmap: str | None = None
    alter_configmap: str | None = None
    configmap_key: str = OFFSETS_KEY
    #: Extra annotations removed together with the offsets annotation (MM2's connector selector).
    companion_annotations: tuple[tuple[str, str], ...] = ()
    spec_path: str = "spec"  # where this connector's block lives, for messages
    stop_policy: bool = False  # spec.offsetsPolicy.stopConnector
    pending: PendingOffsetsOperation | None = None
    handled_request_ids: tuple[str, ...] = ()
    apply_on_change: bool = False  # spec.alterOffsets.applyOnChange
    applied_offsets: AppliedOffsetsStatus | None = None
    initial_configmap: str | None = None  # spec.initialOffsets.fromConfigMap.name
    initial_status: InitialOffsetsStatus | None = None
    to_timestamp: str | None = None  # spec.alterOffsets.toTimestamp
    chunk_progress: OffsetsProgressStatus | None = None  # status.offsetsProgress of an unfinished change
    #: The resourceVersion of the body planned from: a terminal record written this pass is this
    #: handling's ``instance``.
    resource_version: str = ""
    #: The resource's connect-offsets.io/handled-request annotation: the instance of the last request
    #: whose annotations the operator removed.
    handled_marker: str | None = None
    #: The keys the resource's own ``config`` wrote (a KafkaConnector's ``spec.config``, a mirror
    #: connector's ``config``): the ones the connector config policy may refuse as reserved.
    tenant_keys: frozenset[str] = frozenset()
    #: Config keys whose values come from Secrets (MirrorMaker 2 ``secretConfig``): (key, prefix of
    #: the Kafka client settings it belongs to, Secret name).
    secret_keys: tuple[tuple[str, str, str], ...] = ()
    #: spec.initialOffsets.fromConnector / fromMirror: read once, pinned, then applied as a ConfigMap's
    #: (``initial_configmap`` is the pinned copy once status says it was pinned for this source).
    initial_source: FromConnectorSpec | FromMirrorSpec | None = None
    #: Whether an alter may copy another connector's offsets (alter-from-connector): KafkaConnectors only.
    accepts_copies: bool = False

    def copy_from(self) -> tuple[str, str | None] | None:
        """(connector name, its ConnectCluster as written or None) of an alter-from-connector request."""
        name = self.annotations.get(ANNOTATION_ALTER_FROM_CONNECTOR)
        return None if name is None else (name, self.annotations.get(ANNOTATION_ALTER_FROM_CLUSTER))

    def copies(self) -> bool:
        """Whether this target's alter applies a copy: a staged one pinned its source (the pending
        record says which copy; since issue 44 a staged alter from its ConfigMap pins that document
        too, and either is read from its pin alike, ``copies.pinned_document``);
        otherwise the request's annotations say so."""
        if self.pending is not None:
            return self.pending.pinned is not None
        return self.copy_from() is not None

    def seek_to(self) -> str | None:
        """The time an alter seeks to (annotation first), or None for an alter from a ConfigMap."""
        if self.pending is not None:
            return self.pending.seek_to
        return self.annotations.get(ANNOTATION_SEEK_TO, self.to_timestamp)

    def dry_run_source(self) -> str | None:
        """The ConfigMap an alter dry run reads its document from (``dry-run-from``), when this
        target's request is exactly that and names a valid ConfigMap; None: the alter reads
        ``alter_configmap`` as usual (``dry_run_from_problem`` says why a misuse is refused)."""
        annotations = self.annotations
        name = annotations.get(ANNOTATION_DRY_RUN_FROM)
        if name is None or self.pending is not None or dry_run_from_problem(self) is not None:
            return None
        return name


def dry_run_from_problem(target: ConnectorTarget) -> str | None:
    """Why ``dry-run-from`` cannot be used as given (the request is refused, nothing is read), or None.

    It names a document for an alter dry run only: next to a real alter it would be ignored, and
    the user would get a real change of a document they only meant to preview.
    """
    annotations = target.annotations
    name = annotations.get(ANNOTATION_DRY_RUN_FROM)
    if name is None:
        return None
    if annotations.get(ANNOTATION_OFFSETS) != "alter" or annotations.get(ANNOTATION_DRY_RUN) != "true":
        return (
            f"{ANNOTATION_DRY_RUN_FROM}={name!r} only applies to an alter dry run ({ANNOTATION_OFFSETS}=alter "
            f"with {ANNOTATION_DRY_RUN}=true); nothing was done"
        )
    # Length first: the pattern's backtracking is bounded by the 253 characters it may see.
    if len(name) > MAX_NAME_LENGTH or not re.fullmatch(DNS1123_SUBDOMAIN, name):
        return (
            f"{ANNOTATION_DRY_RUN_FROM}={name[:80]!r} is not a ConfigMap name (a DNS-1123 subdomain); nothing was done"
        )
    if target.seek_to() is not None:
        return (
            f"{ANNOTATION_DRY_RUN_FROM} names a document, but this alter seeks to a time ({ANNOTATION_SEEK_TO} or "
            f"{target.spec_path}.alterOffsets.toTimestamp); use one of them; nothing was done"
        )
    return None


def initial_source_text(source: FromConnectorSpec | FromMirrorSpec) -> str:
    """What spec.initialOffsets copies from, in words (recorded as status.initialOffsets.source: a
    pinned copy is used only while the spec still names what it was read from)."""
    if isinstance(source, FromConnectorSpec):
        ref = source.cluster_ref
        where = "" if ref is None else f" on ConnectCluster {ref.namespace + '/' if ref.namespace else ''}{ref.name}"
        return f"connector {source.name}{where}"
    group = f"group {source.group}" if source.group else f"the group of connector {source.source_connector}"
    via = f" (source cluster {source.source_cluster})" if source.source_cluster else ""
    return f"{group} through the checkpoints of KafkaMirrorMaker2 {source.mirror}{via}"


def _initial(resource: KafkaConnectorResource) -> tuple[str | None, FromConnectorSpec | FromMirrorSpec | None]:
    """(the ConfigMap initial offsets are read from, the source to copy them from)."""
    initial = resource.spec.initial_offsets
    if initial is None:
        return None, None
    if initial.from_config_map is not None:
        return initial.from_config_map.name, None
    source = initial.from_connector or initial.from_mirror
    assert source is not None
    status = resource.status.initial_offsets
    if status is not None and status.step != "Applied" and status.source == initial_source_text(source):
        return status.config_map, source
    return None, source


def target_for_connector(resource: KafkaConnectorResource) -> ConnectorTarget:
    spec = resource.spec
    config = spec.connect_config(resource.connector_name)
    initial_configmap, initial_source = _initial(resource)
    return ConnectorTarget(
        name=resource.connector_name,
        owner=owner_id(resource),
        class_name=spec.class_,
        config=config,
        state=spec.state,
        generation=resource.metadata.generation,
        annotations=resource.metadata.annotations,
        auto_restart=spec.auto_restart,
        auto_restart_status=resource.status.auto_restart or AutoRestartStatus(),
        last_offsets_operation=resource.status.last_offsets_operation,
        list_configmap=spec.list_offsets.to_config_map.name if spec.list_offsets else None,
        alter_configmap=(
            spec.alter_offsets.from_config_map.name
            if spec.alter_offsets and spec.alter_offsets.from_config_map
            else None
        ),
        to_timestamp=spec.alter_offsets.to_timestamp if spec.alter_offsets else None,
        chunk_progress=resource.status.offsets_progress,
        stop_policy=bool(spec.offsets_policy and spec.offsets_policy.stop_connector),
        pending=resource.status.pending_offsets_operation,
        handled_request_ids=tuple(resource.status.handled_request_ids),
        apply_on_change=bool(spec.alter_offsets and spec.alter_offsets.apply_on_change),
        applied_offsets=resource.status.applied_offsets,
        initial_configmap=initial_configmap,
        initial_source=initial_source,
        initial_status=resource.status.initial_offsets,
        resource_version=resource.metadata.resource_version,
        handled_marker=resource.metadata.annotations.get(ANNOTATION_HANDLED_REQUEST),
        tenant_keys=frozenset(spec.config),
        accepts_copies=True,
    )


def target_fingerprint(target: ConnectorTarget, configmap: OffsetsConfigMap | None) -> str:
    value = target.annotations.get(ANNOTATION_OFFSETS, "")
    parts = [target.name, value, str(target.generation), configmap.resource_version if configmap else "-"]
    # Only present annotations take part, so fingerprints of plain requests stay what they were.
    parts += [f"{key}={target.annotations[key]}" for key in REQUEST_ANNOTATIONS if key in target.annotations]
    return short_hash("\x00".join(parts))


def request_key(target: ConnectorTarget) -> str | None:
    """Identity of the annotation request on this target: the annotations that ask for it and
    nothing else (None: no request).

    Why not the fingerprint: the fingerprint also covers the spec's generation and the ConfigMap's
    version, so that a failed request runs again once the user fixes its input. Whether a request
    already finished must not depend on those: a spec edited between the outcome and the removal
    of the annotations would otherwise run the same request twice.
    """
    value = target.annotations.get(ANNOTATION_OFFSETS)
    if value is None:
        return None
    keys = (*REQUEST_ANNOTATIONS, ANNOTATION_RESTORE_FROM)
    parts = [target.name, value]
    parts += [f"{key}={val}" for key, val in sorted(target.companion_annotations)]
    parts += [f"{key}={target.annotations[key]}" for key in keys if key in target.annotations]
    return short_hash("\x00".join(parts))


def handled_before(marker: str | None, instance: str) -> bool:
    """Whether the handled-request marker covers ``instance``: its annotations were removed.

    resourceVersions are opaque by API convention, but etcd issues increasing integers: compared
    as numbers, a marker written for a later request also covers an earlier one (each connector of
    a KafkaMirrorMaker2 has its own record, the resource one marker). Anything else compares equal
    or not.
    """
    if marker is None:
        return False
    if marker.isdigit() and instance.isdigit():
        return int(marker) >= int(instance)
    return marker == instance


def content_hash(text: str) -> str:
    """Identity of an offsets document's content (applyOnChange): re-applying the same text is a no-op."""
    return short_hash(text)


def offsets_request_fingerprint(resource: KafkaConnectorResource, configmap: OffsetsConfigMap | None) -> str:
    return target_fingerprint(target_for_connector(resource), configmap)


def auto_restart_backoff(count: int) -> timedelta:
    """Strimzi's back-off: 0, 2, 6, 12, 20, 30, 42, 56, then 60 minutes."""
    return timedelta(minutes=min(count * count + count, 60))


def parse_status_time(value: str | None) -> datetime | None:
    """Status written by others (or older versions) may hold anything: unparsable means unknown."""
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def parse_task_id(value: str) -> int | None:
    """ASCII digits only: str.isdigit() accepts '²', which int() rejects."""
    value = value.strip()
    return int(value) if TASK_ID.fullmatch(value) else None


def owner_id(resource: KafkaConnectorResource) -> str:
    return f"{resource.metadata.namespace}/{resource.metadata.name}"


def desired_config(resource: KafkaConnectorResource) -> dict[str, str]:
    return target_config(target_for_connector(resource))


def target_config(target: ConnectorTarget) -> dict[str, str]:
    return {**target.config, OWNER_CONFIG_KEY: target.owner}


CONNECT_STATE = {
    ConnectorState.RUNNING: "RUNNING",
    ConnectorState.PAUSED: "PAUSED",
    ConnectorState.STOPPED: "STOPPED",
}
