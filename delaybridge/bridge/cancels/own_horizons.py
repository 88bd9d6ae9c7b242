"""The horizons of the partitions this process owns: verified here, published for the others.

For an owned delay-topic partition P, the horizon h(P) (``horizon.py``) is established in
two steps:

1. **a check** every ``cancel_horizon.interval_ms``: a ListOffsets request for the end
   of every owned partition (read_committed: what a transaction has not committed is
   not appended yet), issued at t0. The broker answers with ends as of a moment after
   t0, so every record appended to P before t0 is below P's answer E(P);
2. **read through**: once P is read at E(P) or past it — by ingest's consumer (ingest
   handles what ``consume`` returns in the same turn) or, while ingest waits, by the
   cancel scout (``bridge/ingest/scout.py``) — everything appended before t0 has been
   read, and the cancels among it were applied to this process's stores as they were
   read: here, h(P) = t0. Under steady traffic P's end has moved on by the time the
   answer arrives, so an answer not read through yet is kept (the last
   :data:`UNREAD_KEPT`) and judged again each turn as the reading goes on, instead of
   waiting for a later check to find the consumer exactly at its end. A partition new
   to this process (assigned, or this process new) was read before by someone else,
   whose cancels reach this process through the cancel topic: its first check also asks
   for the cancel topic's end, and its first horizon waits until this process's feed has
   read that far.

For the other processes, the word is published to the horizon topic (compacted, one
record per owner) once the cancels it covers are on the cancel topic: h(P) = t0 when
every cancel P's records below E(P) produced is acknowledged, otherwise the send time of
the earliest one that is not (everything sent before it is there; a cancel applies to
messages due after it was sent). With it go, for each cancel-topic partition, the offset
past the last cancel this owner wrote there: another process's feed takes the word once
it has read that far.

Not thread-safe: the service's owner thread calls it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
from confluent_kafka import KafkaError as RdKafkaError
from confluent_kafka import Message

from delaybridge.bridge.cancels.horizon import CancelHorizon, PartKey, RemoteHorizon
from delaybridge.bridge.produce.outbox import Outbox
from delaybridge.connectors.edge import AdminEdge
from delaybridge.connectors.end_offsets import EndOffsets

log = logging.getLogger(__name__)
#: The header that marks a record of the horizon topic (the value says what it is).
HORIZON_HEADER = "delaybridge-horizon"
#: A check unanswered this long is given up and asked again: an answer from a broker that
#: was away, or a request lost with its connection, must not stop the horizon for good.
CHECK_TIMEOUT_MS = 5_000
#: How long after a check is issued its answer, and the reading through it, are looked
#: for at every turn (the loop turns within a millisecond meanwhile, see
#: :meth:`OwnHorizons.answer_expected`): an answer comes back in a round trip (~1 ms on a
#: local network), and past this window it is late (a broker away, or loaded), not
#: spun for.
ANSWER_WAIT_MS = 20
#: Answers kept per partition while its reading has not reached their ends (step 2); a
#: newer one replaces the newest kept when full.
UNREAD_KEPT = 4
#: Checks on demand: an owner checks at ``cancel_horizon.interval_ms`` only while a
#: message is due within IDLE_LEAD_MS in one of its stores, or another owner's fresh
#: word says it has one (``CancelHorizon.others_busy``); otherwise at most every
#: IDLE_INTERVAL_MS. Its word says which (``busy``), and it publishes one at once when it
#: becomes busy, so the others speed up before its messages fall due.
IDLE_INTERVAL_MS = 1_000
IDLE_LEAD_MS = 1_000


@dataclass(eq=False, slots=True)
class _Written:
    """A cancel on its way: when it was sent, and where the cancel topic put it."""

    sent_ms: int
    at: tuple[int, int] | None = None
    """(cancel-topic partition, offset); None: not acknowledged yet."""


@dataclass(eq=False, slots=True)
class _Cancels:
    """The cancels of one owned partition still on their way, by source offset."""

    written: dict[int, _Written] = field(default_factory=dict)

    def settle(self, end: int) -> int | None:
        """Forget the cancels from offsets below ``end`` the cancel topic acknowledged;
        the send time of the earliest one it has not, or None when it has all."""
        earliest: int | None = None
        for offset, w in list(self.written.items()):
            if offset >= end:
                continue
            if w.at is not None:
                del self.written[offset]
            elif earliest is None or w.sent_ms < earliest:
                earliest = w.sent_ms
        return earliest


@dataclass(eq=False, slots=True)
class _Check:
    issued_ms: int
    new: frozenset[PartKey]
    """Partitions new to this process when it was issued (it asks the cancel topic too)."""


class OwnHorizons:
    """Establishes and publishes the horizons of the owned partitions."""

    def __init__(
        self,
        horizon: CancelHorizon,
        admin: AdminEdge,
        outbox: Outbox,
        topic: str,
        owner: str,
        interval_ms: int,
        cancel_topic: str,
        feed_position: Callable[[int], int],
        feed_partitions: Callable[[], Iterable[int]],
    ) -> None:
        """``topic``: the horizon topic; ``owner``: this process's key on it;
        ``feed_position(c)``, ``feed_partitions()``: where this process's feed reads the
        cancel topic's partition ``c``, and which partitions it reads."""
        self._horizon = horizon
        self._ends_of = EndOffsets(
            admin, "cancel horizon check", read_committed=True, timeout_ms=CHECK_TIMEOUT_MS
        )
        self._outbox = outbox
        self._topic = topic
        self._owner = owner.encode()
        self._interval_ms = interval_ms
        self._cancel_topic = cancel_topic
        self._feed_position = feed_position
        self._feed_partitions = feed_partitions
        self._owned: set[PartKey] = set()
        self._new: set[PartKey] = set()
        """Owned partitions whose first horizon is not established yet."""
        self._catching_up: dict[PartKey, tuple[int, int, dict[int, int]]] = {}
        """New partitions read through: (t0, end, the cancel topic's ends the feed must
        reach first)."""
        self._cancels: dict[PartKey, _Cancels] = {}
        self._ends: dict[int, int] = {}
        """Per cancel-topic partition, the offset past the last cancel acknowledged."""
        self._check: _Check | None = None
        self._last_check_ms = -(2**62)
        self._read: dict[PartKey, tuple[int, int]] = {}
        """Per partition, the newest check it was read through: (t0, end)."""
        self._unread: dict[PartKey, list[tuple[int, int]]] = {}
        """Per partition, answered checks it is not read through yet: (t0, end), oldest
        first."""
        self._published: dict[PartKey, int] = {}
        self._busy = True
        """Something is due within IDLE_LEAD_MS in this process's stores (or it was not
        told: see :meth:`step`)."""
        self._said_busy: bool | None = None
        """What the last word published said of it."""
        horizon.explain = self.explain

    # -- what ingest tells it ---------------------------------------------------------

    def cancel_written(self, key: PartKey, offset: int, sent_ms: int) -> None:
        """A cancel (or replace) from offset ``offset`` of ``key``, sent at ``sent_ms``,
        is being written."""
        self._cancels.setdefault(key, _Cancels()).written[offset] = _Written(sent_ms)

    def cancel_acked(self, key: PartKey, offset: int, msg: Message | None) -> None:
        """The cancel topic acknowledged it, at ``msg``'s partition and offset."""
        if msg is None:
            return
        partition: Any = msg.partition()
        at: Any = msg.offset()
        if partition is None or at is None or at < 0:
            return
        written = self._cancels.get(key, _Cancels()).written.get(offset)
        if written is not None:
            written.at = (int(partition), int(at))
        self._ends[int(partition)] = max(self._ends.get(int(partition), 0), int(at) + 1)

    def released(self, keys: Iterable[PartKey]) -> None:
        """These partitions left this process."""
        keys = list(keys)
        for key in keys:
            self._cancels.pop(key, None)
            self._read.pop(key, None)
            self._unread.pop(key, None)
            self._published.pop(key, None)
            self._catching_up.pop(key, None)
            self._new.discard(key)
            self._owned.discard(key)
        self._horizon.released(keys)

    def answer_expected(self, now_ms: int) -> bool:
        """True while the newest check is fresh (issued less than :data:`ANSWER_WAIT_MS`
        ago) and its answer, or the reading through it, is still to come: a message
        held back for it may go out within a round trip, so the loop looks again within
        a millisecond rather than at its usual wait."""
        if now_ms - self._last_check_ms >= ANSWER_WAIT_MS:
            return False
        if self._check is not None:
            return True
        return any(kept[-1][0] == self._last_check_ms for kept in self._unread.values())

    def wanted_cancel_ends(self) -> dict[int, int]:
        """Per cancel-topic partition, the furthest end a new partition's first horizon
        waits for the feed to read (``feed_watch.py``)."""
        wanted: dict[int, int] = {}
        for _t0, _end, cancel_ends in self._catching_up.values():
            for c, e in cancel_ends.items():
                wanted[c] = max(wanted.get(c, e), e)
        return wanted

    def explain(self, key: PartKey) -> str:
        """What the horizon of ``key`` waits for, in words ("" when not owned here)."""
        if key not in self._owned:
            return ""
        failed = self._ends_of.failures
        if key in self._catching_up:
            _t0, _end, cancel_ends = self._catching_up[key]
            behind = [
                f"{self._cancel_topic}/{c} to {e} (read to {self._feed_position(c)})"
                for c, e in sorted(cancel_ends.items())
                if self._feed_position(c) < e
            ]
            return "new here; the cancel feed to read " + ", ".join(behind)
        if key in self._new:
            cancels = [
                f"{t}/{p}: {why}" for (t, p), why in failed.items() if t == self._cancel_topic
            ]
            why = failed.get(key) or "; ".join(cancels)
            return "new here; its first check" + (f" failed: {why}" if why else " unanswered")
        if key in failed:
            return f"its last check failed: {failed[key]}"
        kept = self._unread.get(key)
        if kept:
            return f"reading up to offset {kept[0][1]}"
        return ""

    # -- every turn ---------------------------------------------------------------------

    def step(
        self,
        owned: Iterable[PartKey],
        positions: Callable[[list[PartKey]], Mapping[PartKey, int]],
        now_ms: int,
        urgent: bool = False,
        next_due_ms: int | None = None,
    ) -> None:
        """Issue the next check when it is time (step 1), and collect a finished one
        (step 2: ``positions(keys)`` says how far each partition is read: ingest's
        consumer, or the cancel scout while ingest waits). ``urgent``: messages here
        are due and wait for the horizon: check now rather than at the interval (a
        process that owns every partition then waits one round trip, not an interval).
        ``next_due_ms``: the earliest due time in this process's stores, for checks on
        demand (:data:`IDLE_INTERVAL_MS`); None: not known, check at the interval."""
        owned = list(owned)
        self._horizon.owned(owned)
        self._new.update(k for k in owned if k not in self._owned)
        self._owned = set(owned)
        self._caught_up()
        self._busy = next_due_ms is None or next_due_ms <= now_ms + IDLE_LEAD_MS
        if self._busy and self._said_busy is False and owned:
            self.publish(owned, say=True)  # the others speed up before it falls due
        interval = self._interval_ms
        idle = not self._busy and not self._new  # a new partition's first horizon: soon
        if idle and not self._horizon.others_busy(now_ms, self._owner):
            interval = max(interval, IDLE_INTERVAL_MS)
        due = now_ms - self._last_check_ms >= interval or urgent
        if owned and due:
            self._issue(owned, now_ms)
        check = self._check
        answer = self._ends_of.take()
        if check is not None and answer is not None:
            self._check = None
            self._read_through(check, answer, positions)
            self.publish(owned)  # at once: the other processes' deliveries wait for it
        elif self._unread and self._read_on(positions):
            self.publish(owned)

    def _issue(self, owned: list[PartKey], now_ms: int) -> None:
        """Step 1, unless a check is in flight (for less than CHECK_TIMEOUT_MS)."""
        new = frozenset(self._new)
        wanted = list(owned)
        if new:
            wanted += [(self._cancel_topic, c) for c in self._feed_partitions()]
        if self._ends_of.ask(wanted, now_ms):
            self._last_check_ms = now_ms
            self._check = _Check(now_ms, new)

    def _read_through(
        self,
        check: _Check,
        answer: Mapping[PartKey, int],
        positions: Callable[[list[PartKey]], Mapping[PartKey, int]],
    ) -> None:
        """Step 2 for every partition the check answered."""
        ends: dict[PartKey, int] = {}
        cancel_ends: dict[int, int] = {}
        for (topic, partition), end in answer.items():
            if topic == self._cancel_topic:
                cancel_ends[partition] = end
            else:
                ends[(topic, partition)] = end
        if not ends:
            return
        read = positions(list(ends))
        t0 = check.issued_ms
        for key, end in ends.items():
            if read.get(key, -1) < end:
                if key not in self._new:
                    self._keep_unread(key, t0, end)  # judged again as reading goes on
                continue
            if key in self._new:
                if key in check.new and cancel_ends:
                    self._catching_up[key] = (t0, end, cancel_ends)
                continue  # its first horizon waits for the feed (asked at the next check)
            self._unread.pop(key, None)  # older answers: this one is newer
            self._read[key] = (t0, end)
            self._horizon.local(key, t0)
        self._caught_up()

    def _keep_unread(self, key: PartKey, t0: int, end: int) -> None:
        kept = self._unread.setdefault(key, [])
        if len(kept) < UNREAD_KEPT:
            kept.append((t0, end))
        else:
            kept[-1] = (t0, end)

    def _read_on(self, positions: Callable[[list[PartKey]], Mapping[PartKey, int]]) -> bool:
        """Step 2 again for the kept answers; True when a horizon moved."""
        read = positions(list(self._unread))
        moved = False
        for key, kept in list(self._unread.items()):
            position = read.get(key, -1)
            through = [(t0, end) for t0, end in kept if position >= end]
            if not through:
                continue
            t0, end = through[-1]
            rest = kept[len(through) :]
            if rest:
                self._unread[key] = rest
            else:
                del self._unread[key]
            self._read[key] = (t0, end)
            self._horizon.local(key, t0)
            moved = True
        return moved

    def _caught_up(self) -> None:
        """New partitions whose cancels from before this process are known here now."""
        position = self._feed_position
        for key, (t0, end, cancel_ends) in list(self._catching_up.items()):
            if all(position(c) >= e for c, e in cancel_ends.items()):
                del self._catching_up[key]
                self._new.discard(key)
                self._read[key] = (t0, end)
                self._horizon.local(key, t0)

    def publish(self, owned: Iterable[PartKey], say: bool = False) -> None:
        """Publish the owned partitions' horizons that moved, as far as the cancel topic
        has their cancels (best effort: a lost one is superseded by the next), with
        whether something is due here soon; ``say``: publish even if none moved."""
        horizons = {}
        for key in owned:
            read = self._read.get(key)
            if read is None:
                continue
            t0, end = read
            cancels = self._cancels.get(key)
            earliest = None if cancels is None else cancels.settle(end)
            horizons[key] = t0 if earliest is None else min(t0, earliest)
        moved = {k: h for k, h in horizons.items() if h > self._published.get(k, -1)}
        if not moved and not say:
            return
        self._published.update(moved)
        self._said_busy = self._busy
        doc = {
            "horizons": {f"{t}/{p}": h for (t, p), h in sorted(horizons.items())},
            "cancel_ends": {str(c): o for c, o in sorted(self._ends.items())},
            "busy": self._busy,
        }
        self._outbox.send(
            self._topic,
            orjson.dumps(doc),
            self._owner,
            [(HORIZON_HEADER, b"1")],
            _ignore_report,
        )


def _ignore_report(_err: RdKafkaError | None, _msg: Message | None) -> None:
    """A horizon record that failed is superseded by the next one."""


@dataclass(frozen=True, slots=True)
class Word:
    """An owner's record of the horizon topic: its partitions' horizons, and whether it
    has something due soon (an owner of an older build does not say: busy)."""

    horizons: dict[PartKey, RemoteHorizon]
    busy: bool


def parse_word(raw: bytes | None) -> Word:
    """An owner's record of the horizon topic, as the feed reads it; no horizons if
    unreadable."""
    try:
        doc = orjson.loads(raw or b"")
        ends = {int(c): int(o) for c, o in doc.get("cancel_ends", {}).items()}
        out: dict[PartKey, RemoteHorizon] = {}
        for name, h in doc["horizons"].items():
            topic, _, partition = str(name).rpartition("/")
            out[(topic, int(partition))] = RemoteHorizon(int(h), ends)
        return Word(out, doc.get("busy") is not False)
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
        return Word({}, True)
