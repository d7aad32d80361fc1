"""The names the operator shares with its users and its own tools, each defined once.

Why one module: these strings are a contract. Users type the annotations, GitOps tools apply
them, the kubectl plugin writes them, the chart's RBAC names the plurals, and status readers
parse the keys. A copy that drifts (it happened: the plugin had its own ``dry_run_key``) breaks
that contract silently. Everything here is a constant, a naming rule or a small rule over a
resource's body (what it asks for: ``request_view``, ``asks_now``) and imports nothing from the
package, so every layer and tool can use it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from contextvars import ContextVar
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

__all__ = [
    "ANNOTATION_ADOPT",
    "ANNOTATION_ALLOW_PARTIAL",
    "ANNOTATION_ALTER_FROM_CLUSTER",
    "ANNOTATION_ALTER_FROM_CONNECTOR",
    "ANNOTATION_DRY_RUN",
    "ANNOTATION_DRY_RUN_FROM",
    "ANNOTATION_FAILOVER_FROM",
    "ANNOTATION_FAILOVER_GROUP",
    "ANNOTATION_HANDLED_REQUEST",
    "ANNOTATION_MM2_CONNECTOR",
    "ANNOTATION_OFFSETS",
    "ANNOTATION_OFFSETS_READERS",
    "ANNOTATION_PREFIX",
    "ANNOTATION_REQUEST_ID",
    "ANNOTATION_RESET_OFFSET_SYNCS",
    "ANNOTATION_RESTART",
    "ANNOTATION_RESTART_TASK",
    "ANNOTATION_RESTORE_FROM",
    "ANNOTATION_SEEK_TO",
    "ANNOTATION_STOP_CONNECTOR",
    "API_GROUP",
    "API_VERSION",
    "CLUSTERS",
    "CLUSTER_LABEL",
    "CLUSTER_NAMESPACE_LABEL",
    "CONNECTORS",
    "DRY_RUN_KEY",
    "LABEL_VALUE_MAX",
    "LAST_OWNER_LABEL",
    "MAX_QUOTED_TEXT",
    "MIRRORS",
    "MIRROR_CLASSES",
    "MIRROR_CLASS_SUFFIXES",
    "OFFSETS_KEY",
    "OFFSETS_OPERATIONS",
    "OWNER_CONFIG_KEY",
    "PENDING_OPERATION",
    "PINNED_FOR_LABEL",
    "REQUEST_ANNOTATIONS",
    "URGENT_ANNOTATIONS",
    "USER_CHANGE",
    "WATCH_LABEL",
    "MirrorHoldReason",
    "asks_now",
    "bytes_hash",
    "cluster_of",
    "dry_run_key",
    "iso",
    "java_string",
    "label_value",
    "name_stem",
]

API_GROUP = "connect-offsets.io"
API_VERSION = "v1beta1"

# --- resources (plurals, as in RBAC rules and API paths) ----------------------------------------

CONNECTORS = "kafkaconnectors"
MIRRORS = "kafkamirrormaker2s"
CLUSTERS = "connectclusters"
#: The plural of each kind, for a body that says its ``kind``.
PLURALS = {"KafkaConnector": CONNECTORS, "KafkaMirrorMaker2": MIRRORS, "ConnectCluster": CLUSTERS}

# --- annotations users write ---------------------------------------------------------------------

ANNOTATION_PREFIX = f"{API_GROUP}/"
#: ``list|alter|reset|restore``: the offsets request.
ANNOTATION_OFFSETS = ANNOTATION_PREFIX + "connector-offsets"
ANNOTATION_RESTART = ANNOTATION_PREFIX + "restart"
ANNOTATION_RESTART_TASK = ANNOTATION_PREFIX + "restart-task"
ANNOTATION_ADOPT = ANNOTATION_PREFIX + "adopt"
ANNOTATION_RESTORE_FROM = ANNOTATION_PREFIX + "restore-from"
#: ``true`` next to alter/reset/restore: compute and publish the diff, change nothing.
ANNOTATION_DRY_RUN = ANNOTATION_PREFIX + "dry-run"
#: ``<ConfigMap>`` next to ``alter`` and ``dry-run=true``: the dry run reads the document from that
#: ConfigMap of the resource's namespace (the connector's offsets key) instead of
#: spec.alterOffsets.fromConfigMap, so previewing a document never replaces the one a real alter reads
#: (the kubectl plugin's ``alter --from-file F --dry-run`` uses it).
ANNOTATION_DRY_RUN_FROM = ANNOTATION_PREFIX + "dry-run-from"
#: ``true`` next to alter/reset/restore: stop -> change -> resume for this request only.
ANNOTATION_STOP_CONNECTOR = ANNOTATION_PREFIX + "stop-connector"
#: Identity of a request; once handled (recorded in status) the same id is a no-op, so GitOps
#: tools re-applying removed annotations cannot repeat a reset.
ANNOTATION_REQUEST_ID = ANNOTATION_PREFIX + "request-id"
#: ``<RFC 3339 time>`` next to alter: seek a sink connector to that time (overrides spec.alterOffsets.toTimestamp).
ANNOTATION_SEEK_TO = ANNOTATION_PREFIX + "seek-to"
#: Which connector of a KafkaMirrorMaker2 an offsets request is for.
ANNOTATION_MM2_CONNECTOR = ANNOTATION_PREFIX + "mirrormaker-connector"
#: ``true`` next to a reset of a MirrorSourceConnector: also delete its offset-syncs topic.
ANNOTATION_RESET_OFFSET_SYNCS = ANNOTATION_PREFIX + "reset-offset-syncs"
#: ``<connector name>`` next to ``alter`` (KafkaConnector): the offsets come from that connector, read
#: at the request's first attempt and pinned in a ConfigMap of the resource, so a retry never reads a
#: newer position of a source that keeps moving (docs/moving-offsets.md).
ANNOTATION_ALTER_FROM_CONNECTOR = ANNOTATION_PREFIX + "alter-from-connector"
#: ``[<namespace>/]<ConnectCluster>`` next to ``alter-from-connector``: the cluster the source connector
#: runs on (default: the resource's own).
ANNOTATION_ALTER_FROM_CLUSTER = ANNOTATION_PREFIX + "alter-from-cluster"
#: On a KafkaConnector or KafkaMirrorMaker2, set by its owner: the namespaces (comma-separated) whose
#: resources may copy its connectors' offsets (``alter-from-connector``, ``initialOffsets.fromConnector``).
ANNOTATION_OFFSETS_READERS = ANNOTATION_PREFIX + "offsets-readers"
#: ``<consumer group>`` on a KafkaMirrorMaker2: translate the group's offsets through a mirror's
#: checkpoints and commit them for the group on the mirror's target cluster.
ANNOTATION_FAILOVER_GROUP = ANNOTATION_PREFIX + "failover-group"
#: ``<source cluster alias>`` next to ``failover-group``: which mirror (needed when several mirrors
#: of the resource have a checkpoint connector).
ANNOTATION_FAILOVER_FROM = ANNOTATION_PREFIX + "failover-from"
#: ``true`` next to ``failover-group``: the failover may commit a partial translation (the
#: partitions without a checkpoint start from ``auto.offset.reset``); refused without it. The
#: spec's ``groupFailover.allowPartial`` says the same for a declared failover.
ANNOTATION_ALLOW_PARTIAL = ANNOTATION_PREFIX + "allow-partial"
#: Annotations that belong to an offsets request and are removed with it.
REQUEST_ANNOTATIONS = (
    ANNOTATION_DRY_RUN,
    ANNOTATION_STOP_CONNECTOR,
    ANNOTATION_REQUEST_ID,
    ANNOTATION_SEEK_TO,
    ANNOTATION_DRY_RUN_FROM,
    ANNOTATION_ALTER_FROM_CONNECTOR,
    ANNOTATION_ALTER_FROM_CLUSTER,
)
OFFSETS_OPERATIONS = ("list", "alter", "reset", "restore")

# --- labels and keys the operator writes ----------------------------------------------------------

#: The ``instance`` of the last request whose annotations the operator removed (written in the same
#: patch as the removal). Tells a request whose removal was interrupted (a crash, conflicts) from a
#: new identical one: only the second runs (issue 30).
ANNOTATION_HANDLED_REQUEST = ANNOTATION_PREFIX + "handled-request"

#: Which ConnectCluster a resource uses.
CLUSTER_LABEL = f"{API_GROUP}/cluster"
#: The namespace of that ConnectCluster (default: the resource's own). A label and not "ns/name" in
#: the cluster label: label values cannot contain '/'.
CLUSTER_NAMESPACE_LABEL = f"{API_GROUP}/cluster-namespace"
#: ConfigMaps with this label are streamed to the operator (server-side selector on its watch), so
#: a change wakes the resources that read them at once; others are re-read every drift interval.
WATCH_LABEL = f"{API_GROUP}/watch"
#: On the ConfigMaps holding a pinned copy of offsets read from elsewhere (another connector, a
#: mirror's checkpoints): the resource they were pinned for (``label_value`` of its name).
PINNED_FOR_LABEL = f"{API_GROUP}/pinned-for"
#: Who last created a connector of a given name: one ConfigMap per (namespace, connector name),
#: labelled with the name's hash. It has no owner reference on purpose: it must outlive the
#: resource, like the offsets it speaks for.
LAST_OWNER_LABEL = f"{API_GROUP}/last-owner-of"
#: Written into each connector's config so that two resources (in any namespaces, or two
#: operators) never silently fight over one globally named connector.
OWNER_CONFIG_KEY = f"{API_GROUP}/owner"
#: The ConfigMap key an offsets document lives under: list writes it, alter reads it, backups and the
#: pipeline use it (a MirrorMaker 2 connector's document has a key of its own).
OFFSETS_KEY = "offsets.json"
#: Where someone else's words (Connect's answer, an API error, a list of failures) are quoted in a
#: condition, Event or status message, they are cut at this many characters: enough to read the cause,
#: bounded so a huge answer cannot grow the resource.
MAX_QUOTED_TEXT = 1024
#: The dry-run report's key next to ``offsets.json``.
DRY_RUN_KEY = "dry-run.json"

# --- MirrorMaker 2 -------------------------------------------------------------------------------

MIRROR_CLASSES = {
    "MirrorSourceConnector": "org.apache.kafka.connect.mirror.MirrorSourceConnector",
    "MirrorCheckpointConnector": "org.apache.kafka.connect.mirror.MirrorCheckpointConnector",
    "MirrorHeartbeatConnector": "org.apache.kafka.connect.mirror.MirrorHeartbeatConnector",
}
#: How the operator's MirrorMaker 2 connector names end (``<source>-><target>.<Kind>``).
MIRROR_CLASS_SUFFIXES = tuple(f".{kind}" for kind in MIRROR_CLASSES)


class MirrorHoldReason(StrEnum):
    """Reasons of the Ready condition of a mirror whose connectors are held back this pass.

    A contract between the mirror's checks (``planning.mirror_direction``, the reconcile layer's
    producer-override check) and what the KafkaMirrorMaker2 service does with a held mirror:
    retry with back-off (the cluster could not be asked), or stop its running connectors (refused).
    """

    #: Connect itself could not be asked (transient; nothing is stopped).
    CONNECT_CLUSTER_UNAVAILABLE = "ConnectClusterUnavailable"
    #: A mirror's Kafka cluster could not be asked for its id (transient; nothing is stopped).
    MIRROR_CLUSTER_UNREACHABLE = "MirrorClusterUnreachable"
    #: Refusals: the mirror's running connectors are stopped until the spec changes.
    MIRROR_ONTO_ITSELF = "MirrorOntoItself"
    TARGET_IS_NOT_CONNECT_CLUSTER = "TargetIsNotConnectCluster"
    PRODUCER_OVERRIDE_REFUSED = "ProducerOverrideRefused"


def dry_run_key(configmap_key: str) -> str:
    """Where a dry run's report goes in the listOffsets ConfigMap: ``dry-run.json`` next to
    ``offsets.json``; MirrorMaker 2 keys get a ``dry-run.`` prefix."""
    return DRY_RUN_KEY if configmap_key == OFFSETS_KEY else f"dry-run.{configmap_key}"


def iso(moment: datetime) -> str:
    """RFC 3339 in UTC with whole seconds, as Kubernetes writes times (a naive time is taken as UTC)."""
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def java_string(value: object) -> str:
    """A setting's value as Java reads it: booleans as ``true``/``false``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def short_hash(text: str, length: int = 16) -> str:
    """The first ``length`` hex digits of the SHA-256 of ``text``: how a name or a set of inputs that
    cannot appear as-is (in a label value, a ConfigMap name, a fingerprint) is written instead.
    Each caller keeps its length: the hashes are stored in labels and names users already have."""
    return bytes_hash(text.encode(), length)


def bytes_hash(data: bytes, length: int = 16) -> str:
    """``short_hash`` of UTF-8 bytes without decoding them (a document as stored)."""
    return hashlib.sha256(data).hexdigest()[:length]


def is_kopf_bookkeeping(key: str) -> bool:
    """kopf's own annotations under our prefix (progress, diff-base) do not change the request."""
    return key.startswith(ANNOTATION_PREFIX) and (
        key.endswith(("last-handled-configuration", "kopf-managed")) or "." in key.split("/", 1)[1]
    )


def request_view(body: Mapping[str, Any]) -> tuple[Any, ...]:
    """What a user changes to ask for something: spec (generation), annotations other than kopf's,
    labels, deletion. Our own status writes do not change it; comparing two views tells whether a
    resource asks for something new (a wake-up) or still asks for what a pass planned (the fresh
    read before a destructive change)."""
    meta = body.get("metadata") or {}
    annotations = {
        k: v
        for k, v in (meta.get("annotations") or {}).items()
        if not is_kopf_bookkeeping(k) and k != ANNOTATION_HANDLED_REQUEST
    }
    return (
        meta.get("generation"),
        tuple(sorted(annotations.items())),
        tuple(sorted((meta.get("labels") or {}).items())),
        meta.get("deletionTimestamp"),
    )


#: Annotations by which a user asks for something and waits (removed once it is done).
URGENT_ANNOTATIONS = (ANNOTATION_OFFSETS, ANNOTATION_RESTART, ANNOTATION_RESTART_TASK, ANNOTATION_FAILOVER_GROUP)
#: The status field of an offsets operation under way (stop -> change -> resume).
PENDING_OPERATION = "pendingOffsetsOperation"


#: True in a pass the work queue handed out at its urgent level: a change a user made woke it (an
#: annotation, a spec change, an edit of a ConfigMap the resource reads; ``asks_now`` sees only
#: the first two in the body). Set by the controller for the pass's task; such a pass, as one that
#: ``asks_now``, never waits for or defers to its cluster's first connector listing (attack review
#: of issue 45, F3: an ``applyOnChange`` edit waited for the whole listing).
USER_CHANGE: ContextVar[bool] = ContextVar("USER_CHANGE", default=False)


def asks_now(body: Mapping[str, Any]) -> bool:
    """Whether a KafkaConnector or KafkaMirrorMaker2 waits for a request: an offsets request,
    restart or failover annotation, an offsets operation under way, or a spec change not yet
    acted on (``metadata.generation`` past ``status.observedGeneration``).

    Why: controller-runtime's priority queue puts the events a user causes ahead of the initial
    list and resyncs; here a key is urgent when the event that queued it was a change a user made,
    or when the resource itself says a request is open, whatever queued it (a first sight after a
    start, a requeue while a connector stops, a retry). Such a pass also never waits for its
    cluster's first connector listing (it reads its connector on its own)."""
    meta = body.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    if any(a in annotations for a in URGENT_ANNOTATIONS):
        return True
    status = body.get("status") or {}
    if status.get(PENDING_OPERATION) is not None:
        return True
    generation = meta.get("generation")
    return generation is not None and status.get("observedGeneration") not in (None, generation)


#: Kubernetes refuses a label value longer than this (a resource name may be up to 253).
LABEL_VALUE_MAX = 63


def name_stem(name: str, length: int = 200) -> str:
    """The start of a resource's name, for the name of an object made for it (``<stem>-backup-…``).

    Why the strip: a DNS subdomain's dot-separated parts end in an alphanumeric character, and a
    cut that ends on ``.`` or ``-`` (a 253-character name with a dot at 200) would make every such
    object's name one the API server refuses, wedging the resource for good.
    """
    return name[:length].rstrip("-.")


def label_value(name: str) -> str:
    """A resource name as a label value: itself when it fits, else a prefix and its hash.

    Why: object names may be DNS subdomains of 253 characters, label values at most 63, and a
    resource whose name went into a label as it is could never be backed up or listed. Every
    selector goes through this function too, so the two always agree; names of 63 characters or
    fewer keep their old label values. The full name stays in the object's annotations.
    """
    if len(name) <= LABEL_VALUE_MAX:
        return name
    digest = short_hash(name, 12)
    # A label value must start and end with an alphanumeric character.
    return f"{name[: LABEL_VALUE_MAX - 13].rstrip('-._')}-{digest}"


def cluster_of(plural: str, namespace: str, name: str, labels: Mapping[str, str]) -> tuple[str, str]:
    """The ConnectCluster (namespace, name) a resource is bound to; a ConnectCluster is its own.
    A resource without the cluster label is bound to ``(namespace, "")``: it lands in one shard,
    which reports that the label is missing."""
    if plural == CLUSTERS:
        return namespace, name
    return labels.get(CLUSTER_NAMESPACE_LABEL) or namespace, labels.get(CLUSTER_LABEL, "")
