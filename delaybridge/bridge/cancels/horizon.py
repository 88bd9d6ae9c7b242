"""The cancel horizon: how far delivery may go without overtaking a cancel (DESIGN §2).

A cancel takes effect only once it has travelled: read from the delay-topic partition it
landed in by that partition's owner, re-published to the cancel topic, read back by the
feed of the sidecar whose store holds the message (``ledger.py``). While the owner of the
cancel's partition is down, restarting or moving, the cancel waits unread, and the
message's owner would deliver the message it cancels. The rule that closes this gap:

    **A message due at T goes out only once every delay-topic partition's cancels
    appended up to T are known to its store** — or once the horizon has held it back
    for ``cancel_horizon.bound_ms``: then it goes out anyway, counted
    (``delaybridge_deliveries_past_horizon_total``) and alerted on.

The horizon holds a message back from T on, or from this process's start if it was due
before: a message overdue when its owner starts again waits for that owner to read the
backlog of its own partition (and the cancels in it), however long the owner was away.

Each delay-topic partition P has a **horizon** h(P): a moment such that every record
appended to P before it has been read and every cancel (or replace) among them is known
to the stores of this process. The horizon of the whole topic set is the minimum over its
partitions, H; delivery may hand out what is due up to ``limit_ms`` = min(now,
max(H, now - bound)), the floor now - bound applying once this process has run for
the bound. Where h(P) comes from:

- **owned here** (``own_horizons.py``): a ListOffsets request issued at t0 showed P's
  end (read_committed) at or before where P is read (by ingest, or by the cancel scout
  while ingest waits), and every cancel read was applied to this process's stores as it
  was read: h(P) = t0;
- **owned elsewhere**: its owner publishes its own h(P) to the compacted horizon topic,
  with the end of its cancels on each cancel-topic partition; the feed takes it once it
  has read the cancel topic that far (so the cancels it vouches for are known here).

A partition never seen on the horizon topic (an owner of an older build, during an
upgrade) is not counted until it is; one seen once is counted from then on, so an owner
that dies holds the horizon back until its partitions have a new owner, or the bound.
An ingest pause stops a partition's horizon like a dead owner does: the pause counts
toward the bound, and the lag is a metric.

Not thread-safe: the service's owner thread calls it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

log = logging.getLogger(__name__)
PartKey = tuple[str, int]
#: An owner's word that it has something due soon counts this long after it was read:
#: an owner that died, or stopped publishing, no longer keeps the others' checks at the
#: interval (``own_horizons.py``, checks on demand).
DEMAND_STALE_MS = 5_000


@dataclass(frozen=True, slots=True)
class RemoteHorizon:
    """An owner's word on its partition: h(P), and where its cancels end on the cancel
    topic (partition -> offset past the last one it wrote)."""

    horizon_ms: int
    cancel_ends: Mapping[int, int]


class CancelHorizon:
    """The horizon of every delay-topic partition, and what may be delivered."""

    def __init__(self, bound_ms: int, feed_position: Callable[[int], int]) -> None:
        """``bound_ms``: how far behind now the horizon may hold delivery back (0: the
        rule is off); ``feed_position(c)``: the next offset the feed reads on cancel-topic
        partition ``c``."""
        self.bound_ms = bound_ms
        self._feed_position = feed_position
        self._local: dict[PartKey, int] = {}
        self._remote: dict[PartKey, int] = {}
        self._waiting: dict[PartKey, list[RemoteHorizon]] = {}
        self._counted: set[PartKey] = set()
        self._existing: set[PartKey] | None = None
        self._held_back = False
        self._limit_ms = -(2**62)
        self._started_ms: int | None = None
        """When the first limit was asked: nothing was held back before."""
        self._busy: dict[bytes, int] = {}
        """Owners whose last word said they have something due soon: when it was read."""
        self.explain: Callable[[PartKey], str] = lambda key: ""
        """What a partition owned here waits for (``own_horizons.py`` sets it): said in
        the line that reports delivery going past the horizon."""

    @property
    def enabled(self) -> bool:
        return self.bound_ms > 0

    def existing(self, partitions: set[PartKey]) -> None:
        """The delay topics' partitions as the metadata lists them now: a partition
        counted once stops counting when its topic is gone."""
        self._existing = partitions

    def _counting(self) -> set[PartKey]:
        if self._existing is None:
            return self._counted
        return self._counted & self._existing

    def horizon_ms(self) -> int | None:
        """H: the lowest horizon of the partitions counted; None when none is."""
        lowest: int | None = None
        for key in self._counting():
            h = max(self._local.get(key, -1), self._remote.get(key, -1))
            if lowest is None or h < lowest:
                lowest = h
        return lowest

    def limit_ms(self, now_ms: int) -> int:
        """Up to when due messages may go out now (see the module docstring). Never
        lower than a limit given before: what was allowed may have been handed out
        (a partition counted for the first time cannot take that back)."""
        if not self.enabled:
            return now_ms
        if self._started_ms is None:
            self._started_ms = now_ms
        h = self.horizon_ms()
        floor = now_ms - self.bound_ms
        if now_ms - self._started_ms < self.bound_ms:
            floor = -(2**62)  # what was due before the start has not been held long
        limit = now_ms if h is None or h >= now_ms else max(h, floor)
        self._note(h is not None and h < floor, now_ms, h)
        self._limit_ms = max(self._limit_ms, min(limit, now_ms))
        return self._limit_ms

    def _note(self, past: bool, now_ms: int, h: int | None) -> None:
        """Log once when delivery starts, and stops, going past the horizon (the bound)."""
        if past != self._held_back:
            self._held_back = past
            if past:
                log.warning(
                    "cancel horizon %d ms behind now, beyond cancel_horizon.bound_ms (%d): "
                    "delivering anyway; partitions holding it back: %s",
                    now_ms - (h or 0),
                    self.bound_ms,
                    "; ".join(self._held_by(now_ms - self.bound_ms)),
                )
            else:
                log.info("cancel horizon back within cancel_horizon.bound_ms")

    def _held_by(self, than_ms: int) -> list[str]:
        out = []
        for t, p in self.behind(than_ms):
            why = self.explain((t, p))
            out.append(f"{t}/{p} ({why})" if why else f"{t}/{p}")
        return out

    def behind(self, than_ms: int) -> list[PartKey]:
        """The counted partitions whose horizon is before ``than_ms``."""
        return sorted(
            key
            for key in self._counting()
            if max(self._local.get(key, -1), self._remote.get(key, -1)) < than_ms
        )

    def owned(self, keys: Iterable[PartKey]) -> None:
        """These partitions are owned here: counted from now on, their horizon unknown
        (holding delivery back) until they are read through (a partition's own backlog
        is read before its overdue messages go out)."""
        self._counted.update(keys)

    def local(self, key: PartKey, horizon_ms: int) -> None:
        """``key`` is owned here and read, its cancels known, up to ``horizon_ms``."""
        if horizon_ms > self._local.get(key, -1):
            self._local[key] = horizon_ms
        self._counted.add(key)

    def released(self, keys: Iterable[PartKey]) -> None:
        """These partitions are no longer owned here: their word comes from the next
        owner (or, until it speaks, from what this process last published)."""
        for key in keys:
            h = self._local.pop(key, None)
            if h is not None and h > self._remote.get(key, -1):
                self._remote[key] = h

    def remote(self, key: PartKey, word: RemoteHorizon) -> None:
        """An owner's word read from the horizon topic: counted at once, taken once the
        feed has read the cancels it vouches for."""
        self._counted.add(key)
        if self._known(word):
            self._take(key, word.horizon_ms)
        else:
            self._waiting.setdefault(key, []).append(word)

    def demand(self, owner: bytes, busy: bool, now_ms: int) -> None:
        """``owner``'s word, read at ``now_ms``, says whether it has something due soon
        (its deliveries then wait for every owner's horizon)."""
        if busy:
            self._busy[owner] = now_ms
        else:
            self._busy.pop(owner, None)

    def others_busy(self, now_ms: int, me: bytes) -> bool:
        """Does an owner other than ``me`` say, in a word read in the last
        :data:`DEMAND_STALE_MS`, that it has something due soon?"""
        for owner, read_ms in list(self._busy.items()):
            if now_ms - read_ms >= DEMAND_STALE_MS:
                del self._busy[owner]
            elif owner != me:
                return True
        return False

    def recheck(self) -> None:
        """After the feed read more of the cancel topic: take the words it now covers."""
        for key, words in list(self._waiting.items()):
            kept = []
            for word in words:
                if self._known(word):
                    self._take(key, word.horizon_ms)
                else:
                    kept.append(word)
            if kept:
                self._waiting[key] = kept
            else:
                del self._waiting[key]

    def wanted_cancel_ends(self) -> dict[int, int]:
        """Per cancel-topic partition, the furthest end a waiting word needs the feed to
        have read (``feed_watch.py``)."""
        wanted: dict[int, int] = {}
        for words in self._waiting.values():
            for word in words:
                for c, e in word.cancel_ends.items():
                    wanted[c] = max(wanted.get(c, e), e)
        return wanted

    def _known(self, word: RemoteHorizon) -> bool:
        return all(self._feed_position(c) >= end for c, end in word.cancel_ends.items())

    def _take(self, key: PartKey, horizon_ms: int) -> None:
        if horizon_ms > self._remote.get(key, -1):
            self._remote[key] = horizon_ms

    def lag_ms(self, now_ms: int) -> int:
        """How far the horizon is behind now (0: nothing holds delivery back)."""
        h = self.horizon_ms()
        return 0 if h is None else max(0, now_ms - h)
