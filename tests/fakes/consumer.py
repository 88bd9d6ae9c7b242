"""The fake consumer: a group member or an assign-only reader over a :class:`FakeCluster`.

With confluent-kafka's semantics (see ``tests/fakes/clients.py`` for the whole set):
``subscribe`` joins the fake group: the group's partitions are dealt round-robin over
its members (in the order they joined) and each member gets the partitions it gains
and loses as ``assign``/``revoke`` events, delivered inside its next ``consume`` like
librdkafka does (cooperative, incremental); ``close`` revokes its assignment and
leaves; :meth:`FakeConsumer.crash` leaves without a word (kill -9);
:meth:`FakeConsumer.rebalance` queues any event by hand. ``isolation.level``
read_committed (librdkafka's default) stops before open transactions and skips
aborted ones.
"""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, TopicPartition

from tests.fakes.cluster import OFFSET_INVALID, FakeCluster

MEMBER_IDS = itertools.count()


@dataclass
class FakeConsumer:
    cluster: FakeCluster
    group_id: str
    config: dict[str, Any] = field(default_factory=dict)
    positions: dict[tuple[str, int], int] = field(default_factory=dict)
    paused: set[tuple[str, int]] = field(default_factory=set)
    commit_error: int | None = None
    """When set, commit() raises KafkaException with this code."""
    closed: bool = False
    member_id: str = field(default_factory=lambda: f"member-{next(MEMBER_IDS)}")
    _topics: list[str] = field(default_factory=list)
    _callbacks: dict[str, Any] = field(default_factory=dict)
    _events: deque[tuple[str, list[TopicPartition]]] = field(default_factory=deque)
    owned: set[tuple[str, int]] = field(default_factory=set)
    """What the group gave this member (assigned or announced in a queued event)."""
    _errors: deque[KafkaError] = field(default_factory=deque)
    fetched_high: dict[tuple[str, int], int] = field(default_factory=dict)
    """Each partition's high watermark as of its last fetch (librdkafka's cache)."""

    def subscribe(
        self, topics: list[str], on_assign: Any = None, on_revoke: Any = None, on_lost: Any = None
    ) -> None:
        self._topics = list(topics)
        self._callbacks = {"assign": on_assign, "revoke": on_revoke, "lost": on_lost}
        self.cluster.groups.setdefault(self.group_id, []).append(self)
        _deal(self.cluster, self.group_id)

    def memberid(self) -> str:
        return self.member_id

    def crash(self) -> None:
        """Leave the group like a killed process: no callbacks, the others rebalance."""
        self._leave()
        self.closed = True

    def rebalance(self, kind: str, partitions: list[tuple[str, int]]) -> None:
        """Queue ``assign``, ``revoke`` or ``lost`` for the next consume()."""
        self._events.append((kind, [TopicPartition(t, p) for t, p in partitions]))
        if kind == "assign":
            self.owned |= set(partitions)
        else:
            self.owned -= set(partitions)

    def fail(self, error: KafkaError) -> None:
        """The next consume() returns ``error`` as a message error, as librdkafka hands a
        consumer its errors (a fatal one too: code ``_FATAL``, ``fatal()`` False, the
        error callback not called)."""
        self._errors.append(error)

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Message]:
        if self._errors:
            return [Message(error=self._errors.popleft())]
        while self._events:
            kind, tps = self._events.popleft()
            callback = self._callbacks.get(kind)
            if callback is not None:
                callback(self, tps)
            elif kind == "assign":
                self.incremental_assign(tps)
            else:
                self.incremental_unassign(tps)
        out: list[Message] = []
        committed = self.config.get("isolation.level", "read_committed") == "read_committed"
        for (topic, part), pos in list(self.positions.items()):
            if (topic, part) in self.paused:
                continue  # not fetched: its cached watermark is not updated either
            self.fetched_high[(topic, part)] = self.cluster.end(topic, part)
            end = self.cluster.end(topic, part, committed)
            while pos < end and len(out) < num_messages:
                if not (committed and self.cluster.aborted(topic, part, pos)):
                    out.append(self.cluster.message(topic, part, pos))
                pos += 1
            self.positions[(topic, part)] = pos
        return out

    def assign(self, partitions: list[TopicPartition]) -> None:
        self.positions = {}
        self.incremental_assign(partitions)

    def incremental_assign(self, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            end = self.cluster.end(tp.topic, tp.partition)
            offset = tp.offset
            if offset < 0:
                offset = end if offset == -1 else self._committed(tp.topic, tp.partition)
            self.positions[(tp.topic, tp.partition)] = max(0, min(offset, end))

    def incremental_unassign(self, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self.positions.pop((tp.topic, tp.partition), None)
            self.paused.discard((tp.topic, tp.partition))

    def assignment(self) -> list[TopicPartition]:
        return [TopicPartition(t, p) for t, p in self.positions]

    def committed(
        self, partitions: list[TopicPartition], timeout: float = -1
    ) -> list[TopicPartition]:
        return [
            TopicPartition(
                tp.topic,
                tp.partition,
                self.cluster.committed.get((self.group_id, tp.topic, tp.partition), OFFSET_INVALID),
            )
            for tp in partitions
        ]

    def _committed(self, topic: str, partition: int) -> int:
        return max(0, self.cluster.committed.get((self.group_id, topic, partition), 0))

    def commit(self, *, offsets: list[TopicPartition], asynchronous: bool = True) -> Any:
        if self.commit_error is not None:
            raise KafkaException(KafkaError(self.commit_error))
        for tp in offsets:
            self.cluster.committed[(self.group_id, tp.topic, tp.partition)] = tp.offset
        return None if asynchronous else offsets

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        return [
            TopicPartition(
                tp.topic, tp.partition, self.positions.get((tp.topic, tp.partition), -1001)
            )
            for tp in partitions
        ]

    def seek(self, partition: TopicPartition) -> None:
        key = (partition.topic, partition.partition)
        if key not in self.positions:
            raise KafkaException(KafkaError(KafkaError._STATE, "seek on an unassigned partition"))
        self.positions[key] = partition.offset

    def pause(self, partitions: list[TopicPartition]) -> None:
        self.paused |= {(tp.topic, tp.partition) for tp in partitions}

    def resume(self, partitions: list[TopicPartition]) -> None:
        self.paused -= {(tp.topic, tp.partition) for tp in partitions}

    def get_watermark_offsets(
        self, partition: TopicPartition, timeout: float = -1, cached: bool = False
    ) -> tuple[int, int]:
        """As librdkafka: ``cached`` gives the watermark of the partition's last fetch
        (-1001, OFFSET_INVALID, before the first; a paused partition is not fetched),
        else asks the cluster."""
        key = (partition.topic, partition.partition)
        if not cached:
            return 0, self.cluster.end(*key)
        if key not in self.positions:
            raise KafkaException(KafkaError(KafkaError._UNKNOWN_PARTITION))
        if key not in self.fetched_high:
            return OFFSET_INVALID, OFFSET_INVALID
        return 0, self.fetched_high[key]

    def offsets_for_times(
        self, partitions: list[TopicPartition], timeout: float = -1
    ) -> list[TopicPartition]:
        out = []
        for tp in partitions:
            log = self.cluster.topics[tp.topic][tp.partition]
            hit = next((o for o, r in enumerate(log) if r.timestamp_ms >= tp.offset), -1)
            out.append(TopicPartition(tp.topic, tp.partition, hit))
        return out

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        return self.cluster.metadata(topic)

    def consumer_group_metadata(self) -> Any:
        return SimpleNamespace(group_id=self.group_id, member=self)

    def close(self) -> None:
        revoke = self._callbacks.get("revoke")
        if revoke is not None and self.positions:
            revoke(self, self.assignment())
        self.positions = {}
        self._leave()
        self.closed = True

    def _leave(self) -> None:
        members = self.cluster.groups.get(self.group_id, [])
        if self in members:
            members.remove(self)
            _deal(self.cluster, self.group_id)


def _deal(cluster: FakeCluster, group: str) -> None:
    """Deal the subscribed partitions round-robin over the group's members; queue each
    member's revocations and assignments (cooperative: only what changes)."""
    members = [m for m in cluster.groups.get(group, []) if m._topics]
    if not members:
        return
    every = sorted(
        (t, p)
        for t in sorted({t for m in members for t in m._topics})
        for p in range(len(cluster.topics.get(t, [])))
    )
    target: dict[int, set[tuple[str, int]]] = {id(m): set() for m in members}
    for i, tp in enumerate(every):
        target[id(members[i % len(members)])].add(tp)
    for m in members:
        lost, gained = m.owned - target[id(m)], target[id(m)] - m.owned
        if lost:
            m._events.append(("revoke", [TopicPartition(t, p) for t, p in sorted(lost)]))
        if gained:
            m._events.append(("assign", [TopicPartition(t, p) for t, p in sorted(gained)]))
        m.owned = target[id(m)]
