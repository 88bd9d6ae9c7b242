"""What the sidecar needs from a Kafka client, as typed protocols.

The sidecar talks to Kafka only through these three shapes. The real implementations
are confluent-kafka's ``Producer``, ``Consumer`` and ``AdminClient`` (built from the
settings by :class:`~delaybridge.connectors.clients.KafkaClients`); the tests' in-memory fakes
(``tests/fakes/``) implement the same methods with the same signatures and hand out real
``confluent_kafka.Message``, ``TopicPartition`` and ``KafkaError`` values, so a fault a
real broker cannot be made to produce on demand (a delivery report that never comes, a
full local queue, a partition revoked mid-flight) is one line in a unit test, and the
code under test is the code that runs in production.

Only the methods the sidecar calls are listed; the signatures follow confluent-kafka's
(positional ``topic, value, key``; ``timeout`` in seconds, ``-1`` = wait forever).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal, Protocol, overload

from confluent_kafka import KafkaError as RdKafkaError
from confluent_kafka import Message, TopicPartition

#: A delivery report callback: ``(error or None, the message)``.
OnDelivery = Callable[[RdKafkaError | None, Message | None], None]
#: A rebalance callback: ``(consumer, partitions)``.
OnRebalance = Callable[[Any, list[TopicPartition]], None]
Headers = list[tuple[str, str | bytes | None]]
#: What produce() takes as headers: pairs in order, or a dict.
HeadersArg = Headers | dict[str, str | bytes | None]


class ProducerEdge(Protocol):
    """The producer side: queue records, serve delivery reports, wait for the queue."""

    def produce(
        self,
        topic: str,
        value: str | bytes | None = None,
        key: str | bytes | None = None,
        partition: int = -1,
        *,
        on_delivery: OnDelivery | None = None,
        timestamp: int = 0,
        headers: HeadersArg | None = None,
    ) -> None:
        """Queue one record; raises BufferError when the local queue is full and
        KafkaException when the record is refused before sending (e.g. too large)."""
        ...

    def poll(self, timeout: float = -1) -> int:
        """Serve delivery reports (callbacks run here, on the caller's thread)."""
        ...

    def flush(self, timeout: float = -1) -> int:
        """Wait until every queued record is reported; returns how many are left."""
        ...

    def __len__(self) -> int:
        """Records queued or in flight whose delivery report has not been served."""
        ...

    # Transactions (a producer built with ``transactional.id``; exactly-once mode).
    # Each raises KafkaException whose error says retriable(), txn_requires_abort() or
    # fatal() (a fenced producer is fatal).

    def init_transactions(self, timeout: float = -1) -> None: ...

    def begin_transaction(self) -> None: ...

    def send_offsets_to_transaction(
        self, positions: list[TopicPartition], group_metadata: Any, timeout: float = -1
    ) -> None:
        """Commit these consumer positions with the transaction, as the group member
        ``group_metadata`` describes (a member of an older generation is fenced)."""
        ...

    def commit_transaction(self, timeout: float = -1) -> None: ...

    def abort_transaction(self, timeout: float = -1) -> None: ...


class ConsumerEdge(Protocol):
    """The consumer side: a group member (delay topics) or assign-only (cancel feed)."""

    def subscribe(
        self,
        topics: list[str],
        on_assign: OnRebalance | None = None,
        on_revoke: OnRebalance | None = None,
        on_lost: OnRebalance | None = None,
    ) -> None: ...

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Message]:
        """Up to ``num_messages`` records; rebalance callbacks run inside this call."""
        ...

    def assign(self, partitions: list[TopicPartition]) -> None: ...

    def incremental_assign(self, partitions: list[TopicPartition]) -> None: ...

    def incremental_unassign(self, partitions: list[TopicPartition]) -> None: ...

    def assignment(self) -> list[TopicPartition]: ...

    def committed(
        self, partitions: list[TopicPartition], timeout: float = -1
    ) -> list[TopicPartition]: ...

    @overload
    def commit(
        self, *, offsets: list[TopicPartition], asynchronous: Literal[True] = ...
    ) -> None: ...

    @overload
    def commit(
        self, *, offsets: list[TopicPartition], asynchronous: Literal[False]
    ) -> list[TopicPartition]: ...

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        """The next offset the consumer will read, per partition."""
        ...

    def seek(self, partition: TopicPartition) -> None:
        """Read ``partition`` from ``partition.offset`` on (it must be assigned)."""
        ...

    def pause(self, partitions: list[TopicPartition]) -> None: ...

    def resume(self, partitions: list[TopicPartition]) -> None: ...

    def get_watermark_offsets(
        self, partition: TopicPartition, timeout: float = -1, cached: bool = False
    ) -> tuple[int, int]: ...

    def offsets_for_times(
        self, partitions: list[TopicPartition], timeout: float = -1
    ) -> list[TopicPartition]: ...

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any: ...

    def consumer_group_metadata(self) -> Any:
        """This member's group, generation and member id, for send_offsets_to_transaction."""
        ...

    def close(self) -> None: ...


class AdminEdge(Protocol):
    """Topic administration (creating the sidecar's own topics)."""

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any: ...

    def create_topics(self, new_topics: list[Any], **kwargs: Any) -> dict[str, Any]: ...

    def list_offsets(
        self, topic_partition_offsets: dict[TopicPartition, Any], **kwargs: Any
    ) -> dict[TopicPartition, Any]:
        """Futures of ListOffsets answers (``ListOffsetsResultInfo``), by partition."""
        ...

    def poll(self, timeout: float = -1) -> int:
        """Serve the client's callbacks (errors, log lines); admin results come as futures."""
        ...


class ClientFactory(Protocol):
    """Builds the sidecar's clients from one settings object (security included).

    ``consumer(group=True)`` is a member of the sidecar's consumer group (static
    membership when configured); ``group=False`` is an assign-only reader (the cancel
    feed) that never joins the group. ``overrides`` are librdkafka settings.
    """

    def producer(self, overrides: Mapping[str, Any] | None = None) -> ProducerEdge: ...

    def consumer(
        self, overrides: Mapping[str, Any] | None = None, *, group: bool = True
    ) -> ConsumerEdge: ...

    def admin(self, overrides: Mapping[str, Any] | None = None) -> AdminEdge: ...
