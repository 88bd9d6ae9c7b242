"""The broker's JVM as an operating-system process: spawn, find, signal, reap.

The broker must outlive the ``delaybridge kafka up`` that starts it, so it runs
in its own session (``start_new_session``: a Ctrl-C in the terminal does not
reach it) with its output in a file, and is found again later through a pid
file. A pid alone is not trusted: pids are reused, so :func:`is_running` also
checks that the process's command line names this data dir's
``server.properties`` (Linux only: it reads ``/proc``). A dead child of
*this* process lingers as a zombie until reaped; :func:`is_running` reaps it,
so tests that start and kill brokers see them as gone.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from delaybridge.durable import write_atomic

POLL_INTERVAL_S = 0.1


def wait_until(condition: Callable[[], bool], timeout_s: float) -> bool:
    """Poll ``condition`` until it holds (True) or ``timeout_s`` passes (False)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_INTERVAL_S)
    return True


def spawn_detached(command: Sequence[str], *, output: Path, cwd: Path) -> int:
    """Start ``command`` in a new session with stdout+stderr appended to ``output``."""
    output.parent.mkdir(parents=True, exist_ok=True)
    with output.open("ab") as out:
        child = subprocess.Popen(
            list(command),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
    # Popen's bookkeeping is not needed: is_running() reaps the child itself,
    # and the CLI exits without waiting. Mark it reaped-by-us to silence
    # Popen.__del__'s "subprocess still running" ResourceWarning.
    child.returncode = 0
    # For some milliseconds after Popen returns, /proc/<pid>/cmdline reads
    # empty (measured: ~20 ms); wait it out so is_running() is right at once.
    wait_until(lambda: _cmdline(child.pid) != "" or not is_alive(child.pid), 10.0)
    return child.pid


@contextlib.contextmanager
def exclusive(lock_file: Path) -> Iterator[None]:
    """Hold an exclusive flock on ``lock_file`` (created if missing) for the block.

    Serialises start and stop of one data dir across processes (e.g. parallel
    test workers that all want "the" broker): the second waits, then finds the
    broker the first one started. The kernel drops the lock if we crash.
    """
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    with lock_file.open("a") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def read_pid(pid_file: Path) -> int | None:
    """The pid in ``pid_file``, or None when there is no pid file."""
    try:
        text = pid_file.read_text().strip()
    except FileNotFoundError:
        return None
    if not text.isdigit():
        raise ValueError(f"{pid_file}: expected a process id, found {text[:40]!r}")
    return int(text)


def write_pid(pid_file: Path, pid: int) -> None:
    write_atomic(pid_file, f"{pid}\n")


def is_running(pid: int, marker: str) -> bool:
    """Is ``pid`` alive, and does its command line contain ``marker``?

    Use this to *identify* a process before signalling it; to wait for one you
    signalled, use :func:`is_alive` (a dying process's command line is empty).
    """
    return is_alive(pid) and marker in _cmdline(pid)


def _cmdline(pid: int) -> str:
    """The command line of ``pid``, arguments joined by spaces ("" if gone)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return ""
    return raw.replace(b"\0", b" ").decode(errors="replace")


def is_alive(pid: int) -> bool:
    """Has some thread of ``pid`` not exited yet?

    A JVM killed with SIGKILL shows its main thread as a zombie while other
    threads are still tearing down, and still holding its listening sockets;
    so every thread is checked, not just the process's own state.
    """
    _reap(pid)
    try:
        states = [_state(task / "stat") for task in Path(f"/proc/{pid}/task").iterdir()]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return any(state not in ("Z", "X", None) for state in states)


def _state(stat_file: Path) -> str | None:
    """The one-letter state in a /proc stat file; None if the task just vanished."""
    try:
        stat = stat_file.read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # The state follows the parenthesised command name, which may hold spaces.
    return stat.rsplit(")", 1)[1].split()[0]


def stop(pid: int, timeout_s: float) -> bool:
    """SIGTERM, wait up to ``timeout_s``, then SIGKILL. True if SIGKILL was needed.

    The caller identifies ``pid`` first (:func:`is_running` with its marker).
    """
    if not _signal(pid, signal.SIGTERM):
        return False
    if wait_until(lambda: not is_alive(pid), timeout_s):
        return False
    kill(pid, timeout_s=10.0)
    return True


def kill(pid: int, timeout_s: float) -> None:
    """SIGKILL and wait until every thread of the process is gone."""
    _signal(pid, signal.SIGKILL)
    if not wait_until(lambda: not is_alive(pid), timeout_s):
        raise TimeoutError(f"process {pid} survived SIGKILL for {timeout_s:.0f} s")


def _signal(pid: int, signum: signal.Signals) -> bool:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        return False
    return True


def _reap(pid: int) -> None:
    # Only our own children can be reaped; for others waitpid raises ECHILD,
    # which just means "not ours to reap".
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
