"""Start Spark's JVM with its stderr passed through a filter of known start-up noise.

Spark 4's launcher always runs Java with ``--add-modules=jdk.incubator.vector``, and
Java then prints ``WARNING: Using incubator modules: jdk.incubator.vector`` on stderr,
with no option to silence it. Nothing in it is for a user to act on, yet it is the
first line of every reconciliation (and of the demo's). So the JVM is started here with
its stderr on a pipe: :data:`KNOWN_NOISE` lines go to the debug log, every other line
(Spark's own warnings and errors, from log4j2-quiet.properties) to this process's
stderr unchanged, as it comes.

Only a JVM this process launches is affected; under ``spark-submit`` the JVM is already
running and its output is the submit line's business.
"""

from __future__ import annotations

import logging
import re
import subprocess
import sys
import threading
from collections.abc import Mapping
from typing import IO, Any

log = logging.getLogger(__name__)

#: stderr lines of the JVM that are logged at debug level instead of printed.
KNOWN_NOISE = (re.compile(r"^WARNING: Using incubator modules: jdk\.incubator\.vector\s*$"),)


def forward(stream: IO[bytes], out: IO[str]) -> None:
    """Copy ``stream`` to ``out`` line by line until EOF, logging known noise instead."""
    for raw in iter(stream.readline, b""):
        line = raw.decode("utf-8", errors="replace")
        if any(pattern.match(line) for pattern in KNOWN_NOISE):
            log.debug("Spark JVM: %s", line.rstrip())
            continue
        out.write(line)
        out.flush()


def start_context(options: Mapping[str, object]) -> None:
    """Create the process's SparkContext from ``options``, its JVM's stderr filtered.

    A no-op when a JVM is already up (a second session in this process, or
    ``spark-submit``): Spark's session builder then reuses it as usual.
    """
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None:
        return
    conf = SparkConf()
    conf.setAll([(key, str(value)) for key, value in options.items()])
    popen = {"stderr": subprocess.PIPE}
    gateway: Any = launch_gateway(conf, popen_kwargs=popen)  # type: ignore[no-untyped-call]
    threading.Thread(
        target=forward, args=(gateway.proc.stderr, sys.stderr), name="spark-jvm-stderr", daemon=True
    ).start()
    SparkContext(conf=conf, gateway=gateway)
