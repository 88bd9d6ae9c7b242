"""Parsing of time values found in headers: integers, RFC 3339, durations, delay levels.

Every parser raises :class:`TimeFormatError` with a message that says what was expected;
the caller names the header.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

_DURATION = re.compile(r"^\s*([0-9]{1,15})\s*(ms|s|m|h|d)\s*$")
_INTERVAL_PART = re.compile(r"([0-9]{1,15})(ms|s|m|h|d)")
_INTERVAL = re.compile(r"(?:[0-9]{1,15}(?:ms|s|m|h|d)){1,5}")
#: ASCII digits only (``str.isdigit`` accepts "²" and other scripts' digits, which
#: ``int()`` then refuses), and few enough that nothing downstream overflows int64.
_INTEGER = re.compile(r"-?[0-9]{1,18}")
_SUB_MICROS = re.compile(r"[.,][0-9]{6}([0-9]+)")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
_UNIT_MS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


class TimeFormatError(ValueError):
    """A header value is not the time it claims to be."""


def parse_int(text: str, *, minimum: int = 0, maximum: int | None = None) -> int:
    """A decimal integer in ``[minimum, maximum]``: ASCII digits, at most 18 of them, an
    optional leading ``-``; no other sign, no floats, no blanks, no separators."""
    stripped = text.strip()
    if _INTEGER.fullmatch(stripped) is None:
        raise TimeFormatError(f"expected a decimal integer (at most 18 digits), got {_cut(text)}")
    value = int(stripped)
    if value < minimum:
        raise TimeFormatError(f"expected an integer >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise TimeFormatError(f"expected an integer <= {maximum}, got {value}")
    return value


def _cut(text: str, limit: int = 60) -> str:
    """A value for an error message: a producer may send megabytes of it."""
    return repr(text) if len(text) <= limit else f"{text[:limit]!r}... ({len(text)} chars)"


def parse_rfc3339_ms(text: str) -> int:
    """An RFC 3339 timestamp with an explicit offset (``Z`` or ``±hh:mm``) → epoch ms.

    Fractions of a millisecond round *up*: a due time is never moved earlier.
    """
    stripped = text.strip()
    if len(stripped) > 64:
        raise TimeFormatError(f"expected an RFC 3339 timestamp, got {_cut(text)}")
    try:
        parsed = datetime.fromisoformat(stripped)
    except ValueError as exc:
        raise TimeFormatError(f"expected an RFC 3339 timestamp, got {_cut(text)}") from exc
    if parsed.tzinfo is None:
        raise TimeFormatError(f"RFC 3339 timestamp {_cut(text)} has no time zone offset")
    micros = (parsed - _EPOCH) // _MICROSECOND
    beyond = _SUB_MICROS.search(stripped)  # digits fromisoformat dropped
    if beyond is not None and beyond.group(1).strip("0"):
        micros += 1
    return -(-micros // 1000)


def parse_duration_ms(text: str) -> int:
    """``500ms``, ``10s``, ``5m``, ``2h``, ``1d`` → milliseconds."""
    match = _DURATION.match(text)
    if match is None:
        raise TimeFormatError(f"expected a duration like 10s, 5m or 2h, got {_cut(text)}")
    return int(match.group(1)) * _UNIT_MS[match.group(2)]


def parse_interval_ms(text: str) -> int:
    """An interval: plain milliseconds (``90000``), one duration (``90s``) or several
    summed (``1h30m``, ``1m30s500ms``; up to five parts) → milliseconds."""
    stripped = text.strip()
    if _INTEGER.fullmatch(stripped) is not None and not stripped.startswith("-"):
        return int(stripped)
    if _INTERVAL.fullmatch(stripped) is None:
        raise TimeFormatError(
            f"expected an interval like 2s, 5m, 1h30m or milliseconds, got {_cut(text)}"
        )
    return sum(int(n) * _UNIT_MS[unit] for n, unit in _INTERVAL_PART.findall(stripped))


def parse_level_table(table: str) -> tuple[int, ...]:
    """RocketMQ's ``messageDelayLevel`` string (``"1s 5s 10s ..."``) → delays in ms.

    Level 1 is the first entry. Raises on an empty table or a bad entry.
    """
    levels = tuple(parse_duration_ms(item) for item in table.split())
    if not levels:
        raise TimeFormatError("the delay level table is empty")
    return levels


def level_delay_ms(levels: tuple[int, ...], level: int) -> int:
    """Delay of RocketMQ 4 level ``level``: 0 means none, above the maximum is clamped."""
    if level < 0:
        raise TimeFormatError(f"delay level must be >= 0, got {level}")
    if level == 0:
        return 0
    return levels[min(level, len(levels)) - 1]
