"""``kubectl connect-offsets lag NAME``: a KafkaConnector's ``status.progress`` and ``Progressing``
condition, or a KafkaMirrorMaker2's ``status.replicationLag``, whichever is named NAME (both: say which,
``cokc/NAME``, ``mm2/NAME`` or ``--kind``); read only.

A read-only view rather than an annotation request, so it is not a Runner operation.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from connect_offsets.clients.kubernetes import KubernetesApi, KubernetesError
from connect_offsets.tools.kubectl.api import api_host, kube_error, load_kube
from connect_offsets.tools.kubectl.common import (
    CONNECTOR,
    EXIT_OK,
    EXIT_USAGE,
    MIRROR,
    PLUGIN,
    Kind,
    PluginError,
    split_name,
)
from connect_offsets.tools.kubectl.parser import DEFAULTS, REQUEST_ONLY, build_parser, connection
from connect_offsets.tools.kubectl.render import emit, is_document, resource_name, serialize


def render_lag(body: dict[str, Any], *, wide: bool = False) -> str:
    """``status.replicationLag`` of a KafkaMirrorMaker2 as a table, with the ReplicationLagging condition.

    Each mirror's message (why it is stale) follows the table, or with ``wide`` is its last column.
    """
    status = body.get("status") or {}
    lag = status.get("replicationLag") or {}
    header: tuple[str, ...] = (
        "MIRROR",
        "CONNECTOR",
        "PARTITIONS",
        "TOTAL",
        "MAX",
        "WORST PARTITION",
        "MEASURED",
        "STALE",
    )
    rows: list[tuple[str, ...]] = [header]
    for mirror in lag.get("mirrors") or []:
        worst = mirror.get("worstPartition") or {}
        rows.append(
            (
                f"{mirror.get('sourceCluster', '?')}->{mirror.get('targetCluster', '?')}",
                str(mirror.get("connector", "")),
                str(mirror.get("partitions", "-")),
                str(mirror.get("total", "-")),
                str(mirror.get("max", "-")),
                f"{worst['topic']}/{worst['partition']} ({worst['lag']})" if worst else "-",
                str(mirror.get("measuredAt") or "never"),
                "yes" if mirror.get("stale") else "no",
            )
        )
    if wide:
        rows[0] = (*header, "MESSAGE")
        for index, mirror in enumerate(lag.get("mirrors") or [], start=1):
            rows[index] = (*rows[index], " ".join(str(mirror.get("message") or "-").split()))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]
    if len(rows) == 1:
        lines = [f"no replication lag reported: {lag.get('message') or 'the operator has not measured it yet'}"]
    if len(rows) > 2 and "total" in lag:
        lines.append(f"all mirrors: total {lag['total']}, max {lag.get('max')}")
    found = next((c for c in status.get("conditions") or [] if c.get("type") == "ReplicationLagging"), None)
    if found is not None:
        lines.append(f"ReplicationLagging={found.get('status')} ({found.get('reason')}): {found.get('message')}")
    for mirror in lag.get("mirrors") or []:
        if mirror.get("message") and not wide:
            lines.append(f"{mirror.get('sourceCluster')}->{mirror.get('targetCluster')}: {mirror['message']}")
    return "\n".join(lines)


def render_connector_lag(body: dict[str, Any], *, wide: bool = False) -> str:
    """``status.progress`` of a KafkaConnector as a one-row table, with the Progressing condition."""
    status = body.get("status") or {}
    progress = status.get("progress") or {}
    state = ((status.get("connectorStatus") or {}).get("connector") or {}).get("state", "-")
    header: tuple[str, ...] = ("CONNECTOR", "TYPE", "STATE", "LAG", "PARTITIONS BEHIND", "PARTITIONS", "LAST MOVED")
    row: tuple[str, ...] = (
        str((body.get("metadata") or {}).get("name", "")),
        str(progress.get("type", "-")),
        str(state),
        str(progress.get("totalLag", "-")),
        str(progress.get("partitionsBehind", "-")),
        str(progress.get("partitions", "-")),
        str(progress.get("lastMoved") or "not seen"),
    )
    if wide:
        header, row = (*header, "MESSAGE"), (*row, " ".join(str(progress.get("message") or "-").split()))
    if not progress:
        lines = [
            "no progress reported: the connector is not RUNNING, spec.progress.enabled is false, or the "
            "operator has not measured it yet"
        ]
    else:
        widths = [max(len(a), len(b)) for a, b in zip(header, row, strict=True)]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in (header, row)]
        if progress.get("message") and not wide:
            lines.append(str(progress["message"]))
    found = next((c for c in status.get("conditions") or [] if c.get("type") == "Progressing"), None)
    if found is not None:
        lines.append(f"Progressing={found.get('status')} ({found.get('reason')}): {found.get('message')}")
    return "\n".join(lines)


async def resolve_lag_target(
    kube: KubernetesApi, namespace: str, name: str, kind: Kind | None
) -> tuple[Kind, dict[str, Any]]:
    """The resource ``lag`` shows: of ``kind`` when given (TYPE/NAME, --kind); otherwise whichever of a
    KafkaConnector and a KafkaMirrorMaker2 is named ``name`` (both read at once). Both existing is a
    usage error naming both and how to choose; neither, one naming both kinds."""
    if kind is not None:
        body = await kube.get_resource(kind.plural, namespace, name)
        if body is None:
            raise PluginError(
                f"{kind.kind} {namespace}/{name} not found (kubectl get {kind.short} -n {namespace})", EXIT_USAGE
            )
        return kind, body
    kinds = (CONNECTOR, MIRROR)
    found = await asyncio.gather(*(kube.get_resource(k.plural, namespace, name) for k in kinds), return_exceptions=True)
    bodies = {k: b for k, b in zip(kinds, found, strict=True) if isinstance(b, dict)}
    if len(bodies) == 2:
        raise PluginError(
            f"both KafkaConnector {namespace}/{name} and KafkaMirrorMaker2 {namespace}/{name} exist: say which, "
            f"with cokc/{name} or mm2/{name} (or --kind kafkaconnector / --kind kafkamirrormaker2)",
            EXIT_USAGE,
        )
    if bodies:
        # Only one exists (or only one could be read: the other kind's error does not hide it).
        ((chosen, body),) = bodies.items()
        return chosen, body
    for error in found:
        if isinstance(error, BaseException):
            raise error
    raise PluginError(
        f"neither a KafkaConnector nor a KafkaMirrorMaker2 {namespace}/{name} exists "
        f"(kubectl get cokc,comm2 -n {namespace})",
        EXIT_USAGE,
    )


def lag_command(argv: Sequence[str] | None) -> int:
    """``kubectl connect-offsets lag NAME``: a KafkaConnector's status.progress or a KafkaMirrorMaker2's
    status.replicationLag, printed (nothing is changed)."""
    args = build_parser().parse_args(argv)
    given = sorted(key for key in REQUEST_ONLY if key in vars(args))
    if given:
        options = ", ".join("--" + key.replace("_", "-") for key in given)
        raise PluginError(f"lag does not take {options} ({PLUGIN} lag --help lists its options)", EXIT_USAGE)
    values = {**DEFAULTS, **vars(args)}
    explicit = "/" in values["name"] or values["kind"] is not None
    kind, name = split_name(values["name"], values["kind"])
    kube, default_namespace = load_kube(connection(values))
    namespace = values["namespace"] or default_namespace

    try:
        kind, body = asyncio.run(resolve_lag_target(kube, namespace, name, kind if explicit else None))
    except KubernetesError as error:
        raise kube_error(error, api_host(kube)) from error
    finally:
        kube.core.api_client.close()
    output = values["output"]
    field = "replicationLag" if kind.is_mirror else "progress"
    if is_document(output):
        emit(serialize((body.get("status") or {}).get(field) or {}, output), output)
    elif output == "name":
        print(resource_name(kind.kind, name))
    elif kind.is_mirror:
        print(render_lag(body, wide=output == "wide"))
    else:
        print(render_connector_lag(body, wide=output == "wide"))
    return EXIT_OK
