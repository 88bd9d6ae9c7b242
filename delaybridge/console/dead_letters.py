"""The dead-letter topic, read by the console: decoding a record, and a page of them.

A dead letter is the original record (key, value, headers) plus ``delay-error`` (a
stable reason code, :class:`~delaybridge.contract.reasons.Reason`),
``delay-error-detail`` and ``delay-origin`` (:mod:`delaybridge.contract.dead_letters`).
:func:`decode` splits those from the original headers.

:class:`DeadLetterReader` reads the topic with its own Kafka client, outside any group:
it ``assign()``s the partitions at the offsets it wants, never commits, and reads
``read_committed`` (in exactly-once mode a dead letter of an aborted transaction was
never a dead letter). A page walks back from the end: each partition's newest
``scan`` / partitions records before the cursor are read, decoded, filtered by reason
and merged newest first; the cursor (per partition, the oldest offset read) pages on
to older records. The work per page is bounded by ``scan`` whatever the topic's size.
"""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from delaybridge.connectors import KafkaClients, headers_of, wrap
from delaybridge.contract.dead_letters import HEADERS_DROPPED, VALUE_DROPPED
from delaybridge.contract.names import OUT_ERROR, OUT_ERROR_DETAIL, OUT_ORIGIN
from delaybridge.errors import DelayBridgeError

#: Records read per page at most (all partitions together).
DEFAULT_SCAN = 2_000
#: How long one page may take to read before it answers what it has.
READ_TIMEOUT_S = 10.0
UNKNOWN_REASON = "(none)"


def text(raw: bytes | None) -> str | None:
    """Header or key bytes as text: UTF-8, else ``base64:...`` (as the admin API shows them)."""
    if raw is None:
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return "base64:" + base64.b64encode(raw).decode()


@dataclass(frozen=True)
class DeadLetter:
    """One record of the dead-letter topic."""

    partition: int
    offset: int
    timestamp_ms: int
    reason: str
    detail: str | None
    origin: str | None
    key: str | None
    value: bytes | None
    #: The producer's own headers, in order (ours taken out).
    headers: list[tuple[str, str | None]]
    value_dropped_bytes: int | None = None
    headers_dropped: int | None = None

    @property
    def value_bytes(self) -> int | None:
        return None if self.value is None else len(self.value)


def decode(
    partition: int,
    offset: int,
    timestamp_ms: int,
    key: bytes | None,
    value: bytes | None,
    headers: list[tuple[str, bytes | None]],
) -> DeadLetter:
    """A dead-letter record as a :class:`DeadLetter`; never raises (bad bytes become text)."""
    ours: dict[str, str | None] = {}
    theirs: list[tuple[str, str | None]] = []
    for name, raw in headers:
        if name in (OUT_ERROR, OUT_ERROR_DETAIL, OUT_ORIGIN, VALUE_DROPPED, HEADERS_DROPPED):
            ours[name] = text(raw)  # the last one wins, as for any header we read
        else:
            theirs.append((name, text(raw)))
    return DeadLetter(
        partition=partition,
        offset=offset,
        timestamp_ms=timestamp_ms,
        reason=ours.get(OUT_ERROR) or UNKNOWN_REASON,
        detail=ours.get(OUT_ERROR_DETAIL),
        origin=ours.get(OUT_ORIGIN),
        key=text(key),
        value=value,
        headers=theirs,
        value_dropped_bytes=_int(ours.get(VALUE_DROPPED)),
        headers_dropped=_int(ours.get(HEADERS_DROPPED)),
    )


def _int(raw: str | None) -> int | None:
    try:
        return None if raw is None else int(raw)
    except ValueError:
        return None


@dataclass(frozen=True)
class Cursor:
    """Where the next (older) page ends: per partition, the first offset not to read."""

    before: dict[int, int]

    def encode(self) -> str:
        return ",".join(f"{p}:{o}" for p, o in sorted(self.before.items()))

    @classmethod
    def decode(cls, raw: str) -> Cursor:
        before: dict[int, int] = {}
        try:
            for part in raw.split(","):
                p, _, o = part.partition(":")
                before[int(p)] = int(o)
        except ValueError:
            raise DelayBridgeError(f"not a dead-letter cursor: {raw!r}") from None
        return cls(before)


@dataclass
class Page:
    letters: list[DeadLetter]
    #: Dead letters by reason among the records this page read (all reasons).
    scanned_by_reason: dict[str, int]
    scanned: int
    #: Records in the topic now (high minus low watermarks, all partitions).
    total: int
    cursor: Cursor | None
    partitions: int
    problems: list[str] = field(default_factory=list)


def page_from(
    read: Mapping[int, list[DeadLetter]],
    starts: Mapping[int, int],
    lows: Mapping[int, int],
    reason: str | None,
    limit: int,
) -> tuple[list[DeadLetter], dict[str, int], Cursor | None]:
    """Merge what each partition read (``read[p]``, from ``starts[p]``) into a page:
    the newest ``limit`` letters of ``reason`` (any when None), counts by reason, and
    the cursor of the next older page (None when nothing older is left)."""
    counts: dict[str, int] = {}
    matching: list[DeadLetter] = []
    for letters in read.values():
        for letter in letters:
            counts[letter.reason] = counts.get(letter.reason, 0) + 1
            if reason is None or letter.reason == reason:
                matching.append(letter)
    matching.sort(key=lambda d: (d.timestamp_ms, d.partition, d.offset), reverse=True)
    shown = matching[:limit]
    before: dict[int, int] = {}
    for p, start in starts.items():
        mine = [d.offset for d in shown if d.partition == p]
        left_out = any(d.partition == p for d in matching[limit:])
        if left_out and mine:
            before[p] = min(mine)  # the rest of what was read here comes next
        elif left_out:
            before[p] = max(d.offset for d in matching[limit:] if d.partition == p) + 1
        elif start > lows.get(p, 0):
            before[p] = start
    return shown, dict(sorted(counts.items())), Cursor(before) if before else None


class DeadLetterReader:
    """Reads pages of the dead-letter topic (thread-safe: one page at a time)."""

    def __init__(self, clients: KafkaClients, topic: str) -> None:
        self.topic = topic
        self._clients = clients
        self._consumer: Consumer | None = None
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            if self._consumer is not None:
                self._consumer.close()
                self._consumer = None

    def page(
        self,
        reason: str | None = None,
        cursor: Cursor | None = None,
        limit: int = 50,
        scan: int = DEFAULT_SCAN,
    ) -> Page:
        with self._lock:
            return self._page(reason, cursor, limit, scan)

    def _reader(self) -> Consumer:
        if self._consumer is None:
            self._consumer = self._clients.reader(
                {
                    # Reaching the end of a partition (the last stable offset, in
                    # read_committed) is an event, so a page never waits for records
                    # that are not there.
                    "enable.partition.eof": True,
                    "fetch.wait.max.ms": 50,
                }
            )
        return self._consumer

    def _page(self, reason: str | None, cursor: Cursor | None, limit: int, scan: int) -> Page:
        consumer = self._reader()
        try:
            meta = consumer.list_topics(self.topic, timeout=READ_TIMEOUT_S).topics[self.topic]
        except KafkaException as exc:
            raise wrap(exc, f"dead-letter topic {self.topic!r}: no metadata") from exc
        except KeyError:
            raise DelayBridgeError(f"dead-letter topic {self.topic!r} does not exist") from None
        if meta.error is not None:
            raise DelayBridgeError(f"dead-letter topic {self.topic!r}: {meta.error.str()}")
        parts = sorted(meta.partitions)
        per_partition = max(1, scan // max(1, len(parts)))
        lows: dict[int, int] = {}
        starts: dict[int, int] = {}
        ends: dict[int, int] = {}
        total = 0
        for p in parts:
            low, high = consumer.get_watermark_offsets(
                TopicPartition(self.topic, p), timeout=READ_TIMEOUT_S
            )
            total += high - low
            end = high if cursor is None else min(high, cursor.before.get(p, low))
            lows[p] = low
            ends[p] = end
            starts[p] = max(low, end - per_partition)
        read, problems = self._read(consumer, starts, ends)
        shown, counts, nxt = page_from(read, starts, lows, reason, limit)
        return Page(
            letters=shown,
            scanned_by_reason=counts,
            scanned=sum(len(v) for v in read.values()),
            total=total,
            cursor=nxt,
            partitions=len(parts),
            problems=problems,
        )

    def _read(
        self, consumer: Consumer, starts: dict[int, int], ends: dict[int, int]
    ) -> tuple[dict[int, list[DeadLetter]], list[str]]:
        todo = {p for p in starts if starts[p] < ends[p]}
        read: dict[int, list[DeadLetter]] = {p: [] for p in starts}
        problems: list[str] = []
        if not todo:
            return read, problems
        consumer.assign([TopicPartition(self.topic, p, starts[p]) for p in sorted(todo)])
        deadline = time.monotonic() + READ_TIMEOUT_S
        try:
            while todo and time.monotonic() < deadline:
                for msg in consumer.consume(500, timeout=0.2):
                    self._take(msg, read, ends, todo, problems)
        finally:
            consumer.unassign()
        if todo:
            left = ", ".join(str(p) for p in sorted(todo))
            problems.append(f"partitions {left} not read to the end in {READ_TIMEOUT_S:g} s")
        return read, problems

    @staticmethod
    def _take(
        msg: Message,
        read: dict[int, list[DeadLetter]],
        ends: dict[int, int],
        todo: set[int],
        problems: list[str],
    ) -> None:
        p = msg.partition()
        err = msg.error()
        if p is None:
            return
        if err is not None:
            if err.code() == KafkaError._PARTITION_EOF:
                todo.discard(p)
            else:
                problems.append(f"partition {p}: {err.str()}")
                todo.discard(p)
            return
        offset = msg.offset() or 0
        if offset < ends[p]:
            letter = decode(p, offset, msg.timestamp()[1], msg.key(), msg.value(), headers_of(msg))
            read[p].append(letter)
        if offset + 1 >= ends[p]:
            todo.discard(p)
