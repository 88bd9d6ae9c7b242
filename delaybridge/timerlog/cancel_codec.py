"""Cancel-log record format: applied cancels and cancels waiting for their message.

File version 2 (the file header's): version 1 had types 1-3 only; a version-1 file is
read as it is (its WAITING records are cancels without a send time) and its header is
rewritten to version 2 before anything new is appended (:mod:`cancels`).

Each record::

    offset size field
     0      4   length    whole record, bytes
     4      4   crc       CRC-32 of bytes 8..length
     8      1   type      CancelType
     9      3   reserved  0
    12      .   body, by type:
        APPLIED   index q, slot_ms q       the timer-log entry that must not be delivered
        WAITING   expires_ms q, id_len H, topic_len H (0xFFFF = any topic), id, topic
                  (version 1; read, never written)
        RESOLVED  waiting_pos q            a waiting cancel whose grace ended (or, version
                                           1, that matched)
        WAITS     expires_ms q, sent_ms q, offset q, flags B, reserved B, id_len H,
                  topic_len H, id, topic   a cancel waiting for messages sent before it
                                           (flags: 1 matched, 2 sent_ms set, 4 offset set,
                                           8 a replace: a store that predates the flag
                                           reads it as a cancel, the same rule)
        MATCHED   waiting_pos q            a waiting cancel matched a message (so it is
                                           not counted unknown when its grace ends)
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
    "<q"  # waiting_pos: position of the WAITING or WAITS record in this file
)
WAITS = struct.Struct(
    "<"
    "q"  # expires_ms: end of the grace period
    "q"  # sent_ms: the cancel's timestamp (if flag 2)
    "q"  # offset: the cancel's source offset, for ties in its own partition (if flag 4)
    "B"  # flags: 1 matched, 2 sent_ms set, 4 offset set, 8 replace
    "x"  # reserved
    "H"  # id_len
    "H"  # topic_len, 0xFFFF = None (any topic)
)
assert PREFIX.size == 12 and APPLIED.size == 16 and WAITING.size == 12 and RESOLVED.size == 8
assert WAITS.size == 30
NO_TOPIC = 0xFFFF
MATCHED_FLAG, SENT_FLAG, OFFSET_FLAG, REPLACE_FLAG = 1, 2, 4, 8


class CancelType(IntEnum):
    APPLIED = 1
    WAITING = 2
    RESOLVED = 3
    WAITS = 4
    MATCHED = 5


@dataclass(frozen=True, slots=True)
class Applied:
    index: int
    slot_ms: int


@dataclass(frozen=True, slots=True)
class Waiting:
    expires_ms: int
    id: str
    topic: str | None
    sent_ms: int | None = None
    offset: int | None = None
    matched: bool = False
    replace: bool = False


@dataclass(frozen=True, slots=True)
class Resolved:
    waiting_pos: int


@dataclass(frozen=True, slots=True)
class Matched:
    waiting_pos: int


Decoded = Applied | Waiting | Resolved | Matched


def _frame(kind: CancelType, body: bytes) -> bytes:
    head = PREFIX.pack(PREFIX.size + len(body), 0, kind)
    crc = zlib.crc32(body, zlib.crc32(head[8:]))
    return PREFIX.pack(PREFIX.size + len(body), crc, kind) + body


def encode(item: Decoded) -> bytes:
    if isinstance(item, Applied):
        return _frame(CancelType.APPLIED, APPLIED.pack(item.index, item.slot_ms))
    if isinstance(item, Resolved):
        return _frame(CancelType.RESOLVED, RESOLVED.pack(item.waiting_pos))
    if isinstance(item, Matched):
        return _frame(CancelType.MATCHED, RESOLVED.pack(item.waiting_pos))
    idb = item.id.encode()
    tb = b"" if item.topic is None else item.topic.encode()
    tlen = NO_TOPIC if item.topic is None else len(tb)
    flags = (
        (MATCHED_FLAG if item.matched else 0)
        | (0 if item.sent_ms is None else SENT_FLAG)
        | (0 if item.offset is None else OFFSET_FLAG)
        | (REPLACE_FLAG if item.replace else 0)
    )
    fixed = WAITS.pack(item.expires_ms, item.sent_ms or 0, item.offset or 0, flags, len(idb), tlen)
    return _frame(CancelType.WAITS, fixed + idb + tb)


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
        if kind == CancelType.MATCHED:
            return Matched(*RESOLVED.unpack_from(buf, body)), length
        if kind == CancelType.WAITING:
            expires, id_len, tlen = WAITING.unpack_from(buf, body)
            rid, topic = _id_and_topic(buf, body + WAITING.size, id_len, tlen)
            return Waiting(expires, rid, topic), length
        if kind == CancelType.WAITS:
            expires, sent, offset, flags, id_len, tlen = WAITS.unpack_from(buf, body)
            rid, topic = _id_and_topic(buf, body + WAITS.size, id_len, tlen)
            return Waiting(
                expires,
                rid,
                topic,
                sent if flags & SENT_FLAG else None,
                offset if flags & OFFSET_FLAG else None,
                bool(flags & MATCHED_FLAG),
                bool(flags & REPLACE_FLAG),
            ), length
    except (struct.error, UnicodeDecodeError) as exc:
        raise IntegrityError(f"{path}: offset {file_offset}: malformed cancel record") from exc
    raise IntegrityError(f"{path}: offset {file_offset}: unknown cancel record type {kind}")


def _id_and_topic(buf: bytes, o: int, id_len: int, tlen: int) -> tuple[str, str | None]:
    if o + id_len + (0 if tlen == NO_TOPIC else tlen) > len(buf):
        raise struct.error("id or topic runs past the record")
    rid = buf[o : o + id_len].decode()
    topic = None if tlen == NO_TOPIC else buf[o + id_len : o + id_len + tlen].decode()
    return rid, topic
