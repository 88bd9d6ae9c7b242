"""Flow control: when ingest runs, and when delivery does.

Two sources decide, and either one can stop ingest:

- an operator, through the admin API, pauses ``enqueue`` (consuming the delay topics)
  or ``dequeue`` (delivering) until resumed;
- *backpressure*: ingest pauses by itself while the stores hold more than
  ``max_pending_messages`` or more than ``max_delivery_backlog`` due records wait
  (held or in flight), and resumes by itself once both are below again;
- *disk*: ingest pauses while the data directory's free space is under
  ``store.min_free_bytes``, or since a write failed for want of space, and resumes by
  itself once the pause has lasted its wait and a margin over the pause level is free
  (or, after 30 s, room for the refused records): ``bridge/disk_pause.py``, hysteresis
  in space and time, so a disk near full never makes ingest flap. Delivery goes on
  meanwhile, and the stores give back what it finished; a full disk never stops the
  sidecar.

Pausing ingest pauses the consumer's whole assignment (Kafka keeps the records; the
group offsets do not move). A partition assigned while ingest is paused starts paused.
Not thread-safe: the service's owner thread calls it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from enum import StrEnum

from confluent_kafka import TopicPartition

from delaybridge.bridge.disk_pause import DiskPause
from delaybridge.connectors.edge import ConsumerEdge

log = logging.getLogger(__name__)


class Direction(StrEnum):
    """What can be paused at runtime. The values appear in URLs and metric labels."""

    #: Consuming the delay topics (new delayed messages are not stored; Kafka keeps them).
    ENQUEUE = "enqueue"
    #: Delivering due messages (they stay pending and go out late, never lost).
    DEQUEUE = "dequeue"


class FlowControl:
    """Operator pauses plus automatic backpressure, applied to one consumer."""

    def __init__(
        self,
        max_pending_messages: int,
        max_delivery_backlog: int,
        min_free_bytes: int = 0,
        on_change: Callable[[FlowControl], None] | None = None,
        *,
        resume_margin_bytes: int = 0,
        clock_s: Callable[[], float] = time.monotonic,
    ) -> None:
        """``on_change`` is called after every change of state (for the metrics)."""
        self._max_pending = max_pending_messages
        self._max_backlog = max_delivery_backlog
        self._on_change = on_change
        self.paused: set[Direction] = set()
        self.backpressure = False
        self.disk = DiskPause(min_free_bytes, resume_margin_bytes, clock_s)
        """The disk's pause of ingest, with its hysteresis."""
        self._consumer: ConsumerEdge | None = None

    def attach(self, consumer: ConsumerEdge) -> None:
        self._consumer = consumer

    @property
    def disk_full(self) -> bool:
        """Is ingest paused for want of disk space?"""
        return self.disk.paused

    @property
    def ingest_paused(self) -> bool:
        return self.backpressure or self.disk_full or Direction.ENQUEUE in self.paused

    @property
    def delivery_paused(self) -> bool:
        return Direction.DEQUEUE in self.paused

    def set_paused(self, what: Direction, on: bool) -> None:
        """An operator's pause (``on``) or resume of one direction; idempotent."""
        if on:
            self.paused.add(what)
        else:
            self.paused.discard(what)
        self.apply()

    def update(
        self,
        pending: int,
        backlog: int,
        free_bytes: int | None = None,
        total_bytes: int | None = None,
    ) -> bool:
        """Re-evaluate backpressure and the disk (``free_bytes`` of ``total_bytes``: the
        data volume's); True when backpressure switched on."""
        if free_bytes is not None and self.disk.check(free_bytes, total_bytes) is not None:
            self.apply()
        over = pending > self._max_pending or backlog > self._max_backlog
        if over == self.backpressure:
            return False
        self.backpressure = over
        if over:
            log.warning("flow control: pausing ingest (pending %d, backlog %d)", pending, backlog)
        else:
            log.info("flow control: resuming ingest")
        self.apply()
        return over

    def set_disk_full(self, full: bool) -> None:
        """A write (a flush) found no room: ingest pauses. It resumes by the disk's own
        rule (:meth:`update`), never on this call: ``full`` False changes nothing."""
        if full and self.disk.refused(None, 0):
            self.apply()

    def refused(self, who: object, needed_bytes: int) -> None:
        """An append of ``needed_bytes`` for ``who`` (a partition) found no room: ingest
        pauses, and resumes only with that much more free (bridge/disk_pause.py)."""
        if self.disk.refused(who, needed_bytes):
            self.apply()

    def apply(self) -> None:
        """Pause or resume the consumer's whole assignment to match the state."""
        if self._on_change is not None:
            self._on_change(self)
        if self._consumer is None:
            return
        assignment = self._consumer.assignment()
        if not assignment:
            return
        if self.ingest_paused:
            self._consumer.pause(assignment)
        else:
            self._consumer.resume(assignment)

    def on_assigned(self, partitions: list[TopicPartition]) -> None:
        """New partitions start paused while ingest is paused."""
        if self._consumer is not None and self.ingest_paused and partitions:
            self._consumer.pause(partitions)
