"""The broker's files on disk: formatting KRaft storage, reading config and logs back."""

from __future__ import annotations

import os
import subprocess
from collections import deque
from pathlib import Path

from delaybridge.connectors.localkafka.config import BrokerLayout
from delaybridge.connectors.localkafka.errors import BrokerStartError, LocalKafkaError

FORMAT_TIMEOUT_S = 120.0
LOG_TAIL_LINES = 40


def format_storage(
    java: Path, classpath: list[Path], layout: BrokerLayout, cluster_id: str
) -> None:
    """Run ``kafka.tools.StorageTool format`` once for a fresh data dir.

    It writes ``meta.properties`` (cluster id, node id) and the bootstrap
    metadata checkpoint into ``log.dirs``; a broker refuses to start on
    unformatted storage. The quorum is static (``controller.quorum.voters``),
    so no ``--standalone`` is needed (see config.py for why).
    """
    command = [
        str(java),
        "-Xmx256m",
        "-XX:TieredStopAtLevel=1",  # a short-lived tool: C1 alone starts faster
        "-XX:+UseSerialGC",
        f"-Dlog4j2.configurationFile={layout.log4j_properties}",
        "-cp",
        os.pathsep.join(str(p) for p in classpath),
        "kafka.tools.StorageTool",
        "format",
        "--cluster-id",
        cluster_id,
        "--config",
        str(layout.server_properties),
    ]
    try:
        result = subprocess.run(
            command, capture_output=True, text=True, timeout=FORMAT_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise BrokerStartError(
            f"formatting {layout.log_dirs} took over {FORMAT_TIMEOUT_S:.0f} s"
        ) from exc
    if result.returncode != 0:
        raise BrokerStartError(
            f"formatting {layout.log_dirs} failed (exit {result.returncode}):\n"
            f"{(result.stdout + result.stderr).strip()[-3000:]}"
        )


def read_properties(path: Path) -> dict[str, str]:
    """A minimal java.util.Properties reader: ``key=value`` lines and ``#`` comments."""
    try:
        text = path.read_text()
    except FileNotFoundError as exc:
        raise LocalKafkaError(f"{path}: missing; was this data dir made by `kafka up`?") from exc
    props: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "!")) and "=" in line:
            key, value = line.split("=", 1)
            props[key.strip()] = value.strip().replace("\\\\", "\\")
    return props


def read_bootstrap(server_properties: Path) -> str:
    """``host:port`` of the PLAINTEXT advertised listener in a written server.properties."""
    listeners = read_properties(server_properties).get("advertised.listeners", "")
    for listener in listeners.split(","):
        name, sep, address = listener.partition("://")
        if sep and name == "PLAINTEXT":
            return address
    raise LocalKafkaError(f"{server_properties}: no PLAINTEXT advertised.listeners entry")


def log_tail(layout: BrokerLayout, lines: int = LOG_TAIL_LINES) -> str:
    """The last lines of the broker log and of the JVM's stdout, for error messages."""
    parts = []
    for path in (layout.server_log, layout.stdout_log):
        try:
            with path.open(errors="replace") as f:
                tail = "".join(deque(f, maxlen=lines)).rstrip()
        except FileNotFoundError:
            continue
        if tail:
            parts.append(f"--- last {lines} lines of {path} ---\n{tail}")
    return "\n".join(parts) or f"(no log written yet in {layout.data_dir / 'logs'})"
