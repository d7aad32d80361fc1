"""The per-pass context that every step of one connector target receives, and what a pass produces.

Why separate: observing, executing actions, offsets changes, backups, lifecycle calls and initial
offsets all need the same handful of things — the target, its resource, the Connect client, the
clock, where status fields and Events go. One frozen ``Pass`` carries them, so a step's signature
names only what is special to it (its action), and the step modules share these types without
importing one another. ``StatusSink`` is the one mutable part: what the pass has to report so far.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from connect_offsets.clients.connect import ConnectClient
from connect_offsets.clients.kubernetes import KubernetesApi, label_value
from connect_offsets.clients.offsets_configmaps import OffsetsConfigMapStore
from connect_offsets.errors import ConnectOffsetsError, TransientError, UserError
from connect_offsets.models.connect import ServerInfo
from connect_offsets.models.crds import FromMirrorSpec, KafkaConnectorStatus, PendingOffsetsOperation
from connect_offsets.planning import Action, ConditionSpec, ConnectorTarget, Observed, Plan, SourceOffsets
from connect_offsets.planning.outcomes import handled_request_ids, op_status, truncate
from connect_offsets.reconcile.snapshots import ConnectorsSnapshot
from connect_offsets.reconcile.status import record_event
from connect_offsets.vocabulary import API_GROUP, CLUSTER_LABEL, MAX_QUOTED_TEXT, PLURALS, request_view

#: Called right before an offsets action; returns text to prefix to its message. Raising
#: OffsetsRequestInvalid fails the request permanently, StepUnavailable (or a ConnectError
#: that may pass) retries it.
BeforeOffsets = Callable[[Action], Awaitable[str]]


#: Resolves the ConnectCluster's Kafka settings (only called when a request needs Kafka).
KafkaConfig = Callable[[], Awaitable[dict[str, Any]]]


#: Writes status fields of one connector target right away (before the next step runs): how a
#: multi-step change survives an operator restart. The fields set in the update are written; a
#: field set to None is removed.
Checkpoint = Callable[[KafkaConnectorStatus], Awaitable[None]]


class CopySources(Protocol):
    """Where a copy reads its source (``reconcile.sources.SourceReader``): another connector's offsets
    through the same binding and ownership checks as the resource's own, or a group translated
    through a KafkaMirrorMaker2's checkpoints. Refusals come back as ``SourceOffsets.reason``."""

    async def connector(self, name: str, cluster: str | None) -> SourceOffsets: ...

    async def mirror(self, spec: FromMirrorSpec) -> SourceOffsets: ...


class OffsetsRequestInvalid(UserError):
    """An offsets request that cannot succeed as given (bad ConfigMap content, ConfigMap write refused)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class StepUnavailable(TransientError):
    """A step outside Connect (a ``BeforeOffsets`` hook talking to Kafka) could not be done now, or
    the worker says it cannot serve it yet (``GET /health``); the pass ends like a Connect outage:
    the target reports it (Ready False with ``reason``), the resource is retried with back-off."""

    def __init__(self, message: str, reason: str = "ConnectError") -> None:
        super().__init__(message)
        self.reason = reason


class RequestChanged(ConnectOffsetsError):
    """The resource no longer asks for what this pass planned (its annotations, spec or labels
    changed since the cached body was read). Nothing was changed; the pass ends without writing
    and the next one plans from the fresh body, which the check put into the cache."""


@dataclass
class TargetResult:
    """What running one connector target produced, for the resource's status."""

    plan: Plan
    observed: Observed
    conditions: list[ConditionSpec]
    #: The target's status fields this pass sets (``model_fields_set``; None removes one): the last
    #: offsets operation, autoRestart, connectorStatus, ... For a KafkaMirrorMaker2, its entry in
    #: status.connectors, and its handled request ids.
    status: KafkaConnectorStatus = field(default_factory=KafkaConnectorStatus)
    transient_error: str | None = None
    removals: list[Action] = field(default_factory=list)  # annotations of finished requests
    #: The pass stopped before a change because the request changed (RequestChanged): write nothing.
    superseded: bool = False
    #: Set when config and status came from the snapshot: equal digests, nothing changed in Connect.
    connect_digest: str | None = None
    #: The Events the pass recorded, to post after its status write (``finish_after_answer``).
    events: list[PassEvent] = field(default_factory=list)
    #: Clean-ups the pass deferred until its requests are answered (``Pass.after_answer``).
    clean_ups: list[Callable[[], Awaitable[None]]] = field(default_factory=list)


@dataclass(frozen=True)
class PassEvent:
    """An Event a pass records; posted after its status write (``finish_after_answer``)."""

    type: str
    reason: str
    message: str


@dataclass
class StatusSink:
    """What one target's pass reports so far; checkpoints go to the resource at once, and the final
    status write includes them too."""

    checkpoint: Checkpoint | None = None
    #: The status fields set so far (a partial status: ``model_fields_set``; None removes a field).
    status: KafkaConnectorStatus = field(default_factory=KafkaConnectorStatus)
    conditions: list[ConditionSpec] = field(default_factory=list)
    removals: list[Action] = field(default_factory=list)
    #: Why held back until the status write: an Event says an outcome happened, and posted before
    #: the status that records it, a crash in between reported the outcome twice (the retry finds
    #: the change already in Connect and reports it again). Posted after, it is reported at most
    #: once, and off the request's path (the annotation removal comes first).
    events: list[PassEvent] = field(default_factory=list)
    clean_ups: list[Callable[[], Awaitable[None]]] = field(default_factory=list)

    def report(self, update: KafkaConnectorStatus) -> None:
        """Set these status fields in the final write of the pass."""
        self.status = self.status.updated(update)

    async def fields(self, update: KafkaConnectorStatus) -> None:
        """Set these status fields, and write them at once (a checkpoint) when the pass has one."""
        self.report(update)
        if self.checkpoint is not None:
            await self.checkpoint(update)

    async def pending(self, pending: PendingOffsetsOperation) -> None:
        await self.fields(KafkaConnectorStatus(pending_offsets_operation=pending))

    def handled(self, target: ConnectorTarget, request_id: str | None, *, dry_run: bool = False) -> None:
        """Remember a finished request's id, so the same id re-applied later is a no-op."""
        if request_id is not None:
            self.report(
                KafkaConnectorStatus(handled_request_ids=handled_request_ids(target, request_id, dry_run=dry_run))
            )

    def failed(self, plan: Plan, operation: str, reason: str, text: str, now: datetime) -> None:
        self.report(
            KafkaConnectorStatus(last_offsets_operation=op_status(operation, "Failed", text, plan, now, reason))
        )
        self.conditions.append(ConditionSpec("OffsetsOperationFailed", "True", reason, text))

    def not_ready(self, reason: str, message: str) -> None:
        """Replace the Ready condition: this pass could not bring the connector where it should be."""
        self.conditions = [c for c in self.conditions if c.type != "Ready"]
        self.conditions.insert(0, ConditionSpec("Ready", "False", reason, message[:MAX_QUOTED_TEXT]))


@dataclass
class _EarlyRead:
    """The one thing a :class:`Pass` changes as it runs: a GET sent ahead of its use."""

    future: asyncio.Future[dict[str, Any] | None] | None = None


@dataclass(frozen=True)
class Pass:
    """One pass over one connector target: what every step reads, and where it reports."""

    kube: KubernetesApi
    # Offsets documents of any size: plain offsets.json, gzip, or shard ConfigMaps.
    store: OffsetsConfigMapStore
    target: ConnectorTarget
    body: dict[str, Any]  # the resource that declares the target, as read at the start of the pass
    client: ConnectClient
    info: ServerInfo
    now: datetime
    sink: StatusSink
    before_offsets: BeforeOffsets | None = None
    kafka: KafkaConfig | None = None
    #: The cluster's shared connector snapshot; None reads the connector on its own.
    snapshot: ConnectorsSnapshot | None = None
    #: The worker's last ``GET /health`` answer (3.9+), (state, message); None: not known.
    health: tuple[str, str] | None = None
    #: Where copies read their source (KafkaConnectors; None: this resource kind copies nothing).
    sources: CopySources | None = None
    #: A check that would wait for the cluster's first connector listing raises ``ListingPending``
    #: instead (a KafkaConnector's pass: it has written nothing before it reads its connector).
    defer_to_listing: bool = False
    #: The GET ``confirm_request`` checks, when ``read_resource_soon`` sent it early.
    _early_read: _EarlyRead = field(default_factory=_EarlyRead, init=False, repr=False, compare=False)

    @property
    def namespace(self) -> str:
        return str(self.body["metadata"]["namespace"])

    @property
    def kind(self) -> str:
        """The resource kind, as metrics label it."""
        return str(self.body.get("kind", ""))

    def event(self, event_type: str, reason: str, message: str) -> None:
        """Record an outcome as an Event, posted once the pass has written the status that
        describes it (``StatusSink.events``)."""
        self.sink.events.append(PassEvent(event_type, reason, message))

    async def confirm_request(self) -> None:
        """Read the resource from the API server and check it still asks for what this pass
        planned from the cached body; ``RequestChanged`` otherwise.

        Why a GET here and nowhere else on the hot path: the pass is about to back up and change
        offsets (or stop the connector to do so), which cannot be undone. The cache may lag the
        API server by one watch event, and that event may be the user removing or replacing the
        request; every other decision is safe to make on a body one event old, because the event
        wakes another pass.
        """
        meta = self.body["metadata"]
        early, self._early_read.future = self._early_read.future, None
        fresh = await (early if early is not None else self._read_resource())
        if fresh is None or request_view(fresh) != request_view(self.body):
            raise RequestChanged(f"{meta['namespace']}/{meta['name']} changed since this pass read it")

    def read_resource_soon(self) -> None:
        """Send ``confirm_request``'s GET now, beside the pass's reads of Connect and the
        ConfigMaps, instead of after planning: one round trip less on an offsets change's path
        (issue 35). It is as good a check: sent after the pass took its body from the cache, it
        tells whether that body was stale, which is what ``confirm_request`` asks. Unused (the plan
        changes nothing), it only refreshes the cache, and its failure is nobody's error.
        """
        if self._early_read.future is None:
            future = asyncio.ensure_future(self._read_resource())
            future.add_done_callback(lambda done: done.cancelled() or done.exception())
            self._early_read.future = future

    def drop_unused_reads(self) -> None:
        """The pass is over: a ``read_resource_soon`` GET it did not use is not waited for."""
        if self._early_read.future is not None:
            self._early_read.future.cancel()
            self._early_read.future = None

    async def _read_resource(self) -> dict[str, Any] | None:
        meta = self.body["metadata"]
        plural = PLURALS[str(self.body.get("kind", "KafkaConnector"))]
        return await self.kube.fresh_resource(plural, meta["namespace"], meta["name"])

    def after_answer(self, clean_up: Callable[[], Awaitable[None]]) -> None:
        """Run ``clean_up`` once the pass has written its status and removed the annotations of
        the requests it finished, before its Events are posted (``finish_after_answer``).

        Why: a clean-up (pruning old backups) is not part of the answer the user waits for; on the
        request's path it cost an alter one more API call above the protocol floor (issue 35). It
        reports its own failures (``cleanup_failed``), and a pass that ends in an exception skips
        it: the next change cleans up again.
        """
        self.sink.clean_ups.append(clean_up)

    def cleanup_failed(self, message: str) -> None:
        """Report a clean-up that failed after its change succeeded: a Warning Event (best effort), never an error."""
        self.event("Warning", "CleanupFailed", truncate(message, 1024))


def managed_labels(body: dict[str, Any]) -> dict[str, str]:
    """Labels of every ConfigMap the operator writes for a resource (listings, backups, dry-run diffs)."""
    meta = body["metadata"]
    return {
        "app.kubernetes.io/managed-by": "connect-offsets-operator",
        f"{API_GROUP}/kind": str(body.get("kind", "")),
        f"{API_GROUP}/name": label_value(meta["name"]),
        CLUSTER_LABEL: (meta.get("labels") or {}).get(CLUSTER_LABEL, ""),
    }


async def finish_after_answer(kube: KubernetesApi, body: dict[str, Any], results: list[TargetResult]) -> None:
    """Finish these passes once the user has the answer: run the clean-ups they deferred
    (``Pass.after_answer``), then post their Events (best effort, in the order they happened; a
    clean-up's failure is one of them).

    Why a step of its own, called after the status write and the annotation removal: what runs
    here is not part of the answer the user waits for. A clean-up (pruning old backups) on the
    request's path would delay it; an Event posted before the status that records it would be
    reported twice after a crash in between (``StatusSink.events``)."""
    for result in results:
        for clean_up in result.clean_ups:
            await clean_up()
        for event in result.events:
            await record_event(kube, body, event.type, event.reason, event.message)
