"""A cancel feed that stands still below an end it must read gets a new consumer
(bridge/cancels/feed_watch.py), so a new partition's first horizon does not wait for
the bound. Seen after a broker frozen for 45 s: one worker's feed stayed at 1,630 of
3,260 for the whole 60 s bound, and its partitions delivered only then."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from delaybridge.bridge.cancels.requests import CancelRequest
from tests.unit.bridge.cancels.test_cancel_horizon_fake import past_horizon
from tests.unit.bridge.sidecar_kit import CANCELS, FakeSidecar, schedule


def test_a_stuck_feed_is_renewed_and_the_horizon_is_not_held_to_the_bound(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    a = FakeSidecar(tmp_path)
    a.send(schedule("m", 3_000))
    a.turns(3, advance_ms=100)
    a.checkpoint()
    a.kill9()
    b = FakeSidecar(tmp_path, clock=a.clock, cluster=a.cluster)
    # Cancels another owner wrote while this one was away: its first horizon waits
    # until its feed has read them.
    for i in range(3):
        request = CancelRequest(f"other-{i}", None, f"delay/1/{i}", b.clock.now_ms())
        b.cluster.append(CANCELS, 0, f"other-{i}".encode(), request.encode(), [])
    stuck = b.service.feed._consumer
    stuck.consume = lambda *args, **kwargs: []  # type: ignore[method-assign]  # reads nothing more

    def turn(n: int) -> None:
        for _ in range(n):
            b.turns(1, advance_ms=500)
            b.checkpoint()

    with caplog.at_level(logging.INFO, logger="delaybridge.bridge.cancels.feed_watch"):
        turn(24)  # 12 s: 'm' is due at 3 s; the bound is 60 s
    assert [h["delay-id"] for h in b.delivered()] == ["m"]
    assert past_horizon(b) == 0
    assert b.service.feed._consumer is not stuck
    renewals = [r for r in caplog.records if "reading on with a new consumer" in r.message]
    assert len(renewals) == 1 and renewals[0].levelno == logging.WARNING
    b.stop()


def test_a_feed_that_reads_on_is_left_alone(tmp_path: Path) -> None:
    side = FakeSidecar(tmp_path)
    consumer: Any = side.service.feed._consumer
    for i in range(40):
        side.send(schedule(f"m{i}", 1_000 + 250 * i), partition=i % 2)
        side.send([("delay-cancel", f"m{i}")], partition=(i + 1) % 2)
        side.turns(1, advance_ms=250)
        side.checkpoint()
    assert side.service.feed._consumer is consumer
    assert side.delivered() == []
    side.stop()
