"""Where consumption resumes after a crash: never past an unacknowledged side write.

Before issue 10 a partition resumed at max(committed, last stored offset + 1): a cancel
at offset 0 and a dead letter at 1 whose produces were never acknowledged, then a
schedule at 2 that was stored and flushed, then kill -9: the restart resumed at 3, the
cancel and the dead letter were gone, and the cancelled message was delivered.
"""

from __future__ import annotations

from pathlib import Path

from tests.unit.bridge.sidecar_kit import DELAY, DLT, ORDERS, FakeSidecar, schedule


def test_a_restart_re_reads_cancels_and_dead_letters_never_acknowledged(tmp_path: Path) -> None:
    side = FakeSidecar(tmp_path, changelog={"enabled": False})
    side.send(schedule("victim", 60_000), partition=1)
    side.turns(1)
    side.producer.hold_acks = True  # the cluster never acknowledges what follows
    side.send([("delay-cancel", "victim")])  # offset 0
    side.send([("delay-target-topic", ORDERS), ("delay-ms", "soon")])  # offset 1: bad
    side.send(schedule("kept", 60_000))  # offset 2
    side.turns(2)
    side.checkpoint()  # the schedule at 2 is flushed; nothing is committed
    assert side.committed(0) is None
    side.kill9()

    again = FakeSidecar(
        tmp_path, clock=side.clock, cluster=side.cluster, changelog={"enabled": False}
    )
    again.turns(3)
    assert len(again.cancels()) == 1  # the cancel, written again (beside the replaces)
    (dead,) = again.cluster.records(DLT)
    assert dict(dead.headers() or [])["delay-origin"] == f"{DELAY}/0/1".encode()
    assert again.service.partitions.by_key[(DELAY, 0)].store.stats().appended_total == 1
    again.turns(3, advance_ms=40_000)
    again.turns(3, advance_ms=40_000)
    assert [h["delay-id"] for h in again.delivered()] == ["kept"]  # not the victim
    again.stop()
