"""What a local broker is (ports, paths) and the files that configure it.

One :class:`BrokerLayout` names every path in the data directory, so the broker,
``status`` and the docs agree on them::

    <data_dir>/
      server.properties   rendered here, rewritten at every start
      log4j2.properties   rendered here: the broker logs to logs/server.log
      kafka.pid           pid of the running JVM (absent when stopped)
      kafka.lock          flock'ed while a start or stop is in progress
      kraft/              log.dirs: topic data and the KRaft metadata log
      logs/server.log     the broker's log (log4j2)
      logs/stdout.log     the JVM's own stdout/stderr (crashes before logging starts)

The broker runs in KRaft *combined* mode: one JVM is both the controller (the
Raft quorum of one) and the broker. The quorum is declared statically with
``controller.quorum.voters`` rather than bootstrapped dynamically
(``controller.quorum.bootstrap.servers`` + ``format --standalone``): the dynamic
form records the controller's endpoint in the metadata log at format time, so a
restart with another ``--controller-port`` would point at a dead address; the
static form reads the endpoint from this file at every start.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

NODE_ID = 1
"""The single node's id; the static voter set is ``1@host:controller_port``."""


@dataclass(frozen=True)
class BrokerLayout:
    """Addresses and paths of one local broker."""

    data_dir: Path
    host: str = "127.0.0.1"
    port: int = 9092
    controller_port: int = 9093

    @property
    def bootstrap(self) -> str:
        """The ``bootstrap.servers`` value clients use."""
        return f"{self.host}:{self.port}"

    @property
    def server_properties(self) -> Path:
        return self.data_dir / "server.properties"

    @property
    def log4j_properties(self) -> Path:
        return self.data_dir / "log4j2.properties"

    @property
    def pid_file(self) -> Path:
        return self.data_dir / "kafka.pid"

    @property
    def lock_file(self) -> Path:
        """flock'ed while starting or stopping, so concurrent callers take turns."""
        return self.data_dir / "kafka.lock"

    @property
    def log_dirs(self) -> Path:
        return self.data_dir / "kraft"

    @property
    def meta_properties(self) -> Path:
        """Written by ``StorageTool format``; its presence means "formatted"."""
        return self.log_dirs / "meta.properties"

    @property
    def server_log(self) -> Path:
        return self.data_dir / "logs" / "server.log"

    @property
    def stdout_log(self) -> Path:
        return self.data_dir / "logs" / "stdout.log"


def render_server_properties(layout: BrokerLayout) -> str:
    """The broker's ``server.properties`` for a single-node KRaft cluster."""
    host = layout.host
    settings: list[tuple[str, object]] = [
        # KRaft combined mode: this JVM is the whole cluster.
        ("process.roles", "broker,controller"),
        ("node.id", NODE_ID),
        ("controller.quorum.voters", f"{NODE_ID}@{host}:{layout.controller_port}"),
        ("controller.listener.names", "CONTROLLER"),
        (
            "listeners",
            f"PLAINTEXT://{host}:{layout.port},CONTROLLER://{host}:{layout.controller_port}",
        ),
        ("advertised.listeners", f"PLAINTEXT://{host}:{layout.port}"),
        ("inter.broker.listener.name", "PLAINTEXT"),
        ("listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"),
        ("log.dirs", layout.log_dirs),
        # One broker: every internal topic must accept replication factor 1.
        ("num.partitions", 1),
        ("default.replication.factor", 1),
        ("offsets.topic.replication.factor", 1),
        ("offsets.topic.num.partitions", 1),
        ("transaction.state.log.replication.factor", 1),
        ("transaction.state.log.min.isr", 1),
        ("transaction.state.log.num.partitions", 1),
        ("share.coordinator.state.topic.replication.factor", 1),
        ("share.coordinator.state.topic.min.isr", 1),
        # Tests join consumer groups constantly; the default 3 s delay would
        # add 3 s to each of them.
        ("group.initial.rebalance.delay.ms", 0),
        # Small and quick to recover: this broker is for development and tests.
        ("num.network.threads", 2),
        ("num.io.threads", 4),
        ("num.recovery.threads.per.data.dir", 1),
        ("log.retention.hours", 168),
        ("log.segment.bytes", 64 * 1024 * 1024),
    ]
    lines = ["# Written by delaybridge (connectors/localkafka); rewritten at every start."]
    lines += [f"{key}={_escape(str(value))}" for key, value in settings]
    return "\n".join(lines) + "\n"


def render_log4j2_properties(layout: BrokerLayout) -> str:
    """A log4j2 configuration: INFO to ``logs/server.log``, rolled at 50 MB."""
    log = layout.server_log
    archive = log.with_name("server-%i.log.gz")
    return "\n".join(
        [
            "# Written by delaybridge (connectors/localkafka); rewritten at every start.",
            "status = warn",
            "appender.file.type = RollingFile",
            "appender.file.name = file",
            f"appender.file.fileName = {_escape(str(log))}",
            f"appender.file.filePattern = {_escape(str(archive))}",
            "appender.file.layout.type = PatternLayout",
            "appender.file.layout.pattern = [%d] %p %m (%c)%n",
            "appender.file.policies.type = Policies",
            "appender.file.policies.size.type = SizeBasedTriggeringPolicy",
            "appender.file.policies.size.size = 50MB",
            "appender.file.strategy.type = DefaultRolloverStrategy",
            "appender.file.strategy.max = 3",
            "rootLogger.level = INFO",
            "rootLogger.appenderRef.file.ref = file",
            # The request log and the state-change log are chatty at INFO.
            "logger.request.name = kafka.request.logger",
            "logger.request.level = WARN",
            "logger.state.name = state.change.logger",
            "logger.state.level = WARN",
            "",
        ]
    )


def _escape(value: str) -> str:
    """Escape a value for java.util.Properties (backslashes would be eaten)."""
    return value.replace("\\", "\\\\")
