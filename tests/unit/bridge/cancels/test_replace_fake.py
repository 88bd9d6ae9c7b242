"""Replace by id through the Kafka edge (DESIGN §2): a schedule whose id is pending for
the same target topic replaces it, latest sent wins, in any delay-topic partition;
``delay-on-duplicate: keep`` keeps both."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prometheus_client import generate_latest

from delaybridge.timerlog import TimerStore
from tests.unit.bridge.sidecar_kit import CANCELS, DELAY, DLT, FakeSidecar, schedule


def delivered(side: FakeSidecar) -> list[tuple[str, str, int]]:
    return [(h["delay-id"], h["delay-origin"], int(h["delay-due-ms"])) for h in side.delivered()]


def run_out(side: FakeSidecar, ms: int) -> None:
    """Turns until ``ms`` later, a tick at a time."""
    for _ in range(ms // 100):
        side.turns(1, advance_ms=100)


def test_a_later_schedule_replaces_the_pending_one_in_its_partition(tmp_path: Path) -> None:
    side = FakeSidecar(tmp_path)
    side.send(schedule("order", 5_000))
    side.turns(2)
    side.clock.advance(10)
    sent_ms = side.clock.now_ms()
    side.send(schedule("order", 1_000))  # "move it to one second from now"
    side.turns(3)
    run_out(side, 6_000)
    assert delivered(side) == [("order", f"{DELAY}/0/1", sent_ms + 1_000)]
    store = side.service.partitions.by_key[(DELAY, 0)].store
    stats = store.stats()
    assert (stats.replaced_total, stats.cancelled_total, stats.unknown_cancels_total) == (1, 0, 0)
    side.stop()


def test_a_later_schedule_replaces_one_pending_in_another_partition(tmp_path: Path) -> None:
    side = FakeSidecar(tmp_path)
    side.send(schedule("order", 1_000), partition=1)
    side.turns(2)
    side.clock.advance(10)
    side.send(schedule("order", 3_000), partition=0)  # later: it wins, though due later
    side.turns(3)
    run_out(side, 4_000)
    assert [(i, o) for i, o, _ in delivered(side)] == [("order", f"{DELAY}/0/0")]
    side.checkpoint()  # publishes the metrics
    text = generate_latest(side.service.metrics.registry).decode()
    assert "delaybridge_replaced_total 1.0" in text
    assert "delaybridge_cancel_unknown_total 0.0" in text
    side.stop()


def test_keep_both_when_the_producer_asks(tmp_path: Path) -> None:
    side = FakeSidecar(tmp_path)
    side.send(schedule("order", 1_000))
    side.clock.advance(10)
    side.send([*schedule("order", 2_000), ("delay-on-duplicate", "keep")])
    side.turns(3)
    run_out(side, 3_000)
    assert [o for _, o, _ in delivered(side)] == [f"{DELAY}/0/0", f"{DELAY}/0/1"]
    assert side.cluster.records(CANCELS) == [
        m for m in side.cluster.records(CANCELS) if b'"replace"' in (m.value() or b"")
    ]
    assert len(side.cluster.records(CANCELS)) == 1  # the first one's; the kept one made none
    side.stop()


def test_equal_send_times_in_two_partitions_keep_exactly_one(tmp_path: Path) -> None:
    # Each replaces what was sent before it; on a tie across partitions the record of
    # the greater (topic, partition) wins, so neither both nor none survive.
    side = FakeSidecar(tmp_path)
    side.send(schedule("order", 1_000), partition=1)
    side.send(schedule("order", 1_000), partition=0)
    side.turns(4)
    run_out(side, 2_000)
    assert [o for _, o, _ in delivered(side)] == [f"{DELAY}/1/0"]
    side.stop()


def test_a_replace_is_scoped_to_its_target_topic(tmp_path: Path) -> None:
    side = FakeSidecar(tmp_path)
    side.cluster.create_topic("reminders", 1)
    side.send(schedule("order", 1_000, target="reminders"))
    side.clock.advance(10)
    side.send(schedule("order", 1_000))
    side.turns(3)
    run_out(side, 2_000)
    assert len(side.delivered()) == 1 and len(side.delivered("reminders")) == 1
    side.stop()


def test_schedules_without_an_id_publish_no_replace(tmp_path: Path) -> None:
    side = FakeSidecar(tmp_path)
    side.send([("delay-target-topic", "orders"), ("delay-ms", "100")])
    side.send([("delay-target-topic", "orders"), ("delay-ms", "100")])
    side.turns(3)
    run_out(side, 300)
    assert len(side.delivered()) == 2
    assert side.cluster.records(CANCELS) == []
    side.stop()


def test_an_unknown_on_duplicate_value_is_dead_lettered(tmp_path: Path) -> None:
    side = FakeSidecar(tmp_path)
    side.send([*schedule("order", 100), ("delay-on-duplicate", "maybe")])
    side.turns(3)
    [dead] = side.delivered(DLT)
    assert dead["delay-error"] == "bad-header"
    assert "delay-on-duplicate" in dead["delay-error-detail"]
    side.stop()


def test_a_replace_re_read_after_a_restart_is_published_again(tmp_path: Path) -> None:
    # The schedule is stored and flushed, but its replace was never acknowledged: the
    # restart reads it again and, although the store holds it, publishes the replace.
    side = FakeSidecar(tmp_path, changelog={"enabled": False})
    side.send(schedule("order", 5_000), partition=1)
    side.turns(2)
    side.clock.advance(10)
    side.producer.hold_acks = True
    side.send(schedule("order", 1_000), partition=0)
    side.turns(2)
    side.checkpoint()
    side.kill9()
    again = FakeSidecar(
        tmp_path, clock=side.clock, cluster=side.cluster, changelog={"enabled": False}
    )
    again.turns(4)
    assert again.service.partitions.by_key[(DELAY, 0)].store.stats().appended_total == 1
    run_out(again, 6_000)
    assert [o for _, o, _ in delivered(again)] == [f"{DELAY}/0/0"]
    again.stop()


def test_a_replace_is_looked_up_once_per_store(tmp_path: Path, monkeypatch: Any) -> None:
    # The replace of a schedule is applied to this process's stores at ingest; reading
    # it back from the cancel topic does not look it up in the same stores again (an
    # id-index lookup and a record decoded per store: a tenth of the CPU of a steady
    # load of schedules with ids). An older copy that reaches another store after the
    # ingest, before the read-back, is still replaced: the replace waits from the ingest.
    asked: list[tuple[str, str]] = []
    cancel = TimerStore.cancel

    def counting(store: TimerStore, cancels: Any) -> list[bool]:
        asked.extend((store.directory.name, c.id) for c in cancels if c.replace)
        return cancel(store, cancels)

    monkeypatch.setattr(TimerStore, "cancel", counting)
    side = FakeSidecar(tmp_path)
    side.clock.advance(10)
    side.send(schedule("order", 3_000), partition=0)
    side.turns(1)
    old = side.clock.now_ms() - 5  # sent before the replace, read after it
    side.cluster.append(DELAY, 1, b"k", b"v", schedule("order", 1_000), timestamp_ms=old)
    side.turns(4)
    # Two schedules with the id, so two replaces: each store looked each up once.
    assert sorted(asked) == [(f"{DELAY}-0", "order")] * 2 + [(f"{DELAY}-1", "order")] * 2
    run_out(side, 4_000)
    assert [o for _, o, _ in delivered(side)] == [f"{DELAY}/0/0"]
    side.stop()
