"""Issue 25, scenario 1: a rolling restart of three replicas under a steady load with cancels.

Three ``delaybridge run`` processes, each with its own data directory and a static member
id (the default: kept in its data directory), share a 6-partition delay topic with the
default session timeout (45 s, so a stopped replica's partitions wait for it instead of
moving). A steady producer sends 50 schedules a second, due 5-25 s after sending; 30 %
of them are cancelled by a ``delay-cancel`` record sent to a *random* partition at least
3 s before due (``tools/scenario/load.py``). The replicas are stopped with SIGTERM one at
a time, each started again at once and waited for until it is ready and owns its
partitions again; once what the roll held back is delivered (so that the kill's
downtime is not counted in the roll's lateness) the first is killed with SIGKILL and
started 10 s later.

Pass criteria (``tools/scenario/verdict.py`` counts them):

- 0 lost, 0 early, 0 unexpected ids;
- 0 cancelled delivered: every message whose cancel Kafka acknowledged before its due
  time stays undelivered, whichever partition the cancel landed in and whichever replica
  was down (DESIGN §2, the cancel horizon);
- 0 duplicates, except at the SIGKILL: at-least-once may repeat what the killed replica
  had in flight or had acknowledged after its store's last flush (every 100 ms here), so
  a repeated message must come from one of its partitions, its first copy produced at
  most :data:`KILL_SLACK_MS` before the kill, and be delivered at most twice;
- drained: every owed message due by the time the killed replica owns its partitions
  again is seen at most :data:`DRAIN_S` seconds after that.

Scaled down from the issue's run (200/s for 150 s): ``delaybridge bench roll`` keeps those
sizes and reports restart times and lateness; this test states no speed target.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from delaybridge.connectors import KafkaClients, KafkaSettings
from delaybridge.tools.scenario.arrivals import ArrivalLog
from delaybridge.tools.scenario.load import LoadShape, ScheduleLoad
from delaybridge.tools.scenario.roll_report import Restart, kills, leak_causes, windows
from delaybridge.tools.scenario.verdict import Verdict, judge
from tests.http_client import Client
from tests.integration.sidecar.harness import SubprocessSidecar, Topics, now_ms, settings_for
from tests.integration.sidecar.observe import alive, http
from tests.support import wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

PARTITIONS = 6
RATE = 50
STEADY_S = 8
"""seconds of load before the first restart"""
TAIL_S = 5
"""seconds of load after the last restart"""
KILL_DOWN_S = 10
KILL_SLACK_MS = 2_000
"""20 flush intervals: a loaded machine may flush late, never 2 s late"""
DRAIN_S = 10


def test_a_rolling_restart_with_cancels_loses_nothing_and_delivers_no_cancelled_message(
    kafka: Any, tmp_path: Path
) -> None:
    bootstrap = kafka.bootstrap_servers
    topics = Topics(
        delay=kafka.create_topic("delay", partitions=PARTITIONS),
        targets=[kafka.create_topic("orders", partitions=3)],
        dead_letter=kafka.create_topic("dlt"),
        cancels=kafka.create_topic("cancels"),
    )
    target = topics.targets[0]

    def replica(name: str) -> SubprocessSidecar:
        settings = settings_for(
            bootstrap,
            topics,
            tmp_path / name,
            f"g-{topics.delay}",
            kafka={"session_timeout_ms": 45_000},  # the default
        )
        return SubprocessSidecar(settings, tmp_path, name)

    replicas = [replica(name) for name in ("one", "two", "three")]
    clients = KafkaClients(KafkaSettings(bootstrap_servers=bootstrap))
    for side in replicas:
        side.start()
    arrivals: ArrivalLog | None = None
    restarts: list[Restart] = []
    try:
        _settled(replicas)
        arrivals = ArrivalLog(clients, [target])
        load = ScheduleLoad(clients, topics.delay, PARTITIONS, target, LoadShape(rate=RATE))
        load.start()
        wait_until(lambda: load.sent >= RATE * STEADY_S, 60, f"{STEADY_S} s of steady load")
        for side in replicas:
            restarts.append(_restart(side, graceful=True))
        rolled_ms = restarts[-1].owning_ms
        held = {s.id for s in load.scheduled() if s.cancel is None and s.due_ms <= rolled_ms}
        wait_until(lambda: held <= arrivals.ids(), 30, "what the roll held back delivered")
        restarts.append(_restart(replicas[0], graceful=False))
        tail = load.sent + RATE * TAIL_S
        wait_until(lambda: load.sent >= tail, 60, f"{TAIL_S} s of load after the roll")
        load.stop()
        owed = {s.id for s in load.scheduled() if s.owed}

        def all_seen() -> bool:
            for side in replicas:
                alive(side)
            assert arrivals is not None
            return owed <= arrivals.ids()

        with contextlib.suppress(TimeoutError):  # the verdict counts what is missing
            wait_until(all_seen, 90, "every owed message delivered")
        wait_until(lambda: arrivals.quiet_ms() >= 3_000, 60, "3 s without a new arrival")
    finally:
        if arrivals is not None:
            arrivals.close()
        for side in replicas:
            if side.proc is not None and side.proc.poll() is None:
                side.terminate(timeout_s=30)
    assert arrivals is not None
    scheduled = load.scheduled()
    verdict = judge(scheduled, arrivals.records(), windows(restarts))
    last_back = restarts[-1].owning_ms
    drained_ms = verdict.drained_ms(last_back, scheduled)
    print(_report(verdict, restarts, drained_ms))

    problems = _problems(verdict, restarts, drained_ms)
    assert load.errors == [], load.errors[:10]
    assert verdict.cancels_must_win >= 0.9 * sum(1 for s in scheduled if s.cancel), (
        "most cancels were acknowledged late: the load fell behind, the test proves little"
    )
    assert not problems, "\n".join(problems)


def _settled(replicas: list[SubprocessSidecar]) -> None:
    everything = set(range(PARTITIONS))

    def split() -> bool:
        owned = [_owning(side) for side in replicas]
        return all(owned) and set().union(*owned) == everything

    def logs() -> str:
        return "\n".join(f"--- {s.log.name}\n{s.tail(10)}" for s in replicas)

    wait_until(split, 120, "the six partitions split among the three replicas", detail=logs)


def _owning(side: SubprocessSidecar) -> set[int]:
    """The partitions ``side`` owns and delivers now, from its admin API (its log spans
    restarts and a SIGKILL writes no "released" lines)."""
    alive(side)
    reply = _client(side)("GET", "/admin/stats")
    if reply.status != 200:
        return set()
    parts = reply.json()["partitions"]
    return {int(p["partition"]) for p in parts if p["role"] == "active"}


def _client(side: SubprocessSidecar) -> Client:
    return http(side)


def _restart(side: SubprocessSidecar, *, graceful: bool) -> Restart:
    """SIGTERM (graceful) or SIGKILL and, the latter after :data:`KILL_DOWN_S`, start again;
    timed until ready and owning its partitions again."""
    before = _owning(side)
    signal_ms = now_ms()
    code: int | None = None
    if graceful:
        code = side.terminate(timeout_s=60)
    else:
        side.kill9()
    exited_ms = now_ms()
    if not graceful:
        wait_until(lambda: now_ms() >= signal_ms + KILL_DOWN_S * 1000, 30, "the downtime")
    side.start()
    started_ms = now_ms()
    client = _client(side)
    wait_until(lambda: client("GET", "/readyz").status == 200, 120, f"{side.log.stem} ready")
    ready_ms = now_ms()
    wait_until(lambda: _owning(side) >= before, 120, f"{side.log.stem} owning {sorted(before)}")
    return Restart(
        side.log.stem,
        "SIGTERM" if graceful else "SIGKILL",
        tuple(sorted(before)),
        signal_ms,
        exited_ms,
        started_ms,
        ready_ms,
        now_ms(),
        code,
    )


def _problems(verdict: Verdict, restarts: list[Restart], drained_ms: int) -> list[str]:
    """Every pass criterion of the module docstring that failed, with its numbers."""
    problems = []
    if verdict.lost:
        problems.append(f"{len(verdict.lost)} lost, e.g. {verdict.lost[:5]}")
    if verdict.early:
        problems.append(f"{len(verdict.early)} early, e.g. {verdict.early[:5]}")
    if verdict.unexpected:
        problems.append(f"{len(verdict.unexpected)} unexpected ids, e.g. {verdict.unexpected[:5]}")
    if leaks := verdict.cancelled_delivered:
        causes = leak_causes(leaks, restarts)
        examples = [
            f"{s.id} (partition {s.partition}, cancel in {s.cancel.partition} acknowledged "
            f"{s.due_ms - (s.cancel.acked_ms or 0)} ms before due)"
            for s in leaks[:3]
            if s.cancel is not None
        ]
        problems.append(
            f"{len(leaks)} of {verdict.cancels_must_win} cancelled messages delivered "
            f"({causes['same_partition']} with the cancel in their own partition, "
            f"{causes['cancel_owner_away']} with the cancel's owner away), e.g. {examples}"
        )
    unexplained = verdict.unexplained_duplicates(kills(restarts, KILL_SLACK_MS))
    if unexplained:
        problems.append(
            f"{len(unexplained)} messages repeated outside the SIGKILL's window, e.g. "
            f"{[d.id for d in unexplained[:5]]}"
        )
    copies = Counter(d.id for d in verdict.duplicates)
    if thrice := [id for id, n in copies.items() if n > 1]:
        problems.append(f"{len(thrice)} messages delivered three times or more: {thrice[:5]}")
    if drained_ms > DRAIN_S * 1000:
        problems.append(
            f"the backlog drained {drained_ms / 1000:.1f} s after the last restart "
            f"(allowed {DRAIN_S} s)"
        )
    return problems


def _report(verdict: Verdict, restarts: list[Restart], drained_ms: int) -> str:
    lines = [f"\nrolling restart: {verdict.summary()}"]
    lines += [f"  {r.timings()}" for r in restarts]
    for label, late in verdict.produced_lateness.items():
        seen = verdict.seen_lateness[label]
        lines.append(f"  lateness due {label}: produced {late}, seen {seen}")
    lines.append(f"  drained {drained_ms} ms after the last restart")
    return "\n".join(lines)
