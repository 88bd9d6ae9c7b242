"""``delay-expire-after``: a message that cannot go out in time goes to the dead letters.

A reminder due at 08:00 that reaches its consumer at 11:00, after an outage, a paused
topic or a backlog, is worse than none; NATS' ``Nats-TTL``, Temporal's catch-up window
and EventBridge's maximum event age say so. ``delay-expire-after: 10m`` says: deliver
this message up to 10 minutes after its due time, and not later. The rules:

- **the deadline** is the due time (jittered, ``contract/jitter.py``) plus the value,
  an interval (``10m``, ``1h30m`` or milliseconds; 0 is legal: not a moment late). It
  is fixed at ingest and stored with the message, in the internal header
  :data:`~delaybridge.contract.names.EXPIRE_HEADER` (epoch ms; never accepted from a
  producer, stripped before the message goes out), so a replay, a restore and a standby
  keep it;
- **checked when the message would go out**: the first try, and every retry after a
  failure (a target topic missing, unavailable). Past its deadline the message goes to
  the dead-letter topic with reason ``expired`` (the detail says the due time, the
  deadline and how late it is), not to its target. A message delivered in time is
  untouched; one produced before its deadline and acknowledged after it counts as
  delivered;
- **a per-topic default**: ``delivery.expire_after`` maps a target topic to a default
  interval, for records without the header; the header wins;
- **one-off schedules only**: a recurring schedule has its own rule for missed
  occurrences (``delivery.series_misfire_ms``, ``contract/series.py``). The header
  with a recurrence is refused as ``bad-recurrence``, and the per-topic default does
  not apply to a series;
- a bad value is ``bad-time``, naming the header.

The reconciliation counts an expired message as ``expired``, not missing, when its dead
letter carries its ``delay-origin`` (docs/reconciliation.md).
"""

from __future__ import annotations

from collections.abc import Sequence

from delaybridge.contract.names import DELAY_EXPIRE_AFTER, EXPIRE_HEADER
from delaybridge.contract.reasons import Reason
from delaybridge.contract.rules import HeaderRules, Rejection
from delaybridge.contract.timing import TimeFormatError, parse_interval_ms

#: The longest expiry accepted: a year. Longer is "never expires": leave the header out.
MAX_EXPIRE_AFTER_MS = 366 * 86_400_000


def expire_after_ms(text: str) -> int:
    """A ``delay-expire-after`` value (or a ``delivery.expire_after`` setting) in ms."""
    try:
        after = parse_interval_ms(text)
    except TimeFormatError as exc:
        raise Rejection(Reason.BAD_TIME, f"header {DELAY_EXPIRE_AFTER}: {exc}") from exc
    if after > MAX_EXPIRE_AFTER_MS:
        raise Rejection(
            Reason.BAD_TIME,
            f"header {DELAY_EXPIRE_AFTER}: {after} ms is more than the maximum "
            f"{MAX_EXPIRE_AFTER_MS} ms (leave the header out: the message never expires)",
        )
    return after


def deadline_header(
    text: str | None, target: str, due_ms: int, recurring: bool, rules: HeaderRules
) -> tuple[str, bytes] | None:
    """The stored header that carries a one-off's deadline (``EXPIRE_HEADER``), from the
    header's ``text`` or the target's default; None when the message never expires."""
    if text is not None:
        if recurring:
            detail = f"header {DELAY_EXPIRE_AFTER} applies to one-off schedules, not a series"
            raise Rejection(Reason.BAD_RECURRENCE, detail)
        after = expire_after_ms(text)
    else:
        default = rules.expire_after_ms.get(target)
        if default is None or recurring:
            return None
        after = default
    return EXPIRE_HEADER, str(due_ms + after).encode()


def deadline_of(headers: Sequence[tuple[str, bytes | None]]) -> int | None:
    """The deadline a stored message carries in its last header, or None."""
    if not headers or headers[-1][0] != EXPIRE_HEADER:
        return None
    raw = headers[-1][1]
    try:
        return int(raw or b"")
    except ValueError:
        return None  # written by this code only: unreadable means it was never ours
