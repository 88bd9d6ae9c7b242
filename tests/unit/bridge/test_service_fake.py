"""The sidecar's loop end to end on the in-memory fakes: store, commit, deliver, shut down.

No broker: every fault here (a delivery report that never comes, a full producer queue,
a partition revoked mid-flight, a refused record) is one line of setup.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.unit.bridge.sidecar_kit import DELAY, FakeSidecar, schedule


def test_a_schedule_is_stored_committed_after_flush_and_delivered_when_due(
    tmp_path: Path,
) -> None:
    side = FakeSidecar(tmp_path)
    offset = side.send(schedule("a", 1_000))
    side.turns(2)
    assert side.delivered() == []
    assert side.committed(0) is None  # not flushed yet: nothing committed
    side.checkpoint()
    assert side.committed(0) == offset + 1
    side.turns(1, advance_ms=900)
    assert side.delivered() == []  # never early
    side.turns(2, advance_ms=200)
    (headers,) = side.delivered()
    assert headers["delay-id"] == "a"
    assert headers["delay-origin"] == f"{DELAY}/0/{offset}"
    assert "delay-target-topic" not in headers
    side.stop()


def test_shutdown_drains_flushes_and_commits(tmp_path: Path) -> None:
    side = FakeSidecar(tmp_path)
    side.send(schedule("a", 100))
    side.send(schedule("b", 600_000), partition=1)
    side.turns(2, advance_ms=200)
    side.stop()
    assert side.consumer.closed
    assert side.committed(0) == 1 and side.committed(1) == 1
    assert [h["delay-id"] for h in side.delivered()] == ["a"]
    # The pending message survives in the store of the next run.
    again = FakeSidecar(tmp_path, clock=side.clock, cluster=side.cluster)
    again.turns(2)
    assert again.service.partitions.by_key[(DELAY, 1)].store.stats().pending == 1
    again.stop()


def test_an_idle_loop_waits_a_flush_interval_for_the_first_record(tmp_path: Path) -> None:
    # Nothing read last turn and nothing due soon: the loop waits up to the flush
    # interval (200 ms), not a tick (100 ms), and for one record, so that the first one
    # to arrive ends the wait (a consume of a whole batch waits out its timeout). Half
    # the turns of an idle sidecar, and a message sent to an idle one is read at once.
    side = FakeSidecar(tmp_path)
    asks: list[tuple[int, float]] = []
    consume = side.consumer.consume

    def counting(num_messages: int = 1, timeout: float = -1) -> list[Any]:
        asks.append((num_messages, timeout))
        return consume(num_messages, timeout)

    side.consumer.consume = counting  # type: ignore[method-assign]
    side.turns(3)
    assert asks[-1] == (1, 0.2)
    side.send(schedule("a", 60_000))
    side.turns(1)
    batch = side.service.settings.delivery.batch_max_records
    assert asks[-1] == (1, 0.2)  # the wait that the record ended
    side.turns(1)
    assert asks[-1][0] == batch  # records came last turn: a batch, a tick at most
    assert asks[-1][1] <= 0.1
    side.stop()
