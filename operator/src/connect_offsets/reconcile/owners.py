"""Owner records: which resource last created a connector of a given name, kept in its namespace.

Why separate: Connect keeps a deleted connector's offsets but not who owned them. Creating a
connector (``lifecycle``) writes the record; initial offsets (``initial``) read every record of the
name before wiping leftovers, so one tenant never wipes another's. Both sides of that contract live
here, next to each other.
"""

from __future__ import annotations

from datetime import UTC, datetime

from connect_offsets.clients.kubernetes import KubernetesError, KubernetesRejected, KubernetesUnavailable
from connect_offsets.planning import leftovers_owned_elsewhere
from connect_offsets.reconcile import settings
from connect_offsets.reconcile.context import OffsetsRequestInvalid, Pass
from connect_offsets.vocabulary import API_GROUP, LAST_OWNER_LABEL, short_hash


def _owner_record_hash(name: str) -> str:
    return short_hash(name)


async def record_owner(p: Pass, name: str) -> None:
    """Note in the resource's namespace that it is now the last owner of connector ``name``.

    Connect keeps a deleted connector's offsets but not who owned them; this record is what
    lets ``initialOffsets`` tell leftovers of this namespace from another tenant's. Best
    effort: without it, a later initialOffsets of another namespace would wipe leftovers of
    this one, so a failure is reported as a Warning Event, not hidden.
    """
    namespace, digest = p.namespace, _owner_record_hash(name)
    record_name = f"connect-offsets-owner-{digest}"
    annotations = {
        f"{API_GROUP}/connector": name,
        f"{API_GROUP}/owner": f"{namespace}/{p.body['metadata']['name']}",
        f"{API_GROUP}/time": datetime.now(UTC).isoformat(),
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


async def check_leftovers_owner(p: Pass, name: str, count: int) -> None:
    """Refuse to wipe leftover offsets whose last owner (see ``record_owner``) was in another namespace.

    The newest record of this connector name in the watched namespaces names the last
    resource that created it. Leftovers without any record (a hand-made connector) are
    wiped as before; leftovers of this namespace too.
    """
    selector = f"{LAST_OWNER_LABEL}={_owner_record_hash(name)}"
    try:
        if settings.WATCHED_NAMESPACES is None:
            found = await p.kube.list_configmap_metadata(None, selector)
        else:
            found = [
                m for ns in settings.WATCHED_NAMESPACES for m in await p.kube.list_configmap_metadata(ns, selector)
            ]
    except KubernetesRejected as error:
        raise OffsetsRequestInvalid(
            "LeftoverOffsetsOwnerUnknown",
            f"Connect holds {count} offset(s) of an earlier connector {name}; who owned it could not be "
            f"checked ({error}), so they were not wiped",
        ) from error
    records = [
        (m.annotations.get(f"{API_GROUP}/owner", ""), m.annotations.get(f"{API_GROUP}/time", ""))
        for m in found
        if m.annotations.get(f"{API_GROUP}/connector") == name  # not another name of the same hash
    ]
    owner = leftovers_owned_elsewhere(records, p.namespace)
    if owner is not None:
        raise OffsetsRequestInvalid(
            "LeftoverOffsetsOwnedElsewhere",
            f"Connect holds {count} offset(s) left by connector {name} of {owner} (namespace "
            f"{owner.partition('/')[0]}); initialOffsets wipes only leftovers of this namespace. Nothing "
            "was changed: rename this resource, or have that namespace's team delete those offsets",
        )
