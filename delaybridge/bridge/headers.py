"""The producer-side header contract (DESIGN §2): one record in, one decision out.

:func:`classify` turns a delay-topic record into a :class:`Schedule` (deliver later), a
:class:`Cancel` or a :class:`Rejected` (dead-letter, with a stable :class:`Reason`). It is a
pure function of the record and the rules, shared by the sidecar and the PySpark
reconciliation so the two can never disagree.

Timing precedence, when a record carries several timing headers (first present wins)::

    deliver-at-ms > deliver-at > delay-ms > delay-sec              (native)
    > TIMER_DELIVER_MS > TIMER_DELAY_MS > TIMER_DELAY_SEC > DELAY   (RocketMQ 5, then 4)
    > scheduler-epoch                                               (etf1)

Absolute times beat relative ones within each family, and native headers beat
compatibility headers, so a producer migrating header by header always gets the new
meaning. The same header repeated with different values is ``conflicting-time``.
Relative delays count from the record's Kafka timestamp, so a replay after a restart
computes the same due time as the live record did. A due time in the past is delivered
at once; a negative relative delay is ``bad-time`` (it is always a producer bug).

Cancels: ``delay-cancel: <id>`` or ``TIMER_DEL_UNIQKEY: <id>``, or an etf1 tombstone (a
null value keyed by the schedule id, with no timing header). A cancel that names a
target topic only cancels a message bound for that topic.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass

from delaybridge.bridge.reasons import Reason
from delaybridge.bridge.timing import (
    TimeFormatError,
    level_delay_ms,
    parse_int,
    parse_level_table,
    parse_rfc3339_ms,
)

Headers = Sequence[tuple[str, bytes | None]]

TARGET_TOPIC = "delay-target-topic"
TARGET_PARTITION = "delay-target-partition"
DELAY_MS = "delay-ms"
DELAY_SEC = "delay-sec"
DELIVER_AT_MS = "deliver-at-ms"
DELIVER_AT = "deliver-at"
DELAY_ID = "delay-id"
DELAY_CANCEL = "delay-cancel"
RMQ_DELIVER_MS = "TIMER_DELIVER_MS"
RMQ_DELAY_MS = "TIMER_DELAY_MS"
RMQ_DELAY_SEC = "TIMER_DELAY_SEC"
RMQ_CANCEL = "TIMER_DEL_UNIQKEY"
RMQ_LEVEL = "DELAY"
RMQ_UNIQ_KEY = "UNIQ_KEY"
ETF1_EPOCH = "scheduler-epoch"
ETF1_TARGET_TOPIC = "scheduler-target-topic"
ETF1_TARGET_KEY = "scheduler-target-key"
# Added to every delivered record.
OUT_ID = "delay-id"
OUT_ORIGIN = "delay-origin"
OUT_DUE_MS = "delay-due-ms"
# Added to every dead-lettered record.
OUT_ERROR = "delay-error"
OUT_ERROR_DETAIL = "delay-error-detail"

# Control headers: consumed here, stripped from the delivered record.
CONTROL_HEADERS = frozenset(
    {
        TARGET_TOPIC,
        TARGET_PARTITION,
        DELAY_MS,
        DELAY_SEC,
        DELIVER_AT_MS,
        DELIVER_AT,
        DELAY_ID,
        DELAY_CANCEL,
        RMQ_DELIVER_MS,
        RMQ_DELAY_MS,
        RMQ_DELAY_SEC,
        RMQ_CANCEL,
        RMQ_LEVEL,
        ETF1_EPOCH,
        ETF1_TARGET_TOPIC,
        ETF1_TARGET_KEY,
        OUT_ORIGIN,
        OUT_DUE_MS,
    }
)

_TOPIC_NAME = re.compile(r"^[A-Za-z0-9._-]{1,249}$")


@functools.lru_cache(maxsize=4096)
def _legal_topic(name: str) -> bool:
    """Target names repeat across millions of records: check each one once."""
    return _TOPIC_NAME.match(name) is not None


@dataclass(frozen=True, slots=True)
class SourceRecord:
    """A record as consumed from a delay topic."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: Headers

    @property
    def origin(self) -> str:
        return f"{self.topic}/{self.partition}/{self.offset}"

    @property
    def default_id(self) -> str:
        return f"{self.topic}-{self.partition}-{self.offset}"


@dataclass(frozen=True, slots=True)
class HeaderRules:
    """What classify() needs from the settings."""

    delay_levels_ms: tuple[int, ...]
    max_delay_ms: int
    routes: dict[str, str]
    delay_topics: frozenset[str] = frozenset()

    @classmethod
    def from_strings(
        cls,
        delay_levels: str,
        max_delay_ms: int,
        routes: dict[str, str] | None = None,
        delay_topics: Sequence[str] = (),
    ) -> HeaderRules:
        return cls(
            parse_level_table(delay_levels),
            max_delay_ms,
            dict(routes or {}),
            frozenset(delay_topics),
        )


@dataclass(frozen=True, slots=True)
class Schedule:
    id: str
    due_ms: int
    target_topic: str
    target_partition: int  # -1: the key decides (murmur2)
    key: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]  # control headers removed


@dataclass(frozen=True, slots=True)
class Cancel:
    id: str
    target_topic: str | None


@dataclass(frozen=True, slots=True)
class Rejected:
    reason: Reason
    detail: str


Decision = Schedule | Cancel | Rejected


class _Reject(Exception):
    def __init__(self, reason: Reason, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


def classify(record: SourceRecord, rules: HeaderRules) -> Decision:
    """Decide what to do with one delay-topic record. Never raises on bad input."""
    try:
        return _classify(record, rules)
    except _Reject as rej:
        return Rejected(rej.reason, rej.detail)


def _classify(record: SourceRecord, rules: HeaderRules) -> Decision:
    found = _control_values(record.headers)
    cancel_id = found.get(DELAY_CANCEL) or found.get(RMQ_CANCEL)
    target = found.get(TARGET_TOPIC) or found.get(ETF1_TARGET_TOPIC)
    if cancel_id is not None:
        return Cancel(cancel_id, target)
    timing = [name for name in _TIMING_PRECEDENCE if name in found]
    if record.value is None and not timing and record.key is not None:
        return Cancel(_text(record.key, "record key"), target)  # etf1 tombstone
    target = target or rules.routes.get(record.topic)
    if not target:
        raise _Reject(
            Reason.MISSING_TARGET,
            f"no {TARGET_TOPIC} header and no route for delay topic {record.topic!r}",
        )
    if not _legal_topic(target):
        raise _Reject(Reason.BAD_TARGET, f"{target!r} is not a legal Kafka topic name")
    if target in rules.delay_topics:
        raise _Reject(Reason.TARGET_IS_DELAY_TOPIC, f"target {target!r} is a delay topic")
    partition = -1
    if TARGET_PARTITION in found:
        try:
            partition = parse_int(found[TARGET_PARTITION])
        except TimeFormatError as exc:
            raise _Reject(Reason.BAD_PARTITION, f"header {TARGET_PARTITION}: {exc}") from exc
    due_ms = _due_ms(record, found, timing, rules)
    key = record.key
    if ETF1_TARGET_KEY in found:
        key = found[ETF1_TARGET_KEY].encode()
    return Schedule(
        id=_message_id(record, found),
        due_ms=due_ms,
        target_topic=target,
        target_partition=partition,
        key=key,
        headers=tuple((k, v) for k, v in record.headers if k not in CONTROL_HEADERS),
    )


_TIMING_PRECEDENCE = (
    DELIVER_AT_MS,
    DELIVER_AT,
    DELAY_MS,
    DELAY_SEC,
    RMQ_DELIVER_MS,
    RMQ_DELAY_MS,
    RMQ_DELAY_SEC,
    RMQ_LEVEL,
    ETF1_EPOCH,
)


def _due_ms(
    record: SourceRecord, found: dict[str, str], timing: list[str], rules: HeaderRules
) -> int:
    base = record.timestamp_ms
    if not timing:
        raise _Reject(Reason.BAD_TIME, "no timing header (" + ", ".join(_TIMING_PRECEDENCE) + ")")
    name = timing[0]
    text = found[name]
    try:
        if name in (DELIVER_AT_MS, RMQ_DELIVER_MS):
            due = parse_int(text)
        elif name == DELIVER_AT:
            due = parse_rfc3339_ms(text)
        elif name == ETF1_EPOCH:
            due = parse_int(text) * 1000
        elif name in (DELAY_MS, RMQ_DELAY_MS):
            due = base + parse_int(text)
        elif name in (DELAY_SEC, RMQ_DELAY_SEC):
            due = base + parse_int(text) * 1000
        else:  # RMQ_LEVEL
            try:
                level = parse_int(text)
            except TimeFormatError as exc:
                raise _Reject(Reason.UNKNOWN_DELAY_LEVEL, f"header {name}: {exc}") from exc
            due = base + level_delay_ms(rules.delay_levels_ms, level)
    except TimeFormatError as exc:
        raise _Reject(Reason.BAD_TIME, f"header {name}: {exc}") from exc
    if due - base > rules.max_delay_ms:
        raise _Reject(
            Reason.DELAY_TOO_LONG,
            f"header {name}: due {due} is {due - base} ms after the record's timestamp "
            f"{base}; the maximum is {rules.max_delay_ms} ms",
        )
    return due


def _message_id(record: SourceRecord, found: dict[str, str]) -> str:
    if DELAY_ID in found:
        return found[DELAY_ID]
    if RMQ_UNIQ_KEY in found:
        return found[RMQ_UNIQ_KEY]
    if ETF1_EPOCH in found and record.key is not None:
        return _text(record.key, "record key")  # etf1: the key is the schedule id
    return record.default_id


def _control_values(headers: Headers) -> dict[str, str]:
    """The control headers (plus UNIQ_KEY) as text; repeated headers must agree."""
    found: dict[str, str] = {}
    for name, raw in headers:
        if name not in CONTROL_HEADERS and name != RMQ_UNIQ_KEY:
            continue
        if raw is None:
            raise _Reject(Reason.BAD_HEADER, f"header {name} has a null value")
        value = _text(raw, f"header {name}")
        if name in found and found[name] != value:
            reason = Reason.CONFLICTING_TIME if name in _TIMING_PRECEDENCE else Reason.BAD_HEADER
            raise _Reject(reason, f"header {name} appears twice: {found[name]!r} and {value!r}")
        found[name] = value
    return found


def _text(raw: bytes, what: str) -> str:
    try:
        return raw.decode("utf-8").strip()
    except UnicodeDecodeError as exc:
        raise _Reject(Reason.BAD_HEADER, f"{what} is not UTF-8: {exc}") from exc


def delivered_headers(
    stored: Sequence[tuple[str, bytes | None]], id: str, origin: str, due_ms: int
) -> list[tuple[str, str | bytes | None]]:
    """The headers a delivered record carries: the producer's, plus ours.

    ``stored`` are a :class:`Schedule`'s headers, from which classify() already removed
    every control header (ours included), so nothing is filtered here: this runs once
    per delivered message.
    """
    return [
        *stored,
        (OUT_ID, id.encode()),
        (OUT_ORIGIN, origin.encode()),
        (OUT_DUE_MS, str(due_ms).encode()),
    ]
