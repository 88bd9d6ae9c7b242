"""OwnHorizons on the fake cluster: how an owned partition's horizon follows its reading.

Under steady traffic a partition's end has moved on by the time a check's answer
arrives. Before the answers were kept, an answer not read through was dropped and the
next check asked for an end further on again: the horizon moved only when the consumer
happened to be at the end as an answer arrived. (At 5k msg/s on one partition the
lateness the rule costs, +12 ms, did not change with this: docs/benchmarks.md, "roll".)
"""

from __future__ import annotations

from delaybridge.bridge.cancels.own_horizons import UNREAD_KEPT
from tests.unit.bridge.cancels import horizon_kit
from tests.unit.bridge.cancels.horizon_kit import DELAY, KEY

INTERVAL_MS = 1_000


class Owner(horizon_kit.Owner):
    def __init__(self) -> None:
        super().__init__(INTERVAL_MS)

    def append(self, n: int) -> None:
        for _ in range(n):
            self.cluster.append(DELAY, 0, b"k", b"v", timestamp_ms=0)

    def step(self, now_ms: int, urgent: bool = False) -> None:
        self.own.step([KEY], lambda keys: {KEY: self.read}, now_ms, urgent)


def test_an_answer_not_read_through_yet_counts_once_the_reading_passes_its_end() -> None:
    o = Owner()
    o.append(3)
    o.read = 3
    o.step(0)  # the first check: read through at once
    assert o.horizon.horizon_ms() == 0
    o.append(2)  # appended after the check below was answered: end 5, read 3
    o.step(INTERVAL_MS)
    assert o.horizon.horizon_ms() == 0
    o.read = 5
    o.step(INTERVAL_MS + 10)  # no new check is due: the kept answer is judged again
    assert o.horizon.horizon_ms() == INTERVAL_MS


def test_the_newest_answer_read_through_wins_and_few_are_kept() -> None:
    o = Owner()
    o.append(1)
    o.read = 1
    o.step(0)
    for i in range(1, UNREAD_KEPT + 3):  # urgent checks while the reading lags
        o.append(1)
        o.step(i * 10, urgent=True)
    assert o.horizon.horizon_ms() == 0
    o.read = 3  # past the first kept answer's end (2) and the second's (3)
    o.step(100)
    assert o.horizon.horizon_ms() == 20
    o.read = 10**6
    o.step(110)
    assert o.horizon.horizon_ms() == (UNREAD_KEPT + 2) * 10  # the newest replaced the last
