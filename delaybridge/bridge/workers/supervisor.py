"""``delaybridge run`` with ``workers`` > 1: start, watch, restart and stop the workers.

The sidecar's loop is one Python thread; partition stores are independent, so a pod
uses its cores by running several complete sidecars (``service.py``), each a member of
the consumer group (``workers.py`` says what each one must not share). This process
only supervises them:

- it starts each worker as a subprocess of the same command line
  (``python -m delaybridge run --worker <i>``, same settings file and environment):
  a worker is exactly the single sidecar the tests cover, visible by its own pid in
  ``ps``, killable alone, and needs nothing pickled across (multiprocessing's spawn
  would re-import the same modules and pass the settings anyway, and hide the
  worker's command line);
- a worker prints its loopback HTTP address (``workers.HTTP_ANNOUNCE``) on its stdout,
  which this process forwards line by line to its own, prefixed ``[worker <i>]`` (the
  address line reworded: only the supervisor announces the pod's port);
- a worker that ends without being asked to (a crash, ``kill -9``, a fatal Kafka
  error) is started again: at once if it had run for :data:`STABLE_S`, else after a
  backoff doubling from 1 s to 30 s. Its partitions go back to the group when its
  session times out (at once for a clean exit) and its stores' locks are released
  by the kernel with the process, so whichever worker gets them reopens them;
- SIGTERM (or SIGINT) is forwarded to every worker, which drains, flushes and commits
  as a single sidecar does; one still running after ``shutdown_grace_ms`` + 10 s is
  killed. Every worker is started with ``PR_SET_PDEATHSIG`` (Linux), so a supervisor
  killed outright does not leave workers behind;
- it serves the pod's one HTTP port (``fanout.py``).
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Protocol

from delaybridge.bridge.workers.identity import HTTP_ANNOUNCE
from delaybridge.bridge.workers.metrics_merge import SupervisorMetrics

log = logging.getLogger(__name__)

#: A worker that ran this long before it died is restarted at once.
STABLE_S = 30.0
FIRST_BACKOFF_S = 1.0
MAX_BACKOFF_S = 30.0
#: Added to the workers' own shutdown grace before they are killed.
KILL_MARGIN_S = 10.0


class Proc(Protocol):
    """What the supervisor needs of a worker process (``subprocess.Popen``)."""

    pid: int
    stdout: IO[str] | None

    def poll(self) -> int | None: ...

    def send_signal(self, sig: int) -> None: ...

    def kill(self) -> None: ...

    def wait(self, timeout: float | None = None) -> int: ...


Spawn = Callable[[int], Proc]
"""spawn(worker index) -> the started worker process (stdout: a text pipe, or None)."""


@dataclass
class Slot:
    index: int
    proc: Proc | None = None
    url: str | None = None
    started_s: float = 0.0
    restart_at_s: float | None = None
    backoff_s: float = 0.0
    restarts: int = 0


class Supervisor:
    """The workers of one ``delaybridge run`` (see the module docstring)."""

    def __init__(
        self,
        count: int,
        spawn: Spawn,
        metrics: SupervisorMetrics,
        grace_s: float,
        out: IO[str] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.slots = [Slot(i) for i in range(count)]
        self._spawn = spawn
        self._metrics = metrics
        self._grace_s = grace_s
        self._out = out if out is not None else sys.stdout
        self._clock = clock
        self._lock = threading.Lock()
        self._pumps: list[threading.Thread] = []
        metrics.workers.set(count)

    def urls(self) -> dict[str, str | None]:
        """Each worker's HTTP base URL by index; None while it is not running."""
        with self._lock:
            return {
                str(s.index): s.url if s.proc is not None and s.proc.poll() is None else None
                for s in self.slots
            }

    def start(self) -> None:
        for slot in self.slots:
            self._start(slot)

    def check(self) -> None:
        """One round of supervision: notice workers that ended, restart those due."""
        now = self._clock()
        for slot in self.slots:
            proc = slot.proc
            if proc is not None:
                code = proc.poll()
                if code is None:
                    continue
                lived = now - slot.started_s
                slot.backoff_s = (
                    0.0
                    if lived >= STABLE_S
                    else min(MAX_BACKOFF_S, max(FIRST_BACKOFF_S, 2 * slot.backoff_s))
                )
                with self._lock:
                    slot.proc, slot.url = None, None
                slot.restart_at_s = now + slot.backoff_s
                slot.restarts += 1
                self._metrics.restarts.labels(str(slot.index)).inc()
                log.error(
                    "worker %d (pid %d) ended with %s after %.1f s; restarting in %.1f s",
                    slot.index,
                    proc.pid,
                    _exit(code),
                    lived,
                    slot.backoff_s,
                )
            if slot.restart_at_s is not None and now >= slot.restart_at_s:
                self._start(slot)

    def run(self, stop: threading.Event, poll_s: float = 0.2) -> int:
        """:meth:`start`, :meth:`check` until ``stop`` is set, then :meth:`shutdown`."""
        self.start()
        try:
            while not stop.wait(poll_s):
                self.check()
        finally:
            code = self.shutdown()
        return code

    def shutdown(self) -> int:
        """SIGTERM every worker, wait for them (killing stragglers); the worst exit code."""
        running = [s.proc for s in self.slots if s.proc is not None and s.proc.poll() is None]
        for proc in running:
            proc.send_signal(signal.SIGTERM)
        deadline = self._clock() + self._grace_s + KILL_MARGIN_S
        worst = 0
        for slot in self.slots:
            if slot.proc is None:
                continue
            proc = slot.proc
            try:
                code = proc.wait(timeout=max(0.0, deadline - self._clock()))
            except Exception:  # subprocess.TimeoutExpired
                log.error(
                    "worker %d (pid %d) still running after the grace: killing it",
                    slot.index,
                    proc.pid,
                )
                proc.kill()
                code = proc.wait()
            worst = worst or code
        for pump in self._pumps:
            pump.join(timeout=5)
        return worst

    def _start(self, slot: Slot) -> None:
        proc = self._spawn(slot.index)
        with self._lock:
            slot.proc, slot.url = proc, None
        slot.started_s = self._clock()
        slot.restart_at_s = None
        log.info("worker %d started: pid %d", slot.index, proc.pid)
        if proc.stdout is not None:
            pump = threading.Thread(
                target=self._pump,
                args=(slot, proc),
                daemon=True,
                name=f"delaybridge-worker-{slot.index}-out",
            )
            self._pumps = [p for p in self._pumps if p.is_alive()] + [pump]
            pump.start()

    def _pump(self, slot: Slot, proc: Proc) -> None:
        """Forward the worker's stdout; pick up its HTTP address."""
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith(HTTP_ANNOUNCE):
                url = line[len(HTTP_ANNOUNCE) :].strip()
                with self._lock:
                    if slot.proc is proc:
                        slot.url = url
                line = f"worker HTTP on {url} (loopback; the pod's port is the supervisor's)\n"
            self._out.write(f"[worker {slot.index}] {line}")
            self._out.flush()


def _backoff(lived_s: float, last_s: float) -> float:
    """How long to wait before starting again a worker that died after ``lived_s``."""
    if lived_s >= STABLE_S:
        return 0.0
    return min(MAX_BACKOFF_S, max(FIRST_BACKOFF_S, 2 * last_s))


def _exit(code: int) -> str:
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"
