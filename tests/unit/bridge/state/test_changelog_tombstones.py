"""Tombstones that fail or are refused are written again (rule 4 of bridge/state/changelog.py).

No test covered these paths. A delivery report carries no headers in confluent-kafka
(confluent-kafka-python#574), so a retry must come from what the writer bound to the
report, not from the failed message: each case ends with the tombstone in the
changelog under the value's key and naming the message in its ``delay-id`` header, and
the store rebuilt from that changelog holds nothing of the delivered message.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError

from delaybridge.timerlog.changelog_record import parse_key
from tests.unit.bridge.sidecar_kit import FakeSidecar, schedule
from tests.unit.bridge.state.changelog_kit import CHANGELOG, changelog, pending_ids


def _stored_and_written(tmp_path: Path) -> FakeSidecar:
    side = FakeSidecar(tmp_path / "a")
    side.send(schedule("soon0", 500))
    side.send(schedule("later0", 600_000))
    side.turns(2)
    side.checkpoint()  # both values written
    assert [m.value() is not None for m in changelog(side)] == [True, True]
    return side


def _tombstones(side: FakeSidecar) -> list[tuple[tuple[int, int], object]]:
    return [
        (parse_key(m.key(), "t"), dict(m.headers() or [])["delay-id"])
        for m in changelog(side)
        if m.value() is None
    ]


def _rebuilt(side: FakeSidecar, tmp_path: Path) -> set[str]:
    """What a replica that lost its disk restores from the changelog."""
    side.stop()
    shutil.rmtree(tmp_path / "a")
    b = FakeSidecar(tmp_path / "b", clock=side.clock, cluster=side.cluster)
    b.turns(4)
    found = pending_ids(b)
    b.stop()
    return found


def _fail_tombstones(side: FakeSidecar, times: int) -> list[int]:
    """The next ``times`` tombstones get a failed delivery report (progress records
    and values are left alone); returns a one-item list counting the failures."""
    producer = side.producer
    report = side.producer._report
    failed = [0]

    def failing(queued: Any) -> None:
        if queued.topic == CHANGELOG and queued.value is None and failed[0] < times:
            failed[0] += 1
            producer.fail_next(CHANGELOG, KafkaError._MSG_TIMED_OUT)
        report(queued)

    producer._report = failing  # type: ignore[method-assign,assignment]
    return failed


def test_a_failed_tombstone_is_written_again(tmp_path: Path) -> None:
    side = _stored_and_written(tmp_path)
    failed = _fail_tombstones(side, times=2)
    side.turns(3, advance_ms=600)  # soon0 delivered; its tombstone fails twice
    assert [h["delay-id"] for h in side.delivered()] == ["soon0"]
    for _ in range(6):  # the retries' backoff
        side.turns(1, advance_ms=2_000)
    assert failed == [2]
    assert _tombstones(side) == [((0, 0), b"soon0")]
    assert _rebuilt(side, tmp_path) == {"later0"}


def test_a_refused_tombstone_is_written_again(tmp_path: Path) -> None:
    side = _stored_and_written(tmp_path)
    side.producer.refuse_next(CHANGELOG, KafkaError._UNKNOWN_PARTITION)
    side.turns(3, advance_ms=600)
    assert [h["delay-id"] for h in side.delivered()] == ["soon0"]
    for _ in range(6):
        side.turns(1, advance_ms=2_000)
    assert _tombstones(side) == [((0, 0), b"soon0")]
    assert _rebuilt(side, tmp_path) == {"later0"}


def test_a_partition_owned_again_gets_its_tombstones(tmp_path: Path) -> None:
    """After the partition was closed and owned again (a new PartitionState), its
    tombstones are written and count."""
    side = _stored_and_written(tmp_path)
    side.stop()  # closes every partition
    again = FakeSidecar(tmp_path / "a", clock=side.clock, cluster=side.cluster)
    again.turns(2)
    again.turns(3, advance_ms=600)
    assert [h["delay-id"] for h in again.delivered()] == ["soon0"]
    again.checkpoint()
    assert _tombstones(again) == [((0, 0), b"soon0")]
    assert _rebuilt(again, tmp_path) == {"later0"}
