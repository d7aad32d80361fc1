"""Owner records: which resource last created a connector of a given name, kept where no tenant writes.

Why separate: Connect keeps a deleted connector's offsets but not who owned them. Creating a
connector (``lifecycle``) writes the record; initial offsets (``initial``) read it before wiping
leftovers, so one tenant never wipes another's. Both sides of that contract live here, next to
each other.

Why in the operator's own namespace (``settings.owner_records_namespace``, the chart's release
namespace): a record decides whether one namespace's request may wipe what another left, so a
record a tenant could write would let it block another tenant's ``initialOffsets`` at will, or
claim another's leftovers. One ConfigMap per connector name holds the last owner; only the
operator (and the platform team) can write there.

Records written by earlier versions, in each resource's own namespace, are still read when the
trusted place has none for a name (leftovers of connectors created before the upgrade), but
only to refuse a wipe, and only as far as a namespace can speak for itself: a record is believed
only about resources of the namespace it is kept in.
"""

from __future__ import annotations

from datetime import UTC, datetime

from connect_offsets.clients.kubernetes import KubernetesError, KubernetesRejected, KubernetesUnavailable
from connect_offsets.planning import leftovers_owned_elsewhere
from connect_offsets.reconcile import settings
from connect_offsets.reconcile.context import OffsetsRequestInvalid, Pass
from connect_offsets.vocabulary import API_GROUP, LAST_OWNER_LABEL, short_hash

_CONNECTOR = f"{API_GROUP}/connector"
_OWNER = f"{API_GROUP}/owner"
_TIME = f"{API_GROUP}/time"


def _owner_record_hash(name: str) -> str:
    return short_hash(name)


def _record_name(name: str) -> str:
    return f"connect-offsets-owner-{_owner_record_hash(name)}"


async def record_owner(p: Pass, name: str) -> None:
    """Note that this resource is now the last owner of connector ``name``.

    Connect keeps a deleted connector's offsets but not who owned them; this record is what
    lets ``initialOffsets`` tell leftovers of this namespace from another tenant's. Best
    effort: without it, a later initialOffsets of another namespace would wipe leftovers of
    this one, so a failure is reported as a Warning Event, not hidden.
    """
    namespace = settings.owner_records_namespace() or p.namespace
    digest, record_name = _owner_record_hash(name), _record_name(name)
    annotations = {
        _CONNECTOR: name,
        _OWNER: f"{p.namespace}/{p.body['metadata']['name']}",
        _TIME: datetime.now(UTC).isoformat(),
    }
    record = {
        "metadata": {
            "name": record_name,
            "labels": {"app.kubernetes.io/managed-by": "connect-offsets-operator", LAST_OWNER_LABEL: digest},
            "annotations": annotations,
        }
    }
    try:
        try:
            await p.kube.create_configmap(namespace, record)
        except KubernetesUnavailable as error:
            if error.status != 409:
                raise
            await p.kube.patch_configmap(namespace, record_name, {"metadata": {"annotations": annotations}})
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

    The record names the last resource that created the connector. Leftovers without any record
    (a hand-made connector) are wiped as before; leftovers of this namespace too.
    """
    trusted = settings.owner_records_namespace()
    if trusted is not None:
        try:
            record = await p.kube.get_configmap(trusted, _record_name(name))
        except KubernetesRejected as error:
            raise _unknown(name, count, error) from error
        if record is not None and record.annotations.get(_CONNECTOR) == name:  # not another name of the same hash
            owner = leftovers_owned_elsewhere([(record.annotations.get(_OWNER, ""), "")], p.namespace)
            if owner is not None:
                raise _refusal(name, count, owner)
            return
    await _check_tenant_records(p, name, count, refuse_only=trusted is not None)


async def _check_tenant_records(p: Pass, name: str, count: int, *, refuse_only: bool) -> None:
    """The records kept in the resources' own namespaces (all records before the trusted place,
    and still where the operator has none): each believed only about its own namespace. With
    ``refuse_only`` (a trusted place exists) any such record of another namespace refuses, and
    the newest does not decide: a tenant's own record can never outweigh another's."""
    selector = f"{LAST_OWNER_LABEL}={_owner_record_hash(name)}"
    try:
        if settings.WATCHED_NAMESPACES is None:
            found = await p.kube.list_configmap_metadata(None, selector)
        else:
            found = [
                m for ns in settings.WATCHED_NAMESPACES for m in await p.kube.list_configmap_metadata(ns, selector)
            ]
    except KubernetesRejected as error:
        raise _unknown(name, count, error) from error
    records = [
        (m.annotations.get(_OWNER, ""), m.annotations.get(_TIME, ""))
        for m in found
        if m.annotations.get(_CONNECTOR) == name  # not another name of the same hash
        and (not m.namespace or m.annotations.get(_OWNER, "").partition("/")[0] == m.namespace)
    ]
    if refuse_only:
        elsewhere = sorted(owner for owner, _ in records if owner.partition("/")[0] != p.namespace)
        if elsewhere:
            raise _refusal(name, count, elsewhere[0])
        return
    owner = leftovers_owned_elsewhere(records, p.namespace)
    if owner is not None:
        raise _refusal(name, count, owner)
