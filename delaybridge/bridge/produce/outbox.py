"""Everything the sidecar produces goes out through one :class:`Outbox`.

Deliveries, dead letters, re-published cancels and admin cancels share one producer and
one rule for what is *in flight*: a record handed to librdkafka whose delivery report
has not been served yet. That is exactly ``len(producer)``, so the outbox keeps no count
of its own that could drift from librdkafka's.

Every record sent gets exactly one outcome, delivered to its ``on_delivery`` callback
from :meth:`poll` on the owner thread:

1. acknowledged: ``on_delivery(None, msg)``;
2. failed after librdkafka's own retries: ``on_delivery(err, msg)``;
3. refused before sending (too large, unknown partition, ...): ``on_delivery(err, None)``,
   deferred to the next :meth:`poll` so a callback never runs inside :meth:`send`.

A full local queue is not an outcome: :meth:`send` returns False and nothing was
queued; the caller keeps the record and tries again on a later turn.

In exactly-once mode (:attr:`Outbox.transactions` set) every record goes into the
open transaction (begun by the first send of an interval), a failed report dooms it,
and reports of an aborted transaction are dropped (their callbacks never run).

Not thread-safe: the service's owner thread calls it.
"""

from __future__ import annotations

import time
from functools import partial
from typing import TYPE_CHECKING

from confluent_kafka import KafkaError as RdKafkaError
from confluent_kafka import Message

from delaybridge.connectors import ProduceError, try_produce
from delaybridge.connectors.edge import Headers, OnDelivery, ProducerEdge
from delaybridge.errors import KafkaError

if TYPE_CHECKING:
    from delaybridge.bridge.commit.transactions import Transactions


class Outbox:
    """The sidecar's one producer, with the outcome rules above."""

    def __init__(self, producer: ProducerEdge) -> None:
        self.producer = producer
        self._refused: list[tuple[OnDelivery, RdKafkaError]] = []
        self.transactions: Transactions | None = None
        """Exactly-once mode: every send joins this transaction."""

    @property
    def in_flight(self) -> int:
        """Records handed to librdkafka and not yet reported (acked or failed)."""
        return len(self.producer) + len(self._refused)

    def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None,
        headers: Headers | None,
        on_delivery: OnDelivery,
        partition: int | None = None,
    ) -> bool:
        """Queue one record; False (nothing queued) when the local queue is full."""
        txns = self.transactions
        report = on_delivery
        if txns is not None:
            if not txns.open:
                txns.ensure_open()
            report = partial(_in_transaction, txns, txns.epoch, on_delivery)
        try:
            return try_produce(
                self.producer,
                topic,
                value,
                key,
                partition=partition,
                headers=headers,
                on_delivery=report,
            )
        except ProduceError as exc:  # refused locally: never part of the transaction
            self._refused.append((on_delivery, _error_of(exc)))
        return True

    def send_blocking(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None,
        headers: Headers | None,
        on_delivery: OnDelivery,
        timeout_s: float = 30.0,
    ) -> None:
        """:meth:`send`, waiting for room in the queue (for rare records: cancels, dead
        letters). Raises KafkaError naming the topic if there is none in ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while not self.send(topic, value, key, headers, on_delivery):
            if time.monotonic() >= deadline:
                raise KafkaError(f"producer queue full for {timeout_s} s; cannot write {topic!r}")
            self.producer.poll(0.05)

    def poll(self, timeout_s: float = 0.0) -> None:
        """Serve delivery reports and refusals (their callbacks run here)."""
        self.producer.poll(timeout_s)
        while self._refused:
            refused, self._refused = self._refused, []
            for on_delivery, err in refused:
                on_delivery(err, None)

    def flush(self, timeout_s: float) -> int:
        """Wait up to ``timeout_s`` for every outcome; returns how many are still open."""
        self.poll(0)
        return self.producer.flush(max(0.0, timeout_s)) + len(self._refused)


def _in_transaction(
    txns: Transactions,
    epoch: int,
    on_delivery: OnDelivery,
    err: RdKafkaError | None,
    msg: Message | None,
) -> None:
    """A report in exactly-once mode: dropped if its transaction was aborted; a
    failure dooms the open transaction (Kafka would refuse to commit it)."""
    if epoch != txns.epoch:
        return
    if err is not None:
        where = msg.topic() if msg is not None else "?"
        txns.doom(f"a record to {where!r} failed: {err.str()} [{err.name()}]")
    on_delivery(err, msg)


def _error_of(exc: ProduceError) -> RdKafkaError:
    if isinstance(exc.error, RdKafkaError):
        return exc.error
    return RdKafkaError(RdKafkaError._FAIL, str(exc))
