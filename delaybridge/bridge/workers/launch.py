"""``delaybridge run`` as a supervisor: the process side of ``supervisor.py``.

:func:`run_supervised` builds the supervisor, its HTTP server on the pod's port
(``fanout.py``) and the signal handlers, and blocks until SIGTERM/SIGINT has stopped
every worker. :func:`spawn_cli` starts worker ``i`` as
``<python> -m delaybridge [-v] run --worker i [--config FILE]`` with this process's
environment, so a worker reads the same settings.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import signal
import subprocess
import sys
import threading
from pathlib import Path

from prometheus_client import CollectorRegistry

from delaybridge.bridge.http.server import HttpServer
from delaybridge.bridge.workers.fanout import FanOut
from delaybridge.bridge.workers.identity import HTTP_ANNOUNCE
from delaybridge.bridge.workers.metrics_merge import SupervisorMetrics
from delaybridge.bridge.workers.supervisor import Proc, Spawn, Supervisor
from delaybridge.settings import Settings

log = logging.getLogger(__name__)
PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the worker, before exec: SIGTERM it when the supervisor dies (Linux only)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def spawn_cli(config: Path | None, verbose: bool) -> Spawn:
    def spawn(index: int) -> Proc:
        argv = [sys.executable, "-m", "delaybridge"] + (["-v"] if verbose else [])
        argv += ["run", "--worker", str(index)]
        if config is not None:
            argv += ["--config", str(config)]
        return subprocess.Popen(
            argv, stdout=subprocess.PIPE, text=True, bufsize=1, preexec_fn=_die_with_parent
        )

    return spawn


def run_supervised(settings: Settings, count: int, config: Path | None, verbose: bool) -> int:
    """Run ``count`` workers until SIGTERM/SIGINT; the worst worker exit code."""
    registry = CollectorRegistry(auto_describe=True)
    metrics = SupervisorMetrics(registry)
    grace_s = settings.shutdown_grace_ms / 1000
    supervisor = Supervisor(count, spawn_cli(config, verbose), metrics, grace_s)
    stop = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    fanout = FanOut(supervisor.urls, registry, metrics, settings.http.admin_token)
    with HttpServer(settings.http, router=fanout) as http:
        print(f"{HTTP_ANNOUNCE}{http.url}", flush=True)
        log.info("supervising %d worker processes", count)
        code = supervisor.run(stop)
    log.info("all workers stopped")
    return code
