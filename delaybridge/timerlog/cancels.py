"""The cancel book: which pending entries are cancelled, which cancels still wait.

Memory holds one small item per *cancelled pending* message and per waiting cancel,
never one per pending message. Both live in an append-only cancel log
(``cancels-<generation>.log``), cut back to the checkpoint's end on open like the
other logs, and rewritten into the next generation when most of it is dead.

Not thread-safe: the store's owner thread calls it.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import os
from collections.abc import Iterable
from pathlib import Path

from delaybridge.durable import allocated_bytes, fsync_dir, is_no_space, pwrite_all
from delaybridge.fileformat import CURRENT_VERSIONS, HEADER_SIZE, FileHeader, FileKind
from delaybridge.timerlog.cancel_record import (
    CancelledEntry,
    CancelRecord,
    Matched,
    Resolved,
    WaitingCancel,
    decode,
    encode,
)
from delaybridge.timerlog.records import Cancel, TimerRecord

COMPACT_MIN_BYTES = 1 << 20
log = logging.getLogger(__name__)


class CancelBook:
    """Cancelled entries and waiting cancels, persisted in the cancel log."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.generation = 0
        self.applied: dict[int, int] = {}
        """timer-log index -> slot_ms of every cancelled entry not yet passed."""
        self.waiting: dict[str, list[WaitingCancel]] = {}
        self.prefixes: list[WaitingCancel] = []
        """The waiting cancels by id prefix (also in ``waiting``, under their prefix): an
        appended record is checked against each (they are rare: one per bulk cancel)."""
        self._expiry: list[tuple[int, int, WaitingCancel]] = []
        """Heap of (expires_ms, seq, item) over ``waiting``: expire() pops what is due
        instead of walking every waiting cancel at every call (a replace per schedule
        keeps tens of thousands waiting). Items no longer in ``waiting`` are skipped."""
        self._seq = itertools.count()
        self._count = 0
        self._fd = -1
        self.end = 0
        self._pending: list[bytes] = []
        self._written = 0
        """Bytes of ``_pending`` already on disk (a write that ran out of room midway)."""
        self._dirty = False
        self._old: tuple[int, Path] | None = None

    def _path(self, generation: int) -> Path:
        return self.directory / f"cancels-{generation:08d}.log"

    @property
    def path(self) -> Path:
        """The file of the current generation (the one the checkpoint names)."""
        return self._path(self.generation)

    def open(self, generation: int, end: int, done_tick_ms: int) -> None:
        """Replay the checkpointed part of the log; drop other generations' files.

        A version-1 file is read as it is and its header rewritten to the current
        version before anything is appended (the version-2 types are new ones only).
        """
        self.generation = generation
        path = self._path(generation)
        for other in self.directory.glob("cancels-*.log"):
            if other != path:
                other.unlink()
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        raw = os.pread(self._fd, HEADER_SIZE + end, 0)
        if len(raw) < HEADER_SIZE:
            pwrite_all(self._fd, FileHeader(FileKind.CANCEL_LOG, 0, 0).encode(), 0)
            os.fsync(self._fd)
            raw = os.pread(self._fd, HEADER_SIZE, 0)
        header = FileHeader.decode(raw[:HEADER_SIZE], path, FileKind.CANCEL_LOG)
        waiting_at: dict[int, WaitingCancel] = {}
        offset = HEADER_SIZE
        while offset < HEADER_SIZE + end:
            item, length = decode(raw, offset, path, offset)
            pos = offset - HEADER_SIZE
            if isinstance(item, CancelledEntry):
                if item.slot_ms >= done_tick_ms:
                    self.applied[item.index] = item.slot_ms
            elif isinstance(item, WaitingCancel):
                item.pos = pos
                waiting_at[pos] = item
            elif isinstance(item, Matched):
                if (w := waiting_at.get(item.waiting_pos)) is not None:
                    w.matched = True
            else:
                waiting_at.pop(item.waiting_pos, None)
            offset += length
        for w in waiting_at.values():
            self._track(w)
        os.ftruncate(self._fd, HEADER_SIZE + end)
        self.end = end
        if header.version < CURRENT_VERSIONS[FileKind.CANCEL_LOG]:
            log.info("%s: cancel log of version %d upgraded", path, header.version)
            pwrite_all(self._fd, FileHeader(FileKind.CANCEL_LOG, 0, 0).encode(), 0)
            os.fsync(self._fd)

    # -- changes (written at the next write_pending) ---------------------------
    def _add(self, item: CancelRecord) -> int:
        raw = encode(item)
        pos = self.end
        self._pending.append(raw)
        self.end += len(raw)
        return pos

    def apply(self, index: int, slot_ms: int) -> None:
        self.applied[index] = slot_ms
        self._add(CancelledEntry(index, slot_ms))

    def wait(self, cancel: Cancel, expires_ms: int, matched: bool) -> None:
        w = WaitingCancel(cancel, expires_ms, matched)
        w.pos = self._add(w)
        self._track(w)

    def _track(self, w: WaitingCancel) -> None:
        self.waiting.setdefault(w.cancel.id, []).append(w)
        if w.cancel.prefix:
            self.prefixes.append(w)
        heapq.heappush(self._expiry, (w.expires_ms, next(self._seq), w))
        self._count += 1

    def match(self, rec: TimerRecord) -> Cancel | None:
        """The waiting cancel that applies to ``rec`` (a message just appended), if any.
        Records the match.

        A cancel keeps waiting after a match (other messages sent before it may come);
        one without a send time (written by a version-1 store) ends at its first match,
        as it did then.
        """
        items = self.waiting.get(rec.id)
        if not items:
            return self._match_prefix(rec)
        for i, w in enumerate(items):
            if not w.cancel.applies_to(rec):
                continue
            if w.cancel.sent_ms is None:
                del items[i]
                self._count -= 1
                if not items:
                    del self.waiting[rec.id]
                self._add(Resolved(w.pos))
            elif not w.matched:
                w.matched = True
                self._add(Matched(w.pos))
            return w.cancel
        return self._match_prefix(rec)

    def _match_prefix(self, rec: TimerRecord) -> Cancel | None:
        """The waiting prefix cancel that applies to ``rec``, if any (recording the match)."""
        for w in self.prefixes:
            if w.cancel.applies_to(rec):
                if not w.matched:
                    w.matched = True
                    self._add(Matched(w.pos))
                return w.cancel
        return None

    def watches(self, id: str) -> bool:
        """May a waiting cancel apply to a record with this id (a cheap first test)?"""
        return id in self.waiting or any(id.startswith(w.cancel.id) for w in self.prefixes)

    def expire(self, now_ms: int) -> int:
        """Forget waiting cancels whose grace ended; returns how many never matched
        anything (unknown cancels; a replace that found nothing is not one, nor a prefix
        cancel: its sweep, not its wait, finds most of what it takes)."""
        unknown = 0
        heap = self._expiry
        while heap and heap[0][0] <= now_ms:
            w = heapq.heappop(heap)[2]
            items = self.waiting.get(w.cancel.id, [])
            at = next((i for i, x in enumerate(items) if x is w), None)
            if at is None:
                continue  # already gone (a version-1 cancel ended at its match)
            del items[at]
            if not items:
                del self.waiting[w.cancel.id]
            if w.cancel.prefix:
                self.prefixes.remove(w)
            self._count -= 1
            self._add(Resolved(w.pos))
            unknown += not (w.matched or w.cancel.replace or w.cancel.prefix)
        return unknown

    def forget_before(self, done_tick_ms: int) -> None:
        """Drop applied cancels of ticks that are done (their entries were skipped)."""
        stale = [i for i, t in self.applied.items() if t < done_tick_ms]
        for i in stale:
            del self.applied[i]

    def write_pending(self) -> None:
        """Write the changes made since the last call, with one syscall.

        Raises OSError if the disk is full; the changes stay pending (memory already
        holds them) and go out, at the same place, with the next call.
        """
        if self._pending:
            data = b"".join(self._pending)
            start = HEADER_SIZE + self.end - len(data)
            view = memoryview(data)
            while self._written < len(data):
                self._written += os.pwrite(self._fd, view[self._written :], start + self._written)
            self._pending.clear()
            self._written = 0
            self._dirty = True

    def write_soon(self) -> None:
        """:meth:`write_pending`, but a full disk only postpones it (to the flush)."""
        try:
            self.write_pending()
        except OSError as exc:
            if not is_no_space(exc):
                raise

    def sync(self) -> None:
        self.write_pending()
        if self._dirty:
            os.fsync(self._fd)
            self._dirty = False

    # -- compaction ----------------------------------------------------------
    def needs_compaction(self) -> bool:
        live = 40 * (len(self.applied) + self._count)
        return self.end > COMPACT_MIN_BYTES and live * 4 < self.end

    def compact(self) -> None:
        """Write the live items into the next generation's file (fsynced).

        The caller then saves a checkpoint naming the new generation, and only then
        calls :meth:`drop_old` -- so a crash in between leaves a valid pair.
        """
        self.write_pending()
        items: list[CancelRecord] = [CancelledEntry(i, t) for i, t in self.applied.items()]
        items += [w for ws in self.waiting.values() for w in ws]
        new_gen = self.generation + 1
        path = self._path(new_gen)
        chunks = [FileHeader(FileKind.CANCEL_LOG, 0, 0).encode()]
        pos = 0
        # Each waiting cancel and its place in the new file, set only once the file is
        # written: a failed compaction leaves the book as it was.
        moved: list[tuple[WaitingCancel, int]] = []
        for item in items:
            raw = encode(item)
            if isinstance(item, WaitingCancel):
                moved.append((item, pos))
            chunks.append(raw)
            pos += len(raw)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:  # a full disk leaves the current generation as it was
            pwrite_all(fd, b"".join(chunks), 0)
            os.fsync(fd)
        except OSError:
            os.close(fd)
            path.unlink()
            raise
        fsync_dir(self.directory)
        self._old = (self._fd, self._path(self.generation))
        self._fd = fd
        self.generation = new_gen
        self.end = pos
        self.waiting = {}
        self.prefixes = []
        self._expiry = []
        self._count = 0
        for w, at in moved:
            w.pos = at
            self._track(w)

    def drop_old(self) -> None:
        old = self._old
        if old is not None:
            os.close(old[0])
            old[1].unlink()
            self._old = None

    def bytes_on_disk(self) -> int:
        return allocated_bytes(self.path)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def waiting_count(self) -> int:
        return self._count

    def ids_waiting(self) -> Iterable[str]:
        return self.waiting.keys()
