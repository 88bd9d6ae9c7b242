"""The delay-topic records the client writes: a schedule and a cancel, in the header contract.

A schedule's headers, in this order (DESIGN §2; ``contract/names.py``):

=====================  ==========================================  ====================
argument               header                                      value
=====================  ==========================================  ====================
``target``             ``delay-target-topic``                      the topic
``partition``          ``delay-target-partition``                  decimal
``delay``              ``delay-ms``                                ms, rounded up
``at``                 ``deliver-at-ms``                           epoch ms, rounded up
``cron``, ``tz``       ``delay-cron``, ``delay-timezone``          as given
``every``              ``delay-every``                             ms
``until``, ``count``   ``delay-until`` (epoch ms), ``delay-count``  decimal
``id``                 ``delay-id``                                as given
``on_duplicate``       ``delay-on-duplicate``                      ``replace`` | ``keep``
``headers``            the caller's own, last                      as given
=====================  ==========================================  ====================

A cancel is ``delay-cancel: <id>`` (plus ``delay-target-topic`` to cancel only a message
bound for that topic), keyed by the id with an empty value, as ``delaybridge cancel``
always wrote it: any delay-topic partition will do (the sidecar spreads cancels).

:func:`checked` then runs the sidecar's own classifier (``contract/classify.py``) on
the record: whatever the sidecar would dead-letter (a cron expression that does not
parse, an unknown time zone, an end before the first occurrence, a delay above the
maximum) is refused here, with the reason code the dead letter would carry and the
argument that caused it. The two can never disagree, because they are the same code.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal, NamedTuple

from delaybridge.client.arguments import (
    ClientArgumentError,
    Headers,
    HeadersArg,
    duration_ms,
    epoch_ms,
    id_prefix,
    message_id,
    partition_number,
    positive_int,
    producer_headers,
    record_bytes,
    topic_name,
)
from delaybridge.contract import Rejected, Schedule, SourceRecord
from delaybridge.contract.classify import classify
from delaybridge.contract.names import (
    DELAY_CANCEL,
    DELAY_CANCEL_PREFIX,
    DELAY_COUNT,
    DELAY_CRON,
    DELAY_EVERY,
    DELAY_ID,
    DELAY_JITTER,
    DELAY_MS,
    DELAY_TIMEZONE,
    DELAY_UNTIL,
    DELIVER_AT_MS,
    ON_DUPLICATE,
    TARGET_PARTITION,
    TARGET_TOPIC,
)
from delaybridge.contract.reasons import Reason
from delaybridge.contract.rules import HeaderRules
from delaybridge.contract.series import MAX_COUNT, MIN_INTERVAL_MS

OnDuplicate = Literal["replace", "keep"]
#: The argument behind each header the client writes, for an error the contract raises.
ARGUMENT_OF = {
    TARGET_TOPIC: "target",
    TARGET_PARTITION: "partition",
    DELIVER_AT_MS: "at",
    DELAY_MS: "delay",
    DELAY_TIMEZONE: "tz",
    DELAY_CRON: "cron",
    DELAY_EVERY: "every",
    DELAY_UNTIL: "until",
    DELAY_COUNT: "count",
    DELAY_JITTER: "jitter",
    DELAY_ID: "id",
    ON_DUPLICATE: "on_duplicate",
    DELAY_CANCEL: "id",
    DELAY_CANCEL_PREFIX: "prefix",
}
#: Where a rejection's detail names no header: the argument its reason is about.
_ARGUMENT_OF_REASON = {
    Reason.MISSING_TARGET: "target",
    Reason.BAD_TARGET: "target",
    Reason.TARGET_IS_DELAY_TOPIC: "target",
    Reason.BAD_PARTITION: "partition",
    Reason.BAD_RECURRENCE: "cron/every",
}


class Outgoing(NamedTuple):
    """One record to produce: where to, its key, value and headers."""

    topic: str
    key: bytes | None
    value: bytes | None
    headers: Headers


@dataclass(frozen=True, slots=True)
class When:
    """A schedule's timing arguments, as the caller gave them (see the module table)."""

    delay: timedelta | None = None
    at: datetime | None = None
    cron: str | None = None
    tz: str | None = None
    every: timedelta | None = None
    until: datetime | None = None
    count: int | None = None
    jitter: timedelta | None = None
    """Spread after the due time by a hash of the id (``delay-jitter``; one-off only)."""

    def headers(self) -> Headers:
        """The timing and recurrence headers; raises :class:`ClientArgumentError`."""
        if self.delay is not None and self.at is not None:
            raise ClientArgumentError("delay/at", "give one of them, not both")
        if self.cron is not None and self.every is not None:
            raise ClientArgumentError("cron/every", "give one of them, not both")
        if self.delay is None and self.at is None and self.cron is None and self.every is None:
            raise ClientArgumentError("delay/at/cron/every", "give one: when is it due?")
        if self.tz is not None and self.cron is None:
            raise ClientArgumentError("tz", "applies to cron only (every is elapsed time)")
        recurring = self.cron is not None or self.every is not None
        if not recurring and (self.until is not None or self.count is not None):
            which = "until" if self.until is not None else "count"
            raise ClientArgumentError(which, "ends a series: give cron or every as well")
        out: Headers = []
        if self.delay is not None:
            out.append((DELAY_MS, str(duration_ms("delay", self.delay))))
        if self.at is not None:
            out.append((DELIVER_AT_MS, str(epoch_ms("at", self.at))))
        if self.cron is not None:
            if not isinstance(self.cron, str) or not self.cron.strip():
                raise ClientArgumentError("cron", f"expected a cron expression, got {self.cron!r}")
            out.append((DELAY_CRON, self.cron))
        if self.tz is not None:
            if not isinstance(self.tz, str) or not self.tz:
                raise ClientArgumentError("tz", f"expected an IANA time zone name, got {self.tz!r}")
            out.append((DELAY_TIMEZONE, self.tz))
        if self.every is not None:
            every_ms = duration_ms("every", self.every, minimum_ms=MIN_INTERVAL_MS)
            if timedelta(milliseconds=every_ms) != self.every:
                raise ClientArgumentError("every", f"{self.every} is not whole milliseconds")
            out.append((DELAY_EVERY, str(every_ms)))
        if self.until is not None:
            # Rounded down: the last occurrence may be due at this instant, never after it.
            until_ms = epoch_ms("until", self.until, round_up=False)
            out.append((DELAY_UNTIL, str(until_ms)))
        if self.count is not None:
            out.append((DELAY_COUNT, str(positive_int("count", self.count, MAX_COUNT))))
        if self.jitter is not None:
            if recurring:
                raise ClientArgumentError("jitter", "spreads one-off schedules, not a series")
            out.append((DELAY_JITTER, str(duration_ms("jitter", self.jitter))))
        return out


def schedule_record(
    delay_topic: str,
    target: str,
    value: bytes | str | None,
    when: When,
    *,
    key: bytes | str | None = None,
    headers: HeadersArg | None = None,
    id: str | None = None,
    on_duplicate: OnDuplicate | None = None,
    partition: int | None = None,
) -> Outgoing:
    """The delay-topic record of one schedule (one-off or recurring)."""
    out: Headers = [(TARGET_TOPIC, topic_name("target", target))]
    if partition is not None:
        out.append((TARGET_PARTITION, str(partition_number("partition", partition))))
    out.extend(when.headers())
    if id is not None:
        out.append((DELAY_ID, message_id("id", id)))
    if on_duplicate is not None:
        if on_duplicate not in ("replace", "keep"):
            raise ClientArgumentError(
                "on_duplicate", f"expected 'replace' or 'keep', got {on_duplicate!r}"
            )
        if id is None:
            raise ClientArgumentError(
                "on_duplicate", "needs an id: without one a message has no duplicates"
            )
        out.append((ON_DUPLICATE, on_duplicate))
    out.extend(producer_headers("headers", headers))
    return Outgoing(delay_topic, record_bytes("key", key), record_bytes("value", value), out)


def cancel_record(delay_topic: str, id: str, target: str | None = None) -> Outgoing:
    """The delay-topic record that cancels the pending messages with ``id`` sent before it."""
    out: Headers = [(DELAY_CANCEL, message_id("id", id))]
    if target is not None:
        out.append((TARGET_TOPIC, topic_name("target", target)))
    return Outgoing(delay_topic, id.encode(), b"", out)


def cancel_prefix_record(delay_topic: str, prefix: str, target: str | None = None) -> Outgoing:
    """The delay-topic record that cancels the pending messages whose id starts with
    ``prefix`` sent before it (``delay-cancel-prefix``)."""
    out: Headers = [(DELAY_CANCEL_PREFIX, id_prefix("prefix", prefix))]
    if target is not None:
        out.append((TARGET_TOPIC, topic_name("target", target)))
    return Outgoing(delay_topic, prefix.encode(), b"", out)


def checked(record: Outgoing, rules: HeaderRules, now_ms: int) -> Schedule:
    """The schedule the sidecar will make of ``record``, sent now; raises
    :class:`ClientArgumentError` where the sidecar would dead-letter it."""
    raw = [(name, v.encode() if isinstance(v, str) else v) for name, v in record.headers]
    source = SourceRecord(record.topic, 0, 0, now_ms, record.key, record.value, raw)
    decision = classify(source, rules, now_ms)
    if isinstance(decision, Rejected):
        argument = _argument_in(decision.detail) or _ARGUMENT_OF_REASON.get(
            decision.reason, "delay/at/cron/every"
        )
        raise ClientArgumentError(
            argument,
            f"the sidecar would dead-letter this record as {decision.reason.value}: "
            f"{decision.detail}",
        )
    assert isinstance(decision, Schedule), f"a schedule record classified as {decision!r}"
    return decision


def _argument_in(detail: str) -> str | None:
    """The argument behind the first header a rejection's detail names (longest name
    first: ``deliver-at-ms`` is not ``delay-ms``)."""
    for name in sorted(ARGUMENT_OF, key=len, reverse=True):
        if name in detail:
            return ARGUMENT_OF[name]
    return None
