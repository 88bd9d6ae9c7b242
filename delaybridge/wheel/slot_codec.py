"""Wheel slot format: 32 bytes per slot, RocketMQ's Slot plus a CRC.

    offset size field
     0      4   crc      CRC-32 of bytes 4..32; checked only when count != 0
     4      4   count    entries in the slot's list; 0 = empty (other fields ignored)
     8      8   time_ms  absolute time of the tick the list belongs to
    16      8   first    timer-log index of the oldest entry of the list
    24      8   last     timer-log index of the newest entry (the list's head)

A slot stores its own time, so a slot left over from an earlier turn of the wheel
is recognised as stale (``time_ms`` differs) and never needs clearing.
"""

from __future__ import annotations

import struct

import numpy as np

from delaybridge.fileformat import FixedCrc

SLOT = struct.Struct(
    "<"
    "I"  # crc: CRC-32 of bytes 4..32
    "I"  # count: entries in the list, 0 = empty
    "q"  # time_ms: the slot's tick
    "q"  # first: oldest entry's timer-log index
    "q"  # last: newest entry's timer-log index
)
SLOT_SIZE = SLOT.size
assert SLOT_SIZE == 32

DTYPE = np.dtype(
    [
        ("crc", "<u4"),
        ("count", "<u4"),
        ("time_ms", "<i8"),
        ("first", "<i8"),
        ("last", "<i8"),
    ]
)
assert DTYPE.itemsize == SLOT_SIZE

CRC = FixedCrc(SLOT_SIZE - 4)
