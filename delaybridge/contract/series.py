"""Recurring schedules: the headers, the instants of a series, and its stored state.

A schedule with ``delay-cron`` (+ ``delay-timezone``, an IANA name, default UTC) or
``delay-every`` (an interval: ``2s``, ``5m``, ``1h30m`` or plain milliseconds) is a
*series*; ``delay-until`` (epoch ms or RFC 3339, inclusive) and ``delay-count`` (>= 1)
end it. The rules, shared by the sidecar and the reconciliation (one place, as for
``contract/due.py``):

- **Occurrence 1** is due at the timing header's due time when the record has one,
  else at the first cron instant strictly after the delay's base (the record's
  timestamp, ``contract/due.py``), or at base + interval.
- **Occurrence k** of an interval series is due at ``first + (k - 1) * interval``:
  fixed rate from the first due time, so a late delivery never shifts the ones after
  it (no drift). Of a cron series: the k-th cron instant, each the next after the one
  before. So (id, k) always names one due time, and the reconciliation can expand a
  series without knowing what the sidecar went through.
- **Time zones and DST** are cronsim's, which follows Debian's cron: a wall-clock
  time the spring-forward skips fires at the first instant after the gap (02:30 on a
  day that jumps 02:00 → 03:00 fires at 03:00); a fixed time the fall-back repeats
  fires once (the first pass); a wildcard hour (``0 * * * *``) fires in both passes,
  by elapsed time. Interval series ignore zones: they are elapsed time.
- **Missed occurrences** (the sidecar was down, or the partition moved): an overdue
  occurrence is delivered once, late, when its turn comes (a stored message is never
  dropped); the ones after it are caught up at once while they are at most the
  *misfire threshold* (``delivery.series_misfire_ms``, default 60 s, Quartz's) late,
  and skipped beyond it: the series goes on from the first instant within the
  threshold, numbering the skipped ones (k stays the instant's index). A restart then
  loses nothing, and a day-long outage of a per-second series does not burst 86,400
  messages into the target (cron does not catch up either; Quartz fires once).
- **Minimum interval** 1 s: a faster beat is not a delayed message.

The state rides in the stored record's last header (``SERIES_HEADER``, internal:
stripped before delivery, never accepted from a producer), as JSON: the spec, the
first due time and the occurrence number. Spawning the next occurrence, and why it
is crash-safe: ``bridge/delivery/occurrences.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from typing import NoReturn
from zoneinfo import ZoneInfo

import orjson
from cronsim import CronSim, CronSimError

from delaybridge.contract.names import (
    DELAY_COUNT,
    DELAY_CRON,
    DELAY_EVERY,
    DELAY_TIMEZONE,
    DELAY_UNTIL,
    SERIES_HEADER,
)
from delaybridge.contract.reasons import Reason
from delaybridge.contract.rules import HeaderRules, Rejection
from delaybridge.contract.timing import TimeFormatError, parse_int, parse_interval_ms
from delaybridge.contract.timing import parse_rfc3339_ms as _rfc3339

MIN_INTERVAL_MS = 1_000
#: Occurrence numbers fit the changelog key (``bridge/delivery/attempts.py``, generation_of).
MAX_COUNT = 2**31 - 1
#: Cron instants walked per spawn to skip misfires; a longer outage goes on from there.
MAX_SKIPPED = 20_000
_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


@dataclass(frozen=True, slots=True)
class Series:
    """A recurring schedule: when occurrence 1 is due, how the others follow, the end."""

    first_ms: int
    every_ms: int | None = None
    cron: str | None = None
    timezone: str = "UTC"
    until_ms: int | None = None
    count: int | None = None

    def ended(self, k: int, due_ms: int) -> bool:
        """Is occurrence ``k`` (due at ``due_ms``) past the series' end?"""
        return (self.count is not None and k > self.count) or (
            self.until_ms is not None and due_ms > self.until_ms
        )

    def after(self, k: int, due_ms: int, floor_ms: int) -> tuple[int, int] | None:
        """The occurrence that follows occurrence ``k`` (due at ``due_ms``): its number
        and due time, skipping those due before ``floor_ms`` (misfires); None when the
        series ended."""
        if self.every_ms is not None:
            step = self.every_ms
            nxt, due = k + 1, self.first_ms + k * step
            if due < floor_ms:
                skip = -(-(floor_ms - due) // step)
                nxt, due = nxt + skip, due + skip * step
            return None if self.ended(nxt, due) else (nxt, due)
        instants = _instants(self.cron or "", self.timezone, due_ms)
        nxt, due = k, due_ms
        for _ in range(MAX_SKIPPED):
            got = next(instants, None)
            nxt += 1
            if got is None or self.ended(nxt, got):
                return None
            due = got
            if due >= floor_ms:
                break
        return nxt, due

    def expand(self, upto_ms: int, limit: int) -> list[tuple[int, int]]:
        """(k, due) of the occurrences due up to ``upto_ms``, at most ``limit`` of them,
        none skipped (what the reconciliation expects)."""
        out: list[tuple[int, int]] = []
        instants = None if self.cron is None else _instants(self.cron, self.timezone, self.first_ms)
        k, due = 1, self.first_ms
        while due <= upto_ms and len(out) < limit and not self.ended(k, due):
            out.append((k, due))
            k += 1
            if instants is None:
                due += self.every_ms or 0
            elif (step := next(instants, None)) is None:
                break
            else:
                due = step
        return out


def recurrence(
    found: dict[str, str], timing_due: int | None, base_ms: int, rules: HeaderRules
) -> Series | None:
    """The series a record's headers ask for (None: a one-off). ``timing_due`` is the
    timing headers' due time, if any; raises :class:`Rejection` on a bad value."""
    cron, every = found.get(DELAY_CRON), found.get(DELAY_EVERY)
    if cron is None and every is None:
        extra = [h for h in (DELAY_TIMEZONE, DELAY_UNTIL, DELAY_COUNT) if h in found]
        if extra:
            _bad(f"header {extra[0]} needs {DELAY_CRON} or {DELAY_EVERY}")
        return None
    if cron is not None and every is not None:
        _bad(f"headers {DELAY_CRON} and {DELAY_EVERY} together: choose one")
    zone = found.get(DELAY_TIMEZONE, "UTC")
    if every is not None:
        if DELAY_TIMEZONE in found:
            _bad(f"header {DELAY_TIMEZONE} applies to {DELAY_CRON} only")
        every_ms = _interval(every, rules)
        first = base_ms + every_ms if timing_due is None else timing_due
        series = Series(first, every_ms=every_ms)
    else:
        assert cron is not None
        expr = _cron(cron, zone)
        got = next(_instants(expr, zone, base_ms), None) if timing_due is None else timing_due
        if got is None:
            _bad(f"header {DELAY_CRON}: {cron!r:.80} has no instant after {base_ms}")
        first = got
        series = Series(first, cron=expr, timezone=zone)
    until = _until(found[DELAY_UNTIL]) if DELAY_UNTIL in found else None
    count = _count(found[DELAY_COUNT]) if DELAY_COUNT in found else None
    if until is not None and until < first:
        _bad(f"header {DELAY_UNTIL}: {until} is before the first occurrence, due {first}")
    if first - base_ms > rules.max_delay_ms:
        raise Rejection(
            Reason.DELAY_TOO_LONG,
            f"the first occurrence is due {first - base_ms} ms after the delay's base "
            f"{base_ms}; the maximum is {rules.max_delay_ms} ms",
        )
    return Series(first, series.every_ms, series.cron, series.timezone, until, count)


def _bad(detail: str) -> NoReturn:
    raise Rejection(Reason.BAD_RECURRENCE, detail)


def _interval(text: str, rules: HeaderRules) -> int:
    try:
        every_ms = parse_interval_ms(text)
    except TimeFormatError as exc:
        raise Rejection(Reason.BAD_RECURRENCE, f"header {DELAY_EVERY}: {exc}") from exc
    if every_ms < MIN_INTERVAL_MS:
        _bad(f"header {DELAY_EVERY}: {every_ms} ms is below the minimum {MIN_INTERVAL_MS} ms")
    if every_ms > rules.max_delay_ms:
        _bad(f"header {DELAY_EVERY}: {every_ms} ms is above max_delay_ms={rules.max_delay_ms}")
    return every_ms


def _cron(text: str, zone: str) -> str:
    expr = _MACROS.get(text.lower(), text)
    if len(expr) > 200:
        _bad(f"header {DELAY_CRON}: {len(expr)} characters (max 200)")
    if len(zone) > 64 or _zone(zone) is None:
        _bad(f"header {DELAY_TIMEZONE}: {zone!r:.80} is not a known IANA time zone")
    try:
        CronSim(expr, datetime(2000, 1, 1, tzinfo=UTC))
    except (CronSimError, ValueError) as exc:
        _bad(f"header {DELAY_CRON}: {text!r:.80} is not a cron expression: {exc}")
    return expr


def _until(text: str) -> int:
    try:
        return parse_int(text) if text.isascii() and text.isdigit() else _rfc3339(text)
    except TimeFormatError as exc:
        raise Rejection(Reason.BAD_RECURRENCE, f"header {DELAY_UNTIL}: {exc}") from exc


def _count(text: str) -> int:
    try:
        return parse_int(text, minimum=1, maximum=MAX_COUNT)
    except TimeFormatError as exc:
        raise Rejection(Reason.BAD_RECURRENCE, f"header {DELAY_COUNT}: {exc}") from exc


@lru_cache(maxsize=1024)
def _zone(name: str) -> ZoneInfo | None:
    try:
        return ZoneInfo(name)
    except (KeyError, ValueError, OSError):  # ZoneInfoNotFoundError is a KeyError
        return None


def _instants(expr: str, zone: str, after_ms: int) -> Iterator[int]:
    """The cron instants strictly after ``after_ms``, in epoch ms (an iterator)."""
    tz = _zone(zone) or UTC
    start = datetime.fromtimestamp(after_ms / 1000, tz)
    try:
        for instant in CronSim(expr, start):
            yield int(instant.timestamp() * 1000)
    except (CronSimError, StopIteration, ValueError, OverflowError):
        return


# -- the stored state ------------------------------------------------------------------


def state_header(series: Series, k: int) -> tuple[str, bytes]:
    """The internal header that carries occurrence ``k`` of ``series`` in the store."""
    state = {
        "first": series.first_ms,
        "every": series.every_ms,
        "cron": series.cron,
        "tz": series.timezone,
        "until": series.until_ms,
        "count": series.count,
        "k": k,
    }
    return SERIES_HEADER, orjson.dumps(state)


def read_state(raw: bytes | None) -> tuple[Series, int]:
    """The series and occurrence number of a :func:`state_header` value."""
    s = orjson.loads(raw or b"{}")
    series = Series(s["first"], s["every"], s["cron"], s["tz"], s["until"], s["count"])
    return series, int(s["k"])


def occurrence_of(raw: bytes | None) -> int:
    """Just the occurrence number of a :func:`state_header` value."""
    return int(orjson.loads(raw or b"{}")["k"])
