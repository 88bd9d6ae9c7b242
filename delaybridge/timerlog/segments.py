"""An append-only log split into segment files, written with pwrite, read through mmap.

Positions are byte offsets in the whole log, counted from the store's first byte
ever written; a segment file ``<base:020d>.<suffix>`` holds the log from ``base``
on, after its 64-byte header. A segment is created with its full size (a sparse
file), mapped once, and sealed when the next batch does not fit; the next segment
starts exactly where the last one's data ended, so positions have no gaps and the
end of a sealed segment is the base of the next. Batches never straddle segments.

Format versions are per segment: each file's header keeps the version it was created
with, and a log whose last segment is older than this build's version
(``CURRENT_VERSIONS``) seals it at open, so everything appended from then on lands in
a new segment of the current version; nothing is rewritten (docs/storage.md).

A log of fixed-size entries may have segments of different entry sizes (the timer
log: 32-byte entries in version 1, 20-byte ones from version 2): positions then count
``unit`` bytes per entry whatever a segment stores (so a position is ``index * unit``
and file names stay what they were), and a segment's :meth:`Segment.offset` turns a
position into the file offset of its entry.

Space comes back two ways: a segment whose data lies wholly before a position is
deleted (:meth:`SegmentedLog.delete_before`), and the blocks of a segment that hold only
dead data are punched out of it (:meth:`SegmentedLog.punch_before`,
:meth:`SegmentedLog.punch`): the file keeps its size and its positions, the range reads
as zeros, and its space is the file system's again (:mod:`delaybridge.file_space`). A
segment's first block, which holds its header, is never punched. Where the file system
cannot punch holes, :attr:`SegmentedLog.holes` turns False and only deletion is left.

Not thread-safe: the store's owner thread calls it.
"""

from __future__ import annotations

import bisect
import dataclasses
import mmap
import os
from dataclasses import dataclass, field
from pathlib import Path

from delaybridge.durable import allocated_bytes, fsync_dir, is_no_space, pwrite_all
from delaybridge.errors import IntegrityError
from delaybridge.file_space import HOLES_UNSUPPORTED, block_size, punch_hole
from delaybridge.fileformat import CURRENT_VERSIONS, HEADER_SIZE, FileHeader, FileKind


@dataclass(eq=False)
class Segment:
    """One segment file: its log position, its descriptor and (lazily) its map."""

    base: int
    path: Path
    fd: int
    capacity: int
    """Log positions the file can hold (its data bytes, or entries x the log's unit)."""
    version: int = 0
    """The format version in the file's header (0: this build's)."""
    header: FileHeader | None = None
    unit: int = 0
    """Position units per entry (0: positions are the file's bytes)."""
    entry_size: int = 0
    """Bytes this file stores per entry (with ``unit``)."""
    mm: mmap.mmap | None = field(default=None, repr=False)
    punched: int = 0
    """File offset up to which the segment's dead prefix was punched by this process
    (0 after an open: punching a hole again costs a system call and nothing else)."""

    def offset(self, pos: int) -> int:
        """File offset of log position ``pos`` (which this segment holds)."""
        if self.unit:
            return HEADER_SIZE + (pos - self.base) // self.unit * self.entry_size
        return HEADER_SIZE + pos - self.base

    @property
    def file_size(self) -> int:
        return self.offset(self.base + self.capacity)

    def map(self) -> mmap.mmap:
        if self.mm is None:
            self.mm = mmap.mmap(self.fd, self.file_size, access=mmap.ACCESS_READ)
        return self.mm

    def close(self) -> None:
        if self.mm is not None:
            self.mm.close()
            self.mm = None
        os.close(self.fd)


class SegmentedLog:
    """The segment files of one log kind in one directory."""

    def __init__(
        self,
        directory: Path,
        kind: FileKind,
        suffix: str,
        entry_size: int,
        segment_bytes: int,
        *,
        unit: int = 0,
        entry_sizes: dict[int, int] | None = None,
    ) -> None:
        """``entry_size``: what this build writes; ``entry_sizes``: by format version,
        what older files hold; ``unit``: position units per entry (see the module)."""
        self.directory = directory
        self.kind = kind
        self.suffix = suffix
        self.entry_size = entry_size
        self.unit = unit
        self.entry_sizes = entry_sizes or {}
        self.segment_bytes = segment_bytes
        self.segments: list[Segment] = []
        self._bases: list[int] = []
        self.end = 0
        self._dirty: set[Segment] = set()
        self._dir_dirty = False
        self._seal_tail = False
        """The next append starts a new segment (the last one is of an older format
        version, or was sealed on purpose: :meth:`seal`)."""
        self.holes: bool | None = None
        """Can this file system punch holes? None until the first try."""

    # -- opening and recovery ------------------------------------------------
    def open(self, end: int) -> None:
        """Adopt the files on disk and cut the log back to ``end`` (the checkpoint's).

        Steps: read every header (magic, version, base = file name); delete segments
        that start at or after ``end``; check every remaining file is long enough for
        the data the checkpoint says it holds; zero what lies past ``end``.
        """
        self.directory.mkdir(parents=True, exist_ok=True)
        found = sorted(self.directory.glob(f"*.{self.suffix}"))
        for path in found:
            base = int(path.stem)
            if base >= end:  # holds nothing the checkpoint vouches for
                path.unlink()
                self._dir_dirty = True
                continue
            fd = os.open(path, os.O_RDWR)
            with os.fdopen(os.dup(fd), "rb") as f:
                header = FileHeader.decode(f.read(HEADER_SIZE), path, self.kind)
            size = os.fstat(fd).st_size
            esize = self.entry_sizes.get(header.version, self.entry_size)
            if header.base != base or header.entry_size != esize:
                os.close(fd)
                raise IntegrityError(f"{path}: offset 0: header base/entry size do not match")
            capacity = (
                (size - HEADER_SIZE) // esize * self.unit if self.unit else size - HEADER_SIZE
            )
            self.segments.append(
                Segment(base, path, fd, capacity, header.version, header, self.unit, esize)
            )
        self._bases = [s.base for s in self.segments]
        for i, seg in enumerate(self.segments):
            data_end = self.segments[i + 1].base if i + 1 < len(self.segments) else end
            if data_end - seg.base > seg.capacity:
                raise IntegrityError(
                    f"{seg.path}: offset {HEADER_SIZE + seg.capacity}: file ends before "
                    f"log position {data_end} that the checkpoint says is flushed"
                )
        if self.segments and self.segments[0].base > end:
            raise IntegrityError(f"{self.segments[0].path}: offset 0: log starts after its end")
        self.end = end
        if self.segments:
            last = self.segments[-1]
            os.ftruncate(last.fd, last.offset(end))  # drop unflushed bytes past the checkpoint
            os.ftruncate(last.fd, last.file_size)
            self._seal_tail = 0 < last.version < CURRENT_VERSIONS[self.kind]

    @property
    def start(self) -> int:
        """Lowest position still on disk."""
        return self.segments[0].base if self.segments else self.end

    # -- writing -------------------------------------------------------------
    def must_seal(self, size: int) -> bool:
        """Whether an append of ``size`` positions goes to a new segment."""
        seg = self.segments[-1] if self.segments else None
        return seg is None or self._seal_tail or self.end + size > seg.base + seg.capacity

    @property
    def tail(self) -> Segment | None:
        return self.segments[-1] if self.segments else None

    def append(self, data: bytes, size: int | None = None, new: FileHeader | None = None) -> int:
        """Write ``data`` (``size`` positions, default its length) at the end with one
        syscall; returns its position. ``new``: start a new segment with this header
        (its ``base`` is replaced by the log's end), whether or not the batch would fit.

        All or nothing: if the write fails (OSError, e.g. the disk is full) the log's end
        does not move, so the bytes that did reach the file are overwritten by the next
        append and cut off by the next open -- and their blocks are given back at once
        (:meth:`_give_back_tail`), so a refused append leaves the volume as it found it.
        """
        size = len(data) if size is None else size
        seg = self.segments[-1] if self.segments else None
        if seg is None or new is not None or self.must_seal(size):
            seg = self._new_segment(max(self.segment_bytes, size), new)
            self._seal_tail = False
        pos = self.end
        try:
            pwrite_all(seg.fd, data, seg.offset(pos))
        except OSError:
            self._give_back_tail(seg, pos + size)
            raise
        self.end = pos + size
        self._dirty.add(seg)
        return pos

    def truncate(self, end: int) -> None:
        """Take back what was appended since the log ended at ``end`` (a batch whose
        other half could not be written): the bytes stay until overwritten or cut off
        at the next open; an empty segment made for them stays, and is used next."""
        if not self.start <= end <= self.end or (self.segments and end < self.segments[-1].base):
            raise ValueError(f"{self.directory}: cannot truncate to {end} (end {self.end})")
        old, self.end = self.end, end
        if self.segments:
            self._give_back_tail(self.segments[-1], old)

    def _give_back_tail(self, seg: Segment, upto: int) -> None:
        """Punch the blocks past the log's end in ``seg`` up to position ``upto``: bytes
        of an append taken back, which nothing reads (a block holding data before the
        end stays). Best effort: without holes they wait to be overwritten."""
        unit = self.block()
        start = -(-seg.offset(self.end) // unit) * unit
        stop = -(-seg.offset(upto) // unit) * unit
        self.punch(seg, start, min(stop, seg.file_size))

    def _new_segment(self, capacity: int, header: FileHeader | None = None) -> Segment:
        tail = self.segments[-1] if self.segments else None
        if tail is not None and tail.base == self.end:  # empty (a failed write's): replace
            self.segments.pop()
            self._bases.pop()
            self._dirty.discard(tail)
            tail.close()
        path = self.directory / f"{self.end:020d}.{self.suffix}"
        if header is None:
            header = FileHeader(self.kind, self.entry_size, self.end)
        header = dataclasses.replace(header, base=self.end)
        if self.unit:
            capacity -= capacity % self.unit
        seg = Segment(self.end, path, -1, capacity, 0, header, self.unit, self.entry_size)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            pwrite_all(fd, header.encode(), 0)
            os.ftruncate(fd, seg.file_size)
        except OSError:
            os.close(fd)
            path.unlink()
            raise
        seg.fd = fd
        self.segments.append(seg)
        self._bases.append(seg.base)
        self._dir_dirty = True
        return seg

    def sync(self) -> None:
        """fsync every segment written since the last sync, then the directory."""
        for seg in self._dirty:
            os.fsync(seg.fd)
        self._dirty.clear()
        if self._dir_dirty:
            fsync_dir(self.directory)
            self._dir_dirty = False

    # -- reading -------------------------------------------------------------
    def locate(self, pos: int) -> tuple[Segment, int]:
        """The segment holding ``pos`` and the file offset of ``pos`` in it."""
        i = bisect.bisect_right(self._bases, pos) - 1
        if i < 0 or pos >= self.end:
            raise IntegrityError(
                f"{self.directory}: position {pos} is outside the log [{self.start}, {self.end})"
            )
        seg = self.segments[i]
        return seg, seg.offset(pos)

    def segment_end(self, index: int) -> int:
        """Log position where the data of ``segments[index]`` ends."""
        if index + 1 < len(self.segments):
            return self.segments[index + 1].base
        return self.end

    def release_pages(self) -> None:
        """Drop mapped pages from this process's RSS (they stay in the page cache)."""
        for seg in self.segments:
            if seg.mm is not None:
                seg.mm.madvise(mmap.MADV_DONTNEED)

    # -- giving space back ------------------------------------------------------
    def delete_before(self, pos: int) -> int:
        """Delete segments whose data lies wholly before ``pos``; never the last one."""
        removed = 0
        while len(self.segments) > 1 and self.segments[1].base <= pos:
            self._delete_first()
            removed += 1
        return removed

    def delete_all_before(self, pos: int) -> int:
        """:meth:`delete_before`, and the last segment too when ``pos`` is the log's end
        (it holds nothing live): the next append starts a new segment. For a file system
        without holes, where nothing else gives an active segment's space back."""
        removed = self.delete_before(pos)
        if self.segments and pos >= self.end and len(self.segments) == 1:
            self._delete_first()
            removed += 1
        return removed

    def _delete_first(self) -> None:
        seg = self.segments.pop(0)
        self._bases.pop(0)
        self._dirty.discard(seg)
        seg.close()
        seg.path.unlink()
        self._dir_dirty = True

    def seal(self) -> None:
        """Start the next append in a new segment, so that this one can be deleted once
        it is dead (on a file system without holes, its space comes back no other way)."""
        tail = self.tail
        if tail is not None and self.end > tail.base:
            self._seal_tail = True

    def block(self) -> int:
        """The unit of punched space: the file system's block, at least a page."""
        tail = self.tail
        return block_size(tail.fd) if tail is not None else mmap.PAGESIZE

    def punch_before(self, pos: int) -> int:
        """Punch the blocks of the segment holding ``pos`` (the last one at the log's end)
        that lie wholly before ``pos``; returns the bytes given back. The caller has made
        sure nothing before ``pos`` is read again (and that the segments before it are
        deleted: only this one's prefix is punched)."""
        if not self.segments or pos < self.start:
            return 0
        i = min(bisect.bisect_right(self._bases, pos) - 1, len(self.segments) - 1)
        seg = self.segments[i]
        unit = self.block()
        stop = seg.offset(min(pos, self.segment_end(i))) // unit * unit
        start = max(seg.punched, unit)
        if stop <= start or not self.punch(seg, start, stop):
            return 0
        seg.punched = stop
        return stop - start

    def punch(self, seg: Segment, start: int, stop: int) -> bool:
        """Punch file offsets ``[start, stop)`` of ``seg`` (block-aligned by the caller).
        False, with nothing changed, where the file system cannot (:attr:`holes` turns
        False) or has no room to (a copy-on-write file system may need some to free)."""
        if self.holes is False or stop <= start:
            return False
        try:
            punch_hole(seg.fd, start, stop - start)
        except OSError as exc:
            if exc.errno in HOLES_UNSUPPORTED:
                self.holes = False
                return False
            if is_no_space(exc):
                return False
            raise
        self.holes = True
        return True

    def bytes_on_disk(self) -> int:
        return sum(allocated_bytes(s.path) for s in self.segments)

    def close(self) -> None:
        for seg in self.segments:
            seg.close()
        self.segments.clear()
        self._bases.clear()
