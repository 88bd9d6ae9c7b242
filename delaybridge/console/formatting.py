"""How the pages write times, sizes and values (Jinja filters, and the forms' parsing)."""

from __future__ import annotations

import base64
from datetime import UTC, datetime

from delaybridge.contract.timing import TimeFormatError, parse_duration_ms, parse_rfc3339_ms
from delaybridge.errors import DelayBridgeError

#: ``<input type="datetime-local">`` sends minutes or seconds, without a zone: the
#: console's forms say the time is UTC.
_LOCAL_FORMATS = ("%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S")


class BadInput(DelayBridgeError):
    """A form or query field the console cannot use (the page says which)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def utc(ms: int | float | None) -> str:
    """Epoch milliseconds as ``2026-11-22 08:00:00.000 UTC``."""
    if ms is None:
        return "—"
    moment = datetime.fromtimestamp(ms / 1000, UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{int(ms) % 1000:03d} UTC"


def relative(ms: int | float | None, now_ms: int) -> str:
    """``in 4 min`` / ``12 s ago``: a due time as a person reads it."""
    if ms is None:
        return ""
    delta = (ms - now_ms) / 1000
    span = abs(delta)
    if span < 1:
        return "now"
    if span < 120:
        text = f"{span:.0f} s"
    elif span < 7200:
        text = f"{span / 60:.0f} min"
    elif span < 172_800:
        text = f"{span / 3600:.1f} h"
    else:
        text = f"{span / 86400:.1f} days"
    return f"in {text}" if delta > 0 else f"{text} ago"


def size(n: int | float | None) -> str:
    if n is None:
        return "—"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


def preview(value: bytes | None, limit: int) -> tuple[str, bool]:
    """The start of a value for a person: UTF-8 text or hex, and whether it was cut."""
    if value is None:
        return "(null)", False
    cut = len(value) > limit
    head = value[:limit]
    try:
        return head.decode("utf-8"), cut
    except UnicodeDecodeError:
        # A cut may split a character: try without the last few bytes before giving up.
        for drop in (1, 2, 3):
            try:
                return head[:-drop].decode("utf-8"), True
            except UnicodeDecodeError:
                continue
        return "hex: " + head.hex(" "), cut


def preview_b64(value: str | None, limit: int) -> tuple[str, bool]:
    """:func:`preview` of a base64 value as the admin API answers it."""
    return preview(None if value is None else base64.b64decode(value), limit)


def parse_when(text: str, now_ms: int, field: str) -> int:
    """A due time from a form: a delay from now (``30m``, ``2h``), RFC 3339, or the
    ``datetime-local`` form of a UTC time. Epoch ms."""
    text = text.strip()
    if not text:
        raise BadInput(field, "give a time: a delay (30m) or a UTC time (2026-11-22T08:00)")
    try:
        return now_ms + parse_duration_ms(text)
    except TimeFormatError:
        pass
    when = parse_time(text, field)
    assert when is not None
    return when


def parse_time(text: str | None, field: str) -> int | None:
    """An optional time: the ``datetime-local`` form (UTC) or RFC 3339; epoch ms."""
    if text is None or not text.strip():
        return None
    text = text.strip()
    for fmt in _LOCAL_FORMATS:
        try:
            moment = datetime.strptime(text, fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
        return int(moment.timestamp() * 1000)
    try:
        return parse_rfc3339_ms(text)
    except TimeFormatError:
        raise BadInput(
            field, f"{text!r} is not a time (2026-11-22T08:00 in UTC, or RFC 3339)"
        ) from None


def local_input(ms: int | None) -> str:
    """Epoch ms as a ``datetime-local`` field's value (UTC), to fill a form again."""
    if ms is None:
        return ""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S")
