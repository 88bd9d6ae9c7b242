"""The commit position never runs ahead of durable data."""

from __future__ import annotations

from delaybridge.bridge.offsets import OffsetTracker
from delaybridge.bridge.ratelimit import TokenBucket


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
    t.produce_started(1)  # e.g. a dead letter
    t.handled(2)
    t.produce_started(3)
    t.store_flushed()
    assert t.commit_position() == 1
    t.produce_acked(3)  # out of order: 1 is still unacked
    assert t.commit_position() == 1
    t.produce_acked(1)
    assert t.commit_position() == 4
    assert t.unacked == 0


def test_token_bucket_rate() -> None:
    bucket = TokenBucket(10.0, now_s=0.0)
    taken = sum(bucket.take(0.0) for _ in range(100))
    assert taken == 10  # one second's worth saved up
    assert not bucket.take(0.05)
    assert bucket.take(0.1)
