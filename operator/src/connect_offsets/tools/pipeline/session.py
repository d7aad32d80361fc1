"""The SparkSession the pipeline runs in: embedded ``local[*]`` by default, or a cluster.

Why this module exists: Spark's Kafka source is not part of pyspark, and letting Spark fetch it at
job time (``spark.jars.packages``) would make every run depend on Maven Central being reachable from
wherever the driver runs. The project's set-up (``make spark-jars``, hack/fetch-spark-jars.sh) puts the
four jars, pinned to pyspark's own version, in ``$CONNECT_OFFSETS_CACHE/spark-<version>/jars``; this
module finds them there (or takes ``--jars``) and hands them to Spark with ``spark.jars`` before the
JVM starts. Under ``spark-submit`` the JVM already exists and its ``--jars``/``--packages`` apply, so
nothing is overridden there.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from connect_offsets.errors import ConnectOffsetsError

if TYPE_CHECKING:  # pragma: no cover - typing only
    from pyspark.sql import SparkSession

#: Artifacts the Kafka source needs besides pyspark (hack/spark/pom.xml resolves exactly these).
REQUIRED_JAR_PREFIXES = (
    "spark-sql-kafka-0-10_",
    "spark-token-provider-kafka-0-10_",
    "kafka-clients-",
    "commons-pool2-",
)


#: Driver JVM options of an embedded (local) session; see build_session.
EMBEDDED_JAVA_OPTIONS = "-XX:+UseParallelGC"


class SparkSetupError(ConnectOffsetsError):
    """Spark cannot be started as asked; the message says what is missing and how to get it."""


def cache_dir() -> Path:
    return Path(os.environ.get("CONNECT_OFFSETS_CACHE") or Path.home() / ".cache" / "connect-offsets")


def pyspark_version() -> str:
    try:
        import pyspark
    except ImportError:
        raise SparkSetupError(
            "pyspark is not installed: install the optional extra, pip install 'connect-offsets-operator[spark]'"
        ) from None
    return str(pyspark.__version__)


def under_spark_submit() -> bool:
    """True when spark-submit started this Python process (it passes the JVM gateway in the environment)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def find_kafka_jars(explicit: list[str] | None = None) -> list[str]:
    """The Kafka source jars: ``explicit`` paths if given, else the cached set for pyspark's version."""
    if explicit:
        missing = [j for j in explicit if not Path(j).is_file()]
        if missing:
            raise SparkSetupError(f"--jars: no such file: {', '.join(missing)}")
        return list(explicit)
    version = pyspark_version()
    folder = cache_dir() / f"spark-{version}" / "jars"
    jars = sorted(str(p) for p in folder.glob("*.jar")) if folder.is_dir() else []
    absent = [prefix for prefix in REQUIRED_JAR_PREFIXES if not any(Path(j).name.startswith(prefix) for j in jars)]
    if absent:
        raise SparkSetupError(
            f"Spark's Kafka source jars for pyspark {version} are not in {folder} "
            f"(missing: {', '.join(p.rstrip('-_') for p in absent)}); run `make spark-jars` "
            "(hack/fetch-spark-jars.sh; SPARK_VERSION in hack/versions.env must equal the installed pyspark) "
            "or pass --jars"
        )
    return jars


def local_slots(master: str) -> int | None:
    """Task slots of an embedded ``local``, ``local[N]``, ``local[*]`` or ``local[N,F]`` master, else None."""
    match = re.fullmatch(r"local(?:\[(\*|\d+)(?:,\d+)?\])?", master.strip())
    if match is None:
        return None
    slots = match.group(1) or "1"
    return (os.cpu_count() or 1) if slots == "*" else max(1, int(slots))


@dataclass
class SparkOptions:
    master: str | None = None  # None: local[*] embedded, or whatever spark-submit chose
    jars: list[str] | None = None
    shuffle_partitions: int | None = None
    conf: dict[str, str] = field(default_factory=dict)
    progress: bool = True


def build_session(options: SparkOptions, app_name: str = "connect-offsets-pipeline") -> SparkSession:
    """Start (or, under spark-submit, join) the SparkSession for a pipeline job."""
    pyspark_version()
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if under_spark_submit():
        if options.master:
            builder = builder.master(options.master)
        if options.jars:
            builder = builder.config("spark.jars", ",".join(find_kafka_jars(options.jars)))
    else:
        master = options.master or "local[*]"
        builder = builder.master(master).config("spark.jars", ",".join(find_kafka_jars(options.jars)))
        if master.startswith("local"):
            # Embedded: loopback only, no UI port to collide with other jobs on the machine.
            builder = (
                builder.config("spark.driver.host", "127.0.0.1")
                .config("spark.driver.bindAddress", "127.0.0.1")
                .config("spark.ui.enabled", "false")
            )
            # The throughput collector: the driver is the only JVM and runs short batch jobs, where G1's
            # concurrent work and write barriers cost more than its pauses save (bench_pipeline.py: less
            # CPU both for the first job in a fresh JVM and for the later ones). ``--conf`` still wins.
            builder = builder.config("spark.driver.extraJavaOptions", EMBEDDED_JAVA_OPTIONS)
    shuffle_partitions = options.shuffle_partitions
    slots = None if under_spark_submit() else local_slots(options.master or "local[*]")
    if shuffle_partitions is None and slots is not None:
        # Embedded: one shuffle partition per task slot (``--conf`` still wins). Spark's default (200) is
        # sized for clusters; here each map task (one per Kafka partition) would write 200 shuffle blocks
        # and the reduce side run up to 200 tasks on one or two cores, for results of a few thousand rows
        # (the jobs reduce per stored key before anything else).
        shuffle_partitions = slots
    if shuffle_partitions is not None:
        builder = builder.config("spark.sql.shuffle.partitions", str(shuffle_partitions))
    # The worker's Jackson reads a partition object that gives a key twice with the last value winning;
    # VARIANT refuses such an object (and the key with it) unless told to do the same (jobs._decode_key).
    builder = builder.config("spark.sql.variant.allowDuplicateKeys", "true")
    builder = builder.config("spark.ui.showConsoleProgress", "true" if options.progress else "false")
    for key, value in options.conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
