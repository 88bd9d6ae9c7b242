"""The sidecar under benchmark: a real ``delaybridge run`` child process, watched.

The child gets a settings file naming the benchmark's delay topic and the cluster exactly
as the benchmark reaches it (``kafka.client`` included), its own consumer group and a free
HTTP port. The parent samples the child's memory (anonymous vs file-backed: the store's
mmap'd segments) and reads its progress from the admin API.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from delaybridge.connectors import KafkaSettings
from delaybridge.errors import DelayBridgeError
from delaybridge.hotpath import FORCE_PURE_ENV


def sidecar_config(
    kafka: KafkaSettings, work: Path, delay: str, port: int, **overrides: Any
) -> dict[str, Any]:
    """The child's settings: one delay topic and its own group, dead-letter and cancel
    topics; ``overrides`` are more top-level settings (e.g. ``changelog``)."""
    return {
        "kafka": {**kafka.model_dump(), "group_id": f"bench-{delay}", "instance_id": ""},
        "delay_topics": [delay],
        "dead_letter_topic": f"{delay}.dlt",
        "cancel_topic": f"{delay}.cancels",
        "store": {"data_dir": str(work / "data")},
        "http": {"port": port},
        **overrides,
    }


class SidecarProcess:
    """``delaybridge run`` in a child process; ready when the constructor returns."""

    def __init__(self, kafka: KafkaSettings, work: Path, delay: str, **overrides: Any) -> None:
        work.mkdir(parents=True, exist_ok=True)
        # pure_python=True: the sidecar runs the pure-Python hot path (delaybridge/hotpath.py).
        env = {**os.environ, FORCE_PURE_ENV: "1"} if overrides.pop("pure_python", False) else None
        self.port = free_port()
        # YAML is a superset of JSON. The file may hold client secrets: `work` is inside
        # the benchmark's private temporary directory (mode 0700).
        path = work / "config.json"
        path.write_text(json.dumps(sidecar_config(kafka, work, delay, self.port, **overrides)))
        self.log = (work / "sidecar.log").open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "delaybridge", "run", "--config", str(path)],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env=env,
        )
        self.peak_anon_mb = 0.0
        self.peak_file_mb = 0.0
        self._sampling = True
        threading.Thread(target=self._sample, daemon=True).start()
        self.wait_for(lambda: self.get("/readyz") is not None, 90, "sidecar ready")

    def _sample(self) -> None:
        """Peak anonymous memory vs file-backed pages (the store's mmap'd segments)."""
        while self._sampling and self.proc.poll() is None:
            try:
                status = Path(f"/proc/{self.proc.pid}/status").read_text()
            except OSError:
                return
            for line in status.splitlines():
                if line.startswith("RssAnon:"):
                    self.peak_anon_mb = max(self.peak_anon_mb, int(line.split()[1]) / 1024)
                elif line.startswith("RssFile:"):
                    self.peak_file_mb = max(self.peak_file_mb, int(line.split()[1]) / 1024)
            time.sleep(0.05)  # the sampling period

    def get(self, path: str, method: str = "GET") -> Any:
        """The admin API's JSON answer, or None when the sidecar does not answer (yet)."""
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", method=method)
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                return json.loads(response.read() or b"null")
        except (OSError, ValueError):
            return None

    def stored(self) -> int:
        """Records stored so far, over every partition (last source offset + 1)."""
        stats = self.get("/admin/stats") or {}
        return sum(int(p["last_source_offset"]) + 1 for p in stats.get("partitions", []))

    def peak_rss_mb(self) -> float:
        """Peak RSS (``VmHWM``) of the sidecar, summed with its worker processes' (an
        upper bound of the pod's peak: each peaked at its own time)."""
        return tree_status_mb(self.proc.pid, "VmHWM:") or float("nan")

    def children(self) -> list[int]:
        """The pids of its worker processes (none with ``workers: 1``)."""
        return _children(self.proc.pid)

    def rss_mb(self) -> float:
        """The resident memory of the sidecar and its worker processes now, summed."""
        return tree_status_mb(self.proc.pid, "VmRSS:")

    def cpu_seconds(self) -> float:
        """CPU time (user + system) the sidecar and its worker processes used so far."""
        return tree_cpu_seconds(self.proc.pid)

    def stop(self) -> None:
        self._sampling = False
        self.proc.terminate()
        self.proc.wait(60)
        self.log.close()

    def wait_for(self, cond: Callable[[], bool], timeout_s: float, what: str) -> None:
        """Poll ``cond`` until it holds; fail early if the child exits."""
        wait_for_child(self.proc, "sidecar", self.log.name, cond, timeout_s, what)


def wait_for_child(
    proc: subprocess.Popen[bytes],
    name: str,
    log: str,
    cond: Callable[[], bool],
    timeout_s: float,
    what: str,
) -> None:
    """Poll ``cond`` until it holds, for up to ``timeout_s``; raise
    :class:`DelayBridgeError` naming ``name`` (and its ``log``) when the child exits
    first or the time runs out."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise DelayBridgeError(
                f"{name} exited with {proc.returncode} while waiting for {what}; see {log}"
            )
        if cond():
            return
        time.sleep(0.1)  # polling another process, bounded by the deadline
    raise DelayBridgeError(f"timed out after {timeout_s} s waiting for {what} ({name})")


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(c) for c in text.split()]


def process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants now (a process gone meanwhile has none)."""
    tree = [pid]
    for child in _children(pid):
        tree += process_tree(child)
    return tree


def tree_status_mb(pid: int, field: str) -> float:
    """A kB field of ``/proc/<pid>/status`` (``VmHWM:``, ``VmRSS:``), summed over ``pid``
    and its descendants, in MB (a process gone meanwhile counts nothing)."""
    total = 0.0
    for member in process_tree(pid):
        try:
            status = Path(f"/proc/{member}/status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith(field):
                total += int(line.split()[1]) / 1024
    return total


def tree_cpu_seconds(pid: int) -> float:
    """CPU time (user + system) that ``pid`` and its live descendants used so far, every
    thread included."""
    total = 0
    for member in process_tree(pid):
        try:
            fields = Path(f"/proc/{member}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (stat fields 14, 15)
    return total / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
