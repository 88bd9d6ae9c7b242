"""A due record whose first try failed: its state, and where it waits.

**Parking.** A record that must be tried again later is *parked*: appended to its store
again, due at the retry time, with its state in one internal header (``RETRY_HEADER``,
stripped before it goes out), and its original entry resolved. So the delivery cursor
moves on at once instead of waiting for the retry (a target topic missing for a minute
no longer holds back everything due after it), nothing is held in memory while it
waits, and the retry survives a restart. The state keeps the original due time (it is
what ``delay-due-ms`` and the lateness report), the first failure's time, the number of
failures and, once it is bound for the dead-letter topic, why.

**The rules** of what a failure becomes are ``bridge/delivery/failure_rules.py``.

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

import orjson

from delaybridge.bridge.partition.copies import RETRY_HEADER, is_parked, parked_state
from delaybridge.bridge.partition.pipeline import Batch
from delaybridge.bridge.partition.state import PartitionState
from delaybridge.contract.expiry import deadline_of
from delaybridge.contract.names import (
    EXPIRE_HEADER,
    INTERNAL_HEADERS,
    OUT_OCCURRENCE,
    SERIES_HEADER,
)
from delaybridge.contract.reasons import Reason
from delaybridge.contract.series import occurrence_of
from delaybridge.timerlog import DamagedRecord, DueRecord, Headers, TimerRecord
from delaybridge.timerlog.quarantine import QUARANTINE_HEADER

assert QUARANTINE_HEADER in INTERNAL_HEADERS
#: Last headers that send a due record down the attempt path (not the hot loop): a
#: parked record's state, the store's note on a damaged one (dead-lettered), the
#: state of a recurring schedule's occurrence, or a one-off's deadline.
ATTEMPT_HEADERS = frozenset({RETRY_HEADER, QUARANTINE_HEADER, SERIES_HEADER, EXPIRE_HEADER})


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
        state = parked_state(rec)
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

    def _kept(self) -> Headers:
        """The stored headers without our retry state or the store's note."""
        rec = self.due.record
        return rec.headers[:-1] if is_parked(rec) or isinstance(rec, DamagedRecord) else rec.headers

    @property
    def headers(self) -> Headers:
        """The producer's headers (without our retry state, the store's note or the
        deadline), and a series occurrence's number in place of its state."""
        hs = self._kept()
        if hs and hs[-1][0] == SERIES_HEADER:
            return (*hs[:-1], (OUT_OCCURRENCE, str(occurrence_of(hs[-1][1])).encode()))
        if hs and hs[-1][0] == EXPIRE_HEADER:
            return hs[:-1]
        return hs

    @property
    def deadline_ms(self) -> int | None:
        """When this message expires (``contract/expiry.py``), or None: never."""
        return deadline_of(self._kept())

    def expire(self, now_ms: int) -> None:
        """Bound for the dead-letter topic as ``expired`` when past its deadline."""
        deadline = self.deadline_ms
        if self.dead_letter is not None or deadline is None or now_ms <= deadline:
            return
        self.dead_letter = (
            Reason.EXPIRED,
            f"due at {self.due_ms}, expired at {deadline} "
            f"({deadline - self.due_ms} ms after due); {now_ms - deadline} ms past it",
        )
        self.failures = 0

    def parked(self, at_ms: int) -> TimerRecord:
        """The record to append again, due at ``at_ms``, carrying this state (its
        generation one higher: it is a new stored copy, see the changelog's keys) and
        its deadline."""
        state = {
            "due_ms": self.due_ms,
            "first_failure_ms": self.first_failure_ms,
            "failures": self.failures,
            "dead_letter": None if self.dead_letter is None else list(self.dead_letter),
            "generation": self.generation + 1,
            "shrink": self.shrink,
        }
        kept = self._kept()
        deadline = kept[-1:] if kept and kept[-1][0] == EXPIRE_HEADER else ()
        headers = (*self.headers, *deadline, (RETRY_HEADER, orjson.dumps(state)))
        return self.due.record._replace(due_ms=at_ms, headers=headers)
