"""``connect-offsets pipeline latest|history|as-of``: argument parsing, progress and outputs.

Why separate from jobs.py: the jobs are DataFrame → DataFrame/documents functions that tests and
other Spark programs call with their own SparkSession; this module is the command line around them
(sources from flags, a preflight of every topic, progress lines, files and ConfigMaps written), used
both by the main CLI (through ``register``) and by ``python -m connect_offsets.tools.pipeline`` /
``spark-submit .../pipeline/__main__.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TextIO
from urllib.parse import quote

from connect_offsets.offsets import OffsetsValidationError
from connect_offsets.tools.exit_codes import ExitCode, epilog
from connect_offsets.tools.offline.export_file import DocumentReadError, ExportSummary, check_export_file
from connect_offsets.tools.pipeline.jobs import (
    AsOfResult,
    KafkaSource,
    PipelineError,
    as_of,
    decode_records,
    history_summary,
    latest_documents,
    only_connectors,
    parse_time,
    read_export,
    read_kafka,
    union_sources,
    write_history,
)
from connect_offsets.tools.pipeline.session import SparkOptions, SparkSetupError, build_session, under_spark_submit
from connect_offsets.vocabulary import API_GROUP

if TYPE_CHECKING:  # pragma: no cover - typing only
    from pyspark.sql import DataFrame, SparkSession

EXIT_OK: Final = int(ExitCode.OK)
EXIT_FAILED: Final = int(ExitCode.FAILED)
EXIT_INVALID: Final = int(ExitCode.INVALID)

EXAMPLES = """examples (local stack; the worker's topic is connect-offsets):
  connect-offsets pipeline latest  -b 127.0.0.1:19092 -t connect-offsets -o out/latest
  connect-offsets pipeline history -b 127.0.0.1:19092 -t connect-offsets -o out/history
  connect-offsets pipeline as-of --at 2026-11-22T14:02:00Z -b 127.0.0.1:19092 -t connect-offsets \\
      -c my-source -o out/asof --to-configmap my-source-offsets -n kafka
  connect-offsets pipeline as-of --at 1763820120000 --export offsets-history.json -o out/asof

""" + epilog("pipeline")


# --------------------------------------------------------------------------- progress


class StepLines:
    """Timestamped step lines on stderr (Spark's own stage bar shows progress inside a step)."""

    def __init__(self, out: TextIO | None = None, quiet: bool = False) -> None:
        self.out = out or sys.stderr
        self.quiet = quiet
        self.started = time.monotonic()

    def step(self, message: str) -> None:
        if not self.quiet:
            elapsed = time.monotonic() - self.started
            print(f"[pipeline {elapsed:7.1f}s] {message}", file=self.out, flush=True)


# --------------------------------------------------------------------------- arguments


def _add_common(parser: argparse.ArgumentParser) -> None:
    source = parser.add_argument_group("sources (at least one topic or an export file)")
    source.add_argument(
        "--bootstrap-servers", "-b", metavar="HOST:PORT[,...]", help="Kafka of the worker's offsets topic"
    )
    source.add_argument(
        "--topic",
        "-t",
        action="append",
        default=[],
        metavar="[SERVERS/]TOPIC",
        help="an offsets topic: the worker's offset.storage.topic and/or connectors' own offsets.storage.topic "
        "(repeat; SERVERS/ for a topic on another Kafka). Later topics win ties in time.",
    )
    source.add_argument(
        "--export", action="append", default=[], metavar="FILE", help="a `connect-offsets export` JSON file"
    )
    source.add_argument(
        "--kafka-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="Kafka consumer setting for Spark's source (security.protocol, sasl.*, ssl.*); repeat",
    )
    source.add_argument(
        "--isolation-level",
        choices=["read_committed", "read_uncommitted"],
        default="read_committed",
        help="read_committed (default) skips aborted exactly-once transactions, as the worker does",
    )
    parser.add_argument(
        "--connector", "-c", action="append", default=[], metavar="NAME", help="only these connectors (repeat)"
    )
    parser.add_argument("--output", "-o", required=True, metavar="DIR", help="folder for the results")
    spark = parser.add_argument_group("spark")
    spark.add_argument("--master", metavar="URL", help="Spark master (default local[*]; spark://, k8s://, yarn)")
    spark.add_argument("--jars", metavar="A.jar,B.jar", help="Kafka source jars (default: the cached set)")
    spark.add_argument("--shuffle-partitions", type=int, metavar="N", help="spark.sql.shuffle.partitions")
    spark.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="any Spark setting; repeat")
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress output")


def _add_configmap(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--to-configmap",
        metavar="NAME",
        help="also write each document as key offsets.json of this ConfigMap (NAME may contain {connector}; "
        "needed when several connectors are selected), ready for spec.alterOffsets.fromConfigMap",
    )
    parser.add_argument("--namespace", "-n", metavar="NS", help="namespace of --to-configmap (default: kubeconfig's)")


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The latest / history / as-of sub-commands, on any sub-parser collection."""
    fmt = argparse.RawDescriptionHelpFormatter
    latest_p = sub.add_parser(
        "latest",
        help="current offsets per connector (must equal GET /connectors/{c}/offsets)",
        description="Reduce the offsets topics to the last record per source partition, tombstones honoured, and "
        "write one KIP-875 document per connector (<output>/<connector>.json).",
        epilog=EXAMPLES,
        formatter_class=fmt,
    )
    _add_common(latest_p)
    _add_configmap(latest_p)
    latest_p.set_defaults(func=run_latest)

    history_p = sub.add_parser(
        "history",
        help="every offsets record as a Parquet table, plus a per-connector summary",
        description="Write every record (connector, partition, offset, tombstone, Kafka topic/partition/offset, "
        "timestamp) to <output>/history (Parquet, partitioned by connector) and <output>/summary.json.",
        epilog=EXAMPLES,
        formatter_class=fmt,
    )
    _add_common(history_p)
    history_p.set_defaults(func=run_history)

    asof_p = sub.add_parser(
        "as-of",
        help="the offsets each connector had at a time T, as documents for alterOffsets",
        description="For each connector, the offset of each source partition at T (last record with timestamp <= T; "
        "a tombstone means none). Documents list partitions that have an offset now but had none at T with "
        '"offset": null, so applying them restores T exactly. <output>/compacted-before.json lists partitions '
        "whose history before T may have been compacted away.",
        epilog=EXAMPLES,
        formatter_class=fmt,
    )
    asof_p.add_argument("--at", required=True, metavar="T", help="ISO-8601 time (no zone = UTC) or epoch ms")
    _add_common(asof_p)
    _add_configmap(asof_p)
    asof_p.set_defaults(func=run_as_of)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``pipeline`` (with latest/history/as-of) to the main CLI's sub-commands."""
    parser = subparsers.add_parser(
        "pipeline",
        help="offsets history on PySpark: latest, history (Parquet), as-of T",
        description="Read a Connect cluster's offsets topics (or an export) with Spark and turn the commit history "
        "into tables and into offsets documents the operator can apply. Needs the [spark] extra.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_commands(parser.add_subparsers(dest="pipeline_command", required=True, metavar="{latest,history,as-of}"))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m connect_offsets.tools.pipeline",
        description="Offsets history pipeline (PySpark): latest, history, as-of.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_commands(parser.add_subparsers(dest="pipeline_command", required=True, metavar="{latest,history,as-of}"))
    return parser


# --------------------------------------------------------------------------- running


def _key_values(items: list[str], flag: str) -> dict[str, str]:
    result: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise PipelineError(f"{flag} {item!r}: expected KEY=VALUE")
        result[key.strip()] = value
    return result


def kafka_sources(args: argparse.Namespace) -> list[KafkaSource]:
    options = _key_values(args.kafka_option, "--kafka-option")
    sources: list[KafkaSource] = []
    for item in args.topic:
        servers, sep, topic = item.rpartition("/")
        if not sep:
            servers = args.bootstrap_servers or ""
        if not servers:
            raise PipelineError(f"--topic {item}: no Kafka to read it from (give --bootstrap-servers or SERVERS/TOPIC)")
        if not topic:
            raise PipelineError(f"--topic {item!r}: the topic name is empty")
        sources.append(KafkaSource(servers, topic, options, args.isolation_level))
    return sources


@dataclass
class Loaded:
    spark: SparkSession
    records: DataFrame
    expected: int


def load(args: argparse.Namespace, progress: StepLines) -> Loaded:
    """Preflight every source, start Spark, and return the (connector-filtered) records."""
    from connect_offsets.tools.pipeline.preflight import check_topic

    sources = kafka_sources(args)
    exports = [str(Path(p).resolve()) for p in args.export]
    if not sources and not exports:
        raise PipelineError("no source given: --topic (with --bootstrap-servers) or --export FILE")
    missing = [p for p in exports if not Path(p).is_file()]
    if missing:
        raise PipelineError(f"--export: no such file: {', '.join(missing)}")
    for given in args.export:
        summary = check_export(given)
        progress.step(
            f"{given}: {summary.connectors} connector(s), {summary.entries} entries"
            + (f" ({summary.with_positions} with Kafka positions)" if summary.with_positions else "")
        )
    expected = 0
    for source in sources:
        extent = check_topic(source)
        expected += extent.records
        progress.step(f"{source.describe()}: {extent.partitions} partitions, up to {extent.records} records")
    conf = _key_values(args.conf, "--conf")
    conf.setdefault("spark.sql.session.timeZone", "UTC")
    options = SparkOptions(
        master=args.master,
        jars=[j for j in (args.jars or "").split(",") if j] or None,
        shuffle_partitions=args.shuffle_partitions,
        conf=conf,
        progress=not args.quiet,
    )
    where = args.master or ("the master spark-submit was given" if under_spark_submit() else "local[*]")
    progress.step(f"starting Spark ({where})")
    spark = build_session(options)
    progress.step(
        f"Spark {spark.version}, master {spark.sparkContext.master}, application {spark.sparkContext.applicationId}"
    )
    frames = [read_kafka(spark, source, rank) for rank, source in enumerate(sources)]
    frames += [read_export(spark, path, len(sources) + i) for i, path in enumerate(exports)]
    records = only_connectors(union_sources(frames), args.connector)
    return Loaded(spark, records, expected)


def check_export(path: str) -> ExportSummary:
    """Check an ``--export`` file before Spark starts: Spark reads a malformed one as an empty table.

    Raises PipelineError naming the file and the first problem (a JSON error with line and column).
    """
    try:
        return check_export_file(path)
    except DocumentReadError as error:
        raise PipelineError(f"--export {error}") from None
    except OffsetsValidationError as error:
        problems = [p.message if p.path == "$" else str(p) for p in error.problems]
        more = f" (and {len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
        raise PipelineError(f"--export {path}: not a connect-offsets export: {problems[0]}{more}") from None


def connector_file(output: Path, connector: str) -> Path:
    """``<output>/<connector>.json``; names are percent-encoded so any connector name is one safe file."""
    return output / f"{quote(connector, safe='-_.')}.json"


def write_documents(output: Path, documents: dict[str, dict[str, Any]]) -> list[Path]:
    output.mkdir(parents=True, exist_ok=True)
    written = []
    for connector, document in documents.items():
        path = connector_file(output, connector)
        path.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
        written.append(path)
    return written


def configmap_names(template: str, connectors: list[str]) -> dict[str, str]:
    if "{connector}" not in template and len(connectors) > 1:
        raise PipelineError(
            f"--to-configmap {template}: {len(connectors)} connectors selected ({', '.join(connectors[:5])}...); "
            "select one with --connector or put {connector} in the name"
        )
    return {c: template.replace("{connector}", c) for c in connectors}


def to_configmaps(
    template: str, namespace: str | None, documents: dict[str, dict[str, Any]], annotations: dict[str, str]
) -> list[str]:
    from connect_offsets.tools.pipeline.configmaps import write_offsets_configmaps

    names = configmap_names(template, sorted(documents))
    return asyncio.run(write_offsets_configmaps(namespace, names, documents, annotations))


def _guard(job: Callable[[argparse.Namespace, StepLines], int]) -> Callable[[argparse.Namespace], int]:
    """Errors a user can act on become one line and an exit code; the SparkSession is stopped."""

    def run(args: argparse.Namespace) -> int:
        progress = StepLines(quiet=args.quiet)
        try:
            return job(args, progress)
        except (PipelineError, SparkSetupError) as error:
            print(f"connect-offsets pipeline: error: {error}", file=sys.stderr)
            return EXIT_INVALID
        except Exception as error:
            described = _describe_spark_error(error)
            if described is None:
                raise
            print(f"connect-offsets pipeline: error: {described}", file=sys.stderr)
            return EXIT_FAILED

    return run


def _describe_spark_error(error: Exception) -> str | None:
    """The first line of a JVM/Kubernetes error, without the stack trace."""
    from connect_offsets.clients.kubernetes import KubernetesError

    if isinstance(error, KubernetesError):
        return str(error)
    module = type(error).__module__
    if module.startswith(("pyspark", "py4j")):
        text = str(error).strip().splitlines()
        return f"Spark job failed: {text[0] if text else type(error).__name__}"
    return None


def _latest(args: argparse.Namespace, progress: StepLines) -> int:
    loaded = load(args, progress)
    progress.step("reducing to the last record per source partition")
    documents = latest_documents(loaded.records)
    output = Path(args.output)
    written = write_documents(output, documents)
    progress.step(f"{len(written)} connector document(s) in {output}")
    for connector, document in documents.items():
        print(f"{connector}\t{len(document['offsets'])} partition(s)\t{connector_file(output, connector)}")
    if args.to_configmap:
        names = to_configmaps(args.to_configmap, args.namespace, documents, {f"{API_GROUP}/pipeline": "latest"})
        progress.step(f"ConfigMap(s) written: {', '.join(names)}")
    return EXIT_OK


def _history(args: argparse.Namespace, progress: StepLines) -> int:
    loaded = load(args, progress)
    output = Path(args.output)
    output.mkdir(parents=True, exist_ok=True)
    table = str((output / "history").resolve())
    progress.step(f"writing the history table to {table} (Parquet, partitioned by connector)")
    records = decode_records(loaded.records).persist()  # decoded once for the table and the summary
    try:
        write_history(records, table)
        progress.step("summarising")
        summary = history_summary(records)
    finally:
        records.unpersist()
    (output / "summary.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n")
    print("connector\trecords\ttombstones\tpartitions\tfirst\tlast")
    for item in summary:
        print(
            f"{item['connector']}\t{item['records']}\t{item['tombstones']}\t{item['partitions']}\t"
            f"{item['first']}\t{item['last']}"
        )
    progress.step(f"{sum(i['records'] for i in summary)} records of {len(summary)} connector(s); summary.json written")
    return EXIT_OK


def _as_of(args: argparse.Namespace, progress: StepLines) -> int:
    at = parse_time(args.at)
    loaded = load(args, progress)
    progress.step(f"offsets as of {at.isoformat()}")
    records = loaded.records.persist()
    try:
        result = as_of(records, at)
    finally:
        records.unpersist()
    output = Path(args.output)
    write_as_of(output, result)
    for connector, document in result.documents.items():
        nulls = sum(1 for e in document["offsets"] if e["offset"] is None)
        print(
            f"{connector}\t{len(document['offsets']) - nulls} offset(s), {nulls} to remove\t"
            f"{connector_file(output, connector)}"
        )
    if result.not_covered:
        print(f"history starts after T for: {', '.join(result.not_covered)}", file=sys.stderr)
    if result.compacted:
        print(
            f"{len(result.compacted)} partition(s) may have had an offset at T that compaction removed: "
            f"see {output / 'compacted-before.json'}",
            file=sys.stderr,
        )
    if args.to_configmap:
        stamp = result.at.isoformat().replace("+00:00", "Z")
        names = to_configmaps(
            args.to_configmap, args.namespace, result.documents, {f"{API_GROUP}/pipeline-as-of": stamp}
        )
        progress.step(f"ConfigMap(s) written: {', '.join(names)}")
    return EXIT_OK


def write_as_of(output: Path, result: AsOfResult) -> None:
    write_documents(output, result.documents)
    (output / "compacted-before.json").write_text(
        json.dumps(
            {
                "at": result.at.isoformat().replace("+00:00", "Z"),
                "written": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
                "partitions": result.compacted,
                "connectors_without_history_at_t": result.not_covered,
            },
            indent=2,
            ensure_ascii=False,
        )
        + "\n"
    )


run_latest = _guard(_latest)
run_history = _guard(_history)
run_as_of = _guard(_as_of)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    result: int = args.func(args)
    return result
