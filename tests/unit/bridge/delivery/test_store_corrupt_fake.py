"""A flipped bit in one partition's commit log, through the fake Kafka edge.

Before issue 10 the first delivery read of the damaged record raised IntegrityError out
of the loop: the sidecar died with its healthy partitions, and every restart met the
record again. Now the readable parts are dead-lettered as ``store-corrupt``, the rest
of that partition and the other partitions keep delivering, and a metric counts it.
"""

from __future__ import annotations

from pathlib import Path

from delaybridge.connectors import header_text
from delaybridge.fileformat import HEADER_SIZE
from tests.unit.bridge.sidecar_kit import DELAY, DLT, FakeSidecar, schedule


def flip_last_byte_of(side: FakeSidecar, partition: int, id: str) -> None:
    store = side.service.partitions.by_key[(DELAY, partition)].store
    for index in range(store.timer.start, store.timer.end):
        pos = store.timer.entry(index).cl_pos
        if store.commit_log.read(pos).id == id:
            seg, off = store.commit_log.log.locate(pos)
            end = off + len(store.commit_log.raw(pos)) - 1
            with open(seg.path, "r+b") as f:  # the store's read-only map sees it
                f.seek(end)
                byte = f.read(1)[0]
                f.seek(end)
                f.write(bytes([byte ^ 0x01]))
            return
    raise AssertionError(f"{id} is not in partition {partition}'s store")


def test_a_damaged_record_is_dead_lettered_and_every_partition_keeps_delivering(
    tmp_path: Path,
) -> None:
    side = FakeSidecar(tmp_path)
    for id in ("a", "bad", "b"):
        side.send(schedule(id, 1_000), key=id.encode(), value=b"payload")
    side.send(schedule("other", 1_000), partition=1)
    side.turns(2)
    side.checkpoint()
    flip_last_byte_of(side, 0, "bad")
    side.turns(3, advance_ms=1_000)
    side.turns(3)
    assert sorted(h["delay-id"] for h in side.delivered()) == ["a", "b", "other"]
    (letter,) = side.cluster.records(DLT)
    headers = header_text(letter)
    assert headers["delay-error"] == "store-corrupt"
    assert headers["delay-origin"] == f"{DELAY}/0/1"
    assert headers["delay-id"] == "bad"
    assert "record CRC mismatch" in headers["delay-error-detail"]
    assert "delaybridge-store-corrupt" not in headers
    assert (letter.key(), letter.value()) == (b"bad", None)  # the value is not trusted
    side.checkpoint()
    registry = side.service.metrics.registry
    sample = registry.get_sample_value
    assert sample("delaybridge_store_corrupt_records_total", {"readable": "true"}) == 1
    assert sample("delaybridge_store_corrupt_records_total", {"readable": "false"}) == 0
    assert sample("delaybridge_dead_lettered_total", {"reason": "store-corrupt"}) == 1
    side.stop()


def test_a_store_that_cannot_open_is_set_aside_and_restored_from_the_changelog(
    tmp_path: Path,
) -> None:
    a = FakeSidecar(tmp_path)
    for i in range(5):
        a.send(schedule(f"m{i}", 600_000))
    a.turns(2)
    a.checkpoint()  # values in the changelog, store flushed with its checkpoint
    a.stop()
    (segment,) = (tmp_path / f"{DELAY}-0").glob("timerlog/*.tlog")
    raw = bytearray(segment.read_bytes())
    raw[HEADER_SIZE + 2 * 20 + 9] ^= 1  # timer-log entry 2 of 5 (20 bytes): the open refuses it
    segment.write_bytes(bytes(raw))
    b = FakeSidecar(tmp_path, clock=a.clock, cluster=a.cluster)  # before: IntegrityError
    b.turns(4)
    part = b.service.partitions.by_key[(DELAY, 0)]
    assert part.role.value == "active" and part.store.stats().pending == 5
    assert [p.name for p in tmp_path.glob(f"{DELAY}-0.damaged*")] != []
    b.stop()
