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
remembered (``bridge/produce/poison.py``) and written shrunk on that next read.

Not thread-safe: the service's owner thread calls it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from confluent_kafka import KafkaError as RdKafkaError
from confluent_kafka import Message

from delaybridge.bridge.commit.holds import Hold
from delaybridge.bridge.partition.state import PartitionState
from delaybridge.bridge.produce.poison import Poisoned
from delaybridge.bridge.produce.resend import Resender, Write
from delaybridge.connectors.edge import Headers
from delaybridge.contract.dead_letters import shrunk

log = logging.getLogger(__name__)
_TOO_LARGE = {RdKafkaError.MSG_SIZE_TOO_LARGE, RdKafkaError.RECORD_LIST_TOO_LARGE}
#: How long a side write waits for room in the producer queue before it is retried later.
QUEUE_WAIT_S = 30.0


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
    shrink_step: int = 0
    hold: Hold | None = field(default=None)
    on_ack: Callable[[Message | None], None] | None = None
    """Told where Kafka put it (a cancel: the cancel horizon's bookkeeping)."""

    @property
    def where(self) -> str:
        return f"{self.part.topic}/{self.part.partition}/{self.offset}"


class SideWriter:
    """Writes side records with the guarantees of the module docstring."""

    def __init__(self, resender: Resender, poisoned: Poisoned | None = None) -> None:
        self._resender = resender
        self._poisoned = poisoned
        """Exactly-once mode: side writes that failed in an aborted transaction."""

    def write(self, w: SideWrite) -> None:
        """Start a side write (step 1); its offset commits once it is acked."""
        if self._poisoned:
            remembered = self._poisoned.peek(_key(w))
            if remembered is not None:
                w.shrink_step = remembered[1]
        part = w.part
        part.offsets.handled(w.offset)
        w.hold = Hold.of(part.offsets, w.offset)
        part.side_unacked += 1
        value, headers = _payload(w)
        write = Write(
            w.where,
            w.topic,
            value,
            w.key,
            headers,
            on_ack=partial(self._acked, w),
            wanted=partial(_wanted, part),
            on_failure=partial(self._refused, w),
        )
        self._resender.send(write, QUEUE_WAIT_S)

    def _acked(self, w: SideWrite, msg: Message | None) -> None:
        assert w.hold is not None
        w.hold.done()  # step 2
        w.part.side_unacked -= 1
        if w.on_ack is not None:
            w.on_ack(msg)

    def _refused(self, w: SideWrite, write: Write, err: RdKafkaError) -> bool:
        """Steps 3 (shrink) and, in exactly-once mode, the doomed transaction's rule;
        False leaves the write to the retry of step 4."""
        too_large = w.shrinkable and err.code() in _TOO_LARGE and w.shrink_step < 2
        if self._poisoned is not None:  # exactly-once: the transaction is doomed
            self._poisoned.remember(_key(w), err, w.shrink_step + too_large)
            return True
        if not too_large:
            return False
        w.shrink_step += 1  # step 3
        log.warning(
            "%r refused %s as too large (%s); writing it without its %s",
            w.topic,
            w.where,
            err.str(),
            "value" if w.shrink_step == 1 else "headers",
        )
        write.value, write.headers = _payload(w)
        self._resender.send(write)
        return True


def _wanted(part: PartitionState) -> bool:
    return not part.closed  # step 5


def _payload(w: SideWrite) -> tuple[bytes | None, Headers]:
    if not w.shrink_step:
        return w.value, w.headers
    return None, shrunk(w.headers, w.value, w.shrink_step)


def _key(w: SideWrite) -> tuple[object, ...]:
    return ("side", w.part.key, w.offset, w.topic)
