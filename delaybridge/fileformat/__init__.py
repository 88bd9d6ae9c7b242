"""The file format every store file shares: the 64-byte file header and its CRC.

Public names::

    FileHeader(kind, entry_size, base, tick_ms, slots, stamp).encode() -> 64 bytes
    FileHeader.decode(raw, path, expect=FileKind.WHEEL) -> FileHeader  # IntegrityError
    FileKind, HEADER_SIZE, FORMAT_VERSION, CURRENT_VERSIONS (per file kind)
    FixedCrc(length).compute(rows) -> CRC-32 of every row, vectorised (zlib's values)

The lowest layer of the store: ``delaybridge.wheel`` and ``delaybridge.timerlog`` both
build on it, and it imports neither (only :mod:`delaybridge.errors`). The formats are
drawn field by field in docs/storage.md.
"""

from delaybridge.fileformat.file_header import (
    CURRENT_VERSIONS,
    FORMAT_VERSION,
    HEADER_SIZE,
    FileHeader,
    FileKind,
)
from delaybridge.fileformat.fixedcrc import FixedCrc

__all__ = [
    "CURRENT_VERSIONS",
    "FORMAT_VERSION",
    "HEADER_SIZE",
    "FileHeader",
    "FileKind",
    "FixedCrc",
]
