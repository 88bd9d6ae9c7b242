"""A reader of the target topics on its own thread: every delivered record, when it was seen.

Assigned (no consumer group, so no session to lose when Kafka is away) to every partition
of the target topics from the beginning, ``read_committed``, with short reconnect
backoffs so that the moment a record is seen after an outage is the moment Kafka serves
it again, not the end of the reader's own backoff. Each record becomes a
:class:`~delaybridge.tools.scenario.verdict.Delivered`: its ``delay-id``,
``delay-due-ms``, ``delay-origin`` partition, record timestamp and receive time.
"""

from __future__ import annotations

import threading
import time

from confluent_kafka import OFFSET_BEGINNING, Message, TopicPartition

from delaybridge.connectors import KafkaClients, header_text
from delaybridge.contract import names
from delaybridge.tools.scenario.verdict import Delivered

READER_CONFIG = {
    "reconnect.backoff.ms": 50,
    "reconnect.backoff.max.ms": 500,
    "fetch.wait.max.ms": 100,
}


class ArrivalLog:
    """Collects :class:`Delivered` records from ``topics`` until :meth:`close`."""

    def __init__(self, clients: KafkaClients, topics: list[str]) -> None:
        self._clients = clients
        self._consumer = clients.reader(READER_CONFIG)
        listing = self._consumer.list_topics(timeout=30).topics
        self._next: dict[tuple[str, int], int] = {
            (topic, p): OFFSET_BEGINNING
            for topic in topics
            for p in sorted(listing[topic].partitions)
        }
        """Per target partition, the next offset to read (kept for :meth:`reopen`)."""
        self._consumer.assign([TopicPartition(t, p, o) for (t, p), o in self._next.items()])
        self._reopen = threading.Event()
        self._lock = threading.Lock()
        self._records: list[Delivered] = []
        self._last_ms = _now_ms()
        self.foreign = 0
        """records without the sidecar's headers (not a delivery)"""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="arrivals", daemon=True)
        self._thread.start()

    def records(self) -> list[Delivered]:
        """Every delivery read so far, in the order read."""
        with self._lock:
            return list(self._records)

    def __len__(self) -> int:
        with self._lock:
            return len(self._records)

    def ids(self) -> set[str]:
        with self._lock:
            return {d.id for d in self._records}

    def quiet_ms(self) -> int:
        """How long nothing new has arrived (since the last delivery, or the start)."""
        with self._lock:
            return _now_ms() - self._last_ms

    def reopen(self) -> None:
        """Read on with a new consumer from where this one stands, once Kafka is back
        after an outage: a librdkafka consumer that lived through a broker frozen for
        longer than its request timeouts was seen to read nothing more afterwards
        (test_kafka_outage, frozen), while the target topics held every delivery. The
        reader is the test's eyes, not the system under test: it must not go blind."""
        self._reopen.set()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self._consumer.close()

    def _renew(self) -> None:
        self._reopen.clear()
        self._consumer.close()
        self._consumer = self._clients.reader(READER_CONFIG)
        self._consumer.assign([TopicPartition(t, p, o) for (t, p), o in self._next.items()])

    def _run(self) -> None:
        while not self._stop.is_set():
            if self._reopen.is_set():
                self._renew()
            batch = self._consumer.consume(500, timeout=0.05)
            for msg in batch:
                if msg.error() is None:
                    where = (msg.topic() or "", msg.partition() or 0)
                    self._next[where] = max(self._next.get(where, 0), (msg.offset() or 0) + 1)
            seen_ms = _now_ms()
            found = [d for msg in batch if (d := self._delivered(msg, seen_ms)) is not None]
            with self._lock:
                self._records.extend(found)
                if found:
                    self._last_ms = seen_ms

    def _delivered(self, msg: Message, seen_ms: int) -> Delivered | None:
        if msg.error() is not None:
            return None
        headers = header_text(msg)
        try:
            origin = headers[names.OUT_ORIGIN].rsplit("/", 2)[1]
            return Delivered(
                headers[names.OUT_ID],
                int(headers[names.OUT_DUE_MS]),
                msg.timestamp()[1],
                seen_ms,
                int(origin),
            )
        except (KeyError, IndexError, ValueError):
            self.foreign += 1
            return None


def _now_ms() -> int:
    return int(time.time() * 1000)
