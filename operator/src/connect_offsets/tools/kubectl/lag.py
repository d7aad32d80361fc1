"""``kubectl connect-offsets lag NAME``: a KafkaMirrorMaker2's ``status.replicationLag``, or a
KafkaConnector's ``status.progress`` and ``Progressing`` condition (``cokc/NAME``); read only.

A read-only view rather than an annotation request, so it is not a Runner operation.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from connect_offsets.clients.kubernetes import KubernetesError
from connect_offsets.tools.kubectl.api import api_host, kube_error, load_kube
from connect_offsets.tools.kubectl.common import EXIT_OK, EXIT_USAGE, PLUGIN, PluginError, split_name
from connect_offsets.tools.kubectl.parser import DEFAULTS, REQUEST_ONLY, build_parser, connection
from connect_offsets.tools.kubectl.render import resource_name, serialize


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


def lag_command(argv: Sequence[str] | None) -> int:
    """``kubectl connect-offsets lag NAME``: read status.replicationLag and print it (nothing is changed)."""
    args = build_parser().parse_args(argv)
    given = sorted(key for key in REQUEST_ONLY if key in vars(args))
    if given:
        options = ", ".join("--" + key.replace("_", "-") for key in given)
        raise PluginError(f"lag does not take {options} ({PLUGIN} lag --help lists its options)", EXIT_USAGE)
    values = {**DEFAULTS, **vars(args)}
    kind, name = split_name(values["name"], values["kind"] or (None if "/" in values["name"] else "mm2"))
    kube, default_namespace = load_kube(connection(values))
    namespace = values["namespace"] or default_namespace

    async def fetch() -> dict[str, Any] | None:
        return await kube.get_resource(kind.plural, namespace, name)

    try:
        body = asyncio.run(fetch())
    except KubernetesError as error:
        raise kube_error(error, api_host(kube)) from error
    finally:
        kube.core.api_client.close()
    if body is None:
        short = "comm2" if kind.is_mirror else "cokc"
        raise PluginError(f"{kind.kind} {namespace}/{name} not found (kubectl get {short} -n {namespace})", EXIT_USAGE)
    output = values["output"]
    field = "replicationLag" if kind.is_mirror else "progress"
    if output in ("json", "yaml"):
        print(serialize((body.get("status") or {}).get(field) or {}, output))
    elif output == "name":
        print(resource_name(kind.kind, name))
    elif kind.is_mirror:
        print(render_lag(body, wide=output == "wide"))
    else:
        print(render_connector_lag(body, wide=output == "wide"))
    return EXIT_OK
