"""Bulk traffic for the benchmark: fill a topic fast, count what reached a target topic."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from rich.console import Console

from delaybridge.connectors import KafkaClients, headers_of, produce_blocking

#: Every benchmark record's value: 100 bytes, as in the issue's targets.
VALUE = b"x" * 100

HeadersFor = Callable[[int], list[tuple[str, str | bytes | None]]]


def fill(
    clients: KafkaClients,
    topic: str,
    n: int,
    headers_for: HeadersFor,
    console: Console,
    key_prefix: str = "",
) -> None:
    """Produce ``n`` records (key ``<key_prefix><i>``, headers ``headers_for(i)``) and
    flush them."""
    producer = clients.producer(
        {
            "linger.ms": 20,
            "compression.type": "lz4",
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    with console.status(f"producing {n:,} records to {topic}") as status:
        for i in range(n):
            key = f"{key_prefix}{i}".encode()
            produce_blocking(producer, topic, VALUE, key, headers=headers_for(i))
            if i % 100_000 == 0:
                status.update(f"producing {n:,} records to {topic}: {i:,}")
        producer.flush(120)


def count_arrivals(
    clients: KafkaClients,
    topic: str,
    n: int,
    timeout_s: float,
) -> tuple[int, float, float]:
    """Read ``n`` records; returns (seen, first and last record timestamp in seconds)."""
    consumer = clients.reader()
    consumer.subscribe([topic])
    seen = 0
    first = float("inf")
    last = 0.0
    deadline = time.monotonic() + timeout_s
    try:
        while seen < n and time.monotonic() < deadline:
            for msg in consumer.consume(10_000, timeout=0.5):
                if msg.error():
                    continue
                seen += 1
                ts = msg.timestamp()[1] / 1000
                first = min(first, ts)
                last = max(last, ts)
    finally:
        consumer.close()
    return seen, first, last


def steady(
    clients: KafkaClients, topic: str, rate: int, seconds: int, headers_for: HeadersFor
) -> int:
    """Produce ``rate`` records a second for ``seconds`` seconds, on schedule; how many."""
    producer = clients.producer({"linger.ms": 5})
    n = rate * seconds
    start = time.monotonic()
    for i in range(n):
        wait = start + i / rate - time.monotonic()
        if wait > 0:
            time.sleep(wait)  # pacing the producer, not waiting for a condition
        produce_blocking(producer, topic, VALUE, str(i).encode(), headers=headers_for(i))
        producer.poll(0)
    producer.flush(30)
    return n


class LiveArrivals:
    """Reads a target topic (read_committed) *while* traffic runs, so lateness counts
    from when a consumer could see each record, not only from its broker timestamp:
    in exactly-once mode a record is visible only once its transaction commits.

    ``due_header`` and ``id_header`` name the headers that carry each record's due time
    (epoch ms) and id: the sidecar's ``delay-due-ms`` and ``delay-id`` by default; a
    benchmark that also times another scheduler names headers that both pass through."""

    def __init__(
        self,
        clients: KafkaClients,
        topic: str,
        due_header: str = "delay-due-ms",
        id_header: str = "delay-id",
    ) -> None:
        self.stamped: list[int] = []
        """broker timestamp − the due time, per record"""
        self.visible: list[int] = []
        """the moment this reader received it − the due time, per record"""
        self.ids: list[str] = []
        """the id of each record, in arrival order"""
        self._due_header = due_header
        self._id_header = id_header
        self._consumer = clients.reader()
        self._consumer.subscribe([topic])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="arrivals", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            batch = self._consumer.consume(200, timeout=0.005)  # small: a timely receive time
            now_ms = time.time() * 1000
            for msg in batch:
                if msg.error():
                    continue
                for name, raw in headers_of(msg):
                    if name == self._id_header and raw is not None:
                        self.ids.append(raw.decode(errors="replace"))
                    elif name == self._due_header and raw is not None:
                        due = int(raw)
                        self.stamped.append(msg.timestamp()[1] - due)
                        self.visible.append(round(now_ms - due))

    def finish(self, n: int, timeout_s: float) -> int:
        """Wait for ``n`` records (or the timeout); stop reading; how many arrived."""
        deadline = time.monotonic() + timeout_s
        while len(self.visible) < n and time.monotonic() < deadline:
            time.sleep(0.05)  # polling another thread's count, bounded by the deadline
        self._stop.set()
        self._thread.join(10)
        self._consumer.close()
        return len(self.visible)
