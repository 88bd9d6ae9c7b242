"""Stable reason codes for dead-lettered records (header ``delay-error``, metric label)."""

from __future__ import annotations

from enum import StrEnum


class Reason(StrEnum):
    """Why a record went to the dead-letter topic. The values are a public contract."""

    MISSING_TARGET = "missing-target"
    BAD_TARGET = "bad-target"
    TARGET_IS_DELAY_TOPIC = "target-is-delay-topic"
    BAD_PARTITION = "bad-partition"
    BAD_TIME = "bad-time"
    CONFLICTING_TIME = "conflicting-time"
    DELAY_TOO_LONG = "delay-too-long"
    UNKNOWN_DELAY_LEVEL = "unknown-delay-level"
    BAD_HEADER = "bad-header"
    TARGET_TOPIC_MISSING = "target-topic-missing"
    TARGET_PARTITION_MISSING = "target-partition-missing"
    RECORD_TOO_LARGE = "record-too-large"
    DELIVERY_FAILED = "delivery-failed"
    TARGET_UNAVAILABLE = "target-unavailable"
    """The target kept failing with retryable errors (broker down, timeouts) for longer
    than ``delivery.retry_unavailable_ms``."""
    BAD_RECURRENCE = "bad-recurrence"
    """Recurring-schedule headers that cannot make a series: an unparseable cron, an
    unknown time zone, cron and interval together, an interval under 1 s, a count
    below 1, an end before the first occurrence (``contract/series.py``)."""
    CLOCK_SKEW = "clock-skew"
    """A CreateTime too far from the sidecar's clock, with ``timestamp_policy: dead-letter``."""
    STORE_CORRUPT = "store-corrupt"
    """The stored copy failed its CRC when read for delivery: what could be read of it
    (id, target, key, headers, origin; never the value) is dead-lettered, and the
    detail names the file and offset (``timerlog/quarantine.py``)."""
    RETRIES_EXHAUSTED = "retries-exhausted"
    """Written by a consumer, not by the sidecar: ``delaybridge.client``'s ``retry_later``
    dead-letters a record whose last attempt failed (``RetryPolicy.max_attempts``); the
    detail says which attempt of how many, and the consumer's error."""
    EXPIRED = "expired"
    """Not delivered by its deadline: due time plus ``delay-expire-after`` (or the target
    topic's ``delivery.expire_after``), ``contract/expiry.py``."""
    PREFIX_OVER_CAP = "prefix-over-cap"
    """A ``delay-cancel-prefix`` whose prefix matches more pending messages in the
    stores of the replica that read it than ``cancels.prefix_confirm_above``: a header
    cannot confirm, so the bulk cancel is not applied (the admin API asks instead);
    the detail gives the count and the cap (docs/design/cancels.md)."""
    INTERNAL_ERROR = "internal-error"
    """Handling the record raised something unexpected (a bug): it is kept, not lost."""


#: Reasons only a client writes (``delaybridge.client``): the sidecar's metrics leave
#: them out (it never counts one), the dead-letter topic's readers show them.
CLIENT_REASONS = frozenset({Reason.RETRIES_EXHAUSTED})
#: The reasons the sidecar dead-letters with: each a ``delaybridge_dead_lettered_total``
#: series from the first scrape.
SIDECAR_REASONS = tuple(reason for reason in Reason if reason not in CLIENT_REASONS)
