"""Delay-topic records in: every record ends in exactly one place.

:meth:`Ingestor.handle` takes one consumed batch. Each record is classified, the whole
batch in one (compiled) pass that decides exactly as the contract's
:func:`~delaybridge.contract.classify.classify`
(:func:`~delaybridge.contract.classify.ingest_batch`: schedules come out as the
TimerRecords to store), and then:

- a :class:`Schedule` is appended to its partition's store (one ``append`` per run of
  schedules of a partition); one that replaces by id is then also published to the
  cancel topic as a replace (``bridge/cancels/requests.py``), once it is in the store;
- a :class:`Cancel` is re-published to the cancel topic (``bridge/cancels/requests.py``);
  one by id prefix first waits for its count against the cap, and is dead-lettered as
  ``prefix-over-cap`` above it (``bridge/cancels/prefix.py``);
- a :class:`Rejected` record goes, unchanged, to the dead-letter topic with its reason.

Whatever a record contains, nothing it makes the code raise escapes: anything raised
while deciding about it dead-letters it as ``internal-error`` (it is kept, never lost,
and the partition moves on); a record the store's format cannot hold, though classify
let it through, is dead-lettered alone while the rest of its run is stored.

Offsets stay contiguous: a batch's schedules are appended, one ``append`` per partition,
*before* any side write of the batch starts, so the commit position
(``bridge/commit/offsets.py``) never covers a schedule that is not in the store (commits happen
between batches, never inside one). Interleaved orders and cancels therefore cost one
append per batch, not one per order; the cancel topic's order does not matter (the
cancel rule compares delay-topic timestamps and offsets, ``bridge/cancels/requests.py``).
Schedules at offsets the store already holds (a re-read after a restart) are skipped;
cancels, replaces and dead letters are written again (harmless duplicates).

A run the store has no room for (disk full) is not lost: it is stored record by record
up to the first that does not fit, and :meth:`Ingestor.handle` returns where to read
its partition again from and what that record needs (its side writes from there on are
not started: they are read again too); the service seeks there and pauses ingest until
that much room is back (``bridge/flow.py``, ``bridge/disk_pause.py``). So the disk is
used to its last record, and a pause waits for the room of one record, not of a whole
fetch (a fetch of large records may be more than a small volume ever frees at once).
One owner thread.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any, NamedTuple

from confluent_kafka import KafkaError as RdKafkaError
from confluent_kafka import Message, TopicPartition

from delaybridge.bridge.cancels.own_horizons import OwnHorizons
from delaybridge.bridge.cancels.prefix import PrefixChecks
from delaybridge.bridge.cancels.requests import CancelRequest
from delaybridge.bridge.commit.holds import Hold
from delaybridge.bridge.ingest.side_writes import SideWrite, SideWriter
from delaybridge.bridge.observe.tally import Tally
from delaybridge.bridge.partition.state import PartitionState, PartKey, Role
from delaybridge.bridge.state.changelog import Changelog
from delaybridge.connectors import headers_of, is_fatal
from delaybridge.contract.classify import Cancel, Rejected, Run, ingest_batch
from delaybridge.contract.dead_letters import dead_letter_headers
from delaybridge.contract.names import DELAY_CANCEL_PREFIX
from delaybridge.contract.reasons import Reason
from delaybridge.contract.rules import HeaderRules
from delaybridge.durable import NO_SPACE
from delaybridge.timerlog import Clock, TimerRecord
from delaybridge.timerlog.errors import DelayTooLong, InvalidRecord

log = logging.getLogger(__name__)
RECORD_OVERHEAD_BYTES = 52 + 20 + 6
"""A stored record's bytes beyond its fields: the widest commit-log layout's fixed part,
its timer-log entry and its id-index entry."""


class NoRoom(NamedTuple):
    """A run of schedules the store had no room for."""

    position: TopicPartition
    """Where to read its partition again from (its first record)."""
    needed_bytes: int
    """About what the run takes on disk: ingest resumes once that much is free."""


class Ingestor:
    def __init__(
        self,
        rules: HeaderRules,
        side: SideWriter,
        dead_letter_topic: str,
        cancel_topic: str,
        tally: Tally,
        clock: Clock,
        changelog: Changelog | None = None,
        horizons: OwnHorizons | None = None,
        apply_here: Callable[[list[CancelRequest]], None] | None = None,
        on_fatal: Callable[[RdKafkaError], None] | None = None,
        checks: PrefixChecks | None = None,
    ) -> None:
        """``horizons``: told of every cancel written (the cancel horizon is on);
        ``apply_here``: applies a batch's cancels to this process's stores at once, so
        they need not come back from the cancel topic first (the horizon of an owned
        partition is then where it is read, ``bridge/cancels/own_horizons.py``);
        ``checks``: where a prefix cancel waits for its count against the cap before it
        is published or dead-lettered (``bridge/cancels/prefix.py``)."""
        self._checks = checks
        self._changelog = changelog
        self._horizons = horizons
        self._apply_here = apply_here
        self._on_fatal = on_fatal
        """Told of a fatal consume error: the consumer is dead (the service replaces it)."""
        self._requests: list[CancelRequest] = []
        self._rules = rules
        self._side = side
        self._dlt = dead_letter_topic
        self._cancel_topic = cancel_topic
        self._tally = tally
        self._clock = clock

    def handle(
        self, messages: list[Message], parts: Mapping[PartKey, PartitionState]
    ) -> list[NoRoom]:
        """Ingest one consumed batch. Returns the runs whose store had no room (where to
        read their partition again, what they need), empty when all went in."""
        plan = ingest_batch(messages, self._rules, self._clock.now_ms(), partial(_upto, parts))
        for msg in plan.errors:
            err = msg.error()
            if is_fatal(err) and self._on_fatal is not None:
                self._on_fatal(err)
            elif err.code() != RdKafkaError._PARTITION_EOF:
                log.warning("consume error on %s [%s]: %s", msg.topic(), msg.partition(), err.str())
        for key, msg, exc in plan.failures:
            log.error("deciding about %s/%s/%s failed", *key, msg.offset(), exc_info=exc)
        for key, msg, replace in plan.stored_replaces:  # stored before a crash; maybe not
            self._publish_cancel(parts[key], msg, replace, replace=True)  # its replace
        full: dict[PartKey, NoRoom] = {}
        for key, run in plan.runs.items():
            refused = self._store_run(parts[key], run)
            if refused is not None:
                full[key] = refused
        for key, writes in plan.later.items():
            refused = full.get(key)
            self._side_writes(
                parts[key], writes, None if refused is None else refused.position.offset
            )
        self._apply_requests()
        return list(full.values())

    def _side_writes(
        self,
        part: PartitionState,
        writes: list[tuple[Message, Cancel | Rejected]],
        rewind: int | None,
    ) -> None:
        """Start a partition's side writes of the batch, up to its rewind if it has one."""
        for msg, decision in writes:
            if rewind is not None and _offset(msg) >= rewind:
                return  # read again after the rewind, with the run before it
            if isinstance(decision, Cancel):
                if decision.prefix and self._checks is not None:
                    self._check_prefix(part, msg, decision, self._checks)
                else:
                    self._publish_cancel(part, msg, decision)
            else:
                self._dead_letter(part, msg, decision)

    def _check_prefix(
        self, part: PartitionState, msg: Message, cancel: Cancel, checks: PrefixChecks
    ) -> None:
        """A prefix cancel is published (and applied here) or dead-lettered once the
        matching messages of this process's stores are counted against the cap, a step
        per loop turn; its offset is held until then (``bridge/cancels/prefix.py``)."""
        offset = _offset(msg)

        def decide(count: int) -> None:
            if count <= checks.cap:
                self._publish_cancel(part, msg, cancel)
                self._apply_requests()
                return
            detail = (
                f"header {DELAY_CANCEL_PREFIX} {cancel.id[:200]!r}: more than {checks.cap} "
                "pending messages match in this replica's stores, above "
                "cancels.prefix_confirm_above; cancel them through the admin API (it asks "
                "to confirm) or by narrower prefixes"
            )
            self._dead_letter(part, msg, Rejected(Reason.PREFIX_OVER_CAP, detail))

        part.offsets.handled(offset)
        hold = Hold.of(part.offsets, offset)
        request = cancel_request(msg, cancel)
        checks.start(part.key, offset, request, decide, hold, lambda: not part.closed)

    def _apply_requests(self) -> None:
        """Apply the cancels published since the last call to this process's stores."""
        if self._requests:
            requests, self._requests = self._requests, []
            if self._apply_here is not None:
                self._apply_here(requests)

    def _store_run(self, part: PartitionState, run: Run | None) -> NoRoom | None:
        """Append a run; where to read again from, and what it needs, if the disk had
        no room."""
        if run is None:
            return None
        records, msgs, replaces = run
        try:
            encoded = part.store.append(records)
        except (InvalidRecord, DelayTooLong):
            return self._store_one_by_one(part, records, msgs, set(map(id, replaces)))
        except OSError as exc:
            if exc.errno not in NO_SPACE:
                raise
            # Flow control logs the pause, once (bridge/disk_pause.py).
            log.debug("%s: no room to store %d records (%s)", part.name, len(records), exc)
            return self._store_one_by_one(part, records, msgs, set(map(id, replaces)))
        part.offsets.handled(records[-1].source_offset)
        self._tally.enqueued[part.topic] += len(records)
        if self._changelog is not None:
            self._changelog.stored(part, records, encoded)
            self._changelog.removed_by_store(part)  # waiting cancels that matched at once
        self._publish_replaces(part, records, msgs, set(map(id, replaces)))
        return None

    def _store_one_by_one(
        self,
        part: PartitionState,
        records: list[TimerRecord],
        msgs: list[Message],
        replacing: set[int],
    ) -> NoRoom | None:
        """A record of the run does not fit the store (its format, or the disk): store
        the others one by one; dead-letter one the format cannot hold; stop at the first
        the disk has no room for, and return where to read again from."""
        for rec, msg in zip(records, msgs, strict=True):
            try:
                encoded = part.store.append([rec])
            except (InvalidRecord, DelayTooLong) as exc:
                reason = (
                    Reason.DELAY_TOO_LONG if isinstance(exc, DelayTooLong) else Reason.BAD_HEADER
                )
                self._dead_letter(part, msg, Rejected(reason, str(exc)))
                continue
            except OSError as exc:
                if exc.errno not in NO_SPACE:
                    raise
                position = TopicPartition(part.topic, part.partition, rec.source_offset)
                return NoRoom(position, _footprint([rec]))
            part.offsets.handled(rec.source_offset)
            self._tally.enqueued[part.topic] += 1
            if self._changelog is not None:
                self._changelog.stored(part, [rec], encoded)
                self._changelog.removed_by_store(part)
            self._publish_replaces(part, [rec], [msg], replacing)
        return None

    def _publish_replaces(
        self,
        part: PartitionState,
        records: list[TimerRecord],
        msgs: list[Message],
        replacing: set[int],
    ) -> None:
        """Publish the replaces of stored schedules (``replacing``: their messages' ids)."""
        if not replacing:
            return
        for rec, msg in zip(records, msgs, strict=True):
            if id(msg) in replacing:
                self._publish_cancel(part, msg, Cancel(rec.id, rec.target_topic), replace=True)

    def _publish_cancel(
        self, part: PartitionState, msg: Message, cancel: Cancel, *, replace: bool = False
    ) -> None:
        request = cancel_request(msg, cancel, replace)
        self._requests.append(request)
        offset = _offset(msg)
        write = SideWrite(
            part,
            offset,
            self._cancel_topic,
            cancel.id.encode(),
            request.encode(),
            [],
            shrinkable=False,
        )
        if self._horizons is not None:  # the horizon waits until it is read back
            self._horizons.cancel_written(part.key, offset, msg.timestamp()[1])
            write.on_ack = partial(self._horizons.cancel_acked, part.key, offset)
        self._side.write(write)
        self._tally.cancels_published += not replace

    def _dead_letter(self, part: PartitionState, msg: Message, rej: Rejected) -> None:
        origin = _origin(msg)
        log.info("dead-lettering %s: %s (%s)", origin, rej.reason.value, rej.detail[:200])
        headers = dead_letter_headers(_readable_headers(msg), rej.reason, rej.detail, origin)
        self._side.write(
            SideWrite(
                part, _offset(msg), self._dlt, msg.key(), msg.value(), headers, shrinkable=True
            )
        )
        self._tally.dead_lettered[rej.reason] += 1


def _footprint(records: Sequence[TimerRecord]) -> int:
    """About the bytes ``records`` take in a store (fields, entries, index)."""
    total = 0
    for r in records:
        total += len(r.id) + len(r.target_topic) + len(r.key or b"") + len(r.value or b"")
        total += sum(len(name) + len(value or b"") + 6 for name, value in r.headers)
    return total + RECORD_OVERHEAD_BYTES * len(records)


def _readable_headers(msg: Message) -> list[tuple[str, bytes | None]]:
    """The record's headers for its dead letter; none if librdkafka cannot read them (a
    header name that is not UTF-8 raises): the record was rejected for that, as an
    internal error naming it, and must reach the dead-letter topic all the same."""
    try:
        return headers_of(msg)
    except Exception:
        return []


def cancel_request(msg: Message, cancel: Cancel, replace: bool = False) -> CancelRequest:
    """The cancel-topic record of a cancel read from ``msg``, or of the replace of the
    schedule ``msg`` holds: sent at the record's time, from its origin."""
    ts = msg.timestamp()[1]
    return CancelRequest(cancel.id, cancel.target_topic, _origin(msg), ts, replace, cancel.prefix)


def _offset(msg: Message) -> int:
    offset: Any = msg.offset()
    return int(offset)


def _origin(msg: Message) -> str:
    return f"{msg.topic()}/{msg.partition()}/{msg.offset()}"


def _upto(parts: Mapping[PartKey, PartitionState], key: PartKey) -> int | None:
    """The highest offset of ``key`` already stored, or None when its records are not
    ingested now (revoked meanwhile -- the next owner reads it -- or still restoring)."""
    part = parts.get(key)
    if part is None or part.revoking or part.role is not Role.ACTIVE:
        return None
    return part.stored_upto
