"""Anything on the cancel topic is tolerated: skipped, counted, logged; never a crash.

Every replica reads the whole cancel topic and re-reads the last grace period at every
start, so before issue 10 one bad record there crash-looped all replicas together.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from delaybridge.bridge.cancels.requests import CancelRequest, UnreadableCancel
from tests.unit.bridge.sidecar_kit import CANCELS, DELAY, FakeSidecar, schedule

HOSTILE = [
    b'{"id":"x","target_topic":1}',
    b'{"id":7}',
    b"[]",
    b'"just a string"',
    b"\xff\xfe",
    b"",
    b'{"id":"x","sent_ms":"soon"}',
    b'{"id":"x","sent_ms":true}',
    orjson.dumps({"id": "i" * 65_536}),
    orjson.dumps({"id": "x", "target_topic": "t" * 70_000}),
    b'{"id":"x","target_topic":"t","sent_ms":1,"replace":"yes"}',
    b'{"id":"x","sent_ms":1,"replace":true}',  # a replace always names its topic
    b'{"id":"x","target_topic":"t","replace":true}',  # ... and its send time
]


@pytest.mark.parametrize("raw", HOSTILE)
def test_decode_says_what_is_wrong(raw: bytes) -> None:
    with pytest.raises(UnreadableCancel):
        CancelRequest.decode(raw)


def test_a_cancel_round_trips_with_its_send_time() -> None:
    request = CancelRequest("order-1", "orders", "delay/2/7", 1_700_000_000_123)
    assert CancelRequest.decode(request.encode()) == request
    replace = CancelRequest("order-1", "orders", "delay/2/7", 1_700_000_000_123, replace=True)
    assert CancelRequest.decode(replace.encode()) == replace


def test_hostile_cancel_records_are_skipped_and_good_ones_still_apply(tmp_path: Path) -> None:
    side = FakeSidecar(tmp_path)
    side.send(schedule("victim", 5_000))
    side.turns(1)
    for raw in HOSTILE:
        side.cluster.append(CANCELS, 0, b"k", raw)
    side.cluster.append(CANCELS, 0, None, None)  # a tombstone, too
    side.send([("delay-cancel", "victim")], partition=1)
    side.turns(4)
    side.turns(3, advance_ms=3_000)
    assert side.delivered() == []
    side.checkpoint()
    unreadable = side.service.metrics.registry.get_sample_value(
        "delaybridge_cancels_unreadable_total"
    )
    assert unreadable == len(HOSTILE) + 1
    assert side.service.partitions.by_key[(DELAY, 0)].store.stats().cancelled_total == 1
    side.stop()


def test_a_replica_down_for_twice_the_grace_misses_no_cancel(tmp_path: Path) -> None:
    side = FakeSidecar(tmp_path)
    side.send(schedule("victim", 600_000))
    side.turns(2)
    side.stop()
    grace_ms = side.service.store_settings.cancel_grace_ms
    side.clock.advance(2 * grace_ms)
    # While it is down, another replica re-publishes a cancel for its message.
    request = CancelRequest("victim", None, f"{DELAY}/1/0", side.clock.now_ms())
    side.cluster.append(CANCELS, 0, b"victim", request.encode())
    side.clock.advance(2 * grace_ms)
    again = FakeSidecar(tmp_path, clock=side.clock, cluster=side.cluster)
    again.turns(3)
    assert again.service.partitions.by_key[(DELAY, 0)].store.stats().pending == 0
    again.stop()
