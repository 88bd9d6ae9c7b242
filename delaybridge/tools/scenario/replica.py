"""One replica of a rolled group: ``delaybridge run`` with its own data directory, stopped
with SIGTERM or killed with SIGKILL and started again on the same disk, as a StatefulSet
restarts a pod.

Its settings file is written once (the benchmark's settings, the replica's data directory
and HTTP port, the caller's overlay) and kept, so every start is the same replica: the
same static member id (kept in its data directory), the same stores. The log of every
run is appended to ``<work>/sidecar.log``. Its state is read from the admin API:
``/readyz`` (200: partitions assigned, stores recovered) and ``/admin/stats`` (the
partitions it owns and their roles).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from delaybridge.bridge.partition.state import Role


class Replica:
    """A restartable ``delaybridge run`` child; see the module docstring."""

    def __init__(self, name: str, work: Path, config: dict[str, Any], port: int) -> None:
        self.name = name
        self.work = work
        work.mkdir(parents=True, exist_ok=True)
        # YAML is a superset of JSON. The file may hold client secrets: `work` is inside
        # the benchmark's private temporary directory (mode 0700).
        self.config_path = work / "config.json"
        self.config_path.write_text(json.dumps(config))
        self.log_path = work / "sidecar.log"
        self.port = port
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "delaybridge", "run", "--config", str(self.config_path)],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: the pod, for kill()
            )

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def terminate(self, timeout_s: float = 60) -> int:
        """SIGTERM, as Kubernetes stops a pod; the exit code once it has exited."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout_s)

    def kill(self) -> None:
        """SIGKILL to the pod, its worker processes included: no handover, no flush."""
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)

    def get(self, path: str) -> Any:
        """The admin API's JSON answer; None when it does not answer 200 (yet)."""
        url = f"http://127.0.0.1:{self.port}{path}"
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return json.loads(response.read() or b"null")
        except (OSError, ValueError, urllib.error.HTTPError):
            return None

    def ready(self) -> bool:
        return self.get("/readyz") is not None

    def owned(self) -> set[int]:
        """The delay-topic partitions it owns and delivers now (empty if it does not answer)."""
        stats = self.get("/admin/stats") or {}
        parts = stats.get("partitions", [])
        return {int(p["partition"]) for p in parts if p.get("role") == Role.ACTIVE}

    def wait_for(self, condition: Callable[[], bool], timeout_s: float, what: str) -> float:
        """Poll ``condition`` every 50 ms until it holds; the monotonic time it did. Fails
        at once if the process exits."""
        deadline = time.monotonic() + timeout_s
        while True:
            if not self.running:
                code = self.proc.returncode if self.proc is not None else None
                raise RuntimeError(f"{self.name} exited ({code}); see {self.log_path}")
            if condition():
                return time.monotonic()
            if time.monotonic() >= deadline:
                raise RuntimeError(f"{self.name}: timed out after {timeout_s} s waiting for {what}")
            time.sleep(0.05)  # the polling interval
