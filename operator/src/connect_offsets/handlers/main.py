"""``connect-offsets-operator``: run the operator (a thin wrapper around ``kopf run``)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import random
import sys
import warnings

import kopf
import urllib3

import connect_offsets.handlers  # noqa: F401  (registers the handlers)
from connect_offsets import metrics
from connect_offsets.reconcile import settings

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="connect-offsets-operator",
        description="Run the connect-offsets operator against the cluster in $KUBECONFIG (or in-cluster).",
    )
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument("-n", "--namespace", action="append", default=[], help="watch this namespace (repeatable)")
    scope.add_argument("-A", "--all-namespaces", action="store_true", help="watch every namespace (default)")
    parser.add_argument("--peering", default=None, help="kopf peering name for HA (default: standalone)")
    parser.add_argument(
        "--priority",
        type=int,
        default=None,
        help="kopf peering priority; default: random, since replicas of equal priority all pause",
    )
    parser.add_argument("--liveness", default=None, help="health endpoint, e.g. http://0.0.0.0:8080/healthz")
    parser.add_argument("--metrics-port", type=int, default=None, help="serve Prometheus /metrics on this port")
    parser.add_argument("--log-format", choices=["text", "json"], default="text", help="log line format")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    kopf.configure(
        verbose=args.verbose,
        log_format=kopf.LogFormat.JSON if args.log_format == "json" else kopf.LogFormat.FULL,
    )
    if not args.verbose:
        # One line per HTTP request drowns the operator's own messages.
        logging.getLogger("httpx").setLevel(logging.WARNING)
    # A kubeconfig with insecure-skip-tls-verify warns on every request; once is enough.
    warnings.filterwarnings("once", category=urllib3.exceptions.InsecureRequestWarning)
    if args.metrics_port is not None:
        metrics.serve(args.metrics_port)
    # Where records of earlier connector owners can be (initialOffsets' leftover check).
    settings.WATCHED_NAMESPACES = tuple(args.namespace) if args.namespace else None
    asyncio.run(
        kopf.operator(
            clusterwide=not args.namespace,
            namespaces=args.namespace,
            standalone=args.peering is None,
            peering_name=args.peering,
            priority=args.priority if args.priority is not None else random.randint(1, 1_000_000),
            liveness_endpoint=args.liveness,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
