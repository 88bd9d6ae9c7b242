"""Records a delay-topic record turns into besides a stored message: side writes.

A cancel is re-published to the cancel topic; bad input goes to the dead-letter topic.
Either way the delay-topic offset may be committed only once Kafka acknowledged the
write (``bridge/commit/offsets.py``), and nothing is ever dropped:

1. the write is queued (waiting for room in the producer queue if need be);
2. acked → the offset is released for the commit;
3. refused as too large (dead letters only) → written again shrunk (without its value,
   then without the producer's headers too: ``contract/dead_letters.py``);
4. any other failure → retried with exponential backoff (``bridge/produce/retry_queue.py``),
   never in a tight loop inside the delivery callback;
5. the partition was closed meanwhile → given up: its offset was never committed, so
   the next owner reads the record again.

In exactly-once mode a failure dooms the transaction instead (every partition restarts
from the last commit and reads the record again); a dead letter refused as too large is
remembered (``bridge/commit/poison.py``) and written shrunk on that next read.

Not thread-safe: the service's owner thread calls it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import partial

from confluent_kafka import KafkaError as RdKafkaError
from confluent_kafka import Message

from delaybridge.bridge.commit.poison import Poisoned
from delaybridge.bridge.partition.state import PartitionState
from delaybridge.bridge.produce.outbox import Outbox
from delaybridge.bridge.produce.retry_queue import RetryQueue, backoff_ms
from delaybridge.connectors.edge import Headers
from delaybridge.contract.dead_letters import shrunk
from delaybridge.errors import KafkaError
from delaybridge.timerlog import Clock

log = logging.getLogger(__name__)
_TOO_LARGE = {RdKafkaError.MSG_SIZE_TOO_LARGE, RdKafkaError.RECORD_LIST_TOO_LARGE}


@dataclass(eq=False, slots=True)
class SideWrite:
    part: PartitionState
    offset: int
    topic: str
    key: bytes | None
    value: bytes | None
    headers: Headers
    shrinkable: bool
    """A dead letter: may be written without its value when too large."""
    failures: int = 0
    shrink_step: int = 0

    @property
    def where(self) -> str:
        return f"{self.part.topic}/{self.part.partition}/{self.offset}"


class SideWriter:
    """Writes side records with the guarantees of the module docstring."""

    def __init__(
        self, outbox: Outbox, retries: RetryQueue, clock: Clock, poisoned: Poisoned | None = None
    ) -> None:
        self._outbox = outbox
        self._retries = retries
        self._clock = clock
        self._poisoned = poisoned
        """Exactly-once mode: side writes that failed in an aborted transaction."""

    def write(self, w: SideWrite) -> None:
        """Start a side write (step 1); its offset commits once it is acked."""
        if self._poisoned:
            remembered = self._poisoned.peek(_key(w))
            if remembered is not None:
                w.shrink_step = remembered[1]
        w.part.offsets.produce_started(w.offset)
        w.part.side_unacked += 1
        try:
            self._send_blocking(w)
        except KafkaError as exc:  # no room in the producer queue for a long while
            log.error("cannot queue %s for %r: %s; retrying", w.where, w.topic, exc)
            self._retry(w)

    def _send_blocking(self, w: SideWrite) -> None:
        value, headers = _payload(w)
        self._outbox.send_blocking(w.topic, value, w.key, headers, partial(self._outcome, w))

    def _send(self, w: SideWrite) -> bool:
        if w.part.closed:
            return True  # step 5
        value, headers = _payload(w)
        return self._outbox.send(w.topic, value, w.key, headers, partial(self._outcome, w))

    def _outcome(self, w: SideWrite, err: RdKafkaError | None, _msg: Message | None) -> None:
        if err is None:
            w.part.offsets.produce_acked(w.offset)  # step 2
            w.part.side_unacked -= 1
            return
        if w.part.closed:
            return  # step 5
        too_large = w.shrinkable and err.code() in _TOO_LARGE and w.shrink_step < 2
        if self._poisoned is not None:  # exactly-once: the transaction is doomed
            self._poisoned.remember(_key(w), err, w.shrink_step + too_large)
            return
        if too_large:
            w.shrink_step += 1  # step 3
            log.warning(
                "%r refused %s as too large (%s); writing it without its %s",
                w.topic,
                w.where,
                err.str(),
                "value" if w.shrink_step == 1 else "headers",
            )
            if not self._send(w):
                self._retry(w)
            return
        log.warning("writing %s to %r failed: %s; retrying", w.where, w.topic, err.str())
        self._retry(w)  # step 4

    def _retry(self, w: SideWrite) -> None:
        w.failures += 1
        self._retries.at(self._clock.now_ms() + backoff_ms(w.failures), partial(self._send, w))


def _payload(w: SideWrite) -> tuple[bytes | None, Headers]:
    if not w.shrink_step:
        return w.value, w.headers
    return None, shrunk(w.headers, w.value, w.shrink_step)


def _key(w: SideWrite) -> tuple[object, ...]:
    return ("side", w.part.key, w.offset, w.topic)
