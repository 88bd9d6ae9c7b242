"""The commit point of exactly-once mode: the transaction first, then the local stores.

At-least-once mode flushes the stores and then commits the delay-topic offsets they cover
(``at_least_once.py``). Exactly-once mode inverts it: Kafka is the truth and the local
store a cache of it. Every ``delivery.transaction_interval_ms``, and before partitions
are assigned or revoked (:meth:`ExactlyOnce._commit`; numbered as in ``point.py``):

1. write the changelog values held back since the last commit and, when the transaction
   has other work, each active partition's progress record (an idle replica commits
   nothing);
2. serve every delivery report (a tombstone produced from a report is served too); a
   failed record has doomed the transaction;
3. send the delay-topic positions (everything handled, minus side writes not yet
   acknowledged) with the group metadata, then commit — or abort if doomed;
4. committed: flush each store with the changelog offset it now matches and the resume
   position (its marks), then save the cancel feed's position;
5. aborted: the aborted transaction's reports are dropped, and the caller restarts every
   owned partition from its last flush, which matched the last commit, catching up from
   the changelog (read_committed) if a crash came between a commit and its flush;
   consumption and the cancel feed rewind to the last commit (``bridge/ownership.py``).

So a store never holds on disk what no committed transaction says, and after any crash
the committed changelog plus the committed offsets say exactly what is pending. The
transaction's own state machine (begin, doom, commit, abort, fencing) is
``transactions.py``.

Not thread-safe: the service's owner thread calls it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Mapping
from typing import Generic

from confluent_kafka import TopicPartition

from delaybridge.bridge.commit.at_least_once import flush
from delaybridge.bridge.commit.point import Changelog, DiskFull, FeedPosition, P, PartKey, Reports
from delaybridge.bridge.commit.transactions import Transactions
from delaybridge.connectors.edge import ConsumerEdge

log = logging.getLogger(__name__)
#: How long step 2 waits for delivery reports before it gives the transaction up.
REPORTS_TIMEOUT_S = 30.0


class ExactlyOnce(Generic[P]):
    """The commit point of exactly-once mode (see the module docstring)."""

    def __init__(
        self,
        owned: Mapping[PartKey, P],
        reports: Reports,
        flow: DiskFull,
        transactions: Transactions,
        changelog: Changelog[P],
        feed: FeedPosition | None,
        wait: Callable[[float], object],
    ) -> None:
        """``wait(seconds)``: the pause before a restart when aborts repeat (returns
        early when the sidecar is asked to stop)."""
        self._owned = owned
        self._reports = reports
        self._flow = flow
        self.transactions = transactions
        self._changelog = changelog
        self._feed = feed
        self._wait = wait
        self._committed: list[TopicPartition] = []
        """Positions of the last commit. Not the trackers' own: starting empty, it makes
        the first checkpoint commit and flush every store, so an abort before any work
        reopens stores from a checkpoint instead of rescuing them."""

    @property
    def alive(self) -> bool:
        return self.transactions.fatal is None

    def checkpoint(self, consumer: ConsumerEdge) -> bool:
        """Steps 1-4, or 5 (raises TransactionFatal when nothing can commit again)."""
        if self._commit(consumer):
            return True
        aborts = self.transactions.consecutive_aborts
        if aborts > 1:  # the same failure again: give the cluster time
            self._wait(min(0.1 * 2 ** min(aborts - 2, 6), 5.0))
        self._reports.poll(0)  # 5: the aborted transaction's reports, dropped
        return False

    def final(self, consumer: ConsumerEdge, deadline_s: float) -> bool:
        return self.checkpoint(consumer)  # step 2 waits for every report anyway

    def hand_over(self, consumer: ConsumerEdge, keys: Collection[PartKey]) -> bool:
        return self._commit(consumer)

    def before_assign(self, consumer: ConsumerEdge) -> bool:
        return self._commit(consumer)

    def lost(self) -> bool:
        self.transactions.abort("partitions lost")  # their work must not commit
        return True

    def release(self, part: P) -> None:
        raise AssertionError("exactly-once mode drops lost partitions unflushed")

    def _commit(self, consumer: ConsumerEdge) -> bool:
        """Steps 1-4; False when the transaction was aborted instead."""
        txns = self.transactions
        if txns.fatal is not None:
            return False
        parts = list(self._owned.values())
        changelog = self._changelog
        changelog.write_all(parts)  # 1
        if txns.open:  # progress only with other work: an idle replica commits nothing
            for part in parts:
                changelog.progress(part)
        deadline = time.monotonic() + REPORTS_TIMEOUT_S  # 2
        while self._reports.in_flight and time.monotonic() < deadline:
            self._reports.flush(min(1.0, deadline - time.monotonic()))
        if self._reports.in_flight:
            txns.doom(f"{self._reports.in_flight} delivery reports outstanding")
        positions = [  # 3
            TopicPartition(p.topic, p.partition, p.offsets.position_after_flush()) for p in parts
        ]
        if not txns.open and txns.doomed is None and _same(positions, self._committed):
            return True  # nothing produced, nothing read: no transaction to commit
        if not txns.commit(positions, consumer.consumer_group_metadata()):
            return False
        self._committed = positions
        for part in parts:  # 4 (no space: the next commit flushes again)
            if flush(part, changelog, self._flow):
                part.offsets.take_commit()
        if self._feed is not None:
            self._feed.save()
        return True


def _same(a: list[TopicPartition], b: list[TopicPartition]) -> bool:
    return [(t.topic, t.partition, t.offset) for t in a] == [
        (t.topic, t.partition, t.offset) for t in b
    ]
