"""Side writes on the fakes: a dead letter of bad input holds its offset until acknowledged."""

from __future__ import annotations

from pathlib import Path

from tests.unit.bridge.sidecar_kit import DLT, ORDERS, FakeSidecar


def test_bad_input_is_dead_lettered_and_its_offset_commits_only_after_the_ack(
    tmp_path: Path,
) -> None:
    side = FakeSidecar(tmp_path)
    side.producer.hold_acks = True
    side.send([("delay-target-topic", ORDERS), ("delay-ms", "soon")])
    side.turns(1)
    side.checkpoint()
    assert side.committed(0) is None  # the dead letter is not acknowledged yet
    side.producer.hold_acks = False
    side.turns(1)
    side.checkpoint()
    assert side.committed(0) == 1
    (dead,) = side.cluster.records(DLT)
    assert dict(dead.headers() or [])["delay-error"] == b"bad-time"
    side.stop()
