"""A due record whose first try failed: its state, where it waits, and the rules.

**Parking.** A record that must be tried again later is *parked*: appended to its store
again, due at the retry time, with its state in one internal header (``RETRY_HEADER``,
stripped before it goes out), and its original entry resolved. So the delivery cursor
moves on at once instead of waiting for the retry (a target topic missing for a minute
no longer holds back everything due after it), nothing is held in memory while it
waits, and the retry survives a restart. The state keeps the original due time (it is
what ``delay-due-ms`` and the lateness report), the first failure's time, the number of
failures and, once it is bound for the dead-letter topic, why.

**The rules** (:func:`judge`), by the error of the delivery report:

1. the target topic or partition does not exist → retry until
   ``missing_topic_retry_ms`` after the first failure, then dead-letter;
2. a retryable failure (broker down, timeouts, too few replicas) → retry until
   ``retry_unavailable_ms`` (default an hour, well above a broker restart), then
   dead-letter as ``target-unavailable``;
3. too large for the target → dead-letter at once; any other error likewise.

A dead letter the dead-letter topic refuses as too large is written without its value,
then without the producer's headers (``contract/dead_letters.py``); any other failure of it
is parked and retried, forever: a dead letter is never dropped.

**Recurring schedules.** A fresh occurrence (its last header the series state,
``contract/series.py``) takes this path too, so the hot loop tests one set: its state
becomes ``delay-occurrence`` on the way out, and the deliverer spawns the next one
(``bridge/delivery/occurrences.py``). Parked, it keeps the state before the retry header.

**Damaged records.** A record the store could not vouch for (its CRC failed when read:
a ``DamagedRecord``, ``timerlog/quarantine.py``) starts bound for the dead-letter topic
with reason ``store-corrupt``: it is never delivered to its target.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
from confluent_kafka import KafkaError as RdKafkaError

from delaybridge.bridge.partition.pipeline import Batch
from delaybridge.bridge.partition.state import PartitionState
from delaybridge.contract.names import INTERNAL_HEADERS, OUT_OCCURRENCE, SERIES_HEADER
from delaybridge.contract.reasons import Reason
from delaybridge.contract.series import occurrence_of
from delaybridge.settings import DeliverySettings
from delaybridge.timerlog import DamagedRecord, DueRecord, Headers, TimerRecord
from delaybridge.timerlog.quarantine import QUARANTINE_HEADER

#: The internal header of a parked record; always its last header.
RETRY_HEADER = "delaybridge-retry"
assert RETRY_HEADER in INTERNAL_HEADERS and QUARANTINE_HEADER in INTERNAL_HEADERS
#: Last headers that send a due record down the attempt path (not the hot loop): a
#: parked record's state, the store's note on a damaged one (dead-lettered), or the
#: state of a recurring schedule's occurrence.
ATTEMPT_HEADERS = frozenset({RETRY_HEADER, QUARANTINE_HEADER, SERIES_HEADER})

_MISSING = {
    RdKafkaError._UNKNOWN_TOPIC: Reason.TARGET_TOPIC_MISSING,
    RdKafkaError.UNKNOWN_TOPIC_OR_PART: Reason.TARGET_TOPIC_MISSING,
    RdKafkaError._UNKNOWN_PARTITION: Reason.TARGET_PARTITION_MISSING,
}
TOO_LARGE = {RdKafkaError.MSG_SIZE_TOO_LARGE, RdKafkaError.RECORD_LIST_TOO_LARGE}
#: Failures that pass when the cluster recovers. librdkafka marks few of them
#: ``retriable()`` (not ``_MSG_TIMED_OUT``, which is what a broker down for longer than
#: ``message.timeout.ms`` gives), so they are listed.
_UNAVAILABLE = {
    RdKafkaError._MSG_TIMED_OUT,
    RdKafkaError._TIMED_OUT,
    RdKafkaError._TRANSPORT,
    RdKafkaError._ALL_BROKERS_DOWN,
    RdKafkaError.REQUEST_TIMED_OUT,
    RdKafkaError.NOT_ENOUGH_REPLICAS,
    RdKafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    RdKafkaError.LEADER_NOT_AVAILABLE,
    RdKafkaError.NOT_LEADER_FOR_PARTITION,
    RdKafkaError.NETWORK_EXCEPTION,
    RdKafkaError.KAFKA_STORAGE_ERROR,
    RdKafkaError.BROKER_NOT_AVAILABLE,
}


@dataclass(eq=False, slots=True)
class Attempt:
    """One due record's way out after a failure (or read back parked)."""

    part: PartitionState
    due: DueRecord
    batch: Batch
    due_ms: int
    """The original due time: delivered as ``delay-due-ms``."""
    first_failure_ms: int = 0
    failures: int = 0
    dead_letter: tuple[Reason, str] | None = None
    """Set once the record is bound for the dead-letter topic (reason, detail)."""
    generation: int = 0
    """Which stored copy of the message this is: +1 each time it is parked."""
    shrink: int = 0
    """A dead letter too large for its topic: 1 without the value, 2 without headers."""

    @classmethod
    def of(cls, part: PartitionState, due: DueRecord, batch: Batch) -> Attempt:
        """The attempt of a due record: fresh, or the state a parked one carries."""
        rec = due.record
        if isinstance(rec, DamagedRecord):  # the store could not vouch for it
            detail = (rec.headers[-1][1] or b"").decode(errors="replace")
            return cls(part, due, batch, rec.due_ms, dead_letter=(Reason.STORE_CORRUPT, detail))
        if not is_parked(rec):
            return cls(part, due, batch, rec.due_ms)
        state = _state(rec)
        dead = state.get("dead_letter")
        return cls(
            part,
            due,
            batch,
            int(state["due_ms"]),
            int(state["first_failure_ms"]),
            int(state["failures"]),
            None if dead is None else (Reason(dead[0]), str(dead[1])),
            int(state.get("generation", 0)),
            int(state.get("shrink", 0)),
        )

    @property
    def origin(self) -> str:
        return self.part.origin_prefix + str(self.due.record.source_offset)

    @property
    def headers(self) -> Headers:
        """The producer's headers (without our retry state or the store's note), and a
        series occurrence's number in place of its state."""
        rec = self.due.record
        hs = rec.headers[:-1] if is_parked(rec) or isinstance(rec, DamagedRecord) else rec.headers
        if hs and hs[-1][0] == SERIES_HEADER:
            return (*hs[:-1], (OUT_OCCURRENCE, str(occurrence_of(hs[-1][1])).encode()))
        return hs

    def parked(self, at_ms: int) -> TimerRecord:
        """The record to append again, due at ``at_ms``, carrying this state (its
        generation one higher: it is a new stored copy, see the changelog's keys)."""
        state = {
            "due_ms": self.due_ms,
            "first_failure_ms": self.first_failure_ms,
            "failures": self.failures,
            "dead_letter": None if self.dead_letter is None else list(self.dead_letter),
            "generation": self.generation + 1,
            "shrink": self.shrink,
        }
        headers = (*self.headers, (RETRY_HEADER, orjson.dumps(state)))
        return self.due.record._replace(due_ms=at_ms, headers=headers)


def is_parked(rec: TimerRecord) -> bool:
    headers = rec.headers
    return bool(headers) and headers[-1][0] == RETRY_HEADER


def generation_of(rec: TimerRecord) -> int:
    """Which stored copy of its message ``rec`` is: 0, or +1 per parking; occurrence k
    of a series adds ``(k - 1) << 32`` (its changelog key then grows to 16 bytes,
    ``timerlog/changelog_codec.py``), so every occurrence and each of its parked copies
    has a key of its own."""
    headers = rec.headers
    if not headers:
        return 0
    name = headers[-1][0]
    if name == SERIES_HEADER:
        return (occurrence_of(headers[-1][1]) - 1) << 32
    if name != RETRY_HEADER:
        return 0
    parked = int(_state(rec).get("generation", 0))
    if len(headers) > 1 and headers[-2][0] == SERIES_HEADER:
        return parked | (occurrence_of(headers[-2][1]) - 1) << 32
    return parked


def _state(rec: TimerRecord) -> dict[str, Any]:
    state: dict[str, Any] = orjson.loads(rec.headers[-1][1] or b"{}")
    return state


@dataclass(frozen=True, slots=True)
class Verdict:
    retry: bool
    reason: Reason
    detail: str


def judge(err: RdKafkaError, attempt: Attempt, now_ms: int, settings: DeliverySettings) -> Verdict:
    """Retry later, or dead-letter now (the rules of the module docstring)."""
    rec = attempt.due.record
    where = f"topic {rec.target_topic!r}"
    if rec.target_partition >= 0:
        where += f" partition {rec.target_partition}"
    code = err.code()
    failing_ms = now_ms - attempt.first_failure_ms
    if code in _MISSING:
        retry = failing_ms < settings.missing_topic_retry_ms
        return Verdict(retry, _MISSING[code], f"{where} missing for {failing_ms} ms: {err.str()}")
    if (code in _UNAVAILABLE or err.retriable()) and not err.fatal():
        retry = failing_ms < settings.retry_unavailable_ms
        detail = f"{where} failing for {failing_ms} ms: {err.str()} [{err.name()}]"
        return Verdict(retry, Reason.TARGET_UNAVAILABLE, detail)
    if code in TOO_LARGE:
        return Verdict(False, Reason.RECORD_TOO_LARGE, f"{where}: {err.str()}")
    return Verdict(False, Reason.DELIVERY_FAILED, f"{where}: {err.str()} [{err.name()}]")
