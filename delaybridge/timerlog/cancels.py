"""The cancel book: which pending entries are cancelled, which cancels still wait.

Memory holds one small item per *cancelled pending* message and per waiting cancel,
never one per pending message. Both live in an append-only cancel log
(``cancels-<generation>.log``), cut back to the checkpoint's end on open like the
other logs, and rewritten into the next generation when most of it is dead.

Not thread-safe: the store's owner thread calls it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from delaybridge.durable import allocated_bytes, fsync_dir
from delaybridge.fileformat import HEADER_SIZE, FileHeader, FileKind
from delaybridge.timerlog import cancel_codec as codec

COMPACT_MIN_BYTES = 1 << 20


@dataclass(slots=True)
class WaitingCancel:
    """A cancel that matched nothing yet; it waits ``cancel_grace_ms`` for its message."""

    topic: str | None
    expires_ms: int
    pos: int


class CancelBook:
    """Cancelled entries and waiting cancels, persisted in the cancel log."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.generation = 0
        self.applied: dict[int, int] = {}
        """timer-log index -> slot_ms of every cancelled entry not yet passed."""
        self.waiting: dict[str, list[WaitingCancel]] = {}
        self._fd = -1
        self.end = 0
        self._pending: list[bytes] = []
        self._dirty = False
        self._old: tuple[int, Path] | None = None

    def _path(self, generation: int) -> Path:
        return self.directory / f"cancels-{generation:08d}.log"

    @property
    def path(self) -> Path:
        """The file of the current generation (the one the checkpoint names)."""
        return self._path(self.generation)

    def open(self, generation: int, end: int, done_tick_ms: int) -> None:
        """Replay the checkpointed part of the log; drop other generations' files."""
        self.generation = generation
        path = self._path(generation)
        for other in self.directory.glob("cancels-*.log"):
            if other != path:
                other.unlink()
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        raw = os.pread(self._fd, HEADER_SIZE + end, 0)
        if len(raw) < HEADER_SIZE:
            os.pwrite(self._fd, FileHeader(FileKind.CANCEL_LOG, 0, 0).encode(), 0)
            os.fsync(self._fd)
            raw = os.pread(self._fd, HEADER_SIZE, 0)
        FileHeader.decode(raw[:HEADER_SIZE], path, FileKind.CANCEL_LOG)
        waiting_at: dict[int, codec.Waiting] = {}
        offset = HEADER_SIZE
        while offset < HEADER_SIZE + end:
            item, length = codec.decode(raw, offset, path, offset)
            pos = offset - HEADER_SIZE
            if isinstance(item, codec.Applied):
                if item.slot_ms >= done_tick_ms:
                    self.applied[item.index] = item.slot_ms
            elif isinstance(item, codec.Waiting):
                waiting_at[pos] = item
            else:
                waiting_at.pop(item.waiting_pos, None)
            offset += length
        for pos, w in waiting_at.items():
            self.waiting.setdefault(w.id, []).append(WaitingCancel(w.topic, w.expires_ms, pos))
        os.ftruncate(self._fd, HEADER_SIZE + end)
        self.end = end

    # -- changes (written at the next write_pending) ---------------------------
    def _add(self, item: codec.Decoded) -> int:
        raw = codec.encode(item)
        pos = self.end
        self._pending.append(raw)
        self.end += len(raw)
        return pos

    def apply(self, index: int, slot_ms: int) -> None:
        self.applied[index] = slot_ms
        self._add(codec.Applied(index, slot_ms))

    def wait(self, id: str, topic: str | None, expires_ms: int) -> None:
        pos = self._add(codec.Waiting(expires_ms, id, topic))
        self.waiting.setdefault(id, []).append(WaitingCancel(topic, expires_ms, pos))

    def take_waiting(self, id: str, topic: str) -> bool:
        """Consume a waiting cancel matching a newly appended message, if any."""
        items = self.waiting.get(id)
        if not items:
            return False
        for i, w in enumerate(items):
            if w.topic is None or w.topic == topic:
                del items[i]
                if not items:
                    del self.waiting[id]
                self._add(codec.Resolved(w.pos))
                return True
        return False

    def expire(self, now_ms: int) -> int:
        """Forget waiting cancels whose grace ended; returns how many (unknown cancels)."""
        if not self.waiting:
            return 0
        expired = 0
        for id in list(self.waiting):
            items = self.waiting[id]
            keep = [w for w in items if w.expires_ms > now_ms]
            for w in items:
                if w.expires_ms <= now_ms:
                    self._add(codec.Resolved(w.pos))
                    expired += 1
            if keep:
                self.waiting[id] = keep
            else:
                del self.waiting[id]
        return expired

    def forget_before(self, done_tick_ms: int) -> None:
        """Drop applied cancels of ticks that are done (their entries were skipped)."""
        stale = [i for i, t in self.applied.items() if t < done_tick_ms]
        for i in stale:
            del self.applied[i]

    def write_pending(self) -> None:
        """Write the changes made since the last call, with one syscall."""
        if self._pending:
            data = b"".join(self._pending)
            os.pwrite(self._fd, data, HEADER_SIZE + self.end - len(data))
            self._pending.clear()
            self._dirty = True

    def sync(self) -> None:
        self.write_pending()
        if self._dirty:
            os.fsync(self._fd)
            self._dirty = False

    # -- compaction ----------------------------------------------------------
    def needs_compaction(self) -> bool:
        live = 40 * (len(self.applied) + sum(len(v) for v in self.waiting.values()))
        return self.end > COMPACT_MIN_BYTES and live * 4 < self.end

    def compact(self) -> None:
        """Write the live items into the next generation's file (fsynced).

        The caller then saves a checkpoint naming the new generation, and only then
        calls :meth:`drop_old` -- so a crash in between leaves a valid pair.
        """
        self.write_pending()
        items: list[codec.Decoded] = [codec.Applied(i, t) for i, t in self.applied.items()]
        flat = [(id, w) for id, ws in self.waiting.items() for w in ws]
        items += [codec.Waiting(w.expires_ms, id, w.topic) for id, w in flat]
        new_gen = self.generation + 1
        path = self._path(new_gen)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        chunks = [FileHeader(FileKind.CANCEL_LOG, 0, 0).encode()]
        pos = 0
        self.waiting = {}
        for item in items:
            raw = codec.encode(item)
            if isinstance(item, codec.Waiting):
                self.waiting.setdefault(item.id, []).append(
                    WaitingCancel(item.topic, item.expires_ms, pos)
                )
            chunks.append(raw)
            pos += len(raw)
        os.pwrite(fd, b"".join(chunks), 0)
        os.fsync(fd)
        fsync_dir(self.directory)
        self._old = (self._fd, self._path(self.generation))
        self._fd, self.generation, self.end = fd, new_gen, pos

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
        return sum(len(v) for v in self.waiting.values())

    def ids_waiting(self) -> Iterable[str]:
        return self.waiting.keys()
