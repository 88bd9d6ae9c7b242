"""The store-wide file format: the 64-byte file header and the vectorised CRC."""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from delaybridge.errors import IntegrityError
from delaybridge.fileformat import HEADER_SIZE, FileHeader, FileKind, FixedCrc

P = Path("f")


def test_file_header_round_trip_and_wrong_kind() -> None:
    h = FileHeader(FileKind.TIMER_LOG, 32, 4096, 100, 864_000, 7)
    raw = h.encode()
    assert len(raw) == HEADER_SIZE
    assert FileHeader.decode(raw, P, FileKind.TIMER_LOG) == h
    with pytest.raises(IntegrityError, match="magic"):
        FileHeader.decode(raw, P, FileKind.COMMIT_LOG)


def test_file_header_damage_and_truncation_name_the_file() -> None:
    raw = bytearray(FileHeader(FileKind.WHEEL, 32, 0, 100, 64, 0).encode())
    raw[20] ^= 1  # tick_ms, inside the header's CRC
    with pytest.raises(IntegrityError, match=r"^f: offset 0: header CRC"):
        FileHeader.decode(bytes(raw), P, FileKind.WHEEL)
    with pytest.raises(IntegrityError, match=r"^f: offset 0: file shorter"):
        FileHeader.decode(bytes(raw[:10]), P, FileKind.WHEEL)


@settings(max_examples=50, deadline=None)
@given(
    st.sampled_from([27, 28]).flatmap(
        lambda n: st.lists(st.binary(min_size=n, max_size=n), min_size=1, max_size=20)
    )
)
def test_vectorised_crc_equals_zlib(rows: list[bytes]) -> None:
    # 28 bytes (even) takes the byte-pair tables, 27 (odd) the one-byte tables.
    n = len(rows[0])
    crc = FixedCrc(n)
    data = np.frombuffer(b"".join(rows), dtype=np.uint8).reshape(-1, n)
    assert crc.compute(data).tolist() == [zlib.crc32(r) for r in rows]
