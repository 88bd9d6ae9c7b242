"""``delay-jitter``: spreading a herd of messages due at the same moment (issue 27).

A producer that schedules many messages for the same instant (every unpaid order of a
flash sale closed at 12:00, every reminder at 08:00) makes a herd: the target's
consumers, and the sidecar's delivery, take the whole burst in one tick (RocketMQ
#6566: of 500k due in one second, about 20k on time). ``delay-jitter: 10s`` asks for the
message to be spread over the 10 s that follow its due time. The rules:

- **never early**: the due time moves later, by an offset in ``[0, jitter)``; never
  earlier than the timing header says;
- **deterministic by id**: the offset is a hash of the message's id (``delay-id``, or
  the id the record is given without one), so a replay after a restart, a standby's
  restore and the reconciliation job all compute the same due time, and a replacing
  record with the same id and the same header keeps its offset;
- **uniform**: the offset is the id's BLAKE2b digest (8 bytes) modulo the jitter in
  milliseconds, so a herd of ids fills every millisecond of the window evenly (10 % ±
  a fraction per second of a 10 s window at 100k messages);
- **bounded**: the value is an interval (``10s``, ``1m30s``, or milliseconds), at most
  :data:`MAX_JITTER_MS`; the message's delay plus the whole jitter must fit the maximum
  delay, so whether a record is accepted never depends on its id;
- **one-off schedules only**: a recurring schedule (``delay-cron``, ``delay-every``)
  with a jitter is refused as ``bad-recurrence`` (its occurrences are computed from the
  series alone: jittering each would need the id in the series state; a later change).

The delivered record carries the jittered due time in ``delay-due-ms``.
"""

from __future__ import annotations

from hashlib import blake2b

from delaybridge.contract.names import DELAY_JITTER
from delaybridge.contract.reasons import Reason
from delaybridge.contract.rules import HeaderRules, Rejection
from delaybridge.contract.timing import TimeFormatError, parse_interval_ms

#: The widest jitter accepted: a day. A herd spread wider is a schedule, not a herd.
MAX_JITTER_MS = 86_400_000


def jitter_ms(text: str, delay_ms: int, rules: HeaderRules) -> int:
    """The ``delay-jitter`` header's value in milliseconds, checked: an interval of at
    most :data:`MAX_JITTER_MS`, which with the message's delay (``delay_ms``: due time
    minus the delay's base) fits ``rules.max_delay_ms``."""
    try:
        jitter = parse_interval_ms(text)
    except TimeFormatError as exc:
        raise Rejection(Reason.BAD_TIME, f"header {DELAY_JITTER}: {exc}") from exc
    if jitter > MAX_JITTER_MS:
        detail = f"header {DELAY_JITTER}: {jitter} ms is more than the maximum {MAX_JITTER_MS} ms"
        raise Rejection(Reason.BAD_TIME, detail)
    if delay_ms + jitter > rules.max_delay_ms:
        raise Rejection(
            Reason.DELAY_TOO_LONG,
            f"header {DELAY_JITTER}: a delay of {delay_ms} ms plus a jitter of {jitter} ms "
            f"is more than the maximum delay of {rules.max_delay_ms} ms",
        )
    return jitter


def spread_ms(id: str, jitter: int) -> int:
    """How much later than asked the message with id ``id`` is due: in ``[0, jitter)``,
    the same for the same id on every machine and Python version (0 when no jitter)."""
    if jitter <= 0:
        return 0
    digest = blake2b(id.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % jitter
