"""Running a request on a resource: check, write the ConfigMap, annotate, wait, read the result."""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from connect_offsets.clients.kubernetes import KubernetesApi, KubernetesError, label_value
from connect_offsets.models.crds import KafkaConnectorResource
from connect_offsets.planning import OffsetsConfigMap, offsets_request_fingerprint
from connect_offsets.tools.kubectl.api import ResourceWatch, WatchFailed, Writes, api_host, is_conflict, kube_error
from connect_offsets.tools.kubectl.common import (
    EXIT_FAILED,
    EXIT_KUBE,
    EXIT_OK,
    EXIT_TIMEOUT,
    EXIT_USAGE,
    MAX_PARALLEL,
    POLL_INTERVAL_S,
    Kind,
    PluginError,
    Refused,
    format_duration,
)
from connect_offsets.tools.kubectl.completion import (
    RequestOutcome,
    Waiting,
    classify,
    last_operation,
    own_backup,
    progress_text,
)
from connect_offsets.tools.kubectl.render import WaitProgress, one_line, write_lines
from connect_offsets.tools.kubectl.request import (
    Options,
    Request,
    Resolved,
    check_request,
    dry_run_input_name,
    resolve,
    validate_offsets,
    without_offsets_text,
)
from connect_offsets.vocabulary import (
    ANNOTATION_OFFSETS,
    ANNOTATION_REQUEST_ID,
    API_GROUP,
    API_VERSION,
    dry_run_key,
)


class Runner:
    """Runs one request on one resource: check, write, annotate, wait, read the result."""

    def __init__(self, kube: KubernetesApi, options: Options, progress: WaitProgress | None = None) -> None:
        self.kube = kube
        self.options = options
        self.progress = progress or WaitProgress(options.progress)

    async def run(self, kind: Kind, namespace: str, name: str, body: dict[str, Any] | None = None) -> RequestOutcome:
        request = self.options.request()
        # request_id is set once the request is made (annotated): a refusal before it names none
        base = RequestOutcome(
            namespace, name, kind.kind, self.options.mirror_connector or name, request.operation, "", 0
        )
        try:
            return await self._run(kind, namespace, name, body, request, base)
        except Refused as error:
            # What the operator would refuse, refused before anything was written: its reason, exit 1.
            base.result, base.code, base.reason = "Failed", error.code, error.reason
            base.message, base.hint, base.refused_here = str(error), error.hint, True
            return base
        except PluginError as error:
            base.result = "Invalid" if error.code == EXIT_USAGE else "Error"
            base.code, base.message, base.detail = error.code, str(error), error.detail
            return base
        except KubernetesError as error:
            wrapped = kube_error(error, api_host(self.kube))
            base.result, base.code, base.message, base.detail = "Error", wrapped.code, str(wrapped), wrapped.detail
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
        if request.operation == "alter" and request.offsets_text is None and request.copy_from is None:
            # alter without --from-file applies the ConfigMap's current content: check that instead.
            request = await self._with_configmap_content(resolved, request)
        check_request(resolved, request)
        if request.operation == "restore" and request.from_backup is not None:
            await self._check_backup(resolved, request.from_backup)
        if request.previews_a_file:
            request = replace(request, dry_run_from=dry_run_input_name(name))
            await self._check_dry_run_input(resolved, request.dry_run_from or "")
        # Every check is done: only writes from here on (--dry-run=client|server: described, or
        # sent with dryRun=All, and nothing kept).
        writes = Writes(self.kube, self.options.dry_run_strategy)
        configmap_rv = ""
        if request.previews_a_file:
            # The preview's document goes to the plugin's own ConfigMap, named by dry-run-from:
            # the alterOffsets ConfigMap (the user's document, maybe applyOnChange) is never touched.
            configmap_rv = await self._write_offsets(resolved, request, request.dry_run_from or "", writes)
        elif request.operation == "alter" and request.offsets_source.startswith("file "):
            configmap_rv = await self._write_offsets(resolved, request, str(resolved.target.alter_configmap), writes)
        elif request.operation == "alter" and request.copy_from is None:
            current = await self.kube.get_configmap(namespace, str(resolved.target.alter_configmap))
            configmap_rv = current.resource_version if current else ""
        before = last_operation(kind, body, resolved.target.name)
        started = datetime.now(UTC).replace(microsecond=0)
        body = await self._annotate(resolved, request, writes)
        if writes.dry:
            outcome.result, outcome.code = "DryRun", EXIT_OK
            outcome.dry_run_strategy, outcome.writes = writes.strategy, writes.made
            outcome.message = "; ".join(write_lines(outcome)) + "; nothing was changed"
            return outcome
        outcome.request_id = request.request_id
        fingerprint = self._fingerprint(kind, body, request, configmap_rv)
        if not self.options.wait:
            outcome.result, outcome.code = "Requested", EXIT_OK
            outcome.message = f"{request.operation} requested (request id {request.request_id}); not waiting"
            return outcome
        waiting = Waiting(request, before, started, fingerprint)
        answer, last_body = await self._wait(resolved, waiting, body)
        if answer is None:
            return self._timed_out(resolved, last_body, request, outcome)
        result, record = answer
        outcome.record = record
        outcome.reason = str(record.get("reason") or "")
        outcome.message = str(record.get("message") or "")
        backup = own_backup(record, waiting)
        outcome.backup = backup if backup is not None and await self._is_backup_of(resolved, request, backup) else None
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

    async def _is_backup_of(self, resolved: Resolved, request: Request, backup: str) -> bool:
        """The backup ConfigMap says it was taken for this operation of this connector (the operator
        annotates each backup so); advice to restore anything else is never printed."""
        configmap = await self.kube.get_configmap(resolved.namespace, backup)
        if configmap is None:
            return False
        annotations = configmap.annotations
        return (
            annotations.get(f"{API_GROUP}/operation") == request.operation
            and annotations.get(f"{API_GROUP}/connector") == resolved.target.name
        )

    async def _check_backup(self, resolved: Resolved, backup: str) -> None:
        configmap = await self.kube.get_configmap(resolved.namespace, backup)
        if configmap is None:
            raise PluginError(
                f"backup ConfigMap {resolved.namespace}/{backup} not found; list the backups with: kubectl get "
                f"configmaps -n {resolved.namespace} -l {API_GROUP}/backup-of={label_value(resolved.name)}",
                EXIT_USAGE,
            )

    async def _check_dry_run_input(self, resolved: Resolved, name: str) -> None:
        """The ConfigMap a preview of a file keeps it in is absent or the resource's own: someone else's
        ConfigMap of that name is never overwritten."""
        meta = resolved.body["metadata"]
        existing = await self.kube.get_configmap(resolved.namespace, name)
        if existing is not None and not any(o.get("uid") == meta["uid"] for o in existing.owner_references):
            raise PluginError(
                f"ConfigMap {resolved.namespace}/{name} exists and is not owned by {resolved.display}; the "
                "dry run keeps its document there: rename or delete that ConfigMap, or preview without "
                "--from-file (the alterOffsets ConfigMap's own document)",
                EXIT_USAGE,
            )

    async def _write_offsets(self, resolved: Resolved, request: Request, name: str, writes: Writes) -> str:
        """Write the file into ConfigMap ``name`` (the target's offsets key); its resourceVersion after."""
        assert request.offsets_text is not None
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
        return await writes.configmap_key(
            resolved.namespace, name, resolved.target.configmap_key, text, labels=labels, owner=owner
        )

    async def _annotate(self, resolved: Resolved, request: Request, writes: Writes) -> dict[str, Any]:
        """Set the request's annotations, atomically with the check that no other request is pending."""
        body = resolved.body
        for _ in range(5):
            try:
                return await writes.annotate(
                    resolved.kind,
                    resolved.namespace,
                    resolved.name,
                    dict(request.annotations()),
                    body["metadata"]["resourceVersion"],
                    body,
                )
            except KubernetesError as error:
                if not is_conflict(error):
                    raise
            body = await self._fetch(resolved.kind, resolved.namespace, resolved.name)
            check_request(resolve(resolved.kind, body, request.mirror_connector), without_offsets_text(request))
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
        if request.dry_run_from is not None:
            configmap = OffsetsConfigMap(request.dry_run_from, True, configmap_rv)
        elif request.copy_from is not None:
            configmap = None  # a copy's identity is its annotations (the operator pins the source itself)
        elif request.operation == "alter" and alter is not None and alter.from_config_map is not None:
            configmap = OffsetsConfigMap(alter.from_config_map.name, True, configmap_rv)
        return offsets_request_fingerprint(resource, configmap)

    async def _wait(
        self, resolved: Resolved, waiting: Waiting, body: dict[str, Any]
    ) -> tuple[tuple[str, dict[str, Any]] | None, dict[str, Any]]:
        """Watch the resource from ``body`` (as the annotation patch returned it) until ``classify``
        answers or the timeout passes; also returns the last body seen.

        Each change the API server sends is classified at once (no polling delay) and updates the
        progress line. Where the watch cannot be used (RBAC without ``watch``, a lost connection),
        the rest of the wait polls with GETs, as before watches.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.options.timeout
        watch = ResourceWatch(
            self.kube,
            resolved.kind.plural,
            resolved.namespace,
            resolved.name,
            str(body["metadata"]["resourceVersion"]),
            connect_timeout=self.options.request_timeout,
        )
        watch.start()
        try:
            while True:
                answer = classify(resolved.kind, body, resolved.target.name, waiting)
                remaining = deadline - loop.time()
                if answer is not None or remaining <= 0:
                    return answer, body
                self._show_progress(resolved, waiting, body)
                try:
                    event = await watch.next(remaining)
                except WatchFailed as failed:
                    if self.options.verbose:
                        print(
                            f"note: {resolved.display}: cannot watch it ({one_line(str(failed))}); reading it every "
                            f"{POLL_INTERVAL_S}s instead",
                            file=sys.stderr,
                        )
                    return await self._poll(resolved, waiting, deadline)
                if event is None:
                    continue  # the deadline passed
                kind, changed = event
                # deleted: "not found" from the GET, or the resource as it was recreated meanwhile
                body = (
                    await self._fetch(resolved.kind, resolved.namespace, resolved.name)
                    if kind == "DELETED"
                    else changed
                )
        finally:
            watch.stop()

    async def _poll(
        self, resolved: Resolved, waiting: Waiting, deadline: float
    ) -> tuple[tuple[str, dict[str, Any]] | None, dict[str, Any]]:
        """The wait without a watch: read the resource every POLL_INTERVAL_S."""
        loop = asyncio.get_running_loop()
        while True:
            body = await self._fetch(resolved.kind, resolved.namespace, resolved.name)
            answer = classify(resolved.kind, body, resolved.target.name, waiting)
            if answer is not None or loop.time() >= deadline:
                return answer, body
            self._show_progress(resolved, waiting, body)
            await asyncio.sleep(POLL_INTERVAL_S)

    def _show_progress(self, resolved: Resolved, waiting: Waiting, body: dict[str, Any]) -> None:
        text = progress_text(resolved.kind, body, resolved.target.name, waiting)
        self.progress.show(resolved.display, waiting.request.operation, text)

    def _timed_out(
        self, resolved: Resolved, body: dict[str, Any], request: Request, outcome: RequestOutcome
    ) -> RequestOutcome:
        conditions = {c.get("type"): c for c in (body.get("status") or {}).get("conditions") or []}
        ready = conditions.get("Ready")
        state = f" (Ready={ready.get('status')} {ready.get('reason')}: {ready.get('message')})" if ready else ""
        outcome.result, outcome.code, outcome.reason = "Timeout", EXIT_TIMEOUT, "Timeout"
        outcome.message = (
            f"no result from the operator after {format_duration(self.options.timeout)}{state}; the request stays "
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
                if not is_conflict(error):
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


async def run(options: Options, kube: KubernetesApi, namespace: str | None) -> list[RequestOutcome]:
    runner = Runner(kube, options)
    if options.selector is None:
        assert namespace is not None
        return [await runner.run(options.kind, namespace, options.names[0])]
    try:
        bodies = await kube.list_resources(options.kind.plural, options.kind.kind, namespace, options.selector)
    except KubernetesError as error:
        raise kube_error(error, api_host(kube)) from error
    if not bodies:
        where = "any namespace" if namespace is None else f"namespace {namespace}"
        raise PluginError(f"no {options.kind.kind} matches -l {options.selector} in {where}", EXIT_USAGE)
    limit = asyncio.Semaphore(MAX_PARALLEL)

    async def one(body: dict[str, Any]) -> RequestOutcome:
        async with limit:
            meta = body["metadata"]
            return await runner.run(options.kind, meta["namespace"], meta["name"], body)

    return list(await asyncio.gather(*(one(body) for body in bodies)))
