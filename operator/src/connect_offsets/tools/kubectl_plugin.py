"""``kubectl connect-offsets``: offsets operations as one command that waits for the answer.

Why a plugin: with the operator alone, an offsets change is several steps (write a ConfigMap,
annotate, poll the status, read the ConfigMap back) and a mistake surfaces only in a condition.
The plugin performs exactly those steps — it never talks to Connect and never does anything a user
could not do with ``kubectl`` — but validates the input locally first (with the operator's own
models and planner, so the two can never disagree), waits until the operator has recorded the
result, prints it, and exits with a code scripts can use. ``-l SELECTOR`` runs one operation on
many resources and prints a summary table.

How completion is detected (see ``classify``): the operator writes ``lastOffsetsOperation``
(the resource's, or ``status.connectors[]``'s for MirrorMaker 2) and only *then* removes the
request annotation on success; a failure keeps the annotation and records ``result: Failed`` with
Connect's message. A record counts as this request's answer when it names this request's id, or
(operators without request ids) when it changed since the request was made or carries this
request's fingerprint (``planning.offsets_request_fingerprint``). After a failure the plugin
withdraws the annotations it set, so that nothing runs later by surprise.

Exit codes: 0 success, 1 the operation failed, 2 usage or validation error (nothing was changed),
3 timed out waiting for the operator (the request stays pending), 4 the Kubernetes API could not
be used (kubeconfig, connection, permissions). With ``-l``, the highest code of all resources.

Installed as the console script ``kubectl-connect_offsets``, which kubectl runs for
``kubectl connect-offsets``. Never imports kopf (import-linter contract).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import traceback
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from connect_offsets import (
    __version__,
)
from connect_offsets.clients.kubernetes import KubernetesApi, KubernetesError, label_value
from connect_offsets.errors import ConnectOffsetsError
from connect_offsets.models.crds import KafkaConnectorResource, KafkaMirrorMaker2Resource
from connect_offsets.offsets import (
    OffsetsValidationError,
    parse_offsets_document,
    translate_replay_from,
    validate_for_connector,
)
from connect_offsets.planning import (
    ConnectorTarget,
    OffsetsConfigMap,
    mirror_targets,
    offsets_request_fingerprint,
    target_for_connector,
)
from connect_offsets.vocabulary import (
    ANNOTATION_DRY_RUN,
    ANNOTATION_MM2_CONNECTOR,
    ANNOTATION_OFFSETS,
    ANNOTATION_REQUEST_ID,
    ANNOTATION_RESET_OFFSET_SYNCS,
    ANNOTATION_RESTORE_FROM,
    ANNOTATION_STOP_CONNECTOR,
    API_GROUP,
    API_VERSION,
    CONNECTORS,
    MIRROR_CLASSES,
    MIRRORS,
    dry_run_key,
)

__all__ = [
    "EXIT_FAILED",
    "EXIT_KUBE",
    "EXIT_OK",
    "EXIT_TIMEOUT",
    "EXIT_USAGE",
    "PluginError",
    "Request",
    "RequestOutcome",
    "build_parser",
    "classify",
    "main",
    "parse_duration",
    "render_table",
]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_TIMEOUT = 3
EXIT_KUBE = 4
EXIT_INTERRUPTED = 130


POLL_INTERVAL_S = 0.5
#: With -l, how many resources are worked on at once (each is a few small API calls per poll).
MAX_PARALLEL = 8
PLUGIN = "kubectl connect-offsets"


class PluginError(ConnectOffsetsError):
    """An error for the user: one line of ``message``; ``detail`` is shown with --verbose."""

    def __init__(self, message: str, code: int, detail: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.detail = detail


# --- resource kinds ----------------------------------------------------------------------


@dataclass(frozen=True)
class Kind:
    kind: str
    plural: str
    short: str

    @property
    def is_mirror(self) -> bool:
        return self.kind == "KafkaMirrorMaker2"

    @property
    def kubectl_type(self) -> str:
        """Unambiguous for kubectl even when Strimzi's CRDs are installed too."""
        return f"{self.plural}.{API_GROUP}"


CONNECTOR = Kind("KafkaConnector", CONNECTORS, "cokc")
MIRROR = Kind("KafkaMirrorMaker2", MIRRORS, "comm2")
KIND_NAMES = {
    name: kind
    for kind in (CONNECTOR, MIRROR)
    for name in (kind.kind.lower(), kind.plural, kind.short, kind.kubectl_type, kind.plural[:-1] + f".{API_GROUP}")
}
KIND_NAMES["mm2"] = MIRROR
KIND_NAMES["kmm2"] = MIRROR


def parse_kind(text: str) -> Kind:
    try:
        return KIND_NAMES[text.lower()]
    except KeyError:
        raise PluginError(
            f"unknown resource type {text!r}: use kafkaconnector (cokc) or kafkamirrormaker2 (comm2, mm2)", EXIT_USAGE
        ) from None


def split_name(text: str, kind_option: str | None) -> tuple[Kind, str]:
    """``NAME`` or ``TYPE/NAME`` (``cokc/x``, ``mm2/x``), reconciled with ``--kind``."""
    kind = parse_kind(kind_option) if kind_option else None
    if "/" in text:
        prefix, _, name = text.partition("/")
        named = parse_kind(prefix)
        if kind is not None and kind != named:
            raise PluginError(f"{text!r} names a {named.kind} but --kind says {kind.kind}", EXIT_USAGE)
        kind = named
    else:
        name = text
    if not name:
        raise PluginError(f"{text!r}: the resource name is empty", EXIT_USAGE)
    return kind or CONNECTOR, name


# --- durations ---------------------------------------------------------------------------

_DURATION = re.compile(r"(?:(?P<h>\d+)h)?(?:(?P<m>\d+)m)?(?:(?P<s>\d+(?:\.\d+)?)s?)?")


def parse_duration(text: str) -> float:
    """kubectl-style durations: ``90``, ``90s``, ``2m``, ``1m30s``, ``1h``; at least 1 s."""
    match = _DURATION.fullmatch(text.strip())
    if not text.strip() or match is None or not any(match.groups()):
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration (examples: 90s, 2m, 1m30s)")
    seconds = int(match["h"] or 0) * 3600 + int(match["m"] or 0) * 60 + float(match["s"] or 0)
    if seconds < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: the timeout must be at least 1s")
    return seconds


def _format_duration(seconds: float) -> str:
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes}m{rest}s" if minutes and rest else f"{minutes}m" if minutes else f"{rest}s"


# --- the request -------------------------------------------------------------------------


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
        return values


def new_request_id() -> str:
    return f"kubectl-{datetime.now(UTC).strftime('%Y%m%dt%H%M%S')}-{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class Resolved:
    """One resource and the connector of it the request is about."""

    kind: Kind
    body: dict[str, Any]
    target: ConnectorTarget
    is_sink: bool | None

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
        return Resolved(kind, body, target_for_connector(resource), _sink_type(connector_status))
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
    return Resolved(kind, body, target, _sink_type(entry.connector_status or {}) if entry else None)


def _sink_type(connector_status: dict[str, Any]) -> bool | None:
    kind = connector_status.get("type")
    return kind == "sink" if isinstance(kind, str) and kind else None


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


def check_request(resolved: Resolved, request: Request) -> None:
    """Everything that can be checked before writing anything; raises PluginError (exit 2)."""
    target = resolved.target
    annotations = resolved.body["metadata"].get("annotations") or {}
    pending = annotations.get(ANNOTATION_OFFSETS)
    if pending is not None:
        raise PluginError(
            f"{resolved.display} already has a pending request {ANNOTATION_OFFSETS}={pending}; wait for it, "
            f"or cancel it with: kubectl annotate {resolved.kind.kubectl_type} {resolved.name} -n {resolved.namespace} "
            f"{ANNOTATION_OFFSETS}-",
            EXIT_USAGE,
        )
    suggested = f"{resolved.name}-offsets"
    if request.operation == "list" and target.list_configmap is None:
        raise PluginError(
            f"{_spec_hint(resolved, 'listOffsets', suggested)} (list writes the offsets there)", EXIT_USAGE
        )
    if request.operation == "list" and (request.dry_run or request.stop_connector):
        raise PluginError("list changes nothing: --dry-run and --stop-connector do not apply", EXIT_USAGE)
    if request.operation == "alter" and target.alter_configmap is None:
        raise PluginError(
            f"{_spec_hint(resolved, 'alterOffsets', suggested)} (alter reads the offsets from there)", EXIT_USAGE
        )
    if request.reset_offset_syncs and not target.name.endswith(".MirrorSourceConnector"):
        raise PluginError("--reset-offset-syncs only applies to a MirrorSourceConnector", EXIT_USAGE)
    if request.offsets_text is not None:
        validate_offsets(resolved, request.offsets_text, request.offsets_source)


def validate_offsets(resolved: Resolved, text: str, source: str) -> None:
    """The operator's own checks (generic and per connector family), before anything is written."""
    target = resolved.target
    try:
        document = parse_offsets_document(text)
        if target.class_name == MIRROR_CLASSES["MirrorSourceConnector"]:
            document = translate_replay_from(document)
        config = {**target.config}
        validate_for_connector(document, target.class_name, config, is_sink=resolved.is_sink)
    except OffsetsValidationError as error:
        problems = error.problems
        first = str(problems[0]) if problems else str(error)
        more = f" (and {len(problems) - 1} more problem(s); --verbose lists them)" if len(problems) > 1 else ""
        raise PluginError(
            f"{source} is not valid for {resolved.display}: {first}{more}; nothing was changed",
            EXIT_USAGE,
            str(error),
        ) from error


# --- completion --------------------------------------------------------------------------


@dataclass
class RequestOutcome:
    """How one request ended (or did not)."""

    namespace: str
    name: str
    kind: str
    connector: str
    operation: str
    result: str  # Succeeded | Failed | Invalid | Timeout | Error | Requested
    code: int
    reason: str = ""
    message: str = ""
    backup: str | None = None
    request_id: str = ""
    offsets: Any = None  # list: the listed document
    dry_run: Any = None  # --dry-run: the report
    hint: str = ""
    detail: str = ""
    record: dict[str, Any] = field(default_factory=dict)

    def to_json_obj(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "connector": self.connector,
            "operation": self.operation,
            "result": self.result,
            "reason": self.reason,
            "message": self.message,
            "exitCode": self.code,
        }
        for key, value in (
            ("backup", self.backup),
            ("requestId", self.request_id),
            ("offsets", self.offsets),
            ("dryRun", self.dry_run),
        ):
            if value:
                data[key] = value
        return data


def last_operation(kind: Kind, body: dict[str, Any], connector: str) -> dict[str, Any] | None:
    """The operator's ``lastOffsetsOperation`` for this connector (MM2: its ``status.connectors[]`` entry)."""
    status = body.get("status") or {}
    if kind.is_mirror:
        for entry in status.get("connectors") or []:
            if isinstance(entry, dict) and entry.get("name") == connector:
                record = entry.get("lastOffsetsOperation")
                return record if isinstance(record, dict) else None
        return None
    record = status.get("lastOffsetsOperation")
    return record if isinstance(record, dict) else None


def _parse_time(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Waiting:
    """What ``classify`` compares against: the request and the state before it was made."""

    request: Request
    before: dict[str, Any] | None
    started: datetime  # UTC, whole seconds (the operator records whole seconds)
    fingerprint: str | None = None


def classify(kind: Kind, body: dict[str, Any], connector: str, waiting: Waiting) -> tuple[str, dict[str, Any]] | None:
    """``("Succeeded" | "Failed" | "Withdrawn", record)`` once the operator has answered, else None.

    Succeeded: the annotation is gone (removed only after the status was written) and the record is
    a success of this operation that is new (a different record, this request's id, or written
    since the request). Failed: a Failed record that is this request's answer (its id, a record
    that changed since the request, or this request's fingerprint) — the annotation stays then.
    """
    request = waiting.request
    annotations = (body.get("metadata") or {}).get("annotations") or {}
    pending = annotations.get(ANNOTATION_OFFSETS) == request.operation and (
        request.mirror_connector is None or annotations.get(ANNOTATION_MM2_CONNECTOR) == request.mirror_connector
    )
    record = last_operation(kind, body, connector)
    if record is None or record.get("operation") != request.operation:
        return None if pending else ("Withdrawn", {})
    ids = {record.get(key) for key in ("requestId", "requestID")} - {None}
    if ids:
        ours = request.request_id in ids
        new = ours
    else:
        ours = record != waiting.before or (
            waiting.fingerprint is not None and record.get("request") == waiting.fingerprint
        )
        written = _parse_time(record.get("time"))
        new = ours or (written is not None and written >= waiting.started)
    if pending:
        return ("Failed", record) if ours and record.get("result") == "Failed" else None
    if new and record.get("result") == "Succeeded":
        return "Succeeded", record
    if ours and record.get("result") == "Failed":
        return "Failed", record
    return "Withdrawn", {}


# --- the Kubernetes side -----------------------------------------------------------------


def _is_conflict(error: KubernetesError) -> bool:
    return error.status == 409


def _kube_error(error: KubernetesError) -> PluginError:
    text = str(error)
    hint = ""
    if error.status == 403:
        hint = " (your Kubernetes user lacks a permission: see the README section 'kubectl plugin' for the RBAC rules)"
    elif error.status == 401:
        hint = " (the credentials in your kubeconfig were refused)"
    return PluginError(f"Kubernetes API: {text}{hint}", EXIT_KUBE)


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
        )


class Runner:
    """Runs one request on one resource: check, write, annotate, wait, read the result."""

    def __init__(self, kube: KubernetesApi, options: Options) -> None:
        self.kube = kube
        self.options = options

    async def run(self, kind: Kind, namespace: str, name: str, body: dict[str, Any] | None = None) -> RequestOutcome:
        request = self.options.request()
        base = RequestOutcome(
            namespace, name, kind.kind, self.options.mirror_connector or name, request.operation, "", 0
        )
        base.request_id = request.request_id
        try:
            return await self._run(kind, namespace, name, body, request, base)
        except PluginError as error:
            base.result = "Invalid" if error.code == EXIT_USAGE else "Error"
            base.code, base.message, base.detail = error.code, str(error), error.detail
            return base
        except KubernetesError as error:
            wrapped = _kube_error(error)
            base.result, base.code, base.message = "Error", wrapped.code, str(wrapped)
            return base

    async def _fetch(self, kind: Kind, namespace: str, name: str) -> dict[str, Any]:
        body = await self.kube.get_resource(kind.plural, namespace, name)
        if body is None:
            raise PluginError(
                f"{kind.kind} {namespace}/{name} not found (kubectl get {kind.kubectl_type} -n {namespace})",
                EXIT_USAGE,
            )
        return body

    async def _run(
        self,
        kind: Kind,
        namespace: str,
        name: str,
        body: dict[str, Any] | None,
        request: Request,
        outcome: RequestOutcome,
    ) -> RequestOutcome:
        if body is None:
            body = await self._fetch(kind, namespace, name)
        resolved = resolve(kind, body, request.mirror_connector)
        outcome.connector = resolved.target.name
        if request.operation == "alter" and request.offsets_text is None:
            # alter without --from-file applies the ConfigMap's current content: check that instead.
            request = await self._with_configmap_content(resolved, request)
        check_request(resolved, request)
        if request.operation == "restore" and request.from_backup is not None:
            await self._check_backup(resolved, request.from_backup)
        configmap_rv = ""
        if request.operation == "alter" and request.offsets_source.startswith("file "):
            configmap_rv = await self._write_offsets(resolved, request)
        elif request.operation == "alter":
            current = await self.kube.get_configmap(namespace, str(resolved.target.alter_configmap))
            configmap_rv = current.resource_version if current else ""
        before = last_operation(kind, body, resolved.target.name)
        started = datetime.now(UTC).replace(microsecond=0)
        body = await self._annotate(resolved, request)
        fingerprint = self._fingerprint(kind, body, request, configmap_rv)
        if not self.options.wait:
            outcome.result, outcome.code = "Requested", EXIT_OK
            outcome.message = f"{request.operation} requested (request id {request.request_id}); not waiting"
            return outcome
        waiting = Waiting(request, before, started, fingerprint)
        answer, last_body = await self._wait(resolved, waiting)
        if answer is None:
            return self._timed_out(resolved, last_body, request, outcome)
        result, record = answer
        outcome.record = record
        outcome.reason = str(record.get("reason") or "")
        outcome.message = str(record.get("message") or "")
        outcome.backup = record.get("backup")
        if result == "Succeeded":
            outcome.result, outcome.code = "Succeeded", EXIT_OK
            await self._read_results(resolved, request, outcome)
            return outcome
        outcome.result, outcome.code = "Failed", EXIT_FAILED
        if result == "Withdrawn":
            outcome.reason = "Withdrawn"
            outcome.message = (
                f"the {ANNOTATION_OFFSETS} annotation was removed or replaced by someone else before the operator "
                "recorded a result"
            )
            return outcome
        if outcome.reason == "ConnectorNotStopped" and not request.stop_connector:
            outcome.hint = "add --stop-connector to let the operator stop the connector, do this, and resume it"
        await self._withdraw(resolved, request)
        return outcome

    async def _with_configmap_content(self, resolved: Resolved, request: Request) -> Request:
        name = resolved.target.alter_configmap
        if name is None:
            return request  # check_request explains what to add
        key = resolved.target.configmap_key
        configmap = await self.kube.get_configmap(resolved.namespace, name)
        if configmap is None or key not in configmap.data:
            missing = f"ConfigMap {resolved.namespace}/{name}" + (f" has no key {key}" if configmap else " not found")
            raise PluginError(f"{missing}: pass the offsets with --from-file FILE", EXIT_USAGE)
        validate_offsets(resolved, configmap.data[key], f"ConfigMap {name} key {key}")
        return request

    async def _check_backup(self, resolved: Resolved, backup: str) -> None:
        configmap = await self.kube.get_configmap(resolved.namespace, backup)
        if configmap is None:
            raise PluginError(
                f"backup ConfigMap {resolved.namespace}/{backup} not found; list the backups with: kubectl get "
                f"configmaps -n {resolved.namespace} -l {API_GROUP}/backup-of={label_value(resolved.name)}",
                EXIT_USAGE,
            )

    async def _write_offsets(self, resolved: Resolved, request: Request) -> str:
        assert request.offsets_text is not None and resolved.target.alter_configmap is not None
        meta = resolved.body["metadata"]
        owner = {
            "apiVersion": f"{API_GROUP}/{API_VERSION}",
            "kind": resolved.kind.kind,
            "name": meta["name"],
            "uid": meta["uid"],
            "controller": False,
            "blockOwnerDeletion": False,
        }
        labels = {f"{API_GROUP}/kind": resolved.kind.kind, f"{API_GROUP}/name": label_value(meta["name"])}
        text = request.offsets_text if request.offsets_text.endswith("\n") else request.offsets_text + "\n"
        name = resolved.target.alter_configmap
        await self.kube.write_configmap_key(
            resolved.namespace, name, resolved.target.configmap_key, text, labels=labels, owner=owner
        )
        written = await self.kube.get_configmap(resolved.namespace, name)
        return written.resource_version if written else ""

    async def _annotate(self, resolved: Resolved, request: Request) -> dict[str, Any]:
        """Set the request's annotations, atomically with the check that no other request is pending."""
        body = resolved.body
        for _ in range(5):
            try:
                return await self.kube.patch_annotations_at(
                    resolved.kind.plural,
                    resolved.namespace,
                    resolved.name,
                    dict(request.annotations()),
                    body["metadata"]["resourceVersion"],
                )
            except KubernetesError as error:
                if not _is_conflict(error):
                    raise
            body = await self._fetch(resolved.kind, resolved.namespace, resolved.name)
            check_request(
                Resolved(resolved.kind, body, resolved.target, resolved.is_sink), _without_offsets_text(request)
            )
        raise PluginError(f"{resolved.display} kept changing; try again", EXIT_KUBE)

    def _fingerprint(self, kind: Kind, body: dict[str, Any], request: Request, configmap_rv: str) -> str | None:
        """The operator's fingerprint of this request, where it can be computed without Connect."""
        if kind.is_mirror or request.operation == "restore":
            return None
        try:
            resource = KafkaConnectorResource.model_validate(body)
        except ValidationError:
            return None
        configmap = None
        alter = resource.spec.alter_offsets
        if request.operation == "alter" and alter is not None and alter.from_config_map is not None:
            configmap = OffsetsConfigMap(alter.from_config_map.name, True, configmap_rv)
        return offsets_request_fingerprint(resource, configmap)

    async def _wait(
        self, resolved: Resolved, waiting: Waiting
    ) -> tuple[tuple[str, dict[str, Any]] | None, dict[str, Any]]:
        """Poll until ``classify`` answers or the timeout passes; also returns the last body seen."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.options.timeout
        while True:
            body = await self._fetch(resolved.kind, resolved.namespace, resolved.name)
            answer = classify(resolved.kind, body, resolved.target.name, waiting)
            if answer is not None or loop.time() >= deadline:
                return answer, body
            await asyncio.sleep(POLL_INTERVAL_S)

    def _timed_out(
        self, resolved: Resolved, body: dict[str, Any], request: Request, outcome: RequestOutcome
    ) -> RequestOutcome:
        conditions = {c.get("type"): c for c in (body.get("status") or {}).get("conditions") or []}
        ready = conditions.get("Ready")
        state = f" (Ready={ready.get('status')} {ready.get('reason')}: {ready.get('message')})" if ready else ""
        outcome.result, outcome.code, outcome.reason = "Timeout", EXIT_TIMEOUT, "Timeout"
        outcome.message = (
            f"no result from the operator after {_format_duration(self.options.timeout)}{state}; the request stays "
            f"pending. Is the operator running and watching namespace {resolved.namespace}?"
        )
        outcome.hint = (
            f"cancel it with: kubectl annotate {resolved.kind.kubectl_type} {resolved.name} -n {resolved.namespace} "
            + " ".join(f"{key}-" for key in request.annotations())
        )
        return outcome

    async def _withdraw(self, resolved: Resolved, request: Request) -> None:
        """Remove this request's annotations (only if still ours), so it cannot run later by surprise."""
        for _ in range(5):
            body = await self.kube.get_resource(resolved.kind.plural, resolved.namespace, resolved.name)
            if body is None:
                return
            annotations = body["metadata"].get("annotations") or {}
            mine = request.annotations()
            if annotations.get(ANNOTATION_OFFSETS) != request.operation or annotations.get(
                ANNOTATION_REQUEST_ID, request.request_id
            ) not in (request.request_id,):
                return
            removal: dict[str, str | None] = {key: None for key, value in mine.items() if annotations.get(key) == value}
            try:
                await self.kube.patch_annotations_at(
                    resolved.kind.plural,
                    resolved.namespace,
                    resolved.name,
                    removal,
                    body["metadata"]["resourceVersion"],
                )
                return
            except KubernetesError as error:
                if not _is_conflict(error):
                    raise

    async def _read_results(self, resolved: Resolved, request: Request, outcome: RequestOutcome) -> None:
        target = resolved.target
        if request.operation == "list" or (request.dry_run and target.list_configmap is not None):
            assert target.list_configmap is not None
            configmap = await self.kube.get_configmap(resolved.namespace, target.list_configmap)
            key = dry_run_key(target.configmap_key) if request.dry_run else target.configmap_key
            text = configmap.data.get(key) if configmap else None
            if text is None:
                raise PluginError(
                    f"the operator reported success but ConfigMap {resolved.namespace}/{target.list_configmap} "
                    f"has no key {key}",
                    EXIT_FAILED,
                )
            try:
                parsed = json.loads(text)
            except ValueError:
                parsed = text
            if request.dry_run:
                outcome.dry_run = parsed
            else:
                outcome.offsets = parsed


def _without_offsets_text(request: Request) -> Request:
    """The request without its offsets text (already validated once; re-checks skip it)."""
    return Request(
        operation=request.operation,
        request_id=request.request_id,
        mirror_connector=request.mirror_connector,
        dry_run=request.dry_run,
        stop_connector=request.stop_connector,
        from_backup=request.from_backup,
        reset_offset_syncs=request.reset_offset_syncs,
    )


# --- rendering ---------------------------------------------------------------------------


def render_table(outcomes: Sequence[RequestOutcome], *, with_namespace: bool) -> str:
    """kubectl-style columns (no borders, no wrapping), so the output stays greppable."""
    headers = (["NAMESPACE"] if with_namespace else []) + ["NAME", "CONNECTOR", "OPERATION", "RESULT", "MESSAGE"]
    rows = [
        ([o.namespace] if with_namespace else [])
        + [o.name, o.connector, o.operation, o.result, " ".join((o.message or o.reason).split())]
        for o in outcomes
    ]
    widths = [max(len(row[i]) for row in [headers, *rows]) for i in range(len(headers) - 1)]
    lines = []
    for row in [headers, *rows]:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        lines.append("   ".join([*cells, row[-1]]).rstrip())
    return "\n".join(lines)


def render_single(outcome: RequestOutcome, options: Options) -> tuple[str, str]:
    """(stdout, stderr) for one resource. stdout carries only the result (JSON for list)."""
    if options.output == "json":
        out = json.dumps(outcome.to_json_obj(), indent=2, ensure_ascii=False)
        return out, _error_text(outcome, options) if outcome.code else ""
    if outcome.code != EXIT_OK:
        return "", _error_text(outcome, options)
    if outcome.result == "Requested":
        return f"{outcome.kind} {outcome.namespace}/{outcome.name}: {outcome.message}", ""
    if outcome.offsets is not None:
        return json.dumps(outcome.offsets, indent=2, ensure_ascii=False), ""
    lines = [f"{outcome.kind} {outcome.namespace}/{outcome.name}: {outcome.message or outcome.operation + ' done'}"]
    if outcome.dry_run is not None:
        lines = [json.dumps(outcome.dry_run, indent=2, ensure_ascii=False)]
    if outcome.backup:
        lines.append(
            f"backup of the previous offsets: ConfigMap {outcome.backup} (undo: {PLUGIN} restore {outcome.name} "
            f"-n {outcome.namespace} --from-backup {outcome.backup}"
            + (
                f" --kind kafkamirrormaker2 --mirrormaker-connector {outcome.connector}"
                if outcome.kind == MIRROR.kind
                else ""
            )
            + ")"
        )
    return "\n".join(lines), ""


def _error_text(outcome: RequestOutcome, options: Options) -> str:
    if outcome.result == "Failed":
        where = f"{outcome.kind} {outcome.namespace}/{outcome.name}"
        if outcome.kind == MIRROR.kind:
            where += f" (connector {outcome.connector})"
        text = f"error: {where}: {outcome.operation} failed ({outcome.reason or 'Failed'}): {outcome.message}"
        if outcome.reason != "Withdrawn":
            text += "\nthe request annotations were removed; the failure stays in status.lastOffsetsOperation"
    else:
        text = f"error: {outcome.message}"
    if outcome.hint:
        text += f"\nhint: {outcome.hint}"
    if options.verbose:
        if outcome.detail:
            text += f"\ndetail:\n{outcome.detail}"
        if outcome.record:
            text += f"\nlastOffsetsOperation: {json.dumps(outcome.record, ensure_ascii=False)}"
        if outcome.request_id:
            text += f"\nrequest id: {outcome.request_id}"
    return text


# --- command line ------------------------------------------------------------------------

EXIT_CODES_TEXT = """\
exit codes:
  0  success
  1  the operation failed (the operator's reason and Connect's message are printed)
  2  usage or validation error: nothing was changed
  3  timed out waiting for the operator: the request stays pending
  4  the Kubernetes API could not be used (kubeconfig, connection, permissions)
  with -l: the highest code of all resources
"""

EXAMPLES = {
    "list": """\
examples:
  # print a connector's offsets as JSON (also written to spec.listOffsets.toConfigMap)
  kubectl connect-offsets list my-connector -n kafka > offsets.json
  # a MirrorMaker 2 connector
  kubectl connect-offsets list mm2/east-to-west --mirrormaker-connector 'east->west.MirrorSourceConnector'
  # every connector labelled team=payments, summary table
  kubectl connect-offsets list -l team=payments -n kafka
""",
    "alter": """\
examples:
  # apply offsets from a file (validated locally first; the connector must be STOPPED)
  kubectl connect-offsets alter my-connector -n kafka --from-file offsets.json
  # let the operator stop the connector, alter, and resume it
  kubectl connect-offsets alter my-connector --from-file offsets.json --stop-connector
  # show what would change without changing anything
  kubectl connect-offsets alter my-connector --from-file offsets.json --dry-run
  # apply what is already in spec.alterOffsets.fromConfigMap
  kubectl connect-offsets alter my-connector
""",
    "reset": """\
examples:
  kubectl connect-offsets reset my-connector -n kafka
  kubectl connect-offsets reset my-connector --stop-connector
  # MirrorMaker 2, also clearing the offset-syncs topic
  kubectl connect-offsets reset mm2/east-to-west --mirrormaker-connector 'east->west.MirrorSourceConnector' \\
      --reset-offset-syncs
  # every stopped connector labelled env=staging
  kubectl connect-offsets reset -l env=staging -n kafka
""",
    "restore": """\
examples:
  # put the newest backup back (every alter/reset/restore saves one first)
  kubectl connect-offsets restore my-connector -n kafka
  # a named backup
  kubectl get configmaps -n kafka -l connect-offsets.io/backup-of=my-connector
  kubectl connect-offsets restore my-connector --from-backup my-connector-backup-1a2b3c4d-20261122t005012z-9f3e
""",
}

OVERVIEW_EXAMPLES = """\
examples (each command has more: kubectl connect-offsets COMMAND --help):
  kubectl connect-offsets list my-connector -n kafka > offsets.json
  kubectl connect-offsets alter my-connector -n kafka --from-file offsets.json --stop-connector
  kubectl connect-offsets reset my-connector -n kafka --dry-run
  kubectl connect-offsets restore my-connector -n kafka
  kubectl connect-offsets list mm2/east-to-west --mirrormaker-connector 'east->west.MirrorSourceConnector'
  kubectl connect-offsets reset -l team=payments -n kafka      # many resources, summary table
"""

DESCRIPTIONS = {
    "list": "Write a connector's offsets to its listOffsets ConfigMap and print them as JSON.",
    "alter": "Change a connector's offsets (from a file, or from its alterOffsets ConfigMap).",
    "reset": "Delete all of a connector's offsets.",
    "restore": "Put a backup of a connector's offsets back (the newest, or --from-backup NAME).",
}
DESCRIPTIONS["lag"] = "Show a KafkaMirrorMaker2's replication lag per mirror (status.replicationLag)."
EXAMPLES["lag"] = """\
examples:
  kubectl connect-offsets lag east-to-west -n kafka
  kubectl connect-offsets lag mm2/east-to-west -o json
"""
# `lag` is a read-only view rather than an annotation request: its own function (lag_command),
# not a Runner operation.


def _common(parser: argparse.ArgumentParser) -> None:
    """Options every command takes; SUPPRESS so they may stand before or after the command."""
    s = argparse.SUPPRESS
    parser.add_argument("-n", "--namespace", default=s, help="namespace (default: the kubeconfig context's)")
    parser.add_argument("-A", "--all-namespaces", action="store_true", default=s, help="with -l: every namespace")
    parser.add_argument("-l", "--selector", default=s, help="label selector: run on every matching resource")
    parser.add_argument(
        "--kind",
        default=s,
        help="kafkaconnector (default, short cokc) or kafkamirrormaker2 (comm2, mm2); or write TYPE/NAME",
    )
    parser.add_argument(
        "--mirrormaker-connector", default=s, metavar="CONNECTOR", help="KafkaMirrorMaker2: which connector"
    )
    parser.add_argument("--kubeconfig", default=s, help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)")
    parser.add_argument("--context", default=s, help="kubeconfig context (default: the current one)")
    parser.add_argument(
        "--wait",
        action=argparse.BooleanOptionalAction,
        default=s,
        help="wait for the operator's result (default: --wait)",
    )
    parser.add_argument(
        "--timeout", type=parse_duration, default=s, help="how long to wait, e.g. 90s, 5m (default: 2m)"
    )
    parser.add_argument("-o", "--output", choices=["text", "json"], default=s, help="output format (default: text)")
    parser.add_argument("-v", "--verbose", action="store_true", default=s, help="show details of errors")


DEFAULTS: dict[str, Any] = {
    "namespace": None,
    "all_namespaces": False,
    "selector": None,
    "kind": None,
    "mirrormaker_connector": None,
    "kubeconfig": None,
    "context": None,
    "wait": True,
    "timeout": 120.0,
    "output": "text",
    "verbose": False,
}


class _Formatter(argparse.RawDescriptionHelpFormatter):
    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=32, width=110)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PLUGIN,
        formatter_class=_Formatter,
        description="List, alter, reset and restore Kafka Connect offsets through the connect-offsets operator:\n"
        "the plugin writes the ConfigMap and annotations, waits for the operator and prints the result.",
        epilog=OVERVIEW_EXAMPLES + "\n" + EXIT_CODES_TEXT,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    _common(parser)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in ("list", "alter", "reset", "restore"):
        cmd = sub.add_parser(
            command,
            help=DESCRIPTIONS[command],
            description=DESCRIPTIONS[command],
            epilog=EXAMPLES[command] + "\n" + EXIT_CODES_TEXT,
            formatter_class=_Formatter,
        )
        cmd.add_argument("name", nargs="?", metavar="NAME", help="resource name, or TYPE/NAME (cokc/x, mm2/x)")
        _common(cmd)
        if command == "alter":
            cmd.add_argument("-f", "--from-file", metavar="FILE", help='offsets JSON ({"offsets": [...]}); - is stdin')
        if command in ("alter", "reset", "restore"):
            cmd.add_argument(
                "--stop-connector",
                action="store_true",
                help="let the operator stop a running connector first and resume it afterwards",
            )
            cmd.add_argument(
                "--dry-run",
                action="store_true",
                help="report what would change (printed, and kept in the listOffsets ConfigMap, key dry-run.json); "
                "change nothing",
            )
        if command == "restore":
            cmd.add_argument("--from-backup", metavar="CONFIGMAP", help="the backup to restore (default: the newest)")
        if command == "reset":
            cmd.add_argument(
                "--reset-offset-syncs",
                action="store_true",
                help="MirrorSourceConnector: also delete the mm2-offset-syncs topic",
            )
    lag = sub.add_parser(
        "lag",
        help=DESCRIPTIONS["lag"],
        description=DESCRIPTIONS["lag"],
        epilog=EXAMPLES["lag"],
        formatter_class=_Formatter,
    )
    lag.add_argument("name", metavar="NAME", help="KafkaMirrorMaker2 name, or mm2/NAME")
    _common(lag)
    return parser


def parse_options(argv: Sequence[str] | None) -> tuple[Options, dict[str, Any]]:
    """Parse and check the command line; returns the options and the kubeconfig settings."""
    parser = build_parser()
    args = parser.parse_args(argv)
    values = {**DEFAULTS, **vars(args)}
    if values["selector"] is None and not values["name"]:
        raise PluginError(
            f"{args.command}: give a resource NAME or -l SELECTOR ({PLUGIN} {args.command} -h)", EXIT_USAGE
        )
    if values["selector"] is not None and values["name"]:
        raise PluginError(f"{args.command}: give either NAME or -l SELECTOR, not both", EXIT_USAGE)
    if values["all_namespaces"] and values["selector"] is None:
        raise PluginError("-A/--all-namespaces needs -l SELECTOR", EXIT_USAGE)
    if values["all_namespaces"] and values["namespace"] is not None:
        raise PluginError("give either -n NAMESPACE or -A, not both", EXIT_USAGE)
    if values["name"]:
        kind, name = split_name(values["name"], values["kind"])
        names = [name]
    else:
        kind, names = parse_kind(values["kind"]) if values["kind"] else CONNECTOR, []
    if kind.is_mirror and values["mirrormaker_connector"] is None:
        raise PluginError(
            "KafkaMirrorMaker2 offsets need --mirrormaker-connector CONNECTOR (e.g. 'east->west.MirrorSourceConnector'"
            "; kubectl get comm2 NAME -o jsonpath='{.status.connectors[*].name}' lists them)",
            EXIT_USAGE,
        )
    if not kind.is_mirror and values["mirrormaker_connector"] is not None:
        raise PluginError("--mirrormaker-connector only applies to KafkaMirrorMaker2 (use mm2/NAME)", EXIT_USAGE)
    if values.get("dry_run") and values.get("stop_connector"):
        raise PluginError("--dry-run changes nothing, so --stop-connector has no effect with it; drop one", EXIT_USAGE)
    offsets_text, source = None, ""
    if values.get("from_file"):
        offsets_text, source = _read_file(values["from_file"])
    options = Options(
        operation=args.command,
        kind=kind,
        names=names,
        namespace=values["namespace"],
        selector=values["selector"],
        mirror_connector=values["mirrormaker_connector"],
        wait=values["wait"],
        timeout=values["timeout"],
        output=values["output"],
        verbose=values["verbose"],
        dry_run=bool(values.get("dry_run")),
        stop_connector=bool(values.get("stop_connector")),
        from_backup=values.get("from_backup"),
        offsets_text=offsets_text,
        offsets_source=source,
        reset_offset_syncs=bool(values.get("reset_offset_syncs")),
    )
    return options, {
        "kubeconfig": values["kubeconfig"],
        "context": values["context"],
        "all_namespaces": values["all_namespaces"],
    }


def _read_file(path: str) -> tuple[str, str]:
    if path == "-":
        return sys.stdin.read(), "file <stdin>"
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read(), f"file {path}"
    except OSError as error:
        raise PluginError(f"--from-file {path}: {error.strerror or error}", EXIT_USAGE) from error
    except UnicodeDecodeError as error:
        raise PluginError(
            f"--from-file {path}: not UTF-8 text ({error.reason} at byte {error.start})", EXIT_USAGE
        ) from error


def load_kube(kubeconfig: str | None, context: str | None) -> tuple[KubernetesApi, str]:
    """Credentials as kubectl finds them; returns the API and the context's default namespace."""
    import urllib3
    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    in_cluster = (
        kubeconfig is None
        and context is None
        and not os.environ.get("KUBECONFIG")
        and not os.path.exists(os.path.expanduser("~/.kube/config"))
        and os.environ.get("KUBERNETES_SERVICE_HOST")
    )
    try:
        if in_cluster:
            config.load_incluster_config()  # type: ignore[no-untyped-call]
            api_client = client.ApiClient()
            namespace_file = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
            namespace = Path(namespace_file).read_text().strip() if os.path.exists(namespace_file) else "default"
        else:
            api_client = config.new_client_from_config(config_file=kubeconfig, context=context)  # type: ignore[no-untyped-call]
            contexts, active = config.list_kube_config_contexts(config_file=kubeconfig)  # type: ignore[no-untyped-call]
            chosen = next((c for c in contexts if c.get("name") == context), active) if context else active
            namespace = ((chosen or {}).get("context") or {}).get("namespace") or "default"
    except (ConfigException, OSError, TypeError, ValueError) as error:
        where = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
        raise PluginError(f"cannot load the kubeconfig ({where}): {error}", EXIT_KUBE) from error
    if not api_client.configuration.verify_ssl:
        # The kubeconfig asked for insecure-skip-tls-verify; kubectl does not warn on every call either.
        urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
    return KubernetesApi(api_client), namespace


async def run(options: Options, kube: KubernetesApi, namespace: str | None) -> list[RequestOutcome]:
    runner = Runner(kube, options)
    if options.selector is None:
        assert namespace is not None
        return [await runner.run(options.kind, namespace, options.names[0])]
    try:
        bodies = await kube.list_resources(options.kind.plural, options.kind.kind, namespace, options.selector)
    except KubernetesError as error:
        raise _kube_error(error) from error
    if not bodies:
        where = "any namespace" if namespace is None else f"namespace {namespace}"
        raise PluginError(f"no {options.kind.kind} matches -l {options.selector} in {where}", EXIT_USAGE)
    limit = asyncio.Semaphore(MAX_PARALLEL)

    async def one(body: dict[str, Any]) -> RequestOutcome:
        async with limit:
            meta = body["metadata"]
            return await runner.run(options.kind, meta["namespace"], meta["name"], body)

    return list(await asyncio.gather(*(one(body) for body in bodies)))


def render_lag(body: dict[str, Any]) -> str:
    """``status.replicationLag`` of a KafkaMirrorMaker2 as a table, with the ReplicationLagging condition."""
    status = body.get("status") or {}
    lag = status.get("replicationLag") or {}
    header = ("MIRROR", "CONNECTOR", "PARTITIONS", "TOTAL", "MAX", "WORST PARTITION", "MEASURED", "STALE")
    rows = [header]
    for mirror in lag.get("mirrors") or []:
        worst = mirror.get("worstPartition") or {}
        rows.append(
            (
                f"{mirror.get('sourceCluster', '?')}->{mirror.get('targetCluster', '?')}",
                str(mirror.get("connector", "")),
                str(mirror.get("partitions", "-")),
                str(mirror.get("total", "-")),
                str(mirror.get("max", "-")),
                f"{worst['topic']}/{worst['partition']} ({worst['lag']})" if worst else "-",
                str(mirror.get("measuredAt") or "never"),
                "yes" if mirror.get("stale") else "no",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]
    if len(rows) == 1:
        lines = [f"no replication lag reported: {lag.get('message') or 'the operator has not measured it yet'}"]
    if len(rows) > 2 and "total" in lag:
        lines.append(f"all mirrors: total {lag['total']}, max {lag.get('max')}")
    found = next((c for c in status.get("conditions") or [] if c.get("type") == "ReplicationLagging"), None)
    if found is not None:
        lines.append(f"ReplicationLagging={found.get('status')} ({found.get('reason')}): {found.get('message')}")
    for mirror in lag.get("mirrors") or []:
        if mirror.get("message"):
            lines.append(f"{mirror.get('sourceCluster')}->{mirror.get('targetCluster')}: {mirror['message']}")
    return "\n".join(lines)


def lag_command(argv: Sequence[str] | None) -> int:
    """``kubectl connect-offsets lag NAME``: read status.replicationLag and print it (nothing is changed)."""
    args = build_parser().parse_args(argv)
    values = {**DEFAULTS, **vars(args)}
    kind, name = split_name(values["name"], values["kind"] or (None if "/" in values["name"] else "mm2"))
    if not kind.is_mirror:
        raise PluginError("lag applies to KafkaMirrorMaker2 only (mm2/NAME)", EXIT_USAGE)
    kube, default_namespace = load_kube(values["kubeconfig"], values["context"])
    namespace = values["namespace"] or default_namespace

    async def fetch() -> dict[str, Any] | None:
        return await kube.get_resource(kind.plural, namespace, name)

    try:
        body = asyncio.run(fetch())
    except KubernetesError as error:
        raise _kube_error(error) from error
    finally:
        kube.core.api_client.close()
    if body is None:
        raise PluginError(f"{kind.kind} {namespace}/{name} not found (kubectl get comm2 -n {namespace})", EXIT_USAGE)
    if values["output"] == "json":
        print(json.dumps((body.get("status") or {}).get("replicationLag") or {}, indent=2, ensure_ascii=False))
    else:
        print(render_lag(body))
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    verbose = "-v" in words or "--verbose" in words
    try:
        if "lag" in words and build_parser().parse_known_args(words)[0].command == "lag":
            return lag_command(words)
        options, kube_settings = parse_options(argv)
        kube, default_namespace = load_kube(kube_settings["kubeconfig"], kube_settings["context"])
        namespace = None if kube_settings["all_namespaces"] else options.namespace or default_namespace
        try:
            outcomes = asyncio.run(run(options, kube, namespace))
        finally:
            kube.core.api_client.close()
    except PluginError as error:
        print(f"error: {error}", file=sys.stderr)
        if verbose and error.detail:
            print(f"detail:\n{error.detail}", file=sys.stderr)
        return error.code
    except KeyboardInterrupt:
        print("interrupted; a request already made stays pending (see the resource's annotations)", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as error:  # a bug or an unforeseen failure: one line, the trace with --verbose
        print(f"error: unexpected {type(error).__name__}: {error}", file=sys.stderr)
        if verbose:
            traceback.print_exc()
        return EXIT_FAILED
    return report(outcomes, options)


def report(outcomes: Sequence[RequestOutcome], options: Options) -> int:
    if options.selector is None:
        out, err = render_single(outcomes[0], options)
        if out:
            print(out)
        if err:
            print(err, file=sys.stderr)
        return outcomes[0].code
    if options.output == "json":
        print(json.dumps([o.to_json_obj() for o in outcomes], indent=2, ensure_ascii=False))
    else:
        print(render_table(outcomes, with_namespace=len({o.namespace for o in outcomes}) > 1))
    failed = [o for o in outcomes if o.code != EXIT_OK]
    if failed:
        print(f"error: {len(failed)} of {len(outcomes)} failed", file=sys.stderr)
        if options.verbose:
            for outcome in failed:
                print(_error_text(outcome, options), file=sys.stderr)
    return max((o.code for o in outcomes), default=EXIT_OK)


if __name__ == "__main__":
    sys.exit(main())
