"""Cancels reach every store, whichever delay-topic partition they landed in.

A cancel is a record in *some* delay-topic partition, but the message it cancels may sit
in another partition, owned by another sidecar (a peer's known bug: cancels lost because
the producer's partitioner put them elsewhere). So the sidecar that consumes a cancel
does not apply it itself; it re-publishes it to the cancel topic (key = the id), and
every sidecar reads the whole cancel topic (manual assignment, no group) and applies
each cancel to every store it holds. Cancels are tiny and rare next to messages.

Protocol (the format is ``requests.py``, the feed ``feed.py``):

1. ingest: a cancel record from delay partition P is produced to the cancel topic; P's
   offset commits only once that produce is acknowledged (so it is never lost);
2. every sidecar's :class:`CancelFeed` consumes the cancel topic from its saved
   position (a first start: a window back in time), and applies each cancel to all
   open stores;
3. cancels read within that window (``cancel_grace_ms`` plus two session timeouts:
   how long a dead owner's partitions wait before they move) are kept
   (:attr:`recent`) and applied to a store when it is opened later (a partition
   moving in from another sidecar);
4. each store also keeps a cancel for its own grace period, so a cancel that overtakes
   its message (the message's partition lags) still wins when it arrives (a replace is
   kept once per process instead, in the feed's table: ``timerlog/replace_waits.py``).

A cancel or replace published by this process is applied to its stores at once, as
ingest (or the cancel scout) reads it (:meth:`CancelLedger.apply_here`; the cancel
horizon counts on it, ``own_horizons.py``), and a replace waits in the feed's table from
then on. When the feed reads it back, only the stores opened since then get it: the
others applied it already, and a second pass cost an id-index lookup and a decoded
record per store for every schedule with an id (a tenth of the CPU of a steady load of
such schedules; docs/benchmarks.md).

A cancel takes only the messages with its id that were *sent before it* (the record
timestamps in the delay topic; ties in one partition by offset): a reschedule (cancel,
then the same id again) keeps the new message, and a cancel that comes too late (the
message already delivered) cannot hit a later message with the id.

A *replace* (a schedule with an explicit id, ``contract/classify.py``) travels the same way
as a cancel with ``replace`` set, sent at the schedule's own time and offset, so it takes
what was sent before it and never the schedule itself. Its one difference is a tie
across partitions: two schedules with one id and one timestamp in two partitions would
each take the other, so a replace wins a cross-partition tie only against a message from
a smaller ``(delay topic, partition)`` than its own (exactly one of them survives).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable

from delaybridge.bridge.cancels.requests import CancelRequest, Parsed, parse_origin
from delaybridge.bridge.observe.tally import Tally
from delaybridge.bridge.partition.state import PartitionState
from delaybridge.timerlog import Cancel
from delaybridge.timerlog.replace_waits import Origin, store_view


def apply_cancels(parts: Iterable[PartitionState], requests: list[CancelRequest]) -> list[bool]:
    """Apply a batch of cancels to every store; per request, did any store match it?

    Each store is told when the cancel was sent, and, when the cancel came from the
    store's own delay-topic partition, its offset there (ties of equal timestamps are
    decided by offset in one partition): it takes only messages sent before it
    (``timerlog.Cancel``).
    """
    if not requests:
        return []
    hit = [False] * len(requests)
    origins = [parse_origin(r.origin) for r in requests]  # once, not once per store
    for part in parts:
        own = parse_origin(part.origin_prefix)[0]
        cancels = [for_store(r, o, own) for r, o in zip(requests, origins, strict=True)]
        for i, matched in enumerate(part.store.cancel(cancels)):
            hit[i] = hit[i] or matched
    return hit


def for_store(r: CancelRequest, parsed: Parsed, own: Origin | None) -> Cancel:
    """The cancel as the store of partition ``own`` applies it (the tie rules of the
    module docstring); ``parsed``: the request's origin, :func:`parse_origin`."""
    origin, offset = parsed
    if r.replace and r.sent_ms is not None and own is not None:
        sent, at = store_view(r.sent_ms, origin, offset, own)
        return Cancel(r.id, r.target_topic, sent, at, True)
    at = offset if origin == own else None
    return Cancel(r.id, r.target_topic, r.sent_ms, at, r.replace, r.prefix)


class CancelLedger:
    """Applies cancels and counts each one once, for the metrics.

    A cancel is *matched* when a store of this sidecar held its message, *unknown*
    otherwise (both counted in the :class:`Tally`). The admin API applies a cancel
    locally and publishes it, so the same cancel comes back from the feed and matches
    nothing the second time: ids matched in the last ``grace_ms`` are remembered (at
    most ``limit``) and not counted again.
    """

    def __init__(
        self,
        grace_ms: int,
        tally: Tally,
        limit: int = 100_000,
        on_removed: Callable[[PartitionState], None] | None = None,
    ) -> None:
        """``on_removed(part)`` runs for every store after cancels were applied to it
        (the changelog tombstones what they removed)."""
        self._on_removed = on_removed
        self._grace_ms = grace_ms
        self._tally = tally
        self._limit = limit
        self._recent: OrderedDict[tuple[str, str | None], int] = OrderedDict()
        self._here: OrderedDict[CancelRequest, tuple[int, tuple[PartitionState, ...]]] = (
            OrderedDict()
        )
        """Requests applied here and not read back yet: when, and to which stores."""

    def apply_here(
        self, parts: Iterable[PartitionState], requests: list[CancelRequest], now_ms: int
    ) -> list[bool]:
        """:meth:`apply` requests this process publishes, and remember the stores that had
        them: reading them back applies them only to stores opened since."""
        parts = tuple(parts)
        hits = self.apply(parts, requests, now_ms)
        for request in requests:
            self._here[request] = (now_ms, parts)
            self._here.move_to_end(request)
        return hits

    def apply(
        self, parts: Iterable[PartitionState], requests: list[CancelRequest], now_ms: int
    ) -> list[bool]:
        while self._recent and (
            len(self._recent) > self._limit
            or next(iter(self._recent.values())) < now_ms - self._grace_ms
        ):
            self._recent.popitem(last=False)
        while self._here and (
            len(self._here) > self._limit
            or next(iter(self._here.values()))[0] < now_ms - self._grace_ms
        ):
            self._here.popitem(last=False)  # never read back (its write gave up)
        parts = list(parts)
        echoes: set[int] = set()
        if self._here:
            hits = self._apply_new(parts, requests, echoes)
        else:
            hits = apply_cancels(parts, requests)
        if self._on_removed is not None:
            for part in parts:
                self._on_removed(part)
        for i, (request, hit) in enumerate(zip(requests, hits, strict=True)):
            if i in echoes and not hit:
                continue  # counted when applied here
            if request.replace:  # one that finds nothing is the usual case, not unknown
                self._tally.replaced += hit
                continue
            if request.prefix:  # its sweep counts what it takes, as it takes it
                continue
            key = (request.id, request.target_topic)
            if hit:
                self._tally.cancelled += 1
                self._recent[key] = now_ms
                self._recent.move_to_end(key)
            elif key not in self._recent:
                self._tally.cancel_unknown += 1
        return hits

    def _apply_new(
        self, parts: list[PartitionState], requests: list[CancelRequest], echoes: set[int]
    ) -> list[bool]:
        """:func:`apply_cancels`, less what :meth:`apply_here` applied: a request read
        back (its index added to ``echoes``) goes only to the stores that did not have
        it then, and reports a hit only there: the others were counted then."""
        fresh: list[int] = []
        hits = [False] * len(requests)
        had: tuple[PartitionState, ...] = ()
        opened: list[PartitionState] = []
        for i, request in enumerate(requests):
            applied = self._here.pop(request, None)
            if applied is None:
                fresh.append(i)
                continue
            echoes.add(i)
            if applied[1] is not had:  # one apply_here's requests share its tuple
                had = applied[1]
                ids = {id(q) for q in had}
                opened = [p for p in parts if id(p) not in ids]
            if opened:
                (hits[i],) = apply_cancels(opened, [request])
        if fresh:
            matched = apply_cancels(parts, [requests[i] for i in fresh])
            for i, hit in zip(fresh, matched, strict=True):
                hits[i] = hit
        return hits

    def applied_here(self, request: CancelRequest) -> bool:
        """Was ``request`` applied here, and not read back yet (:meth:`apply_here`)?"""
        return request in self._here
