"""What ``bench roll`` reports (``tools/scenario/roll_report.py``), without a broker: the
restarts' timings, lateness by window, where leaked cancels landed, the repeats the
SIGKILL explains, the drain after the last restart, and the tables."""

from __future__ import annotations

import io
import json

from rich.console import Console

from delaybridge.tools.scenario.roll_report import (
    KILL,
    ROLL,
    Restart,
    kills,
    leak_causes,
    print_report,
    roll_report,
    windows,
)
from delaybridge.tools.scenario.verdict import OUTSIDE, Cancel, Delivered, Scheduled, judge

T0 = 1_700_000_000_000


def restart(
    replica: str, signal: str, partitions: tuple[int, ...], at_s: float, away_s: float
) -> Restart:
    signal_ms = T0 + int(at_s * 1000)
    return Restart(
        replica=replica,
        signal=signal,
        partitions=partitions,
        signal_ms=signal_ms,
        exited_ms=signal_ms + 200,
        started_ms=signal_ms + (10_000 if signal == "SIGKILL" else 250),
        ready_ms=signal_ms + int(away_s * 1000) - 100,
        owning_ms=signal_ms + int(away_s * 1000),
        exit_code=0 if signal == "SIGTERM" else None,
    )


ROLLS = [
    restart("r1", "SIGTERM", (0, 1), at_s=20, away_s=2.5),
    restart("r2", "SIGTERM", (2, 3), at_s=25, away_s=3.0),
    restart("r3", "SIGTERM", (4, 5), at_s=30, away_s=2.0),
    restart("r1", "SIGKILL", (0, 1), at_s=35, away_s=12.5),
]


def at(s: float) -> int:
    return T0 + int(s * 1000)


def test_timings_are_seconds_from_the_signal() -> None:
    assert ROLLS[0].timings() == {
        "replica": "r1",
        "signal": "SIGTERM",
        "partitions": [0, 1],
        "exit_code": 0,
        "stop_s": 0.2,
        "start_to_ready_s": 2.15,
        "signal_to_ready_s": 2.4,
        "signal_to_owning_s": 2.5,
    }
    kill = ROLLS[3].timings()
    assert (kill["start_to_ready_s"], kill["signal_to_owning_s"]) == (2.4, 12.5)


def test_windows_are_rolls_and_the_kill_from_signal_to_owning() -> None:
    spans = windows(ROLLS)
    assert [w.label for w in spans] == [ROLL, ROLL, ROLL, KILL]
    assert (spans[3].start_ms, spans[3].end_ms) == (at(35), at(47.5))
    (kill,) = kills(ROLLS, slack_ms=2_000)
    assert (kill.at_ms, kill.partitions, kill.slack_ms) == (at(35), frozenset({0, 1}), 2_000)


def test_a_leak_is_classified_by_where_its_cancel_landed() -> None:
    def leak(partition: int, cancel_partition: int, acked_s: float, due_s: float) -> Scheduled:
        cancel = Cancel(cancel_partition, at(acked_s) - 10, at(acked_s))
        return Scheduled(f"m{partition}{cancel_partition}{due_s}", at(due_s), partition, cancel)

    leaks = [
        leak(2, 2, acked_s=10, due_s=15),  # same partition, nobody away
        leak(2, 0, acked_s=19, due_s=21),  # r1 away from 20 s: its owner was away
        leak(4, 4, acked_s=31, due_s=33),  # both: same partition, r3 away 30-32 s
        leak(3, 5, acked_s=33, due_s=40),  # r3 back at 32 s: neither
    ]
    assert leak_causes(leaks, ROLLS) == {"same_partition": 2, "cancel_owner_away": 2}


def test_the_report_holds_timings_lateness_counts_and_the_drain() -> None:
    def due(s: float) -> int:
        return at(s)

    cancel = Cancel(0, due(18), due(19))
    scheduled = [
        Scheduled("steady", due(10), 3),
        Scheduled("in-roll", due(21), 0),
        Scheduled("in-kill", due(40), 1),
        Scheduled("leaked", due(22), 1, cancel),
        Scheduled("repeated", due(34.5), 0),
        Scheduled("repeated-late", due(45), 2),
    ]

    def got(id: str, due_s: float, late_ms: int, partition: int) -> Delivered:
        produced = due(due_s) + late_ms
        return Delivered(id, due(due_s), produced, produced + 40, partition)

    delivered = [
        got("steady", 10, 80, 3),
        got("in-roll", 21, 1_500, 0),
        got("in-kill", 40, 7_600, 1),  # seen at 47.6 + 0.04 s: 140 ms after r1 owned again
        got("leaked", 22, 3_000, 1),
        got("repeated", 34.5, 100, 0),  # produced 0.4 s before the kill on r1's partition
        got("repeated", 34.5, 13_000, 0),
        got("repeated-late", 45, 100, 2),  # a repeat on another replica's partition
        got("repeated-late", 45, 200, 2),
    ]
    verdict = judge(scheduled, delivered, windows(ROLLS))
    report = roll_report({"rate_per_s": 200}, ROLLS, verdict, scheduled, kill_slack_ms=2_000)
    json.dumps(report)  # JSON-able as it is
    assert report["setup"] == {"rate_per_s": 200}
    assert [r["signal_to_owning_s"] for r in report["restarts"]] == [2.5, 3.0, 2.0, 12.5]
    late = report["lateness_ms"]
    assert list(late) == [
        f"{ROLL}_produced",
        f"{ROLL}_seen",
        f"{KILL}_produced",
        f"{KILL}_seen",
        f"{OUTSIDE}_produced",
        f"{OUTSIDE}_seen",
    ]
    in_roll = {"count": 1, "p50_ms": 1_500, "p99_ms": 1_500, "max_ms": 1_500}
    assert late[f"{ROLL}_produced"] == in_roll
    assert late[f"{KILL}_seen"] == {"count": 2, "p50_ms": 7_640, "p99_ms": 7_640, "max_ms": 7_640}
    assert late[f"{OUTSIDE}_produced"]["count"] == 2  # steady, repeated (before the kill)
    assert report["verdict"] == {
        "scheduled": 6,
        "owed": 5,
        "cancels_must_win": 1,
        "cancels_late": 0,
        "delivered": 6,
        "lost": 0,
        "early": 0,
        "cancelled_delivered": 1,
        "duplicates": 2,
        "unexpected": 0,
        "duplicated_messages": 2,
        "duplicates_not_explained_by_the_kill": 1,
        "cancelled_delivered_same_partition": 0,
        "cancelled_delivered_cancel_owner_away": 1,
        "drained_after_last_restart_s": 0.14,
    }


def test_the_tables_show_each_restart_window_and_count() -> None:
    scheduled = [Scheduled("a", at(10), 0)]
    verdict = judge(scheduled, [Delivered("a", at(10), at(10) + 60, at(10) + 90, 0)])
    report = roll_report({}, ROLLS, verdict, scheduled, kill_slack_ms=2_000)
    out = io.StringIO()
    print_report(Console(file=out, width=200), report)
    text = out.getvalue()
    for heading in ("r1 SIGTERM", "r2 SIGTERM", "r3 SIGTERM", "r1 SIGKILL", "signal_to_owning_s"):
        assert heading in text
    assert "12.5" in text  # the kill's signal to owning
    assert "cancelled_delivered" in text and "outside" in text
