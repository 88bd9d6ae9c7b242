"""The next occurrence of a recurring schedule: spawned once, whatever crashes.

When occurrence k of a series is taken due for its first try (not its retries: a
parked copy carries the retry header last), the deliverer hands it to
:meth:`Spawner.taken`; at the end of the turn :meth:`Spawner.spawn` appends occurrence
k + 1 (``contract/series.py`` says when it is due) to the same store, with the same id,
key, value, target, source offset and source timestamp, so a cancel by id finds it
exactly as it found the original: the cancel rule compares the original send time,
and a cancel sent after the series started hits whichever occurrence is pending.
Occurrence k + 1 goes into the changelog at once, under a key of its own
(``generation_of``): its value is ahead of k's tombstone in the changelog partition,
so a store rebuilt from the changelog never holds neither. If k's own value was still
held back (written behind: the first occurrence, or a parked copy, taken within
``changelog.write_behind_ms`` of being stored), it is written first
(``Changelog.write_through``): a store rebuilt after a ``kill -9`` that came before k's
acknowledgement holds k again, where it held only k + 1 and lost k (the delay-topic
record was not re-read either: k + 1's key names its offset). In exactly-once mode both
ride in the transaction that delivers k (an abort reopens the store without k + 1 and
with k pending again).

**Crash safety.** Spawning must be idempotent: a crash after k + 1 reached the disk
(or the changelog) but before k's delivery was marked durable delivers k again, and a
second k + 1 would double the series at every crash. So before spawning, the store is
asked whether it already holds a later occurrence of the same series (same id and
source offset, a higher occurrence number); if so nothing is appended. The occurrences
taken in the same turn count as held: a restart after a long enough outage can find
occurrence k and the successor it had spawned both due at once, and neither is pending
then. The question is a look-up in the id index, asked only where a previous
incarnation can have spawned: for occurrences due before this store was first seen
here plus ``GUARD_MARGIN_MS`` (clock skew between the old and new owner), batched per
turn. A live store never hands an occurrence out twice, so the steady state asks
nothing.

Not thread-safe: the deliverer's owner thread calls it.
"""

from __future__ import annotations

import logging

from delaybridge.bridge.observe.tally import Tally
from delaybridge.bridge.partition.state import PartitionState, PartKey
from delaybridge.bridge.state.changelog import Changelog
from delaybridge.contract.names import SERIES_HEADER
from delaybridge.contract.series import occurrence_of, read_state, state_header
from delaybridge.durable import NO_SPACE
from delaybridge.timerlog import Clock, EncodedBatch, TimerRecord, TimerStore
from delaybridge.timerlog.errors import DelayTooLong, InvalidRecord

log = logging.getLogger(__name__)
#: How far past a store's first sighting a due time may be and still have been handed
#: out by a previous owner whose clock ran ahead.
GUARD_MARGIN_MS = 60_000


class Spawner:
    """Appends the next occurrence of every series occurrence taken due."""

    def __init__(
        self, misfire_ms: int, clock: Clock, tally: Tally, changelog: Changelog | None
    ) -> None:
        self._misfire_ms = misfire_ms
        self._clock = clock
        self._tally = tally
        self._changelog = changelog
        self._taken: dict[PartKey, tuple[PartitionState, list[TimerRecord]]] = {}
        self._since: dict[PartKey, tuple[TimerStore, int]] = {}
        self.spawned = 0
        self.ended = 0
        self.already_spawned = 0
        """Occurrences found in the store already (a redelivery after a crash)."""

    def taken(self, part: PartitionState, rec: TimerRecord, now_ms: int) -> None:
        """Occurrence ``rec`` went out for its first try (counted in the lateness as
        the hot loop counts a one-off); its successor is appended at :meth:`spawn`."""
        sent = rec.source_timestamp_ms if rec.source_timestamp_ms < now_ms else now_ms
        self._tally.lateness_ms.append(now_ms - (rec.due_ms if rec.due_ms >= sent else sent))
        self._taken.setdefault(part.key, (part, []))[1].append(rec)

    def spawn(self) -> None:
        """Append the successors of the occurrences taken since the last call."""
        if not self._taken:
            return
        taken, self._taken = self._taken, {}
        now_ms = self._clock.now_ms()
        for key, (part, recs) in taken.items():
            if part.closed:
                continue  # moved away: the next owner delivers the occurrence again
            try:
                self._spawn(part, recs, now_ms)
            except OSError as exc:
                if exc.errno not in NO_SPACE:
                    raise
                log.warning(
                    "%s: no room to store %d next occurrences (%s); trying again",
                    part.name,
                    len(recs),
                    exc,
                )
                self._taken.setdefault(key, (part, []))[1].extend(recs)

    def _spawn(self, part: PartitionState, recs: list[TimerRecord], now_ms: int) -> None:
        held = self._held(part, recs, now_ms)
        floor_ms = now_ms - self._misfire_ms
        nexts: list[TimerRecord] = []
        for rec in recs:
            series, k = read_state(rec.headers[-1][1])
            if any(
                r.source_offset == rec.source_offset and _occurrence(r) > k
                for r in held.get(rec.id, ())
            ):
                self.already_spawned += 1
                log.info(
                    "series %r from %s%d: occurrence %d is stored already (occurrence %d "
                    "came again after a restart)",
                    rec.id,
                    part.origin_prefix,
                    rec.source_offset,
                    k + 1,
                    k,
                )
                continue
            step = series.after(k, rec.due_ms, floor_ms)
            if step is None:
                self.ended += 1
                continue
            headers = (*rec.headers[:-1], state_header(series, step[0]))
            nexts.append(rec._replace(due_ms=step[1], headers=headers))
        if nexts:
            self._append(part, nexts)

    def _held(
        self, part: PartitionState, recs: list[TimerRecord], now_ms: int
    ) -> dict[str, list[TimerRecord]]:
        """The pending messages with the ids of ``recs`` that a previous incarnation of
        the store may have spawned a successor of (see the module docstring), and those
        of ``recs`` themselves: after a restart an occurrence and the successor it had
        spawned can both be due in one turn, and then neither is pending any more."""
        store = part.store
        since = self._since.get(part.key)
        if since is None or since[0] is not store:
            since = self._since[part.key] = (store, now_ms)
        horizon = since[1] + GUARD_MARGIN_MS
        ids = {r.id for r in recs if r.due_ms < horizon}
        if not ids:
            return {}
        held = store.pending_with_ids(ids)
        for rec in recs:  # taken this turn: out of the store, and held all the same
            if rec.id in ids:
                held.setdefault(rec.id, []).append(rec)
        return held

    def _append(self, part: PartitionState, nexts: list[TimerRecord]) -> None:
        try:
            encoded = part.store.append(nexts)
        except (InvalidRecord, DelayTooLong):
            for rec in nexts:  # one too far away (a cron gap) ends only its own series
                try:
                    self._stored(part, [rec], part.store.append([rec]))
                except (InvalidRecord, DelayTooLong) as exc:
                    log.error(
                        "series %r from %s%d ends: its next occurrence cannot be stored: %s",
                        rec.id,
                        part.origin_prefix,
                        rec.source_offset,
                        exc,
                    )
            return
        self._stored(part, nexts, encoded)

    def _stored(self, part: PartitionState, recs: list[TimerRecord], enc: EncodedBatch) -> None:
        self.spawned += len(recs)
        if self._changelog is not None:  # written now: ahead of the tombstones
            self._changelog.stored(part, recs, enc, hold_offset=False, at_once=True)


def _occurrence(rec: TimerRecord) -> int:
    """The occurrence number of a stored series record (fresh or parked); 0 if none."""
    for name, raw in reversed(rec.headers[-2:]):
        if name == SERIES_HEADER:
            return occurrence_of(raw)
    return 0
