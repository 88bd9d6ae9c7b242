"""Damaged commit-log records: quarantined one by one, the partition keeps delivering.

A record whose CRC fails when it is read for delivery (a flipped bit, a zeroed page) used
to raise out of ``take_due`` and kill the sidecar, healthy partitions with it. Now the
reader (:mod:`reader`) reads the records of a pass one by one when the batch read fails,
and each damaged one is

* **readable** -- its fields still parse (lengths inside the record, UTF-8 id and
  topic): handed out as a :class:`DamagedRecord` (id, target, key, headers, source
  offset and timestamp as read, *without their CRC*; the value dropped, it cannot be
  trusted; due at the tick it was read in), which the sidecar dead-letters with reason
  ``store-corrupt`` and the detail below (``bridge/delivery/attempts.py``);
* **unreadable** -- nothing identifies it: skipped, counted and logged with its file
  and offset.

Both are counted (``corrupt_records_total``, ``unreadable_records_total``) and logged
(file, offset, what failed). The original of a readable one is in the delay topic at
its origin, while the topic keeps it. A damaged record met by a roll (its delay was
longer than the wheel's window) is quarantined the same way at that moment.
"""

from __future__ import annotations

import logging
import mmap
import struct
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from delaybridge.errors import IntegrityError
from delaybridge.timerlog import commit_record
from delaybridge.timerlog.commit_log import CommitLog
from delaybridge.timerlog.records import DamagedRecord, Headers, TimerRecord
from delaybridge.timerlog.stats import StoreCounters

log = logging.getLogger(__name__)
QUARANTINE_HEADER = "delaybridge-store-corrupt"
"""The last header of a :class:`DamagedRecord`: what is wrong, for the dead letter."""
_LOGGED = 100  # damaged records logged one by one, then only counted


class Quarantine:
    """Reads records that failed their check one by one; counts and logs the damage."""

    def __init__(self, commit_log: CommitLog, counters: StoreCounters) -> None:
        self.commit_log = commit_log
        self.counters = counters

    def read(
        self, cl: npt.NDArray[np.int64], ticks: Sequence[int], ordinals: Sequence[int]
    ) -> tuple[list[TimerRecord], list[int], list[int]]:
        """The records at ``cl`` (ticks and ordinals alongside): sound ones as they are,
        damaged ones as :class:`DamagedRecord`, unreadable ones left out (with their tick
        and ordinal)."""
        recs: list[TimerRecord] = []
        kept_ticks: list[int] = []
        kept_ords: list[int] = []
        for pos, tick, ordinal in zip(cl.tolist(), ticks, ordinals, strict=True):
            rec = self.one(pos, tick)
            if rec is not None:
                recs.append(rec)
                kept_ticks.append(tick)
                kept_ords.append(ordinal)
        return recs, kept_ticks, kept_ords

    def one(self, pos: int, tick_ms: int) -> TimerRecord | None:
        """The record at log position ``pos``, read at ``tick_ms``: sound, damaged or
        None (unreadable)."""
        try:
            return self.commit_log.read(pos)
        except IntegrityError as exc:
            return self.damaged(pos, tick_ms, str(exc))

    def damaged(self, pos: int, tick_ms: int, why: str) -> DamagedRecord | None:
        """Salvage the record at ``pos`` that failed its check (``why``)."""
        seg, off = self.commit_log.log.locate(pos)
        i = self.commit_log.log.segments.index(seg)
        limit = off + self.commit_log.log.segment_end(i) - pos
        self.counters.corrupt_records_total += 1
        rec = salvage(seg.map(), off, limit, seg.path, tick_ms, why)
        if rec is None:
            self.counters.unreadable_records_total += 1
        if self.counters.corrupt_records_total <= _LOGGED:
            log.error(
                "%s; %s",
                why,
                "unreadable: skipped"
                if rec is None
                else f"quarantined: {rec.id!r} from source offset {rec.source_offset} "
                "goes to the dead-letter topic (store-corrupt)",
            )
        return rec


def salvage(
    buf: bytes | mmap.mmap, off: int, limit: int, path: Path, tick_ms: int, why: str
) -> DamagedRecord | None:
    """What can be read of the record at ``off`` without trusting its CRC, or None.

    Every length must stay inside the record (its length field, if that is sane, else
    the segment's data end ``limit``), the id and the topic must be UTF-8; the headers
    are kept if they parse too. The value is dropped.
    """
    if off + commit_record.MIN_SIZE > limit:
        return None
    length = commit_record.record_length(buf, off)
    end = off + length if commit_record.MIN_SIZE <= length <= limit - off else limit
    body = bytes(buf[off + commit_record.PREFIX.size : end])
    try:
        compact = body[0] == commit_record.RecordType.COMPACT
        if compact:
            (
                _,
                flags,
                id_len,
                topic_len,
                n_headers,
                key_len,
                _partition,
                delay,
                due,
                source_offset,
            ) = commit_record.COMPACT.unpack_from(body)
            source_ts = due - delay
            key_len = -1 if flags & commit_record.NULL_KEY else key_len
            value_len = 0  # the rest of the record, after the headers
            o = commit_record.COMPACT.size
        else:
            (
                _,
                id_len,
                topic_len,
                n_headers,
                _due,
                source_offset,
                source_ts,
                _partition,
                key_len,
                value_len,
            ) = commit_record.WIDE.unpack_from(body)
            o = commit_record.WIDE.size
        if o + id_len + topic_len > len(body) or id_len == 0 or source_offset < 0:
            return None
        rid = body[o : o + id_len].decode()
        topic = body[o + id_len : o + id_len + topic_len].decode()
    except (struct.error, UnicodeDecodeError):
        return None
    o += id_len + topic_len
    key = None
    if 0 <= key_len <= len(body) - o:
        key = body[o : o + key_len]
    headers: Headers = ()
    if key_len >= -1 and value_len >= -1:
        try:
            headers = _headers(body, o + max(key_len, 0) + max(value_len, 0), n_headers)
        except (struct.error, UnicodeDecodeError, ValueError):
            headers = ()
    size = "" if compact else f" ({max(value_len, 0)} bytes as recorded)"  # compact: implied
    detail = f"{why}; read without its CRC (fields may be wrong), value dropped{size}"
    headers = (*headers, (QUARANTINE_HEADER, detail.encode()))
    return DamagedRecord(rid, tick_ms, topic, -1, key, None, headers, source_offset, source_ts)


def _headers(body: bytes, o: int, n: int) -> Headers:
    """The header block at ``o``, every length checked against the record's end."""
    items: list[tuple[str, bytes | None]] = []
    for _ in range(n):
        name_len, value_len = commit_record.HEADER_ITEM.unpack_from(body, o)
        o += commit_record.HEADER_ITEM.size
        end = o + name_len + max(value_len, 0)
        if end > len(body) or value_len < -1:
            raise ValueError("a header runs past the record")
        name = body[o : o + name_len].decode()
        items.append((name, None if value_len < 0 else body[o + name_len : end]))
        o = end
    return tuple(items)
