"""``delaybridge bench roll``: a rolling restart of the replicas under a steady load with
cancels; how long each replica is away, how late messages get, and whether every promise
held (issue 25).

1. A delay topic of ``--partitions`` (6) partitions and a target topic; ``--replicas`` (3)
   ``delaybridge run`` replicas in one group, each with its own data directory (static
   members, the default: their ids are kept there), plus ``--set``/``--overlay`` settings.
2. A steady load (``scenario/load.py``): ``--rate`` (200) schedules a second for
   ``--seconds`` (150), due 5–25 s after sending, 30 % cancelled by a ``delay-cancel``
   record sent to a random partition at least 3 s before due.
3. After ``--steady-s`` (20) seconds, each replica in turn is stopped with SIGTERM and
   started again at once; the next waits until it is ready (``/readyz`` 200) and owns its
   partitions again. After :data:`BEFORE_KILL_S` (5) seconds, so that what the roll held back
   has gone out and the kill's lateness is not counted as the roll's, the first replica
   is killed with SIGKILL and started again ``--kill-down-s`` (10) seconds later.
4. Once the load has stopped and its last message is due, the target topic is read until
   every owed message arrived and nothing new came for 5 s.

Reported (``scenario/roll_report.py``), as tables and JSON: per restart the time from the
signal to ready and to owning its partitions again; lateness p50/p99/max of messages due
during a graceful roll, during the kill, and outside both; lost, early, cancelled
delivered (and where their cancels landed), duplicates (and those the SIGKILL does not
explain), the drain after the last restart.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from delaybridge.connectors import KafkaClients, KafkaSettings, ensure_topics
from delaybridge.tools.bench_kit import bench_cluster
from delaybridge.tools.e2e.sidecar import free_port, sidecar_config
from delaybridge.tools.scenario.arrivals import ArrivalLog
from delaybridge.tools.scenario.load import LoadShape, ScheduleLoad
from delaybridge.tools.scenario.overlay import merged
from delaybridge.tools.scenario.replica import Replica
from delaybridge.tools.scenario.roll_report import Restart, print_report, roll_report, windows
from delaybridge.tools.scenario.verdict import judge

KILL_SLACK_MS = 2_000
"""How long before a SIGKILL a delivery may have been produced and still be repeated:
in flight, or acknowledged after the store's last flush (every 200 ms by default); the
rest is slack for a loaded machine."""
SETTLE_S = 5.0
"""Reading goes on until nothing new arrived for this long (duplicates come late)."""
START_TIMEOUT_S = 180.0
BEFORE_KILL_S = 5.0
"""Between the graceful roll and the SIGKILL: a message due at the end of the roll that
the killed replica held would otherwise count the kill's 10 s in the roll's lateness."""


def run_roll_bench(args: argparse.Namespace) -> int:
    console = Console()
    kafka = KafkaSettings(bootstrap_servers=args.bootstrap) if args.bootstrap else None
    with bench_cluster("delaybridge-roll-", kafka) as (work, clients):
        report = _roll(console, clients, work, args)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"roll": report}, indent=2))
    print_report(console, report)
    console.print(f"JSON written to {args.json}")
    return 0


def _roll(
    console: Console, clients: KafkaClients, work: Path, args: argparse.Namespace
) -> dict[str, Any]:
    tag = time.time_ns()
    delay, target = f"roll.delay.{tag}", f"roll.out.{tag}"
    ensure_topics(clients.admin(), {delay: {}}, partitions=args.partitions)
    ensure_topics(clients.admin(), {target: {}}, partitions=3)
    overlays = [*args.overlay, *args.set]
    replicas = [
        _replica(clients.settings, work / f"r{i + 1}", delay, overlays)
        for i in range(args.replicas)
    ]
    shape = LoadShape(rate=args.rate, cancel_share=args.cancel_share)
    load_before = os.getloadavg()[0]
    restarts: list[Restart] = []
    try:
        for replica in replicas:
            replica.start()
        starting = f"{args.replicas} replicas starting, sharing {args.partitions} partitions"
        with console.status(starting):
            _settled(replicas, args.partitions)
        arrivals = ArrivalLog(clients, [target])
        load = ScheduleLoad(clients, delay, args.partitions, target, shape)
        load.start()
        started = time.monotonic()
        _pause(console, args.steady_s, f"steady load, {args.rate}/s")
        for replica in replicas:
            with console.status(f"rolling {replica.name}: SIGTERM, start, ready, owning"):
                restarts.append(_restart(replica, "SIGTERM", 0.0))
        _pause(console, BEFORE_KILL_S, "the roll's backlog going out before the kill")
        with console.status(f"SIGKILL {replicas[0].name}, start {args.kill_down_s} s later"):
            restarts.append(_restart(replicas[0], "SIGKILL", args.kill_down_s))
        _pause(console, args.seconds - (time.monotonic() - started), "steady load after the roll")
        load_s = time.monotonic() - started
        with console.status("sending the last cancels"):
            load.stop()
        owed = {s.id for s in load.scheduled() if s.owed}
        with console.status(f"reading the target topic: {len(owed):,} messages owed"):
            _drained(arrivals, owed, shape.due_max_ms / 1000 + 120)
    finally:
        for replica in replicas:
            if replica.running:
                replica.terminate()
    arrivals.close()
    scheduled = load.scheduled()
    verdict = judge(scheduled, arrivals.records(), windows(restarts))
    setup = {
        "replicas": args.replicas,
        "partitions": args.partitions,
        "rate_per_s": args.rate,
        "seconds": round(load_s, 1),
        "due_ms": [shape.due_min_ms, shape.due_max_ms],
        "cancel_share": shape.cancel_share,
        "cancel_lead_ms": shape.cancel_lead_ms,
        "kill_down_s": args.kill_down_s,
        "settings": merged({}, overlays),
        "load_errors": load.errors[:10],
        "commit": _commit(),
        "cpus": os.cpu_count(),
        "load_average": [round(load_before, 2), round(os.getloadavg()[0], 2)],
    }
    return roll_report(setup, restarts, verdict, scheduled, KILL_SLACK_MS)


def replica_config(
    kafka: KafkaSettings, work: Path, delay: str, port: int, overlays: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """A replica's settings: the benchmark sidecar's (its group, topics, its own data
    directory under ``work`` and HTTP ``port``), the ``overlays`` laid over them."""
    return merged(sidecar_config(kafka, work, delay, port), overlays)


def _replica(
    kafka: KafkaSettings, work: Path, delay: str, overlays: Sequence[Mapping[str, Any]]
) -> Replica:
    port = free_port()
    return Replica(work.name, work, replica_config(kafka, work, delay, port, overlays), port)


def _settled(replicas: list[Replica], partitions: int) -> None:
    """Every replica ready and owning partitions, all of them owned."""
    everything = set(range(partitions))

    def split() -> bool:
        owned = [r.owned() for r in replicas]
        return all(owned) and set().union(*owned) == everything

    for replica in replicas:
        replica.wait_for(replica.ready, START_TIMEOUT_S, "ready")
    replicas[0].wait_for(split, START_TIMEOUT_S, "every partition owned, by every replica")


def _restart(replica: Replica, signal: str, down_s: float) -> Restart:
    """Stop ``replica`` (SIGTERM: a graceful stop; SIGKILL: a crash), start it again
    ``down_s`` later, and time it until it is ready and owns its partitions again."""
    before = replica.owned()
    signal_ms = _now_ms()
    if signal == "SIGKILL":
        replica.kill()
        code = None
    else:
        code = replica.terminate()
    exited_ms = _now_ms()
    time.sleep(max(0.0, down_s - (exited_ms - signal_ms) / 1000))  # the chosen downtime
    replica.start()
    started_ms = _now_ms()
    replica.wait_for(replica.ready, START_TIMEOUT_S, "ready after its restart")
    ready_ms = _now_ms()
    replica.wait_for(lambda: replica.owned() >= before, START_TIMEOUT_S, f"owning {before}")
    return Restart(
        replica.name,
        signal,
        tuple(sorted(before)),
        signal_ms,
        exited_ms,
        started_ms,
        ready_ms,
        _now_ms(),
        code,
    )


def _drained(arrivals: ArrivalLog, owed: set[str], timeout_s: float) -> None:
    """Read until every owed message arrived (or ``timeout_s``: the verdict counts the
    rest as lost), then until nothing new came for :data:`SETTLE_S`."""
    deadline = time.monotonic() + timeout_s
    while not owed <= arrivals.ids() and time.monotonic() < deadline:
        time.sleep(0.2)  # polling the reader thread's count
    while arrivals.quiet_ms() < SETTLE_S * 1000:
        time.sleep(0.2)  # polling the reader thread's clock


def _pause(console: Console, seconds: float, what: str) -> None:
    """Let the load run for ``seconds`` (the benchmark's timeline, not a wait for a condition)."""
    with console.status(what):
        time.sleep(max(0.0, seconds))


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).parent,
        )
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return out.stdout.strip()


def _now_ms() -> int:
    return int(time.time() * 1000)
