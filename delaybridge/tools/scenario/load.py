"""A steady stream of schedules, a share of them cancelled from a random partition.

The traffic of issue 25's rolling-restart scenario: ``rate`` schedules a second, each due
``due_min_ms``–``due_max_ms`` after it is sent (``deliver-at-ms``, an explicit
``delay-id``, keyed by its id so that the Java partitioner spreads them over the delay
topic's partitions); every ``cancel_share`` of them (spread evenly) is cancelled by a
``delay-cancel`` record sent to a *random* partition at a random moment between the
schedule and ``cancel_lead_ms`` before its due time (a cancel never lands where its
message does on purpose: DESIGN §2 asks it to work in whichever partition it lands).

Every delivery report is kept, so the verdict (``scenario/verdict.py``) judges each cancel
by when Kafka acknowledged it, not by when it was meant to go: a producer that falls
behind on a busy machine makes cancels late (``cancels_late``), not wrong verdicts.

Runs on its own thread between :meth:`start` and :meth:`stop`; its sleeps pace the
producer, they wait for no condition. Not thread-safe otherwise: read :meth:`scheduled`
after :meth:`stop`.
"""

from __future__ import annotations

import heapq
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, Message

from delaybridge.connectors import KafkaClients, produce_blocking
from delaybridge.contract import names
from delaybridge.tools.scenario.verdict import Cancel, Scheduled

VALUE = b"x" * 100
"""Every schedule's value: 100 bytes, as the benchmarks use."""


@dataclass(frozen=True)
class LoadShape:
    """What the stream looks like (the issue's sizes are the defaults)."""

    rate: int = 200
    """schedules per second"""
    due_min_ms: int = 5_000
    due_max_ms: int = 25_000
    cancel_share: float = 0.3
    cancel_lead_ms: int = 3_000
    """a cancel goes out at least this long before its message's due time"""
    prefix: str = "roll"
    """ids are ``<prefix>-<n>``"""
    seed: int = 25


@dataclass
class _Sent:
    due_ms: int
    partition: int = -1
    cancel_partition: int = -1
    cancel_sent_ms: int = 0
    cancel_acked_ms: int | None = None
    cancelled: bool = False


class ScheduleLoad:
    """The stream of the module docstring, to ``delay`` for ``target``."""

    def __init__(
        self,
        clients: KafkaClients,
        delay: str,
        partitions: int,
        target: str,
        shape: LoadShape = LoadShape(),
    ) -> None:
        self._producer = clients.producer({"linger.ms": 5})
        self._delay = delay
        self._partitions = partitions
        self._target = target
        self.shape = shape
        self._sent: dict[str, _Sent] = {}
        self._sent_lock = threading.Lock()
        """Held to add to :attr:`_sent` (the load's thread) and to copy it (a reader)."""
        self.errors: list[str] = []
        """delivery errors, as ``<id>: <error>``"""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="schedule-load", daemon=True)
        self.started_ms = 0
        self.stopped_ms = 0

    @property
    def sent(self) -> int:
        """Schedules sent so far."""
        return len(self._sent)

    def start(self) -> None:
        self.started_ms = _now_ms()
        self._thread.start()

    def stop(self, timeout_s: float = 60) -> None:
        """Stop sending schedules; send the cancels still owed (each at its moment, so
        the last goes out ``cancel_lead_ms`` or more before its message is due), then
        wait for every delivery report."""
        self._stop.set()
        self._thread.join(timeout_s + self.shape.due_max_ms / 1000)
        assert not self._thread.is_alive(), "the load did not finish its cancels"
        left = self._producer.flush(timeout_s)
        if left:
            self.errors.append(f"{left} records not acknowledged within {timeout_s} s")

    def scheduled(self) -> list[Scheduled]:
        """Everything sent so far, as the verdict takes it (safe while the load sends:
        it reads a copy, taken under the lock the load's thread adds under)."""
        with self._sent_lock:
            sent = list(self._sent.items())
        return [
            Scheduled(
                id,
                s.due_ms,
                s.partition,
                Cancel(s.cancel_partition, s.cancel_sent_ms, s.cancel_acked_ms)
                if s.cancelled
                else None,
            )
            for id, s in sent
        ]

    def _run(self) -> None:
        shape = self.shape
        rng = random.Random(shape.seed)
        cancels: list[tuple[float, str]] = []  # (monotonic time to send, id): a heap
        start = time.monotonic()
        i = 0
        while not self._stop.is_set() or cancels:
            now = time.monotonic()
            while not self._stop.is_set() and start + i / shape.rate <= now:
                id = f"{shape.prefix}-{i}"
                delay_ms = rng.randint(shape.due_min_ms, shape.due_max_ms)
                self._schedule(id, _now_ms() + delay_ms)
                # Every 10 schedules, cancel_share * 10 of them: spread evenly, not by chance.
                if (i * 7) % 10 < shape.cancel_share * 10:
                    latest_s = (delay_ms - shape.cancel_lead_ms) / 1000
                    heapq.heappush(cancels, (now + rng.uniform(0, max(latest_s, 0)), id))
                i += 1
            while cancels and cancels[0][0] <= now:
                _, id = heapq.heappop(cancels)
                self._cancel(id, rng.randrange(self._partitions))
            self._producer.poll(0)
            wake = min([c[0] for c in cancels[:1]] + [start + i / shape.rate])
            time.sleep(max(0.0, min(wake - time.monotonic(), 0.01)))  # pacing the producer

    def _schedule(self, id: str, due_ms: int) -> None:
        sent = _Sent(due_ms)
        with self._sent_lock:
            self._sent[id] = sent
        headers: list[tuple[str, str | bytes | None]] = [
            (names.TARGET_TOPIC, self._target),
            (names.DELIVER_AT_MS, str(due_ms)),
            (names.DELAY_ID, id),
        ]

        def acked(err: KafkaError | None, msg: Message) -> None:
            if err is not None:
                self.errors.append(f"{id}: {err.str()}")
            else:
                sent.partition = msg.partition() or 0

        self._produce(id.encode(), VALUE, headers, None, acked)

    def _cancel(self, id: str, partition: int) -> None:
        sent = self._sent[id]
        sent.cancelled = True
        sent.cancel_partition = partition
        sent.cancel_sent_ms = _now_ms()

        def acked(err: KafkaError | None, msg: Message) -> None:
            if err is not None:
                self.errors.append(f"cancel of {id}: {err.str()}")
            else:
                # An upper bound of the append: the report is served at the next poll.
                sent.cancel_acked_ms = _now_ms()

        self._produce(id.encode(), None, [(names.DELAY_CANCEL, id)], partition, acked)

    def _produce(
        self,
        key: bytes,
        value: bytes | None,
        headers: list[tuple[str, str | bytes | None]],
        partition: int | None,
        on_delivery: Callable[[Any, Any], None],
    ) -> None:
        produce_blocking(
            self._producer,
            self._delay,
            value,
            key,
            partition=partition,
            headers=headers,
            on_delivery=on_delivery,
        )


def _now_ms() -> int:
    return int(time.time() * 1000)
