"""An in-memory Kafka cluster for unit tests: topics, partitions, records, group offsets.

It holds what a broker would and nothing more; the fake clients (``tests/fakes/clients``)
read and write it through the same calls the real clients make. Records come back as
real ``confluent_kafka.Message`` values, so the code under test cannot tell the
difference in what it reads.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from confluent_kafka import Message

from delaybridge.timerlog import Clock

CREATE_TIME = 1  # confluent_kafka.TIMESTAMP_CREATE_TIME
OFFSET_INVALID = -1001


@dataclass(eq=False)
class Txn:
    """A producer transaction; its records are visible to read_committed readers once
    ``status`` is committed, never once aborted, and stop them while it is open."""

    status: str = "open"  # open | committed | aborted


@dataclass(frozen=True)
class Stored:
    """One record in a partition's log (``txn``: written by a transaction)."""

    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] | None
    timestamp_ms: int
    txn: Txn | None = None

    @property
    def aborted(self) -> bool:
        return self.txn is not None and self.txn.status == "aborted"

    @property
    def open(self) -> bool:
        return self.txn is not None and self.txn.status == "open"


@dataclass
class FakeCluster:
    """Topics (name -> partitions -> records) and committed group offsets."""

    topics: dict[str, list[list[Stored]]] = field(default_factory=dict)
    configs: dict[str, dict[str, str]] = field(default_factory=dict)
    committed: dict[tuple[str, str, int], int] = field(default_factory=dict)
    """(group, topic, partition) -> the next offset to read."""
    clock: Clock | None = None
    """Where record timestamps come from when none is given (default: wall clock)."""
    groups: dict[str, list[Any]] = field(default_factory=dict)
    """Consumer group -> its members (FakeConsumer), in the order they joined."""
    txn_owners: dict[str, Any] = field(default_factory=dict)
    """transactional.id -> the producer that initialized it last (the others are fenced)."""

    def create_topic(
        self, name: str, partitions: int = 1, config: dict[str, str] | None = None
    ) -> str:
        if name not in self.topics:
            self.topics[name] = [[] for _ in range(partitions)]
            self.configs[name] = dict(config or {})
        return name

    def append(
        self,
        topic: str,
        partition: int,
        key: bytes | None,
        value: bytes | None,
        headers: Any = None,
        timestamp_ms: int | None = None,
        txn: Txn | None = None,
    ) -> int:
        """Append one record; returns its offset."""
        log = self.topics[topic][partition]
        ts = timestamp_ms
        if ts is None:
            ts = self.clock.now_ms() if self.clock is not None else time.time_ns() // 1_000_000
        log.append(Stored(key, value, _bytes_headers(headers), ts, txn))
        return len(log) - 1

    def message(self, topic: str, partition: int, offset: int) -> Message:
        rec = self.topics[topic][partition][offset]
        return Message(
            topic=topic,
            partition=partition,
            offset=offset,
            key=rec.key,
            value=rec.value,
            headers=None if rec.headers is None else list(rec.headers),
            timestamp=(CREATE_TIME, rec.timestamp_ms),
        )

    def records(self, topic: str) -> list[Message]:
        """Every committed record of ``topic``, partition by partition: what a
        read_committed consumer reads (for assertions)."""
        return [
            self.message(topic, p, o)
            for p, log in enumerate(self.topics.get(topic, []))
            for o in range(len(log))
            if not log[o].aborted and not log[o].open
        ]

    def end(self, topic: str, partition: int, read_committed: bool = False) -> int:
        """The high watermark; for read_committed, the first offset of a transaction
        still open (the last stable offset)."""
        log = self.topics[topic][partition]
        if read_committed:
            for offset, rec in enumerate(log):
                if rec.open:
                    return offset
        return len(log)

    def aborted(self, topic: str, partition: int, offset: int) -> bool:
        return self.topics[topic][partition][offset].aborted

    def metadata(self, topic: str | None = None) -> Any:
        """What ``list_topics`` returns: ``.topics[name].partitions`` and ``.error``."""
        names = [topic] if topic is not None else list(self.topics)
        found = {
            name: SimpleNamespace(
                error=None,
                partitions={p: SimpleNamespace(id=p, leader=1) for p in range(len(parts))},
            )
            for name in names
            if (parts := self.topics.get(name)) is not None
        }
        return SimpleNamespace(topics=found)


def _bytes_headers(headers: Any) -> list[tuple[str, bytes | None]] | None:
    if not headers:
        return None
    items = headers.items() if isinstance(headers, dict) else headers
    return [(k, v.encode() if isinstance(v, str) else v) for k, v in items]
