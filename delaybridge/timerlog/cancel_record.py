"""The cancel-log record: cancelled entries, cancels waiting for their message, and what
became of them.

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
                                           (flags: WaitFlag; REPLACE: a store that
                                           predates the flag reads it as a cancel, the
                                           same rule; PREFIX: the id is a prefix)
        MATCHED   waiting_pos q            a waiting cancel matched a message (so it is
                                           not counted unknown when its grace ends)

Decoded, a record is one of :data:`CancelRecord`: a :class:`CancelledEntry`, a
:class:`WaitingCancel` (which holds the store's :class:`~records.Cancel` and is also
what the cancel book keeps in memory), a :class:`Resolved` or a :class:`Matched`.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from enum import IntEnum, IntFlag
from pathlib import Path

from delaybridge.errors import IntegrityError
from delaybridge.timerlog.records import Cancel

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
    "q"  # sent_ms: the cancel's timestamp (if WaitFlag.SENT)
    "q"  # offset: the cancel's source offset, for ties in its own partition (if OFFSET)
    "B"  # flags: WaitFlag
    "x"  # reserved
    "H"  # id_len
    "H"  # topic_len, 0xFFFF = None (any topic)
)
assert PREFIX.size == 12 and APPLIED.size == 16 and WAITING.size == 12 and RESOLVED.size == 8
assert WAITS.size == 30
CRC_FROM = struct.calcsize("<II")
"""The CRC covers the record from the type byte on."""
NO_TOPIC = 0xFFFF


class CancelType(IntEnum):
    """On-disk record tags of the cancel log."""

    APPLIED = 1
    WAITING = 2
    RESOLVED = 3
    WAITS = 4
    MATCHED = 5


class WaitFlag(IntFlag):
    """The flags byte of a WAITS record."""

    MATCHED = 1
    """It matched a message already."""
    SENT = 2
    """``sent_ms`` is set (else the cancel has no send time)."""
    OFFSET = 4
    """``offset`` is set."""
    REPLACE = 8
    """A schedule's replace of its own id, not a cancel."""
    PREFIX = 16
    """A cancel by id prefix (``delay-cancel-prefix``): the id is a prefix. A store that
    predates the flag reads it as a cancel of that exact id (it takes less, never more)."""


@dataclass(frozen=True, slots=True)
class CancelledEntry:
    """A timer-log entry a cancel took: it is skipped when its tick is read."""

    index: int
    slot_ms: int
    """Its tick: the record is forgotten once the delivery cursor has passed it."""


@dataclass(slots=True)
class WaitingCancel:
    """A cancel waiting ``cancel_grace_ms`` for messages sent before it that may still
    arrive (from another delay-topic partition, or one that lags).

    Both the WAITS record and what the cancel book keeps in memory: the book sets
    ``pos`` when it writes or reads the record, and ``matched`` when a message matches."""

    cancel: Cancel
    expires_ms: int
    matched: bool = False
    """It matched a message (when applied or since): not unknown when its grace ends."""
    pos: int = -1
    """Where its record is in the cancel log (after the file header); -1 until known."""


@dataclass(frozen=True, slots=True)
class Resolved:
    """The waiting cancel whose record is at ``waiting_pos`` is done (its grace ended)."""

    waiting_pos: int


@dataclass(frozen=True, slots=True)
class Matched:
    """The waiting cancel whose record is at ``waiting_pos`` matched a message."""

    waiting_pos: int


CancelRecord = CancelledEntry | WaitingCancel | Resolved | Matched


def _frame(kind: CancelType, body: bytes) -> bytes:
    head = PREFIX.pack(PREFIX.size + len(body), 0, kind)
    crc = zlib.crc32(body, zlib.crc32(head[CRC_FROM:]))
    return PREFIX.pack(PREFIX.size + len(body), crc, kind) + body


def encode(record: CancelRecord) -> bytes:
    """The record, framed: length, CRC, type, body (a WaitingCancel's ``pos`` is not
    part of it)."""
    if isinstance(record, CancelledEntry):
        return _frame(CancelType.APPLIED, APPLIED.pack(record.index, record.slot_ms))
    if isinstance(record, Resolved):
        return _frame(CancelType.RESOLVED, RESOLVED.pack(record.waiting_pos))
    if isinstance(record, Matched):
        return _frame(CancelType.MATCHED, RESOLVED.pack(record.waiting_pos))
    c = record.cancel
    idb = c.id.encode()
    tb = b"" if c.target_topic is None else c.target_topic.encode()
    tlen = NO_TOPIC if c.target_topic is None else len(tb)
    flags = (
        (WaitFlag.MATCHED if record.matched else 0)
        | (0 if c.sent_ms is None else WaitFlag.SENT)
        | (0 if c.offset is None else WaitFlag.OFFSET)
        | (WaitFlag.REPLACE if c.replace else 0)
        | (WaitFlag.PREFIX if c.prefix else 0)
    )
    fixed = WAITS.pack(record.expires_ms, c.sent_ms or 0, c.offset or 0, flags, len(idb), tlen)
    return _frame(CancelType.WAITS, fixed + idb + tb)


def decode(buf: bytes, offset: int, path: Path, file_offset: int) -> tuple[CancelRecord, int]:
    """The record at ``offset`` and its length; IntegrityError on any damage. A waiting
    cancel comes back with ``pos`` -1: its place in the file is the reader's to say."""
    if offset + PREFIX.size > len(buf):
        raise IntegrityError(f"{path}: offset {file_offset}: cancel record runs past the end")
    length, crc, kind = PREFIX.unpack_from(buf, offset)
    if length < PREFIX.size or offset + length > len(buf):
        raise IntegrityError(f"{path}: offset {file_offset}: bad cancel record length {length}")
    if zlib.crc32(buf[offset + CRC_FROM : offset + length]) != crc:
        raise IntegrityError(f"{path}: offset {file_offset}: cancel record CRC mismatch")
    body = offset + PREFIX.size
    try:
        if kind == CancelType.APPLIED:
            return CancelledEntry(*APPLIED.unpack_from(buf, body)), length
        if kind == CancelType.RESOLVED:
            return Resolved(*RESOLVED.unpack_from(buf, body)), length
        if kind == CancelType.MATCHED:
            return Matched(*RESOLVED.unpack_from(buf, body)), length
        if kind == CancelType.WAITING:
            expires, id_len, tlen = WAITING.unpack_from(buf, body)
            rid, topic = _id_and_topic(buf, body + WAITING.size, id_len, tlen)
            return WaitingCancel(Cancel(rid, topic), expires), length
        if kind == CancelType.WAITS:
            expires, sent, at, flags, id_len, tlen = WAITS.unpack_from(buf, body)
            rid, topic = _id_and_topic(buf, body + WAITS.size, id_len, tlen)
            cancel = Cancel(
                rid,
                topic,
                sent if flags & WaitFlag.SENT else None,
                at if flags & WaitFlag.OFFSET else None,
                bool(flags & WaitFlag.REPLACE),
                bool(flags & WaitFlag.PREFIX),
            )
            return WaitingCancel(cancel, expires, bool(flags & WaitFlag.MATCHED)), length
    except (struct.error, UnicodeDecodeError) as exc:
        raise IntegrityError(f"{path}: offset {file_offset}: malformed cancel record") from exc
    raise IntegrityError(f"{path}: offset {file_offset}: unknown cancel record type {kind}")


def _id_and_topic(buf: bytes, o: int, id_len: int, tlen: int) -> tuple[str, str | None]:
    if o + id_len + (0 if tlen == NO_TOPIC else tlen) > len(buf):
        raise struct.error("id or topic runs past the record")
    rid = buf[o : o + id_len].decode()
    topic = None if tlen == NO_TOPIC else buf[o + id_len : o + id_len + tlen].decode()
    return rid, topic
