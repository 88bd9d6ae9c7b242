"""Exactly-once mode: one Kafka transaction per commit interval (DESIGN §4).

Everything the sidecar produces in an interval — deliveries, their changelog
tombstones, stored messages' changelog values, re-published cancels, dead letters —
and the delay-topic positions that ingest reached go into one transaction of the
replica's transactional producer, which commits them together or not at all. The
protocol as numbered steps is ``bridge/commit/point.py`` and ``exactly_once.py``
(reasons: docs/design/exactly-once.md); this module is the transaction's state machine
and its error classes:

- **begin** lazily, on the first record of an interval (:meth:`Transactions.ensure_open`,
  the Outbox's hook);
- **doomed**: a record of the open transaction failed. Kafka will refuse the commit
  (``txn_requires_abort``), so the interval is aborted at its end and every owned
  partition restarted from the last commit (``ownership.Partitions.restart``);
- **commit**: ``send_offsets_to_transaction`` with the consumer's group metadata (a
  zombie of an older group generation is fenced by the coordinator, KIP-447), then
  ``commit_transaction``; a *retriable* error is retried until the transaction timeout,
  an *abortable* one aborts, a *fatal* one (fenced by a newer producer with our
  ``transactional.id``) raises :class:`TransactionFatal`: this process must stop;
- **epoch**: bumped by every abort, so delivery reports of an aborted transaction
  (``_PURGE_QUEUE`` and late ones) are recognised and dropped by the Outbox.

Not thread-safe: the service's owner thread calls it.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException, TopicPartition

from delaybridge.bridge.observe.tally import Tally
from delaybridge.connectors.edge import ProducerEdge
from delaybridge.durable import write_atomic
from delaybridge.errors import DelayBridgeError

log = logging.getLogger(__name__)
ID_FILE = "transactional-id"
#: How many transaction timeouts an abort may take before the producer is replaced, and
#: an init before the producer counts as dead (3 + 3: the liveness probe's 60 s).
PATIENCE = 3


class TransactionFatal(DelayBridgeError):
    """The transactional producer can never work again (fenced, or a fatal error)."""


class _Abortable(Exception):
    pass


def transactional_id(explicit: str, group_id: str, instance_id: str, data_dir: Path) -> str:
    """The producer's ``transactional.id`` (see ``DeliverySettings.transactional_id``).

    Stable across restarts of the same replica, so that a restarted process fences its
    own zombie at once and aborts the transaction it left open (instead of read_committed
    consumers waiting for the broker's transaction timeout): the explicit setting, the
    static member's instance id, or a random id kept in the data directory (as Kafka
    Streams keeps its process id in its state directory).
    """
    if explicit:
        return explicit
    if instance_id:
        return f"{group_id}-{instance_id}"
    path = data_dir / ID_FILE
    try:
        kept = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        kept = ""
    if not kept:
        kept = f"{group_id}-{uuid.uuid4()}"
        data_dir.mkdir(parents=True, exist_ok=True)
        write_atomic(path, kept.encode())
    return kept


class Transactions:
    """The replica's transaction (see the module docstring)."""

    def __init__(
        self,
        producer: ProducerEdge,
        timeout_ms: int,
        tally: Tally,
        renew: Callable[[], ProducerEdge] | None = None,
    ) -> None:
        self._producer = producer
        self._renew = renew
        """Builds a new producer with the same transactional.id (and makes the Outbox
        use it): the way out of an abort that cannot finish."""
        self._timeout_s = timeout_ms / 1000
        self._tally = tally
        self.epoch = 0
        self.open = False
        self.doomed: str | None = None
        """Why the open transaction must be aborted (None: it may commit)."""
        self.consecutive_aborts = 0
        self.fatal: str | None = None
        """Set once the producer failed fatally: nothing is committed any more."""

    def init(self) -> None:
        """Claim the transactional.id (fencing an older producer with it)."""
        self._call(lambda: self._producer.init_transactions(self._timeout_s), "init")

    def ensure_open(self) -> None:
        if not self.open:
            self._call(self._producer.begin_transaction, "begin")
            self.open = True

    def doom(self, why: str) -> None:
        if self.doomed is None:
            log.warning("transaction will be aborted: %s", why)
            self.doomed = why

    def commit(self, positions: list[TopicPartition], group_metadata: Any) -> bool:
        """Commit the open transaction with ``positions``; False when it was aborted
        instead (the caller restarts its partitions from the last commit)."""
        if self.doomed is not None:
            self.abort(self.doomed)
            return False
        if not positions and not self.open:
            return True
        self.ensure_open()
        p = self._producer
        try:
            if positions:
                send = p.send_offsets_to_transaction
                self._call(lambda: send(positions, group_metadata, self._timeout_s), "offsets")
            self._call(lambda: p.commit_transaction(self._timeout_s), "commit")
        except _Abortable as exc:
            self.abort(str(exc))
            return False
        self.open = False
        self.consecutive_aborts = 0
        self._tally.transactions_committed += 1
        return True

    def abort(self, why: str) -> None:
        """Abort the open transaction (if any); its records are never seen by
        read_committed consumers and its reports are dropped from now on."""
        if self.open and self.fatal is None:
            try:
                self._call(lambda: self._producer.abort_transaction(self._timeout_s), "abort")
            except _Abortable as exc:
                self._replace_producer(str(exc))
        self.open = False
        self.doomed = None
        self.epoch += 1
        self.consecutive_aborts += 1
        self._tally.transactions_aborted += 1
        log.warning("transaction aborted (%s); restarting from the last commit", why)

    def _replace_producer(self, why: str) -> None:
        """An abort that keeps timing out (librdkafka waits for a batch a broker keeps
        refusing, after a message timeout that needs an epoch bump): drop the producer
        and start a new one with the same ``transactional.id``, whose
        ``init_transactions`` fences the old one and aborts its transaction at the
        coordinator — what a restart would do, without the restart (Kafka Streams
        resets its producer the same way)."""
        if self._renew is None:
            self.fatal = why
            raise TransactionFatal(f"cannot abort the transaction: {why}")
        log.warning("cannot abort the transaction (%s); replacing the producer", why)
        purge = getattr(self._producer, "purge", None)
        if purge is not None:
            purge(True, True, False)  # its reports are never served: the epoch moved on
        self._producer = self._renew()
        self.init()

    def _call(self, call: Callable[[], None], what: str) -> None:
        """Run one transactional call: retriable errors again until the transaction
        timeout; abortable ones raise _Abortable; fatal ones TransactionFatal."""
        # An abort waits for the transaction's records to fail or time out, and an init
        # for the coordinator to finish the previous transaction (CONCURRENT_TRANSACTIONS
        # while it cannot write its markers): both get longer.
        budget = self._timeout_s * (PATIENCE if what in ("abort", "init") else 1)
        deadline = time.monotonic() + budget
        while True:
            try:
                call()
                return
            except KafkaException as exc:
                err = exc.args[0]
                text = f"{what}: {err.str()} [{err.name()}]"
                if err.fatal():
                    self.fatal = text
                    raise TransactionFatal(f"transactional producer {text}") from exc
                if err.txn_requires_abort():
                    raise _Abortable(text) from exc
                if not err.retriable() or time.monotonic() >= deadline:
                    if what in ("init", "begin"):
                        self.fatal = text
                        raise TransactionFatal(f"transactional producer {text}") from exc
                    raise _Abortable(text) from exc
                log.info("transaction %s; retrying", text)
                time.sleep(0.05)
