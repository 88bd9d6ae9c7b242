"""One partition's due records on their way out: taken from the store, produced, acked.

The :class:`DeliveryPipeline` is the only owner of a partition's *batches* (records
taken from the store in one ``take_due`` call) and *held* records (taken, not produced
yet: the producer queue was full or a rate limit said wait). Life of a record:

1. :meth:`take` moves up to ``n`` due records from the store into a new batch, held;
2. the deliverer reads the oldest held run (:meth:`front`: a batch's records and how
   many of them were produced already) and, once records are handed to the producer,
   says so with :meth:`produced`;
3. its outcome (acked here or in the dead-letter topic) calls :meth:`resolve`; when the
   oldest batches have no record outstanding, the store's delivery cursor moves
   (``mark_delivered``) up to the last of them.

So the cursor never passes a record that is not resolved, and a crash repeats only what
was in flight (at-least-once, DESIGN §4). Not thread-safe: one owner thread.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from delaybridge.timerlog import DeliveryCursor, DueRecord, TimerStore


@dataclass(eq=False, slots=True)
class Batch:
    """Records taken from the store in one call; done when none is outstanding."""

    cursor: DeliveryCursor
    outstanding: int
    size: int


@dataclass(eq=False, slots=True)
class HeldRun:
    """The held records of one batch: ``records[produced:]`` are not produced yet."""

    records: list[DueRecord]
    batch: Batch
    produced: int = 0


class DeliveryPipeline:
    """Batches and held records of one partition, in store order."""

    def __init__(self, store: TimerStore) -> None:
        self._store = store
        self._batches: deque[Batch] = deque()
        self._held: deque[HeldRun] = deque()
        self.unmarked = 0
        """Records taken whose cursor is not marked yet (resolved or not): what the
        store's reader and this pipeline hold in memory for the partition."""
        self.closed = False

    def take(self, max_records: int, until_ms: int | None = None) -> int:
        """Hold up to ``max_records`` more due records (one batch), due by ``until_ms``
        (default: now); returns how many."""
        taken = self._store.take_due(max_records, until_ms)
        if taken:
            batch = Batch(taken[-1].cursor, len(taken), len(taken))
            self._batches.append(batch)
            self.unmarked += len(taken)
            self._held.append(HeldRun(taken, batch))
        return len(taken)

    def front(self) -> HeldRun | None:
        """The oldest run of held records, or None when nothing is held."""
        return self._held[0] if self._held else None

    def produced(self, n: int) -> None:
        """The next ``n`` records of the front run were handed to the producer."""
        run = self._held[0]
        run.produced += n
        if run.produced >= len(run.records):
            self._held.popleft()

    def resolve(self, batch: Batch) -> None:
        """One record of ``batch`` is delivered or dead-lettered (acked).

        An outcome that arrives after the partition was closed changes nothing: its
        cursor was not marked, so the partition's next owner delivers the record again.
        """
        if self.closed:
            return
        batch.outstanding -= 1
        done = None
        while self._batches and self._batches[0].outstanding == 0:
            done = self._batches.popleft()
            self.unmarked -= done.size
        if done is not None:
            self._store.mark_delivered(done.cursor)

    @property
    def held(self) -> int:
        return sum(len(run.records) - run.produced for run in self._held)

    @property
    def in_flight(self) -> int:
        """Records taken and not yet resolved (held ones included)."""
        return sum(batch.outstanding for batch in self._batches)

    @property
    def awaiting_reports(self) -> int:
        """Records handed to the producer whose delivery report has not come yet."""
        return self.in_flight - self.held

    def close(self) -> None:
        """Forget everything taken: the records stay pending in the store."""
        self.closed = True
        self._held.clear()
        self._batches.clear()
        self.unmarked = 0
