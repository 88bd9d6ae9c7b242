"""The owner's marks: typed, saved with the data they describe, byte-compatible on disk."""

from __future__ import annotations

import zlib
from pathlib import Path

import orjson
import pytest

from delaybridge.errors import IntegrityError
from delaybridge.timerlog import ManualClock, StoreMarks, StoreSettings, TimerStore
from delaybridge.timerlog.checkpoint import ENVELOPE, MAGIC, VERSION, Checkpoint
from delaybridge.timerlog.marks import UnknownMark

SMALL = StoreSettings(tick_ms=100, wheel_slots=64)


def test_only_the_marks_set_are_written_in_field_order() -> None:
    marks = StoreMarks(source_resume=7, changelog=41, changelog_seeding=True)
    assert list(marks.to_json().items()) == [
        ("source_resume", 7),
        ("changelog", 41),
        ("changelog_seeding", 1),
    ]
    assert StoreMarks().to_json() == {}


def test_marks_read_back_as_written_whatever_the_order() -> None:
    doc = {"changelog_unacked": 3, "source_seen": 9, "changelog_seeding": 1, "source_resume": 0}
    marks = StoreMarks.from_json(doc)
    assert marks == StoreMarks(
        source_resume=0, source_seen=9, changelog_unacked=3, changelog_seeding=True
    )
    assert StoreMarks.from_json(marks.to_json()) == marks


def test_a_mark_this_build_does_not_know_is_refused_by_name() -> None:
    with pytest.raises(UnknownMark, match="changelog_horizon"):
        StoreMarks.from_json({"source_resume": 1, "changelog_horizon": 5})
    with pytest.raises(TypeError, match="source_resume"):
        StoreMarks.from_json({"source_resume": "1"})


def test_the_store_keeps_the_marks_of_its_last_flush(tmp_path: Path) -> None:
    clock = ManualClock(1_000_000)
    store = TimerStore.open(tmp_path / "s", SMALL, clock)
    assert store.marks == StoreMarks()
    store.flush(StoreMarks(source_resume=5, changelog=2))
    assert store.marks == StoreMarks(source_resume=5, changelog=2)
    store.flush()  # None: the current marks, unchanged
    store.abandon()
    again = TimerStore.open(tmp_path / "s", SMALL, clock)
    assert again.marks == StoreMarks(source_resume=5, changelog=2)
    again.close()


def test_marks_of_a_flush_the_disk_refused_are_not_the_stores(tmp_path: Path) -> None:
    clock = ManualClock(1_000_000)
    store = TimerStore.open(tmp_path / "s", SMALL, clock)
    store.flush(StoreMarks(source_resume=1))
    real = store.commit_log.sync

    def full() -> None:
        raise OSError(28, "No space left on device")

    store.commit_log.sync = full  # type: ignore[method-assign]
    with pytest.raises(OSError):
        store.flush(StoreMarks(source_resume=2))
    assert store.marks == StoreMarks(source_resume=1)
    store.commit_log.sync = real  # type: ignore[method-assign]
    store.flush(StoreMarks(source_resume=3))
    assert store.marks == StoreMarks(source_resume=3)
    store.close()


def _write_checkpoint_body(directory: Path, body: dict[str, object]) -> None:
    raw = orjson.dumps(body)
    envelope = ENVELOPE.pack(MAGIC, VERSION, 0, len(raw), zlib.crc32(raw))
    (directory / "checkpoint").write_bytes(envelope + raw)


@pytest.mark.parametrize(
    "marks", [{"source_resume": "soon"}, {"source_resume": 1, "from_the_future": 2}, [1]]
)
def test_bad_marks_are_an_integrity_error_naming_the_file(tmp_path: Path, marks: object) -> None:
    body = Checkpoint(100, 64).to_json()
    body["marks"] = marks
    _write_checkpoint_body(tmp_path, body)
    with pytest.raises(IntegrityError, match=str(tmp_path / "checkpoint")):
        Checkpoint.load(tmp_path)
