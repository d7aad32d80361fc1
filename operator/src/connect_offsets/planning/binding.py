"""Which Connect cluster a resource may use: allowed namespaces, the connector name prefix, and
leftover offsets owned by another resource.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from connect_offsets.models.crds import (
    ConnectClusterSpec,
)

# --- leftover offsets of an earlier connector -------------------------------------------------


def leftovers_owned_elsewhere(records: list[tuple[str, str]], namespace: str) -> str | None:
    """The owner (``ns/name``) of leftover offsets when it is a resource of another namespace, else None.

    ``records``: (owner, ISO time) of every record the operator kept of a resource that created a
    connector of this name. Connect does not say who left offsets behind; the newest record does:
    it names the last resource that created the name. No record (a hand-made connector) or a
    newest record in ``namespace`` -> the leftovers may be wiped; another namespace's -> never.
    Times are the operator's own clock (one active operator), compared as ISO text; an equal
    time is settled by the owner text so the answer does not depend on the listing order.
    """
    if not records:
        return None
    owner, _ = max(records, key=lambda r: (r[1], r[0]))
    return None if owner.partition("/")[0] == namespace else owner


# --- binding a resource to a ConnectCluster ------------------------------------------------

NAMESPACE_PLACEHOLDER = "{namespace}"


@dataclass(frozen=True)
class BindingRefusal:
    """Why a resource may not use a ConnectCluster: a condition reason and its message."""

    reason: Literal["ClusterNotAllowed", "ConnectorNameNotAllowed"]
    message: str


def connector_name_prefix(spec: ConnectClusterSpec, namespace: str) -> str:
    """The prefix connector names of resources in ``namespace`` must have ('' = any name)."""
    return (spec.connector_name_prefix or "").replace(NAMESPACE_PLACEHOLDER, namespace)


def check_binding(
    spec: ConnectClusterSpec,
    cluster_namespace: str,
    cluster_name: str,
    namespace: str,
    connector_names: tuple[str, ...] | list[str],
) -> BindingRefusal | None:
    """May a resource in ``namespace`` with these connectors use this ConnectCluster?

    The cluster's own namespace always may; another only if ``spec.allowedNamespaces`` lists it
    (empty = nobody else), so a tenant cannot use a platform's Connect cluster, or its
    credentials, unless the platform says so. Every connector name must start with the cluster's
    ``connectorNamePrefix`` (``{namespace}`` = the resource's namespace): with ``"{namespace}-"``
    no tenant can create, adopt or reuse the offsets of another namespace's connector names. A
    namespace may be a prefix of another (``team`` and ``team-a``); the platform picks a
    prefix whose separator cannot occur in namespace names ("{namespace}." or "{namespace}--"
    ... ) when that matters: documented, not guessed here.
    """
    where = f"ConnectCluster {cluster_namespace}/{cluster_name}"
    if namespace != cluster_namespace and namespace not in spec.allowed_namespaces:
        return BindingRefusal(
            "ClusterNotAllowed",
            f"{where} does not list namespace {namespace} in spec.allowedNamespaces; nothing was done. Ask the "
            f"owner of {where} to add it, or use a ConnectCluster in namespace {namespace}",
        )
    prefix = connector_name_prefix(spec, namespace)
    wrong = [name for name in connector_names if not name.startswith(prefix)]
    if wrong:
        shown = ", ".join(wrong[:5]) + (f" and {len(wrong) - 5} more" if len(wrong) > 5 else "")
        return BindingRefusal(
            "ConnectorNameNotAllowed",
            f"{where} requires connector names in namespace {namespace} to start with {prefix!r} "
            f"(spec.connectorNamePrefix {spec.connector_name_prefix!r}); not: {shown}. Nothing was created: "
            "rename it (a KafkaConnector's connector is named after the resource; a MirrorMaker 2 connector "
            "starts with its source cluster alias)",
        )
    return None
