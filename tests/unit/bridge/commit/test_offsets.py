"""The commit position never runs ahead of durable data."""

from __future__ import annotations

from delaybridge.bridge.commit.offsets import OffsetTracker
from delaybridge.bridge.delivery.rate_limits import TokenBucket


def test_commit_follows_flush_not_append() -> None:
    t = OffsetTracker(10)
    assert t.commit_position() == 10
    t.handled(10)
    t.handled(11)
    assert t.take_commit() is None  # appended, not flushed
    t.store_flushed()
    assert t.take_commit() == 12
    assert t.take_commit() is None  # unchanged since last time


def test_unacked_side_produce_holds_the_commit_back() -> None:
    t = OffsetTracker(0)
    t.handled(0)
    t.handled(1)
    t.hold(1)  # e.g. a dead letter
    t.handled(2)
    t.handled(3)
    t.hold(3)
    t.store_flushed()
    assert t.commit_position() == 1
    t.release(3)  # out of order: 1 is still unacked
    assert t.commit_position() == 1
    t.release(1)
    assert t.commit_position() == 4
    assert t.unacked == 0


def test_produces_started_out_of_order_hold_the_commit_at_the_oldest() -> None:
    """Ingest appends a batch's schedules (their replaces and changelog values start
    first) before the batch's cancels and dead letters of earlier offsets."""
    t = OffsetTracker(0)
    t.handled(2)
    t.handled(2)
    t.hold(2)  # the replace of the schedule at 2
    t.handled(0)
    t.hold(0)  # a cancel
    t.handled(1)
    t.hold(1)  # a dead letter
    t.store_flushed()
    assert t.commit_position() == 0
    t.release(0)
    assert t.commit_position() == 1
    t.release(2)
    assert t.commit_position() == 1
    t.release(1)
    assert t.commit_position() == 3


def test_two_produces_of_one_offset_both_hold_the_commit() -> None:
    """A schedule's changelog value and its replace are both gated on its offset."""
    t = OffsetTracker(5)
    t.handled(5)
    t.handled(5)
    t.hold(5)  # changelog
    t.handled(5)
    t.hold(5)  # replace
    t.store_flushed()
    t.release(5)
    assert t.commit_position() == 5  # the other one is still unacknowledged
    assert t.unacked == 1
    t.release(5)
    assert t.commit_position() == 6 and t.unacked == 0


def test_token_bucket_rate() -> None:
    bucket = TokenBucket(10.0, now_s=0.0)
    taken = sum(bucket.take(0.0) for _ in range(100))
    assert taken == 10  # one second's worth saved up
    assert not bucket.take(0.05)
    assert bucket.take(0.1)
