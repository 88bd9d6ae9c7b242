"""Exactly-once mode's commit point: the transaction, then the local stores.

At-least-once mode flushes the stores and then commits the delay-topic offsets they
cover (``Partitions.flush_and_commit``). Exactly-once mode inverts it: Kafka is the
truth and the local store a cache of it. Every ``delivery.transaction_interval_ms``
(:meth:`ExactlyOnce.commit`; the numbered protocol is in docs/architecture.md):

1. write the changelog values held back since the last commit and, when the
   transaction has other work, each partition's progress record (an idle replica
   commits nothing);
2. serve every delivery report (a tombstone produced from a report is served too);
   a failed record has doomed the transaction;
3. send the delay-topic positions (everything handled, minus side writes not yet
   queued) with the group metadata, then commit — or abort if doomed;
4. committed: flush each store with the changelog offset it now matches (mark
   ``changelog``) and the resume position, then save the cancel feed's position;
5. aborted: every owned partition drops its store unflushed and opens it again from
   its last flush, which matched the last commit, catching up from the changelog
   (read_committed) if a crash came between a commit and its flush; consumption and
   the cancel feed rewind to the last commit (``Partitions.reopen``).

So a store never holds on disk what no committed transaction says, and after any crash
the committed changelog plus the committed offsets say exactly what is pending.

Not thread-safe: the service's owner thread calls it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from confluent_kafka import TopicPartition

from delaybridge.bridge.commit.poison import ExactlyOnceGuard, Poisoned, TargetCheck
from delaybridge.bridge.commit.transactions import TransactionFatal, Transactions
from delaybridge.bridge.observe.metrics import Metrics
from delaybridge.bridge.ownership import Partitions
from delaybridge.bridge.partition.state import Role
from delaybridge.bridge.produce.outbox import Outbox
from delaybridge.bridge.state.changelog import Changelog
from delaybridge.connectors.edge import ConsumerEdge, ProducerEdge
from delaybridge.settings import Settings

log = logging.getLogger(__name__)
#: How long step 2 waits for delivery reports before it gives the transaction up.
REPORTS_TIMEOUT_S = 30.0


class ExactlyOnce:
    """The commit point of exactly-once mode (see the module docstring)."""

    def __init__(
        self,
        partitions: Partitions,
        outbox: Outbox,
        transactions: Transactions,
        changelog: Changelog,
    ) -> None:
        self._partitions = partitions
        self._outbox = outbox
        self.transactions = transactions
        self._changelog = changelog
        self._committed: list[TopicPartition] = []
        """Positions of the last commit. Not the trackers' own: starting empty, it makes
        the first checkpoint commit and flush every store, so an abort before any work
        reopens stores from a checkpoint instead of rescuing them."""

    def commit(self, consumer: ConsumerEdge) -> bool:
        """Steps 1-4; False when the transaction was aborted instead (the caller runs
        :meth:`restart`, or drops the partitions it was handing over)."""
        txns = self.transactions
        if txns.fatal is not None:
            return False
        parts = list(self._partitions)
        changelog = self._changelog
        changelog.write_all(parts)  # 1
        if txns.open:  # progress only with other work: an idle replica commits nothing
            for part in parts:
                if part.role is Role.ACTIVE:
                    changelog.progress(part)
        deadline = time.monotonic() + REPORTS_TIMEOUT_S  # 2
        while self._outbox.in_flight and time.monotonic() < deadline:
            self._outbox.flush(min(1.0, deadline - time.monotonic()))
        if self._outbox.in_flight:
            txns.doom(f"{self._outbox.in_flight} delivery reports outstanding")
        positions = [  # 3
            TopicPartition(p.topic, p.partition, p.offsets.position_after_flush()) for p in parts
        ]
        if not txns.open and txns.doomed is None and _same(positions, self._committed):
            return True  # nothing produced, nothing read: no transaction to commit
        if not txns.commit(positions, consumer.consumer_group_metadata()):
            return False
        self._committed = positions
        for part in parts:  # 4 (no space: the next commit flushes again)
            if self._partitions.flush_one(part):
                part.offsets.take_commit()
        if self._partitions.feed is not None:
            self._partitions.feed.save()
        return True

    def abort(self, why: str) -> None:
        self.transactions.abort(why)

    @property
    def alive(self) -> bool:
        return self.transactions.fatal is None

    def checkpoint(self, consumer: ConsumerEdge, wait: Callable[[float], object]) -> str | None:
        """Commit, or abort and :meth:`restart` (after ``wait``-ing a backoff when aborts
        repeat). Returns why the producer can never commit again, or None."""
        try:
            if self.commit(consumer):
                return None
            aborts = self.transactions.consecutive_aborts
            if aborts > 1:  # the same failure again: give the cluster time
                wait(min(0.1 * 2 ** min(aborts - 2, 6), 5.0))
            self.restart(consumer)
        except TransactionFatal as exc:
            return str(exc)
        return None

    def restart(self, consumer: ConsumerEdge) -> None:
        """Step 5, after :meth:`commit` returned False."""
        self._outbox.poll(0)  # the aborted transaction's reports: dropped
        self._partitions.reopen(consumer)


def _same(a: list[TopicPartition], b: list[TopicPartition]) -> bool:
    return [(t.topic, t.partition, t.offset) for t in a] == [
        (t.topic, t.partition, t.offset) for t in b
    ]


def eos_parts(
    settings: Settings,
    outbox: Outbox,
    consumer: ConsumerEdge,
    metrics: Metrics,
    make_producer: Callable[[], ProducerEdge],
) -> tuple[Transactions | None, Poisoned | None, ExactlyOnceGuard | None]:
    """The service's exactly-once parts (all None in at-least-once mode); joins the
    Outbox to the transaction. ``make_producer`` builds another transactional producer
    like the Outbox's, should one have to be replaced."""
    if not settings.delivery.exactly_once:
        return None, None, None

    def renew() -> ProducerEdge:
        outbox.producer = make_producer()
        return outbox.producer

    timeout_ms = settings.delivery.transaction_timeout_ms
    txns = Transactions(outbox.producer, timeout_ms, metrics, renew)
    outbox.transactions = txns
    poisoned = Poisoned()
    return txns, poisoned, ExactlyOnceGuard(poisoned, TargetCheck(consumer.list_topics))
