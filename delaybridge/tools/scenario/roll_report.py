"""What ``delaybridge bench roll`` reports: per restart, how long the replica was away; per
window of due times, how late messages were; and the verdict's counts.

Pure (no broker, no process), so the report's arithmetic is unit-tested:
:func:`roll_report` turns the restarts the benchmark timed and the verdict on what
arrived into one JSON-able dict; :func:`print_report` shows it as tables.

Lateness windows: a message is *due during a roll* when its due time falls between a
replica's SIGTERM and the moment it owned its partitions again (``roll``), *during the
kill* between the SIGKILL and that moment (``kill``), otherwise ``outside``. A cancelled
message that was delivered is also classified by where its cancel landed: in its own
partition, and/or in a partition whose owner was away between the cancel's
acknowledgement and the due time (issue 25's two causes).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from rich.console import Console
from rich.table import Table

from delaybridge.tools.scenario.verdict import OUTSIDE, Kill, Scheduled, Verdict, Window

ROLL = "roll"
KILL = "kill"


@dataclass(frozen=True)
class Restart:
    """One replica stopped and started again, timed (epoch ms)."""

    replica: str
    signal: str
    """``SIGTERM`` or ``SIGKILL``"""
    partitions: tuple[int, ...]
    """the delay-topic partitions it owned before"""
    signal_ms: int
    exited_ms: int
    started_ms: int
    ready_ms: int
    """``/readyz`` answered 200 again"""
    owning_ms: int
    """it owned (active) every one of ``partitions`` again"""
    exit_code: int | None

    @property
    def window(self) -> Window:
        label = KILL if self.signal == "SIGKILL" else ROLL
        return Window(label, self.signal_ms, self.owning_ms)

    def away(self, start_ms: int, end_ms: int) -> bool:
        """It was away (signalled, not yet owning again) at some moment of the span."""
        return self.signal_ms <= end_ms and start_ms <= self.owning_ms

    def timings(self) -> dict[str, Any]:
        return {
            "replica": self.replica,
            "signal": self.signal,
            "partitions": list(self.partitions),
            "exit_code": self.exit_code,
            "stop_s": _s(self.exited_ms - self.signal_ms),
            "start_to_ready_s": _s(self.ready_ms - self.started_ms),
            "signal_to_ready_s": _s(self.ready_ms - self.signal_ms),
            "signal_to_owning_s": _s(self.owning_ms - self.signal_ms),
        }


def windows(restarts: Sequence[Restart]) -> list[Window]:
    return [r.window for r in restarts]


def kills(restarts: Sequence[Restart], slack_ms: int) -> list[Kill]:
    """The SIGKILLs, each allowing the repeats at-least-once permits (``verdict.Kill``)."""
    return [
        Kill(r.signal_ms, frozenset(r.partitions), slack_ms)
        for r in restarts
        if r.signal == "SIGKILL"
    ]


def leak_causes(leaks: Sequence[Scheduled], restarts: Sequence[Restart]) -> dict[str, int]:
    """Of the cancelled messages delivered: how many had the cancel in their own partition,
    and how many had it in a partition whose owner was away between the cancel's
    acknowledgement and the due time."""
    same = owner_away = 0
    for s in leaks:
        cancel = s.cancel
        if cancel is None or cancel.acked_ms is None:
            continue
        same += cancel.partition == s.partition
        owner_away += any(
            cancel.partition in r.partitions and r.away(cancel.acked_ms, s.due_ms) for r in restarts
        )
    return {"same_partition": same, "cancel_owner_away": owner_away}


def roll_report(
    setup: dict[str, Any],
    restarts: Sequence[Restart],
    verdict: Verdict,
    scheduled: Sequence[Scheduled],
    kill_slack_ms: int,
) -> dict[str, Any]:
    """One JSON-able dict: ``setup`` as given, the restarts' timings, lateness per window,
    the verdict's counts, the drain after the last restart."""
    last_back = max((r.owning_ms for r in restarts), default=0)
    lateness: dict[str, Any] = {}
    tables = (("produced", verdict.produced_lateness), ("seen", verdict.seen_lateness))
    for label in (ROLL, KILL, OUTSIDE):
        for how, table in tables:
            found = table.get(label)
            if found is not None:
                lateness[f"{label}_{how}"] = asdict(found)
    unexplained = verdict.unexplained_duplicates(kills(restarts, kill_slack_ms))
    return {
        "setup": setup,
        "restarts": [r.timings() for r in restarts],
        "lateness_ms": lateness,
        "verdict": {
            **verdict.summary(),
            "duplicated_messages": len(verdict.duplicated_firsts()),
            "duplicates_not_explained_by_the_kill": len(unexplained),
            **{
                f"cancelled_delivered_{k}": v
                for k, v in leak_causes(verdict.cancelled_delivered, restarts).items()
            },
            "drained_after_last_restart_s": _s(verdict.drained_ms(last_back, scheduled))
            if restarts
            else None,
        },
    }


def print_report(console: Console, report: dict[str, Any]) -> None:
    """The report as three tables: restarts (a column each), lateness, verdict."""
    rows = report["restarts"]
    restarts = Table(title="delaybridge bench roll: restarts (seconds)")
    restarts.add_column("")
    for row in rows:
        restarts.add_column(f"{row['replica']} {row['signal']}", justify="right")
    for key in rows[0] if rows else ():
        if key not in ("replica", "signal"):
            restarts.add_row(key, *(str(row[key]) for row in rows))
    console.print(restarts)
    late = Table(title="lateness of messages by due time (ms)")
    for column in ("due", "by", "count", "p50", "p99", "max"):
        late.add_column(column, justify="right")
    for key, value in report["lateness_ms"].items():
        label, how = key.rsplit("_", 1)
        late.add_row(label, how, *(str(value[k]) for k in ("count", "p50_ms", "p99_ms", "max_ms")))
    console.print(late)
    verdict = Table(title="verdict")
    verdict.add_column("metric")
    verdict.add_column("value", justify="right")
    for key, value in report["verdict"].items():
        verdict.add_row(key, str(value))
    console.print(verdict)


def _s(ms: int) -> float:
    return round(ms / 1000, 2)
