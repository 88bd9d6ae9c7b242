"""A hold keeps one offset back from the commit until its writes are acknowledged."""

from __future__ import annotations

from delaybridge.bridge.commit.holds import Hold
from delaybridge.bridge.commit.offsets import OffsetTracker


def test_a_hold_releases_its_offset_after_its_last_write() -> None:
    t = OffsetTracker(0)
    for offset in range(5):
        t.handled(offset)
    run = Hold.of(t, 2, writes=3)  # a run of three stored messages from offset 2
    t.store_flushed()
    assert t.commit_position() == 2
    run.done()
    run.done()
    assert t.commit_position() == 2  # one message of the run is not safe yet
    run.done()
    assert t.commit_position() == 5


def test_an_unheld_hold_only_counts_and_then_calls_back() -> None:
    seen: list[str] = []
    seed = Hold.unheld(2, lambda: seen.append("seeded"))
    seed.done()
    assert seen == []
    seed.done()
    assert seen == ["seeded"]


def test_two_holds_of_one_offset_both_hold_it() -> None:
    t = OffsetTracker(0)
    t.handled(0)
    value = Hold.of(t, 0)  # a schedule's changelog value
    replace = Hold.of(t, 0)  # and its replace on the cancel topic
    t.store_flushed()
    value.done()
    assert t.commit_position() == 0
    replace.done()
    assert t.commit_position() == 1
