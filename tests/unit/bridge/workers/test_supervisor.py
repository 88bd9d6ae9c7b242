"""The worker supervisor without processes or a broker: fake processes, a manual clock.

What it proves: every worker is started and its HTTP address picked up from its stdout;
a worker that ends unasked is started again (at once after a stable run, with a
doubling backoff when it keeps dying) and counted; shutdown sends SIGTERM to every
running worker, waits, kills one that outlives the grace, and reports the worst exit
code; each worker's identity (static member, transactional.id, cancel feed file, HTTP
address) is its own, worker 0's that of a single sidecar.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
from pathlib import Path
from typing import IO

import pytest
from prometheus_client import CollectorRegistry

from delaybridge.bridge.commit.transactions import ID_FILE
from delaybridge.bridge.workers.identity import (
    HTTP_ANNOUNCE,
    WORKER_MEMORY_BYTES,
    automatic_workers,
    memory_workers,
    usable_cores,
    worker_count,
    worker_settings,
)
from delaybridge.bridge.workers.metrics_merge import SupervisorMetrics
from delaybridge.bridge.workers.supervisor import FIRST_BACKOFF_S, STABLE_S, Supervisor
from delaybridge.settings import load
from tests.support import wait_until


class FakeProc:
    """A worker process: prints its address, runs until told otherwise."""

    _next_pid = 100

    def __init__(self, index: int, stubborn: bool = False) -> None:
        FakeProc._next_pid += 1
        self.pid = FakeProc._next_pid
        self.index = index
        self.stdout: IO[str] | None = io.StringIO(
            f"hello\n{HTTP_ANNOUNCE}http://127.0.0.1:{9000 + self.pid}\n"
        )
        self.code: int | None = None
        self.signals: list[int] = []
        self.stubborn = stubborn  # ignores SIGTERM
        self.killed = False

    def poll(self) -> int | None:
        return self.code

    def send_signal(self, sig: int) -> None:
        self.signals.append(sig)
        if not self.stubborn:
            self.code = 0

    def kill(self) -> None:
        self.killed = True
        self.code = -signal.SIGKILL

    def wait(self, timeout: float | None = None) -> int:
        if self.code is None:
            raise subprocess.TimeoutExpired("worker", timeout or 0)
        return self.code


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _supervisor(count: int, stubborn: bool = False) -> tuple[Supervisor, list[FakeProc], Clock]:
    started: list[FakeProc] = []

    def spawn(index: int) -> FakeProc:
        proc = FakeProc(index, stubborn)
        started.append(proc)
        return proc

    clock = Clock()
    metrics = SupervisorMetrics(CollectorRegistry())
    out = io.StringIO()
    return Supervisor(count, spawn, metrics, grace_s=0.0, out=out, clock=clock), started, clock


def _restarts(sup: Supervisor, index: int) -> float:
    value: float = sup._metrics.restarts.labels(str(index))._value.get()
    return value


def test_every_worker_starts_and_its_address_is_picked_up() -> None:
    sup, started, _ = _supervisor(3)
    sup.start()
    assert [p.index for p in started] == [0, 1, 2]
    wait_until(lambda: all(sup.urls().values()), 5, "every worker's address")
    assert sup.urls() == {str(p.index): f"http://127.0.0.1:{9000 + p.pid}" for p in started}


def test_a_dead_worker_is_restarted_and_counted() -> None:
    sup, started, clock = _supervisor(2)
    sup.start()
    clock.now += STABLE_S  # ran long enough: restarted at once
    started[1].code = -signal.SIGKILL
    assert sup.urls()["1"] is None, "a dead worker has no address"
    sup.check()
    assert [p.index for p in started] == [0, 1, 1]
    assert _restarts(sup, 1) == 1 and _restarts(sup, 0) == 0
    wait_until(
        lambda: sup.urls()["1"] == f"http://127.0.0.1:{9000 + started[2].pid}",
        5,
        "the new worker's address",
    )


def test_a_worker_that_keeps_dying_backs_off() -> None:
    sup, started, clock = _supervisor(1)
    sup.start()
    started[-1].code = 3  # died at once (a fatal error)
    sup.check()
    assert len(started) == 1, "not restarted before the backoff"
    clock.now += FIRST_BACKOFF_S
    sup.check()
    assert len(started) == 2
    started[-1].code = 3
    sup.check()
    clock.now += FIRST_BACKOFF_S
    sup.check()
    assert len(started) == 2, "the second backoff is twice the first"
    clock.now += FIRST_BACKOFF_S
    sup.check()
    assert len(started) == 3
    assert _restarts(sup, 0) == 2


def test_shutdown_signals_every_worker_and_reports_the_worst_code() -> None:
    sup, started, _ = _supervisor(2)
    sup.start()
    started[0].code = None
    assert sup.shutdown() == 0
    assert all(p.signals == [signal.SIGTERM] for p in started)


def test_shutdown_kills_a_worker_that_outlives_its_grace() -> None:
    sup, started, _ = _supervisor(2, stubborn=True)
    sup.start()
    code = sup.shutdown()
    assert all(p.killed for p in started)
    assert code == -signal.SIGKILL


def test_worker_identities(tmp_path: Path) -> None:
    base = {"store": {"data_dir": str(tmp_path)}, "workers": 2}
    static = load(
        None,
        kafka={"group_id": "g", "instance_id": "pod-3"},
        **base,
        delivery={"exactly_once": True},
        http={"port": 8080},
    )
    zero, one = worker_settings(static, 0), worker_settings(static, 1)
    assert zero.kafka.instance_id == "pod-3" and one.kafka.instance_id == "pod-3-w1"
    assert zero.delivery.transactional_id == ""  # derived as a single sidecar's: g-pod-3
    assert one.delivery.transactional_id == "g-pod-3-w1"
    assert (zero.http.host, zero.http.port) == (one.http.host, one.http.port) == ("127.0.0.1", 0)
    assert zero.workers == one.workers == 1
    dynamic = load(None, kafka={"group_id": "g"}, delivery={"exactly_once": True}, **base)
    kept = worker_settings(dynamic, 2).delivery.transactional_id
    assert kept == (tmp_path / ID_FILE).read_text() + "-w2", "worker 0's kept id, suffixed"
    assert worker_settings(dynamic, 2).kafka.instance_id == ""
    explicit = load(None, delivery={"exactly_once": True, "transactional_id": "t"}, **base)
    assert worker_settings(explicit, 1).delivery.transactional_id == "t-w1"


@pytest.mark.parametrize(("workers", "expected"), [(1, 1), (3, 3)])
def test_worker_count(workers: int, expected: int) -> None:
    assert worker_count(load(None, workers=workers)) == expected


def test_zero_workers_means_one_per_usable_core(tmp_path: Path) -> None:
    assert worker_count(load(None, workers=0)) == automatic_workers()
    cores = len(os.sched_getaffinity(0))
    quota = tmp_path / "cpu.max"
    quota.write_text("max 100000\n")
    assert usable_cores(quota) == cores
    quota.write_text("150000 100000\n")  # limits.cpu: 1.5 -> 2 workers, at most the cores
    assert usable_cores(quota) == min(cores, 2)
    quota.write_text("50000 100000\n")
    assert usable_cores(quota) == 1
    assert usable_cores(tmp_path / "absent") == cores


def test_every_core_is_the_default_capped_by_the_memory_limit(tmp_path: Path) -> None:
    # Issue 26: one worker by default left a core idle; each worker costs up to
    # WORKER_MEMORY_BYTES, so a memory limit caps how many fit.
    assert load(None).workers == 0
    cores = len(os.sched_getaffinity(0))
    cpu = tmp_path / "cpu.max"
    cpu.write_text("400000 100000\n")  # limits.cpu: 4
    memory = tmp_path / "memory.max"
    memory.write_text("max\n")
    assert automatic_workers(cpu, memory) == min(cores, 4)
    memory.write_text(f"{3 * WORKER_MEMORY_BYTES + 1}\n")
    assert automatic_workers(cpu, memory) == min(cores, 3)
    memory.write_text(f"{WORKER_MEMORY_BYTES // 2}\n")  # too small for one: one anyway
    assert automatic_workers(cpu, memory) == 1
    assert memory_workers(tmp_path / "absent") is None
