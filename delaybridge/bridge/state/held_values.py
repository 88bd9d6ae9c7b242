"""Changelog values held back until they are old enough to be written, or never needed.

The changelog (``bridge/state/changelog.py``) writes a stored message's value behind: it waits
here, keyed by its changelog key, with the time it was stored, until it is old enough
to be written (rule 2) or its message leaves the store first (then it is dropped, and
neither a value nor a tombstone is ever written). What waits is the record's position
in the store's commit log, not its bytes (~190 bytes a value instead of ~420): the
record is read back when written, which it can be because it is still pending, and a
pending record's commit-log segment is never deleted. Each value carries the
:class:`~delaybridge.bridge.commit.holds.Hold` of its run, which keeps the run's first
delay-topic offset back from the group commit until every message of the run is safe
(rule 1).

Per partition the values are kept in the order they were stored (a dict keeps
insertion order), so "everything stored by time T" is a prefix. Not thread-safe: the
service's owner thread calls it.
"""

from __future__ import annotations

from collections.abc import Sequence

from delaybridge.bridge.commit.holds import Hold
from delaybridge.bridge.partition.state import PartKey


class HeldValues:
    """Values waiting to be written, per partition, oldest first; ``limit`` in all."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._by_part: dict[PartKey, dict[bytes, tuple[int, Hold, int]]] = {}
        self._count = 0
        self._low: dict[PartKey, bytes] = {}
        """At most the lowest offset (a key's first 8 bytes) held per partition."""
        self._sent: dict[PartKey, dict[bytes, int]] = {}
        """Values written and not acknowledged yet: key -> commit-log position."""

    def __bool__(self) -> bool:
        return self._count > 0

    def __len__(self) -> int:
        return self._count

    def hold(
        self, part: PartKey, keys: list[bytes], positions: Sequence[int], hold: Hold, now_ms: int
    ) -> bool:
        """Hold these values (their records' commit-log positions, stored at
        ``now_ms``); True when more than the limit are held in all (the caller writes
        the partition's out)."""
        held = self._by_part.setdefault(part, {})
        low = min(keys)[:8]
        was = self._low.get(part)
        self._low[part] = low if was is None or low < was else was
        before = len(held)
        for key, position in zip(keys, positions, strict=True):
            held[key] = (position, hold, now_ms)
        self._count += len(held) - before
        return self._count > self._limit

    def take(
        self, part: PartKey, stored_by_ms: int | None = None, most: int | None = None
    ) -> list[tuple[bytes, int, Hold]]:
        """Remove and return ``part``'s values (key, position, hold), oldest first: all of
        them, or those stored by ``stored_by_ms``, at most ``most``."""
        held = self._by_part.get(part)
        if not held:
            return []
        if stored_by_ms is None and most is None:
            del self._by_part[part]
            self._low.pop(part, None)
            out = [(key, position, hold) for key, (position, hold, _) in held.items()]
        else:
            out = []
            for key, (position, hold, at_ms) in held.items():
                if (stored_by_ms is not None and at_ms > stored_by_ms) or len(out) == most:
                    break
                out.append((key, position, hold))
            for key, _, _ in out:
                del held[key]
        self._count -= len(out)
        return out

    def held(self, part: PartKey) -> int:
        return len(self._by_part.get(part, ()))

    def drop(self, part: PartKey, key: bytes) -> Hold | None:
        """Forget one held value (its message left the store); its hold, or None if it
        was not held."""
        held = self._by_part.get(part)
        found = held.pop(key, None) if held is not None else None
        if found is None:
            return None
        self._count -= 1
        return found[1]

    def take_through(self, part: PartKey, offset: int) -> list[tuple[bytes, int, Hold]]:
        """Remove and return ``part``'s values of delay-topic offsets up to ``offset``
        (keys start with the offset, big-endian, so their first 8 bytes compare as the
        offsets do). A pass over the partition's held values only when its lowest held
        offset may be at or below ``offset`` (a series' first occurrence; not a spawn
        of an older series, whose offset is below everything held)."""
        held = self._by_part.get(part)
        upto = offset.to_bytes(8, "big")
        if not held or upto < self._low.get(part, b""):
            return []
        out, low = [], None
        for key, (pos, hold, _) in held.items():
            if (prefix := key[:8]) <= upto:
                out.append((key, pos, hold))
            elif low is None or prefix < low:
                low = prefix
        for key, _, _ in out:
            del held[key]
        self._count -= len(out)
        if low is None:
            self._low.pop(part, None)
        else:
            self._low[part] = low
        return out

    def forget(self, part: PartKey) -> None:
        """Drop a partition's values unwritten (it moved away: the next owner re-reads)."""
        self._count -= len(self._by_part.pop(part, {}))
        self._sent.pop(part, None)
        self._low.pop(part, None)

    def unacked_of(self, part: PartKey) -> dict[bytes, int]:
        """``part``'s values written and not acknowledged yet, key -> commit-log
        position: the writer adds one as it writes it and removes it at its ack."""
        return self._sent.setdefault(part, {})

    def unacked_from(self, part: PartKey) -> int | None:
        """The lowest commit-log position of a value of ``part`` that Kafka has not
        acknowledged (held back, or written and unacknowledged); None if there is none.
        The store's checkpoint keeps it, so a restart after a crash writes from there
        again (``bridge/state/seeding.py``: ``reseed``)."""
        lows = []
        if sent := self._sent.get(part):
            lows.append(min(sent.values()))
        if held := self._by_part.get(part):
            lows.append(next(iter(held.values()))[0])  # held in store order: the oldest
        return min(lows) if lows else None
