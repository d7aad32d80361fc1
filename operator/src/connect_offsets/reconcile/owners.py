"""Owner records: which resource last created a connector of a given name on a given Connect
cluster, kept where no tenant writes.

Why separate: Connect keeps a deleted connector's offsets but not who owned them. Creating a
connector (``lifecycle``) writes the record; initial offsets (``initial``) read it before wiping
leftovers, so one tenant never wipes another's. Both sides of that contract live here, next to
each other.

Why in the operator's own namespace (``settings.owner_records_namespace``, the chart's release
namespace): a record decides whether one namespace's request may wipe what another left, so a
record a tenant could write would let it block another tenant's ``initialOffsets`` at will, or
claim another's leftovers. Only the operator (and the platform team) can write there.

Why keyed by the Connect cluster as well as the name: leftovers live in one Connect cluster's
offsets topic, so only a connector created there can be their owner. Keyed by the name alone, a
tenant creating a same-named connector on a Connect cluster of its own rewrote another tenant's
record (issue 43). The cluster is known by the Kafka cluster id its worker reports (``GET /``);
the REST API does not give ``group.id``, so Connect clusters sharing one Kafka cluster share
records, which can only refuse more wipes, never allow one. A server that reports no id (every
Connect the operator supports does; a tenant's own fake need not) gets no record written: the
name-only key it would fall back to is the one every cluster's leftovers were recorded under
before, so writing it would let any server rewrite them. Such a server's leftovers are checked
against the name-only records, as before.

Records of the name alone (earlier versions, or such workers) are still read when this cluster
has no record of the name; they are no longer written by a worker that reports an id, so after
the upgrade another cluster's connector cannot rewrite them. Records written by earlier versions
in each resource's own namespace are still read when the trusted place has none (leftovers of
connectors created before the trusted place), but only to refuse a wipe, and only as far as a
namespace can speak for itself: a record is believed only about resources of its own namespace.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from connect_offsets.clients.kubernetes import KubernetesError, KubernetesRejected, KubernetesUnavailable
from connect_offsets.planning import leftovers_owned_elsewhere
from connect_offsets.reconcile import settings
from connect_offsets.reconcile.context import OffsetsRequestInvalid, Pass
from connect_offsets.vocabulary import API_GROUP, LAST_OWNER_LABEL, short_hash

_CONNECTOR = f"{API_GROUP}/connector"
_CLUSTER = f"{API_GROUP}/kafka-cluster-id"
_OWNER = f"{API_GROUP}/owner"
_TIME = f"{API_GROUP}/time"


@dataclass(frozen=True)
class RecordKey:
    """What one record is about: connector ``name`` on the Connect cluster whose Kafka cluster id is
    ``cluster`` (None: the name alone, as earlier versions keyed every record)."""

    cluster: str | None
    name: str

    @property
    def digest(self) -> str:
        """The record's hash (its name and ``LAST_OWNER_LABEL``): names and ids may be longer than a
        label value and hold characters a ConfigMap name cannot."""
        return short_hash(self.name if self.cluster is None else f"{self.cluster}/{self.name}")

    @property
    def record_name(self) -> str:
        return f"connect-offsets-owner-{self.digest}"

    def describes(self, annotations: Mapping[str, str]) -> bool:
        """Whether a record found by this key's hash is about this key: another key of the same hash
        (a name, or a cluster and a name) is not believed."""
        return annotations.get(_CONNECTOR) == self.name and annotations.get(_CLUSTER) == self.cluster


def record_keys(p: Pass, name: str) -> list[RecordKey]:
    """The keys to read for ``name`` in this pass, the one that decides first: this Connect
    cluster's, then the name-only key of records written before it (the only one when the worker
    reports no Kafka cluster id). The first is the one ``record_owner`` writes."""
    cluster = p.info.kafka_cluster_id or None
    return [RecordKey(None, name)] if cluster is None else [RecordKey(cluster, name), RecordKey(None, name)]


async def record_owner(p: Pass, name: str) -> None:
    """Note that this resource is now the last owner of connector ``name`` on this Connect cluster.

    Connect keeps a deleted connector's offsets but not who owned them; this record is what
    lets ``initialOffsets`` tell leftovers of this namespace from another tenant's. Best
    effort: without it, a later initialOffsets of another namespace would wipe leftovers of
    this one, so a failure is reported as a Warning Event, not hidden. The name-only record is
    not updated when the worker reports a cluster id: any Connect cluster's connector could
    rewrite it, which is the attack the cluster key closes; for the same reason nothing is
    written for a server that reports no Kafka cluster id.
    """
    namespace = settings.owner_records_namespace() or p.namespace
    key = record_keys(p, name)[0]
    if key.cluster is None:
        return  # no cluster id: see the module's docstring
    labels = {"app.kubernetes.io/managed-by": "connect-offsets-operator", LAST_OWNER_LABEL: key.digest}
    annotations = {
        _CONNECTOR: name,
        _CLUSTER: key.cluster,
        _OWNER: f"{p.namespace}/{p.body['metadata']['name']}",
        _TIME: datetime.now(UTC).isoformat(),
    }
    metadata = {"labels": labels, "annotations": annotations}
    try:
        try:
            await p.kube.create_configmap(namespace, {"metadata": {"name": key.record_name, **metadata}})
        except KubernetesUnavailable as error:
            if error.status != 409:
                raise
            await p.kube.patch_configmap(namespace, key.record_name, {"metadata": metadata})
    except KubernetesError as error:
        p.event("Warning", "OwnerRecordNotWritten", f"{name}: could not record this resource as its owner: {error}")


def _unknown(name: str, count: int, error: KubernetesError) -> OffsetsRequestInvalid:
    return OffsetsRequestInvalid(
        "LeftoverOffsetsOwnerUnknown",
        f"Connect holds {count} offset(s) of an earlier connector {name}; who owned it could not be "
        f"checked ({error}), so they were not wiped",
    )


def _refusal(name: str, count: int, owner: str) -> OffsetsRequestInvalid:
    return OffsetsRequestInvalid(
        "LeftoverOffsetsOwnedElsewhere",
        f"Connect holds {count} offset(s) left by connector {name} of {owner} (namespace "
        f"{owner.partition('/')[0]}); initialOffsets wipes only leftovers of this namespace. Nothing "
        "was changed: rename this resource, or have that namespace's team delete those offsets",
    )


async def check_leftovers_owner(p: Pass, name: str, count: int) -> None:
    """Refuse to wipe leftover offsets whose last owner (see ``record_owner``) was in another namespace.

    The first record of ``record_keys`` in the trusted place decides: this cluster's, else the
    name-only one. Leftovers without any record (a hand-made connector) are wiped as before;
    leftovers of this namespace too.
    """
    keys = record_keys(p, name)
    trusted = settings.owner_records_namespace()
    if trusted is not None:
        for key in keys:
            try:
                record = await p.kube.get_configmap(trusted, key.record_name)
            except KubernetesRejected as error:
                raise _unknown(name, count, error) from error
            if record is not None and key.describes(record.annotations):
                owner = leftovers_owned_elsewhere([(record.annotations.get(_OWNER, ""), "")], p.namespace)
                if owner is not None:
                    raise _refusal(name, count, owner)
                return
    await _check_tenant_records(p, keys, count, refuse_only=trusted is not None)


async def _check_tenant_records(p: Pass, keys: list[RecordKey], count: int, *, refuse_only: bool) -> None:
    """The records kept in the resources' own namespaces (all records before the trusted place,
    and still where the operator has none): each believed only about its own namespace. With
    ``refuse_only`` (a trusted place exists) any such record of another namespace refuses, and
    the newest does not decide: a tenant's own record can never outweigh another's. Without, the
    records of the first key that has any decide, the newest of them."""
    name = keys[0].name
    selector = f"{LAST_OWNER_LABEL} in ({','.join(key.digest for key in keys)})"
    try:
        if settings.WATCHED_NAMESPACES is None:
            found = await p.kube.list_configmap_metadata(None, selector)
        else:
            found = [
                m for ns in settings.WATCHED_NAMESPACES for m in await p.kube.list_configmap_metadata(ns, selector)
            ]
    except KubernetesRejected as error:
        raise _unknown(name, count, error) from error
    by_key = [
        [
            (m.annotations.get(_OWNER, ""), m.annotations.get(_TIME, ""))
            for m in found
            if key.describes(m.annotations)  # not another key of the same hash
            and (not m.namespace or m.annotations.get(_OWNER, "").partition("/")[0] == m.namespace)
        ]
        for key in keys
    ]
    if refuse_only:
        elsewhere = sorted(
            owner for records in by_key for owner, _ in records if owner.partition("/")[0] != p.namespace
        )
        if elsewhere:
            raise _refusal(name, count, elsewhere[0])
        return
    owner = leftovers_owned_elsewhere(next((records for records in by_key if records), []), p.namespace)
    if owner is not None:
        raise _refusal(name, count, owner)
