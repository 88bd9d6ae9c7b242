"""CRC-32 (zlib's polynomial) of many fixed-size entries at once, with numpy.

CRC-32 is affine over GF(2): for messages of one fixed length ``n``,
``crc(m) = crc(0^n) ^ XOR_j T[j][m[j]]`` where ``T[j][v] = crc(v at byte j, zeros
elsewhere) ^ crc(0^n)``. So a table of ``n x 256`` words turns the CRC of a whole
array of entries into ``n`` vectorised gathers and XORs: about 40 ns per 28-byte
entry instead of ~300 ns for a Python loop calling ``zlib.crc32``. The values are
exactly ``zlib.crc32``'s, so any reader may check an entry with plain zlib. For even
lengths, pairs of bytes are looked up together (14 gathers for 28 bytes, 3.5 MiB of
tables), which is ~1.5x faster again.
"""

from __future__ import annotations

import zlib

import numpy as np
import numpy.typing as npt

U32Array = npt.NDArray[np.uint32]


class FixedCrc:
    """CRC-32 of byte strings of exactly ``length`` bytes, vectorised."""

    def __init__(self, length: int) -> None:
        self.length = length
        zero = bytes(length)
        self._base = np.uint32(zlib.crc32(zero))
        table = np.empty((length, 256), dtype=np.uint32)
        probe = bytearray(length)
        for j in range(length):
            for v in range(256):
                probe[j] = v
                table[j, v] = zlib.crc32(probe) ^ int(self._base)
            probe[j] = 0
        self._table = table
        # Pairs of bytes: half the gathers, from 64 Ki-word tables (256 KiB each).
        self._pairs: npt.NDArray[np.uint32] | None = None
        if length % 2 == 0:
            pair = np.arange(1 << 16)
            self._pairs = np.stack(
                [
                    table[2 * j][pair & 0xFF] ^ table[2 * j + 1][pair >> 8]
                    for j in range(length // 2)
                ]
            )

    def compute(self, rows: npt.NDArray[np.uint8]) -> U32Array:
        """CRC-32 of each row of a ``(count, length)`` uint8 array."""
        if rows.ndim != 2 or rows.shape[1] != self.length:
            raise ValueError(f"expected rows of {self.length} bytes, got shape {rows.shape}")
        acc = np.full(rows.shape[0], self._base, dtype=np.uint32)
        if self._pairs is not None and rows.strides[1] == 1 and rows.shape[0]:
            words = rows.view("<u2")  # little-endian: low byte first, as the tables expect
            for j in range(self.length // 2):
                acc ^= self._pairs[j][words[:, j]]
            return acc
        for j in range(self.length):
            acc ^= self._table[j][rows[:, j]]
        return acc
