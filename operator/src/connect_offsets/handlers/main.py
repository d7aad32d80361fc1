"""``connect-offsets-operator``: run the operator (a thin wrapper around ``kopf run``)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import secrets
import socket
import sys
import warnings

import kopf
import urllib3

import connect_offsets.handlers  # noqa: F401  (registers the handlers)
from connect_offsets import metrics
from connect_offsets.controller import DEFAULT_WORKERS, ControllerSettings, LeaseSettings, LeaseTimings, Shard
from connect_offsets.handlers import startup
from connect_offsets.reconcile import settings

__all__ = ["main"]


#: The environment variable the chart fills from the pod's ``apps.kubernetes.io/pod-index`` label.
POD_INDEX_ENV = "CONNECT_OFFSETS_POD_INDEX"
#: The pod's name and namespace (the downward API): the Lease identity, and where Leases live.
POD_NAME_ENV = "POD_NAME"
POD_NAMESPACE_ENV = "POD_NAMESPACE"


def lease_identity() -> str:
    """This process's Lease identity: the pod (or host) name and a random suffix, as client-go's,
    so a restarted pod of the same name is a new holder whose predecessor's terms stay fenced off."""
    return f"{os.environ.get(POD_NAME_ENV) or socket.gethostname()}_{secrets.token_hex(4)}"


def _positive(raw: str) -> int:
    value = int(raw)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {raw}")
    return value


def _shard_index(raw: str, count: int) -> int:
    """``--shard-index``: a number, or ``auto`` (the pod index of a StatefulSet, modulo the count)."""
    if raw == "auto":
        pod_index = os.environ.get(POD_INDEX_ENV, "")
        if not pod_index.isdigit():
            raise ValueError(f"--shard-index auto needs ${POD_INDEX_ENV} (the pod's index), got {pod_index!r}")
        return int(pod_index) % count
    if not raw.isdigit():
        raise ValueError(f"--shard-index must be a number or 'auto', got {raw!r}")
    return int(raw)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="connect-offsets-operator",
        description="Run the connect-offsets operator against the cluster in $KUBECONFIG (or in-cluster).",
    )
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument("-n", "--namespace", action="append", default=[], help="watch this namespace (repeatable)")
    scope.add_argument("-A", "--all-namespaces", action="store_true", help="watch every namespace (default)")
    parser.add_argument(
        "--leader-election",
        action="store_true",
        help="work on a ConnectCluster only while holding its Lease (several replicas, shards; the chart's default)",
    )
    parser.add_argument(
        "--lease-namespace",
        default=os.environ.get(POD_NAMESPACE_ENV),
        help=f"where the Leases live (default: ${POD_NAMESPACE_ENV}, the operator's namespace)",
    )
    parser.add_argument(
        "--lease-prefix",
        default="connect-offsets",
        help="Lease names start with this (one per installation in a namespace; default connect-offsets)",
    )
    parser.add_argument("--lease-duration", type=float, default=15.0, help="seconds (default 15)")
    parser.add_argument("--renew-deadline", type=float, default=10.0, help="seconds (default 10)")
    parser.add_argument("--retry-period", type=float, default=2.0, help="seconds (default 2)")
    parser.add_argument("--peering", default=None, help=argparse.SUPPRESS)
    parser.add_argument(
        "--workers",
        type=_positive,
        default=DEFAULT_WORKERS,
        help=f"workers running reconcile passes (default {DEFAULT_WORKERS})",
    )
    parser.add_argument(
        "--cluster-workers",
        type=_positive,
        default=None,
        help="most workers one Connect cluster may hold at once (default: half the workers)",
    )
    parser.add_argument(
        "--shard-count", type=_positive, default=1, help="replicas the ConnectClusters are spread over (default 1)"
    )
    parser.add_argument(
        "--shard-index",
        default="0",
        help="this replica's shard, 0..shard-count-1, or 'auto': the StatefulSet pod index "
        f"(${POD_INDEX_ENV}) modulo --shard-count",
    )
    parser.add_argument("--liveness", default=None, help="health endpoint, e.g. http://0.0.0.0:8080/healthz")
    parser.add_argument("--metrics-port", type=int, default=None, help="serve Prometheus /metrics on this port")
    parser.add_argument("--log-format", choices=["text", "json"], default="text", help="log line format")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    try:
        shard = Shard(_shard_index(args.shard_index, args.shard_count), args.shard_count)
    except ValueError as error:
        parser.error(str(error))
    if args.peering is not None:
        parser.error("--peering was replaced by --leader-election (Leases; see the operator guide)")
    leases = None
    if args.leader_election:
        if not args.lease_namespace:
            parser.error(f"--leader-election needs --lease-namespace or ${POD_NAMESPACE_ENV}")
        try:
            timings = LeaseTimings(args.lease_duration, args.renew_deadline, args.retry_period)
        except ValueError as error:
            parser.error(str(error))
        leases = LeaseSettings(args.lease_namespace, lease_identity(), args.lease_prefix, timings)
    startup.CONTROLLER_SETTINGS = ControllerSettings(
        workers=args.workers, cluster_workers=args.cluster_workers, shard=shard, leases=leases
    )
    kopf.configure(
        verbose=args.verbose,
        log_format=kopf.LogFormat.JSON if args.log_format == "json" else kopf.LogFormat.FULL,
    )
    if not args.verbose:
        # One line per HTTP request drowns the operator's own messages.
        logging.getLogger("httpx").setLevel(logging.WARNING)
    # A kubeconfig with insecure-skip-tls-verify warns on every request; once is enough. Python's
    # warnings go through logging (the ``py.warnings`` logger), so with --log-format json they are
    # JSON lines like every other, not two raw lines on stderr that break a log parser.
    warnings.filterwarnings("once", category=urllib3.exceptions.InsecureRequestWarning)
    logging.captureWarnings(True)
    if args.metrics_port is not None:
        metrics.serve(args.metrics_port)
    # Where records of earlier connector owners can be (initialOffsets' leftover check).
    settings.WATCHED_NAMESPACES = tuple(args.namespace) if args.namespace else None
    asyncio.run(
        kopf.operator(
            clusterwide=not args.namespace,
            namespaces=args.namespace,
            standalone=True,  # which replica works on what: Leases (``controller.leases``), not kopf peering
            liveness_endpoint=args.liveness,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
