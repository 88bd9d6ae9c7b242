"""Producing a record until Kafka acknowledges it: the sidecar's one produce-with-retry.

Several writes must not be lost while their partition is ours: a cancel re-published to
the cancel topic, a dead letter of bad input (``bridge/ingest/side_writes.py``), a stored
message's changelog value or tombstone (``bridge/state/changelog.py``), a due record that
could not be parked in its store (``bridge/delivery/deliverer.py``). Each is a
:class:`Write`, and :class:`Resender` produces it with the same rules:

1. the record is queued in the one producer (``outbox.py``); with ``wait_s``, waiting that
   long for room in the local queue first (rare records: cancels, dead letters);
2. acknowledged → ``on_ack``;
3. no longer wanted (its partition moved away) → given up: the partition's next owner
   reads the record again from the last committed offset, so nothing is lost;
4. refused → ``on_failure`` may deal with it (write it shrunk, remember it for the next
   transaction); otherwise it is sent again after an exponential backoff (0.5 s doubling
   to 30 s, ``retry_queue.py``), never in a tight loop inside the delivery callback;
5. no room in the local queue → sent again after the same backoff.

Not thread-safe: the service's owner thread calls it (delivery reports run inside
``producer.poll`` on that thread).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from confluent_kafka import KafkaError as RdKafkaError
from confluent_kafka import Message

from delaybridge.bridge.produce.outbox import Outbox
from delaybridge.bridge.produce.retry_queue import RetryQueue, backoff_ms
from delaybridge.connectors.edge import Headers
from delaybridge.errors import KafkaError
from delaybridge.timerlog import Clock

log = logging.getLogger(__name__)


def _always() -> bool:
    return True


@dataclass(eq=False, slots=True)
class Write:
    """One record to produce until it is acknowledged (see the module docstring)."""

    what: str
    """What it is, for the log: ``"delay/3/812"``, ``"the changelog value of delay-3"``."""
    topic: str
    value: bytes | None
    key: bytes | None
    headers: Headers | None
    on_ack: Callable[[Message | None], None]
    partition: int | None = None
    wanted: Callable[[], bool] = field(default=_always)
    """False once it no longer needs to be written (step 3)."""
    on_failure: Callable[[Write, RdKafkaError], bool] | None = None
    """Called with a refusal (step 4): True when it dealt with it."""
    failures: int = 0


@dataclass(frozen=True, slots=True)
class Lane:
    """What a stream of writes shares: the changelog's values, or its tombstones, of one
    owned partition. Made once, so that a write acknowledged at its first try costs one
    callback and no :class:`Write` (:meth:`Resender.send_in`): the changelog writes a
    value and a tombstone per delivered message, and building a :class:`Write` for each
    took the tick drain from 0.90 to 0.85 of what it was before the house
    (docs/benchmarks.md, the house before and after). For the same reason the lane,
    not each record, holds what an acknowledgement calls: ``on_ack(key, extra, msg)``,
    with the record's key and the ``extra`` it was sent with."""

    what: str
    topic: str
    partition: int | None
    wanted: Callable[[], bool]
    on_ack: Callable[[bytes | None, Any, Message | None], None]


class Resender:
    """Produces :class:`Write`\\ s with the rules of the module docstring."""

    def __init__(self, outbox: Outbox, retries: RetryQueue, clock: Clock) -> None:
        self._outbox = outbox
        self._retries = retries
        self._clock = clock

    def send(self, w: Write, wait_s: float = 0.0) -> None:
        """Queue ``w`` (step 1); it is sent again until acknowledged or unwanted."""
        if not w.wanted():
            return
        on_delivery = partial(self._outcome, w)
        if wait_s <= 0:
            if not self._outbox.send(w.topic, w.value, w.key, w.headers, on_delivery, w.partition):
                self.later(w.failures, partial(self._again, w))  # step 5
            return
        try:
            self._outbox.send_blocking(w.topic, w.value, w.key, w.headers, on_delivery, wait_s)
        except KafkaError as exc:  # no room in the producer queue for a long while
            log.error("cannot queue %s for %r: %s; retrying", w.what, w.topic, exc)
            w.failures += 1
            self.later(w.failures, partial(self._again, w))

    def send_in(
        self,
        lane: Lane,
        value: bytes | None,
        key: bytes | None,
        headers: Headers | None,
        extra: Any = None,
    ) -> None:
        """``send(Write(...))`` for a record of ``lane`` whose ``lane.wanted()`` the caller
        has just seen true; acknowledged, it calls ``lane.on_ack(key, extra, msg)``. The
        :class:`Write` is built only if it must be sent again."""
        on_delivery = partial(self._lane_outcome, lane, value, key, headers, extra)
        if not self._outbox.send(lane.topic, value, key, headers, on_delivery, lane.partition):
            w = _write_of(lane, value, key, headers, extra)
            self.later(w.failures, partial(self._again, w))  # step 5

    def later(self, failures: int, run: Callable[[], bool]) -> None:
        """Call ``run`` after the backoff ``failures`` earned; it returns False when it
        found no room in the producer queue, to be called again shortly."""
        self._retries.at(self._clock.now_ms() + backoff_ms(failures), run)

    def _again(self, w: Write) -> bool:
        if not w.wanted():
            return True  # step 3
        on_delivery = partial(self._outcome, w)
        return self._outbox.send(w.topic, w.value, w.key, w.headers, on_delivery, w.partition)

    def _lane_outcome(
        self,
        lane: Lane,
        value: bytes | None,
        key: bytes | None,
        headers: Headers | None,
        extra: Any,
        err: RdKafkaError | None,
        msg: Message | None,
    ) -> None:
        if err is None:
            lane.on_ack(key, extra, msg)  # step 2
            return
        self._outcome(_write_of(lane, value, key, headers, extra), err, msg)

    def _outcome(self, w: Write, err: RdKafkaError | None, msg: Message | None) -> None:
        if err is None:
            w.on_ack(msg)  # step 2
            return
        if not w.wanted():
            return  # step 3
        w.failures += 1
        if w.on_failure is not None and w.on_failure(w, err):
            return  # step 4, dealt with
        log.warning("writing %s to %r failed: %s; retrying", w.what, w.topic, err.str())
        self.later(w.failures, partial(self._again, w))  # step 4


def _write_of(
    lane: Lane,
    value: bytes | None,
    key: bytes | None,
    headers: Headers | None,
    extra: Any,
) -> Write:
    return Write(
        lane.what,
        lane.topic,
        value,
        key,
        headers,
        partial(lane.on_ack, key, extra),
        partition=lane.partition,
        wanted=lane.wanted,
    )
