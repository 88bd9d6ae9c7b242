"""FeedWatch's rule on its own: renewed once per stall, never while it moves, while it is
not behind, or while Kafka is unreachable."""

from __future__ import annotations

from delaybridge.bridge.cancels.feed_watch import FeedWatch


class Feed:
    def __init__(self) -> None:
        self.at = {0: 10, 1: 5}
        self.renewals = 0

    def position(self, c: int) -> int:
        return self.at[c]

    def renew(self) -> None:
        self.renewals += 1


def test_renewed_once_per_stall_and_not_while_it_moves() -> None:
    feed = Feed()
    watch = FeedWatch(feed.position, feed.renew, stall_ms=5_000)
    wanted = {0: 20, 1: 5}
    for t in range(0, 5_000, 500):  # behind on 0, moving every step
        feed.at[0] = 10 + t // 500
        watch.step(wanted, t)
    assert feed.renewals == 0
    for t in range(5_000, 10_001, 500):  # stands at 19 for 5 s
        watch.step(wanted, t)
    assert feed.renewals == 1
    for t in range(10_500, 15_001, 500):  # still standing: another 5 s, another renewal
        watch.step(wanted, t)
    assert feed.renewals == 2
    feed.at[0] = 20  # caught up
    watch.step(wanted, 15_500)
    watch.step(wanted, 30_000)
    assert feed.renewals == 2


def test_not_renewed_while_kafka_is_unreachable_or_nothing_is_wanted() -> None:
    feed = Feed()
    watch = FeedWatch(feed.position, feed.renew, stall_ms=5_000)
    for t in range(0, 20_001, 500):
        watch.step({0: 20}, t, reachable=False)
        watch.step({}, t)
    assert feed.renewals == 0
