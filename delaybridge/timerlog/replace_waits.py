"""Replaces waiting for an older copy: one compact table per process, shared by its stores.

Every schedule with an explicit id is applied as a *replace* to every store (DESIGN §2,
replace by id) and then waits ``cancel_grace_ms``: an older copy with its id may still
arrive from a lagging delay-topic partition, and must be taken when it does. Each store
used to keep each waiting replace as Python objects (~500 B) and two cancel-log records,
so a bulk load of explicit-id schedules held a million of them per store.

Now the cancel feed adds each replace it reads here, once per process; every store the
process holds consults the table when it appends (:meth:`IdMatcher.on_append`) and
applies a hit by the same rule as before (:func:`store_view`, ``Cancel.applies_to``).

Layout: rows in the order they were read, in chunks. The newest, open chunk is a dict by
id hash (at most ``max(CHUNK_MIN, rows / GROWTH)`` rows); a full one is sealed into numpy
columns plus one ``bytes`` holding its ids, and its hashes are merged into one sorted
index of every sealed row (``np.insert``: O(rows) once per ``rows / GROWTH`` added). So a
row costs ~50 B + its id and no Python object, and a lookup is two ``searchsorted`` calls
for a whole appended batch. A hit is confirmed on the id (``Cancel.applies_to``), so a
hash collision takes nothing. Chunks go whole, oldest first (:meth:`drop`, called by the
feed at every poll), once no store can need them: read more than ``keep_ms`` ago (the
feed's window for stores opened later, ``bridge/cancels/feed.py``), and past the grace of
every store opened since (:meth:`attach`).

A row waits in a store opened at ``O`` while ``now < max(read, O) + grace`` and
``read >= O - keep``: the grace runs from when the replace was read, or for a store
opened later (a partition moving in) from its opening, as when each store kept its own.

Nothing goes to disk: after a restart the feed reads the cancel topic again from the
first replace read in the last ``keep_ms`` (``cancel-feed.json``, ``replay_from``).

Not thread-safe: the owner thread of the process's stores and feed calls it.
"""

from __future__ import annotations

import zlib
from collections import deque
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from delaybridge.timerlog.records import Cancel

CHUNK_MIN = 4096
GROWTH = 64
K = TypeVar("K")
Origin = tuple[str, int]
"""A delay-topic partition: (topic, partition)."""
Row = tuple[int, int, int, int, int, int, bytes, bool]
"""hash, read_ms, sent_ms, offset (-1: none), origin (-1: none), topic, id, replayed."""


@dataclass(frozen=True, slots=True)
class WaitingReplace:
    """A replace waiting for an older copy of its id, as read from the cancel topic.

    Not yet a :class:`~delaybridge.timerlog.records.Cancel`: how it applies depends on
    the store (:meth:`as_cancel`)."""

    id: str
    topic: str
    sent_ms: int
    origin: Origin | None
    """The delay-topic partition the schedule was sent to."""
    offset: int | None
    """Its offset there."""
    read_ms: int

    def as_cancel(self, own: Origin) -> Cancel:
        """The replace as the store of partition ``own`` applies it (:func:`store_view`)."""
        sent, offset = store_view(self.sent_ms, self.origin, self.offset, own)
        return Cancel(self.id, self.topic, sent, offset, True)


def store_view(
    sent_ms: int, origin: Origin | None, offset: int | None, own: Origin
) -> tuple[int, int | None]:
    """The replace's (sent_ms, offset) as the store of partition ``own`` applies it: in
    its own partition with its offset (a tie goes by offset); on a tie across partitions
    it wins only against a smaller ``(topic, partition)`` than its origin, so that of two
    schedules sent in one millisecond exactly one survives (``bridge/cancels/requests.py``)."""
    if origin == own:
        return sent_ms, offset
    if origin is not None and own > origin:
        return sent_ms - 1, None  # takes what was sent strictly before it
    return sent_ms, None


class _Sealed:
    """A full chunk: its rows' columns, in the order they were read."""

    __slots__ = (
        "id_at",
        "id_len",
        "ids",
        "max_read",
        "offset",
        "origin",
        "read",
        "replayed",
        "sent",
        "seq",
        "topic",
    )

    def __init__(self, rows: list[Row], seq: int) -> None:
        cols = list(zip(*rows, strict=True))
        self.seq = seq
        self.read = np.array(cols[1], np.int64)
        self.sent = np.array(cols[2], np.int64)
        self.offset = np.array(cols[3], np.int64)
        self.origin = np.array(cols[4], np.int32)
        self.topic = np.array(cols[5], np.int32)
        lens = np.array([len(b) for b in cols[6]], np.int64)
        self.id_at = (np.cumsum(lens) - lens).astype(np.uint32)
        self.id_len = lens.astype(np.uint16)
        self.ids = b"".join(cols[6])
        self.replayed = np.array(cols[7], np.bool_)
        self.max_read = int(self.read.max())

    def __len__(self) -> int:
        return len(self.read)


class ReplaceWaits:
    """The waiting replaces of one process (see the module docstring)."""

    def __init__(self, grace_ms: int, keep_ms: int) -> None:
        self.grace_ms = grace_ms
        self.keep_ms = max(keep_ms, grace_ms)
        self._topics: dict[str, int] = {}
        self._origins: dict[Origin, int] = {}
        self._names: list[str] = []
        self._partitions: list[Origin] = []
        self._open: dict[int, list[Row]] = {}
        self._open_rows: list[Row] = []
        self._open_max_read = 0
        self._sealed: deque[_Sealed] = deque()
        self._sealed_rows = 0
        self._hash = np.zeros(0, np.uint32)
        self._ref = np.zeros(0, np.uint64)
        """The index of every sealed row: id hashes sorted, and (chunk seq << 32) | row."""
        self._pins: list[tuple[int, int]] = []
        """(read from, until): rows read since ``from`` stay until ``until`` (a store
        opened later waits its grace from its opening)."""

    def __len__(self) -> int:
        """Rows held (some may be past every store's grace, not dropped yet)."""
        return self._sealed_rows + len(self._open_rows)

    def attach(self, opened_ms: int) -> None:
        """A store opened at ``opened_ms`` waits on what was read up to ``keep_ms``
        before, for its grace: keep those rows until then."""
        self._pins = [p for p in self._pins if p[1] > opened_ms]
        self._pins.append((opened_ms - self.keep_ms, opened_ms + self.grace_ms))

    def add(
        self,
        id: str,
        topic: str,
        sent_ms: int,
        origin: Origin | None,
        offset: int | None,
        read_ms: int,
        replayed: bool = False,
    ) -> None:
        """A replace read from the cancel topic at ``read_ms``; ``replayed``: read again
        after a restart (it waits, but is not applied to stores opened later:
        :meth:`recent`)."""
        idb = id.encode()
        h = zlib.crc32(idb)
        row = (
            h,
            read_ms,
            sent_ms,
            -1 if offset is None else offset,
            -1 if origin is None else self._intern(self._origins, self._partitions, origin),
            self._intern(self._topics, self._names, topic),
            idb,
            replayed,
        )
        self._open.setdefault(h, []).append(row)
        self._open_rows.append(row)
        self._open_max_read = max(self._open_max_read, read_ms)
        if len(self._open_rows) >= max(CHUNK_MIN, self._sealed_rows // GROWTH):
            self._seal()
            self.drop(read_ms)

    def _seal(self) -> None:
        """The open chunk into columns, its hashes merged into the index (O(rows held),
        once per ``rows / GROWTH`` added: amortized ``GROWTH`` copies per row)."""
        rows = self._open_rows
        seq = self._sealed[-1].seq + 1 if self._sealed else 0
        self._sealed.append(_Sealed(rows, seq))
        self._sealed_rows += len(rows)
        h = np.fromiter((r[0] for r in rows), np.uint32, len(rows))
        order = np.argsort(h, kind="stable")
        at = np.searchsorted(self._hash, h[order], "right")  # older rows first
        self._hash = np.insert(self._hash, at, h[order])
        self._ref = np.insert(
            self._ref, at, (np.uint64(seq) << np.uint64(32)) | order.astype(np.uint64)
        )
        self._open = {}
        self._open_rows = []
        self._open_max_read = 0

    @staticmethod
    def _intern(index: dict[K, int], names: list[K], key: K) -> int:
        at = index.get(key)
        if at is None:
            at = index[key] = len(names)
            names.append(key)
        return at

    def drop(self, now_ms: int) -> None:
        """Forget chunks no store can need any more (oldest first)."""
        self._pins = [p for p in self._pins if p[1] > now_ms]
        dropped = False
        while self._sealed and self._done(self._sealed[0].max_read, now_ms):
            self._sealed_rows -= len(self._sealed.popleft())
            dropped = True
        if dropped:
            first = self._sealed[0].seq if self._sealed else 1 << 31
            keep = self._ref >= (np.uint64(first) << np.uint64(32))
            self._hash, self._ref = self._hash[keep], self._ref[keep]
        if self._open_rows and not self._sealed and self._done(self._open_max_read, now_ms):
            self._open = {}
            self._open_rows = []
            self._open_max_read = 0

    def _done(self, max_read: int, now_ms: int) -> bool:
        if max_read + self.keep_ms > now_ms:
            return False
        return not any(max_read >= start and now_ms < until for start, until in self._pins)

    def _live(self, read_ms: int, now_ms: int, opened_ms: int) -> bool:
        return (
            read_ms >= opened_ms - self.keep_ms and now_ms < max(read_ms, opened_ms) + self.grace_ms
        )

    def lookup(
        self, hashes: npt.NDArray[np.uint32], now_ms: int, opened_ms: int
    ) -> dict[int, list[WaitingReplace]]:
        """Rows whose id hash is one of ``hashes`` (an appended batch's) and that still
        wait in a store opened at ``opened_ms``: batch index -> rows (not yet confirmed
        on the id: ``Cancel.applies_to`` does that)."""
        out: dict[int, list[WaitingReplace]] = {}
        if not len(self) or not len(hashes):
            return out
        for j, h in enumerate(hashes.tolist()):
            for row in self._open.get(h, ()):
                if self._live(row[1], now_ms, opened_ms):
                    out.setdefault(j, []).append(self._wait(row))
        if not self._sealed:
            return out
        lo = np.searchsorted(self._hash, hashes, "left")
        hi = np.searchsorted(self._hash, hashes, "right")
        first = self._sealed[0].seq
        for j in np.flatnonzero(hi > lo).tolist():
            for ref in self._ref[int(lo[j]) : int(hi[j])].tolist():
                ch, r = self._sealed[(ref >> 32) - first], ref & 0xFFFFFFFF
                if self._live(int(ch.read[r]), now_ms, opened_ms):
                    out.setdefault(j, []).append(self._sealed_wait(ch, r))
        return out

    def recent(self, now_ms: int) -> list[WaitingReplace]:
        """Every row read in the last ``keep_ms``, oldest chunk first: what a store
        opened now must apply at once. Not replayed rows: they were applied, before the
        restart, to the stores held then, which reopen from their flushed state (as
        before the table, a restart forgets what stores opened later would have got)."""
        since = now_ms - self.keep_ms
        out = [
            self._sealed_wait(ch, r)
            for ch in self._sealed
            if ch.max_read >= since
            for r in np.flatnonzero((ch.read >= since) & ~ch.replayed).tolist()
        ]
        return out + [self._wait(row) for row in self._open_rows if row[1] >= since and not row[7]]

    def _wait(self, row: Row) -> WaitingReplace:
        _, read, sent, offset, origin, topic, idb, _ = row
        return WaitingReplace(
            idb.decode(),
            self._names[topic],
            sent,
            self._partitions[origin] if origin >= 0 else None,
            offset if offset >= 0 else None,
            read,
        )

    def _sealed_wait(self, ch: _Sealed, r: int) -> WaitingReplace:
        at = int(ch.id_at[r])
        idb = ch.ids[at : at + int(ch.id_len[r])]
        row = (
            0,
            int(ch.read[r]),
            int(ch.sent[r]),
            int(ch.offset[r]),
            int(ch.origin[r]),
            int(ch.topic[r]),
            idb,
            bool(ch.replayed[r]),
        )
        return self._wait(row)
