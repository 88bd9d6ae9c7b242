"""Seeding on the fakes: a store older than its changelog, values unacknowledged at a kill."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.unit.bridge.sidecar_kit import FakeSidecar, schedule
from tests.unit.bridge.state.changelog_kit import CHANGELOG, changelog, pending_ids


def test_values_unacknowledged_at_a_kill_are_written_after_the_restart(tmp_path: Path) -> None:
    """``kill -9`` while the values of messages on disk were unacknowledged (and never
    reached Kafka): the restart on the same disk had them in its store only, wrote them
    nowhere and committed its delay-topic offsets past them (re-read, they were skipped
    as stored), so a disk lost later lost them. Found by ``test_crash_points_fake.py``."""
    side = FakeSidecar(tmp_path / "a")
    side.send(schedule("later0", 600_000))
    for _ in range(2):  # written and acknowledged: the store has a changelog mark
        side.turns(1)
        side.checkpoint()
    side.producer.hold_acks = True
    side.send(schedule("later1", 600_000))
    side.turns(1)
    side.checkpoint()  # on disk; its value sent, never acknowledged
    side.kill9()  # and never written
    again = FakeSidecar(tmp_path / "a", clock=side.clock, cluster=side.cluster)
    for _ in range(3):
        again.turns(1, advance_ms=1_000)
        again.checkpoint()
    again.kill9()
    shutil.rmtree(tmp_path / "a")
    third = FakeSidecar(tmp_path / "b", clock=side.clock, cluster=side.cluster)
    third.turns(4)
    assert pending_ids(third) == {"later0", "later1"}
    third.stop()


def test_a_store_from_before_the_changelog_is_written_to_it_then_restorable(
    tmp_path: Path,
) -> None:
    old = FakeSidecar(tmp_path / "a", changelog={"enabled": False})
    for i in range(30):
        old.send(schedule(f"later{i}", 600_000), partition=i % 2)
    old.turns(3)
    old.stop()
    assert CHANGELOG not in old.cluster.topics
    upgraded = FakeSidecar(tmp_path / "a", clock=old.clock, cluster=old.cluster)
    upgraded.turns(3)
    assert len(changelog(upgraded)) == 30
    upgraded.checkpoint()
    assert not any(p.store.marks.changelog_seeding for p in upgraded.service.partitions)
    upgraded.stop()
    shutil.rmtree(tmp_path / "a")
    fresh = FakeSidecar(tmp_path / "b", clock=old.clock, cluster=old.cluster)
    fresh.turns(4)
    assert pending_ids(fresh) == {f"later{i}" for i in range(30)}
    fresh.stop()
