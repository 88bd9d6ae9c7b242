"""A cancel applies to the messages with its id that were sent before it (DESIGN §2).

Before issue 10 a cancel removed every pending message with its id, and one that matched
nothing waited for the grace period and then removed the next message with that id,
however much later it was sent: a reschedule (cancel, then the same id again) lost the
new message, and a stale cancel (its message already delivered) hit an unrelated one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from delaybridge.errors import IntegrityError
from delaybridge.fileformat import HEADER_SIZE, FileHeader, FileKind
from delaybridge.timerlog import Cancel, ManualClock, StoreSettings, TimerRecord, TimerStore
from delaybridge.timerlog.cancel_record import CancelRecord, WaitingCancel, encode
from delaybridge.timerlog.checkpoint import Checkpoint
from tests.unit.timerlog.support import GRACE_MS, START_MS, drain


@pytest.fixture
def store(graced_store: TimerStore) -> TimerStore:
    return graced_store


def sent(id: str, sent_ms: int, offset: int, due_ms: int = START_MS + 2_000) -> TimerRecord:
    """A message sent at ``sent_ms`` (its delay-topic timestamp), due at ``due_ms``."""
    return TimerRecord(id, due_ms, "orders", -1, b"k", b"v", (), offset, sent_ms)


def delivered(store: TimerStore, clock: ManualClock) -> list[tuple[str, int]]:
    clock.advance(3_000)
    return [(r.id, r.source_offset) for r in drain(store)]


def test_cancel_then_resend_delivers_the_new_message(store: TimerStore, clock: ManualClock) -> None:
    # The resend is stored before the cancel reaches the store (the cancel goes round
    # through the cancel topic): only the message sent before the cancel goes.
    store.append([sent("order", START_MS, offset=1), sent("order", START_MS + 20, offset=3)])
    assert store.cancel([Cancel("order", None, START_MS + 10, offset=2)]) == [True]
    assert delivered(store, clock) == [("order", 3)]


def test_a_stale_cancel_waits_but_does_not_touch_a_later_message(
    store: TimerStore, clock: ManualClock
) -> None:
    # "order" was delivered long ago; its late cancel matches nothing and waits.
    assert store.cancel([Cancel("order", None, START_MS)]) == [False]
    assert store.stats().waiting_cancels == 1
    clock.advance(100)
    store.append([sent("order", START_MS + 100, offset=7)])  # a new, unrelated message
    assert delivered(store, clock) == [("order", 7)]
    clock.advance(GRACE_MS)
    store.flush()
    stats = store.stats()
    assert (stats.waiting_cancels, stats.unknown_cancels_total, stats.cancelled_total) == (0, 1, 0)


def test_a_waiting_cancel_takes_every_message_sent_before_it_and_no_other(
    store: TimerStore, clock: ManualClock
) -> None:
    # The cancel overtook its messages (their partition lags): each one sent before it
    # is cancelled on arrival, including a second copy after the first matched.
    assert store.cancel([Cancel("order", "orders", START_MS + 50)]) == [False]
    store.append([sent("order", START_MS, offset=1)])
    store.append([sent("order", START_MS + 60, offset=2), sent("order", START_MS + 40, offset=3)])
    assert delivered(store, clock) == [("order", 2)]
    clock.advance(GRACE_MS)
    store.flush()
    assert store.stats().unknown_cancels_total == 0  # it matched: not unknown
    assert store.stats().cancelled_total == 2


@pytest.mark.parametrize(
    ("cancel_offset", "expect"),
    [(5, [("order", 9)]), (None, [("order", 9)]), (3, [("order", 4), ("order", 9)])],
)
def test_equal_timestamps_same_partition_by_offset_otherwise_the_cancel_wins(
    store: TimerStore, clock: ManualClock, cancel_offset: int | None, expect: object
) -> None:
    store.append([sent("order", START_MS, offset=4), sent("order", START_MS + 1, offset=9)])
    store.cancel([Cancel("order", None, START_MS, offset=cancel_offset)])
    assert delivered(store, clock) == expect


def test_a_cancel_without_send_time_takes_what_is_pending_and_does_not_wait(
    store: TimerStore, clock: ManualClock
) -> None:
    # The admin API's cancel: everything pending now, whenever sent; nothing later.
    store.append([sent("order", START_MS + 900, offset=1)])
    assert store.cancel([Cancel("order")]) == [True]
    assert store.cancel([Cancel("ghost")]) == [False]
    assert store.stats().waiting_cancels == 0
    store.append([sent("order", START_MS, offset=2), sent("ghost", START_MS, offset=3)])
    assert sorted(delivered(store, clock)) == [("ghost", 3), ("order", 2)]


def test_waiting_cancels_keep_their_send_time_and_match_across_a_restart(
    tmp_path: Path, graced: StoreSettings, clock: ManualClock
) -> None:
    with TimerStore.open(tmp_path, graced, clock) as store:
        store.append([sent("a", START_MS, offset=1)])
        store.cancel([Cancel("a", None, START_MS + 10, offset=4), Cancel("b", "orders", START_MS)])
    with TimerStore.open(tmp_path, graced, clock) as store:
        store.append([sent("a", START_MS + 10, offset=3), sent("a", START_MS + 10, offset=5)])
        store.append([sent("b", START_MS - 1, offset=6), sent("b", START_MS + 1, offset=7)])
    with TimerStore.open(tmp_path, graced, clock) as store:
        assert sorted(delivered(store, clock)) == [("a", 5), ("b", 7)]
        clock.advance(GRACE_MS)
        store.flush()
        assert store.stats().unknown_cancels_total == 0
        path = store.cancels.path
    assert FileHeader.decode(path.read_bytes(), path, FileKind.CANCEL_LOG).version == 2


def _write_v1_cancel_log(directory: Path, *items: CancelRecord) -> None:
    """Make the store in ``directory`` hold a version-1 cancel log with ``items``."""
    body = b"".join(encode(item) for item in items)
    header = FileHeader(FileKind.CANCEL_LOG, 0, 0, version=1).encode()
    ckpt = Checkpoint.load(directory)
    assert ckpt is not None
    (directory / f"cancels-{ckpt.cancel_generation:08d}.log").write_bytes(header + body)
    ckpt.cancel_end = len(body)
    ckpt.save(directory)


def test_a_version_1_cancel_log_is_read_and_upgraded(
    tmp_path: Path, graced: StoreSettings, clock: ManualClock
) -> None:
    TimerStore.open(tmp_path, graced, clock).close()
    expires = START_MS + GRACE_MS
    _write_v1_cancel_log(tmp_path, WaitingCancel(Cancel("old"), expires))  # no send time
    with TimerStore.open(tmp_path, graced, clock) as store:
        path = store.cancels.path
        assert FileHeader.decode(path.read_bytes(), path, FileKind.CANCEL_LOG).version == 2
        assert store.stats().waiting_cancels == 1
        # As version 1 did: the first message with the id is cancelled, and that ends it.
        store.append([sent("old", START_MS + 99, offset=1)])
        store.append([sent("old", START_MS + 99, offset=2)])
        assert delivered(store, clock) == [("old", 2)]
        assert store.stats().waiting_cancels == 0


def test_a_cancel_log_of_a_newer_version_is_refused_by_name(
    tmp_path: Path, graced: StoreSettings, clock: ManualClock
) -> None:
    TimerStore.open(tmp_path, graced, clock).close()
    path = tmp_path / "cancels-00000000.log"
    raw = FileHeader(FileKind.CANCEL_LOG, 0, 0, version=3).encode()
    path.write_bytes(raw + path.read_bytes()[HEADER_SIZE:])
    with pytest.raises(IntegrityError, match=r"cancels-00000000\.log: offset 4: format version 3"):
        TimerStore.open(tmp_path, graced, clock)
