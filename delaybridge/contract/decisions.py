"""What :func:`~delaybridge.contract.classify.classify` takes and returns: a consumed record
and the three decisions (schedule, cancel, rejected), plus the format's limits.

Plain (interpreted) classes, shared by the pure-Python and the compiled classifier
(``contract/classifier.py``, ``delaybridge/hotpath.py``): compiled code builds them
through their ordinary constructors, so a decision is the same object either way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from delaybridge.contract.reasons import Reason
from delaybridge.contract.series import Series
from delaybridge.timerlog.records import TimerRecord

Headers = Sequence[tuple[str, bytes | None]]

#: Limits of the store's record format (u16 lengths and counts, i32 partition).
MAX_ID_BYTES = 0xFFFF
MAX_HEADERS = 0xFFFF
MAX_NAME_BYTES = 0xFFFF
MAX_PARTITION = 2**31 - 1


class SourceRecord(NamedTuple):
    """A record as consumed from a delay topic.

    Named tuples, not frozen dataclasses: one of each is built per consumed record, and a
    frozen dataclass's ``__init__`` (``object.__setattr__`` per field) cost 2.2 µs against
    0.45 µs (the same reason as ``timerlog.records.TimerRecord``).
    """

    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: Headers
    log_append_time: bool = False
    """The timestamp is the broker's (LogAppendTime), not the producer's (CreateTime)."""

    @property
    def origin(self) -> str:
        return f"{self.topic}/{self.partition}/{self.offset}"

    @property
    def default_id(self) -> str:
        return f"{self.topic}-{self.partition}-{self.offset}"


class Schedule(NamedTuple):
    id: str
    due_ms: int
    target_topic: str
    target_partition: int  # -1: the key decides (murmur2)
    key: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    """The producer's, control headers removed; a series' state last (``series.py``)."""
    replace: bool = False
    """It replaces pending messages with its id and target topic sent before it."""
    series: Series | None = None
    """A recurring schedule (``contract/series.py``); ``due_ms`` is its first occurrence's."""


@dataclass(frozen=True, slots=True)
class Cancel:
    id: str
    target_topic: str | None
    prefix: bool = False
    """``delay-cancel-prefix``: ``id`` is a prefix; every id starting with it is cancelled."""


@dataclass(frozen=True, slots=True)
class Rejected:
    reason: Reason
    detail: str


Decision = Schedule | Cancel | Rejected
PartKey = tuple[str, int]
#: A run of schedules of one partition to append: the records, the messages they came
#: from, and those of them that replace by id (published once stored).
Run = tuple[list[TimerRecord], list[Any], list[Any]]


class IngestPlan(NamedTuple):
    """What ``classifier.ingest_batch`` made of a consumed batch (``bridge/ingest/ingestor.py``)."""

    runs: dict[PartKey, Run]
    """New schedules, by partition, in offset order."""
    later: dict[PartKey, list[tuple[Any, Cancel | Rejected]]]
    """Cancels and rejections, by partition, in offset order: side writes."""
    stored_replaces: list[tuple[PartKey, Any, Cancel]]
    """Schedules already stored (a re-read) that replace: their replace, once more."""
    errors: list[Any]
    """Messages that carry a consume error instead of a record."""
    failures: list[tuple[PartKey, Any, Exception]]
    """Records whose decision raised (a bug): dead-lettered as internal-error."""
