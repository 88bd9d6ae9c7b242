"""Stored copies of a message: a parked copy's state header, and which copy a record is.

A message may be stored more than once over its life: a delivery that failed is
*parked* — appended again, due at its retry time, with its state in one internal header
(:data:`RETRY_HEADER`, always the record's last header, stripped before it goes out;
``bridge/delivery/attempts.py``) — and each occurrence of a recurring schedule is a
record of its own (its state in the series header, ``contract/series.py``). Every copy
has a **generation** (:func:`generation_of`), which the changelog's key carries
(``timerlog/changelog_record.py``), so each copy of each occurrence has a key of its own:
a tombstone of the old copy can never remove the new one.
"""

from __future__ import annotations

from typing import Any

import orjson

from delaybridge.contract.names import INTERNAL_HEADERS, SERIES_HEADER
from delaybridge.contract.series import occurrence_of
from delaybridge.timerlog import TimerRecord

#: The internal header of a parked record; always its last header.
RETRY_HEADER = "delaybridge-retry"
assert RETRY_HEADER in INTERNAL_HEADERS


def is_parked(rec: TimerRecord) -> bool:
    """``rec`` is a parked copy: its last header is the retry state."""
    headers = rec.headers
    return bool(headers) and headers[-1][0] == RETRY_HEADER


def parked_state(rec: TimerRecord) -> dict[str, Any]:
    """The retry state a parked copy carries (``bridge/delivery/attempts.py`` writes it)."""
    state: dict[str, Any] = orjson.loads(rec.headers[-1][1] or b"{}")
    return state


def generation_of(rec: TimerRecord) -> int:
    """Which stored copy of its message ``rec`` is: 0, or +1 per parking; occurrence k
    of a series adds ``(k - 1) << 32`` (its changelog key then grows to 16 bytes,
    ``timerlog/changelog_record.py``), so every occurrence and each of its parked copies
    has a key of its own."""
    headers = rec.headers
    if not headers:
        return 0
    name = headers[-1][0]
    if name == SERIES_HEADER:
        return (occurrence_of(headers[-1][1]) - 1) << 32
    if name != RETRY_HEADER:
        return 0
    parked = int(parked_state(rec).get("generation", 0))
    if len(headers) > 1 and headers[-2][0] == SERIES_HEADER:
        return parked | (occurrence_of(headers[-2][1]) - 1) << 32
    return parked
