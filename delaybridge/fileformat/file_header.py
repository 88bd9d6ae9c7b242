"""The 64-byte header every store file starts with: magic, format version, geometry.

Layout (little-endian)::

    offset size field
     0      4   magic          b"DBCL" commit log, b"DBTL" timer log, b"DBWH" wheel,
                                b"DBCX" cancel log, b"DBTI" timer-log id index
     4      2   version        format version of this file kind (CURRENT_VERSIONS)
     6      2   header_size    64; lets a future version grow the header
     8      4   entry_size     fixed entry size in bytes, 0 for variable-length records
    12      8   base           position of the file's first byte of data in its log
    20      8   tick_ms        wheel tick the file was written with (0 if not relevant)
    28      8   slots          wheel slot count (0 if not relevant)
    36      8   stamp          mutable marker (the wheel's "clean at timer position")
    44     16   reserved       zero
    60      4   crc            CRC-32 of bytes 0..60
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from delaybridge.errors import IntegrityError

FORMAT_VERSION = 1
"""The version every file kind started at (and the wheel and the id index keep)."""

HEADER = struct.Struct(
    "<"
    "4s"  # magic: which kind of file this is
    "H"  # version: format version
    "H"  # header_size: 64
    "I"  # entry_size: fixed entry size, 0 = variable-length records
    "q"  # base: log position of the first data byte of this file
    "q"  # tick_ms: wheel geometry the file belongs to
    "q"  # slots: wheel geometry the file belongs to
    "q"  # stamp: mutable marker, meaning depends on the file kind
    "16x"  # reserved
    "I"  # crc: CRC-32 of everything before it
)
HEADER_SIZE = HEADER.size
assert HEADER_SIZE == 64
_CRC_OFFSET = HEADER_SIZE - 4


class FileKind(Enum):
    """The magic number of each file kind."""

    COMMIT_LOG = b"DBCL"
    TIMER_LOG = b"DBTL"
    WHEEL = b"DBWH"
    CANCEL_LOG = b"DBCX"
    TIMER_INDEX = b"DBTI"


CURRENT_VERSIONS = {
    FileKind.COMMIT_LOG: 2,  # 2: compact records (type 2) beside the wide ones
    FileKind.TIMER_LOG: 2,  # 2: 20-byte entries relative to the segment (timerlog/timer_entry.py)
    FileKind.WHEEL: FORMAT_VERSION,
    FileKind.CANCEL_LOG: 2,  # 2: cancels carry when they were sent (docs/storage.md)
    FileKind.TIMER_INDEX: FORMAT_VERSION,
}
"""The version this build writes, per file kind; it reads every version from 1 up to it
(a file of a newer version is refused, naming both)."""


@dataclass(frozen=True, slots=True)
class FileHeader:
    """The decoded header of one store file."""

    kind: FileKind
    entry_size: int
    base: int
    tick_ms: int = 0
    slots: int = 0
    stamp: int = 0
    version: int = 0
    """The file's format version; 0 (the default) means this build's current one."""

    def __post_init__(self) -> None:
        if self.version == 0:
            object.__setattr__(self, "version", CURRENT_VERSIONS[self.kind])

    def encode(self) -> bytes:
        raw = HEADER.pack(
            self.kind.value,
            self.version,
            HEADER_SIZE,
            self.entry_size,
            self.base,
            self.tick_ms,
            self.slots,
            self.stamp,
            0,
        )
        return raw[:_CRC_OFFSET] + struct.pack("<I", zlib.crc32(raw[:_CRC_OFFSET]))

    @staticmethod
    def decode(raw: bytes, path: Path, expect: FileKind) -> FileHeader:
        """Parse and check a header; IntegrityError names the file on any mismatch."""
        if len(raw) < HEADER_SIZE:
            raise IntegrityError(
                f"{path}: offset 0: file shorter than its {HEADER_SIZE}-byte header"
            )
        magic, version, size, entry_size, base, tick_ms, slots, stamp, crc = HEADER.unpack_from(raw)
        if zlib.crc32(raw[:_CRC_OFFSET]) != crc:
            raise IntegrityError(f"{path}: offset 0: header CRC mismatch")
        if magic != expect.value:
            raise IntegrityError(f"{path}: offset 0: magic {magic!r}, expected {expect.value!r}")
        current = CURRENT_VERSIONS[expect]
        if not 1 <= version <= current or size != HEADER_SIZE:
            raise IntegrityError(
                f"{path}: offset 4: format version {version}/header {size} not supported "
                f"(this build reads versions 1 to {current} of this file)"
            )
        return FileHeader(expect, entry_size, base, tick_ms, slots, stamp, version)
