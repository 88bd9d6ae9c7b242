"""When ingest pauses for want of disk space, and when it may go on: with hysteresis.

Ingest pauses when the data directory's free space falls under ``store.min_free_bytes``,
or when a write found no room (an append refused, a flush that failed: ENOSPC).
Delivery goes on and gives space back (``timerlog/reclaim.py``). Resuming the moment
the free space is back over the pause level flaps: the first batch read again fills
the disk, the next check pauses, the one after resumes -- before this module, 1,560
pauses in six minutes with ``min_free_bytes: 0``, each fetching the same 100 KB records
again. So a pause has hysteresis in space and in time:

- **space**: ingest resumes once ``min_free_bytes`` + what the refused records need +
  the *margin* is free (``store.resume_margin_bytes``, 64 MiB, but at most an eighth of
  the volume: on a small volume a fixed margin could be more than delivery ever frees);
- **time**: and once the pause has lasted :attr:`DiskPause.wait_s`. The wait starts at
  :data:`WAIT_MIN_S` and doubles, up to :data:`WAIT_MAX_S`, each time a pause starts
  within :data:`HELD_S` of the last resume (that resume did not hold: the volume cannot
  keep up with ingest); a resume that holds :data:`HELD_S` sets it back. Under sustained
  pressure ingest thus runs in fewer, larger batches -- what delivery freed during the
  wait -- and pauses at most six times a minute, never in a tight loop; the wait stays
  short because every second of it is lateness for messages that are due already;
- **tight**: a volume kept nearly full by messages due later may never free the margin;
  after :data:`TIGHT_AFTER_S`, ingest also resumes once the refused records fit over
  ``min_free_bytes``. The ingestor stores a run up to its last record that fits, so
  that is the room of one record (``bridge/ingest/ingestor.py``).

Example: a 113 MB volume, ``min_free_bytes`` 8 MiB, a 100 KB record refused with 5 MiB
free. Ingest pauses; one second later it resumes if 8 + 0.1 + 14 (an eighth of the
volume) = 22.1 MiB are free, else as soon as they are; if it pauses again within 30 s,
the next pause lasts at least 2 s, then 4, 8, 10 s. After 30 s paused it resumes once
8.1 MiB are free, whatever the margin.

Each change of state is logged once. Not thread-safe: the service's owner thread calls
it; :attr:`DiskPause.note` (a string, replaced whole) may be read from any thread.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

log = logging.getLogger(__name__)

WAIT_MIN_S = 1.0
"""The shortest a pause lasts."""
WAIT_MAX_S = 10.0
"""The longest the wait grows to."""
HELD_S = 30.0
"""A resume that lasts this long held: the wait goes back to its minimum."""
TIGHT_AFTER_S = 30.0
"""After this long paused, ingest resumes once the refused records fit, margin or not."""
MARGIN_SHARE = 8
"""The margin is at most the volume's size divided by this."""
MIB = 1 << 20


class DiskPause:
    """The disk's pause of ingest: the rules of the module docstring."""

    def __init__(
        self, min_free_bytes: int, resume_margin_bytes: int, clock_s: Callable[[], float]
    ) -> None:
        self.min_free = min_free_bytes
        self.margin = resume_margin_bytes
        self._clock_s = clock_s
        self.paused = False
        self.pauses = 0
        """Pauses since the start (the metric counts them)."""
        self.wait_s = WAIT_MIN_S
        """How long this pause lasts at least (the module docstring's time hysteresis)."""
        self._since_s = 0.0
        self._resumed_s: float | None = None
        self._needed: dict[object, int] = {}
        self._free: int | None = None
        self._total: int | None = None
        self.note = ""
        """Why ingest is paused, for an operator (``/readyz``); empty while it is not."""

    # -- what happened ---------------------------------------------------------------
    def refused(self, who: object, needed_bytes: int) -> bool:
        """A write of ``needed_bytes`` for ``who`` (a partition; a flush needs no more
        than what is there) found no room. True when this starts a pause."""
        if needed_bytes:
            self._needed[who] = needed_bytes
        return self._pause("a write found no room")

    def check(self, free_bytes: int, total_bytes: int | None = None) -> bool | None:
        """The free space now (every checkpoint). True: this started a pause; False:
        this ended one; None: no change."""
        self._free, self._total = free_bytes, total_bytes
        if not self.paused:
            if free_bytes < self.min_free:
                return self._pause("free space under store.min_free_bytes")
            return None
        now = self._clock_s()
        lasted = now - self._since_s
        if (lasted >= self.wait_s and free_bytes >= self.resume_level()) or (
            lasted >= TIGHT_AFTER_S and free_bytes >= self.tight_level()
        ):
            self._resume(now)
            return False
        self.note = self._describe("ingest paused")
        return None

    # -- levels ----------------------------------------------------------------------
    @property
    def needed(self) -> int:
        """What the refused appends of this pause need (they are read again)."""
        return sum(self._needed.values())

    @property
    def short(self) -> bool:
        """Paused, or with less free space than the resume level: the stores then give
        back what they finish at every flush (``TimerStore.space_short``)."""
        return self.paused or (self._free is not None and self._free < self.resume_level())

    def tight_level(self) -> int:
        """Free bytes at which the refused records fit over ``min_free_bytes``."""
        return self.min_free + self.needed

    def resume_level(self) -> int:
        """Free bytes at which ingest resumes once the wait is over: the tight level
        plus the margin."""
        margin = self.margin
        if self._total is not None:
            margin = min(margin, self._total // MARGIN_SHARE)
        return self.tight_level() + margin

    # -- transitions -----------------------------------------------------------------
    def _pause(self, why: str) -> bool:
        if self.paused:
            return False
        now = self._clock_s()
        resumed = self._resumed_s
        if resumed is not None and now - resumed < HELD_S:
            self.wait_s = min(self.wait_s * 2, WAIT_MAX_S)
        else:
            self.wait_s = WAIT_MIN_S
        self.paused = True
        self.pauses += 1
        self._since_s = now
        self.note = self._describe("ingest paused")
        log.warning("flow control: %s (%s); delivery goes on and frees space", self.note, why)
        return True

    def _resume(self, now: float) -> None:
        took = now - self._since_s
        self.paused = False
        self._needed.clear()
        self._resumed_s = now
        self.note = ""
        free = "?" if self._free is None else f"{self._free / MIB:.1f} MiB"
        log.info(
            "flow control: disk space is back (%s free); ingest resumes after %.1f s", free, took
        )

    def _describe(self, what: str) -> str:
        free = "" if self._free is None else f"{self._free / MIB:.1f} MiB free, "
        return (
            f"{what}: the data volume is short of space ({free}"
            f"store.min_free_bytes {self.min_free / MIB:.1f} MiB); resumes after "
            f"{self.wait_s:.0f} s at {self.resume_level() / MIB:.1f} MiB free, or after "
            f"{TIGHT_AFTER_S:.0f} s at {self.tight_level() / MIB:.1f} MiB"
        )
