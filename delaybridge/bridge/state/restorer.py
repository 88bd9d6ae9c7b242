"""Restoring a partition's store from its changelog before it delivers (DESIGN §5).

A partition that arrives on this replica is *restoring* until its store holds what the
changelog holds; meanwhile its delay-topic partition stays paused and nothing of it is
delivered. The decision, at assign (:func:`plan`):

1. the store's checkpoint names the changelog offset it covers (mark ``changelog``) and
   the changelog's end is past it → **catch up** from the next offset;
2. it covers the end already → nothing to do: active at once (a plain restart);
3. the store has no mark but the changelog has records (the disk was lost, or the
   partition never lived here, or this copy is older than what compaction kept) →
   **rebuild**: the local copy is set aside and the store restored from the start;
4. the store has no mark and the changelog is empty → nothing to restore (a new
   partition; or a store that predates the changelog, which is then written to it:
   ``Changelog.seed``).

Restoring runs in slices, ``restore_batch_records`` per loop turn, through one
assign-only ``read_committed`` consumer shared by every restoring partition
(:class:`Restorer`), so the loop keeps delivering for the other partitions. A slice
keeps values in a bounded buffer, where most of their tombstones meet them; what the
buffer cannot absorb is applied to the store at the end of the slice (values appended,
tombstones drop every pending copy of their key), the store is flushed with the
changelog offset reached, and so an interrupted restore resumes from there (rule 1).

A catch-up can re-read values the store holds already: the mark is the changelog offset
*acknowledged* at the store's last flush, and a value still in flight then (a message
taken just before; a series' next occurrence, written at once) is acknowledged after
it. Appended again, such a copy was delivered twice, and a series' occurrence doubled
every later one. So a catch-up appends a value of a message at or below the store's
highest source offset (``RestoreTask.held_through``) only if the store does not hold
that copy pending (same id, source offset and generation: one id-index look-up per
batch); values of later messages cannot be held and are appended unread. For the same
reason a tombstone that meets its value in the buffer still drops the store's copy: a
message stored before the last flush and delivered after it is not delivered again.
Every key is written at most once with a value (``timerlog/changelog_record.py``), so
nothing else can double.

Not thread-safe: the service's owner thread calls it.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import KafkaException, Message, TopicPartition

from delaybridge.bridge.partition.copies import generation_of
from delaybridge.bridge.partition.state import PartitionState, PartKey
from delaybridge.connectors import headers_of
from delaybridge.connectors.edge import ConsumerEdge
from delaybridge.connectors.retry import while_electing
from delaybridge.errors import IntegrityError
from delaybridge.timerlog import TimerRecord
from delaybridge.timerlog.changelog_record import (
    ID_HEADER,
    PROGRESS,
    PROGRESS_KEY,
    key_of,
    parse_key,
)
from delaybridge.timerlog.commit_codec import decode

log = logging.getLogger(__name__)
#: librdkafka settings of the restore consumer: large fetches (a restore reads a whole
#: partition as fast as it can: 16 MiB fetches restore 1M messages about twice as fast as
#: 4 MiB ones, for ~380 MB of RSS while it runs, docs/benchmarks.md), read_committed
#: (only what committed transactions wrote).
CONSUMER_SETTINGS = {
    "fetch.max.bytes": 64 << 20,
    "max.partition.fetch.bytes": 16 << 20,
    "queued.max.messages.kbytes": 32 << 10,
    "isolation.level": "read_committed",
}


@dataclass(eq=False)
class RestoreTask:
    """One partition on its way to its changelog's end."""

    part: PartitionState
    topic: str
    position: int
    """The next changelog offset to read."""
    end: int
    """The changelog's end (exclusive) when the restore began."""
    rebuild: bool = False
    """From the changelog's start, into an empty store (rule 3), not a catch-up."""
    held_through: int = -1
    """The store's highest source offset when a catch-up began: values of messages at
    or below it may be held already (the module docstring); -1: none can be."""
    started_s: float = field(default_factory=time.monotonic)
    restored: int = 0
    """Changelog records read so far."""
    values: dict[bytes, bytes] = field(default_factory=dict)
    """Buffered changelog values by key, in changelog order."""
    drops: list[tuple[str, int, int]] = field(default_factory=list)
    """Tombstones for values not in the buffer: (id, source offset, generation)."""
    seen_source: int = -1
    follow: bool = False
    """A warm standby's task: it never ends (``bridge/state/standby.py``)."""
    progress_ms: int | None = None
    """The owner's delivery cursor tick, from the latest progress record read."""

    @property
    def remaining(self) -> int:
        return max(0, self.end - self.position)

    @property
    def done(self) -> bool:
        return not self.follow and self.position >= self.end

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.part.partition, self.position)

    def feed(self, msgs: list[Message]) -> None:
        """Take changelog records (this partition's, in offset order): the hot loop of a
        restore, so a value costs a dict store and nothing else. Its source offset need
        not be read: appending it moves the store's ``last_source_offset``."""
        values, drops = self.values, self.drops
        for msg in msgs:
            key = msg.key()
            value = msg.value()
            if key == PROGRESS_KEY:
                if value is not None:
                    self.progress_ms = PROGRESS.unpack(value)[0]
                continue
            if value is not None:
                values[key] = value  # type: ignore[index]
                continue
            where = f"{self.topic}/{self.part.partition}/{msg.offset()}"
            source_offset, generation = parse_key(key, where)
            self.seen_source = max(self.seen_source, source_offset)
            # A value met by its tombstone is gone; the store's own copy of it too
            # (stored before its last flush, delivered after: not delivered again).
            gone = values.pop(key, None) is None  # type: ignore[arg-type]
            if gone or source_offset <= self.held_through:
                drops.append((_id_of(msg), source_offset, generation))
        if msgs:
            self.position = int(msgs[-1].offset() or 0) + 1
            self.restored += len(msgs)


def _id_of(msg: Message) -> str:
    for name, raw in headers_of(msg):
        if name == ID_HEADER and raw is not None:
            return raw.decode()
    return ""


def plan(
    part: PartitionState, changelog: ConsumerEdge, topic: str, timeout_s: float = 30.0
) -> RestoreTask | None:
    """What restoring ``part`` takes (rules 1-4 of the module docstring), or None;
    raises :class:`~delaybridge.errors.KafkaError` when the changelog's offsets are not
    answered within ``timeout_s``."""
    tp = TopicPartition(topic, part.partition)
    low, high = while_electing(
        lambda: changelog.get_watermark_offsets(tp, timeout=timeout_s),
        f"changelog {tp.topic}/{tp.partition} offsets",
        timeout_s,
    )
    mark = part.store.marks.changelog
    if mark is not None and mark + 1 >= low:
        if mark + 1 >= high:
            return None  # rule 2
        return RestoreTask(
            part, topic, mark + 1, high, held_through=part.store.last_source_offset
        )  # rule 1
    if high <= low:
        return None  # rule 4
    return RestoreTask(part, topic, low, high, rebuild=True)  # rule 3 (old copy set aside)


def apply(task: RestoreTask) -> None:
    """Move the buffer and the pending drops into the store; checkpoint the position."""
    store = task.part.store
    if task.drops:
        store.remove(task.drops, generation_of)
        task.drops = []
    if task.values:
        values = _not_held(task) if task.held_through >= 0 else list(task.values.values())
        if values:
            store.append_raw(values, skip=1)  # past the version byte
        task.values.clear()
    marks = store.marks
    seen = max(-1 if marks.source_seen is None else marks.source_seen, task.seen_source)
    store.flush(dataclasses.replace(marks, changelog=task.position - 1, source_seen=seen))


def _not_held(task: RestoreTask) -> list[bytes]:
    """The buffered values less the copies ``task``'s store holds pending already."""
    where = f"changelog {task.topic}/{task.part.partition}"
    maybe: dict[bytes, TimerRecord] = {}
    for key, value in task.values.items():
        if parse_key(key, where)[0] <= task.held_through:
            try:
                maybe[key] = decode(value, 1, Path(where))
            except IntegrityError:
                continue  # appended as it is: checked again when read for delivery
    if not maybe:
        return list(task.values.values())
    held = task.part.store.pending_with_ids({rec.id for rec in maybe.values()})
    have = {key_of(r.source_offset, generation_of(r)) for recs in held.values() for r in recs}
    have &= maybe.keys()
    if not have:
        return list(task.values.values())
    log.info(
        "%s: %d changelog values read again are held already (acknowledged after the "
        "store's last flush); not stored twice",
        task.part.name,
        len(have),
    )
    return [value for key, value in task.values.items() if key not in have]


class Restorer:
    """Runs every restoring partition's task through one changelog consumer."""

    def __init__(
        self,
        consumer: ConsumerEdge,
        buffer_records: int,
        new_consumer: Callable[[], ConsumerEdge] | None = None,
    ) -> None:
        """``new_consumer``: makes another changelog consumer like ``consumer``, for
        :meth:`renew`."""
        self.consumer = consumer
        self._buffer = buffer_records
        self._new_consumer = new_consumer
        self.tasks: dict[PartKey, RestoreTask] = {}

    def renew(self) -> None:
        """Go on with a new changelog consumer, every task from where it stands. A
        librdkafka consumer that lived through a broker frozen for longer than its
        request timeouts was seen unable to find a changelog partition's leader again
        (``_UNKNOWN_PARTITION`` after 30 s), while a new one found it at once."""
        if self._new_consumer is None:
            return
        try:
            self.consumer.close()
        except KafkaException as exc:
            log.debug("closing the changelog consumer: %s", exc)
        self.consumer = self._new_consumer()
        self._assign()

    def start(self, task: RestoreTask) -> None:
        self.tasks[task.part.key] = task
        self._assign()
        log.info(
            "restoring %s from %s offsets [%d, %d): %d records",
            task.part.name,
            task.topic,
            task.position,
            task.end,
            task.remaining,
        )

    def stop(self, key: PartKey) -> None:
        """Drop a task (its partition was revoked); the store keeps what was applied."""
        if self.tasks.pop(key, None) is not None:
            self._assign()

    def step(self, max_records: int) -> list[RestoreTask]:
        """Read up to ``max_records`` changelog records; returns the tasks that finished."""
        if not self.tasks:
            return []
        for task, msgs in self._read(max_records):
            if not task.done:
                task.feed(msgs)
                if len(task.values) >= self._buffer:
                    apply(task)
        finished = []
        for task in list(self.tasks.values()):
            if task.follow:
                continue
            if task.done or self._caught_up(task):
                apply(task)
                finished.append(task)
                del self.tasks[task.part.key]
        if finished:
            self._assign()
        return finished

    def lag(self, task: RestoreTask) -> int:
        """Changelog records ``task`` has not read yet (from cached watermarks)."""
        try:
            _low, high = self.consumer.get_watermark_offsets(task.tp, cached=True)
        except KafkaException:
            return 0
        return max(0, high - task.position)

    def _read(self, max_records: int) -> list[tuple[RestoreTask, list[Message]]]:
        """One consume() of up to ``max_records``, split by task (records in order)."""
        msgs = self.consumer.consume(max_records, timeout=0.05)
        if not msgs:
            return []
        if len(self.tasks) == 1 and not any(m.error() is not None for m in msgs):
            return [(next(iter(self.tasks.values())), msgs)]
        by_tp = {(task.topic, task.part.partition): task for task in self.tasks.values()}
        split: dict[PartKey, list[Message]] = {}
        for msg in msgs:
            err = msg.error()
            if err is not None:
                log.warning("changelog read: %s", err.str())
                continue
            split.setdefault((msg.topic() or "", msg.partition() or 0), []).append(msg)
        return [(by_tp[tp], part) for tp, part in split.items() if tp in by_tp]

    def _caught_up(self, task: RestoreTask) -> bool:
        """Compaction and transaction markers leave gaps: the consumer's position, not
        the last record's offset, says whether the end was reached."""
        (pos,) = self.consumer.position([TopicPartition(task.topic, task.part.partition)])
        if pos.offset >= task.end:
            task.position = max(task.position, task.end)
            return True
        return False

    def _assign(self) -> None:
        self.consumer.assign([task.tp for task in self.tasks.values()])

    def close(self) -> None:
        self.consumer.close()
