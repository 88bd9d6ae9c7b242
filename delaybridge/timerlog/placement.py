"""Where an entry goes in the wheel: its due tick, or a roll slot if that is too far.

Rules (ticks in ms, ``W = tick_ms * wheel_slots``):

1. A message due at ``due_ms`` belongs to tick ``u = ceil(due_ms / tick) * tick``:
   rounding *up* is what makes delivery never early (a tick is read only once the
   clock has reached it).
2. Due times at or before the read tick go to the tick after it, at the end of
   its list: due at once (at most one tick later), after what is already due. So
   the list of the tick being read never changes once reading has begun.
3. The wheel may hold ticks ``(read_tick, floor + W)`` where ``floor`` is the
   delivery cursor's tick (older, in-flight ticks still own their slots). The
   reader never runs more than half a window ahead of ``floor``, so this is never
   empty.
4. A tick beyond that is *rolled*: a ROLL entry goes to tick
   ``max(read_tick + tick, min(u - W + tick, floor + W - tick))`` -- the tick when ``u``
   will have just entered the window, or the far edge of the window if ``u`` is
   even further. Reaching a ROLL entry copies the message forward (commit log and
   timer log) and places it again by these same rules.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from delaybridge.timerlog.timer_entry import EntryType

I64 = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]


def place(
    due_ms: I64,
    *,
    read_tick_ms: int,
    floor_tick_ms: int,
    tick_ms: int,
    window_ms: int,
    kind: EntryType,
) -> tuple[I64, U64]:
    """(slot time, entry type) per due time; ``kind`` is used where no roll is needed."""
    u = -(-due_ms // tick_ms) * tick_ms
    np.maximum(u, read_tick_ms + tick_ms, out=u)
    last_ok = floor_tick_ms + window_ms - tick_ms
    roll = u > last_ok
    if not roll.any():
        return u, np.full(len(u), int(kind), dtype=np.uint64)
    target = np.maximum(np.minimum(u - window_ms + tick_ms, last_ok), read_tick_ms + tick_ms)
    slot = np.where(roll, target, u)
    kinds = np.where(roll, np.uint64(EntryType.ROLL), np.uint64(kind)).astype(np.uint64)
    return slot, kinds
