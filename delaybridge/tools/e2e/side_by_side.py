"""``bench e2e --etf1 PATH``: delaybridge and etf1's scheduler, side by side (issue 26).

One system at a time, on the same broker, each on fresh topics of the same shape
(``2 × automatic_workers()`` schedules partitions, so every sidecar worker owns some) and
with its own consumer group; every schedule is written with etf1's headers
(``scheduler-epoch``, ``scheduler-target-topic``, ``scheduler-target-key``: DESIGN §2,
delaybridge accepts them), plus two plain headers that both systems pass through to the
delivered record, ``bench-due-ms`` and ``bench-id``, so both are timed by one rule:
lateness = broker timestamp of the delivered record − ``bench-due-ms``.

Each system is started once, and is *ready* when its group owns every partition and
one probe schedule per partition (to a probe topic) went through it end to end. Then,
on that one process (tree), each load to its own target topic:

1. **steady** — ``rate`` schedules a second for ``seconds`` seconds, each due at a whole
   second 1–5 s ahead. Per system: lateness p50/p99/max, early, missing, duplicates;
   the CPU seconds of all its processes (delaybridge: the supervisor and its workers,
   from /proc; etf1: its one process, every thread) from the first schedule to the last
   delivery, per message; peak RSS (``VmHWM``, summed over processes).
2. **burst** — ``burst`` schedules due in the same second, ``lead_s`` ahead: produced at
   full speed; the system must hold all of them before that second (else the run fails,
   naming ``--etf1-burst-lead-s``). Per system: drain seconds (the due second to the
   last delivery's broker timestamp) and rate, lateness p99, early, missing, CPU seconds
   from the first schedule produced to the last delivery, peak RSS (the high-water
   mark of the process's life, steady load included; the burst's is the larger).

``*_later_than_1s`` counts deliveries more than a second late. etf1 v0.0.9 has one
cause of its own (``scheduler/scheduler.go``, ``processStoreEvent``): a schedule it reads
more than 1 s after its record timestamp *truncated to the second* is "old" and goes to
its missed-events handler, which releases what it holds only after 1 s without any new
event; under a steady stream that is when the stream stops. A schedule produced in the
last milliseconds of a second, and read a few milliseconds later, takes that path.

Brokers are not counted. delaybridge runs with every setting at its default; etf1 with
its defaults too (``etf1.py`` lists the variables set: topics, group, ports).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient
from rich.console import Console
from rich.table import Table

from delaybridge.bridge.workers.identity import automatic_workers
from delaybridge.connectors import KafkaClients
from delaybridge.contract import names
from delaybridge.errors import DelayBridgeError
from delaybridge.timerlog.bench import calibrate
from delaybridge.tools.e2e.etf1 import Etf1Process
from delaybridge.tools.e2e.measure import _settled, _topics
from delaybridge.tools.e2e.sidecar import SidecarProcess
from delaybridge.tools.e2e.traffic import VALUE, LiveArrivals, count_arrivals, fill, steady

SYSTEMS = ("delaybridge", "etf1")
DUE_HEADER = "bench-due-ms"
ID_HEADER = "bench-id"


@dataclass(frozen=True)
class Plan:
    """What the side-by-side runs: the peer's binary and the two loads."""

    binary: Path
    rate: int
    """steady: schedules per second"""
    seconds: int
    """steady: how long"""
    burst: int
    """burst: schedules due in the same second"""
    lead_s: float
    """burst: how far ahead of now their second is, when producing starts"""


class _System(Protocol):
    """What a measurement reads from the system under test, whichever it is."""

    def cpu_seconds(self) -> float: ...

    def peak_rss_mb(self) -> float: ...

    def wait_for(self, cond: Callable[[], bool], timeout_s: float, what: str) -> None: ...


def burst_lead_s(burst: int) -> float:
    """The default lead of a burst: 10 s, and 1 s more per 5,000 schedules (40 s for
    200k: room for the slower system to take them all in on 2 shared cores)."""
    return max(10.0, burst / 5_000)


def side_by_side(console: Console, clients: KafkaClients, work: Path, plan: Plan) -> dict[str, Any]:
    """On delaybridge, then on etf1 (one started, measured and stopped before the
    other): the steady load, then the burst; ``{"systems": {name: figures},
    "ratios_delaybridge_to_etf1": ..., ...}`` for the JSON (and :func:`print_table`)."""
    partitions = 2 * automatic_workers()
    before = _machine()
    systems: dict[str, dict[str, Any]] = {}
    for name in SYSTEMS:
        with _ready(name, clients, work / name, plan, partitions) as (sut, topics):
            console.print(f"[bold]{name}[/]: steady {plan.rate} msg/s for {plan.seconds} s")
            systems[name] = _steady(clients, sut, topics.schedules, topics.steady, plan)
            console.print(f"[bold]{name}[/]: {plan.burst:,} due in the same second")
            systems[name] |= _burst(console, clients, sut, topics.schedules, topics.burst, plan)
    ours, peer = systems["delaybridge"], systems["etf1"]
    return {
        "schedules_partitions": partitions,
        "delaybridge_workers": automatic_workers(),
        "etf1_binary": str(plan.binary),
        "steady_rate_msgs_per_s": plan.rate,
        "steady_seconds": plan.seconds,
        "burst_messages": plan.burst,
        "burst_lead_s": plan.lead_s,
        "machine_before": before,
        "machine_after": _machine(),
        "systems": systems,
        "ratios_delaybridge_to_etf1": {
            key: round(ours[key] / peer[key], 3) if peer[key] else None
            for key in ("steady_cpu_s", "steady_lateness_p99_ms", "burst_drain_msgs_per_s")
        },
    }


@dataclass(frozen=True)
class _Topics:
    """One system's fresh topics: where schedules go in, and the two loads' targets."""

    schedules: str
    steady: str
    burst: str


@contextmanager
def _ready(
    name: str, clients: KafkaClients, work: Path, plan: Plan, partitions: int
) -> Iterator[tuple[_System, _Topics]]:
    """``name`` started on fresh topics, ready (every partition owned, one probe per
    partition delivered); stopped when the block ends. The steady load and then the
    burst run on it, each to its own target topic."""
    admin = clients.admin()
    (schedules,) = _topics(clients, "sbs", f"{name}-schedules", partitions=partitions, admin=admin)
    steady_out, burst_out, probe, history = _topics(
        clients, "sbs", f"{name}-steady", f"{name}-burst", "probe", "history", admin=admin
    )
    sut: SidecarProcess | Etf1Process
    if name == "delaybridge":
        side = sut = SidecarProcess(clients.settings, work, schedules)

        def owned() -> bool:
            return _settled(side, partitions, automatic_workers())

    else:
        sut = Etf1Process(plan.binary, clients.settings, work, schedules, history)

        def owned() -> bool:
            return _assigned(admin, f"bench-{schedules}", schedules) == partitions

    try:
        sut.wait_for(owned, 120, f"{name} owning all {partitions} partitions")
        _probe(clients, sut, name, schedules, probe, partitions)
        yield sut, _Topics(schedules, steady_out, burst_out)
    finally:
        sut.stop()


def _assigned(admin: AdminClient, group: str, topic: str) -> int:
    """Partitions of ``topic`` assigned in consumer group ``group`` now (0 while the
    group is not known to the broker, not stable, or the broker does not answer)."""
    try:
        described = admin.describe_consumer_groups([group])[group].result(timeout=5)
    except (KafkaException, TimeoutError):
        return 0
    if str(described.state).rsplit(".", 1)[-1] != "STABLE":
        return 0
    return sum(
        1
        for member in described.members
        for tp in (member.assignment.topic_partitions if member.assignment else [])
        if tp.topic == topic
    )


def _probe(
    clients: KafkaClients,
    sut: _System,
    name: str,
    schedules: str,
    probe: str,
    partitions: int,
) -> None:
    """One schedule per partition, due 2 s ahead, to ``probe``: all must arrive."""
    producer = clients.producer()
    due_s = int(time.time()) + 2
    for p in range(partitions):
        _produce(producer, schedules, f"probe-{p}", due_s, probe, partition=p)
    producer.flush(30)
    seen, _, _ = count_arrivals(clients, probe, partitions, timeout_s=60)
    if seen < partitions:
        raise DelayBridgeError(
            f"{name} delivered {seen} of {partitions} probe schedules from {schedules} "
            f"within 60 s of their due time: not working; see its log under the work dir"
        )


def schedule_headers(key: str, due_s: int, target: str) -> list[tuple[str, str | bytes | None]]:
    """etf1's headers for a schedule due at ``due_s`` (epoch seconds) to ``target`` under
    ``key``, and the two headers both systems pass through to the delivered record."""
    return [
        (names.ETF1_EPOCH, str(due_s)),
        (names.ETF1_TARGET_TOPIC, target),
        (names.ETF1_TARGET_KEY, key),
        (DUE_HEADER, str(due_s * 1000)),
        (ID_HEADER, key),
    ]


def _produce(
    producer: Producer, topic: str, key: str, due_s: int, target: str, partition: int
) -> None:
    headers = schedule_headers(key, due_s, target)
    producer.produce(topic, VALUE, key.encode(), headers=headers, partition=partition)


def _steady(
    clients: KafkaClients, sut: _System, schedules: str, target: str, plan: Plan
) -> dict[str, Any]:
    arrivals = LiveArrivals(clients, target, DUE_HEADER, ID_HEADER)
    cpu_before = sut.cpu_seconds()
    # Due at a whole second 1–5 s ahead (floor(now) + 2..5), as etf1's epoch seconds say.
    n = steady(
        clients,
        schedules,
        plan.rate,
        plan.seconds,
        lambda i: schedule_headers(str(i), int(time.time()) + 2 + i % 4, target),
    )
    arrivals.finish(n, timeout_s=60)
    cpu_s = sut.cpu_seconds() - cpu_before
    figures = _figures("steady", n, arrivals)
    return figures | {
        "steady_cpu_s": round(cpu_s, 2),
        "steady_cpu_us_per_msg": round(cpu_s * 1e6 / n, 1),
        "steady_peak_rss_mb": round(sut.peak_rss_mb(), 1),
    }


def _burst(
    console: Console,
    clients: KafkaClients,
    sut: _System,
    schedules: str,
    target: str,
    plan: Plan,
) -> dict[str, Any]:
    ingested = _ingested_counter(sut)
    before = ingested()
    arrivals = LiveArrivals(clients, target, DUE_HEADER, ID_HEADER)
    cpu_before = sut.cpu_seconds()
    due_s = math.ceil(time.time() + plan.lead_s)
    # Keys (the schedules' ids) after the steady load's: a burst schedule replaces none.
    fill(
        clients,
        schedules,
        plan.burst,
        lambda i: schedule_headers(f"b{i}", due_s, target),
        console,
        key_prefix="b",
    )
    left_s = due_s - time.time()
    try:
        sut.wait_for(
            lambda: ingested() - before >= plan.burst,
            max(left_s, 0.0),
            f"all {plan.burst:,} burst schedules taken in before their due second",
        )
    except DelayBridgeError as exc:
        raise DelayBridgeError(
            f"{exc}: the burst would time ingest, not delivery; raise --etf1-burst-lead-s "
            f"(was {plan.lead_s} s)"
        ) from exc
    arrivals.finish(plan.burst, timeout_s=max(left_s, 0.0) + 600)
    cpu_s = sut.cpu_seconds() - cpu_before
    figures = _figures("burst", plan.burst, arrivals)
    drain_s = figures["burst_lateness_max_ms"] / 1000
    return figures | {
        "burst_drain_s": round(drain_s, 2),
        "burst_drain_msgs_per_s": round(figures["burst_delivered"] / drain_s) if drain_s > 0 else 0,
        "burst_cpu_s": round(cpu_s, 2),
        "burst_peak_rss_mb": round(sut.peak_rss_mb(), 1),
    }


def _ingested_counter(sut: _System) -> Callable[[], int]:
    """How many schedules ``sut`` has taken in so far: the sidecar's stored records,
    etf1's planned counter."""
    if isinstance(sut, SidecarProcess):
        return sut.stored
    if isinstance(sut, Etf1Process):
        return sut.planned
    raise TypeError(f"no ingest counter for {type(sut).__name__}")


def _figures(prefix: str, sent: int, arrivals: LiveArrivals) -> dict[str, Any]:
    """Delivered, missing, duplicates, early and lateness p50/p99/max of one load."""
    late = sorted(arrivals.stamped)
    unique = set(arrivals.ids)

    def pct(p: float) -> int:
        return late[min(len(late) - 1, int(p * len(late)))] if late else -1

    return {
        f"{prefix}_sent": sent,
        f"{prefix}_delivered": len(unique),
        f"{prefix}_missing": sent - len(unique),
        f"{prefix}_duplicates": len(arrivals.ids) - len(unique),
        f"{prefix}_early": sum(1 for x in late if x < 0),
        f"{prefix}_later_than_1s": sum(1 for x in late if x > 1000),
        f"{prefix}_lateness_p50_ms": pct(0.50),
        f"{prefix}_lateness_p99_ms": pct(0.99),
        f"{prefix}_lateness_max_ms": late[-1] if late else -1,
    }


def _machine() -> dict[str, float]:
    """How busy the machine is now: the 1-minute load average and the calibration
    (wall and CPU seconds of a fixed Python loop, ``timerlog/bench.py``; ~0.4 s idle):
    only ratios within one run compare across machines and moments."""
    wall_s, cpu_s = calibrate()
    return {
        "load_1min": round(os.getloadavg()[0], 2),
        "calibration_s": round(wall_s, 2),
        "calibration_cpu_s": round(cpu_s, 2),
    }


def print_table(console: Console, result: dict[str, Any]) -> None:
    """The figures as a table: a row per metric, a column per system."""
    systems = result["systems"]
    table = Table(title="delaybridge bench e2e --etf1: side by side")
    table.add_column("metric")
    for name in SYSTEMS:
        table.add_column(name, justify="right")
    for metric in systems[SYSTEMS[0]]:
        table.add_row(metric, *(str(systems[name].get(metric)) for name in SYSTEMS))
    console.print(table)
    console.print(f"delaybridge / etf1: {result['ratios_delaybridge_to_etf1']}")
    console.print(f"machine before: {result['machine_before']}, after: {result['machine_after']}")
