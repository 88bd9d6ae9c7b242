"""The commit-record codec this process runs: the compiled build, or the source itself.

The format and its codec are :mod:`commit_record`. Its per-batch functions are the store's
hot path, so ``scripts/bootstrap`` compiles that module with mypyc; this module picks,
once per process, which of the two to run (``delaybridge/hotpath.py``: the compiled
copy only if it was built from ``commit_record.py`` exactly, else the source, with a
warning when a stale build is found). Call :func:`encode_batch`, :func:`decode_many`,
:func:`decode` and :func:`index_encoded` from here; ``commit_record``'s layout and its
one-record helpers (``check``, ``due_of``, ...) are used directly.
"""

from __future__ import annotations

import mmap
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from delaybridge import hotpath
from delaybridge.timerlog import commit_record
from delaybridge.timerlog.records import EncodedBatch, TimerRecord

__all__ = ["decode", "decode_many", "encode_batch", "index_encoded"]

#: The codec in use: ``commit_record`` compiled when a matching build is installed,
#: else the module itself (``delaybridge/hotpath.py``). Tests swap it to run both.
_core: ModuleType = hotpath.select(commit_record)


def encode_batch(records: Sequence[TimerRecord], compact: bool = True) -> EncodedBatch:
    """:func:`commit_record.encode_batch`: compact layout where a record fits it (unless
    ``compact`` is false), wide otherwise; InvalidRecord names a record neither holds."""
    batch: EncodedBatch = _core.encode_batch(records, compact)
    return batch


def decode_many(
    maps: Sequence[bytes | mmap.mmap],
    paths: Sequence[Path],
    segs: Sequence[int],
    offsets: Sequence[int],
) -> list[TimerRecord]:
    """:func:`commit_record.decode_many`: the checked, decoded records at
    ``maps[segs[i]][offsets[i]]``, in that order; IntegrityError names file and offset."""
    out: list[TimerRecord] = _core.decode_many(maps, paths, segs, offsets)
    return out


def decode(buf: bytes | mmap.mmap, offset: int, path: Path) -> TimerRecord:
    """Check and decode the one record at ``offset`` of ``buf``."""
    return decode_many((buf,), (path,), (0,), (offset,))[0]


def index_encoded(raws: Sequence[bytes], where: str, skip: int = 0) -> EncodedBatch:
    """:func:`commit_record.index_encoded`: records that arrive encoded (each ``skip``
    bytes into its buffer), indexed for an append without being decoded."""
    batch: EncodedBatch = _core.index_encoded(raws, where, skip)
    return batch
