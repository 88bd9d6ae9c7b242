"""A store whose checkpoint is gone: a checkpoint worked out from the segments themselves.

Without a checkpoint, recovery used to start from empty logs and so delete every
segment the store had: every pending message gone, silently. Now, when the checkpoint
is missing or unreadable but segments exist, :func:`rescue` rebuilds one:

1. **Timer log**: the entries of every segment, in order, from the first whose record
   is still in the commit log (older ones were passed, their records deleted or
   punched out). A sealed segment's data must be whole (its end is the next segment's
   base); the last one's ends at its first all-zero entry, or at a torn tail (a bad
   entry followed by no good one). A bad entry anywhere else is damage this cannot
   repair: IntegrityError naming file and offset, and nothing is deleted. Entries must
   point to increasing commit-log positions. The first segment's dead prefix may have
   been punched out (:mod:`reclaim`): a hole between its header's block and more data
   is such a prefix, and its entries are passed.
2. **Commit log**: the record of the last entry must check; entries at the tail whose
   records do not (a batch torn by the crash) are dropped. ``commit_end`` is where
   that record ends. A record that lies partly in a hole was finished and punched out
   (:mod:`reclaim`): it is passed, never read through a map (on a full tmpfs a read
   of a hole through a map dies of SIGBUS), and its source offset not counted.
3. **Delivery cursor**: unknown. Everything a window before the newest entry's tick is
   treated as not yet delivered (so nothing pending is lost, and the live entries fit
   the wheel's window): messages delivered in that span go out again -- at least once,
   each carrying its ``delay-id``. ``last_source_offset`` is the highest source offset
   of a record that checks (records at or below it are not ingested again).
   A ROLL entry already rolled (its copy is in the log: the same record bytes at a
   later entry) is skipped like a cancelled one, so it is not rolled -- and delivered
   -- a second time, and a cancel applied to its copy holds.
4. **Cancels**: the newest cancel log, read up to its first bad record.
5. Pending counts are recounted; totals restart at 0; the owner's marks are lost.

Recovery then opens the store from this checkpoint and rebuilds the wheel. Loud: one
error-level log line says what was found and what may repeat.
"""

from __future__ import annotations

import bisect
import logging
import mmap
import os
from collections import Counter
from pathlib import Path
from typing import NamedTuple

import numpy as np

from delaybridge.errors import ConfigError, IntegrityError
from delaybridge.file_space import data_ranges
from delaybridge.fileformat import HEADER_SIZE, FileHeader, FileKind
from delaybridge.timerlog import (
    commit_codec,
    commit_record,
    timer_entry,
)
from delaybridge.timerlog.cancel_record import CancelledEntry, decode
from delaybridge.timerlog.checkpoint import Checkpoint
from delaybridge.timerlog.settings import StoreSettings

log = logging.getLogger(__name__)
ENTRY = timer_entry.WIDE_SIZE


class Rescued(NamedTuple):
    checkpoint: Checkpoint
    superseded: dict[int, int]
    """Timer-log index -> tick of entries already rolled: to skip (as if cancelled)."""


def rescue(directory: Path, settings: StoreSettings) -> Rescued | None:
    """A checkpoint for the segments in ``directory``; None if there are none."""
    timers = _segments(directory / "timerlog", "tlog", FileKind.TIMER_LOG)
    commits = [
        (h.base, p) for h, p in _segments(directory / "commitlog", "clog", FileKind.COMMIT_LOG)
    ]
    if not timers:
        return None
    entries, first = _entries(timers)
    slot = entries["slot_ms"]
    if len(entries) and bool((slot % settings.tick_ms != 0).any()):
        raise ConfigError(
            f"store setting tick_ms={settings.tick_ms} does not match the entries in "
            f"{directory / 'timerlog'}; use the old value or a new data directory"
        )
    files = _CommitFiles(commits)
    try:
        found = _checkpoint(directory, settings, entries, first, files)
    finally:
        files.close()
    ckpt = found.checkpoint
    log.error(
        "%s: no usable checkpoint; recovered %d timer-log entries (%d pending) and "
        "commit log up to %d from the segments. Deliveries due since %d may repeat.",
        directory,
        ckpt.timer_end - ckpt.live_start,
        sum(ckpt.pending_by_topic.values()),
        ckpt.commit_end,
        ckpt.done_tick_ms,
    )
    return found


def _segments(directory: Path, suffix: str, kind: FileKind) -> list[tuple[FileHeader, Path]]:
    out = []
    for path in sorted(directory.glob(f"*.{suffix}")):
        with path.open("rb") as f:
            header = FileHeader.decode(f.read(HEADER_SIZE), path, kind)
        out.append((header, path))
    return out


class _CommitFiles:
    """The commit-log segments as the rescue reads them: mapped, with where they hold
    data, so that no hole is ever read through a map."""

    def __init__(self, commits: list[tuple[int, Path]]) -> None:
        self.bases = [base for base, _ in commits]
        self.paths = [path for _, path in commits]
        self.fds: list[int] = []
        self.maps: list[mmap.mmap] = []
        self._starts: list[int] = []
        self._ends: list[int] = []
        for base, path in commits:
            fd = os.open(path, os.O_RDONLY)
            self.fds.append(fd)
            self.maps.append(mmap.mmap(fd, 0, access=mmap.ACCESS_READ))
            size = os.fstat(fd).st_size
            for a, b in data_ranges(fd, 0, size):  # as log positions
                self._starts.append(base + max(a, HEADER_SIZE) - HEADER_SIZE)
                self._ends.append(base + b - HEADER_SIZE)

    def in_data(self, pos: int, end: int) -> bool:
        """Do ``[pos, end)`` lie wholly in data (no byte of them in a hole)?"""
        j = bisect.bisect_right(self._starts, pos) - 1
        return j >= 0 and end <= self._ends[j]

    def where(self, pos: int) -> tuple[int, int] | None:
        """(segment number, file offset) of log position ``pos``; None before the first."""
        i = bisect.bisect_right(self.bases, pos) - 1
        return None if i < 0 else (i, HEADER_SIZE + pos - self.bases[i])

    def head_length(self, pos: int) -> int | None:
        """The length a record at ``pos`` says it has (read with ``pread``)."""
        at = self.where(pos)
        if at is None or not self.in_data(pos, pos + commit_record.PREFIX.size):
            return None
        i, off = at
        raw = os.pread(self.fds[i], commit_record.PREFIX.size, off)
        if len(raw) < commit_record.PREFIX.size:
            return None
        length: int = commit_record.PREFIX.unpack(raw)[0]
        return length

    def check(self, pos: int) -> int | None:
        """The length of the record at ``pos`` if it is in data and checks, else None."""
        size = self.head_length(pos)
        at = self.where(pos)
        if size is None or at is None or not self.in_data(pos, pos + max(size, 1)):
            return None
        i, off = at
        try:
            return commit_record.check(self.maps[i], off, len(self.maps[i]), self.paths[i], off)
        except IntegrityError:
            return None

    def close(self) -> None:
        for mm in self.maps:
            mm.close()
        for fd in self.fds:
            os.close(fd)


def _entries(timers: list[tuple[FileHeader, Path]]) -> tuple[timer_entry.Entries, int]:
    """Step 1: the good entries from the first segment's base on, and its index."""
    parts = []
    first = timers[0][0].base // ENTRY
    expect = timers[0][0].base
    for i, (header, path) in enumerate(timers):
        base = header.base
        if base != expect:
            raise IntegrityError(f"{path}: offset 0: segment starts at {base}, not {expect}")
        v1 = header.version == 1
        size = ENTRY if v1 else timer_entry.COMPACT_SIZE
        data = np.fromfile(
            path, timer_entry.DTYPE if v1 else timer_entry.COMPACT_DTYPE, offset=HEADER_SIZE
        )
        last = i + 1 == len(timers)
        n = len(data) if last else (timers[i + 1][0].base - base) // ENTRY
        if n > len(data):
            raise IntegrityError(f"{path}: offset {path.stat().st_size}: segment cut short")
        data = data[:n]
        if i == 0:  # its dead prefix may have been punched out: those entries are passed
            skip = min(_punched_prefix(path, size), n)
            data, n, base = data[skip:], n - skip, base + skip * ENTRY
            first += skip
        bad = timer_entry.bad_wide_rows(data) if v1 else timer_entry.bad_rows(data)
        if last:
            zero = np.flatnonzero(~data.view(np.uint8).reshape(-1, size).any(axis=1))
            n = int(zero[0]) if len(zero) else n
            bad = bad[bad < n]
            if len(bad):  # a torn tail, unless a good entry follows
                good_after = np.setdiff1d(np.arange(int(bad[0]), n), bad)
                if len(good_after):
                    bad = bad[:1]
                else:
                    n, bad = int(bad[0]), bad[:0]
        if len(bad):
            raise IntegrityError(
                f"{path}: offset {HEADER_SIZE + int(bad[0]) * size}: timer-log entry "
                f"{base // ENTRY + int(bad[0])} is damaged; without a checkpoint the store "
                "cannot tell what follows it"
            )
        if not v1:
            at = np.arange(base // ENTRY, base // ENTRY + n, dtype=np.int64)
            bases = timer_entry.Bases(header.tick_ms, header.slots, header.stamp)
            data = timer_entry.decode(data[:n], at, bases)
        parts.append(data[:n])
        expect = base + n * ENTRY
    entries = np.concatenate(parts) if parts else np.empty(0, dtype=timer_entry.DTYPE)
    cl = timer_entry.positions_of(entries)
    if len(cl) > 1 and bool((np.diff(cl) <= 0).any()):
        row = int(np.flatnonzero(np.diff(cl) <= 0)[0]) + 1
        raise IntegrityError(f"{timers[0][1].parent}: entry {first + row}: positions go back")
    return entries, first


def _punched_prefix(path: Path, entry_size: int) -> int:
    """How many entries at the start of a timer segment were punched out (:mod:`reclaim`):
    those before the data that follows a hole after the header's block. A hole with no
    data after it is the unwritten rest of the segment, not a punched prefix."""
    fd = os.open(path, os.O_RDONLY)
    try:
        ranges = data_ranges(fd, 0, os.fstat(fd).st_size)
    finally:
        os.close(fd)
    if len(ranges) < 2 or ranges[0][0] != 0:
        return 0
    return -(-(ranges[1][0] - HEADER_SIZE) // entry_size)


def _checkpoint(
    directory: Path,
    settings: StoreSettings,
    entries: timer_entry.Entries,
    first: int,
    files: _CommitFiles,
) -> Rescued:
    bases = files.bases
    # Entries whose records were deleted (passed, the segment gone) or whose record's
    # start was punched out with a dead prefix are not live.
    positions: list[int] = timer_entry.positions_of(entries).tolist()
    gone = int(np.searchsorted(positions, bases[0] if bases else 1 << 62))
    while gone < len(positions) and not files.in_data(positions[gone], positions[gone] + 1):
        gone += 1
    entries, first = entries[gone:], first + gone
    cl = positions[gone:]

    def end_of(row: int) -> int | None:
        """Where the record of ``row`` ends (the next record starts), from its neighbour
        or, for the last, from its own length."""
        if row + 1 < len(cl):
            return cl[row + 1]
        size = files.head_length(cl[row])
        return None if size is None else cl[row] + size

    def punched(row: int) -> bool:
        """Does the record of ``row`` lie partly in a hole (finished, punched out)?"""
        end = end_of(row)
        return end is not None and not files.in_data(cl[row], end)

    n = len(cl)  # step 2: drop a torn tail
    while n and not punched(n - 1) and files.check(cl[n - 1]) is None:
        n -= 1
    entries = entries[:n]
    if n:
        end = end_of(n - 1) if punched(n - 1) else cl[n - 1] + (files.check(cl[n - 1]) or 0)
    else:
        end = bases[0] if bases else 0
    assert end is not None
    generation, cancel_end, applied = _cancels(directory)
    slot = entries["slot_ms"]
    done = (int(slot.max()) - settings.window_ms + settings.tick_ms) if n else 0  # step 3
    done = max(done, int(slot.min()) - settings.tick_ms) if n else done
    pending: Counter[str] = Counter()
    last_offset = -1
    latest: dict[tuple[int, int, int], int] = {}  # a record's (id hash, crc, length) -> row
    topics: dict[int, str] = {}
    hashes = entries["id_hash"].tolist()
    finished: set[int] = set()
    for row, pos in enumerate(cl[:n]):
        if punched(row):
            finished.add(first + row)  # passed: delivered, cancelled or rolled
            continue
        size = files.check(pos)
        at = files.where(pos)
        if size is None or at is None:
            continue  # damaged: quarantined when read
        i, off = at
        mm = files.maps[i]
        rec = commit_codec.decode(mm, off, directory)
        last_offset = max(last_offset, rec.source_offset)
        latest[(hashes[row], commit_record.PREFIX.unpack_from(mm, off)[1], size)] = row
        topics[row] = rec.target_topic
    # A roll copies a record verbatim: all but the last entry of the same bytes were
    # rolled already (re-rolling them would deliver twice, and miss a cancel applied to
    # the copy). They are skipped like cancelled entries.
    kept = set(latest.values())
    superseded = {
        first + row: slot_ms
        for row, slot_ms in enumerate(slot.tolist())
        if ((row in topics and row not in kept) or first + row in finished) and slot_ms >= done
    }
    for row, topic in topics.items():
        if slot[row] >= done and first + row not in applied and first + row not in superseded:
            pending[topic] += 1
    ckpt = Checkpoint(
        settings.tick_ms,
        settings.wheel_slots,
        commit_end=end,
        timer_end=first + n,
        live_start=first,
        done_tick_ms=done,
        cancel_generation=generation,
        cancel_end=cancel_end,
        last_source_offset=last_offset,
        pending_by_topic=dict(pending),
    )
    return Rescued(ckpt, superseded)


def _cancels(directory: Path) -> tuple[int, int, set[int]]:
    """Step 4: (generation, good length, applied entry indexes) of the newest cancel log."""
    logs = sorted(directory.glob("cancels-*.log"))
    if not logs:
        return 0, 0, set()
    path = logs[-1]
    generation = int(path.stem.split("-")[1])
    raw = path.read_bytes()
    applied: set[int] = set()
    offset = HEADER_SIZE
    try:
        FileHeader.decode(raw[:HEADER_SIZE], path, FileKind.CANCEL_LOG)
    except IntegrityError as exc:  # a new generation replaces it (its cancels are lost)
        log.error("%s; its cancels are lost", exc)
        return generation + 1, 0, applied
    try:
        while offset < len(raw):
            item, size = decode(raw, offset, path, offset)
            if isinstance(item, CancelledEntry):
                applied.add(item.index)
            offset += size
    except IntegrityError:
        pass  # the end of what was written (or damage): keep what came before
    return generation, offset - HEADER_SIZE, applied
