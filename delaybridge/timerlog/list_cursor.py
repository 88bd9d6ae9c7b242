"""Positions in the pending listing, the opaque cursor that carries one, and the merge.

The listing (:mod:`listing`) orders every pending message of every store by a
:class:`Position`: ``(part, tick_ms, store, index)``.

* ``part`` -- :attr:`Part.WINDOW` for messages the wheel holds at their due tick (all
  due within one window), then :attr:`Part.ROLLED` for messages due beyond the window,
  which sit as ROLL entries at the tick they re-enter it (see :mod:`placement`);
* ``tick_ms`` -- the wheel tick the entry sits in (the due tick, for the window part);
* ``store`` -- the store's name (``<delay-topic>-<partition>``: unique in a cluster);
* ``index`` -- the entry's timer-log index (its arrival order in the store).

Because store names are unique across replicas, one position orders the messages of a
whole cluster, so pages from several stores (a replica) or several replicas (the CLI)
merge with the same rule (:func:`merge`): each source says how far it has looked
(``next``), the merged page keeps what lies before the nearest of those, and its own
``next`` is where the next page starts. A cursor is that position plus, per store, the
bound of its rolled part (see :mod:`listing`) and a fingerprint of the filters, encoded
as URL-safe base64 of a small JSON array: opaque to clients, stable across replicas.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Generic, NamedTuple, TypeVar

import orjson

from delaybridge.errors import DelayBridgeError

T = TypeVar("T")
MAX_STORE = "\U0010ffff"
"""Sorts after every store name: a position at the end of a tick."""
MAX_INDEX = (1 << 62) - 1


class Part(IntEnum):
    """The two parts of the listing, in order, and its end."""

    WINDOW = 0
    ROLLED = 1
    END = 2


class Position(NamedTuple):
    """A point in listing order; a cursor resumes *after* it."""

    part: int
    tick_ms: int
    store: str
    index: int  # type: ignore[assignment]  # shadows tuple.index on purpose

    @classmethod
    def before_tick(cls, part: Part, tick_ms: int) -> Position:
        return cls(int(part), tick_ms, "", -1)

    @classmethod
    def end_of_tick(cls, part: Part, tick_ms: int) -> Position:
        return cls(int(part), tick_ms, MAX_STORE, MAX_INDEX)


START = Position.before_tick(Part.WINDOW, -(1 << 62))
END = Position.before_tick(Part.END, 0)


class BadCursor(DelayBridgeError):
    """A cursor that is not one this listing made, or made for other filters."""


@dataclass
class Cursor:
    """Where a listing resumes: after ``after``; ``roll_bounds`` per store (see listing)."""

    after: Position = START
    roll_bounds: dict[str, int] = field(default_factory=dict)
    filters: str = ""
    """Fingerprint of the filters it was made with (:func:`fingerprint`)."""

    def encode(self) -> str:
        doc = [1, list(self.after), self.roll_bounds, self.filters]
        return base64.urlsafe_b64encode(orjson.dumps(doc)).decode().rstrip("=")

    @classmethod
    def decode(cls, text: str, filters: str) -> Cursor:
        """The cursor in ``text``; BadCursor if malformed or made for other ``filters``."""
        try:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
            version, after, bounds, made_for = orjson.loads(raw)
            part, tick, store, index = after
            pos = Position(int(part), int(tick), str(store), int(index))
            roll_bounds = {str(k): int(v) for k, v in dict(bounds).items()}
        except (ValueError, TypeError, binascii.Error, orjson.JSONDecodeError) as exc:
            raise BadCursor(f"cursor {text[:40]!r} is not one this listing returned") from exc
        if version != 1 or pos.part not in tuple(Part):
            raise BadCursor(f"cursor {text[:40]!r} is not one this listing returned")
        if made_for != filters:
            raise BadCursor("the cursor was made with other filters: repeat the same filters")
        return cls(pos, roll_bounds, filters)


def fingerprint(*filters: object) -> str:
    """A short digest of the filter values, stored in cursors to catch a changed query."""
    return hashlib.blake2s(repr(filters).encode(), digest_size=6).hexdigest()


class SourcePage(NamedTuple, Generic[T]):
    """One source's answer: its items in order, and how far it looked."""

    items: Sequence[tuple[Position, T]]
    next: Position
    """Everything up to here was examined; the source holds nothing more before it."""


class Merged(NamedTuple, Generic[T]):
    items: list[tuple[Position, T]]
    next: Position
    """Where the next page starts (:data:`END`: the listing is complete)."""


def merge(pages: Sequence[SourcePage[T]], limit: int) -> Merged[T]:
    """Merge pages of disjoint sources: the first ``limit`` items before the nearest
    ``next`` of any source (beyond it, a source that stopped early may hold more)."""
    cut = min((p.next for p in pages), default=END)
    items = sorted((it for p in pages for it in p.items if it[0] <= cut), key=_position)
    if len(items) > limit:
        items = items[:limit]
        return Merged(items, items[-1][0])
    return Merged(items, cut)


def _position(item: tuple[Position, object]) -> Position:
    return item[0]
