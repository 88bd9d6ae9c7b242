"""Judging a scenario's deliveries: lost, early, cancelled delivered, duplicates, lateness.

The operations scenarios of issue 25 (a rolling restart, Kafka unreachable) and the
benchmark ``bench roll`` send schedules, cancel some of them, disturb the sidecars and
read the target topic. This module turns what was sent and what arrived into numbers,
with no broker, so its rules are unit-tested once for every user:

- a message is **owed** unless its cancel was acknowledged by Kafka; a cancel
  acknowledged *before the message's due time* **must win** (DESIGN §2: a cancel that
  Kafka appended before its message was due wins), one acknowledged after it may win or
  not (counted as ``cancels_late``, judged neither way);
- **lost**: owed and never delivered; **cancelled delivered**: a must-win cancel's
  message delivered; **early**: any copy produced before its due time (the delivered
  record's timestamp is the moment the sidecar produced it); **duplicates**: every copy
  after the first; **unexpected**: an id that was never sent;
- **lateness** of each delivered message's first copy, two ways: ``produced`` (its
  record timestamp − due: when the sidecar sent it, comparable with ``bench e2e``) and
  ``seen`` (when a reader of the target topic received it − due: what a consumer
  waits); grouped by the first :class:`Window` its due time falls in, else ``outside``.

Percentiles are nearest-rank, as ``bench e2e`` computes them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

OUTSIDE = "outside"
"""The lateness group of messages due in none of the windows."""


@dataclass(frozen=True)
class Cancel:
    """The cancel sent for a schedule: its delay-topic partition, when it was sent and when
    Kafka acknowledged it (None: refused, so it cancels nothing)."""

    partition: int
    sent_ms: int
    acked_ms: int | None


@dataclass(frozen=True)
class Scheduled:
    """One schedule as the producer sent it."""

    id: str
    due_ms: int
    partition: int
    """its delay-topic partition (-1: not acknowledged)"""
    cancel: Cancel | None = None

    @property
    def must_win(self) -> bool:
        """Its cancel was acknowledged before it was due: it must not be delivered."""
        return self.cancel is not None and _acked_before(self.cancel, self.due_ms)

    @property
    def owed(self) -> bool:
        """It must be delivered: no cancel, or one Kafka refused."""
        return self.cancel is None or self.cancel.acked_ms is None


def _acked_before(cancel: Cancel, due_ms: int) -> bool:
    return cancel.acked_ms is not None and cancel.acked_ms < due_ms


@dataclass(frozen=True)
class Delivered:
    """One record read from a target topic."""

    id: str
    due_ms: int
    produced_ms: int
    """the record's timestamp: when the sidecar produced it"""
    seen_ms: int
    """when the reader received it"""
    origin_partition: int
    """the delay-topic partition it came from (``delay-origin``)"""


@dataclass(frozen=True)
class Window:
    """A span of due times whose lateness is reported apart (e.g. a replica restarting)."""

    label: str
    start_ms: int
    end_ms: int

    def holds(self, t_ms: int) -> bool:
        return self.start_ms <= t_ms <= self.end_ms


@dataclass(frozen=True)
class Lateness:
    """Lateness in ms of a group of first copies: nearest-rank percentiles."""

    count: int
    p50_ms: int
    p99_ms: int
    max_ms: int

    @classmethod
    def of(cls, values: Iterable[int]) -> Lateness:
        ordered = sorted(values)
        if not ordered:
            return cls(0, -1, -1, -1)
        return cls(len(ordered), _rank(ordered, 0.50), _rank(ordered, 0.99), ordered[-1])


def _rank(ordered: Sequence[int], p: float) -> int:
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


@dataclass(frozen=True)
class Kill:
    """A replica killed with SIGKILL at ``at_ms`` while it owned ``partitions``: at-least-once
    may deliver again what it had produced in the ``slack_ms`` before (in flight, or
    acknowledged after its store's last flush)."""

    at_ms: int
    partitions: frozenset[int]
    slack_ms: int

    def explains(self, first: Delivered) -> bool:
        """``first`` (a duplicated message's first copy) may repeat because of this kill."""
        return (
            first.origin_partition in self.partitions
            and self.at_ms - self.slack_ms <= first.produced_ms <= self.at_ms
        )


@dataclass
class Verdict:
    """What a scenario's deliveries prove; see the module docstring for each rule."""

    scheduled: int
    owed: int
    cancels_must_win: int
    cancels_late: int
    lost: list[str]
    early: list[str]
    cancelled_delivered: list[Scheduled]
    duplicates: list[Delivered]
    """every copy after a message's first"""
    unexpected: list[str]
    firsts: dict[str, Delivered] = field(repr=False)
    """each delivered message's first copy (the earliest produced)"""
    produced_lateness: dict[str, Lateness]
    seen_lateness: dict[str, Lateness]

    def duplicated_firsts(self) -> list[Delivered]:
        """The first copy of each message delivered more than once."""
        ids = dict.fromkeys(d.id for d in self.duplicates)
        return [self.firsts[id] for id in ids]

    def unexplained_duplicates(self, kills: Sequence[Kill]) -> list[Delivered]:
        """The first copies of duplicated messages that no kill explains: repeats that
        at-least-once does not allow (a graceful restart, a lost session)."""
        return [f for f in self.duplicated_firsts() if not any(k.explains(f) for k in kills)]

    def drained_ms(self, since_ms: int, scheduled: Sequence[Scheduled]) -> int:
        """How long after ``since_ms`` the last owed message due by then was seen (0 when
        all were seen before it); lost messages are not counted here (see ``lost``)."""
        backlog = [s.id for s in scheduled if s.owed and s.due_ms <= since_ms]
        seen = [self.firsts[id].seen_ms for id in backlog if id in self.firsts]
        return max([since_ms, *seen]) - since_ms

    def summary(self) -> dict[str, int]:
        """The counts, for a table or a test's message."""
        return {
            "scheduled": self.scheduled,
            "owed": self.owed,
            "cancels_must_win": self.cancels_must_win,
            "cancels_late": self.cancels_late,
            "delivered": len(self.firsts),
            "lost": len(self.lost),
            "early": len(self.early),
            "cancelled_delivered": len(self.cancelled_delivered),
            "duplicates": len(self.duplicates),
            "unexpected": len(self.unexpected),
        }


def judge(
    scheduled: Sequence[Scheduled], delivered: Iterable[Delivered], windows: Sequence[Window] = ()
) -> Verdict:
    """The verdict on ``delivered`` (every record read from the target topics) against
    ``scheduled`` (everything sent); lateness grouped by ``windows`` (first match)."""
    by_id = {s.id: s for s in scheduled}
    firsts: dict[str, Delivered] = {}
    duplicates: list[Delivered] = []
    for d in sorted(delivered, key=lambda d: (d.produced_ms, d.seen_ms)):
        if d.id in firsts:
            duplicates.append(d)
        else:
            firsts[d.id] = d
    early = sorted({d.id for d in [*firsts.values(), *duplicates] if d.produced_ms < d.due_ms})
    produced: dict[str, list[int]] = {}
    seen: dict[str, list[int]] = {}
    for id, first in firsts.items():
        sent = by_id.get(id)
        if sent is None or not sent.owed:
            continue
        label = next((w.label for w in windows if w.holds(first.due_ms)), OUTSIDE)
        produced.setdefault(label, []).append(first.produced_ms - first.due_ms)
        seen.setdefault(label, []).append(first.seen_ms - first.due_ms)
    labels = [*dict.fromkeys(w.label for w in windows), OUTSIDE]
    return Verdict(
        scheduled=len(scheduled),
        owed=sum(1 for s in scheduled if s.owed),
        cancels_must_win=sum(1 for s in scheduled if s.must_win),
        cancels_late=sum(1 for s in scheduled if not s.owed and not s.must_win),
        lost=sorted(s.id for s in scheduled if s.owed and s.id not in firsts),
        early=early,
        cancelled_delivered=[s for s in scheduled if s.must_win and s.id in firsts],
        duplicates=duplicates,
        unexpected=sorted(id for id in firsts if id not in by_id),
        firsts=firsts,
        produced_lateness={label: Lateness.of(produced.get(label, [])) for label in labels},
        seen_lateness={label: Lateness.of(seen.get(label, [])) for label in labels},
    )
