"""The sidecar: delay topics in, due messages out, on one owner thread.

One loop turn (:meth:`Service._turn`):

1. run the operator's commands queued by the HTTP thread (:class:`Control` calls);
2. consume a batch from the delay topics (rebalance callbacks run here: an assigned
   partition's store is opened/recovered, a revoked one drained, flushed and closed);
3. ingest it: schedules into the stores, cancels to the cancel topic, bad input to the
   dead-letter topic (``bridge/ingest.py``);
4. apply cancels read from the cancel topic to every store (``bridge/cancels.py``);
5. deliver what is due, within the in-flight bound (``bridge/delivery.py``);
6. every ``flush_interval_ms``: flush the stores, then commit the delay-topic offsets
   they cover (never ahead of the data, DESIGN §4); refresh metrics and flow control.

SIGTERM (or :meth:`stop`) ends the loop: ingest stops, in-flight deliveries are awaited
for up to ``shutdown_grace_ms``, stores are flushed, offsets committed, clients closed.
Every store is touched only by this thread; the HTTP thread talks to it through
:class:`Control`, whose calls are queued and answered between turns.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, TypeVar

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from delaybridge.bridge.cancels import CancelFeed, CancelLedger, CancelRequest, apply_cancels
from delaybridge.bridge.control import ControlTimeout, Direction
from delaybridge.bridge.delivery import Deliverer
from delaybridge.bridge.headers import HeaderRules
from delaybridge.bridge.ingest import Ingestor, PartKey
from delaybridge.bridge.metrics import Metrics
from delaybridge.bridge.partition import PartitionState, open_partition
from delaybridge.bridge.settings import Settings
from delaybridge.bridge.status import partition_stats, record_json
from delaybridge.connectors.kafka import ensure_topics, make_admin, make_consumer, make_producer
from delaybridge.errors import ConfigError
from delaybridge.timerlog import SYSTEM_CLOCK, Clock, StoreSettings

log = logging.getLogger(__name__)
T = TypeVar("T")
_CONTROL_TIMEOUT_S = 10.0
_STORE_DELAY_MARGIN_MS = 7 * 86_400_000  # producers' clocks may run ahead of ours


class Service:
    """The running sidecar. Build it, call :meth:`run` (blocks), :meth:`stop` from anywhere."""

    def __init__(self, settings: Settings, clock: Clock = SYSTEM_CLOCK) -> None:
        if settings.delivery.exactly_once:
            raise ConfigError("delivery.exactly_once=true is not implemented yet; see README")
        self.settings = settings
        self.clock = clock
        self.metrics = Metrics()
        defaults = StoreSettings()
        self.store_settings = StoreSettings(
            tick_ms=settings.store.tick_ms,
            wheel_slots=settings.store.wheel_slots or defaults.wheel_slots,
            max_delay_ms=settings.store.max_delay_ms + _STORE_DELAY_MARGIN_MS,
        )
        self.store_settings.validate()
        self.rules = HeaderRules.from_strings(
            settings.delay_levels,
            settings.store.max_delay_ms,
            settings.routes,
            settings.delay_topics,
        )
        self.parts: dict[PartKey, PartitionState] = {}
        self._commands: queue.Queue[tuple[Callable[[], Any], Future[Any]]] = queue.Queue()
        self._stop = threading.Event()
        self._paused: set[Direction] = set()
        self._backpressure = False
        self._rebalanced = False
        self._heartbeat_s = time.monotonic()
        self._consumer: Consumer | None = None
        self._producer: Producer | None = None
        self._feed: CancelFeed | None = None
        self._deliverer: Deliverer | None = None
        self._ingestor: Ingestor | None = None
        self._cancels = CancelLedger(self.store_settings.cancel_grace_ms)

    # -- life cycle ---------------------------------------------------------------------

    def stop(self) -> None:
        """Ask the loop to drain and return; safe from any thread or signal handler."""
        self._stop.set()

    def run(self, on_ready: Callable[[], None] | None = None) -> None:
        s = self.settings
        s.store.data_dir.mkdir(parents=True, exist_ok=True)
        ensure_topics(
            make_admin(s.kafka),
            {
                s.dead_letter_topic: {"max.message.bytes": "10485760"},
                s.cancel_topic: {"retention.ms": str(7 * 86_400_000)},
            },
        )
        producer = make_producer(
            s.kafka,
            **{
                "linger.ms": s.delivery.linger_ms,
                "compression.type": s.delivery.compression_type,
                "allow.auto.create.topics": False,
                "topic.metadata.propagation.max.ms": 5_000,
                "message.max.bytes": 10_485_760,
                "queue.buffering.max.messages": max(100_000, 2 * s.delivery.max_in_flight_records),
                # In flight is bounded by max_in_flight_records; cap the bytes too.
                "queue.buffering.max.kbytes": 65_536,
            },
        )
        self._producer = producer
        self._deliverer = Deliverer(producer, s.delivery, s.dead_letter_topic, self.clock)
        self._ingestor = Ingestor(self.rules, producer, s.dead_letter_topic, s.cancel_topic)
        self._feed = CancelFeed(s.kafka, s.cancel_topic, self.store_settings.cancel_grace_ms)
        self._feed.start(self.clock.now_ms(), timeout_s=30)
        # A shallow prefetch queue: the store, not librdkafka, is where records wait
        # (librdkafka's default of 64 MiB per partition showed in the 1M-tick RSS).
        consumer = make_consumer(
            s.kafka, **{"fetch.wait.max.ms": 50, "queued.max.messages.kbytes": 8192}
        )
        self._consumer = consumer
        consumer.subscribe(
            s.subscription(),
            on_assign=self._on_assign,
            on_revoke=self._on_revoke,
            on_lost=self._on_lost,
        )
        log.info(
            "sidecar started: delay topics %s, group %s, data in %s",
            s.subscription(),
            s.kafka.group_id,
            s.store.data_dir,
        )
        if on_ready is not None:
            on_ready()
        next_flush = time.monotonic()
        try:
            while not self._stop.is_set():
                self._turn()
                if time.monotonic() >= next_flush:
                    self._flush_and_commit()
                    self._refresh()
                    next_flush = time.monotonic() + s.store.flush_interval_ms / 1000
        finally:
            self._shutdown()

    def _turn(self) -> None:
        assert self._consumer and self._producer and self._deliverer and self._ingestor
        assert self._feed
        self._heartbeat_s = time.monotonic()
        self._run_commands()
        messages = self._consumer.consume(
            self.settings.delivery.batch_max_records, timeout=self._poll_timeout_s()
        )
        if messages:
            self._ingestor.handle(messages, self.parts)
        cancels = self._feed.poll(self.clock.now_ms())
        if cancels:
            self._cancels.apply(self.parts.values(), cancels, self.clock.now_ms())
        if Direction.DEQUEUE not in self._paused:
            self._deliverer.pump(self.parts.values())
        self._producer.poll(0)

    def _poll_timeout_s(self) -> float:
        assert self._deliverer is not None
        if self._deliverer.in_flight or any(p.held for p in self.parts.values()):
            return 0.005
        now = self.clock.now_ms()
        wake = now + self.settings.store.tick_ms
        for part in self.parts.values():
            due = part.store.next_due_ms()
            if due is not None:
                wake = min(wake, due)
        retry = self._deliverer.next_retry_ms()
        if retry is not None:
            wake = min(wake, retry)
        return max(0.0, min(wake - now, self.settings.store.flush_interval_ms) / 1000)

    def _flush_and_commit(self) -> None:
        assert self._consumer is not None
        commits = []
        for part in self.parts.values():
            part.flush()
            position = part.offsets.take_commit()
            if position is not None:
                commits.append(TopicPartition(part.topic, part.partition, position))
        if commits:
            try:
                self._consumer.commit(offsets=commits, asynchronous=True)
            except KafkaException as exc:
                log.warning("offset commit failed (will retry at the next flush): %s", exc)

    def _shutdown(self) -> None:
        log.info(
            "draining: waiting for in-flight deliveries (grace %d ms)",
            self.settings.shutdown_grace_ms,
        )
        deadline = time.monotonic() + self.settings.shutdown_grace_ms / 1000
        if self._consumer is not None and self._consumer.assignment():
            self._consumer.pause(self._consumer.assignment())
        while (
            self._deliverer
            and self._deliverer.in_flight
            and self._producer
            and time.monotonic() < deadline
        ):
            self._producer.poll(0.05)
        if self._producer is not None:
            self._producer.flush(max(0.0, deadline - time.monotonic()))
        self._flush_and_commit()
        if self._consumer is not None:
            self._consumer.close()  # revokes: stores flushed, offsets committed, closed
        for key in list(self.parts):
            self._close_part(key, commit=False)
        if self._feed is not None:
            self._feed.close()
        log.info("sidecar stopped")

    # -- rebalancing (called inside consume(), on the owner thread) ----------------------

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        committed = consumer.committed(partitions, timeout=30) if partitions else []
        starts = []
        for tp in committed:
            key = (tp.topic, tp.partition)
            part = open_partition(
                self.settings.store.data_dir,
                tp.topic,
                tp.partition,
                self.store_settings,
                self.clock,
                tp.offset,
            )
            self.parts[key] = part
            self.metrics.store_recovered(tp.topic, tp.partition, part.recovery_s)
            if self._feed is not None and self._feed.recent:
                apply_cancels([part], [req for _, req in self._feed.recent])
            start = part.offsets.commit_position()
            starts.append(TopicPartition(tp.topic, tp.partition, start))
            log.info(
                "assigned %s: store recovered in %.2f s, %d pending, resuming at offset %d",
                part.name,
                part.recovery_s,
                part.store.stats().pending,
                start,
            )
        consumer.incremental_assign(starts)
        if self._paused & {Direction.ENQUEUE} or self._backpressure:
            consumer.pause(starts)
        self._rebalanced = True

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        keys = [(tp.topic, tp.partition) for tp in partitions]
        for key in keys:
            if key in self.parts:
                self.parts[key].revoking = True
        deadline = time.monotonic() + self.settings.shutdown_grace_ms / 1000
        while (
            self._producer is not None
            and time.monotonic() < deadline
            and any(self.parts[k].in_flight for k in keys if k in self.parts)
        ):
            self._producer.poll(0.05)
        for key in keys:
            self._close_part(key, commit=True)
        consumer.incremental_unassign(partitions)

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self._close_part((tp.topic, tp.partition), commit=False)
        consumer.incremental_unassign(partitions)

    def _close_part(self, key: PartKey, *, commit: bool) -> None:
        part = self.parts.pop(key, None)
        if part is None:
            return
        part.flush()
        position = part.offsets.take_commit()
        if commit and position is not None and self._consumer is not None:
            try:
                self._consumer.commit(
                    offsets=[TopicPartition(part.topic, part.partition, position)],
                    asynchronous=False,
                )
            except KafkaException as exc:
                log.warning("commit on revoke of %s failed: %s", part.name, exc)
        part.close()
        self.metrics.forget_partition(part.topic, part.partition)
        log.info("released %s", part.name)

    # -- metrics and flow control ---------------------------------------------------------

    def _refresh(self) -> None:
        assert self._consumer is not None and self._deliverer is not None
        assert self._ingestor is not None
        m = self.metrics
        ing = self._ingestor
        for topic, n in ing.enqueued.items():
            m.enqueued(topic, n)
        for reason, n in ing.dead_lettered.items():
            m.dead_lettered(reason, n)
        ing.enqueued.clear()
        ing.dead_lettered.clear()
        done = self._deliverer.drain_counters()
        for topic, n in done.delivered.items():
            m.delivered(topic, n)
        for reason, n in done.dead_lettered.items():
            m.dead_lettered(reason, n)
        for reason, n in done.retries.items():
            m.delivery_retried(reason, n)
        if done.lateness_ms:
            m.observe_lateness_ms(done.lateness_ms)
        matched, unknown = self._cancels.drain()
        m.cancelled(matched)
        m.cancel_unknown(unknown)
        pending: dict[str, int] = {}
        total_pending = 0
        lag_s = 0.0
        for part in self.parts.values():
            stats = part.store.stats()
            total_pending += stats.pending
            for topic, n in stats.pending_by_topic.items():
                pending[topic] = pending.get(topic, 0) + n
            lag_s = max(lag_s, stats.read_lag_ms / 1000)
            m.set_store_bytes(part.topic, part.partition, stats.bytes_on_disk)
            if stats.rolled_total > part.rolled_seen:
                m.rolled(stats.rolled_total - part.rolled_seen)
                part.rolled_seen = stats.rolled_total
            try:
                _low, high = self._consumer.get_watermark_offsets(
                    TopicPartition(part.topic, part.partition), cached=True
                )
                m.set_consumer_lag(
                    part.topic, part.partition, max(0, high - 1 - stats.last_source_offset)
                )
            except KafkaException:
                pass  # no fetch response cached yet: the gauge keeps its last value
        m.set_pending(pending)
        m.set_wheel_read_lag_seconds(lag_s)
        backlog = self._deliverer.in_flight + sum(len(p.held) for p in self.parts.values())
        m.set_in_flight(self._deliverer.in_flight)
        m.set_delivery_backlog(backlog)
        m.set_assigned_partitions(len(self.parts))
        m.heartbeat()
        over = (
            total_pending > self.settings.store.max_pending_messages
            or backlog > self.settings.max_delivery_backlog
        )
        if over != self._backpressure:
            self._backpressure = over
            m.set_backpressure(over)
            if over:
                m.backpressure_paused()
                log.warning(
                    "flow control: pausing ingest (pending %d, backlog %d)", total_pending, backlog
                )
            else:
                log.info("flow control: resuming ingest")
            self._apply_pause()

    def _apply_pause(self) -> None:
        if self._consumer is None:
            return
        assignment = self._consumer.assignment()
        if not assignment:
            return
        if self._backpressure or Direction.ENQUEUE in self._paused:
            self._consumer.pause(assignment)
        else:
            self._consumer.resume(assignment)

    # -- Control (called from the HTTP thread) -------------------------------------------

    def _call(self, fn: Callable[[], T]) -> T:
        if threading.current_thread() is threading.main_thread() and self._consumer is None:
            return fn()
        future: Future[T] = Future()
        self._commands.put((fn, future))
        try:
            return future.result(timeout=_CONTROL_TIMEOUT_S)
        except FutureTimeout as exc:
            raise ControlTimeout(
                f"the service loop did not answer in {_CONTROL_TIMEOUT_S} s"
            ) from exc

    def _run_commands(self) -> None:
        while True:
            try:
                fn, future = self._commands.get_nowait()
            except queue.Empty:
                return
            try:
                future.set_result(fn())
            except Exception as exc:  # handed to the HTTP thread, which reports it
                future.set_exception(exc)

    def healthy(self) -> bool:
        return time.monotonic() - self._heartbeat_s < 60

    def ready(self) -> tuple[bool, str]:
        if self._consumer is None:
            return False, "starting"
        if not self._rebalanced:
            return False, "waiting for the consumer group to assign partitions"
        return True, ""

    def stats(self) -> dict[str, Any]:
        return self._call(
            lambda: {
                "group": self.settings.kafka.group_id,
                "paused": sorted(d.value for d in self._paused),
                "backpressure": self._backpressure,
                "in_flight": self._deliverer.in_flight if self._deliverer else 0,
                "partitions": [partition_stats(p) for p in self.parts.values()],
            }
        )

    def lookup(self, id: str) -> dict[str, Any] | None:
        def find() -> dict[str, Any] | None:
            for part in self.parts.values():
                found = part.store.lookup(id)
                if found is not None:
                    return record_json(part, found)
            return None

        return self._call(find)

    def cancel(self, id: str, target_topic: str | None) -> dict[str, Any]:
        def do() -> dict[str, Any]:
            assert self._producer is not None
            request = CancelRequest(id, target_topic, "admin-api")
            (matched,) = self._cancels.apply(self.parts.values(), [request], self.clock.now_ms())
            topic = self.settings.cancel_topic

            def on_delivery(err: Any, _msg: Any) -> None:
                if err is not None:
                    log.error("admin cancel of %r not published to %r: %s", id, topic, err.str())

            # Queued, not awaited: the owner thread must not block on the broker here.
            self._producer.produce(topic, request.encode(), id.encode(), on_delivery=on_delivery)
            return {
                "id": id,
                "target_topic": target_topic,
                "published": "queued",
                "matched_here": matched,
            }

        return self._call(do)

    def pause(self, what: Direction) -> None:
        self._call(lambda: self._set_paused(what, True))

    def resume(self, what: Direction) -> None:
        self._call(lambda: self._set_paused(what, False))

    def paused(self) -> set[Direction]:
        return set(self._paused)

    def _set_paused(self, what: Direction, on: bool) -> None:
        if on:
            self._paused.add(what)
        else:
            self._paused.discard(what)
        self.metrics.set_paused(self._paused)
        self._apply_pause()
