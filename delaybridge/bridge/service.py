"""The sidecar: delay topics in, due messages out, on one owner thread.

One loop turn (:meth:`Service.turn`):

1. run the operator's commands queued by the HTTP thread (``bridge/admin/commands.py``);
2. consume a batch from the delay topics (rebalance callbacks run here: an assigned
   partition's store is opened/recovered, a revoked one drained, flushed and closed:
   ``bridge/ownership.py``);
3. ingest it: schedules into the stores, cancels to the cancel topic, bad input to the
   dead-letter topic (``bridge/ingest/ingestor.py``);
4. apply cancels read from the cancel topic to every store (``bridge/cancels/requests.py``);
5. restore a slice of every partition still restoring from its changelog
   (``bridge/state/restore_hook.py``), retry what failed and is due again
   (``bridge/produce/retry_queue.py``), then deliver what is due, within the in-flight bound
   (``bridge/delivery/deliverer.py``);
6. serve delivery reports (``bridge/produce/outbox.py``): acks resolve batches, failures retry.

Every ``flush_interval_ms``: flush the stores, then commit the delay-topic offsets they
cover (never ahead of the data, DESIGN §4) — in exactly-once mode, every
``transaction_interval_ms``: commit the transaction, then flush (``exactly_once.py``);
publish metrics (``telemetry.py``), re-evaluate flow control (``flow.py``).

SIGTERM (or :meth:`stop`) ends the loop: ingest stops, in-flight deliveries are awaited
for up to ``shutdown_grace_ms``, stores flushed, offsets committed, clients closed. Only
this thread touches stores; the HTTP thread goes through :attr:`Service.control`.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from collections.abc import Callable
from functools import partial

from confluent_kafka import KafkaError as RdKafkaError
from confluent_kafka import TopicPartition

from delaybridge.bridge.admin.commands import AdminControl
from delaybridge.bridge.cancels.feed import CancelFeed
from delaybridge.bridge.cancels.requests import CancelLedger
from delaybridge.bridge.commit.exactly_once import ExactlyOnce, eos_parts
from delaybridge.bridge.commit.results import CommitResults
from delaybridge.bridge.delivery.deliverer import Deliverer
from delaybridge.bridge.flow import FlowControl
from delaybridge.bridge.ingest.ingestor import Ingestor
from delaybridge.bridge.ingest.side_writes import SideWriter
from delaybridge.bridge.observe.metrics import Metrics
from delaybridge.bridge.observe.tally import Tally
from delaybridge.bridge.ownership import Partitions
from delaybridge.bridge.produce.outbox import Outbox
from delaybridge.bridge.produce.retry_queue import RetryQueue
from delaybridge.bridge.state import assembly
from delaybridge.bridge.telemetry import Telemetry
from delaybridge.bridge.tuning import CONSUMER_OVERRIDES, producer_overrides, store_settings_for
from delaybridge.bridge.workers.identity import suffix
from delaybridge.connectors import KafkaClients, ensure_topics
from delaybridge.connectors.edge import ClientFactory
from delaybridge.contract.rules import HeaderRules
from delaybridge.settings import Settings
from delaybridge.timerlog import SYSTEM_CLOCK, Clock

log = logging.getLogger(__name__)


class Service:
    """The running sidecar. Build it, call :meth:`run` (blocks), :meth:`stop` from anywhere.

    ``clients``: the Kafka clients (default: from ``settings.kafka``; tests: fakes);
    ``worker``: this worker process's index (``workers.py``). Building it makes no
    network call; :meth:`run` creates topics and joins the group.
    """

    def __init__(
        self,
        settings: Settings,
        clock: Clock = SYSTEM_CLOCK,
        clients: ClientFactory | None = None,
        worker: int = 0,
    ) -> None:
        s = settings
        self.settings = settings
        self.clock = clock
        self.metrics = Metrics()
        self.store_settings = store_settings_for(s)
        rules = HeaderRules.from_settings(s)
        self._clients: ClientFactory = clients or KafkaClients(s.kafka)
        self.tally = Tally()
        self.retries = RetryQueue()
        on_error = {"error_cb": self._client_error}
        make_producer = partial(self._clients.producer, producer_overrides(s) | on_error)
        self.outbox = Outbox(make_producer())
        self.commits = CommitResults()  # refused offset commits are sent again (commits.py)
        self.consumer = self._clients.consumer(CONSUMER_OVERRIDES | on_error | self.commits.conf)
        self.transactions, poisoned, guard = eos_parts(
            s, self.outbox, self.consumer, self.metrics, make_producer
        )
        self.flow = FlowControl(
            s.store.max_pending_messages,
            s.max_delivery_backlog,
            s.store.min_free_bytes,
            self._flow_changed,
        )
        self.flow.attach(self.consumer)
        grace_ms = self.store_settings.cancel_grace_ms
        feed_consumer = self._clients.consumer(
            {"group.id": f"{s.kafka.group_id}.cancel-feed"}, group=False
        )
        keep_ms = grace_ms + 2 * s.kafka.session_timeout_ms  # bridge/cancels/feed.py says why
        self.feed = CancelFeed(
            feed_consumer,
            s.cancel_topic,
            keep_ms,
            self.tally,
            s.store.data_dir,
            f"cancel-feed{suffix(worker)}.json",
            grace_ms,
        )
        self.admin = self._clients.admin()
        state = assembly.build(
            s,
            self._clients,
            self.outbox,
            self.retries,
            clock,
            self.admin,
            self.flow,
            self.store_settings,
        )
        self.changelog = state.changelog if state is not None else None
        removed = self.changelog.removed_by_store if self.changelog is not None else None
        self.ledger = CancelLedger(grace_ms, self.tally, on_removed=removed)
        self.partitions = Partitions(
            s.store.data_dir,
            self.store_settings,
            clock,
            self.outbox,
            self.metrics,
            self.flow,
            s.shutdown_grace_ms / 1000,
        )
        self.partitions.feed = self.feed
        self.commits.owned = self.partitions.by_key
        if state is not None:
            self.partitions.restoring = state.restoring
            self.partitions.standbys = state.standbys
        dlt = s.dead_letter_topic
        side = SideWriter(self.outbox, self.retries, clock, poisoned)
        self.ingestor = Ingestor(
            rules, side, dlt, s.cancel_topic, self.tally, clock, self.changelog
        )
        self.deliverer = Deliverer(
            self.outbox, s.delivery, dlt, clock, self.tally, self.retries, self.changelog, guard
        )
        txns = self.transactions
        changelog = self.changelog
        self.exactly_once = (
            None
            if txns is None or changelog is None
            else ExactlyOnce(self.partitions, self.outbox, txns, changelog)
        )
        self.partitions.transaction = self.exactly_once
        self.telemetry = Telemetry(
            self.metrics,
            self.tally,
            self.partitions.restoring,
            self.partitions.standbys,
            self.feed.waits,
        )
        self.control = AdminControl(
            s.kafka.group_id,
            s.cancel_topic,
            self.partitions,
            self.ledger,
            self.outbox,
            self.flow,
            clock,
        )
        self._stop = threading.Event()
        self._checkpoint_ms = (
            s.delivery.transaction_interval_ms if self.exactly_once else s.store.flush_interval_ms
        )

    # -- life cycle ---------------------------------------------------------------------

    def stop(self) -> None:
        """Ask the loop to drain and return; safe from any thread or signal handler."""
        self._stop.set()

    def run(self, on_ready: Callable[[], None] | None = None) -> None:
        """:meth:`start`, then turns until :meth:`stop`, then :meth:`shutdown`."""
        self.start()
        if on_ready is not None:
            on_ready()
        flush_s = self._checkpoint_ms / 1000
        next_flush = time.monotonic()
        try:
            while not self._stop.is_set():
                self.turn()
                if time.monotonic() >= next_flush:
                    self.checkpoint()
                    next_flush = time.monotonic() + flush_s
        finally:
            self.shutdown()

    def start(self) -> None:
        """Create the sidecar's topics, start the cancel feed, join the group."""
        s = self.settings
        s.store.data_dir.mkdir(parents=True, exist_ok=True)
        ensure_topics(
            self.admin,
            {
                s.dead_letter_topic: {"max.message.bytes": "10485760"},
                s.cancel_topic: {"retention.ms": str(7 * 86_400_000)},
            },
        )
        if self.transactions is not None:
            self.transactions.init()  # fences our previous incarnation, aborts its txn
        self.feed.start(self.clock.now_ms(), timeout_s=30)
        p = self.partitions
        self.consumer.subscribe(
            s.subscription(), on_assign=p.on_assign, on_revoke=p.on_revoke, on_lost=p.on_lost
        )
        self.control.commands.start()
        self.control.started = True
        log.info(
            "sidecar started: delay topics %s, group %s, data in %s",
            s.subscription(),
            s.kafka.group_id,
            s.store.data_dir,
        )

    def turn(self) -> None:
        """One turn of the loop: the numbered steps of the module docstring."""
        self.control.beat()
        self.control.commands.run_pending()  # 1
        messages = self.consumer.consume(  # 2
            self.settings.delivery.batch_max_records, timeout=self._poll_timeout_s()
        )
        if messages:
            full = self.ingestor.handle(messages, self.partitions.by_key)  # 3
            if full:
                self._rewind(full)
        now_ms = self.clock.now_ms()
        cancels = self.feed.poll(now_ms)  # 4
        if cancels:
            self.ledger.apply(self.partitions, cancels, now_ms)
        restoring = self.partitions.restoring
        batch = self.settings.changelog.restore_batch_records
        if restoring is not None:  # 5
            restoring.step(batch)
        standbys = self.partitions.standbys
        if standbys is not None:
            owned = set(self.partitions.by_key)
            standbys.step(self.consumer, owned, self.settings.store.data_dir, batch)
        self.retries.run_due(now_ms)
        if not self.flow.delivery_paused:
            self.deliverer.pump(self.partitions)
        self.outbox.poll(0)  # 6

    def checkpoint(self) -> None:
        """Every flush interval: durability, then metrics and flow control."""
        if self.exactly_once is not None:
            self._commit_transaction()
        elif self.partitions.commit_at_least_once(self.consumer):
            self.feed.save()  # after the stores its cancels went to are flushed
        load = self.telemetry.publish(self.partitions, self.consumer, self.outbox.in_flight)
        free = shutil.disk_usage(self.settings.store.data_dir).free
        self.metrics.set_store_free_bytes(free)
        # Writes that wait for acks (changelog values, side writes) count too: a broker
        # that stops answering must not let ingest queue without bound; so do writes
        # waiting for their next try (dead letters a refusing topic bounced).
        backlog = max(load.backlog, load.queued + len(self.retries))
        if self.flow.update(load.pending, backlog, free):
            self.metrics.backpressure_paused()

    def _commit_transaction(self) -> None:
        """Exactly-once mode's checkpoint (``bridge/commit/exactly_once.py``): commit, or abort
        and restart every partition from the last commit (backing off when it repeats)."""
        assert self.exactly_once is not None
        fatal = self.exactly_once.checkpoint(self.consumer, self._stop.wait)
        if fatal is not None:
            log.critical("%s; stopping", fatal)
            self.control.fail(fatal)
            self.stop()

    def _rewind(self, full: list[TopicPartition]) -> None:
        """Appends failed for want of disk space: read those records again later."""
        for tp in full:
            self.consumer.seek(tp)
        self.flow.set_disk_full(True)

    def _client_error(self, err: RdKafkaError) -> None:
        """librdkafka's error callback (inside poll/consume, on the owner thread). Most
        errors are transient and librdkafka recovers; a *fatal* one (e.g. the idempotent
        producer's sequence broken) makes the sidecar report unhealthy and stop, so the
        orchestrator restarts it with fresh clients (nothing is committed past what is
        durable)."""
        if err.fatal():
            log.critical("fatal Kafka client error, stopping: %s [%s]", err.str(), err.name())
            self.control.fail(f"fatal Kafka client error: {err.str()} [{err.name()}]")
            self.stop()
        else:
            log.warning("Kafka client: %s [%s]", err.str(), err.name())

    def _flow_changed(self, flow: FlowControl) -> None:
        self.metrics.set_backpressure(flow.backpressure)
        self.metrics.set_paused(flow.paused)

    def _poll_timeout_s(self) -> float:
        """How long consume() may wait: until the next due tick, retry or flush."""
        if self.outbox.in_flight or any(p.pipeline.held for p in self.partitions):
            return 0.005
        now = self.clock.now_ms()
        wake = self.partitions.next_due_ms(now + self.settings.store.tick_ms)
        retry = self.retries.next_ms()
        if retry is not None:
            wake = min(wake, retry)
        return max(0.0, min(wake - now, self._checkpoint_ms) / 1000)

    def shutdown(self) -> None:
        """Drain in-flight deliveries (bounded by the grace), flush, commit, close."""
        grace_ms = self.settings.shutdown_grace_ms
        log.info("draining: waiting for in-flight deliveries (grace %d ms)", grace_ms)
        deadline = time.monotonic() + grace_ms / 1000
        assignment = self.consumer.assignment()
        if assignment:
            self.consumer.pause(assignment)
        if self.exactly_once is not None:
            self._commit_transaction()
        elif self.partitions.commit_at_least_once(self.consumer, deadline):
            self.feed.save()
        self.consumer.close()  # revokes: stores flushed, offsets committed, closed
        self.partitions.close_all()
        self.feed.close()
        self.control.commands.stop()
        log.info("sidecar stopped")
