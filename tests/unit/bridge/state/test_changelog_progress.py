"""Progress records (rule 6 of ``bridge/state/changelog.py``) when nothing happens.

An idle partition's delivery cursor moves over empty ticks at every flush, and each move
was a progress record: 5 records a second per partition, their produce and their
delivery report, the larger part of what an idle sidecar did besides its checkpoints
(issue 26: idle ≤ 1 % of a core). Such a record now waits up to IDLE_PROGRESS_MS; a
cursor that passed a delivery is written at the next flush as before.
"""

from __future__ import annotations

from pathlib import Path

from delaybridge.bridge.state.changelog import IDLE_PROGRESS_MS
from delaybridge.timerlog.changelog_record import PROGRESS, PROGRESS_KEY
from tests.unit.bridge.sidecar_kit import FakeSidecar, schedule
from tests.unit.bridge.state.changelog_kit import CHANGELOG

FLUSH_MS = 200


def progress_records(side: FakeSidecar, partition: int = 0) -> int:
    return sum(
        1
        for m in side.cluster.records(CHANGELOG)
        if m.key() == PROGRESS_KEY and m.partition() == partition
    )


def last_progress_ms(side: FakeSidecar, partition: int = 0) -> int:
    ticks = [
        PROGRESS.unpack(m.value() or b"")[0]
        for m in side.cluster.records(CHANGELOG)
        if m.key() == PROGRESS_KEY and m.partition() == partition
    ]
    return int(ticks[-1]) if ticks else -1


def flushes(side: FakeSidecar, n: int) -> None:
    for _ in range(n):
        side.turns(1, advance_ms=FLUSH_MS)
        side.checkpoint()


def test_an_idle_partition_writes_progress_at_most_every_idle_interval(tmp_path: Path) -> None:
    side = FakeSidecar(tmp_path)
    side.send(schedule("soon", 1_000))
    flushes(side, 10)  # 2 s: stored, delivered, its progress written
    assert [h["delay-id"] for h in side.delivered()] == ["soon"]
    after_delivery = progress_records(side)
    assert after_delivery >= 1
    flushes(side, IDLE_PROGRESS_MS // FLUSH_MS - 5)  # idle, short of the interval
    assert progress_records(side) == after_delivery
    flushes(side, 10)
    assert progress_records(side) == after_delivery + 1  # the heartbeat
    side.send(schedule("next", 500))
    due_ms = side.clock.now_ms() + 500
    for _ in range(6):
        flushes(side, 1)
        if len(side.delivered()) == 2:
            break
    assert [h["delay-id"] for h in side.delivered()] == ["soon", "next"]
    flushes(side, 1)  # its acknowledgement moved the cursor: written at the next flush
    assert last_progress_ms(side) >= due_ms
    side.stop()
