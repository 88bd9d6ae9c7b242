"""Waiting replaces under a bulk load (issue 14's known gap): one compact wait per
replica, not a Python object and two cancel-log records per store.

Every schedule with an explicit id is a replace that waits ``cancel_grace_ms`` for an
older copy from a lagging partition. These tests pin what the wait must still do --
take an older copy arriving later, in any partition, across a kill -9 -- and that no
store keeps a per-replace record of it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.unit.bridge.sidecar_kit import DELAY, FakeSidecar, schedule

GRACE_MS = 5_000


def sidecar(tmp_path: Path, **kw: Any) -> FakeSidecar:
    return FakeSidecar(
        tmp_path, changelog={"enabled": False}, store={"cancel_grace_ms": GRACE_MS}, **kw
    )


def origins(side: FakeSidecar) -> list[str]:
    return [h["delay-origin"] for h in side.delivered()]


def run_out(side: FakeSidecar, ms: int) -> None:
    for _ in range(ms // 100):
        side.turns(1, advance_ms=100)


def test_a_bulk_of_explicit_id_schedules_leaves_no_per_store_wait(tmp_path: Path) -> None:
    side = sidecar(tmp_path)
    for i in range(300):
        side.send(schedule(f"order-{i}", 60_000), partition=i % 2)
    side.turns(4)
    side.checkpoint()
    parts = list(side.service.partitions)
    assert len(parts) == 2
    for part in parts:
        stats = part.store.stats()
        assert stats.appended_total == 150
        assert stats.waiting_cancels == 0  # before: 300 in each store
        assert part.store.cancels.end == 0  # no WAITS record in the cancel log
    assert len(side.service.feed.waits) == 300  # one per replace, for the whole replica
    side.stop()


def test_an_older_copy_from_a_lagging_partition_is_replaced(tmp_path: Path) -> None:
    side = sidecar(tmp_path)
    t0 = side.clock.now_ms()
    side.clock.advance(10)
    side.send(schedule("order", 1_000), partition=0)  # the new one, stored first
    side.turns(3)
    side.cluster.append(DELAY, 1, b"k", b"v", schedule("order", 1_500), timestamp_ms=t0)
    side.turns(3)
    run_out(side, 2_000)
    assert origins(side) == [f"{DELAY}/0/0"]
    assert side.service.partitions.by_key[(DELAY, 1)].store.stats().replaced_total == 1
    side.stop()


def test_an_older_copy_after_the_grace_is_not_taken(tmp_path: Path) -> None:
    side = sidecar(tmp_path)
    t0 = side.clock.now_ms()
    side.clock.advance(10)
    side.send(schedule("order", 30_000), partition=0)
    side.turns(3)
    side.turns(1, advance_ms=GRACE_MS + 100)
    side.checkpoint()
    side.cluster.append(DELAY, 1, b"k", b"v", schedule("order", 1_000), timestamp_ms=t0)
    side.turns(3)
    run_out(side, 2_000)
    assert origins(side) == [f"{DELAY}/1/0"]  # delivered: the wait had ended
    side.stop()


def test_a_lagging_tie_across_partitions_keeps_exactly_the_greater_partition(
    tmp_path: Path,
) -> None:
    for first, late in ((0, 1), (1, 0)):
        side = sidecar(tmp_path / f"{first}")
        t = side.clock.now_ms()
        side.cluster.append(DELAY, first, b"k", b"v", schedule("order", 1_000), timestamp_ms=t)
        side.turns(3)
        side.cluster.append(DELAY, late, b"k", b"v", schedule("order", 1_000), timestamp_ms=t)
        side.turns(3)
        run_out(side, 2_000)
        assert origins(side) == [f"{DELAY}/1/0"], (first, late)
        side.stop()


def test_the_wait_survives_a_kill9_and_restart(tmp_path: Path) -> None:
    # The replace was applied and the feed's position saved past it, then kill -9: the
    # restarted replica reads the cancel topic again from before the replace (the saved
    # replay position) and waits again; the older copy arriving afterwards is replaced.
    side = sidecar(tmp_path)
    t0 = side.clock.now_ms()
    side.clock.advance(10)
    side.send(schedule("order", 3_000), partition=0)
    side.turns(3)
    side.checkpoint()
    side.kill9()
    again = sidecar(tmp_path, clock=side.clock, cluster=side.cluster)
    again.turns(3)
    assert len(again.service.feed.waits) == 1
    again.cluster.append(DELAY, 1, b"k", b"v", schedule("order", 1_000), timestamp_ms=t0)
    again.turns(3)
    run_out(again, 4_000)
    assert origins(again) == [f"{DELAY}/0/0"]
    assert again.service.partitions.by_key[(DELAY, 1)].store.stats().replaced_total == 1
    again.stop()


def test_the_wait_is_back_before_the_restart_ingests_anything(tmp_path: Path) -> None:
    # The older copy is already in its partition when the replica restarts: the replay
    # is read at start, before the first records are ingested.
    side = sidecar(tmp_path)
    t0 = side.clock.now_ms()
    side.clock.advance(10)
    side.send(schedule("order", 3_000), partition=0)
    side.turns(3)
    side.checkpoint()
    side.kill9()
    side.cluster.append(DELAY, 1, b"k", b"v", schedule("order", 1_000), timestamp_ms=t0)
    again = sidecar(tmp_path, clock=side.clock, cluster=side.cluster)
    again.turns(3)
    run_out(again, 4_000)
    assert origins(again) == [f"{DELAY}/0/0"]
    again.stop()


def test_a_store_opened_later_gets_the_recent_replaces(tmp_path: Path) -> None:
    # Partition 1 moves in after the replace was read: the older copy it already holds
    # is replaced at once, and one arriving later within the grace too.
    side = sidecar(tmp_path)
    t0 = side.clock.now_ms()
    side.cluster.append(DELAY, 1, b"k", b"v", schedule("order", 2_000), timestamp_ms=t0)
    side.consumer.rebalance("revoke", [(DELAY, 1)])
    side.turns(2)
    side.clock.advance(10)
    side.send(schedule("order", 3_000), partition=0)
    side.turns(3)
    side.consumer.rebalance("assign", [(DELAY, 1)])
    side.turns(3)
    side.cluster.append(DELAY, 1, b"k", b"v", schedule("order", 2_000), timestamp_ms=t0 + 1)
    side.turns(3)
    run_out(side, 4_000)
    assert origins(side) == [f"{DELAY}/0/0"]
    assert side.service.partitions.by_key[(DELAY, 1)].store.stats().replaced_total == 2
    side.stop()


def test_the_waiting_replaces_are_a_gauge_and_leave_it_after_the_grace(tmp_path: Path) -> None:
    """The table's memory grows with a bulk load of ids: operators see it on /metrics.
    Rows stay the cancel feed's keep window (the grace plus two session timeouts, for
    partitions that move in), then go."""
    side = sidecar(tmp_path)
    for i in range(40):
        side.send(schedule(f"order-{i}", 60_000), partition=i % 2)
    side.turns(4)
    side.checkpoint()
    gauge = side.service.metrics.registry.get_sample_value
    assert gauge("delaybridge_replace_waits") == 40
    run_out(side, GRACE_MS + 1_000)
    side.checkpoint()
    assert gauge("delaybridge_replace_waits") == 40  # kept for a partition moving in
    side.turns(2, advance_ms=side.service.feed._keep_ms)
    side.checkpoint()
    assert gauge("delaybridge_replace_waits") == 0
    side.stop()
