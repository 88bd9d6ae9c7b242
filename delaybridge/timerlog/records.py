"""The values that cross the store's API: accepted messages, due messages, cursors."""

from __future__ import annotations

from dataclasses import dataclass

Headers = tuple[tuple[str, bytes | None], ...]


@dataclass(frozen=True, slots=True)
class TimerRecord:
    """One accepted delayed message, exactly as the sidecar stored it.

    ``id`` is the delay-id (the user's ``delay-id`` header or
    ``"<delay-topic>-<partition>-<offset>"``); ``due_ms`` is the absolute due time in
    epoch milliseconds and may lie in the past (then it is due at once).
    ``target_partition`` is ``-1`` when the producer's partitioner decides.
    """

    id: str
    due_ms: int
    target_topic: str
    target_partition: int
    key: bytes | None
    value: bytes | None
    headers: Headers
    source_offset: int
    source_timestamp_ms: int


@dataclass(frozen=True, slots=True, order=True)
class DeliveryCursor:
    """Where a message sits in delivery order: its wheel tick, then its arrival index.

    Cursors are totally ordered the way :meth:`TimerStore.take_due` hands messages
    out (due tick ascending, then arrival order within the tick). Treat them as
    opaque: pass the last cursor of a delivered batch to ``commit_delivered``.
    """

    tick_ms: int
    index: int


@dataclass(frozen=True, slots=True)
class DueRecord:
    """A message whose due time has come, with its place in delivery order."""

    record: TimerRecord
    cursor: DeliveryCursor
