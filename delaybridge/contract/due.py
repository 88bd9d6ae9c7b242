"""When a record is due: the timing headers, their precedence, and the base of a delay.

Precedence, when a record carries several timing headers (first present wins)::

    deliver-at-ms > deliver-at > delay-ms > delay-sec              (native)
    > TIMER_DELIVER_MS > TIMER_DELAY_MS > TIMER_DELAY_SEC > DELAY   (RocketMQ 5, then 4)
    > scheduler-epoch                                               (etf1)

Absolute times beat relative ones within each family, and native headers beat
compatibility headers, so a producer migrating header by header always gets the new
meaning. Absolute times with sub-millisecond digits round *up* (never early).

**The base of a relative delay** is the record's Kafka timestamp, so a replay after a
restart computes the same due time as the live record did. With ``LogAppendTime`` on
the delay topic (recommended; docs/operations.md) that is the broker's clock and is
trusted. A ``CreateTime`` is whatever the producer stamped: a skewed clock, or an event
time forwarded by a stream processor, would make the message early relative to when it
was really sent. So, when the sidecar's clock is known (``now_ms``), a CreateTime more
than ``max_timestamp_skew_ms`` away from it is, by ``timestamp_policy``:

- ``clamp`` (default): moved into ``[now - skew, now + skew]`` -- a delay then counts
  from a later base, never an earlier one (in a backlog replay older than the skew,
  relative delays of CreateTime records come out later than they would otherwise);
- ``dead-letter``: rejected as ``clock-skew``;
- ``trust``: used as it is.

The reconciliation job has no ingest clock (``now_ms=None``) and uses the stamp.
"""

from __future__ import annotations

from delaybridge.contract.names import (
    DELAY_MS,
    DELAY_SEC,
    DELIVER_AT,
    DELIVER_AT_MS,
    ETF1_EPOCH,
    RMQ_DELAY_MS,
    RMQ_DELAY_SEC,
    RMQ_DELIVER_MS,
    RMQ_LEVEL,
)
from delaybridge.contract.reasons import Reason
from delaybridge.contract.rules import HeaderRules, Rejection
from delaybridge.contract.timing import (
    TimeFormatError,
    level_delay_ms,
    parse_int,
    parse_rfc3339_ms,
)

TIMING_PRECEDENCE = (
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
#: Where each timing header stands in TIMING_PRECEDENCE (0: first).
TIMING_RANK = {name: rank for rank, name in enumerate(TIMING_PRECEDENCE)}
#: What :func:`due_ms` makes of a header whose value is plain digits (at most 18, no
#: sign: what ``parse_int`` accepts, minus negatives): ``base × a + value × b`` for the
#: header's ``(a, b)``. The compiled classifier computes these inline.
PLAIN_DUE = {
    DELIVER_AT_MS: (0, 1),
    RMQ_DELIVER_MS: (0, 1),
    ETF1_EPOCH: (0, 1000),
    DELAY_MS: (1, 1),
    RMQ_DELAY_MS: (1, 1),
    DELAY_SEC: (1, 1000),
    RMQ_DELAY_SEC: (1, 1000),
}


def delay_base_ms(
    timestamp_ms: int, log_append_time: bool, rules: HeaderRules, now_ms: int | None
) -> int:
    """The instant a relative delay counts from (see the module docstring)."""
    if log_append_time or now_ms is None or rules.timestamp_policy == "trust":
        return timestamp_ms
    skew = rules.max_timestamp_skew_ms
    if abs(timestamp_ms - now_ms) <= skew:
        return timestamp_ms
    if rules.timestamp_policy == "dead-letter":
        raise Rejection(
            Reason.CLOCK_SKEW,
            f"record timestamp (CreateTime) {timestamp_ms} is {timestamp_ms - now_ms} ms from "
            f"the sidecar's clock {now_ms}; the limit is {skew} ms",
        )
    return min(max(timestamp_ms, now_ms - skew), now_ms + skew)


def due_ms(found: dict[str, str], timing: list[str], base: int, rules: HeaderRules) -> int:
    """The due time from the first timing header present (``timing``, in precedence)."""
    if not timing:
        raise Rejection(Reason.BAD_TIME, "no timing header (" + ", ".join(TIMING_PRECEDENCE) + ")")
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
                raise Rejection(Reason.UNKNOWN_DELAY_LEVEL, f"header {name}: {exc}") from exc
            due = base + level_delay_ms(rules.delay_levels_ms, level)
    except TimeFormatError as exc:
        raise Rejection(Reason.BAD_TIME, f"header {name}: {exc}") from exc
    if due - base > rules.max_delay_ms:
        raise Rejection(
            Reason.DELAY_TOO_LONG,
            f"header {name}: due {due} is {due - base} ms after the delay's base {base}; "
            f"the maximum is {rules.max_delay_ms} ms",
        )
    return due
