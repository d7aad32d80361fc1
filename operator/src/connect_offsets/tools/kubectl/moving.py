"""``kubectl connect-offsets copy`` and ``failover-group``: offsets that move with the work.

* ``copy FROM TO``: TO exists -> an ``alter`` request with ``alter-from-connector`` (the Runner's
  ordinary alter: checked, annotated, waited for, withdrawn on failure). TO does not exist -> a new
  KafkaConnector made from FROM's spec (class, config, tasks, state, policies; not its offsets
  ConfigMaps) with ``spec.initialOffsets.fromConnector: FROM``, on ``--to-cluster`` or FROM's
  ConnectCluster; the plugin waits for ``status.initialOffsets`` to say Applied, and deletes the
  resource it created again when the operator refuses the copy (nothing is left behind).
* ``failover-group GROUP --mirror M``: the ``connect-offsets.io/failover-group`` request on the
  KafkaMirrorMaker2, waited for in ``status.groupFailovers`` (its request id); a dry run prints the
  translated offsets the operator pinned.

As everywhere in the plugin: only the Kubernetes API, with the user's own credentials; the
operator decides and refuses (its reason is printed, exit 1); what can be refused locally is exit 2.
"""

from __future__ import annotations

import asyncio
import copy as deep
import json
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import ValidationError

from connect_offsets.clients.kubernetes import KubernetesApi, KubernetesError
from connect_offsets.models.crds import (
    DNS1123_SUBDOMAIN,
    NAMESPACE_NAME,
    KafkaConnectorResource,
    KafkaMirrorMaker2Resource,
)
from connect_offsets.planning.failover import mirror_facts
from connect_offsets.planning.plan import PlannedRefusal
from connect_offsets.tools.kubectl.api import (
    ResourceWatch,
    WatchFailed,
    Writes,
    api_host,
    call,
    is_conflict,
    kube_error,
    load_kube,
)
from connect_offsets.tools.kubectl.common import (
    CONNECTOR,
    EXIT_FAILED,
    EXIT_KUBE,
    EXIT_OK,
    EXIT_TIMEOUT,
    EXIT_USAGE,
    MIRROR,
    POLL_INTERVAL_S,
    PluginError,
    format_duration,
    split_name,
)
from connect_offsets.tools.kubectl.completion import RequestOutcome
from connect_offsets.tools.kubectl.parser import DEFAULTS, check_wide, connection, parse_args
from connect_offsets.tools.kubectl.render import WaitProgress, report, write_lines
from connect_offsets.tools.kubectl.request import Options, existing_request, existing_request_text, new_request_id
from connect_offsets.tools.kubectl.runner import run
from connect_offsets.vocabulary import (
    ANNOTATION_ALLOW_PARTIAL,
    ANNOTATION_DRY_RUN,
    ANNOTATION_FAILOVER_FROM,
    ANNOTATION_FAILOVER_GROUP,
    ANNOTATION_MM2_CONNECTOR,
    ANNOTATION_OFFSETS,
    ANNOTATION_REQUEST_ID,
    API_GROUP,
    API_VERSION,
    CLUSTER_LABEL,
    CLUSTER_NAMESPACE_LABEL,
    CONNECTORS,
    MIRRORS,
    OFFSETS_KEY,
)

__all__ = ["IN_PROGRESS_REASONS", "copied_manifest", "copy_command", "created_state", "failover_command"]

#: Ready reasons a new connector shows while its copy goes on (anything else is a refusal).
IN_PROGRESS_REASONS = frozenset(
    {
        "Creating",
        "Progressing",
        "StoppedForOffsetsChange",
        "TasksNotRunning",
        "StatusUnknown",
        "SourceUnavailable",
        "ConnectClusterUnavailable",
        "ConnectError",
    }
)

#: A spec's parts a copy leaves out: the offsets ConfigMaps are FROM's own (two resources writing one
#: ConfigMap would overwrite each other's documents), and TO's initial offsets are the copy.
NOT_COPIED = ("listOffsets", "alterOffsets", "initialOffsets")


def _options(values: dict[str, Any], operation: str, kind: Any, name: str, namespace: str) -> Options:
    return Options(
        operation=operation,
        kind=kind,
        names=[name],
        namespace=namespace,
        selector=None,
        mirror_connector=None,
        wait=values["wait"],
        timeout=values["timeout"],
        output=values["output"],
        verbose=values["verbose"],
        dry_run=values["dry_run"] == "operator",
        stop_connector=bool(values.get("stop_connector")),
        progress=sys.stderr.isatty() if values["progress"] is None else values["progress"],
        request_timeout=values["request_timeout"],
        dry_run_strategy=values["dry_run"] if values["dry_run"] in ("client", "server") else "none",
    )


def _dry_outcome(outcome: RequestOutcome, writes: Writes) -> RequestOutcome:
    """A --dry-run=client|server outcome: the writes, and nothing kept."""
    outcome.result, outcome.code = "DryRun", EXIT_OK
    outcome.dry_run_strategy, outcome.writes = writes.strategy, writes.made
    outcome.message = "; ".join(write_lines(outcome)) + "; nothing was changed"
    return outcome


def _cluster(text: str, namespace: str, what: str) -> tuple[str, str]:
    """``[NS/]NAME`` of a ConnectCluster, checked like the API server checks names."""
    cluster_namespace, _, name = text.rpartition("/")
    cluster_namespace = cluster_namespace or namespace
    if not (re.fullmatch(DNS1123_SUBDOMAIN, name) and re.fullmatch(NAMESPACE_NAME, cluster_namespace)):
        raise PluginError(f"{what} {text!r} is not [NAMESPACE/]CLUSTER", EXIT_USAGE)
    return cluster_namespace, name


def _cluster_of(body: dict[str, Any]) -> tuple[str, str]:
    meta = body["metadata"]
    labels = meta.get("labels") or {}
    if not labels.get(CLUSTER_LABEL):
        raise PluginError(
            f"KafkaConnector {meta['namespace']}/{meta['name']} has no label {CLUSTER_LABEL}: it runs on no "
            "ConnectCluster",
            EXIT_USAGE,
        )
    return labels.get(CLUSTER_NAMESPACE_LABEL) or meta["namespace"], labels[CLUSTER_LABEL]


def copied_manifest(
    source: dict[str, Any], name: str, namespace: str, cluster: tuple[str, str], source_cluster: tuple[str, str]
) -> dict[str, Any]:
    """The KafkaConnector ``copy`` creates: FROM's spec without its offsets ConfigMaps, starting from
    FROM's offsets (``initialOffsets.fromConnector``), on ``cluster``."""
    spec = {key: deep.deepcopy(value) for key, value in source["spec"].items() if key not in NOT_COPIED}
    reference: dict[str, Any] = {"name": source["metadata"]["name"]}
    if source_cluster != cluster:
        reference["clusterRef"] = {"name": source_cluster[1]}
        if source_cluster[0] != namespace:
            reference["clusterRef"]["namespace"] = source_cluster[0]
    spec["initialOffsets"] = {"fromConnector": reference}
    labels = {
        key: value
        for key, value in (source["metadata"].get("labels") or {}).items()
        if key not in (CLUSTER_LABEL, CLUSTER_NAMESPACE_LABEL)
    }
    labels[CLUSTER_LABEL] = cluster[1]
    if cluster[0] != namespace:
        labels[CLUSTER_NAMESPACE_LABEL] = cluster[0]
    return {
        "apiVersion": f"{API_GROUP}/{API_VERSION}",
        "kind": CONNECTOR.kind,
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": spec,
    }


def created_state(body: dict[str, Any]) -> tuple[str, str, str] | None:
    """(Succeeded | Failed, reason, message) once a connector created by ``copy`` got its offsets, or
    the operator refused; None while it is still on its way."""
    status = body.get("status") or {}
    initial = status.get("initialOffsets") or {}
    if initial.get("step") == "Applied":
        return "Succeeded", "", str(initial.get("message") or "")
    if initial.get("step") == "Failed":
        return "Failed", "InitialOffsetsFailed", str(initial.get("message") or "")
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    if ready is not None and ready.get("status") == "False" and ready.get("reason") not in IN_PROGRESS_REASONS:
        return "Failed", str(ready.get("reason") or ""), str(ready.get("message") or "")
    return None


async def _watch(
    kube: KubernetesApi,
    plural: str,
    namespace: str,
    name: str,
    body: dict[str, Any],
    done: Callable[[dict[str, Any]], Any],
    timeout: float,
    show: Callable[[dict[str, Any]], None],
    request_timeout: float,
) -> tuple[Any, dict[str, Any]]:
    """Watch the resource from ``body`` until ``done`` answers (not None) or ``timeout``; polls when it cannot watch."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    watch = ResourceWatch(
        kube, plural, namespace, name, str(body["metadata"]["resourceVersion"]), connect_timeout=request_timeout
    )
    watch.start()
    watching = True
    try:
        while True:
            answer = done(body)
            remaining = deadline - loop.time()
            if answer is not None or remaining <= 0:
                return answer, body
            show(body)
            if watching:
                try:
                    event = await watch.next(remaining)
                except WatchFailed:
                    watching = False
                    continue
                if event is not None:
                    body = event[1] if event[0] != "DELETED" else body
                continue
            await asyncio.sleep(POLL_INTERVAL_S)
            fresh = await kube.get_resource(plural, namespace, name)
            if fresh is None:
                raise PluginError(f"{namespace}/{name} was deleted while the plugin waited", EXIT_FAILED)
            body = fresh
    finally:
        watch.stop()


# --- copy ------------------------------------------------------------------------------------------


def copy_command(argv: Sequence[str] | None) -> int:
    """``kubectl connect-offsets copy FROM TO``."""
    args = parse_args(argv)
    values = {**DEFAULTS, **vars(args)}
    check_wide("copy", values["output"], None)
    source_kind, source = split_name(values["source"], None)
    target_kind, target = split_name(values["destination"], None)
    if source_kind.is_mirror or target_kind.is_mirror:
        raise PluginError("copy works on KafkaConnectors (cokc/NAME)", EXIT_USAGE)
    if values["dry_run"] == "operator" and values["stop_connector"]:
        raise PluginError("--dry-run changes nothing, so --stop-connector has no effect with it; drop one", EXIT_USAGE)
    kube, default_namespace = load_kube(connection(values))
    namespace = values["namespace"] or default_namespace
    source_namespace = values["from_namespace"] or namespace
    if (source_namespace, source) == (namespace, target):
        raise PluginError("FROM and TO are the same KafkaConnector", EXIT_USAGE)
    try:
        return asyncio.run(_copy(kube, values, namespace, source_namespace, source, target))
    except KubernetesError as error:
        raise kube_error(error, api_host(kube)) from error
    finally:
        kube.core.api_client.close()


async def _copy(
    kube: KubernetesApi, values: dict[str, Any], namespace: str, source_namespace: str, source: str, target: str
) -> int:
    source_body = await kube.get_resource(CONNECTORS, source_namespace, source)
    if source_body is None:
        raise PluginError(f"KafkaConnector {source_namespace}/{source} not found (FROM)", EXIT_USAGE)
    try:
        KafkaConnectorResource.model_validate(source_body)
    except ValidationError as error:
        raise PluginError(f"KafkaConnector {source_namespace}/{source} is not valid", EXIT_USAGE, str(error)) from error
    source_cluster = _cluster_of(source_body)
    target_body = await kube.get_resource(CONNECTORS, namespace, target)
    options = _options(values, "alter", CONNECTOR, target, namespace)
    if target_body is not None:
        cluster = _cluster_of(target_body)
        if values["to_cluster"] and _cluster(values["to_cluster"], namespace, "--to-cluster") != cluster:
            raise PluginError(
                f"KafkaConnector {namespace}/{target} exists and runs on ConnectCluster {cluster[0]}/{cluster[1]}; "
                "--to-cluster only chooses the cluster of a new TO",
                EXIT_USAGE,
            )
        if values["state"] is not None:
            raise PluginError(
                f"--state applies to a new TO; {namespace}/{target} exists (edit its spec.state)", EXIT_USAGE
            )
        options.copy_from = source
        options.copy_cluster = None if source_cluster == cluster else f"{source_cluster[0]}/{source_cluster[1]}"
        outcomes = await run(options, kube, namespace)
        for outcome in outcomes:
            outcome.operation = "copy"
        return report(outcomes, options)
    if values["stop_connector"]:
        raise PluginError(
            f"--stop-connector applies to an existing TO; {namespace}/{target} does not exist", EXIT_USAGE
        )
    cluster = _cluster(values["to_cluster"], namespace, "--to-cluster") if values["to_cluster"] else source_cluster
    manifest = copied_manifest(source_body, target, namespace, cluster, source_cluster)
    if values["state"] is not None:
        manifest["spec"]["state"] = values["state"]
    outcome = RequestOutcome(namespace, target, CONNECTOR.kind, target, "copy", "Requested", EXIT_OK)
    strategy = values["dry_run"]
    # A new TO has nothing for the operator to preview: bare --dry-run shows the KafkaConnector that
    # would be created (as =client does), ready for kubectl apply -f -.
    writes = Writes(kube, "client" if strategy == "operator" else options.dry_run_strategy)
    created = await writes.create_resource(CONNECTOR, namespace, manifest)
    if writes.dry:
        _dry_outcome(outcome, writes)
        if strategy == "operator":
            outcome.dry_run = manifest
        return report([outcome], options)
    if not options.wait:
        outcome.message = f"created from {source_namespace}/{source}'s spec; not waiting for its offsets"
        return report([outcome], options)
    progress = WaitProgress(options.progress)

    def show(body: dict[str, Any]) -> None:
        initial = (body.get("status") or {}).get("initialOffsets") or {}
        progress.show(
            f"KafkaConnector {namespace}/{target}", "copy", str(initial.get("step") or "waiting for the operator")
        )

    answer, _ = await _watch(
        kube, CONNECTORS, namespace, target, created, created_state, options.timeout, show, options.request_timeout
    )
    if answer is None:
        outcome.result, outcome.code, outcome.reason = "Timeout", EXIT_TIMEOUT, "Timeout"
        outcome.message = (
            f"created, but no result from the operator after {format_duration(options.timeout)}; the KafkaConnector "
            "stays and its offsets are copied once the operator gets to it"
        )
        return report([outcome], options)
    result, reason, message = answer
    outcome.result, outcome.reason, outcome.message = result, reason, message
    if result == "Succeeded":
        outcome.code = EXIT_OK
        return report([outcome], options)
    outcome.code = EXIT_FAILED
    try:
        await call(
            f"delete KafkaConnector {namespace}/{target}",
            kube.custom.delete_namespaced_custom_object,
            API_GROUP,
            API_VERSION,
            namespace,
            CONNECTORS,
            target,
        )
        outcome.hint = f"the KafkaConnector {namespace}/{target} the plugin created was deleted again"
    except KubernetesError as error:
        outcome.hint = f"the KafkaConnector {namespace}/{target} the plugin created could not be deleted: {error}"
    return report([outcome], options)


# --- failover-group ------------------------------------------------------------------------------


def failover_command(argv: Sequence[str] | None) -> int:
    """``kubectl connect-offsets failover-group GROUP --mirror M``."""
    args = parse_args(argv)
    values = {**DEFAULTS, **vars(args)}
    check_wide("failover-group", values["output"], None)
    kind, mirror = split_name(values["mirror"], None if "/" in values["mirror"] else "mm2")
    if not kind.is_mirror:
        raise PluginError("--mirror names a KafkaMirrorMaker2 (mm2/NAME)", EXIT_USAGE)
    group = values["group"]
    if not group.strip() or len(group) > 249:
        raise PluginError(f"{group[:80]!r} is not a consumer group id", EXIT_USAGE)
    kube, default_namespace = load_kube(connection(values))
    namespace = values["namespace"] or default_namespace
    try:
        return asyncio.run(_failover(kube, values, namespace, mirror, group))
    except KubernetesError as error:
        raise kube_error(error, api_host(kube)) from error
    finally:
        kube.core.api_client.close()


def _record(body: dict[str, Any], request_id: str) -> dict[str, Any] | None:
    for record in (body.get("status") or {}).get("groupFailovers") or []:
        if isinstance(record, dict) and record.get("requestId") == request_id:
            return record
    return None


async def _failover(kube: KubernetesApi, values: dict[str, Any], namespace: str, mirror: str, group: str) -> int:
    options = _options(values, "failover-group", MIRROR, mirror, namespace)
    outcome = RequestOutcome(namespace, mirror, MIRROR.kind, f"group {group}", "failover-group", "Requested", EXIT_OK)
    source_alias = values["source_cluster"]
    request_id = new_request_id()
    # every annotation of the request is set or removed (null in the merge patch): one left over
    # from an earlier request (allow-partial=true above all) never makes this one something it
    # did not ask for
    patch: dict[str, str | None] = {
        ANNOTATION_FAILOVER_GROUP: group,
        ANNOTATION_REQUEST_ID: request_id,
        ANNOTATION_FAILOVER_FROM: source_alias or None,
        ANNOTATION_ALLOW_PARTIAL: "true" if values["allow_partial"] else None,
        ANNOTATION_DRY_RUN: "true" if options.dry_run else None,
    }
    annotations = {key: value for key, value in patch.items() if value is not None}
    writes = Writes(kube, options.dry_run_strategy)
    body: dict[str, Any] | None = None
    for _ in range(5):
        body = await kube.get_resource(MIRRORS, namespace, mirror)
        if body is None:
            raise PluginError(
                f"KafkaMirrorMaker2 {namespace}/{mirror} not found (kubectl get comm2 -n {namespace})", EXIT_USAGE
            )
        _check_failover(body, source_alias)
        try:
            body = await writes.annotate(
                MIRROR, namespace, mirror, dict(patch), body["metadata"]["resourceVersion"], body
            )
            break
        except KubernetesError as error:
            if not is_conflict(error):
                raise
    else:
        raise PluginError(f"KafkaMirrorMaker2 {namespace}/{mirror} kept changing; try again", EXIT_KUBE)
    assert body is not None
    if writes.dry:
        return report([_dry_outcome(outcome, writes)], options)
    outcome.request_id = request_id
    if not options.wait:
        outcome.message = f"failover of group {group} requested (request id {outcome.request_id}); not waiting"
        return report([outcome], options)
    progress = WaitProgress(options.progress)

    def done(current: dict[str, Any]) -> dict[str, Any] | None:
        record = _record(current, outcome.request_id)
        pending = ((current.get("metadata") or {}).get("annotations") or {}).get(
            ANNOTATION_REQUEST_ID
        ) == outcome.request_id
        if record is None or record.get("result") is None or (record.get("result") == "Succeeded" and pending):
            return None
        return record

    def show(current: dict[str, Any]) -> None:
        record = _record(current, outcome.request_id) or {}
        text = "committing" if record.get("step") == "Committing" else "waiting for the operator"
        progress.show(f"KafkaMirrorMaker2 {namespace}/{mirror}", f"failover-group {group}", text)

    record, _ = await _watch(
        kube, MIRRORS, namespace, mirror, body, done, options.timeout, show, options.request_timeout
    )
    if record is None:
        outcome.result, outcome.code, outcome.reason = "Timeout", EXIT_TIMEOUT, "Timeout"
        outcome.message = (
            f"no result from the operator after {format_duration(options.timeout)}; the request stays pending"
        )
        outcome.hint = f"cancel it with: kubectl annotate comm2 {mirror} -n {namespace} " + " ".join(
            f"{key}-" for key in annotations
        )
        return report([outcome], options)
    outcome.record = record
    outcome.reason, outcome.message = str(record.get("reason") or ""), str(record.get("message") or "")
    if record.get("result") == "Succeeded":
        outcome.result, outcome.code = "Succeeded", EXIT_OK
        pinned = record.get("pinned")
        if options.dry_run and isinstance(pinned, str):
            configmap = await kube.get_configmap(namespace, pinned)
            text = configmap.data.get(OFFSETS_KEY) if configmap is not None else None
            outcome.dry_run = json.loads(text) if text else None
        return report([outcome], options)
    outcome.result, outcome.code = "Failed", EXIT_FAILED
    await _withdraw(kube, namespace, mirror, annotations)
    return report([outcome], options)


def _failover_state(body: dict[str, Any]) -> tuple[str, str]:
    """What the resource's own failover-group annotation is (see ``request.existing_request``):
    invalid (no group id), handled (its request id was), refused (its record says Failed), or pending."""
    annotations = body["metadata"].get("annotations") or {}
    status = body.get("status") or {}
    group = annotations[ANNOTATION_FAILOVER_GROUP]
    if len(group) > 249 or not group.strip():
        return "invalid", "not a consumer group id, so the operator does nothing with it"
    request_id = annotations.get(ANNOTATION_REQUEST_ID)
    if request_id is not None and request_id in (status.get("handledRequestIds") or []):
        return "handled", f"request id {request_id} was already handled, so the operator ignores it"
    record = _record(body, request_id) if request_id is not None else None
    if record is not None and record.get("result") == "Failed":
        return "refused", f"{record.get('reason') or 'Failed'}: {' '.join(str(record.get('message') or '').split())}"
    return "pending", ""


def _check_failover(body: dict[str, Any], source_alias: str | None) -> None:
    """What can be refused before anything is written: an invalid resource, no mirror with a
    checkpoint connector, a request already on the resource (pending, refused or invalid)."""
    meta = body["metadata"]
    try:
        resource = KafkaMirrorMaker2Resource.model_validate(body)
    except ValidationError as error:
        raise PluginError(
            f"KafkaMirrorMaker2 {meta['namespace']}/{meta['name']} is not valid", EXIT_USAGE, str(error)
        ) from error
    facts = mirror_facts(resource, source_alias)
    if isinstance(facts, PlannedRefusal):
        raise PluginError(f"{facts.message} ({facts.reason}); nothing was changed", EXIT_USAGE)
    annotations = meta.get("annotations") or {}
    for key in (ANNOTATION_FAILOVER_GROUP, ANNOTATION_OFFSETS):
        if key not in annotations:
            continue
        found = _failover_state(body) if key == ANNOTATION_FAILOVER_GROUP else existing_request(MIRROR, body)
        state, why = found or ("pending", "")
        keys = (
            [
                ANNOTATION_FAILOVER_GROUP,
                ANNOTATION_FAILOVER_FROM,
                ANNOTATION_ALLOW_PARTIAL,
                ANNOTATION_REQUEST_ID,
                ANNOTATION_DRY_RUN,
            ]
            if key == ANNOTATION_FAILOVER_GROUP
            else [ANNOTATION_OFFSETS, ANNOTATION_MM2_CONNECTOR, ANNOTATION_REQUEST_ID, ANNOTATION_DRY_RUN]
        )
        removals = " ".join(f"{k}-" for k in keys if k in annotations)
        text = existing_request_text(key, annotations[key], state, why)
        raise PluginError(
            f"KafkaMirrorMaker2 {meta['namespace']}/{meta['name']} {text}: kubectl annotate comm2 {meta['name']} "
            f"-n {meta['namespace']} {removals}",
            EXIT_USAGE,
        )


async def _withdraw(kube: KubernetesApi, namespace: str, mirror: str, annotations: dict[str, str]) -> None:
    """Remove the failed request's annotations (only while they are still ours), so it never runs later."""
    for _ in range(5):
        body = await kube.get_resource(MIRRORS, namespace, mirror)
        if body is None:
            return
        current = body["metadata"].get("annotations") or {}
        if current.get(ANNOTATION_REQUEST_ID) != annotations[ANNOTATION_REQUEST_ID]:
            return
        removal: dict[str, str | None] = {key: None for key, value in annotations.items() if current.get(key) == value}
        try:
            await kube.patch_annotations_at(MIRRORS, namespace, mirror, removal, body["metadata"]["resourceVersion"])
            return
        except KubernetesError as error:
            if not is_conflict(error):
                raise
