"""Which delay-topic offset may be committed: only what is durable, never more.

A consumed record is durable in one of two ways: appended to its partition's store and
then flushed (a :class:`Schedule`), or produced to Kafka and acknowledged (a cancel
re-published to the cancel topic, a dead-lettered record, a stored message's changelog
value). :class:`OffsetTracker` keeps, per partition, the highest offset handled (handed
to the store, or its produce started) and the offsets held back by produces not yet
acknowledged (``holds.py``); the commit position is the lower of "one past what the last
flush covered" and "the oldest offset held".

Produces start in any offset order (ingest appends a batch's schedules, whose replaces
and changelog values start at once, before the batch's cancels and dead letters of
earlier offsets) and one offset may have several (a schedule's changelog value and its
replace): each is counted, and the oldest offset with one outstanding holds the commit.

Not thread-safe: the service's owner thread calls it (delivery callbacks run inside
``producer.poll`` on that same thread).
"""

from __future__ import annotations

import heapq


class OffsetTracker:
    """Commit bookkeeping for one delay-topic partition."""

    def __init__(self, start_offset: int) -> None:
        self._handled_upto = start_offset - 1  # every offset <= this was handled
        self._flushed_upto = start_offset - 1  # ... and durable, as of the last flush
        self._unacked: dict[int, int] = {}  # offset -> produces not yet acknowledged
        self._oldest: list[int] = []  # a heap of offsets, some maybe acked (skipped lazily)
        self._outstanding = 0
        self._committed = start_offset

    def handled(self, offset: int) -> None:
        """``offset`` was appended to the store or its produce was started."""
        self._handled_upto = max(self._handled_upto, offset)

    def hold(self, offset: int) -> None:
        """Hold the commit at ``offset`` or below until :meth:`release` of it. Does not
        count it handled: a side write calls :meth:`handled` too; a run's changelog
        values hold an offset ingest handled, a restart's rewrite one handled long ago."""
        count = self._unacked.get(offset, 0)
        if not count:
            heapq.heappush(self._oldest, offset)
        self._unacked[offset] = count + 1
        self._outstanding += 1

    def release(self, offset: int) -> None:
        """One hold of ``offset`` ends (its produce was acknowledged)."""
        count = self._unacked.get(offset, 0)
        if not count:
            return
        self._outstanding -= 1
        if count > 1:
            self._unacked[offset] = count - 1
        else:
            del self._unacked[offset]

    def _oldest_unacked(self) -> int | None:
        oldest = self._oldest
        while oldest and oldest[0] not in self._unacked:
            heapq.heappop(oldest)
        return oldest[0] if oldest else None

    def store_flushed(self) -> None:
        """Call right after the store's flush(): what was handled before it is durable."""
        self._flushed_upto = self._handled_upto

    def position_after_flush(self) -> int:
        """Where to resume if a flush made everything handled so far durable: the store
        saves it with that flush (mark ``source_resume``)."""
        position = self._handled_upto + 1
        oldest = self._oldest_unacked()
        return position if oldest is None else min(position, oldest)

    def commit_position(self) -> int:
        """The next offset to consume after a restart: everything before it is durable."""
        position = self._flushed_upto + 1
        oldest = self._oldest_unacked()
        return position if oldest is None else min(position, oldest)

    def take_commit(self) -> int | None:
        """The position to commit now, or None when it has not moved since last time."""
        position = self.commit_position()
        if position <= self._committed:
            return None
        self._committed = position
        return position

    def commit_failed(self) -> None:
        """The last position taken was not committed (the broker refused it): the next
        :meth:`take_commit` gives the current position again (``bridge/commit/results.py``)."""
        self._committed = -1

    @property
    def unacked(self) -> int:
        """Produces started and not yet acknowledged."""
        return self._outstanding
