"""The Spark session for reconciliation: local and small by default, the cluster's otherwise.

Two ways in:

* :func:`local_session` starts a JVM itself (``delaybridge reconcile``, tests, the demo).
  Settings fit a 2-core machine: few shuffle partitions (Spark's default of 200 would
  spend more time scheduling empty tasks than reconciling), a modest driver heap, no web
  UI, no console progress bar (rich shows ours), warnings-only logs, UTC, and the
  connector jars as local files. The JVM's stderr is filtered of Java's start-up
  notice about incubator modules (:mod:`delaybridge.spark.jvm`).
* :func:`attached_session` is for ``spark-submit``: master, memory and ``--jars`` come
  from the submit line, so only the SQL settings the job relies on are set.
"""

from __future__ import annotations

import logging
import os
import sys
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from delaybridge.spark.jvm import start_context

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

APP_NAME = "delaybridge-reconcile"
LOG_CONFIG = "log4j2-quiet.properties"


def _log_config() -> Path:
    return Path(str(resources.files(__package__ or "delaybridge.spark").joinpath(LOG_CONFIG)))


def local_session(
    jars: list[Path], *, master: str, driver_memory: str, shuffle_partitions: int
) -> SparkSession:
    """Start (or reuse) a session whose JVM this process launches."""
    from pyspark.sql import SparkSession

    # Python workers must import delaybridge and pyarrow: run them on this interpreter.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if master.startswith("local"):
        # Otherwise Spark resolves the host name, warns when it maps to loopback, and
        # may pick an interface address that a firewall blocks.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    options: dict[str, bool | float | int | str | None] = {
        "spark.app.name": APP_NAME,
        "spark.master": master,
        "spark.jars": ",".join(str(p) for p in jars),
        "spark.driver.memory": driver_memory,
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{_log_config()}",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        # Local mode needs no resolvable host name; some CI hosts have none.
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
    }
    # The JVM starts here rather than in the builder, so that its stderr goes through
    # a filter of known start-up noise (delaybridge/spark/jvm.py).
    start_context(options)
    builder = SparkSession.builder.config(map=options)
    spark = _sql_settings(builder, shuffle_partitions).getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    # py4j logs every closed gateway connection at INFO; nothing there is for users.
    logging.getLogger("py4j").setLevel(logging.WARNING)
    return spark


def attached_session(shuffle_partitions: int) -> SparkSession:
    """Join the session ``spark-submit`` prepared (its master, memory and ``--jars``)."""
    from pyspark.sql import SparkSession

    spark = _sql_settings(SparkSession.builder.appName(APP_NAME), shuffle_partitions).getOrCreate()
    spark.sparkContext.setLogLevel("WARN")  # the submit line's log4j config prints INFO
    return spark


def under_spark_submit() -> bool:
    """True when this Python driver was launched by ``spark-submit`` (it set the gateway)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def _sql_settings(builder: SparkSession.Builder, shuffle_partitions: int) -> SparkSession.Builder:
    return (
        builder.config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.sql.session.timeZone", "UTC")
        # Cached frames are read a few times each, right away: compressing them costs
        # more CPU (the scarce resource on a 2-core box) than it saves; they spill to
        # disk if memory runs short.
        .config("spark.sql.inMemoryColumnarStorage.compressed", "false")
        # Arrow batches to the classify() workers: large enough to amortise the hop.
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "20000")
        # Let adaptive execution build a hash table instead of sorting both sides when
        # every shuffled partition of a join fits in this many bytes (the schedules with
        # their deliveries: a third less CPU for 1M + 1M). Bigger partitions keep the
        # sort-merge join, which can spill.
        .config("spark.sql.adaptive.maxShuffledHashJoinLocalMapThreshold", "64m")
    )
