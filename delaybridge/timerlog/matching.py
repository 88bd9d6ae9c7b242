"""Cancel and lookup: finding pending messages by id, through the timer log's id index.

Every timer-log entry carries a 32-bit hash of its message's id. A query hashes all
its ids and looks them up in the id index (:meth:`TimerLog.find_ids`, :mod:`id_index`:
a binary search per sorted run of 65,536 entries, on disk beside each segment, plus
the run still filling, sorted in memory), and confirms each hit: not cancelled
already, still ahead of the read position (:meth:`Reader.is_pending`), and its
CRC-checked commit-log record is one the cancel applies to (:meth:`Cancel.applies_to`:
the id, the target topic when the cancel names one, and sent before the cancel).
Cost: ~15 us per run (~150 runs at 10M pending) plus a commit-log read per hit; no
pass over the pending messages.

A cancel that knows when it was sent then waits in the cancel book (:mod:`cancels`)
for ``cancel_grace_ms``, matched or not: a message sent before it may still arrive
from another delay-topic partition, and :meth:`IdMatcher.on_append` cancels it then.
Only messages sent before it, so the wait cannot hit a message re-sent after it.

Not thread-safe: the store's owner thread calls it.
"""

from __future__ import annotations

import logging
import zlib
from collections import Counter
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import numpy.typing as npt

from delaybridge.errors import IntegrityError
from delaybridge.timerlog import timer_entry
from delaybridge.timerlog.cancels import CancelBook
from delaybridge.timerlog.commit_log import CommitLog
from delaybridge.timerlog.prefix_sweep import Count, Sweeps
from delaybridge.timerlog.reader import Reader
from delaybridge.timerlog.records import Cancel, DamagedRecord, DueRecord, TimerRecord
from delaybridge.timerlog.replace_waits import Origin, ReplaceWaits
from delaybridge.timerlog.stats import StoreCounters
from delaybridge.timerlog.timer_log import IdHit, TimerLog

log = logging.getLogger(__name__)
Pending = tuple[int, bytes]
"""A pending message: its commit-log position and its record."""


class IdMatcher:
    """Cancels and looks up pending messages of one store by id.

    Shares the store's ``counters`` and ``pending`` (per target topic) and updates
    them as cancels match, wait and expire.
    """

    def __init__(
        self,
        timer: TimerLog,
        commit_log: CommitLog,
        reader: Reader,
        cancels: CancelBook,
        grace_ms: int,
        counters: StoreCounters,
        pending: Counter[str],
    ) -> None:
        self.timer = timer
        self.commit_log = commit_log
        self.reader = reader
        self.cancels = cancels
        self.grace_ms = grace_ms
        self.counters = counters
        self.pending = pending
        self.removed: list[TimerRecord] = []
        """Records removed by cancels since the store's owner last took them."""
        self.shared: ReplaceWaits | None = None
        """Where replaces wait instead of the cancel book (:meth:`share`)."""
        self.own: Origin = ("", -1)
        self.opened_ms = 0
        self.sweeps = Sweeps(timer, commit_log, reader, cancels)
        """Cancels by id prefix walking the timer log (:mod:`prefix_sweep`)."""

    def share(self, waits: ReplaceWaits, own: Origin, now_ms: int) -> None:
        """Replaces wait in the process's ``waits`` (:mod:`replace_waits`), which the
        caller fills, not in the cancel book; ``own``: this store's delay partition."""
        self.shared = waits
        self.own = own
        self.opened_ms = now_ms
        waits.attach(now_ms)

    def watching(self) -> bool:
        """Is there a waiting cancel or replace that an appended message may meet?"""
        return bool(self.cancels.waiting) or bool(self.shared is not None and len(self.shared))

    def cancel(self, cancels: Sequence[Cancel], now_ms: int, live_start: int) -> list[bool]:
        """See :meth:`TimerStore.cancel`; ``live_start``: the first live timer entry."""
        self.expire(now_ms)
        result = [False] * len(cancels)
        by_id = {zlib.crc32(c.id.encode()) for c in cancels if not c.prefix}
        candidates = self.timer.find_ids(live_start, by_id)
        for j, cancel in enumerate(cancels):
            if cancel.prefix:  # no index answers a prefix: a paced sweep (prefix_sweep.py)
                if self._known(cancel):
                    continue  # applied at ingest, back from the cancel topic: swept already
                self.sweeps.start(cancel, live_start)
                if cancel.sent_ms is not None and self.grace_ms > 0:
                    self.cancels.wait(cancel, now_ms + self.grace_ms, False)
                continue
            for hit in candidates.get(zlib.crc32(cancel.id.encode()), ()):
                if not self._still_pending(hit):
                    continue  # also an id that an earlier item of this call cancelled
                rec = self.read(hit.cl_pos)
                if rec is None or not cancel.applies_to(rec):
                    continue
                self._cancel(rec, hit.index, hit.slot_ms, cancel.replace)
                result[j] = True
            if cancel.replace and self.shared is not None:
                continue  # it waits in the shared table, added by whoever shares it
            if cancel.sent_ms is not None and self.grace_ms > 0:
                self.cancels.wait(cancel, now_ms + self.grace_ms, result[j])
            elif not result[j] and not cancel.replace:
                self.counters.unknown_cancels_total += 1
        self.cancels.write_soon()
        return result

    def _cancel(self, rec: TimerRecord, index: int, slot_ms: int, replace: bool) -> None:
        if index >= 0:  # -1: read already (screen), nothing left to skip
            self.cancels.apply(index, slot_ms)
        if replace:
            self.counters.replaced_total += 1
        else:
            self.counters.cancelled_total += 1
        self.pending[rec.target_topic] -= 1
        self.removed.append(rec)

    def on_append(
        self,
        records: Sequence[TimerRecord] | None,
        cl_pos: npt.NDArray[np.int64],
        first: int,
        slot: npt.NDArray[np.int64],
        hashes: npt.NDArray[np.uint32],
        now_ms: int,
    ) -> None:
        """Cancel appended messages (timer entries ``first``.., ticks ``slot``, commit-log
        positions ``cl_pos``, id hashes ``hashes``) that waiting cancels or replaces match;
        ``records`` None: read them (a damaged one is matched by nothing)."""
        read = self.read
        taken: set[int] = set()
        if self.cancels.waiting:
            watches = self.cancels.watches
            got: Sequence[TimerRecord | None] = records or [read(int(p)) for p in cl_pos]
            for j, r in enumerate(got):
                if r is not None and watches(r.id) and (how := self.cancels.match(r)):
                    self._cancel(r, first + j, int(slot[j]), how.replace)
                    taken.add(j)
        if self.shared is not None and len(self.shared):
            for j, waits in self.shared.lookup(hashes, now_ms, self.opened_ms).items():
                rec = None if j in taken else records[j] if records else read(int(cl_pos[j]))
                if rec is not None and any(w.as_cancel(self.own).applies_to(rec) for w in waits):
                    self._cancel(rec, first + j, int(slot[j]), True)
        self.cancels.write_soon()

    def sweep(self, budget: int, live_start: int) -> int:
        """See :meth:`TimerStore.sweep`."""
        taken = self.sweeps.step(budget, live_start, self.read, self._take_swept)
        self.cancels.write_soon()
        return taken

    def _take_swept(self, rec: TimerRecord, index: int, slot_ms: int) -> None:
        self._cancel(rec, index, slot_ms, False)

    def count_prefix(self, cancel: Cancel, live_start: int, cap: int | None) -> int:
        """See :meth:`TimerStore.count_prefix`."""
        return self.sweeps.count(cancel, live_start, self.read, cap)

    def _known(self, cancel: Cancel) -> bool:
        """Is this prefix cancel sweeping or waiting here already (applied twice: by the
        ingest that read it, then by the cancel feed)? The second sweep would take
        nothing the first one does not."""
        return any(s.cancel == cancel for s in self.sweeps.running) or any(
            w.cancel == cancel for w in self.cancels.prefixes
        )

    def count_step(self, count: Count, budget: int, live_start: int) -> int:
        """See :meth:`TimerStore.count_step`."""
        return self.sweeps.count_step(count, budget, live_start, self.read)

    def screening(self) -> bool:
        """Is a prefix cancel's sweep or wait under way (due records are screened)?
        Allocates nothing: asked at every ``take_due``."""
        return bool(self.sweeps.running or self.cancels.prefixes)

    def screen(self, due: list[DueRecord], live_start: int) -> None:
        """Cancel, instead of handing out, the due records a running or waiting prefix
        cancel applies to (its sweep may not have reached them yet); ``due`` is cut in
        place (it is also the reader's in-flight batch). Each one is marked cancelled in
        the cancel book (its entry found through the id index), so a restart that reads
        it again skips it."""
        active = [s.cancel for s in self.sweeps.running]
        active += [w.cancel for w in self.cancels.prefixes]
        kept: list[DueRecord] = []
        for d in due:
            rec = d.record
            if type(rec) is DamagedRecord or not any(c.applies_to(rec) for c in active):
                kept.append(d)
                continue
            tick = d.cursor.tick_ms
            self._cancel(rec, self._index_of(rec, tick, live_start), tick, False)
        if len(kept) < len(due):
            due[:] = kept
            self.cancels.write_soon()

    def _index_of(self, rec: TimerRecord, tick_ms: int, live_start: int) -> int:
        """The timer-log entry of ``rec`` handed out at ``tick_ms``, -1 if not found."""
        h = zlib.crc32(rec.id.encode())
        for hit in self.timer.find_ids(live_start, {h}).get(h, ()):
            if hit.slot_ms == tick_ms and self.read(hit.cl_pos) == rec:
                return hit.index
        return -1

    def remove(
        self,
        keys: Sequence[tuple[str, int, int]],
        generation_of: Callable[[TimerRecord], int],
        live_start: int,
    ) -> int:
        """See :meth:`TimerStore.remove`."""
        wanted: dict[str, set[tuple[int, int]]] = {}
        for id, offset, generation in keys:
            wanted.setdefault(id, set()).add((offset, generation))
        hashes = {zlib.crc32(i.encode()): i for i in wanted}
        dropped = 0
        for hits in self.timer.find_ids(live_start, set(hashes)).values():
            for hit in hits:
                if not self._still_pending(hit):
                    continue
                rec = self.read(hit.cl_pos)
                if rec is not None and (rec.source_offset, generation_of(rec)) in wanted.get(
                    rec.id, ()
                ):
                    self.cancels.apply(hit.index, hit.slot_ms)
                    self.counters.removed_total += 1
                    self.pending[rec.target_topic] -= 1
                    dropped += 1
        self.cancels.write_soon()
        return dropped

    def pending_records(
        self, live_start: int, chunk: int, since: int = 0
    ) -> Iterator[list[Pending]]:
        """Every pending message's (commit-log position, record) from position ``since``,
        in chunks of up to ``chunk``: a pass over the live timer log (a store's first
        changelog write; a restart's rewrite of the values not acknowledged)."""
        out: list[Pending] = []
        for first, entries in self.timer.chunks(live_start, self.timer.end):
            positions = timer_entry.positions_of(entries)
            rows = np.flatnonzero(positions >= since).tolist() if since else range(len(entries))
            slots, words = entries["slot_ms"].tolist(), positions.tolist()
            for row in rows:
                index = first + row
                if index in self.cancels.applied or not self.reader.is_pending(index, slots[row]):
                    continue
                # One unread entry per pending message (a ROLL entry for one beyond the
                # window points at its record too).
                try:
                    out.append((words[row], self.commit_log.raw(words[row])))
                except IntegrityError as exc:  # quarantined when due; no changelog copy
                    log.warning("changelog seeding skips a damaged record: %s", exc)
                    continue
                if len(out) >= chunk:
                    yield out
                    out = []
        if out:
            yield out

    def expire(self, now_ms: int) -> None:
        """Count waiting cancels whose grace period ended as unknown."""
        self.counters.unknown_cancels_total += self.cancels.expire(now_ms)

    def lookup(self, id: str, live_start: int) -> TimerRecord | None:
        """See :meth:`TimerStore.lookup`."""
        h = zlib.crc32(id.encode())
        for hit in self.timer.find_ids(live_start, {h}).get(h, ()):
            if self._still_pending(hit) and (rec := self.read(hit.cl_pos)) and rec.id == id:
                return rec
        return None

    def pending_with_ids(self, ids: set[str], live_start: int) -> dict[str, list[TimerRecord]]:
        """See :meth:`TimerStore.pending_with_ids`."""
        found: dict[str, list[TimerRecord]] = {}
        hashes = {zlib.crc32(i.encode()) for i in ids}
        for hits in self.timer.find_ids(live_start, hashes).values():
            for hit in hits:
                if self._still_pending(hit) and (rec := self.read(hit.cl_pos)) and rec.id in ids:
                    found.setdefault(rec.id, []).append(rec)
        return found

    def read(self, cl_pos: int) -> TimerRecord | None:
        """The record at ``cl_pos``, or None if it is damaged: it cannot be matched, and
        is quarantined when it falls due (:mod:`quarantine`)."""
        try:
            return self.commit_log.read(cl_pos)
        except IntegrityError as exc:
            log.warning("cancel or lookup skips a damaged record: %s", exc)
            return None

    def _still_pending(self, hit: IdHit) -> bool:
        """Neither cancelled nor read yet (handed out, skipped or rolled)."""
        if hit.index in self.cancels.applied:
            return False
        return self.reader.is_pending(hit.index, hit.slot_ms)
