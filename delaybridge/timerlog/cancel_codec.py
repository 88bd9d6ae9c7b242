"""Cancel-log record format: applied cancels and cancels waiting for their message.

Each record::

    offset size field
     0      4   length    whole record, bytes
     4      4   crc       CRC-32 of bytes 8..length
     8      1   type      CancelType
     9      3   reserved  0
    12      .   body, by type:
        APPLIED   index q, slot_ms q       the timer-log entry that must not be delivered
        WAITING   expires_ms q, id_len H, topic_len H (0xFFFF = any topic), id, topic
        RESOLVED  waiting_pos q            a WAITING record that matched or expired
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path

from delaybridge.errors import IntegrityError

PREFIX = struct.Struct(
    "<"
    "I"  # length
    "I"  # crc of bytes 8..length
    "B"  # type: CancelType
    "3x"  # reserved
)
APPLIED = struct.Struct(
    "<"
    "q"  # index: timer-log entry that is cancelled
    "q"  # slot_ms: its tick, to forget the record once the tick is done
)
WAITING = struct.Struct(
    "<"
    "q"  # expires_ms: end of the grace period
    "H"  # id_len
    "H"  # topic_len, 0xFFFF = None (any topic)
)
RESOLVED = struct.Struct(
    "<q"  # waiting_pos: position of the WAITING record in this file
)
assert PREFIX.size == 12 and APPLIED.size == 16 and WAITING.size == 12 and RESOLVED.size == 8
NO_TOPIC = 0xFFFF


class CancelType(IntEnum):
    APPLIED = 1
    WAITING = 2
    RESOLVED = 3


@dataclass(frozen=True, slots=True)
class Applied:
    index: int
    slot_ms: int


@dataclass(frozen=True, slots=True)
class Waiting:
    expires_ms: int
    id: str
    topic: str | None


@dataclass(frozen=True, slots=True)
class Resolved:
    waiting_pos: int


Decoded = Applied | Waiting | Resolved


def _frame(kind: CancelType, body: bytes) -> bytes:
    head = PREFIX.pack(PREFIX.size + len(body), 0, kind)
    crc = zlib.crc32(body, zlib.crc32(head[8:]))
    return PREFIX.pack(PREFIX.size + len(body), crc, kind) + body


def encode(item: Decoded) -> bytes:
    if isinstance(item, Applied):
        return _frame(CancelType.APPLIED, APPLIED.pack(item.index, item.slot_ms))
    if isinstance(item, Resolved):
        return _frame(CancelType.RESOLVED, RESOLVED.pack(item.waiting_pos))
    idb = item.id.encode()
    tb = b"" if item.topic is None else item.topic.encode()
    tlen = NO_TOPIC if item.topic is None else len(tb)
    return _frame(CancelType.WAITING, WAITING.pack(item.expires_ms, len(idb), tlen) + idb + tb)


def decode(buf: bytes, offset: int, path: Path, file_offset: int) -> tuple[Decoded, int]:
    """The record at ``offset`` and its length; IntegrityError on any damage."""
    if offset + PREFIX.size > len(buf):
        raise IntegrityError(f"{path}: offset {file_offset}: cancel record runs past the end")
    length, crc, kind = PREFIX.unpack_from(buf, offset)
    if length < PREFIX.size or offset + length > len(buf):
        raise IntegrityError(f"{path}: offset {file_offset}: bad cancel record length {length}")
    if zlib.crc32(buf[offset + 8 : offset + length]) != crc:
        raise IntegrityError(f"{path}: offset {file_offset}: cancel record CRC mismatch")
    body = offset + PREFIX.size
    try:
        if kind == CancelType.APPLIED:
            return Applied(*APPLIED.unpack_from(buf, body)), length
        if kind == CancelType.RESOLVED:
            return Resolved(*RESOLVED.unpack_from(buf, body)), length
        if kind == CancelType.WAITING:
            expires, id_len, tlen = WAITING.unpack_from(buf, body)
            o = body + WAITING.size
            rid = buf[o : o + id_len].decode()
            topic = None if tlen == NO_TOPIC else buf[o + id_len : o + id_len + tlen].decode()
            return Waiting(expires, rid, topic), length
    except (struct.error, UnicodeDecodeError) as exc:
        raise IntegrityError(f"{path}: offset {file_offset}: malformed cancel record") from exc
    raise IntegrityError(f"{path}: offset {file_offset}: unknown cancel record type {kind}")
