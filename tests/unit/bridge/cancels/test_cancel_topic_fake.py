"""Cancels on the fakes: a cancel read from one partition reaches another partition's store."""

from __future__ import annotations

from pathlib import Path

from tests.unit.bridge.sidecar_kit import DELAY, FakeSidecar, schedule


def test_a_cancel_from_another_partition_reaches_the_store_through_the_cancel_topic(
    tmp_path: Path,
) -> None:
    side = FakeSidecar(tmp_path)
    side.send(schedule("order-1", 5_000), partition=0)
    side.send([("delay-cancel", "order-1")], partition=1)
    side.turns(3)
    assert len(side.cancels()) == 1
    side.turns(3, advance_ms=2_000)
    assert side.delivered() == []
    assert side.service.partitions.by_key[(DELAY, 0)].store.stats().cancelled_total == 1
    side.stop()
