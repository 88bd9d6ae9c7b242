"""Due messages out: take bounded batches from the stores, produce, account for outcomes.

Per turn, :meth:`Deliverer.pump` fills each partition's
:class:`~delaybridge.bridge.partition.pipeline.DeliveryPipeline` from its store while fewer than
``max_in_flight_records`` are in flight (and the partition's unmarked records stay under
the same bound), and produces the held records in store order (due tick, then arrival:
FIFO per source partition within a tick). A million messages due in one tick therefore
stream out in bounded batches at producer speed, never all in memory.

First tries go out from the hot loop (:meth:`Deliverer._produce_run`); a first try that
fails becomes an :class:`~delaybridge.bridge.delivery.attempts.Attempt`, judged by the rules in
``bridge/delivery/attempts.py``: retried later (*parked* in the store, so the cursor moves on
and nothing waits in memory) or dead-lettered. Acks resolve their batch; the store's
cursor moves over a batch once every record of it and before it is resolved. A
recurring schedule's occurrence spawns the next one (``bridge/delivery/occurrences.py``).

In exactly-once mode a failed report does not run the rules: its transaction is
doomed, so the record is remembered (``bridge/produce/poison.py``) and judged when the restart
makes it due again, before anything is produced; a target that does not exist is
found from metadata before producing, never by failing a transaction.

Not thread-safe: the service's owner thread calls it; outcomes arrive from
``Outbox.poll`` on that thread.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from functools import partial

from confluent_kafka import KafkaError as RdKafkaError
from confluent_kafka import Message

from delaybridge.bridge.delivery.attempts import ATTEMPT_HEADERS, Attempt
from delaybridge.bridge.delivery.failure_rules import TOO_LARGE, judge
from delaybridge.bridge.delivery.occurrences import Spawner
from delaybridge.bridge.delivery.rate_limits import RateLimits
from delaybridge.bridge.observe.tally import Tally
from delaybridge.bridge.partition.pipeline import Batch
from delaybridge.bridge.partition.state import PartitionState, Role
from delaybridge.bridge.produce.outbox import Outbox
from delaybridge.bridge.produce.poison import ExactlyOnceGuard
from delaybridge.bridge.produce.resend import Resender
from delaybridge.bridge.produce.retry_queue import backoff_ms
from delaybridge.bridge.state.changelog import Changelog
from delaybridge.contract.classify import delivered_headers
from delaybridge.contract.dead_letters import dead_letter_headers, shrunk
from delaybridge.contract.names import SERIES_HEADER
from delaybridge.errors import DelayBridgeError
from delaybridge.settings import DeliverySettings
from delaybridge.timerlog import Clock, DueRecord

log = logging.getLogger(__name__)


class Deliverer:
    """Produces due records for every partition; one owner thread."""

    def __init__(
        self,
        outbox: Outbox,
        settings: DeliverySettings,
        dead_letter_topic: str,
        clock: Clock,
        tally: Tally,
        resender: Resender,
        changelog: Changelog | None = None,
        exactly_once: ExactlyOnceGuard | None = None,
    ) -> None:
        self._changelog = changelog
        self._eos = exactly_once
        self._outbox = outbox
        self._settings = settings
        self._dlt = dead_letter_topic
        self._clock = clock
        self._tally = tally
        self._limits = RateLimits(settings.rate_limits_per_s, time.monotonic())
        self._resender = resender
        self._until_ms: int | None = None
        self._horizon_ms: int | None = None
        self.series = Spawner(settings.series_misfire_ms, clock, tally, changelog)

    # -- the turn ---------------------------------------------------------------------

    def pump(
        self,
        parts: Iterable[PartitionState],
        until_ms: int | None = None,
        horizon_ms: int | None = None,
    ) -> int:
        """Produce what is due by ``until_ms`` (default: now; the cancel horizon's
        limit, ``bridge/cancels/horizon.py``), within the in-flight bound; what goes out
        due after ``horizon_ms`` (the horizon itself, when the bound let it pass) is
        counted. Returns records produced."""
        produced = 0
        limit = self._settings.max_in_flight_records
        outbox = self._outbox
        self._until_ms = until_ms
        self._horizon_ms = horizon_ms
        for part in parts:
            if part.role is not Role.ACTIVE:
                continue  # restoring: nothing of it goes out yet
            pipeline = part.pipeline
            while outbox.in_flight < limit:
                if pipeline.front() is None:
                    room = min(limit - outbox.in_flight, limit - pipeline.unmarked)
                    batch = min(self._settings.batch_max_records, room)
                    if room <= 0 or not pipeline.take(batch, until_ms):
                        break
                done, blocked = self._produce_held(part)
                produced += done
                if blocked:
                    break  # queue full or rate limited: the rest waits for the next turn
        self.series.spawn()  # the next occurrences of the series taken this turn
        return produced

    def _produce_held(self, part: PartitionState) -> tuple[int, bool]:
        """Produce the partition's held records in order. Returns (records handed over,
        blocked?): the producer queue is full, a rate limit said wait, or one was early."""
        pipeline = part.pipeline
        now_ms = self._clock.now_ms()
        gate_ms = now_ms  # nothing due after it goes out: now, or the horizon's limit
        if self._until_ms is not None and self._until_ms < now_ms:
            gate_ms = self._until_ms
        horizon = self._horizon_ms
        past_from = horizon if horizon is not None and gate_ms > horizon else None
        now_s = time.monotonic()
        done = 0
        while (run := pipeline.front()) is not None:
            start = run.produced
            sent = self._produce_run(
                part, run.records, start, run.batch, now_ms, now_s, gate_ms, past_from
            )
            pipeline.produced(sent)
            done += sent
            if start + sent < len(run.records):
                return done, True
        return done, False

    def _produce_run(
        self,
        part: PartitionState,
        records: list[DueRecord],
        start: int,
        batch: Batch,
        now_ms: int,
        now_s: float,
        gate_ms: int,
        past_from: int | None,
    ) -> int:
        """The hot loop: produce ``records[start:]``; returns how many went out. Nothing
        due after ``gate_ms`` goes out; what is due after ``past_from`` (the cancel
        horizon, when its bound let delivery pass it) is counted."""
        limits = self._limits if self._limits else None  # __bool__ once, not per record
        send = self._outbox.send
        first_outcome = self._first_outcome
        prefix = part.origin_prefix
        lateness = self._tally.lateness_ms
        eos = self._eos
        for i in range(start, len(records)):
            due = records[i]
            rec = due.record
            if limits is not None and not limits.allow(rec.target_topic, now_s):
                return i - start
            if gate_ms < rec.due_ms:  # the store must never hand out early records
                self._tally.early += 1
                early_ms = rec.due_ms - gate_ms
                log.error("store handed out %s %d ms early; holding it", rec.id, early_ms)
                return i - start
            if past_from is not None and rec.due_ms > past_from:
                self._tally.delivered_past_horizon += 1
            if rec.headers and rec.headers[-1][0] in ATTEMPT_HEADERS:  # see ATTEMPT_HEADERS
                if not self._send(Attempt.of(part, due, batch)):
                    return i - start
                if rec.headers[-1][0] == SERIES_HEADER:  # a first try: spawn the next
                    self.series.taken(part, rec, now_ms)
                continue
            if eos is not None and self._eos_failed(part, due, batch, now_s):
                continue
            headers = delivered_headers(
                rec.headers, rec.id, prefix + str(rec.source_offset), rec.due_ms
            )
            partition = rec.target_partition if rec.target_partition >= 0 else None
            on_delivery = partial(first_outcome, part, due, batch)
            if not send(rec.target_topic, rec.value, rec.key, headers, on_delivery, partition):
                return i - start
            # The record's timestamp (CreateTime) is now: what its consumers will see.
            # Counted from when it could first go out: a message sent already past due
            # and delivered at once is on time (as the reconciliation counts it).
            sent = rec.source_timestamp_ms if rec.source_timestamp_ms < now_ms else now_ms
            lateness.append(now_ms - (rec.due_ms if rec.due_ms >= sent else sent))
        return len(records) - start

    def _first_outcome(
        self,
        part: PartitionState,
        due: DueRecord,
        batch: Batch,
        err: RdKafkaError | None,
        msg: Message | None,
    ) -> None:
        """The delivery report of a first try: no Attempt is built unless it failed."""
        if err is None:
            delivered = self._tally.delivered
            topic = due.record.target_topic
            delivered[topic] = delivered.get(topic, 0) + 1
            part.pipeline.resolve(batch)
            if self._changelog is not None:
                self._changelog.removed(part, due.record)
        else:
            self._outcome(Attempt.of(part, due, batch), err, msg)

    # -- exactly-once ---------------------------------------------------------------------
    def _eos_failed(self, part: PartitionState, due: DueRecord, batch: Batch, now_s: float) -> bool:
        """A record remembered as failed, or whose target does not exist: judged now,
        without producing it (True); False: produce it."""
        assert self._eos is not None
        found = self._eos.before_produce(part.key, due.record, False, now_s)
        if found is None:
            return False
        self._failed(Attempt.of(part, due, batch), found[0])
        return True

    # -- attempts -------------------------------------------------------------------------
    def _send(self, attempt: Attempt) -> bool:
        """Produce an attempt (to its target, or to the dead-letter topic once it is
        bound there); False when the producer queue is full (nothing sent)."""
        rec = attempt.due.record
        attempt.expire(self._clock.now_ms())  # past its deadline: a dead letter instead
        if self._eos is not None and self._eos_refused(attempt):
            return True
        headers = delivered_headers(attempt.headers, rec.id, attempt.origin, attempt.due_ms)
        on_delivery = partial(self._outcome, attempt)
        if attempt.dead_letter is None:
            partition = rec.target_partition if rec.target_partition >= 0 else None
            return self._outbox.send(
                rec.target_topic, rec.value, rec.key, headers, on_delivery, partition
            )
        reason, detail = attempt.dead_letter
        headers = dead_letter_headers(headers, reason, detail, attempt.origin)
        value = rec.value
        if attempt.shrink:
            value, headers = None, shrunk(headers, rec.value, attempt.shrink)
        return self._outbox.send(self._dlt, value, rec.key, headers, on_delivery)

    def _eos_refused(self, attempt: Attempt) -> bool:
        """:meth:`_eos_failed` for an attempt (a parked retry, a dead letter)."""
        assert self._eos is not None
        dlt = attempt.dead_letter is not None
        found = self._eos.before_produce(attempt.part.key, attempt.due.record, dlt)
        if found is None:
            return False
        attempt.shrink = max(attempt.shrink, found[1])
        if found[0].code() == RdKafkaError._PURGE_QUEUE:
            return False  # purged by another record's failure: again, at its step
        self._failed(attempt, found[0])
        return True

    def _outcome(self, attempt: Attempt, err: RdKafkaError | None, _msg: Message | None) -> None:
        """The delivery report of an attempt (rules: ``bridge/delivery/attempts.py``)."""
        if err is None:
            if attempt.dead_letter is None:
                self._tally.delivered[attempt.due.record.target_topic] += 1
            else:
                self._tally.dead_lettered[attempt.dead_letter[0]] += 1
            attempt.part.pipeline.resolve(attempt.batch)
            if self._changelog is not None:
                self._changelog.removed(attempt.part, attempt.due.record)
            return
        if self._eos is not None:  # its transaction is doomed: judged after the restart
            dlt = attempt.dead_letter is not None
            self._eos.remember(attempt.part.key, attempt.due.record, dlt, err, attempt.shrink)
            return
        self._failed(attempt, err)

    def _failed(self, attempt: Attempt, err: RdKafkaError) -> None:
        """The rules for a failed attempt: retry later, shrink, or dead-letter."""
        now_ms = self._clock.now_ms()
        if not attempt.failures:
            attempt.first_failure_ms = now_ms
        attempt.failures += 1
        if attempt.dead_letter is not None:
            if err.code() in TOO_LARGE and attempt.shrink < 2:
                attempt.shrink += 1
                log.warning(
                    "dead-letter topic %r refused %s as too large; shrinking it",
                    self._dlt,
                    attempt.due.record.id,
                )
                self._resend(attempt)
                return
            log.error(
                "dead-letter topic %r refused %s: %s; retrying later",
                self._dlt,
                attempt.due.record.id,
                err.str(),
            )
            self._park(attempt)
            return
        verdict = judge(err, attempt, now_ms, self._settings)
        if verdict.retry:
            self._tally.retries[verdict.reason] += 1
            self._park(attempt)
            return
        attempt.dead_letter = (verdict.reason, verdict.detail)
        attempt.failures = 0
        self._resend(attempt)

    def _resend(self, attempt: Attempt) -> None:
        if not self._send(attempt):
            self._park(attempt)

    def _park(self, attempt: Attempt) -> None:
        """Retry after an exponential backoff (0.5 s doubling to 30 s), waiting in the
        store (see ``bridge/delivery/attempts.py``); in memory if the store cannot take it."""
        at_ms = self._clock.now_ms() + backoff_ms(attempt.failures)
        if attempt.part.closed:
            return  # its partition moved away; the next owner delivers it
        part = attempt.part
        parked = attempt.parked(at_ms)
        try:
            encoded = part.store.append([parked])
        except (OSError, DelayBridgeError) as exc:
            log.warning(
                "cannot park %s in its store (%s); retrying from memory", attempt.origin, exc
            )
            self._resender.later(attempt.failures, partial(self._retry, attempt))
            return
        part.pipeline.resolve(attempt.batch)
        if self._changelog is not None:  # the new copy, then the old one's tombstone
            self._changelog.moved(part, attempt.due.record, [parked], encoded)

    def _retry(self, attempt: Attempt) -> bool:
        return attempt.part.closed or self._send(attempt)  # moved: the next owner sends it
