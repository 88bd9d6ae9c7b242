"""Cancel order through the Kafka edge: a cancel takes only messages sent before it.

The cancel goes round through the cancel topic, so a message re-sent right after its
cancel is usually stored *before* the cancel reaches the store. Before issue 10 the
cancel then removed the new message too, and a cancel that matched nothing waited and
removed the next message with its id, however much later it was sent.
"""

from __future__ import annotations

from pathlib import Path

from tests.unit.bridge.sidecar_kit import DELAY, FakeSidecar, schedule


def ids_and_origins(side: FakeSidecar) -> list[tuple[str, str]]:
    return [(h["delay-id"], h["delay-origin"]) for h in side.delivered()]


def test_cancel_then_resend_in_one_partition_delivers_the_new_message(tmp_path: Path) -> None:
    side = FakeSidecar(tmp_path)
    side.send(schedule("order", 5_000))
    side.turns(2)
    # One instant, one partition: the order of the offsets decides.
    side.send([("delay-cancel", "order")])
    side.send(schedule("order", 1_000))  # the reschedule, offset 2
    side.turns(3)
    side.turns(3, advance_ms=2_000)
    side.turns(3, advance_ms=4_000)
    assert ids_and_origins(side) == [("order", f"{DELAY}/0/2")]
    side.stop()


def test_cancel_then_resend_across_partitions_delivers_the_new_message(tmp_path: Path) -> None:
    side = FakeSidecar(tmp_path)
    side.send(schedule("order", 5_000), partition=1)
    side.turns(2)
    side.clock.advance(10)
    side.send([("delay-cancel", "order")], partition=1)
    side.clock.advance(10)
    side.send(schedule("order", 1_000), partition=0)
    side.turns(3)
    side.turns(3, advance_ms=2_000)
    side.turns(3, advance_ms=4_000)
    assert ids_and_origins(side) == [("order", f"{DELAY}/0/0")]
    side.stop()


def test_a_stale_cancel_does_not_touch_a_later_message(tmp_path: Path) -> None:
    side = FakeSidecar(tmp_path)
    side.send(schedule("order", 100))
    side.turns(3, advance_ms=200)
    assert ids_and_origins(side) == [("order", f"{DELAY}/0/0")]
    side.send([("delay-cancel", "order")], partition=1)  # too late: already delivered
    side.turns(3)
    side.clock.advance(10)
    side.send(schedule("order", 100))  # within the cancel's grace, but sent after it
    side.turns(3, advance_ms=200)
    assert ids_and_origins(side) == [("order", f"{DELAY}/0/0"), ("order", f"{DELAY}/0/1")]
    side.stop()


def test_a_cancel_overtaking_its_message_still_takes_it(tmp_path: Path) -> None:
    side = FakeSidecar(tmp_path)
    side.clock.advance(10)
    side.send([("delay-cancel", "order")], partition=1)
    side.turns(3)  # partition 0 lags: its message, sent before the cancel, comes later
    side.cluster.append(DELAY, 0, b"k", b"v", schedule("order", 1_000), side.clock.now_ms() - 5)
    side.turns(3)
    side.turns(3, advance_ms=2_000)
    assert side.delivered() == []
    assert side.service.partitions.by_key[(DELAY, 0)].store.stats().cancelled_total == 1
    side.stop()
