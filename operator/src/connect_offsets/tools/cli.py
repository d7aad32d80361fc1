"""``connect-offsets``: the command line. Reuses models and clients; never imports kopf.

Subcommands:

- ``export`` / ``import``: the offline Kafka Connect offsets tool of KIP-199 (discarded upstream
  for KIP-875's REST API, which needs a running worker). They read and write the worker's own
  store, found through its worker config: the offsets topics (distributed) or the offsets file
  (standalone). Why offline: workers that cannot start because of an offset (a poison record),
  dedicated MirrorMaker 2 (no REST offsets API), history (``--from-beginning``) and copying
  offsets between clusters or connectors.
- ``crds``: write the CRD manifests generated from the models.
- ``migrate-storage``: rewrite every stored object of the three kinds in the CRDs' storage version
  and drop the older versions from ``status.storedVersions`` (tools/storage_migration.py,
  docs/api-versions.md).

Exit codes (tools/exit_codes.py, shared with the pipeline and the kubectl plugin): 0 success (a dry
run included), 1 the store could not be read or written (Kafka or file error), 2 bad usage or input
(the document, the worker config), 5 refused for safety (a connector not STOPPED, unknown
connectors, a running standalone worker) unless ``--force`` / ``--allow-unknown``. Errors are one
line on stderr; ``--verbose`` adds the details and librdkafka's own log lines.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TextIO

import yaml

from connect_offsets import __version__
from connect_offsets.errors import ConnectOffsetsError
from connect_offsets.models.schema import crd_documents
from connect_offsets.offsets import OffsetsValidationError, partition_key
from connect_offsets.tools.exit_codes import ExitCode, epilog
from connect_offsets.tools.kafka import show_librdkafka_log
from connect_offsets.tools.offline.documents import ImportDocument, parse_import_document, render_export
from connect_offsets.tools.offline.export_file import DocumentReadError, read_document
from connect_offsets.tools.offline.offsets_file import OffsetsFileError
from connect_offsets.tools.offline.records import StoredRecord, encode_key, encode_value, latest, murmur2_partition
from connect_offsets.tools.offline.store import (
    ConnectorInfo,
    PlannedWrite,
    WorkerStoreError,
    read_config_topic,
    read_offsets_file,
    read_offsets_file_raw,
    read_offsets_topic,
    topic_partition_count,
    write_offsets_file,
    write_transaction,
)
from connect_offsets.tools.offline.worker_config import WorkerConfig, WorkerConfigError
from connect_offsets.tools.pipeline.command import register as register_pipeline
from connect_offsets.tools.storage_migration import MigrationError, migrate_storage
from connect_offsets.tools.storage_migration import register as register_migration

__all__ = ["EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_INVALID", "EXIT_OK", "EXIT_REFUSED", "main", "render_crds"]

EXIT_OK: Final = int(ExitCode.OK)
EXIT_FAILED: Final = int(ExitCode.FAILED)
EXIT_INVALID: Final = int(ExitCode.INVALID)
EXIT_REFUSED: Final = int(ExitCode.REFUSED)
EXIT_INTERRUPTED: Final = int(ExitCode.INTERRUPTED)

#: Below this many records a progress bar would only flicker.
PROGRESS_THRESHOLD = 2000

CRD_HEADER = "# Generated from operator/src/connect_offsets/models/crds/ by `connect-offsets crds`; do not edit.\n"


class CliError(ConnectOffsetsError):
    """Ends the command with ``code`` and a one-line message."""

    def __init__(self, message: str, code: int, details: list[str] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.details = details or []


def render_crds() -> dict[str, str]:
    """File name -> YAML text of each CRD, exactly as committed in ``crds/``."""
    return {name: CRD_HEADER + yaml.safe_dump(doc, sort_keys=False) for name, doc in crd_documents().items()}


def _cmd_crds(args: argparse.Namespace) -> int:
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    for name, text in render_crds().items():
        (out / name).write_text(text)
        print(f"wrote {out / name}")
    return EXIT_OK


# --------------------------------------------------------------------------- progress and messages


def _note(args: argparse.Namespace, message: str) -> None:
    if not getattr(args, "quiet", False):
        print(message, file=sys.stderr)


@contextmanager
def _progress(description: str, enabled: bool) -> Iterator[Callable[[int, int | None], None]]:
    """A rich progress bar on stderr that appears only for more than PROGRESS_THRESHOLD records."""
    state: dict[str, Any] = {}

    def update(done: int, total: int | None) -> None:
        if not enabled or total is None or total <= PROGRESS_THRESHOLD:
            return
        if "bar" not in state:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeRemainingColumn(),
                console=Console(stderr=True),
                transient=True,
            )
            bar.start()
            state["bar"], state["task"] = bar, bar.add_task(description, total=total)
        if done % 200 == 0 or done >= total:
            state["bar"].update(state["task"], completed=done, total=total)

    try:
        yield update
    finally:
        if "bar" in state:
            state["bar"].stop()


# --------------------------------------------------------------------------- distributed: gather


@dataclass
class _Store:
    """A distributed worker's store as read now."""

    config: WorkerConfig
    connectors: dict[str, ConnectorInfo]
    records: list[StoredRecord]  # global topic first, then per-connector topics, each in log order
    own_topics: dict[str, tuple[str, str | None]]  # connector -> (its offsets topic, its bootstrap)


def _read_store(
    config: WorkerConfig, names: list[str] | None, args: argparse.Namespace, *, history: bool = False
) -> _Store:
    """Without ``history`` only the last record per key is kept while reading (what a compacted
    topic holds), so a long history costs time, not memory."""
    settings = config.kafka_settings()
    connectors = read_config_topic(settings, config.config_topic, timeout=args.timeout)
    with _progress(f"reading {config.offsets_topic}", not args.quiet) as progress:
        records, stats = read_offsets_topic(
            settings, config.offsets_topic, connectors=names, timeout=args.timeout, progress=progress, history=history
        )
    if stats.skipped_keys:
        _note(args, f"note: {stats.skipped_keys} record(s) with keys Connect ignores were skipped")
    for problem in stats.bad_values[:5]:
        _note(args, f"warning: skipped a record whose value is not an offset: {problem}")
    own_topics: dict[str, tuple[str, str | None]] = {}
    for name, info in sorted(connectors.items()):
        topic = info.offsets_topic
        if topic is None or (names is not None and name not in names):
            continue
        if topic == config.offsets_topic and info.offsets_bootstrap is None:
            continue
        own_topics[name] = (topic, info.offsets_bootstrap)
        with _progress(f"reading {topic}", not args.quiet) as progress:
            extra, _ = read_offsets_topic(
                config.kafka_settings(info.offsets_bootstrap),
                topic,
                connectors=[name],
                timeout=args.timeout,
                progress=progress,
                history=history,
            )
        records.extend(extra)
    return _Store(config, connectors, records, own_topics)


def _state_table(store: _Store, names: list[str]) -> list[str]:
    lines = ["connector state (config topic)      offsets topic"]
    for name in names:
        info = store.connectors.get(name)
        state = "DELETED/UNKNOWN" if info is None or not info.exists else info.target_state
        topic = store.own_topics.get(name, (store.config.offsets_topic, None))[0]
        lines.append(f"  {name:<36} {state:<16} {topic}")
    return lines


# --------------------------------------------------------------------------- export


def _selected(args: argparse.Namespace) -> list[str] | None:
    if not args.connectors:
        return None
    names = [n.strip() for n in args.connectors.split(",") if n.strip()]
    if not names:
        raise CliError("--connectors: expected a comma-separated list of connector names", EXIT_INVALID)
    return names


def _cmd_export(args: argparse.Namespace) -> int:
    config = WorkerConfig.load(Path(args.worker_config))
    names = _selected(args)
    if config.mode == "standalone":
        if args.from_beginning:
            raise CliError(
                "--from-beginning needs a Kafka offsets topic; a standalone worker's file keeps only the latest "
                "offset per partition",
                EXIT_INVALID,
            )
        records = read_offsets_file(config.offsets_file)
        present = sorted({r.key.connector for r in latest(records)})
        chosen = names if names is not None else present
        document = render_export(records, connectors=chosen, history=False, kip875=args.format == "kip875")
        _note(args, f"standalone offsets file {config.offsets_file}: {len(records)} stored pair(s)")
    else:
        store = _read_store(config, names, args, history=args.from_beginning)
        # Without --from-beginning, a connector whose pairs are all removed has nothing to show.
        shown = store.records if args.from_beginning else latest(store.records)
        present = sorted({r.key.connector for r in shown})
        chosen = names if names is not None else present
        document = render_export(
            store.records, connectors=chosen, history=args.from_beginning, kip875=args.format == "kip875"
        )
        for line in _state_table(store, chosen):
            _note(args, line)
    for name in chosen:
        if name not in present:
            _note(args, f"warning: no offsets stored for connector {name!r}")
    _write_output(args.output, json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    total = sum(len(v["offsets"] if isinstance(v, dict) else v) for v in document.values())
    _note(args, f"exported {total} entr{'y' if total == 1 else 'ies'} for {len(chosen)} connector(s)")
    return EXIT_OK


def _write_output(output: str | None, text: str) -> None:
    if output in (None, "-"):
        sys.stdout.write(text)
        return
    try:
        Path(str(output)).write_text(text, encoding="utf-8")
    except OSError as error:
        raise CliError(f"--output {output}: {error.strerror}", EXIT_FAILED) from None


# --------------------------------------------------------------------------- import


def _read_input(args: argparse.Namespace) -> ImportDocument:
    source = args.input
    if source in (None, "-") and sys.stdin.isatty():
        raise CliError("no input: give --input FILE or pipe the document on stdin", EXIT_INVALID)
    try:
        # Bounded and decoded as the pipeline's --export files are (offline/export_file.py).
        return parse_import_document(read_document(source))
    except DocumentReadError as error:
        raise CliError(f"--input {error}", EXIT_INVALID) from None
    except OffsetsValidationError as error:
        problems = [str(p) for p in error.problems]
        raise CliError(
            f"invalid import document: {problems[0]}"
            + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""),
            EXIT_INVALID,
            problems,
        ) from None


def _keys_for(connector: str, partition: dict[str, Any], existing: dict[str, list[bytes]]) -> list[tuple[bytes, str]]:
    """The key bytes to write: every stored variant of this partition, else Connect's encoding."""
    variants = existing.get(f"{connector}\x00{partition_key(partition)}", [])
    if variants:
        return [(raw, "existing key") for raw in variants]
    return [(encode_key(connector, partition), "new key")]


def _existing_keys(records: list[StoredRecord]) -> dict[str, list[bytes]]:
    found: dict[str, list[bytes]] = {}
    for record in records:
        variants = found.setdefault(f"{record.key.connector}\x00{record.key.partition_id}", [])
        if record.key.raw not in variants:
            variants.append(record.key.raw)
    return found


def _current(records: list[StoredRecord]) -> dict[bytes, dict[str, Any] | None]:
    return {r.key.raw: r.offset for r in latest(records)}


def _plan_line(write: PlannedWrite, before: dict[bytes, dict[str, Any] | None]) -> str:
    old = before.get(write.key)
    value = "null (remove)" if write.value is None else write.value.decode("utf-8")
    was = "absent" if old is None else json.dumps(old, separators=(",", ":"), ensure_ascii=False)
    return f"{write.topic}[{write.partition}] {write.key.decode('utf-8')} = {value}   (was {was}; {write.note})"


def _check_connectors(doc: ImportDocument, connectors: dict[str, ConnectorInfo], args: argparse.Namespace) -> None:
    refusals: list[str] = []
    for name in doc.names:
        info = connectors.get(name)
        if info is None or not info.exists:
            if not args.allow_unknown:
                refusals.append(
                    f"connector {name!r} is not in the config topic (unknown or deleted); "
                    "check the name, or pass --allow-unknown to write its offsets anyway"
                )
        elif info.target_state != "STOPPED" and not args.force:
            refusals.append(
                f"connector {name!r} is {info.target_state}, not STOPPED: stop it first "
                f"(PUT /connectors/{name}/stop) so it cannot overwrite the import, or pass --force "
                "if all workers are shut down"
            )
    if refusals:
        raise CliError(
            refusals[0] + (f" (and {len(refusals) - 1} more)" if len(refusals) > 1 else ""), EXIT_REFUSED, refusals
        )


def _cmd_import(args: argparse.Namespace) -> int:
    config = WorkerConfig.load(Path(args.worker_config))
    doc = _read_input(args)
    if config.mode == "standalone":
        return _import_standalone(config, doc, args)
    store = _read_store(config, doc.names, args)
    _check_connectors(doc, store.connectors, args)
    # Where each connector's offsets go: its own topic (KIP-618) and the worker's topic, as Connect writes.
    clusters: dict[str | None, list[PlannedWrite]] = {}
    partition_counts: dict[tuple[str, str | None], int] = {}
    existing = _existing_keys(store.records)
    for connector in doc.connectors:
        targets: list[tuple[str, str | None]] = []
        if connector.connector in store.own_topics:
            targets.append(store.own_topics[connector.connector])
        targets.append((config.offsets_topic, None))
        for topic, bootstrap in targets:
            if (topic, bootstrap) not in partition_counts:
                partition_counts[topic, bootstrap] = topic_partition_count(
                    config.kafka_settings(bootstrap), topic, timeout=args.timeout
                )
            for change in connector.changes:
                for raw, note in _keys_for(change.connector, change.partition, existing):
                    clusters.setdefault(bootstrap, []).append(
                        PlannedWrite(
                            topic=topic,
                            partition=murmur2_partition(raw, partition_counts[topic, bootstrap]),
                            key=raw,
                            value=encode_value(change.offset),
                            connector=change.connector,
                            note=note,
                        )
                    )
    before = _current(store.records)
    writes = [w for group in clusters.values() for w in group]
    if args.dry_run or args.verbose:
        for write in writes:
            print(("would write " if args.dry_run else "writing ") + _plan_line(write, before))
    if args.dry_run:
        _note(args, f"dry run: {len(writes)} record(s) would be written; nothing changed")
        return EXIT_OK
    for bootstrap, group in clusters.items():
        with _progress("writing offsets", not args.quiet) as progress:
            write_transaction(
                config.kafka_settings(bootstrap),
                group,
                transactional_id=f"connect-offsets-import-{config.group_id}",
                timeout=args.timeout,
                progress=progress,
            )
    _note(
        args,
        f"imported {len(doc)} pair(s) for {len(doc.names)} connector(s): {len(writes)} record(s) written in "
        f"{len(clusters)} transaction(s)",
    )
    return EXIT_OK


def _worker_listening(config: WorkerConfig) -> str | None:
    for host, port in config.rest_endpoints():
        probe = "127.0.0.1" if host in ("", "0.0.0.0", "::") else host
        try:
            with socket.create_connection((probe, port), timeout=0.5):
                return f"{probe}:{port}"
        except OSError:
            continue
    return None


def _import_standalone(config: WorkerConfig, doc: ImportDocument, args: argparse.Namespace) -> int:
    path = config.offsets_file
    running = _worker_listening(config)
    if running and not args.force and not args.dry_run:
        raise CliError(
            f"a standalone worker answers at {running} (this config's listeners): it rewrites {path} on every "
            "offset flush and would overwrite the import; stop it first, or pass --force if that port is not it",
            EXIT_REFUSED,
        )
    entries = read_offsets_file_raw(path)
    records = read_offsets_file(path)
    existing = _existing_keys(records)
    before = _current(records)
    changes: list[PlannedWrite] = []
    for connector in doc.connectors:
        for change in connector.changes:
            for raw, note in _keys_for(change.connector, change.partition, existing):
                changes.append(PlannedWrite(str(path), 0, raw, encode_value(change.offset), change.connector, note))
    if args.dry_run or args.verbose:
        for write in changes:
            line = _plan_line(write, before).replace(f"{path}[0] ", f"{path}: ", 1)
            print(("would write " if args.dry_run else "writing ") + line)
    if args.dry_run:
        _note(args, f"dry run: {len(changes)} entr{'y' if len(changes) == 1 else 'ies'} would change; nothing changed")
        return EXIT_OK
    for write in changes:
        entries[write.key] = write.value  # None stays as a null value: the worker's own tombstone
    backup = write_offsets_file(path, entries)
    _note(
        args,
        f"imported {len(doc)} pair(s) into {path}" + (f"; previous file kept as {backup}" if backup else ""),
    )
    return EXIT_OK


# --------------------------------------------------------------------------- argument parsing

_EXPORT_EXAMPLES = """examples:
  # latest offsets of every connector, KIP-199 document on stdout
  connect-offsets export --worker-config connect-distributed.properties
  # two connectors, into a file, in the KIP-875 shape (the body of PATCH /connectors/{c}/offsets)
  connect-offsets export --worker-config worker.properties --connectors orders,users --format kip875 -o offsets.json
  # every record ever written, with Kafka partition, offset and timestamp (tombstones as "offset": null)
  connect-offsets export --worker-config worker.properties --connectors orders --from-beginning > history.json
  # a standalone worker: its offset.storage.file.filename is read
  connect-offsets export --worker-config connect-standalone.properties
"""

_IMPORT_EXAMPLES = """examples:
  # show exactly which records would be written, change nothing
  connect-offsets import --worker-config worker.properties --dry-run < offsets.json
  # write them (the connectors must be STOPPED: PUT /connectors/<name>/stop)
  connect-offsets import --worker-config worker.properties --input offsets.json
  # all workers are shut down, so the connectors' target state does not matter
  connect-offsets import --worker-config worker.properties --force --input offsets.json

input: {"<connector>": [{"partition": {...}, "offset": {...}}, ...]} (KIP-199) or
       {"<connector>": {"offsets": [...]}} (KIP-875); "offset": null removes a partition's offset;
       partitions not listed are left as they are.
"""

_EXIT_CODES = epilog("connect-offsets")


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--worker-config",
        "-w",
        required=True,
        metavar="FILE",
        help="the Connect worker's .properties file (distributed or standalone)",
    )
    parser.add_argument("--timeout", type=float, default=30.0, metavar="S", help="Kafka timeout in seconds (30)")
    parser.add_argument("--quiet", "-q", action="store_true", help="no notes or progress on stderr")
    parser.add_argument(
        "--verbose",
        "-v",
        action="store_true",
        help="details on errors, each record written, and librdkafka's own log lines",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="connect-offsets",
        description="Kafka Connect offsets tools: offline export/import (KIP-199) and the operator's CRDs.",
        epilog=_EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    crds = sub.add_parser(
        "crds",
        help="write the CRD manifests generated from the models",
        epilog="example:\n  connect-offsets crds -o crds/",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    crds.add_argument("--output", "-o", default="crds", help="folder to write to (default: crds)")
    crds.set_defaults(func=_cmd_crds)

    export = sub.add_parser(
        "export",
        help="write a worker's stored source offsets as JSON (KIP-199)",
        description="Read the worker's offsets store (offset.storage.topic with read_committed, plus each "
        "connector's own offsets.storage.topic; or the standalone offsets file) and print it as JSON. "
        "Connector states from the config topic are listed on stderr.",
        epilog=_EXPORT_EXAMPLES + "\n" + _EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common(export)
    export.add_argument("--connectors", "-c", metavar="A,B", help="only these connectors (comma-separated)")
    export.add_argument(
        "--from-beginning",
        action="store_true",
        help='every record ever written, in log order, each with a "kafka" object; tombstones as null',
    )
    export.add_argument(
        "--format",
        choices=["kip199", "kip875"],
        default="kip199",
        help='kip199: {"<c>": [entries]} (default); kip875: {"<c>": {"offsets": [entries]}}',
    )
    export.add_argument("--output", "-o", metavar="FILE", help="write to FILE instead of stdout")
    export.set_defaults(func=_cmd_export)

    imp = sub.add_parser(
        "import",
        help="write partition/offset pairs into a worker's store (KIP-199)",
        description="Write the given partition/offset pairs with the exact key bytes and Kafka partition the "
        "worker uses, in one transaction (or, standalone, by replacing the offsets file atomically after a "
        "backup). Pairs not in the input are untouched.",
        epilog=_IMPORT_EXAMPLES + "\n" + _EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common(imp)
    imp.add_argument("--input", "-i", metavar="FILE", help="read the document from FILE (default: stdin)")
    imp.add_argument("--dry-run", action="store_true", help="print exactly what would be written; change nothing")
    imp.add_argument("--force", action="store_true", help="write even if a connector is not STOPPED / a worker runs")
    imp.add_argument(
        "--allow-unknown", action="store_true", help="write offsets for connectors not in the config topic"
    )
    imp.set_defaults(func=_cmd_import)
    register_migration(sub, lambda args: migrate_storage(args, sys.stdout), _EXIT_CODES)
    # The PySpark pipeline: pyspark is imported only when a pipeline job runs (the [spark] extra).
    register_pipeline(sub)
    return parser


def _fail(error: Exception, code: int, args: argparse.Namespace | None, details: list[str], out: TextIO) -> int:
    print(f"connect-offsets: error: {error}", file=out)
    if args is not None and getattr(args, "verbose", False):
        for line in details:
            print(f"  {line}", file=out)
        traceback.print_exception(error, file=out)
    elif len(details) > 1:
        print("  (--verbose lists every problem)", file=out)
    return code


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "verbose", False):
        show_librdkafka_log()  # librdkafka's own lines (connection attempts, failures) on stderr
    try:
        result: int = args.func(args)
        return result
    except CliError as error:
        return _fail(error, error.code, args, error.details, sys.stderr)
    except (WorkerConfigError, OffsetsFileError) as error:
        return _fail(error, EXIT_INVALID, args, [], sys.stderr)
    except WorkerStoreError as error:
        return _fail(error, EXIT_FAILED, args, [], sys.stderr)
    except MigrationError as error:
        return _fail(error, error.code, args, [], sys.stderr)
    except KeyboardInterrupt:
        print("connect-offsets: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
