"""Which keys go ahead of the checks in the work queue: those of resources a user waits for.

Why apart from the queue: the queue knows keys, not resources (``queue``); what a user waits for
is read from the resource as the watch last showed it. controller-runtime's priority queue puts
the events a user causes ahead of the initial list and resyncs; here a key is urgent when the
event that queued it was a change a user made (the controller says so when it adds the key) or
when the resource itself says a request is open, whatever queued it: a first sight after a
start (a request made while the operator was down), a requeue while a connector stops, a retry.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from connect_offsets.vocabulary import (
    ANNOTATION_FAILOVER_GROUP,
    ANNOTATION_OFFSETS,
    ANNOTATION_RESTART,
    ANNOTATION_RESTART_TASK,
)

__all__ = ["PENDING_OPERATION", "URGENT_ANNOTATIONS", "asks_now"]

#: Annotations by which a user asks for something and waits (removed once it is done).
URGENT_ANNOTATIONS = (ANNOTATION_OFFSETS, ANNOTATION_RESTART, ANNOTATION_RESTART_TASK, ANNOTATION_FAILOVER_GROUP)
#: The status field of an offsets operation under way (stop -> change -> resume).
PENDING_OPERATION = "pendingOffsetsOperation"


def asks_now(body: Mapping[str, Any]) -> bool:
    """Whether a KafkaConnector or KafkaMirrorMaker2 waits for a request: an offsets request,
    restart or failover annotation, an offsets operation under way, or a spec change not yet
    acted on (``metadata.generation`` past ``status.observedGeneration``)."""
    meta = body.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    if any(a in annotations for a in URGENT_ANNOTATIONS):
        return True
    status = body.get("status") or {}
    if status.get(PENDING_OPERATION) is not None:
        return True
    generation = meta.get("generation")
    return generation is not None and status.get("observedGeneration") not in (None, generation)
