"""One pass of the reader over window entries: what to deliver, skip and roll.

The reader (:mod:`reader`) takes the common case -- every entry of the pass is a
message to deliver -- without looking at entries one by one. When a pass holds a
cancelled entry, a ROLL entry or a tick past the half-window limit, :func:`sort_out`
walks it entry by entry and says what to do; it changes nothing itself, so the reader
can apply the outcome only once the rolls it asks for are written (a full disk leaves
the reader where it was, see :meth:`Reader.take_due`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from delaybridge.timerlog.timer_entry import EntryType

ROLL = int(EntryType.ROLL)


class Rolls(NamedTuple):
    """ROLL entries of one tick gathered by a pass: copy their messages forward."""

    indexes: list[int]
    cl_positions: list[int]
    tick_ms: int
    last_ordinal: int
    """Ordinal of the last of them in its tick: the delivery cursor once they are copied."""


class Pass(NamedTuple):
    take: list[int]
    """Offsets in the pass of the messages to deliver."""
    consumed: int
    """Entries of the pass read (delivered, skipped or rolled)."""
    skipped: list[int]
    """Timer-log indexes of cancelled entries passed over."""
    rolls: Rolls | None


def sort_out(
    cls: npt.NDArray[np.int64],
    idx: list[int],
    ticks: list[int],
    ords: list[int],
    kinds: npt.NDArray[np.int8],
    applied: dict[int, int],
    tick_limit: int,
    busy: bool,
) -> Pass:
    """Walk the entries of one pass one by one: skip cancelled ones, gather rolls.

    Stops before a ROLL while anything is in flight (``busy``) or taken, before the
    tick after a gathered roll, and past ``tick_limit`` (half a window ahead of the
    delivery cursor) while busy.
    """
    has_rolls = bool((kinds == ROLL).any())
    take: list[int] = []
    skipped: list[int] = []
    roll_idx: list[int] = []
    roll_cl: list[int] = []
    roll_tick = roll_ord = 0
    q, end = 0, len(idx)
    while q < end:
        k = idx[q]
        if roll_idx and ticks[q] != roll_tick:
            break  # flush rolls before reading the next tick (they may land there)
        if ticks[q] > tick_limit and (busy or take):
            break  # keep room in the wheel while messages are in flight
        if k in applied:
            skipped.append(k)
        elif has_rolls and kinds[q] == ROLL:
            if busy or take:
                break
            roll_idx.append(k)
            roll_cl.append(int(cls[q]))
            roll_tick, roll_ord = ticks[q], ords[q]
        else:
            take.append(q)
        q += 1
    rolls = Rolls(roll_idx, roll_cl, roll_tick, roll_ord) if roll_idx else None
    return Pass(take, q, skipped, rolls)
