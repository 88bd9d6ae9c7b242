"""The changelog record (``changelog_record``): keys, values, and what is refused.

Byte-for-byte agreement with what 505b445 wrote: ``test_golden_formats.py``; a whole
changelog of 505b445 restored: ``tests/unit/bridge/state/test_changelog_505b445.py``.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from delaybridge.errors import IntegrityError
from delaybridge.timerlog.changelog_record import (
    PROGRESS_KEY,
    key_of,
    parse_key,
    record_of,
    value_of,
)


@given(st.integers(0, 2**62), st.integers(0, 2**64 - 1))
def test_keys_round_trip_and_sort_like_offset_then_generation(offset: int, generation: int) -> None:
    key = key_of(offset, generation)
    assert len(key) == (16 if generation >> 32 else 12)
    assert parse_key(key, "c") == (offset, generation)
    assert key_of(offset, 0) < key_of(offset, 1) < key_of(offset + 1, 0)


@pytest.mark.parametrize("key", [None, b"", PROGRESS_KEY, bytes(13)])
def test_a_key_of_another_length_is_refused_by_name(key: bytes | None) -> None:
    with pytest.raises(IntegrityError, match=r"^changelog t/0: changelog key of \d+ bytes"):
        parse_key(key, "changelog t/0")


def test_a_value_carries_the_record_after_its_version_byte() -> None:
    record = b"\x21\x00\x00\x00" + bytes(29)
    value = value_of(record)
    assert value[0] == 2 and bytes(record_of(value, "c")) == record
    assert bytes(record_of(b"\x01" + record, "c")) == record  # version 1: wide records
    for bad in (b"", b"\x03" + record, b"\x00" + record):
        with pytest.raises(IntegrityError, match=r"^c: changelog value version"):
            record_of(bad, "c")
