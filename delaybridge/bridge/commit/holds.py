"""Holds: a delay-topic offset kept back from the commit until some writes are acknowledged.

Whatever a consumed record turns into besides a stored message is written to Kafka: a
cancel re-published to the cancel topic, a dead letter, the changelog values of a run of
stored messages. Until Kafka acknowledges those writes the record is not durable
anywhere, so its offset must not be committed. A :class:`Hold` expresses exactly that:
it holds one offset in the partition's :class:`~.offsets.OffsetTracker` and releases it
when its last write is done.

- a side write (a cancel, a dead letter): a hold of its own offset, one write;
- a run of stored messages with the changelog on: a hold of the run's first offset, one
  write per message (its value acknowledged, or the message delivered or cancelled
  first, which makes its value unnecessary);
- a parked copy whose original was never written waits under its original's hold;
- a seed or a parked copy's value written at once: :meth:`Hold.unheld`, which holds no
  offset (their offsets were committed long ago) and only counts.

Not thread-safe: the service's owner thread (delivery reports run inside
``producer.poll`` on that thread).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from delaybridge.bridge.commit.offsets import OffsetTracker


@dataclass(eq=False, slots=True)
class Hold:
    """Keeps ``offset`` of ``offsets`` back from the commit until :meth:`done` was called
    ``left`` times; then runs ``on_done``. ``offsets`` None: holds nothing, only counts."""

    offsets: OffsetTracker | None
    offset: int
    left: int
    on_done: Callable[[], None] | None = None

    @classmethod
    def of(cls, offsets: OffsetTracker, offset: int, writes: int = 1) -> Hold:
        """Hold ``offset`` until ``writes`` writes are done."""
        offsets.hold(offset)
        return cls(offsets, offset, writes)

    @classmethod
    def unheld(cls, writes: int, on_done: Callable[[], None] | None = None) -> Hold:
        """Count ``writes`` writes without holding an offset; ``on_done`` after the last."""
        return cls(None, -1, writes, on_done)

    def done(self) -> None:
        """One of the writes is safe (acknowledged, or no longer needed)."""
        self.left -= 1
        if self.left:
            return
        if self.offsets is not None:
            self.offsets.release(self.offset)
        if self.on_done is not None:
            self.on_done()
