"""Opening a store: create it, or recover it to exactly its last checkpoint.

The protocol (the code below follows these steps):

1. Take the directory's lock (``LOCK``, ``flock``): one process per store.
2. Read ``checkpoint``. None and no segments: a new store, start from empty logs.
   None (or unreadable: kept as ``checkpoint.damaged``) but segments on disk: work one
   out from the segments (:mod:`rescue`), never delete them. ``tick_ms`` /
   ``wheel_slots`` different from the settings -> ConfigError naming the setting
   (they define which slot a time maps to).
3. Open the wheel file (its header repeats tick and slots: same check). A damaged
   one (header, size: truncated, zeroed) is logged, deleted and made again empty.
4. Open the commit log and the timer log and cut each back to the checkpoint's end
   (``commit_end``, ``timer_end``): whatever was written after the last flush is
   discarded. The sidecar re-reads it from Kafka, because it commits Kafka offsets
   only after a flush (DESIGN.md section 4). A file shorter than the checkpoint says,
   or a missing segment, is an IntegrityError naming the file and offset.
5. Check every live timer-log entry (``live_start`` .. ``timer_end``): CRC, type,
   commit-log position inside the log and increasing (entries and records are
   one-to-one and in the same order). Check that the last entry's record ends
   exactly at ``commit_end``; if that record fails its CRC, it was damaged after it
   was flushed (a torn write never reaches a checkpoint): it is quarantined when read
   (:mod:`quarantine`), like any damaged record. A finished last record (its tick is
   before the cursor's) may have been punched out (:mod:`reclaim`): only its length,
   which it keeps, is checked.
6. If the wheel file is stamped clean at ``timer_end``, every used slot's CRC holds
   and its slots after the cursor's tick count as many entries as the timer log has
   there (zeroed slots look empty, not damaged), keep it; otherwise rebuild it from
   the entries of step 5 (those in ticks at or after the delivery cursor's). The
   wheel is only an index.
7. Replay the cancel log up to ``cancel_end``; delete other generations.
8. Stamp the wheel "in use" (a crash from now on forces step 6's rebuild).
9. Open the id index (:mod:`id_index`): delete index files of segments gone, verify
   every whole run from ``live_start`` against the timer log, rebuild those that fail
   or are missing, sort the run still filling. Never trusted unchecked: the files are
   not fsynced, and a run written before a crash may sort entries the checkpoint cut.
10. Optionally (``verify_commit_log``) check the CRC of the record of every live entry
   not finished; otherwise each record's CRC is checked when it is read for delivery.
"""

from __future__ import annotations

import fcntl
import logging
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from delaybridge.errors import ConfigError, IntegrityError
from delaybridge.timerlog import timer_entry
from delaybridge.timerlog.cancels import CancelBook
from delaybridge.timerlog.checkpoint import FILE_NAME, Checkpoint
from delaybridge.timerlog.commit_log import CommitLog
from delaybridge.timerlog.commit_record import PREFIX, check
from delaybridge.timerlog.errors import StoreLocked
from delaybridge.timerlog.rescue import rescue
from delaybridge.timerlog.settings import StoreSettings
from delaybridge.timerlog.timer_log import TimerLog
from delaybridge.wheel import TimingWheel

log = logging.getLogger(__name__)


@dataclass
class Opened:
    """The parts of a recovered store, ready to use."""

    lock_fd: int
    checkpoint: Checkpoint
    commit_log: CommitLog
    timer: TimerLog
    wheel: TimingWheel
    cancels: CancelBook
    wheel_rebuilt: bool
    rescued: bool
    """There was no usable checkpoint: it was worked out from the segments."""
    checkpoint_loaded: bool
    """``checkpoint`` is the one on disk (not a new store's first)."""


def _lock(directory: Path) -> int:
    fd = os.open(directory / "LOCK", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError as exc:
        os.close(fd)
        raise StoreLocked(f"{directory}: the store is open in another process") from exc
    return fd


def recover(
    directory: Path, settings: StoreSettings, now_ms: int, verify_commit_log: bool = False
) -> Opened:
    directory.mkdir(parents=True, exist_ok=True)
    lock_fd = _lock(directory)  # step 1
    try:
        return _recover(directory, settings, now_ms, verify_commit_log, lock_fd)
    except BaseException:
        os.close(lock_fd)
        raise


def _recover(
    directory: Path, settings: StoreSettings, now_ms: int, verify: bool, lock_fd: int
) -> Opened:
    tick = settings.tick_ms
    ckpt = _load_checkpoint(directory)  # step 2
    loaded = ckpt is not None
    found = rescue(directory, settings) if ckpt is None else None
    rescued = found is not None
    if found is not None:
        ckpt = found.checkpoint
    if ckpt is None:
        ckpt = Checkpoint(tick, settings.wheel_slots, done_tick_ms=now_ms // tick * tick)
    for name, have, want in (
        ("tick_ms", ckpt.tick_ms, tick),
        ("wheel_slots", ckpt.wheel_slots, settings.wheel_slots),
    ):
        if have != want:
            raise ConfigError(
                f"store setting {name}={want} does not match the store in {directory} "
                f"(created with {name}={have}); use the old value or a new data directory"
            )
    wheel = _open_wheel(directory / "wheel", tick, settings.wheel_slots)  # step 3
    commit_log = CommitLog(directory / "commitlog", settings.commit_segment_bytes)  # step 4
    timer = TimerLog(
        directory / "timerlog", settings.timer_segment_entries, settings.index_run_entries, tick
    )
    cancels = CancelBook(directory)
    try:
        commit_log.open(ckpt.commit_end)
        timer.open(ckpt.timer_end)
        if ckpt.live_start < timer.start:
            raise IntegrityError(
                f"{directory / 'timerlog'}: entries from {ckpt.live_start} are pending but "
                f"the oldest segment starts at {timer.start}"
            )
        trust = not rescued and (
            (wheel.fresh and ckpt.timer_end == 0)
            or (wheel.stamp == ckpt.timer_end + 1 and len(wheel.bad_slots()) == 0)
        )
        if not trust:
            log.info("%s: rebuilding the wheel from the timer log", directory)
            wheel.clear()
        ahead = _check_entries(timer, commit_log, ckpt, None if trust else wheel)  # steps 5, 6
        if trust and wheel.live_count(ckpt.done_tick_ms) != ahead:
            log.warning(
                "%s: its slots count %d entries after the delivery cursor, the timer log "
                "%d: rebuilding it from the timer log",
                wheel.path,
                wheel.live_count(ckpt.done_tick_ms),
                ahead,
            )
            trust = False
            wheel.clear()
            _check_entries(timer, commit_log, ckpt, wheel)
        if not trust:
            wheel.seal_rebuild()
        cancels.open(ckpt.cancel_generation, ckpt.cancel_end, ckpt.done_tick_ms)  # step 7
        for index, slot_ms in (found.superseded if found is not None else {}).items():
            cancels.apply(index, slot_ms)  # already rolled: skipped when reached
        wheel.set_stamp(0)  # step 8
        timer.load_index(ckpt.live_start)  # step 9
        if verify:  # step 10
            commit_log.verify(_unfinished_records(timer, ckpt))
    except BaseException:
        for part in (commit_log, timer, cancels, wheel):
            part.close()
        raise
    return Opened(lock_fd, ckpt, commit_log, timer, wheel, cancels, not trust, rescued, loaded)


def _load_checkpoint(directory: Path) -> Checkpoint | None:
    """The checkpoint; None when there is none, or it is unreadable (it is then kept as
    ``checkpoint.damaged`` and the store rescued from its segments: :mod:`rescue`)."""
    try:
        return Checkpoint.load(directory)
    except IntegrityError as exc:
        log.error("%s; kept as checkpoint.damaged, recovering from the segments", exc)
        os.replace(directory / FILE_NAME, directory / f"{FILE_NAME}.damaged")
        return None


def _open_wheel(path: Path, tick_ms: int, slots: int) -> TimingWheel:
    """The wheel file, or a new empty one in place of a damaged one (it is only an index:
    recovery rebuilds it). A wheel of other geometry stays a ConfigError."""
    try:
        return TimingWheel(path, tick_ms, slots)
    except IntegrityError as exc:
        log.warning("%s; the wheel is made again and rebuilt from the timer log", exc)
        path.unlink()
        return TimingWheel(path, tick_ms, slots)


def _check_entries(
    timer: TimerLog, commit_log: CommitLog, ckpt: Checkpoint, wheel: TimingWheel | None
) -> int:
    """Steps 5 and 6; returns how many live entries sit in ticks after the cursor's."""
    ahead = 0
    last_cl = last_slot = -1
    kinds_ok = np.array([int(k) for k in timer_entry.EntryType], dtype=np.uint64)
    # 1 Mi entries (32 MiB) per pass: the wheel rebuild costs O(slots) per chunk.
    for first, entries in timer.chunks(ckpt.live_start, ckpt.timer_end, chunk_entries=1 << 20):
        cl = timer_entry.positions_of(entries)
        kinds = timer_entry.kinds_of(entries)
        bad = np.flatnonzero(~np.isin(kinds, kinds_ok))
        order_bad = np.flatnonzero(np.diff(cl, prepend=last_cl) <= 0)
        if len(bad) or len(order_bad) or cl[-1] >= ckpt.commit_end or cl[0] < commit_log.log.start:
            row = int(min([*bad[:1], *order_bad[:1], len(cl) - 1]))
            seg, off = timer.log.locate((first + row) * timer_entry.WIDE_SIZE)
            raise IntegrityError(
                f"{seg.path}: offset {off}: timer-log entry {first + row} has a bad type or "
                f"commit-log position {int(cl[row])}"
            )
        last_cl = int(cl[-1])
        last_slot = int(entries["slot_ms"][-1])
        ahead += int(np.count_nonzero(entries["slot_ms"] > ckpt.done_tick_ms))
        if wheel is not None:
            keep = entries["slot_ms"] >= ckpt.done_tick_ms
            indexes = np.arange(first, first + len(entries), dtype=np.int64)
            wheel.rebuild_chunk(entries["slot_ms"][keep], indexes[keep])
    if ckpt.timer_end > ckpt.live_start:
        seg, off = commit_log.log.locate(last_cl)
        mm = seg.map()
        try:
            if last_slot < ckpt.done_tick_ms:  # finished: its inside may be punched out
                length = PREFIX.unpack_from(mm, off)[0]
            else:
                length = check(mm, off, len(mm), seg.path, off)
        except IntegrityError as exc:  # data the checkpoint vouches for, damaged since
            log.warning("%s; the record is quarantined when it is read", exc)
            return ahead
        if last_cl + length != ckpt.commit_end:
            raise IntegrityError(
                f"{seg.path}: offset {off}: last record ends at log position "
                f"{last_cl + length}, the checkpoint says {ckpt.commit_end}"
            )
    return ahead


def _unfinished_records(timer: TimerLog, ckpt: Checkpoint) -> npt.NDArray[np.int64]:
    """Commit-log positions of the live entries in ticks at or after the cursor's."""
    parts = [np.empty(0, dtype=np.int64)]
    for _, entries in timer.chunks(ckpt.live_start, ckpt.timer_end):
        keep = entries["slot_ms"] >= ckpt.done_tick_ms
        parts.append(timer_entry.positions_of(entries)[keep].astype(np.int64))
    return np.concatenate(parts)
