"""``connect-offsets-operator``: run the operator (a thin wrapper around ``kopf run``)."""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import ctypes.util
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

#: glibc's mallopt parameter for the number of malloc arenas.
_M_ARENA_MAX = -8


def limit_malloc_arenas(arenas: int = 2) -> bool:
    """Keep glibc from giving each worker thread its own 64 MiB malloc arena.

    Why: connector snapshots are parsed in worker threads (``asyncio.to_thread``) and live on in
    the event loop's thread; each thread's arena then stays resident and fragmented. With 5,000
    connectors, two such arenas held 128 MiB of the operator's ~430 MiB (``/proc/<pid>/smaps`` during
    bench_steady_state). The same as ``MALLOC_ARENA_MAX=2``, set from inside so that every way of
    starting the operator gets it. A no-op (False) where the C library is not glibc.
    """
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_ARENA_MAX, arenas))


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
    limit_malloc_arenas()  # before any thread starts
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
