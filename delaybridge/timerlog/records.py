"""The values that cross the store's API: accepted messages, due messages, cursors,
cancels, and a batch as the store encoded it.

The first four are immutable named tuples rather than frozen dataclasses for one reason:
speed. A frozen dataclass's ``__init__`` sets each field through
``object.__setattr__`` and costs ~8x a tuple's construction; at 300k deliveries
per second the three objects made per due message would eat most of the budget.
The API is the same (keyword construction, attribute access, immutability,
equality, hashing); use ``rec._replace(...)`` instead of ``dataclasses.replace``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:  # numpy is not needed to encode
    import numpy as np
    import numpy.typing as npt

Headers = tuple[tuple[str, bytes | None], ...]


class TimerRecord(NamedTuple):
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


class DamagedRecord(TimerRecord):
    """A stored record that failed its CRC, as far as it could be read (see
    :mod:`~delaybridge.timerlog.quarantine`): fields read without their check, the value
    dropped, due at the tick it was read in, and a last header
    (``quarantine.QUARANTINE_HEADER``) saying what is wrong. Not to be delivered: the
    sidecar dead-letters it (reason ``store-corrupt``)."""

    __slots__ = ()


class DeliveryCursor(NamedTuple):
    """Where a message sits in delivery order: its wheel tick, then its arrival index.

    Cursors are totally ordered the way :meth:`TimerStore.take_due` hands messages
    out (due tick ascending, then arrival order within the tick). Treat them as
    opaque: pass the last cursor of a delivered batch to ``mark_delivered``.
    """

    tick_ms: int
    index: int  # type: ignore[assignment]  # shadows tuple.index on purpose


class DueRecord(NamedTuple):
    """A message whose due time has come, with its place in delivery order."""

    record: TimerRecord
    cursor: DeliveryCursor


class Cancel(NamedTuple):
    """A cancel as a store applies it: to pending messages with its id *sent before it*.

    The rule (DESIGN §2): a message is cancelled when its id (and target topic, if the
    cancel names one) matches and it was sent before the cancel -- its
    ``source_timestamp_ms`` is earlier than ``sent_ms``; on an equal timestamp, its
    source offset is lower than ``offset`` when the cancel came from the same
    delay-topic partition (the same log: offset order is send order), and otherwise the
    cancel wins the tie. So a message re-sent after its cancel (a reschedule) is
    untouched, and a cancel for an id already delivered cannot hit a later message.

    ``sent_ms`` None (the admin API, or a cancel from a sidecar that did not carry it):
    every message pending now with the id, and the cancel does not wait for more.
    A plain ``(id, topic)`` pair converts with ``Cancel(*pair)``.

    ``replace``: the cancel a schedule with an explicit id makes of itself (DESIGN §2,
    replace by id): the same rule, but counted as ``replaced_total``, and one that finds
    nothing is not an unknown cancel (most schedules replace nothing).

    ``prefix``: a cancel by id prefix (``delay-cancel-prefix``): ``id`` is a prefix, and
    it takes every message whose id starts with it, by the same rule otherwise. A store
    finds those by a paced sweep, not by the id index (:mod:`prefix_sweep`).
    """

    id: str
    target_topic: str | None = None
    sent_ms: int | None = None
    offset: int | None = None
    replace: bool = False
    prefix: bool = False

    def applies_to(self, rec: TimerRecord) -> bool:
        if rec.id != self.id and not (self.prefix and rec.id.startswith(self.id)):
            return False
        if self.target_topic is not None and rec.target_topic != self.target_topic:
            return False
        if self.sent_ms is None:
            return True
        ts = rec.source_timestamp_ms
        if ts != self.sent_ms:
            return ts < self.sent_ms
        return self.offset is None or rec.source_offset < self.offset


@dataclass(slots=True)
class EncodedBatch:
    """A batch of commit-log records ready to write, plus what the store indexes it by.

    Made by the record codec (``commit_record.encode_batch``, or ``index_encoded`` for
    records that arrive encoded); :meth:`TimerStore.append` returns it with
    ``positions`` filled in, so the owner can tell its changelog what it stored.
    """

    parts: Sequence[bytes | memoryview]
    """Encoded records (prefix, body, prefix, body, ...; or whole records, as
    ``index_encoded`` passes them on): join and write once."""
    sizes: list[int]
    id_hashes: list[int]
    """CRC-32 of each id (the timer log's cancel/lookup filter)."""
    due_ms: list[int]
    topics: list[str]
    max_source_offset: int
    positions: npt.NDArray[np.int64] | None = None
    """Each record's commit-log position, once a store has appended the batch."""

    def records(self) -> list[bytes]:
        """Each record, whole (its prefix and body), as written."""
        parts = self.parts
        if len(parts) == len(self.sizes):  # already whole (see index_encoded)
            return [bytes(p) for p in parts]
        return [bytes(parts[i]) + bytes(parts[i + 1]) for i in range(0, len(parts), 2)]


_RECORD, _TOPIC = itemgetter(0), itemgetter(2)


def topics_of(dues: Iterable[DueRecord]) -> Iterator[str]:
    """Each due message's target topic, read in C (no Python frame per message)."""
    return map(_TOPIC, map(_RECORD, dues))
