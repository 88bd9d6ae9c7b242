"""The checkpoint: the one small file that says what the store durably holds.

Format: a 16-byte envelope, then a JSON body (orjson)::

    offset size field
     0      4   magic     b"DBCK"
     4      2   version   VERSION (2; version 1 is read: it lacks the counters of 2)
     6      2   reserved  0
     8      4   length    bytes of the JSON body
    12      4   crc       CRC-32 of the body
    16      .   body      the fields of :class:`Checkpoint`, the counters' among them

It is replaced atomically (write temp, fsync, rename, fsync dir) as the last step
of every flush, after the logs it points into were fsynced; so it always describes
data that is on disk. JSON because it is small, written a few times a second at
most, and read by people during incidents.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import orjson

from delaybridge.durable import write_atomic
from delaybridge.errors import IntegrityError
from delaybridge.timerlog.marks import NO_MARKS, StoreMarks, UnknownMark
from delaybridge.timerlog.stats import StoreCounters

MAGIC = b"DBCK"
VERSION = 2
"""2 added ``corrupt_records_total`` and ``unreadable_records_total``; a version-1
checkpoint loads (they are 0), a newer one is refused by name."""
ENVELOPE = struct.Struct(
    "<"
    "4s"  # magic
    "H"  # version
    "H"  # reserved, must be 0
    "I"  # length of the body
    "I"  # crc of the body
)
assert ENVELOPE.size == 16
FILE_NAME = "checkpoint"
_COUNTERS = tuple(f.name for f in fields(StoreCounters))


@dataclass
class Checkpoint:
    """Everything recovery needs besides the logs themselves."""

    tick_ms: int
    wheel_slots: int
    commit_end: int = 0
    """Commit-log position up to which records are flushed."""
    timer_end: int = 0
    """Timer-log index up to which entries are flushed (one entry per record)."""
    live_start: int = 0
    """Timer-log index before which nothing is pending (older segments are deletable)."""
    done_tick_ms: int = 0
    """Delivery cursor: every entry at or before (done_tick_ms, done_index) is done."""
    done_index: int = -1
    cancel_generation: int = 0
    cancel_end: int = 0
    last_source_offset: int = -1
    pending_by_topic: dict[str, int] = field(default_factory=dict)
    marks: StoreMarks = NO_MARKS
    """The owner's positions, saved with the data they describe (``timerlog/marks.py``);
    the store only keeps them."""
    counters: StoreCounters = field(default_factory=StoreCounters)
    """Saved flat: each counter is a top-level field of the JSON body."""

    def to_json(self) -> dict[str, Any]:
        """The JSON body's fields: the checkpoint's own, then each counter's."""
        out = asdict(self)
        out["marks"] = self.marks.to_json()
        out.update(out.pop("counters"))
        return out

    @staticmethod
    def from_json(body: object) -> Checkpoint:
        """Inverse of :meth:`to_json`; a counter missing from ``body`` is 0."""
        if not isinstance(body, dict):
            raise TypeError(f"expected a JSON object, found {type(body).__name__}")
        counters = StoreCounters(**{n: body.pop(n) for n in _COUNTERS if n in body})
        marks = StoreMarks.from_json(body.pop("marks", {}))
        return Checkpoint(**body, marks=marks, counters=counters)

    def save(self, directory: Path) -> None:
        body = orjson.dumps(self.to_json())
        envelope = ENVELOPE.pack(MAGIC, VERSION, 0, len(body), zlib.crc32(body))
        write_atomic(directory / FILE_NAME, envelope + body)

    @staticmethod
    def load(directory: Path) -> Checkpoint | None:
        """The checkpoint in ``directory``; None if the store was never flushed."""
        path = directory / FILE_NAME
        if not path.exists():
            return None
        raw = path.read_bytes()
        if len(raw) < ENVELOPE.size:
            raise IntegrityError(f"{path}: offset 0: checkpoint shorter than its envelope")
        magic, version, reserved, length, crc = ENVELOPE.unpack_from(raw)
        if magic != MAGIC or not 1 <= version <= VERSION or reserved != 0:
            raise IntegrityError(
                f"{path}: offset 0: not a checkpoint of version 1 to {VERSION} (magic "
                f"{magic!r}, version {version}): written by a newer build, or damaged"
            )
        body = raw[ENVELOPE.size : ENVELOPE.size + length]
        if len(body) != length or zlib.crc32(body) != crc:
            raise IntegrityError(f"{path}: offset {ENVELOPE.size}: checkpoint CRC mismatch")
        try:
            return Checkpoint.from_json(orjson.loads(body))
        except (TypeError, UnknownMark, orjson.JSONDecodeError) as exc:
            raise IntegrityError(f"{path}: offset {ENVELOPE.size}: bad checkpoint: {exc}") from exc
