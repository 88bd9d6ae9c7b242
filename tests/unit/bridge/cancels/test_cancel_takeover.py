"""A cancel published while its message's partition has no live owner reaches it.

A replica that dies keeps its partitions until the group notices (one session timeout);
only then does another replica take them and restore their stores from the changelog.
A cancel published in between matches nothing anywhere: the replica that re-publishes
it does not own the message, and the dead one applies nothing. The next owner applies
the cancels its feed read recently to a partition that arrives; before this fix
"recently" was one ``cancel_grace_ms``, so with a grace shorter than the session
timeout the cancel was gone by the takeover and the message went out (found by the
real-broker acceptance test, tests/integration/sidecar/test_cancel_downtime.py).
"""

from __future__ import annotations

from pathlib import Path

from tests.unit.bridge.sidecar_kit import DELAY, FakeSidecar, schedule

GRACE_MS = 1_000
SESSION_MS = 10_000


def test_a_cancel_published_between_owners_cancels_after_the_takeover(tmp_path: Path) -> None:
    store = {"cancel_grace_ms": GRACE_MS}
    kafka = {"session_timeout_ms": SESSION_MS}
    a = FakeSidecar(tmp_path / "a", store=store, kafka=kafka)
    b = FakeSidecar(tmp_path / "b", clock=a.clock, cluster=a.cluster, store=store, kafka=kafka)
    a.turns(2)
    b.turns(2)
    assert set(a.service.partitions.by_key) == {(DELAY, 0)}
    assert set(b.service.partitions.by_key) == {(DELAY, 1)}
    a.send(schedule("victim", 600_000), partition=0)
    a.send(schedule("keep", 600_000), partition=0)
    a.turns(2)
    a.checkpoint()  # stored, flushed, in the changelog
    a.turns(1)

    # 'a' dies; the group has not noticed yet, so partition 0 stays with it.
    b.send([("delay-cancel", "victim")], partition=1)
    b.turns(3)
    b.checkpoint()
    b.turns(3, advance_ms=SESSION_MS // 3)  # a session timeout: many graces
    a.consumer.crash()  # the group notices: partition 0 moves to 'b'
    b.turns(6)
    assert (DELAY, 0) in b.service.partitions.by_key
    b.turns(4, advance_ms=300_000)
    b.turns(4, advance_ms=300_000)
    assert [h["delay-id"] for h in b.delivered()] == ["keep"]
    b.stop()
