"""The sidecar: delay topics in, due messages out, on one owner thread.

One loop turn (:meth:`Service.turn`):

1. run the operator's commands queued by the HTTP thread (``bridge/admin/commands.py``);
2. consume a batch from the delay topics (rebalance callbacks run here: an assigned
   partition's store is opened/recovered, a revoked one handed over and closed:
   ``bridge/ownership.py``); the wait is a tick at most, or, when the last consume read
   nothing and nothing is due sooner, a flush interval for the first record;
3. ingest it: schedules into the stores, cancels to the cancel topic, bad input to the
   dead-letter topic (``bridge/ingest/ingestor.py``);
4. apply cancels read from the cancel topic to every store (``bridge/cancels/ledger.py``),
   and run a bounded step of the prefix cancels' sweeps (``bridge/cancels/prefix.py``);
5. restore a slice of every partition still restoring from its changelog
   (``bridge/state/restore_hook.py``), retry what failed and is due again
   (``bridge/produce/retry_queue.py``), then deliver what is due, within the in-flight
   bound (``bridge/delivery/deliverer.py``);
6. serve delivery reports (``bridge/produce/outbox.py``): acks resolve batches, failures retry;
   then the Kafka reachability tracker's tick (``connectors/reachability/``: the idle
   clients' callbacks, the check of the listeners and the summary while Kafka is away).

Every ``store.flush_interval_ms`` (exactly-once mode: every
``delivery.transaction_interval_ms``) the commit point checkpoints (``bridge/commit/``:
at-least-once, the stores are flushed and then the offsets they cover committed;
exactly-once, the transaction commits and then the stores are flushed); then the
metrics are published (``telemetry.py``) and flow control re-evaluated (``flow.py``).

SIGTERM (or :meth:`stop`) ends the loop: ingest stops, the commit point's final
checkpoint awaits in-flight records for up to ``shutdown_grace_ms``, then the consumer
closes (its partitions are handed over) and the stores close. Only this thread touches
stores; the HTTP thread goes through :attr:`Service.control`.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
import uuid
from collections.abc import Callable
from functools import partial
from typing import Any

from confluent_kafka import KafkaError as RdKafkaError
from confluent_kafka import KafkaException, TopicPartition

from delaybridge.bridge.admin.commands import AdminControl
from delaybridge.bridge.cancels import prefix
from delaybridge.bridge.cancels.feed import CancelFeed
from delaybridge.bridge.cancels.feed_watch import FeedWatch
from delaybridge.bridge.cancels.horizon import CancelHorizon
from delaybridge.bridge.cancels.ledger import CancelLedger
from delaybridge.bridge.cancels.own_horizons import IDLE_LEAD_MS, OwnHorizons
from delaybridge.bridge.cancels.requests import CancelRequest
from delaybridge.bridge.commit.at_least_once import AtLeastOnce
from delaybridge.bridge.commit.exactly_once import ExactlyOnce
from delaybridge.bridge.commit.point import CommitPoint
from delaybridge.bridge.commit.results import CommitResults
from delaybridge.bridge.commit.transactions import TransactionFatal, Transactions
from delaybridge.bridge.delivery.deliverer import Deliverer
from delaybridge.bridge.flow import FlowControl
from delaybridge.bridge.ingest.ingestor import Ingestor, NoRoom
from delaybridge.bridge.ingest.scout import CancelScout
from delaybridge.bridge.ingest.side_writes import SideWriter
from delaybridge.bridge.observe.metrics import Metrics
from delaybridge.bridge.observe.tally import Tally
from delaybridge.bridge.observe.watermarks import Watermarks
from delaybridge.bridge.ownership import Partitions
from delaybridge.bridge.partition.state import PartitionState, PartKey, Role
from delaybridge.bridge.produce.outbox import Outbox
from delaybridge.bridge.produce.poison import ExactlyOnceGuard, Poisoned, TargetCheck
from delaybridge.bridge.produce.resend import Resender
from delaybridge.bridge.produce.retry_queue import RetryQueue
from delaybridge.bridge.state import assembly
from delaybridge.bridge.state.changelog import Changelog
from delaybridge.bridge.telemetry import Telemetry
from delaybridge.bridge.tuning import (
    CONSUMER_OVERRIDES,
    producer_overrides,
    store_settings_for,
    suffix,
)
from delaybridge.connectors import KafkaClients, ensure_topics, is_fatal
from delaybridge.connectors.edge import ClientFactory, ConsumerEdge, ProducerEdge
from delaybridge.connectors.reachability import (
    KafkaReachability,
    ListenerProbe,
    ReportingClients,
    TcpListenerProbe,
)
from delaybridge.contract.rules import HeaderRules
from delaybridge.settings import Settings
from delaybridge.timerlog import SYSTEM_CLOCK, Clock

log = logging.getLogger(__name__)
#: How long the loop sleeps while due messages wait for the cancel horizon.
HORIZON_WAIT_MS = 10
#: ... and while they wait for a check's answer that is a round trip away
#: (``OwnHorizons.answer_expected``): sleeping HORIZON_WAIT_MS then cost every message
#: due in steady traffic ~10 ms of lateness (docs/benchmarks.md, "roll").
HORIZON_ANSWER_WAIT_MS = 1
#: The cancel horizon's topic: one record per owner, compacted, so a replica starting
#: reads every owner's last word in a few records (bridge/cancels/own_horizons.py).
HORIZON_TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    "segment.ms": "600000",
    "min.cleanable.dirty.ratio": "0.1",
}


class Service:
    """The running sidecar. Build it, call :meth:`run` (blocks), :meth:`stop` from anywhere.

    ``clients``: the Kafka clients (default: from ``settings.kafka``; tests: fakes);
    ``worker``: this worker process's index (``workers/identity.py``); ``probe``: how
    the reachability tracker checks Kafka's listeners (default: TCP connects to the
    bootstrap servers). Building it makes no network call; :meth:`run` creates topics
    and joins the group.
    """

    def __init__(
        self,
        settings: Settings,
        clock: Clock = SYSTEM_CLOCK,
        clients: ClientFactory | None = None,
        worker: int = 0,
        probe: ListenerProbe | None = None,
    ) -> None:
        s = settings
        self.settings = settings
        self.clock = clock
        self.metrics = Metrics()
        self.store_settings = store_settings_for(s)
        self._stop = threading.Event()
        # Every client reports its errors and log lines to this one tracker.
        self.reachability = KafkaReachability(
            probe or TcpListenerProbe(s.kafka.bootstrap_servers),
            on_fatal=self._fatal_client_error,
            on_change=self.metrics.set_kafka_reachable,
            now_s=lambda: clock.now_ms() / 1000,
            says_state=worker == 0,  # one pod, one set of state lines
        )
        self._clients = ReportingClients(clients or KafkaClients(s.kafka), self.reachability)
        self.tally = Tally()
        self.retries = RetryQueue()
        make_producer = partial(self._clients.producer, producer_overrides(s))
        self.outbox = Outbox(make_producer())
        self.resender = Resender(self.outbox, self.retries, clock)
        self.commits = CommitResults()  # refused offset commits are sent again
        # The group consumer's own error callback takes its fatal errors (it is replaced,
        # not the sidecar stopped); the reachability tracker takes every other error.
        self._consumer_overrides = (
            CONSUMER_OVERRIDES | {"error_cb": self._consumer_error} | self.commits.conf
        )
        self.consumer = self._clients.consumer(self._consumer_overrides)
        self._consumer_failed: str | None = None
        """Why the group consumer failed for good (fenced): it is replaced next turn."""
        self._quiet = False
        """The last consume returned nothing: the next may wait for one record."""
        self.transactions = _transactions(s, self.outbox, self.tally, make_producer)
        poisoned = None if self.transactions is None else Poisoned()
        self.flow = FlowControl(
            s.store.max_pending_messages,
            s.max_delivery_backlog,
            s.store.min_free_bytes,
            self._flow_changed,
            resume_margin_bytes=s.store.resume_margin_bytes,
            clock_s=self._clock_s,
        )
        self._disk_pauses_counted = 0
        self.flow.attach(self.consumer)
        grace_ms = self.store_settings.cancel_grace_ms

        def feed_consumer() -> ConsumerEdge:
            return self._clients.consumer(
                {"group.id": f"{s.kafka.group_id}.cancel-feed"}, group=False
            )

        keep_ms = grace_ms + 2 * s.kafka.session_timeout_ms  # bridge/cancels/feed.py says why
        self.horizon = CancelHorizon(s.cancel_horizon.bound_ms, self._feed_position)
        self.feed = CancelFeed(
            feed_consumer(),
            s.cancel_topic,
            keep_ms,
            self.tally,
            s.store.data_dir,
            f"cancel-feed{suffix(worker)}.json",
            grace_ms,
            self.horizon if self.horizon.enabled else None,
            s.horizon_topic,
            feed_consumer,
        )
        self.feed_watch = FeedWatch(self.feed.position, self.feed.renew)
        self.admin = self._clients.admin()
        self.horizons = None
        if self.horizon.enabled:
            owner = s.kafka.instance_id or f"{s.kafka.group_id}-{uuid.uuid4().hex[:16]}"
            self.horizons = OwnHorizons(
                self.horizon,
                self.admin,
                self.outbox,
                s.horizon_topic,
                owner,
                s.cancel_horizon.interval_ms,
                s.cancel_topic,
                self.feed.position,
                self.feed.partitions,
            )
        state = assembly.build(
            s,
            self._clients,
            self.outbox,
            self.resender,
            clock,
            self.admin,
            self.flow,
            self.store_settings,
        )
        self.changelog = state.changelog if state is not None else None
        removed = self.changelog.removed_by_store if self.changelog is not None else None
        self._on_removed = removed
        cancels = s.cancels
        self.prefix_checks = prefix.PrefixChecks(
            cancels.prefix_confirm_above, cancels.prefix_sweep_entries, self._stores
        )
        self.ledger = CancelLedger(grace_ms, self.tally, on_removed=removed)
        self.feed.applied_here = self.ledger.applied_here
        owned: dict[PartKey, PartitionState] = {}
        self.commits.owned = owned
        self.commit = self._commit_point(owned, self.changelog)
        self.partitions = Partitions(
            owned,
            self.commit,
            s.store.data_dir,
            self.store_settings,
            clock,
            self.metrics,
            self.flow,
            self.feed,
            state.restoring if state is not None else None,
            state.standbys if state is not None else None,
            self.horizons,
        )
        dlt = s.dead_letter_topic
        side = SideWriter(self.resender, poisoned)
        rules = HeaderRules.from_settings(s)
        self.ingestor = Ingestor(
            rules,
            side,
            dlt,
            s.cancel_topic,
            self.tally,
            clock,
            self.changelog,
            self.horizons,
            self._apply_here if self.horizons is not None else None,
            self._consumer_error,
            self.prefix_checks,
        )
        self.scout = None
        if self.horizons is not None:
            scout_consumer = self._clients.consumer(
                {"group.id": f"{s.kafka.group_id}.cancel-scout"}, group=False
            )
            self.scout = CancelScout(
                scout_consumer,
                rules,
                self.resender,
                s.cancel_topic,
                self.horizons,
                clock,
                self._apply_here,
                self.prefix_checks,
            )
        guard = None
        if poisoned is not None:
            guard = ExactlyOnceGuard(poisoned, TargetCheck(self._list_topics))
        self.deliverer = Deliverer(
            self.outbox, s.delivery, dlt, clock, self.tally, self.resender, self.changelog, guard
        )
        self.telemetry = Telemetry(
            self.metrics,
            self.tally,
            self.partitions.restoring,
            self.partitions.standbys,
            self.feed.waits,
            self.transactions,
            Watermarks(self.admin, self._clock_s),
            self._clock_s,
        )
        self.control = AdminControl(
            s.kafka.group_id,
            s.cancel_topic,
            self.partitions,
            self.ledger,
            self.outbox,
            self.flow,
            clock,
            self.reachability,
            self.prefix_checks,
        )
        self._checkpoint_ms = (
            s.delivery.transaction_interval_ms
            if isinstance(self.commit, ExactlyOnce)
            else s.store.flush_interval_ms
        )

    def _commit_point(
        self, owned: dict[PartKey, PartitionState], changelog: Changelog | None
    ) -> CommitPoint[PartitionState]:
        """Exactly-once mode's commit point when it is on (it needs the changelog), else
        at-least-once mode's (``bridge/commit/``)."""
        if self.transactions is not None and changelog is not None:
            return ExactlyOnce(
                owned,
                self.outbox,
                self.flow,
                self.transactions,
                changelog,
                self.feed,
                self._stop.wait,
            )
        grace_s = self.settings.shutdown_grace_ms / 1000
        return AtLeastOnce(owned, self.outbox, self.flow, grace_s, changelog, self.feed)

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
        topics = {
            s.dead_letter_topic: {"max.message.bytes": "10485760"},
            s.cancel_topic: {"retention.ms": str(7 * 86_400_000)},
        }
        if self.horizons is not None:
            topics[s.horizon_topic] = HORIZON_TOPIC_CONFIG
        ensure_topics(self.admin, topics)
        if self.transactions is not None:
            self.transactions.init()  # fences our previous incarnation, aborts its txn
        self.feed.start(self.clock.now_ms(), timeout_s=30)
        self._subscribe()
        self.control.commands.start()
        self.control.started = True
        log.info(
            "sidecar started: delay topics %s, group %s, data in %s",
            s.subscription(),
            s.kafka.group_id,
            s.store.data_dir,
        )

    def _subscribe(self) -> None:
        p = self.partitions
        self.consumer.subscribe(
            self.settings.subscription(),
            on_assign=p.on_assign,
            on_revoke=p.on_revoke,
            on_lost=p.on_lost,
        )

    def _list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        return self.consumer.list_topics(topic, timeout=timeout)

    def turn(self) -> None:
        """One turn of the loop: the numbered steps of the module docstring."""
        if self._consumer_failed is not None:
            self._replace_consumer()
        self.control.beat()
        self.control.commands.run_pending()  # 1
        timeout_s = self._poll_timeout_s()
        most = self.settings.delivery.batch_max_records
        if self._quiet and timeout_s > self.settings.store.tick_ms / 1000:
            most = 1  # idle: the first record to arrive ends the wait
        messages = self.consumer.consume(most, timeout=timeout_s)  # 2
        self._quiet = not messages
        if messages:
            full = self.ingestor.handle(messages, self.partitions.by_key)  # 3
            if full:
                self._rewind(full)
        now_ms = self.clock.now_ms()
        cancels = self.feed.poll(now_ms)  # 4
        if cancels:
            self.ledger.apply(self.partitions, cancels, now_ms)
        budget = self.settings.cancels.prefix_sweep_entries
        self.prefix_checks.step()
        prefix.sweep(self.partitions, budget, self.tally, self._on_removed)
        if self.horizons is not None and self.scout is not None:
            self.scout.step(self._waiting())
            # Urgent: something is due that the horizon holds back. A tick already within
            # the horizon (a drain under way) needs no check at every turn. Due within the
            # lead: the other owners check at their interval meanwhile (checks on demand,
            # bridge/cancels/own_horizons.py).
            next_due_ms = self.partitions.next_due_ms(now_ms + IDLE_LEAD_MS + 1)
            urgent = self.horizon.limit_ms(now_ms) < next_due_ms <= now_ms
            self.horizons.step(
                self._owned_keys(), self._read_positions, now_ms, urgent, next_due_ms
            )
            wanted = self.horizons.wanted_cancel_ends()
            for c, end in self.horizon.wanted_cancel_ends().items():
                wanted[c] = max(wanted.get(c, end), end)
            reachable = self.reachability.readiness() is None
            self.feed_watch.step(wanted, now_ms, reachable)
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
            horizon = self.horizon.horizon_ms() if self.horizon.enabled else None
            self.deliverer.pump(self.partitions, self.horizon.limit_ms(now_ms), horizon)
        self.outbox.poll(0)  # 6
        self.reachability.tick()

    def _owned_keys(self) -> list[PartKey]:
        return [p.key for p in self.partitions if not p.revoking]

    def _waiting(self) -> dict[PartKey, int]:
        """The owned partitions that do not ingest now (paused, or restoring), and where
        their ingest stands: the cancel scout reads their cancels meanwhile."""
        paused = self.flow.ingest_paused
        return {
            p.key: p.offsets.commit_position()
            for p in self.partitions
            if not p.revoking and (paused or p.role is Role.RESTORING)
        }

    def _read_positions(self, keys: list[PartKey]) -> dict[PartKey, int]:
        """How far each partition is read: by ingest's consumer, or by the scout."""
        # Where ingest's consumer resumes is read already (a partition it has not
        # consumed from yet has no position of its own).
        read = {p.key: p.offsets.commit_position() for p in self.partitions if p.key in keys}
        try:
            for tp in self.consumer.position([TopicPartition(t, p) for t, p in keys]):
                key = (tp.topic, tp.partition)
                read[key] = max(read.get(key, -1), tp.offset)
        except KafkaException:
            pass  # the scout's word, if any; the next check asks again
        if self.scout is not None:
            for key, offset in self.scout.positions().items():
                read[key] = max(read.get(key, -1), offset)
        for key, offset in self.prefix_checks.held().items():  # not applied yet: unread
            if key in read:
                read[key] = min(read[key], offset)
        return read

    def _apply_here(self, requests: list[CancelRequest]) -> None:
        """Cancels read from an owned partition reach this process's stores at once
        (and not again when the feed reads them back: ``bridge/cancels/ledger.py``)."""
        now_ms = self.clock.now_ms()
        self.feed.wait_here(requests, now_ms)
        self.ledger.apply_here(self.partitions, requests, now_ms)

    def _stores(self) -> Partitions:
        """The partitions whose stores a prefix cancel's count covers."""
        return self.partitions

    def _feed_position(self, partition: int) -> int:
        return self.feed.position(partition)

    def checkpoint(self) -> None:
        """Every flush interval: durability, then metrics and flow control."""
        self.partitions.settle_lost()
        self._checkpoint(self.commit.checkpoint)
        load = self.telemetry.publish(self.partitions, self.consumer, self.outbox.in_flight)
        self.metrics.set_cancel_horizon_lag_seconds(self.horizon.lag_ms(self.clock.now_ms()) / 1000)
        usage = shutil.disk_usage(self.settings.store.data_dir)
        self.metrics.set_store_free_bytes(usage.free)
        # Writes that wait for acks (changelog values, side writes) count too: a broker
        # that stops answering must not let ingest queue without bound; so do writes
        # waiting for their next try (dead letters a refusing topic bounced).
        backlog = max(load.backlog, load.queued + len(self.retries))
        if self.flow.update(load.pending, backlog, usage.free, usage.total):
            self.tally.backpressure_pauses += 1
        disk = self.flow.disk
        self.metrics.set_disk_pause(disk.paused, disk.resume_level())  # the level moves
        for part in self.partitions:
            part.store.space_short = disk.short  # they give back what they finish at once

    def _checkpoint(self, run: Callable[[ConsumerEdge], bool]) -> None:
        """Run one of the commit point's checkpoints; after an aborted transaction,
        restart every owned partition from the last commit; when the transactional
        producer can never commit again, report unhealthy and stop."""
        try:
            if not run(self.consumer):
                self.partitions.restart(self.consumer)
        except TransactionFatal as exc:
            log.critical("%s; stopping", exc)
            self.control.fail(str(exc))
            self.stop()

    def _rewind(self, full: list[NoRoom]) -> None:
        """Appends failed for want of disk space: read those records again once the room
        they need is back (``bridge/disk_pause.py``)."""
        for refused in full:
            self.consumer.seek(refused.position)
            where = refused.position
            self.flow.refused((where.topic, where.partition), refused.needed_bytes)

    def _consumer_error(self, err: RdKafkaError) -> None:
        """The group consumer's fatal errors (``ReportingClients`` hands it those; the
        reachability tracker takes the others), and a fatal error a consume returned. It
        leaves the consumer dead (a static member fenced, here typically by its own
        rejoin after its session expired while the broker was frozen: librdkafka issue
        #3437); the loop replaces it at the start of its next turn (not inside this
        callback, which runs inside ``consume``)."""
        if not is_fatal(err):
            self.reachability.client_error(err)
            return
        if self._consumer_failed is None:
            log.error(
                "the group consumer failed for good: %s [%s]; replacing it",
                err.str(),
                err.name(),
            )
        self._consumer_failed = f"{err.str()} [{err.name()}]"

    def _replace_consumer(self) -> None:
        """A new group consumer in place of a dead one: its partitions count as lost
        (at-least-once: their deliveries' reports still awaited; exactly-once: the
        transaction aborted), and the new consumer joins as the same member, which
        takes them back."""
        why = self._consumer_failed
        self._consumer_failed = None
        self.partitions.consumer_died()
        try:
            self.consumer.close()
        except KafkaException as exc:  # it is dead already
            log.debug("closing the failed group consumer: %s", exc)
        self.consumer = self._clients.consumer(self._consumer_overrides)
        self.flow.attach(self.consumer)
        self._subscribe()
        log.warning("group consumer replaced (it failed: %s); rejoining the group", why)

    def _fatal_client_error(self, err: RdKafkaError) -> None:
        """A client's *fatal* error (e.g. the idempotent producer's sequence broken),
        handed over by the reachability tracker (inside poll/consume, on the owner
        thread; the others are transient, librdkafka recovers, the tracker logs them):
        the sidecar reports unhealthy and stops, so the orchestrator restarts it with
        fresh clients (nothing is committed past what is durable)."""
        log.critical("fatal Kafka client error, stopping: %s [%s]", err.str(), err.name())
        self.control.fail(f"fatal Kafka client error: {err.str()} [{err.name()}]")
        self.stop()

    def _clock_s(self) -> float:
        """The service's clock in seconds (what the disk pause and the watermarks time)."""
        return self.clock.now_ms() / 1000

    def _flow_changed(self, flow: FlowControl) -> None:
        self.metrics.set_backpressure(flow.backpressure)
        self.metrics.set_paused(flow.paused)
        self.metrics.set_disk_pause(flow.disk.paused, flow.disk.resume_level())
        self.tally.disk_pauses += flow.disk.pauses - self._disk_pauses_counted
        self._disk_pauses_counted = flow.disk.pauses

    def _poll_timeout_s(self) -> float:
        """How long consume() may wait: until the next due tick, retry or flush."""
        now = self.clock.now_ms()
        tick_ms = self.settings.store.tick_ms
        # Idle (nothing read last turn), the loop may wait a flush interval, for the first
        # record: a consume of a whole batch waits out its timeout, so it waits a tick.
        wake = self.partitions.next_due_ms(now + (self._checkpoint_ms if self._quiet else tick_ms))
        if wake <= now and self.horizon.limit_ms(now) < now:
            # Due, and held back by the cancel horizon: look again soon (a word from
            # another owner, or this process's own check, may move it any moment), and
            # at once when this process's check is a round trip away.
            if self.horizons is not None and self.horizons.answer_expected(now):
                return HORIZON_ANSWER_WAIT_MS / 1000
            wake = now + min(tick_ms, HORIZON_WAIT_MS)
        if self.outbox.in_flight or any(p.pipeline.held for p in self.partitions):
            return 0.005
        if self.prefix_checks.busy or any(p.store.sweeping for p in self.partitions):
            return 0.0  # a step per turn (bridge/cancels/prefix.py): turn on at once
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
        self._checkpoint(partial(self.commit.final, deadline_s=deadline))
        self.consumer.close()  # revokes: stores flushed, offsets committed, closed
        self.partitions.close_all()
        self.feed.close()
        if self.scout is not None:
            self.scout.close()
        self.control.commands.stop()
        log.info("sidecar stopped")


def _transactions(
    settings: Settings,
    outbox: Outbox,
    tally: Tally,
    make_producer: Callable[[], ProducerEdge],
) -> Transactions | None:
    """Exactly-once mode's transaction, joined to the Outbox (None in at-least-once
    mode). ``make_producer`` builds another transactional producer like the Outbox's,
    should one have to be replaced (``bridge/commit/transactions.py``)."""
    if not settings.delivery.exactly_once:
        return None

    def renew() -> ProducerEdge:
        outbox.producer = make_producer()
        return outbox.producer

    txns = Transactions(outbox.producer, settings.delivery.transaction_timeout_ms, tally, renew)
    outbox.transactions = txns
    return txns
