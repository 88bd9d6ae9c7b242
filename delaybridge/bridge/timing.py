"""Parsing of time values found in headers: integers, RFC 3339, durations, delay levels.

Every parser raises :class:`TimeFormatError` with a message that says what was expected;
the caller names the header.
"""

from __future__ import annotations

import re
from datetime import datetime

_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|h|d)\s*$")
_UNIT_MS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


class TimeFormatError(ValueError):
    """A header value is not the time it claims to be."""


def parse_int(text: str, *, minimum: int = 0) -> int:
    """A decimal integer ≥ ``minimum`` (no sign tricks, no floats, no blanks)."""
    stripped = text.strip()
    if not stripped.lstrip("-").isdigit():
        raise TimeFormatError(f"expected an integer, got {text!r}")
    value = int(stripped)
    if value < minimum:
        raise TimeFormatError(f"expected an integer >= {minimum}, got {value}")
    return value


def parse_rfc3339_ms(text: str) -> int:
    """An RFC 3339 timestamp with an explicit offset (``Z`` or ``±hh:mm``) → epoch ms."""
    try:
        parsed = datetime.fromisoformat(text.strip())
    except ValueError as exc:
        raise TimeFormatError(f"expected an RFC 3339 timestamp, got {text!r}") from exc
    if parsed.tzinfo is None:
        raise TimeFormatError(f"RFC 3339 timestamp {text!r} has no time zone offset")
    return int(parsed.timestamp() * 1000)


def parse_duration_ms(text: str) -> int:
    """``500ms``, ``10s``, ``5m``, ``2h``, ``1d`` → milliseconds."""
    match = _DURATION.match(text)
    if match is None:
        raise TimeFormatError(f"expected a duration like 10s, 5m or 2h, got {text!r}")
    return int(match.group(1)) * _UNIT_MS[match.group(2)]


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
