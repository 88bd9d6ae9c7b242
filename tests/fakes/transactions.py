"""A transactional fake producer: Kafka's transaction rules, faults on demand.

What a real broker and librdkafka do, as far as the sidecar can tell:

- ``init_transactions`` claims the ``transactional.id``: an earlier producer with the
  same id is *fenced* (each of its later calls raises a fatal ``_FENCED``) and its open
  transaction is aborted;
- records are produced only inside a transaction; they are in the log at once (their
  delivery reports carry offsets) but a read_committed consumer stops before an open
  transaction and never sees an aborted one;
- a failed delivery dooms the transaction: ``commit_transaction`` raises an error with
  ``txn_requires_abort()`` (as librdkafka's ``_INCONSISTENT`` after a failed record);
- ``send_offsets_to_transaction`` is refused (abortable) for a member that left its
  group: the group fences a zombie by its generation (KIP-447);
- ``commit_transaction`` serves every report, then makes records and offsets visible
  together; ``abort_transaction`` purges what is queued (``_PURGE_QUEUE`` reports).

:meth:`TransactionalProducer.fail_commit_next` injects a commit error of any class.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, TopicPartition

from tests.fakes.clients import FakeProducer, _Queued
from tests.fakes.cluster import Txn


@dataclass
class TransactionalProducer(FakeProducer):
    txn: Txn | None = None
    fenced: bool = False
    commits: int = 0
    aborts: int = 0
    _doomed: bool = False
    _offsets: dict[tuple[str, str, int], int] = field(default_factory=dict)
    _commit_faults: list[KafkaError] = field(default_factory=list)

    @property
    def transactional_id(self) -> str:
        return str(self.config["transactional.id"])

    def fail_commit_next(
        self,
        code: int = KafkaError._TIMED_OUT,
        *,
        retriable: bool = False,
        abortable: bool = False,
        fatal: bool = False,
        times: int = 1,
    ) -> None:
        """The next ``times`` commit_transaction() calls raise this error."""
        err = KafkaError(
            code, "injected", fatal=fatal, retriable=retriable, txn_requires_abort=abortable
        )
        self._commit_faults += [err] * times

    # -- the transaction API --------------------------------------------------------------

    def init_transactions(self, timeout: float = -1) -> None:
        previous = self.cluster.txn_owners.get(self.transactional_id)
        if previous is not None and previous is not self:
            previous.fenced = True
            if previous.txn is not None:
                previous.txn.status = "aborted"
        self.cluster.txn_owners[self.transactional_id] = self

    def begin_transaction(self) -> None:
        self._check()
        if self.txn is not None:
            raise KafkaException(KafkaError(KafkaError._STATE, "a transaction is open"))
        self.txn = Txn()
        self._doomed = False
        self._offsets = {}

    def send_offsets_to_transaction(
        self, positions: list[TopicPartition], group_metadata: Any, timeout: float = -1
    ) -> None:
        self._check_open()
        member = group_metadata.member
        if member not in self.cluster.groups.get(group_metadata.group_id, []):
            left = KafkaError(KafkaError.UNKNOWN_MEMBER_ID, "left", txn_requires_abort=True)
            raise KafkaException(left)
        for tp in positions:
            self._offsets[(group_metadata.group_id, tp.topic, tp.partition)] = tp.offset

    def commit_transaction(self, timeout: float = -1) -> None:
        txn = self._check_open()
        self.poll(0)
        if self.queue:
            raise KafkaException(
                KafkaError(KafkaError._TIMED_OUT, "reports outstanding", retriable=True)
            )
        if self._commit_faults:
            raise KafkaException(self._commit_faults.pop(0))
        if self._doomed:
            raise KafkaException(
                KafkaError(KafkaError._INCONSISTENT, "a record failed", txn_requires_abort=True)
            )
        txn.status = "committed"
        self.cluster.committed.update(self._offsets)
        self.txn = None
        self.commits += 1

    def abort_transaction(self, timeout: float = -1) -> None:
        txn = self._check_open()
        while self.queue:  # purged: never written
            q = self.queue.popleft()
            if q.on_delivery is not None:
                purged = Message(
                    topic=q.topic, partition=q.partition, offset=-1, key=q.key, value=q.value
                )
                q.on_delivery(KafkaError(KafkaError._PURGE_QUEUE), purged)
        txn.status = "aborted"
        self.txn = None
        self.aborts += 1

    # -- produce inside the transaction ---------------------------------------------------

    def produce(
        self,
        topic: str,
        value: str | bytes | None = None,
        key: str | bytes | None = None,
        partition: int = -1,
        *,
        on_delivery: Any = None,
        timestamp: int = 0,
        headers: Any = None,
    ) -> None:
        self._check_open()
        super().produce(
            topic,
            value,
            key,
            partition,
            on_delivery=on_delivery,
            timestamp=timestamp,
            headers=headers,
        )

    def _append(self, q: _Queued, partition: int) -> int:
        return self.cluster.append(q.topic, partition, q.key, q.value, q.headers, txn=self.txn)

    def _failed(self, err: KafkaError) -> None:
        self._doomed = True

    def _check(self) -> None:
        if self.fenced:
            raise KafkaException(
                KafkaError(KafkaError._FENCED, f"{self.transactional_id} fenced", fatal=True)
            )

    def _check_open(self) -> Txn:
        self._check()
        if self.txn is None:
            raise KafkaException(KafkaError(KafkaError._STATE, "no transaction is open"))
        return self.txn
