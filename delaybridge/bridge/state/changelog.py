"""Writing the changelog: every store change, in Kafka, so the store survives its pod.

Format and keys: ``timerlog/changelog_record.py``; topics: ``bridge/state/topics.py``.
The rules (DESIGN §5; reasons in docs/design/changelog.md):

1. a message stored from delay-topic offset N holds N back from the group's offset
   commit (a :class:`~delaybridge.bridge.commit.holds.Hold` per run of messages) until it is
   safe elsewhere than this disk: its value acknowledged in the changelog under key
   (N, generation), or the message itself delivered or cancelled (a parked copy whose
   original was never written waits under the original's hold);
2. values are written behind (:meth:`Changelog.write_behind`, at every flush): a value
   goes out once its message has been in the store for ``changelog.write_behind_ms``
   (default 5 s), so a message that left the store before needs neither a value nor a
   tombstone; the price is a commit position up to that long behind (rule 1). Past
   ``write_behind_max_records`` held, the older half of the storing partition's go out
   (``WRITE_CHUNK`` per call); a handover, a shutdown and a transaction write all held;
3. a message whose value was written gets a tombstone when it leaves the store
   (delivered, dead-lettered, cancelled, parked again under generation + 1);
4. a failed write is retried with backoff while the partition is ours (its hold holds;
   ``bridge/produce/resend.py``); once it moved away, the next owner re-reads from the
   committed offset;
5. the acknowledged changelog offsets are kept per partition and the store's checkpoint
   remembers them (:meth:`marks`, mark ``changelog``): a restart catches up from there;
   and the oldest value not acknowledged (mark ``changelog_unacked``): a restart writes
   again from there;
6. at every flush, the owner's delivery cursor goes out as a progress record
   (:meth:`progress`): everything due up to it left the store, and the tombstones that
   say so are before it in the partition; a warm standby drops those from its copy.
   A cursor that only moved over empty ticks (nothing left the store since the last
   one) waits up to ``IDLE_PROGRESS_MS``: it tells a standby nothing to drop.

Not thread-safe: the service's owner thread calls it.
"""

from __future__ import annotations

import dataclasses
import logging
from functools import partial
from typing import Any

from confluent_kafka import KafkaError as RdKafkaError
from confluent_kafka import Message

from delaybridge.bridge.commit.holds import Hold
from delaybridge.bridge.partition.copies import generation_of
from delaybridge.bridge.partition.state import PartitionState, PartKey, Role
from delaybridge.bridge.produce.outbox import Outbox
from delaybridge.bridge.produce.resend import Lane, Resender
from delaybridge.bridge.state.held_values import HeldValues
from delaybridge.bridge.state.topics import ChangelogTopics
from delaybridge.connectors.edge import Headers
from delaybridge.errors import IntegrityError
from delaybridge.timerlog import Clock, EncodedBatch, StoreMarks, TimerRecord
from delaybridge.timerlog.changelog_record import (
    ID_HEADER,
    PROGRESS,
    PROGRESS_KEY,
    key_of,
    value_of,
)
from delaybridge.timerlog.stats import StoreCounters

log = logging.getLogger(__name__)
WRITE_CHUNK = 10_000  # values written behind per partition and call: no burst in flight
#: How long a progress record that would only say time passed waits (rule 6): one per
#: partition and flush made an idle sidecar produce 5 records a second per partition.
IDLE_PROGRESS_MS = 10_000


class Changelog:
    """The changelog writer of one sidecar (see the module docstring)."""

    def __init__(
        self,
        topics: ChangelogTopics,
        outbox: Outbox,
        resender: Resender,
        clock: Clock,
        max_in_flight: int = 0,
    ) -> None:
        """``max_in_flight``: values written by age wait while the producer has that
        many records in flight (0: never wait)."""
        self.topics = topics
        self._max_in_flight = max_in_flight
        self._outbox = outbox
        self._resender = resender
        self._clock = clock
        self._held = HeldValues(topics.settings.write_behind_max_records)
        self._progress: dict[PartKey, int] = {}
        self._progress_seen: dict[PartKey, tuple[StoreCounters, int]] = {}
        """Per partition, the store's counters at its last progress record, and when."""
        self._seeding: set[PartKey] = set()
        self._behind_ms = topics.settings.write_behind_ms
        self._routes: dict[PartKey, _Route] = {}

    def marks(self, part: PartitionState, marks: StoreMarks) -> StoreMarks:
        """``marks`` with the changelog's own for ``part``'s next flush (rule 5): the
        changelog offset acknowledged so far (kept while a seed runs: until it finished,
        the local copy is the truth), the oldest value not acknowledged, and whether a
        seed runs. An inactive partition's (restoring: the restore sets them) unchanged."""
        if part.role is not Role.ACTIVE:
            return marks
        seeding = part.key in self._seeding
        route = self._routes.get(part.key)
        position = None if route is None or route.acked < 0 else route.acked
        return dataclasses.replace(
            marks,
            changelog=marks.changelog if position is None or seeding else position,
            changelog_unacked=self._held.unacked_from(part.key),
            changelog_seeding=seeding,
        )

    def seeding(self, part: PartitionState, running: bool) -> None:
        """A seed of ``part`` starts or finishes (``bridge/state/seeding.py``)."""
        if running:
            self._seeding.add(part.key)
        else:
            self._seeding.discard(part.key)

    def stored(
        self,
        part: PartitionState,
        records: list[TimerRecord],
        encoded: EncodedBatch,
        *,
        hold_offset: bool = True,
        at_once: bool = False,
        hold: Hold | None = None,
    ) -> None:
        """``records`` were appended to ``part``'s store (as ``encoded``): their values
        are held (rule 2), or written now (``at_once``: a copy whose old one is
        tombstoned next, so a store rebuilt from the changelog never holds neither).
        ``hold_offset`` (ingest): their delay-topic offsets wait for them (rule 1);
        ``hold``: they wait under this one instead (a parked copy, its original's)."""
        if hold is None:
            n = len(records)
            if hold_offset:
                hold = Hold.of(part.offsets, records[0].source_offset, n)
            else:
                hold = Hold.unheld(n)
        keys = [key_of(rec.source_offset, generation_of(rec)) for rec in records]
        assert encoded.positions is not None, "a batch the store appended has positions"
        positions: list[int] = encoded.positions.tolist()
        if at_once:  # after any value held of an offset it names (see write_through)
            self.write_through(part, max(rec.source_offset for rec in records))
            for key, raw, at in zip(keys, encoded.records(), positions, strict=True):
                self.send_value(part, key, value_of(raw), hold, at)
            return
        if self._held.hold(part.key, keys, positions, hold, self._clock.now_ms()):
            # Too many held in all: the older half of this partition's goes out now.
            self.write(part, most=max(1, min(self._held.held(part.key) // 2, WRITE_CHUNK)))

    def write(
        self, part: PartitionState, stored_by_ms: int | None = None, most: int | None = None
    ) -> int:
        """Write ``part``'s held values (rule 2), oldest first, stored by ``stored_by_ms``,
        at most ``most``; returns how many."""
        out = self._held.take(part.key, stored_by_ms, most)
        if out and not part.closed:
            self._send_held(part, out)
        return len(out)

    def write_through(self, part: PartitionState, offset: int) -> None:
        """Write the held values of offsets up to ``offset`` ahead of a value written at
        once that names it: a rebuilt store skips the delay-topic records up to the
        highest offset its changelog names (docs/design/changelog.md)."""
        out = self._held.take_through(part.key, offset)
        if out and not part.closed:
            self._send_held(part, out)

    def _send_held(self, part: PartitionState, out: list[tuple[bytes, int, Hold]]) -> None:
        read = part.store.commit_log.raw  # the record is pending: its segment is there
        for key, position, hold in out:
            try:
                value = value_of(read(position))
            except IntegrityError as exc:  # gone or damaged: delivery deals with it
                log.error(
                    "%s: cannot write the value at %d to the changelog: %s",
                    part.name,
                    position,
                    exc,
                )
                hold.done()
                continue
            self.send_value(part, key, value, hold, position)

    def write_all(self, parts: list[PartitionState]) -> None:
        """Write every held value of ``parts`` (a handover, a shutdown, a transaction)."""
        for part in parts:
            self.write(part)

    def write_behind(self, parts: list[PartitionState]) -> None:
        """Write the values held for ``changelog.write_behind_ms`` or longer (rule 2),
        as far as the producer has room: with ``max_in_flight`` records in flight
        (deliveries draining a burst), they wait for a later flush, and the messages
        delivered meanwhile need neither a value nor a tombstone."""
        if not self._held:
            return
        room = WRITE_CHUNK * len(parts)
        if self._max_in_flight:
            room = self._max_in_flight - self._outbox.in_flight
        stored_by_ms = self._clock.now_ms() - self._behind_ms
        for part in parts:
            if room <= 0:
                return
            room -= self.write(part, stored_by_ms, min(room, WRITE_CHUNK))

    def progress(self, part: PartitionState) -> None:
        """Write an active ``part``'s delivery cursor tick when it moved (rule 6); best
        effort: a lost one is superseded by the next."""
        if part.role is not Role.ACTIVE:
            return
        tick = part.store.delivered_through_ms
        if tick <= self._progress.get(part.key, -1):
            return
        now = self._clock.now_ms()
        counters = part.store.counters
        last = self._progress_seen.get(part.key)
        if last is not None and last[0] == counters and now - last[1] < IDLE_PROGRESS_MS:
            return  # nothing left the store since the last one: only time passed
        self._progress_seen[part.key] = (dataclasses.replace(counters), now)
        self._progress[part.key] = tick
        topic = self.topics.topic_for(part.topic)
        on_delivery = partial(self._progress_outcome, part)
        self._outbox.send(
            topic, PROGRESS.pack(tick), PROGRESS_KEY, None, on_delivery, part.partition
        )

    def _progress_outcome(
        self, part: PartitionState, err: RdKafkaError | None, msg: Message | None
    ) -> None:
        """A progress record's offset counts in the position (rule 5): a store whose
        messages all left within the window writes nothing else (no position: rebuilt)."""
        if err is None:
            self._route(part).note(msg)

    def send_value(
        self, part: PartitionState, key: bytes, value: bytes, hold: Hold, position: int = -1
    ) -> None:
        """Write one value (rule 4: retried with backoff while ``part`` is ours); its
        ack resolves one of ``hold``. ``position``: its record's, until the ack."""
        if part.closed:
            return
        route = self._route(part)
        if position >= 0:
            route.unacked[key] = position
        self._resender.send_in(route.values, value, key, None, hold)

    def removed(self, part: PartitionState, rec: TimerRecord) -> None:
        """``rec`` left ``part``'s store: drop its unwritten value, or tombstone it."""
        key = key_of(rec.source_offset, generation_of(rec))
        route = self._route(part)
        hold = self._held.drop(route.key, key)
        if hold is not None:
            hold.done()  # safe now without ever being written
            return
        self._send_tombstone(part, route, key, rec.id)

    def moved(
        self,
        part: PartitionState,
        old: TimerRecord,
        records: list[TimerRecord],
        encoded: EncodedBatch,
    ) -> None:
        """``records`` (a parked copy) replace ``old``. ``old``'s value never written:
        it is forgotten, the new one held under its hold (the delay-topic offset waits
        for the copy: released, it was committed past a copy only this disk held); else
        the new one is written at once, ahead of ``old``'s tombstone, so a store rebuilt
        from the changelog never holds neither."""
        key = key_of(old.source_offset, generation_of(old))
        hold = self._held.drop(part.key, key)
        if hold is not None:
            self.stored(part, records, encoded, hold=hold)
            return
        self.stored(part, records, encoded, hold_offset=False, at_once=True)
        self._send_tombstone(part, self._route(part), key, old.id)

    def removed_by_store(self, part: PartitionState) -> None:
        """Tombstone what the store's cancels removed since the last call."""
        for rec in part.store.take_removed():
            self.removed(part, rec)

    def _send_tombstone(self, part: PartitionState, route: _Route, key: bytes, id: str) -> None:
        if part.closed:
            return
        headers: Headers = [(ID_HEADER, id.encode())]
        self._resender.send_in(route.tombstones, None, key, headers)

    def _route(self, part: PartitionState) -> _Route:
        """``part``'s :class:`_Route`, made once per owned partition object (a partition
        assigned again is a new object, with a route of its own)."""
        route = self._routes.get(part.key)
        if route is None or route.part is not part:
            topic = self.topics.topic_for(part.topic)
            route = _Route(part, topic, self._held.unacked_of(part.key))
            self._routes[part.key] = route
        return route

    def forget(self, part: PartitionState) -> None:
        self._routes.pop(part.key, None)
        self._held.forget(part.key)
        self._progress.pop(part.key, None)
        self._progress_seen.pop(part.key, None)
        self._seeding.discard(part.key)


class _Route:
    """What every changelog write of one owned partition shares, made once instead of
    per record (see :class:`~delaybridge.bridge.produce.resend.Lane`), and what its
    acknowledgements update: the highest changelog offset acknowledged (rule 5) and the
    values written and not acknowledged yet (their commit-log positions, by key)."""

    __slots__ = ("acked", "key", "part", "tombstones", "unacked", "values")

    def __init__(self, part: PartitionState, topic: str, unacked: dict[bytes, int]) -> None:
        self.part = part
        self.key = part.key
        self.acked = -1
        self.unacked = unacked
        wanted = partial(_ours, part)
        name = part.name
        self.values = Lane(
            f"the changelog value of {name}", topic, part.partition, wanted, self._value_acked
        )
        self.tombstones = Lane(
            f"the changelog tombstone of {name}", topic, part.partition, wanted, self._acked
        )

    def note(self, msg: Message | None) -> None:
        """A record of this partition was acknowledged at ``msg``'s offset."""
        offset: Any = msg.offset() if msg is not None else None
        if offset is not None and offset > self.acked:
            self.acked = offset

    def _value_acked(self, key: bytes | None, hold: Hold, msg: Message | None) -> None:
        hold.done()
        if key is not None:
            self.unacked.pop(key, None)
        self.note(msg)

    def _acked(self, key: bytes | None, extra: object, msg: Message | None) -> None:
        self.note(msg)


def _ours(part: PartitionState) -> bool:
    return not part.closed  # rule 4
