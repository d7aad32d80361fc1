"""One request as the user asked for it, checked locally with the operator's own models and planner.

Everything here is pure: it decides from a resource body what the operator would act on, and
raises ``PluginError`` (exit 2) for anything that can be refused before writing to the cluster.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from connect_offsets.models.crds import ConnectorState, KafkaConnectorResource, KafkaMirrorMaker2Resource
from connect_offsets.offsets import OffsetsValidationError, parse_for_connector
from connect_offsets.planning import ConnectorTarget, mirror_targets, target_for_connector
from connect_offsets.planning.targets import MAX_NAME_LENGTH
from connect_offsets.tools.kubectl.common import EXIT_USAGE, Kind, PluginError, Refused
from connect_offsets.vocabulary import (
    ANNOTATION_ALTER_FROM_CLUSTER,
    ANNOTATION_ALTER_FROM_CONNECTOR,
    ANNOTATION_DRY_RUN,
    ANNOTATION_DRY_RUN_FROM,
    ANNOTATION_MM2_CONNECTOR,
    ANNOTATION_OFFSETS,
    ANNOTATION_REQUEST_ID,
    ANNOTATION_RESET_OFFSET_SYNCS,
    ANNOTATION_RESTORE_FROM,
    ANNOTATION_STOP_CONNECTOR,
    MIRROR_CLASSES,
    OFFSETS_OPERATIONS,
    REQUEST_ANNOTATIONS,
    short_hash,
)

# --- the request -------------------------------------------------------------------------

#: Every annotation that belongs to a pending offsets request, in the order a cancel hint names them.
PENDING_REQUEST_ANNOTATIONS = (
    ANNOTATION_OFFSETS,
    *REQUEST_ANNOTATIONS,
    ANNOTATION_RESTORE_FROM,
    ANNOTATION_MM2_CONNECTOR,
    ANNOTATION_RESET_OFFSET_SYNCS,
)


@dataclass(frozen=True)
class Request:
    """What the user asked for, for one resource."""

    operation: str  # list | alter | reset | restore
    request_id: str
    mirror_connector: str | None = None
    dry_run: bool = False
    stop_connector: bool = False
    from_backup: str | None = None
    offsets_text: str | None = None  # alter --from-file: the file's text
    offsets_source: str = ""  # where offsets_text came from, for messages
    reset_offset_syncs: bool = False
    #: alter --from-file --dry-run: the plugin's own ConfigMap holding the file (``dry-run-from``)
    dry_run_from: str | None = None
    #: copy into an existing connector: the connector copied from, and its ConnectCluster when not the target's
    copy_from: str | None = None
    copy_cluster: str | None = None

    def annotations(self) -> dict[str, str]:
        """The annotations that make up this request (all removed again when it fails)."""
        values = {ANNOTATION_OFFSETS: self.operation, ANNOTATION_REQUEST_ID: self.request_id}
        if self.mirror_connector is not None:
            values[ANNOTATION_MM2_CONNECTOR] = self.mirror_connector
        if self.dry_run:
            values[ANNOTATION_DRY_RUN] = "true"
        if self.stop_connector:
            values[ANNOTATION_STOP_CONNECTOR] = "true"
        if self.from_backup is not None:
            values[ANNOTATION_RESTORE_FROM] = self.from_backup
        if self.reset_offset_syncs:
            values[ANNOTATION_RESET_OFFSET_SYNCS] = "true"
        if self.dry_run_from is not None:
            values[ANNOTATION_DRY_RUN_FROM] = self.dry_run_from
        if self.copy_from is not None:
            values[ANNOTATION_ALTER_FROM_CONNECTOR] = self.copy_from
        if self.copy_cluster is not None:
            values[ANNOTATION_ALTER_FROM_CLUSTER] = self.copy_cluster
        return values

    @property
    def previews_a_file(self) -> bool:
        """``alter --from-file F --dry-run``: F goes to the plugin's own ConfigMap, never to the
        alterOffsets ConfigMap a real alter reads (a preview must not replace the user's document)."""
        return self.operation == "alter" and self.dry_run and (self.offsets_text, self.dry_run_from) != (None, None)


#: Suffix of the ConfigMap a plugin dry run keeps its document in (``dry_run_input_name``).
DRY_RUN_INPUT_SUFFIX = "-dry-run-input"


def dry_run_input_name(resource: str) -> str:
    """``<resource>-dry-run-input``: one per resource (one request is pending at a time), owned by
    it, so deleting the resource deletes it. A name too long for that keeps a prefix and a hash."""
    name = resource + DRY_RUN_INPUT_SUFFIX
    if len(name) <= MAX_NAME_LENGTH:
        return name
    keep = MAX_NAME_LENGTH - len(DRY_RUN_INPUT_SUFFIX) - 9
    return f"{resource[:keep].rstrip('-.')}-{short_hash(resource, 8)}{DRY_RUN_INPUT_SUFFIX}"


def new_request_id() -> str:
    return f"kubectl-{datetime.now(UTC).strftime('%Y%m%dt%H%M%S')}-{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class Resolved:
    """One resource and the connector of it the request is about."""

    kind: Kind
    body: dict[str, Any]
    target: ConnectorTarget
    is_sink: bool | None
    #: The connector's state in Connect as the operator last recorded it (status.connectorStatus;
    #: MirrorMaker 2: its status.connectors[] entry), None when status does not say.
    connect_state: str | None = None

    @property
    def namespace(self) -> str:
        return str(self.body["metadata"]["namespace"])

    @property
    def name(self) -> str:
        return str(self.body["metadata"]["name"])

    @property
    def display(self) -> str:
        return f"{self.kind.kind} {self.namespace}/{self.name}" + (
            f" (connector {self.target.name})" if self.kind.is_mirror else ""
        )


def _parse_body(kind: Kind, body: dict[str, Any]) -> KafkaConnectorResource | KafkaMirrorMaker2Resource:
    model = KafkaMirrorMaker2Resource if kind.is_mirror else KafkaConnectorResource
    try:
        return model.model_validate(body)
    except ValidationError as error:
        meta = body.get("metadata", {})
        raise PluginError(
            f"{kind.kind} {meta.get('namespace')}/{meta.get('name')} is not valid: {error.errors()[0]['msg']}",
            EXIT_USAGE,
            str(error),
        ) from error


def resolve(kind: Kind, body: dict[str, Any], mirror_connector: str | None) -> Resolved:
    """The connector target the operator will act on, built by the operator's own planner code."""
    resource = _parse_body(kind, body)
    if isinstance(resource, KafkaConnectorResource):
        if mirror_connector is not None:
            raise PluginError("--mirrormaker-connector only applies to KafkaMirrorMaker2 resources", EXIT_USAGE)
        connector_status = resource.status.connector_status or {}
        return Resolved(
            kind, body, target_for_connector(resource), _sink_type(connector_status), _connect_state(connector_status)
        )
    targets = mirror_targets(resource, {}).targets  # secret values play no part in validation
    names = [t.name for t in targets]
    if mirror_connector is None:
        raise PluginError(
            f"{kind.kind} {resource.metadata.namespace}/{resource.metadata.name} runs several connectors: "
            f"add --mirrormaker-connector with one of: {', '.join(names) or '(none declared)'}",
            EXIT_USAGE,
        )
    target = next((t for t in targets if t.name == mirror_connector), None)
    if target is None:
        raise PluginError(
            f"--mirrormaker-connector {mirror_connector!r} is not a connector of {kind.kind} "
            f"{resource.metadata.namespace}/{resource.metadata.name}; valid: {', '.join(names) or '(none declared)'}",
            EXIT_USAGE,
        )
    entry = next((c for c in resource.status.connectors if c.name == target.name), None)
    status = (entry.connector_status or {}) if entry else {}
    return Resolved(kind, body, target, _sink_type(status) if entry else None, _connect_state(status))


def _sink_type(connector_status: dict[str, Any]) -> bool | None:
    kind = connector_status.get("type")
    return kind == "sink" if isinstance(kind, str) and kind else None


def _connect_state(connector_status: dict[str, Any]) -> str | None:
    connector = connector_status.get("connector")
    state = connector.get("state") if isinstance(connector, dict) else None
    return state if isinstance(state, str) and state else None


def _spec_hint(resolved: Resolved, block: str, configmap: str) -> str:
    path = resolved.target.spec_path
    inner = "toConfigMap" if block == "listOffsets" else "fromConfigMap"
    where = f"{path}.{block}" if path != "spec" else f"spec.{block}"
    return (
        f"{resolved.display} has no {where}; add it, e.g. "
        f"kubectl patch {resolved.kind.kubectl_type} {resolved.name} -n {resolved.namespace} --type merge "
        f'-p \'{{"spec":{{"{block}":{{"{inner}":{{"name":"{configmap}"}}}}}}}}\''
        if path == "spec"
        else f"{resolved.display} has no {where}; add {block}: {{{inner}: {{name: {configmap}}}}} under {path}"
    )


def existing_request(kind: Kind, body: dict[str, Any]) -> tuple[str, str] | None:
    """What the resource's own ``connector-offsets`` annotation is, if it has one: ``("invalid", why)``
    (a value the operator does not know, or one it marked InvalidAnnotation), ``("refused", why)``
    (the operator answered it with Failed and keeps it, retrying only when its inputs change),
    ``("handled", why)`` (its request id was already handled: the operator ignores it), or
    ``("pending", "")`` (the operator has not answered it yet)."""
    annotations = body["metadata"].get("annotations") or {}
    value = annotations.get(ANNOTATION_OFFSETS)
    if value is None:
        return None
    if value not in OFFSETS_OPERATIONS:
        return "invalid", f"not one of {', '.join(OFFSETS_OPERATIONS)}, so the operator does nothing with it"
    request_id = annotations.get(ANNOTATION_REQUEST_ID)
    status = body.get("status") or {}
    if kind.is_mirror:
        named = annotations.get(ANNOTATION_MM2_CONNECTOR)
        entry = next((e for e in status.get("connectors") or [] if isinstance(e, dict) and e.get("name") == named), {})
        record = entry.get("lastOffsetsOperation")
    else:
        record = status.get("lastOffsetsOperation")
    handled = status.get("handledRequestIds") or []  # MirrorMaker 2: the resource's, for all its connectors
    dry_run = annotations.get(ANNOTATION_DRY_RUN) == "true"
    if request_id is not None and (f"{request_id}/dry-run" if dry_run else request_id) in handled:
        return "handled", f"request id {request_id} was already handled, so the operator ignores it"
    if not isinstance(record, dict) or record.get("operation") != value or record.get("result") != "Failed":
        return "pending", ""
    ids = {record.get(key) for key in ("requestId", "requestID")} - {None}
    if request_id is not None and ids and request_id not in ids:
        return "pending", ""  # the failure is an earlier request's: this one is not answered yet
    why = f"{record.get('reason') or 'Failed'}: {' '.join(str(record.get('message') or '').split())}"
    if record.get("reason") == "InvalidAnnotation":
        return "invalid", why
    return "refused", why


def existing_request_text(key: str, value: str, state: str, why: str) -> str:
    """How a request annotation already on a resource is named in an error, by what it is; the
    caller adds how to remove it."""
    return {
        "pending": f"already has a pending request {key}={value}; wait for it, or cancel it with",
        "refused": f"has a refused request {key}={value} ({why}); the operator keeps it and tries again only when "
        "the resource or its inputs change. Remove it to make a new request",
        "invalid": f"has an invalid request annotation {key}={value!r} ({why}). Remove it to make a new request",
        "handled": f"has a finished request {key}={value} still annotated ({why}). Remove it to make a new request",
    }[state]


def check_request(resolved: Resolved, request: Request) -> None:
    """Everything that can be checked before writing anything; raises PluginError (exit 2), or
    Refused (exit 1, the operator's reason) for a connector the operator would refuse to change."""
    target = resolved.target
    annotations = resolved.body["metadata"].get("annotations") or {}
    existing = existing_request(resolved.kind, resolved.body)
    if existing is not None:
        # Cancelling removes the whole request: a request-id (or dry-run, ...) left behind would
        # join the next request someone makes by hand.
        removals = " ".join(f"{key}-" for key in PENDING_REQUEST_ANNOTATIONS if key in annotations)
        remove = f"kubectl annotate {resolved.kind.kubectl_type} {resolved.name} -n {resolved.namespace} {removals}"
        text = existing_request_text(ANNOTATION_OFFSETS, annotations[ANNOTATION_OFFSETS], *existing)
        raise PluginError(f"{resolved.display} {text}: {remove}", EXIT_USAGE)
    suggested = f"{resolved.name}-offsets"
    if request.operation == "list" and target.list_configmap is None:
        raise PluginError(
            f"{_spec_hint(resolved, 'listOffsets', suggested)} (list writes the offsets there)", EXIT_USAGE
        )
    if request.operation == "list" and (request.dry_run or request.stop_connector):
        raise PluginError("list changes nothing: --dry-run and --stop-connector do not apply", EXIT_USAGE)
    copies = request.copy_from is not None
    if request.operation == "alter" and target.alter_configmap is None and not request.previews_a_file and not copies:
        raise PluginError(
            f"{_spec_hint(resolved, 'alterOffsets', suggested)} (alter reads the offsets from there)", EXIT_USAGE
        )
    if request.reset_offset_syncs and not target.name.endswith(".MirrorSourceConnector"):
        raise PluginError("--reset-offset-syncs only applies to a MirrorSourceConnector", EXIT_USAGE)
    if request.offsets_text is not None:
        validate_offsets(resolved, request.offsets_text, request.offsets_source)
    check_stopped(resolved, request)


#: The operations that change a connector's offsets: Connect takes them only from a STOPPED connector.
CHANGES = ("alter", "reset", "restore")


def check_stopped(resolved: Resolved, request: Request) -> None:
    """Refuse (``ConnectorNotStopped``, before anything is written) what the operator would refuse: a
    change of a connector status shows not STOPPED, when nobody stops it first - no --stop-connector,
    no ``offsetsPolicy.stopConnector``, and ``spec.state`` is not ``stopped`` (with it, the operator
    waits for the stop). A preview (--dry-run) only reads, so any state will do; a status that does
    not say leaves the decision to the operator."""
    target = resolved.target
    state = resolved.connect_state
    if (
        request.operation not in CHANGES
        or request.dry_run
        or request.stop_connector
        or target.stop_policy
        or target.state is ConnectorState.STOPPED
        or state is None
        or state == "STOPPED"
    ):
        return
    where = "spec" if target.spec_path == "spec" else target.spec_path
    raise Refused(
        f"{resolved.display} is {state} (its status, as the operator last saw it in Connect) and {request.operation} "
        f"needs it STOPPED; nothing was changed",
        "ConnectorNotStopped",
        "add --stop-connector to let the operator stop the connector, do this, and resume it; or set "
        f"{where}.state: stopped and wait for Ready=True (ConnectorStopped)",
    )


def validate_offsets(resolved: Resolved, text: str, source: str) -> None:
    """The operator's own checks (generic and per connector family, in one pass), before anything
    is written. Every problem is printed (up to ``MAX_LISTED_PROBLEMS``, the rest counted), each
    with its path, as the operator's condition would list them."""
    target = resolved.target
    try:
        parse_for_connector(
            text,
            target.class_name,
            {**target.config},
            is_sink=resolved.is_sink,
            translate_replay=target.class_name == MIRROR_CLASSES["MirrorSourceConnector"],
        )
    except OffsetsValidationError as error:
        raise PluginError(invalid_offsets_message(source, resolved.display, error), EXIT_USAGE) from error


def invalid_offsets_message(source: str, display: str, error: OffsetsValidationError) -> str:
    """One line for one problem; otherwise a line with the count, then the problems, indented."""
    if error.count <= 1:
        return f"{source} is not valid for {display}: {error}; nothing was changed"
    lines = "\n".join(f"  {line}" for line in str(error).splitlines())
    return f"{source} is not valid for {display} ({error.count} problems); nothing was changed:\n{lines}"


@dataclass
class Options:
    """Parsed and checked command-line options, shared by every resource of one run."""

    operation: str
    kind: Kind
    names: list[str]
    namespace: str | None  # None: all namespaces (-A with -l)
    selector: str | None
    mirror_connector: str | None
    wait: bool
    timeout: float
    output: str
    verbose: bool
    dry_run: bool = False
    stop_connector: bool = False
    from_backup: str | None = None
    offsets_text: str | None = None
    offsets_source: str = ""
    reset_offset_syncs: bool = False
    copy_from: str | None = None  # copy: the connector copied from
    copy_cluster: str | None = None  # copy: its ConnectCluster when not the target's
    all_namespaces: bool = False  # -A with -l
    progress: bool = False  # progress lines on stderr while waiting
    request_timeout: float = 0.0  # --request-timeout (the wait's watch uses it to connect)
    #: --dry-run=client (nothing is written) or =server (each write sent with dryRun=All); "none"
    #: otherwise. The operator's preview (bare --dry-run, --dry-run=operator) is ``dry_run``.
    dry_run_strategy: str = "none"

    def request(self) -> Request:
        return Request(
            operation=self.operation,
            request_id=new_request_id(),
            mirror_connector=self.mirror_connector,
            dry_run=self.dry_run,
            stop_connector=self.stop_connector,
            from_backup=self.from_backup,
            offsets_text=self.offsets_text,
            offsets_source=self.offsets_source,
            reset_offset_syncs=self.reset_offset_syncs,
            copy_from=self.copy_from,
            copy_cluster=self.copy_cluster,
        )


def without_offsets_text(request: Request) -> Request:
    """The request without its offsets text (already validated once; re-checks skip it)."""
    return replace(request, offsets_text=None, offsets_source="")
