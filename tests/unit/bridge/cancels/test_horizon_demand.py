"""Horizon checks on demand: an owner checks its partitions at the interval only while a
message is due soon somewhere, and about once a second otherwise.

Each check is a ListOffsets request and a record on the horizon topic, and the loop
turns every few milliseconds while that record is in flight: twenty checks a second per
worker were most of an idle sidecar's CPU (docs/benchmarks.md, "idle"). Another
replica's deliveries wait for this owner's word only when it has something due, and its
word says so.
"""

from __future__ import annotations

import orjson

from delaybridge.bridge.cancels.horizon import DEMAND_STALE_MS
from delaybridge.bridge.cancels.own_horizons import (
    IDLE_INTERVAL_MS,
    IDLE_LEAD_MS,
    parse_word,
)
from tests.unit.bridge.cancels import horizon_kit
from tests.unit.bridge.cancels.horizon_kit import KEY

INTERVAL_MS = 50
NOTHING = 10**15
"""A next due time far away: nothing pending."""


class Owner(horizon_kit.Owner):
    def __init__(self) -> None:
        super().__init__(INTERVAL_MS)

    def run(self, start_ms: int, ms: int, next_due_ms: int) -> None:
        """Turns every 10 ms for ``ms``, each acknowledging what was produced."""
        for now in range(start_ms, start_ms + ms, 10):
            self.own.step([KEY], lambda keys: {KEY: 10**9}, now, next_due_ms=next_due_ms)
            self.producer.poll(0)

    def words(self) -> list[dict[str, object]]:
        return [orjson.loads(m.value() or b"") for m in self.cluster.records("horizons")]


def test_an_owner_with_nothing_due_anywhere_checks_about_once_a_second() -> None:
    o = Owner()
    o.run(0, 3_000, NOTHING)
    words = o.words()
    assert 3 <= len(words) <= 3_000 // IDLE_INTERVAL_MS + 1  # was one per 50 ms: 60
    assert all(w["busy"] is False for w in words)


def test_an_owner_with_something_due_soon_checks_at_the_interval() -> None:
    o = Owner()
    o.run(0, 1_000, next_due_ms=IDLE_LEAD_MS)  # due within the lead from the start
    assert len(o.words()) >= 1_000 // INTERVAL_MS - 1
    assert o.words()[-1]["busy"] is True


def test_another_owner_with_something_due_keeps_the_checks_at_the_interval() -> None:
    o = Owner()
    o.horizon.demand(b"other", True, now_ms=0)
    o.run(0, 1_000, NOTHING)
    assert len(o.words()) >= 1_000 // INTERVAL_MS - 1
    # Its word goes stale (it died, or stopped publishing): idle again.
    before = len(o.words())
    o.run(DEMAND_STALE_MS, 3_000, NOTHING)
    assert len(o.words()) - before <= 3_000 // IDLE_INTERVAL_MS + 1
    # A word of its own (this owner's, read back from the topic) does not count.
    o.horizon.demand(b"me", True, now_ms=10_000)
    before = len(o.words())
    o.run(10_000, 1_000, NOTHING)
    assert len(o.words()) - before <= 2


def test_something_falling_due_is_said_at_once_and_checked_at_the_interval() -> None:
    o = Owner()
    o.run(0, 1_500, NOTHING)
    before = len(o.words())
    o.own.step([KEY], lambda keys: {KEY: 10**9}, 1_505, next_due_ms=2_000)
    o.producer.poll(0)
    said = o.words()[before:]  # the word that says so, then the check it does at once
    assert said and all(w["busy"] is True for w in said)
    before = len(o.words())
    o.run(1_510, 500, next_due_ms=2_000)
    assert len(o.words()) - before >= 500 // INTERVAL_MS - 1


def test_a_word_without_busy_is_busy() -> None:
    # An owner of an older build says nothing of its demand: the others keep checking at
    # the interval, as they did before.
    old = orjson.dumps({"horizons": {"delay/0": 5}, "cancel_ends": {}})
    word = parse_word(old)
    assert word.busy and word.horizons[KEY].horizon_ms == 5
    assert parse_word(b"not json").horizons == {}
