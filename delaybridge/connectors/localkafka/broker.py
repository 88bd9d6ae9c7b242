"""A single-node Apache Kafka 4.x broker on 127.0.0.1, run from Maven Central jars.

    kafka = LocalKafka(Path("/tmp/k"), port=19092, controller_port=19093)
    kafka.start(timeout_s=60)        # fetch, format, launch, prove it works
    ... kafka.bootstrap ...          # "127.0.0.1:19092"
    kafka.stop()                     # SIGTERM, then SIGKILL after a timeout

The JVM is detached: it keeps running after the Python process that started it
exits, and any later ``LocalKafka`` on the same data dir finds it through the
pid file (that is how ``delaybridge kafka down`` works). Constructing a
``LocalKafka`` touches nothing; every effect happens in a method.
"""

from __future__ import annotations

import base64
import enum
import logging
import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from delaybridge import jars
from delaybridge.connectors.localkafka import paths, process
from delaybridge.connectors.localkafka.config import (
    BrokerLayout,
    render_log4j2_properties,
    render_server_properties,
)
from delaybridge.connectors.localkafka.errors import (
    BrokerStartError,
    LocalKafkaError,
    PortInUseError,
)
from delaybridge.connectors.localkafka.java import find_java
from delaybridge.connectors.localkafka.probe import port_accepts, port_free, round_trip
from delaybridge.connectors.localkafka.storage import format_storage, log_tail, read_bootstrap
from delaybridge.durable import write_atomic
from delaybridge.errors import KafkaError

PROBE_TOPIC = "delaybridge-probe"
# Tuned for start-up time on small, busy machines rather than peak throughput:
# C1-only JIT and the serial collector halve the time to a working broker on
# 2 shared cores (28 s -> 14 s measured under load). Add or override options
# (the last of two -XX flags wins) with $DELAYBRIDGE_KAFKA_JVM_OPTS, e.g.
# "-XX:TieredStopAtLevel=4 -XX:+UseG1GC" for a benchmark.
JVM_OPTIONS = (
    "-Xms128m",
    "-XX:TieredStopAtLevel=1",
    "-XX:+UseSerialGC",
    "-XX:+ExitOnOutOfMemoryError",
    "-Djava.awt.headless=true",
)

_log = logging.getLogger(__name__)


class BrokerState(enum.Enum):
    RUNNING = "running"
    STOPPED = "stopped"


class StartOutcome(enum.Enum):
    STARTED = "started"
    ALREADY_RUNNING = "already running"


@dataclass(frozen=True)
class BrokerStatus:
    """What ``kafka status`` prints. ``listening``: the client port accepts TCP."""

    state: BrokerState
    data_dir: Path
    pid: int | None = None
    bootstrap: str | None = None
    listening: bool = False

    def describe(self) -> str:
        if self.state is BrokerState.STOPPED:
            return f"stopped (data dir {self.data_dir})"
        port = "accepting connections" if self.listening else "NOT accepting connections"
        return (
            f"running, pid {self.pid}, bootstrap {self.bootstrap} ({port}), "
            f"data dir {self.data_dir}"
        )


class LocalKafka:
    """One local KRaft broker+controller; not thread-safe (one owner drives it)."""

    def __init__(
        self,
        data_dir: Path | None = None,
        *,
        port: int = 9092,
        controller_port: int = 9093,
        host: str = "127.0.0.1",
        cache_dir: Path | None = None,
        heap_mb: int = 512,
    ) -> None:
        data_dir = (data_dir or paths.default_data_dir()).expanduser().absolute()
        self.layout = BrokerLayout(data_dir, host, port, controller_port)
        self.cache_dir = (cache_dir or paths.default_cache_dir()).expanduser().absolute()
        self.heap_mb = heap_mb

    @property
    def bootstrap(self) -> str:
        return self.layout.bootstrap

    def fetch_jars(self, *, progress: bool = True) -> list[Path]:
        """Download (once) and verify the pinned classpath; return it in order."""
        return jars.fetch(paths.lock_file(), self.cache_dir, progress=progress)

    def pid(self) -> int | None:
        """The pid of this data dir's running broker, or None if none runs."""
        try:
            pid = process.read_pid(self.layout.pid_file)
        except ValueError as exc:
            raise LocalKafkaError(str(exc)) from exc
        if pid is None or not process.is_running(pid, self._marker):
            return None
        return pid

    def status(self) -> BrokerStatus:
        pid = self.pid()
        if pid is None:
            return BrokerStatus(BrokerState.STOPPED, self.layout.data_dir)
        bootstrap = read_bootstrap(self.layout.server_properties)
        host, _, port = bootstrap.rpartition(":")
        return BrokerStatus(
            BrokerState.RUNNING, self.layout.data_dir, pid, bootstrap, port_accepts(host, int(port))
        )

    def start(self, timeout_s: float = 60.0, *, progress: bool = True) -> StartOutcome:
        """Start the broker and return once a produce + consume round trip works.

        1. A broker of this data dir already running: nothing to do
           (an error if it listens on other ports than asked for).
        2. Check both ports are free and Java 17+ is installed.
        3. Fetch the pinned jars into the cache (verified; not counted in ``timeout_s``).
        4. Write server.properties and log4j2.properties; format the KRaft
           storage once (a fresh cluster id) if it is not formatted yet.
        5. Launch ``kafka.Kafka`` detached; write the pid file.
        6. Within ``timeout_s``: wait for the port, then round-trip a record
           through the probe topic. On failure the broker is killed and the
           error carries the tail of its log.

        Concurrent calls on one data dir (any process) are serialised.
        """
        with process.exclusive(self.layout.lock_file):
            return self._start(timeout_s, progress)

    def _start(self, timeout_s: float, progress: bool) -> StartOutcome:
        running = self.pid()
        if running is not None:
            bootstrap = read_bootstrap(self.layout.server_properties)
            if bootstrap != self.bootstrap:
                raise LocalKafkaError(
                    f"the broker of {self.layout.data_dir} already runs (pid {running}) at "
                    f"{bootstrap}, not {self.bootstrap}; run `delaybridge kafka down` first"
                )
            return StartOutcome.ALREADY_RUNNING
        self.layout.pid_file.unlink(missing_ok=True)  # stale: its process is gone
        self._check_ports()
        java = find_java()
        classpath = self.fetch_jars(progress=progress)
        self._write_config()
        if not self.layout.meta_properties.exists():
            formatting = time.monotonic()
            format_storage(java, classpath, self.layout, _new_cluster_id())
            _log.info(
                "formatted KRaft storage in %s in %.1f s",
                self.layout.log_dirs,
                time.monotonic() - formatting,
            )
        started = time.monotonic()
        pid = process.spawn_detached(
            self._command(java, classpath), output=self.layout.stdout_log, cwd=self.layout.data_dir
        )
        process.write_pid(self.layout.pid_file, pid)
        try:
            self._await_ready(pid, timeout_s)
        except BaseException:
            # Whatever went wrong (even Ctrl-C), leave no half-started broker behind.
            if process.is_alive(pid):
                process.kill(pid, timeout_s=10.0)
            self.layout.pid_file.unlink(missing_ok=True)
            raise
        _log.info(
            "Kafka %s broker at %s ready in %.1f s (pid %d, data dir %s)",
            paths.KAFKA_VERSION,
            self.bootstrap,
            time.monotonic() - started,
            pid,
            self.layout.data_dir,
        )
        return StartOutcome.STARTED

    def stop(self, timeout_s: float = 30.0) -> bool:
        """SIGTERM the broker, SIGKILL it after ``timeout_s``. False if none ran."""
        if not self.layout.data_dir.is_dir():
            return False
        with process.exclusive(self.layout.lock_file):
            pid = self.pid()
            if pid is None:
                self.layout.pid_file.unlink(missing_ok=True)
                return False
            if process.stop(pid, timeout_s):
                _log.warning("broker pid %d ignored SIGTERM for %.0f s; killed it", pid, timeout_s)
            self.layout.pid_file.unlink(missing_ok=True)
            return True

    def kill(self) -> None:
        """SIGKILL the broker at once, as a crash would (for tests)."""
        pid = self.pid()
        if pid is None:
            raise LocalKafkaError(f"no broker runs from {self.layout.data_dir}")
        process.kill(pid, timeout_s=10.0)
        self.layout.pid_file.unlink(missing_ok=True)

    @property
    def _marker(self) -> str:
        # The JVM's command line names our server.properties; a reused pid won't.
        return str(self.layout.server_properties)

    def _check_ports(self) -> None:
        for option, port in (
            ("--port", self.layout.port),
            ("--controller-port", self.layout.controller_port),
        ):
            if not port_free(self.layout.host, port):
                raise PortInUseError(
                    f"{self.layout.host}:{port} is in use by another process (no broker of "
                    f"{self.layout.data_dir} runs); free it or choose another {option}"
                )

    def _write_config(self) -> None:
        self.layout.data_dir.mkdir(parents=True, exist_ok=True)
        for path, text in (
            (self.layout.server_properties, render_server_properties(self.layout)),
            (self.layout.log4j_properties, render_log4j2_properties(self.layout)),
        ):
            write_atomic(path, text)

    def _command(self, java: Path, classpath: list[Path]) -> list[str]:
        return [
            str(java),
            f"-Xmx{self.heap_mb}m",
            *JVM_OPTIONS,
            *os.environ.get("DELAYBRIDGE_KAFKA_JVM_OPTS", "").split(),
            f"-Dlog4j2.configurationFile={self.layout.log4j_properties}",
            "-cp",
            os.pathsep.join(str(p) for p in classpath),
            "kafka.Kafka",
            str(self.layout.server_properties),
        ]

    def _await_ready(self, pid: int, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s

        def alive() -> bool:
            # Our own unreaped child: its pid cannot have been reused, so no
            # command-line check (which can race the java launcher's start-up).
            return process.is_alive(pid)

        def fail(reason: str) -> BrokerStartError:
            # start() kills the JVM when this propagates.
            return BrokerStartError(f"{reason}\n{log_tail(self.layout)}")

        host, port = self.layout.host, self.layout.port
        if not process.wait_until(lambda: port_accepts(host, port) or not alive(), timeout_s):
            raise fail(f"broker did not open {self.bootstrap} within {timeout_s:.0f} s")
        last_error: KafkaError | None = None
        while (left_s := deadline - time.monotonic()) > 0:
            if not alive():
                raise fail(f"broker (pid {pid}) exited during startup")
            try:
                round_trip(self.bootstrap, PROBE_TOPIC, timeout_s=min(left_s, 5.0))
                return
            except KafkaError as exc:  # not ready yet: retry until the deadline
                last_error = exc
                _log.debug("probe of %s not yet through: %s", self.bootstrap, exc)
        raise fail(
            f"broker at {self.bootstrap} did not complete a produce/consume round trip "
            f"within {timeout_s:.0f} s (last error: {last_error})"
        )


def _new_cluster_id() -> str:
    """A Kafka cluster id: 16 random bytes, URL-safe base64 without padding.

    Kafka's own ``Uuid.randomUuid`` also avoids ids starting with '-' (they read
    as command-line options); so do we.
    """
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cid.startswith("-"):
            return cid
