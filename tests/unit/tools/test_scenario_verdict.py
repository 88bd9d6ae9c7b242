"""The scenario verdict's rules (``tools/scenario/verdict.py``), without a broker: what is
lost, early, cancelled delivered, repeated, and how late, from what was sent and read."""

from __future__ import annotations

from delaybridge.tools.scenario.verdict import (
    OUTSIDE,
    Cancel,
    Delivered,
    Kill,
    Lateness,
    Scheduled,
    Window,
    judge,
)

DUE = 1_000_000


def sent(id: str, due_ms: int = DUE, partition: int = 0, cancel: Cancel | None = None) -> Scheduled:
    return Scheduled(id, due_ms, partition, cancel)


def out(
    id: str, late_ms: int = 50, due_ms: int = DUE, partition: int = 0, seen_after_ms: int = 30
) -> Delivered:
    produced = due_ms + late_ms
    return Delivered(id, due_ms, produced, produced + seen_after_ms, partition)


def test_every_message_once_on_time_is_a_clean_verdict() -> None:
    verdict = judge([sent("a"), sent("b")], [out("a"), out("b", late_ms=150)])
    assert verdict.summary() == {
        "scheduled": 2,
        "owed": 2,
        "cancels_must_win": 0,
        "cancels_late": 0,
        "delivered": 2,
        "lost": 0,
        "early": 0,
        "cancelled_delivered": 0,
        "duplicates": 0,
        "unexpected": 0,
    }
    assert verdict.produced_lateness == {OUTSIDE: Lateness(2, 150, 150, 150)}
    assert verdict.seen_lateness == {OUTSIDE: Lateness(2, 180, 180, 180)}


def test_an_owed_message_never_delivered_is_lost() -> None:
    verdict = judge([sent("a"), sent("b")], [out("a")])
    assert verdict.lost == ["b"]


def test_a_cancel_acknowledged_before_due_must_win_and_one_after_may_go_either_way() -> None:
    before = Cancel(partition=3, sent_ms=DUE - 5_000, acked_ms=DUE - 1)
    after = Cancel(partition=3, sent_ms=DUE - 5_000, acked_ms=DUE)
    schedules = [
        sent("leaked", cancel=before),
        sent("held", cancel=before),
        sent("late-out", cancel=after),
        sent("late-held", cancel=after),
    ]
    verdict = judge(schedules, [out("leaked"), out("late-out")])
    assert [s.id for s in verdict.cancelled_delivered] == ["leaked"]
    assert (verdict.cancels_must_win, verdict.cancels_late) == (2, 2)
    assert verdict.lost == []  # late-held was never owed
    assert verdict.owed == 0
    # Cancelled messages count in no lateness group, delivered or not.
    assert verdict.produced_lateness == {OUTSIDE: Lateness(0, -1, -1, -1)}


def test_a_cancel_kafka_refused_cancels_nothing() -> None:
    refused = Cancel(partition=1, sent_ms=DUE - 5_000, acked_ms=None)
    verdict = judge([sent("a", cancel=refused)], [])
    assert verdict.lost == ["a"]
    assert verdict.cancelled_delivered == []


def test_early_counts_every_copy_and_lateness_the_first() -> None:
    verdict = judge([sent("a"), sent("b")], [out("a", late_ms=-1), out("b"), out("b", late_ms=-5)])
    assert verdict.early == ["a", "b"]
    assert [d.produced_ms for d in verdict.duplicates] == [DUE + 50]
    assert verdict.firsts["b"].produced_ms == DUE - 5  # the earliest produced is the first


def test_copies_after_the_first_are_duplicates_and_ids_never_sent_unexpected() -> None:
    verdict = judge(
        [sent("a"), sent("b")],
        [out("a", late_ms=400), out("a", late_ms=100), out("a", late_ms=900), out("b"), out("x")],
    )
    assert sorted(d.produced_ms - DUE for d in verdict.duplicates) == [400, 900]
    assert [d.id for d in verdict.duplicated_firsts()] == ["a"]
    assert verdict.duplicated_firsts()[0].produced_ms == DUE + 100
    assert verdict.unexpected == ["x"]


def test_lateness_is_grouped_by_the_first_window_holding_the_due_time() -> None:
    roll = Window("roll", DUE + 10_000, DUE + 20_000)
    kill = Window("kill", DUE + 15_000, DUE + 30_000)
    schedules = [sent(f"m{i}", DUE + i * 1_000) for i in range(40)]
    deliveries = [out(f"m{i}", late_ms=i, due_ms=DUE + i * 1_000) for i in range(40)]
    verdict = judge(schedules, deliveries, [roll, kill])
    # roll holds due +10..+20 s (11 messages), kill the rest up to +30 s (10), outside 19.
    assert verdict.produced_lateness == {
        "roll": Lateness(11, 15, 20, 20),
        "kill": Lateness(10, 26, 30, 30),
        OUTSIDE: Lateness(19, 9, 39, 39),  # 0..9 and 31..39: the 10th is 9
    }
    assert list(verdict.seen_lateness) == ["roll", "kill", OUTSIDE]


def test_percentiles_are_nearest_rank() -> None:
    assert Lateness.of(range(1, 101)) == Lateness(100, 51, 100, 100)
    assert Lateness.of([7]) == Lateness(1, 7, 7, 7)
    assert Lateness.of([]) == Lateness(0, -1, -1, -1)


def test_a_kill_explains_repeats_from_its_partitions_just_before_it() -> None:
    kill = Kill(at_ms=DUE + 10_000, partitions=frozenset({4, 5}), slack_ms=2_000)
    schedules = [sent(id) for id in ("near", "other-partition", "too-early", "after")]
    deliveries = []
    for id, late_ms, partition in (
        ("near", 8_500, 4),  # produced 1.5 s before the kill, from a killed partition
        ("other-partition", 9_000, 1),
        ("too-early", 7_000, 5),  # 3 s before the kill
        ("after", 10_500, 5),  # after the kill: the restarted replica repeated it
    ):
        deliveries += [out(id, late_ms, partition=partition)] * 2
    verdict = judge(schedules, deliveries)
    assert len(verdict.duplicates) == 4
    unexplained = verdict.unexplained_duplicates([kill])
    assert sorted(d.id for d in unexplained) == ["after", "other-partition", "too-early"]
    assert len(verdict.unexplained_duplicates([])) == 4


def test_drained_is_when_the_last_owed_message_due_by_then_was_seen() -> None:
    since = DUE + 10_000
    cancelled = Cancel(0, DUE - 9_000, DUE - 8_000)
    schedules = [
        sent("old", DUE),
        sent("backlog", DUE + 9_000),
        sent("cancelled", DUE + 9_500, cancel=cancelled),
        sent("later", DUE + 20_000),
    ]
    deliveries = [
        out("old"),
        out("backlog", late_ms=4_000, due_ms=DUE + 9_000),  # seen at since + 3.03 s
        out("cancelled", late_ms=50_000, due_ms=DUE + 9_500),  # a leak: not the drain's
        out("later", late_ms=9_000, due_ms=DUE + 20_000),  # due after: not the backlog
    ]
    verdict = judge(schedules, deliveries)
    assert verdict.drained_ms(since, schedules) == 3_030
    assert verdict.drained_ms(DUE + 1_000, schedules) == 0  # all of it seen before
    assert judge(schedules, deliveries[:1]).drained_ms(since, schedules) == 0  # lost: not here
