"""The cancel-log record (``cancel_record``): round trips and damage detection.

Byte-for-byte agreement with what 505b445 wrote: ``test_golden_formats.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from delaybridge.errors import IntegrityError
from delaybridge.timerlog.cancel_record import (
    CancelledEntry,
    CancelRecord,
    Matched,
    Resolved,
    WaitingCancel,
    decode,
    encode,
)
from delaybridge.timerlog.records import Cancel

P = Path("f")


@pytest.mark.parametrize(
    "item",
    [
        CancelledEntry(5, 1_000),
        WaitingCancel(Cancel("id-1"), 9),
        WaitingCancel(Cancel("id-2", "orders"), 9),
        WaitingCancel(Cancel("id-3", "orders", 7, 3, replace=True), 9, matched=True),
        Resolved(64),
        Matched(64),
    ],
)
def test_cancel_records_round_trip_and_detect_damage(item: CancelRecord) -> None:
    raw = encode(item)
    assert decode(raw, 0, P, 0) == (item, len(raw))
    for i in range(len(raw)):
        damaged = bytearray(raw)
        damaged[i] ^= 0x01
        with pytest.raises(IntegrityError):
            decode(bytes(damaged), 0, P, 0)


def test_a_waiting_cancels_place_in_the_file_is_not_part_of_its_record() -> None:
    placed = WaitingCancel(Cancel("id-1", None, 5), 9, pos=120)
    raw = encode(placed)
    assert raw == encode(WaitingCancel(Cancel("id-1", None, 5), 9))
    assert decode(raw, 0, P, 0)[0] == WaitingCancel(Cancel("id-1", None, 5), 9, pos=-1)
