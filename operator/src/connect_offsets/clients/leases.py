"""``coordination.k8s.io/v1`` Leases: the records by which replicas agree who works on a ConnectCluster.

Why a module of its own, with its own two threads: a Lease must be renewed before its renew
deadline whatever else the replica is doing. Through ``KubernetesApi``'s pool, a renewal waited
behind eight slow status writes or ConfigMap reads of a busy replica, and a busy replica must not
lose its Leases for being busy. The calls are plain LIST, POST, PUT (with the resourceVersion read:
a conflict means someone else wrote the Lease) and DELETE (with that resourceVersion too).

The timestamps are written as Kubernetes' ``MicroTime`` (RFC 3339, six fractional digits) for
``kubectl get lease`` and people; no decision reads them: replicas' clocks may disagree, so each
replica judges a Lease by when *it* saw the record change (``controller/leases.py``).
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
import functools
import math
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from connect_offsets.clients.kubernetes import KubernetesRejected, KubernetesUnavailable
from connect_offsets.vocabulary import API_GROUP

__all__ = ["LEASE_LABEL", "LeaseApi", "LeaseConflict", "LeaseRecord", "LeaseWrite", "micro_time"]

T = TypeVar("T")

#: Every Lease this operator writes carries this label (value: the operator's lease prefix), so one
#: LIST with a label selector returns them all and nothing else in the namespace.
LEASE_LABEL = f"{API_GROUP}/lease-of"
#: The ConnectCluster a Lease is for, for people (``kubectl get lease -L``); names are hashes.
CLUSTER_ANNOTATION = f"{API_GROUP}/connect-cluster"

_LEASE_POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="leases")
_CONFIRM_POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="lease-reads")
#: Seconds a Lease call may take: an answer later than this is no answer (the renew deadline decides).
REQUEST_TIMEOUT_S = 5.0


class LeaseConflict(KubernetesUnavailable):
    """The Lease changed since it was read (409), or is already there (POST 409), or is gone (404
    on PUT or DELETE): someone else wrote it; read again before deciding anything."""


@dataclass(frozen=True)
class LeaseRecord:
    """A Lease as read: who holds it, for how long, and the version to write against."""

    name: str
    holder: str  # "" when released
    duration_s: float
    transitions: int
    resource_version: str
    cluster: str  # the ConnectCluster ("namespace/name") it is for, from the annotation
    #: The object's uid: a write over this record names it, so that a Lease deleted since is not
    #: made again by that write (``replace``).
    uid: str = ""


@dataclass(frozen=True)
class LeaseWrite:
    """What a replica writes into a Lease: its identity (or "" to release), the transitions
    count, and the time it (re)acquired it."""

    holder: str
    duration_s: float
    transitions: int
    acquired: datetime
    renewed: datetime


def micro_time(moment: datetime) -> str:
    """``MicroTime`` as the API server parses it (``2006-01-02T15:04:05.000000Z07:00``)."""
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaseApi:
    """The operator's Leases in one namespace."""

    def __init__(self, api_client: client.ApiClient, namespace: str, prefix: str) -> None:
        # A client of its own without urllib3's retries: the default retries a read timeout three
        # times, and a tick of the Lease keeper then hung 20 s on an API server that stopped
        # answering (test_replicas), past the renew deadline it is there to keep.
        configuration = copy.copy(api_client.configuration)
        configuration.retries = 0
        self._api = client.CoordinationV1Api(client.ApiClient(configuration))
        self.namespace = namespace
        self.prefix = prefix

    async def _call(
        self, what: str, func: Callable[..., T], *args: Any, pool: ThreadPoolExecutor = _LEASE_POOL, **kwargs: Any
    ) -> T:
        kwargs["_request_timeout"] = REQUEST_TIMEOUT_S
        try:
            call = functools.partial(contextvars.copy_context().run, func, *args, **kwargs)
            future = asyncio.get_running_loop().run_in_executor(pool, call)
            # Bounded here too: with both threads stuck on a silent API server, a call would queue.
            return await asyncio.wait_for(future, REQUEST_TIMEOUT_S + 1)
        except TimeoutError as error:
            raise KubernetesUnavailable(f"{what}: no answer in {REQUEST_TIMEOUT_S + 1:.0f} s") from error
        except ApiException as error:
            message = f"{what}: {error.status} {error.reason}"
            if error.status in (404, 409):
                raise LeaseConflict(message, error.status) from error
            if error.status == 429 or (error.status or 0) >= 500:
                raise KubernetesUnavailable(message, error.status) from error
            raise KubernetesRejected(message, error.status or 0) from error
        except (urllib3.exceptions.HTTPError, OSError) as error:
            raise KubernetesUnavailable(f"{what}: {type(error).__name__}") from error

    async def list(self) -> dict[str, LeaseRecord]:
        """Every Lease of this operator in the namespace, by name."""
        answer: Any = await self._call(
            f"list Leases in {self.namespace}",
            self._api.list_namespaced_lease,
            self.namespace,
            label_selector=f"{LEASE_LABEL}={self.prefix}",
        )
        records = [_record(item) for item in answer.items or []]
        return {record.name: record for record in records}

    async def get(self, name: str) -> LeaseRecord | None:
        """One Lease (None: absent), through threads of its own: a new holder confirms its term
        once per resource it takes over (thousands after a take-over), and those reads must not
        queue in front of the renewals."""
        try:
            answer: Any = await self._call(
                f"get Lease {self.namespace}/{name}",
                self._api.read_namespaced_lease,
                name,
                self.namespace,
                pool=_CONFIRM_POOL,
            )
        except LeaseConflict as error:
            if error.status == 404:
                return None
            raise
        return _record(answer)

    async def create(self, name: str, cluster: str, write: LeaseWrite) -> LeaseRecord:
        body = self._body(name, cluster, write, resource_version=None)
        answer: Any = await self._call(
            f"create Lease {self.namespace}/{name}", self._api.create_namespaced_lease, self.namespace, body
        )
        return _record(answer)

    async def replace(self, record: LeaseRecord, write: LeaseWrite) -> LeaseRecord:
        """Write ``write`` over ``record``, only if the Lease is still at ``record``'s version.

        With its uid too: the API server creates a Lease on update (its strategy allows it), and
        ignores the stale resourceVersion then, so a renewal right after the Lease was deleted (by
        hand, an etcd restore) made it again under the old holder, which never saw it go
        (test_replicas, retried in make test; checked on the stack: 409 with the uid)."""
        body = self._body(record.name, record.cluster, write, resource_version=record.resource_version)
        if record.uid:
            body["metadata"]["uid"] = record.uid
        answer: Any = await self._call(
            f"update Lease {self.namespace}/{record.name}",
            self._api.replace_namespaced_lease,
            record.name,
            self.namespace,
            body,
        )
        return _record(answer)

    async def delete(self, record: LeaseRecord) -> None:
        """Delete the Lease, only if it is still at ``record``'s version."""
        await self._call(
            f"delete Lease {self.namespace}/{record.name}",
            self._api.delete_namespaced_lease,
            record.name,
            self.namespace,
            body={"preconditions": {"resourceVersion": record.resource_version}},
        )

    def _body(self, name: str, cluster: str, write: LeaseWrite, resource_version: str | None) -> dict[str, Any]:
        metadata: dict[str, Any] = {
            "name": name,
            "namespace": self.namespace,
            "labels": {LEASE_LABEL: self.prefix, "app.kubernetes.io/managed-by": "connect-offsets-operator"},
            "annotations": {CLUSTER_ANNOTATION: cluster},
        }
        if resource_version is not None:
            metadata["resourceVersion"] = resource_version
        spec: dict[str, Any] = {
            # An integer field: rounded up, never down, or a taker reading it would wait less than
            # the holder's own renew deadline (attack review helper-43: --lease-duration 10.4).
            "leaseDurationSeconds": max(1, math.ceil(write.duration_s)),
            "leaseTransitions": write.transitions,
            "acquireTime": micro_time(write.acquired),
            "renewTime": micro_time(write.renewed),
        }
        if write.holder:
            spec["holderIdentity"] = write.holder
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata, "spec": spec}


def _record(lease: Any) -> LeaseRecord:
    meta = lease.metadata
    spec = lease.spec or client.V1LeaseSpec()
    return LeaseRecord(
        name=str(meta.name),
        holder=str(spec.holder_identity or ""),
        duration_s=float(spec.lease_duration_seconds or 0),
        transitions=int(spec.lease_transitions or 0),
        resource_version=str(meta.resource_version or ""),
        cluster=str((meta.annotations or {}).get(CLUSTER_ANNOTATION, "")),
        uid=str(meta.uid or ""),
    )
