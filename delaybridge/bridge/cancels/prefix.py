"""Cancel by id prefix across a process's stores: the cap, and the paced sweeps.

A prefix cancel (``delay-cancel-prefix``, or ``DELETE /admin/messages?id_prefix=``)
travels like any cancel (``ledger.py``: the cancel topic, every replica, the sent-before
rule). Two things are its own:

- **The cap** (``cancels.prefix_confirm_above``). A bulk cancel of more pending messages
  than the cap must be confirmed. The admin API asks (409 with the count, then
  ``confirm=<count>``); a header cannot, so the replica that reads a
  ``delay-cancel-prefix`` record counts the matching pending messages *in its own
  stores* (:class:`PrefixChecks`) and dead-letters the record as ``prefix-over-cap``
  when they are more than the cap, before anything is published. That replica knows
  only its own stores: with R replicas holding similar shares, a prefix that matches N
  messages in all is seen as about N/R. It decides once, where the record is read, so
  every replica agrees (the cancel reaches all of them or none); a producer that must
  bulk-cancel more uses the admin API, or several narrower prefixes.
- **Paced work.** The count and the sweep that takes the messages each walk a store's
  timer log (``timerlog/prefix_sweep.py``) a bounded number of entries per loop turn,
  so no turn spends a whole walk. A record waiting for its count holds its offset from
  the commit, and its partition's cancel horizon at its offset
  (:meth:`PrefixChecks.held`): what falls due meanwhile waits for the decision, as it
  waits for any cancel not read yet (docs/design/cancel-horizon.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from delaybridge.bridge.cancels.ledger import for_store
from delaybridge.bridge.cancels.requests import CancelRequest, parse_origin
from delaybridge.bridge.commit.holds import Hold
from delaybridge.bridge.observe.tally import Tally
from delaybridge.bridge.partition.state import PartitionState, PartKey
from delaybridge.timerlog.prefix_sweep import Count


@dataclass(eq=False, slots=True)
class Check:
    """A prefix cancel read from ``key`` at ``offset``, waiting for its count."""

    key: PartKey
    offset: int
    counts: list[tuple[PartitionState, Count]]
    decide: Callable[[int], None]
    """Told the count once done: all of it, or the cap + 1 once past the cap."""
    hold: Hold | None
    """Its offset, held from the commit until decided (None: the scout's, no commit)."""
    alive: Callable[[], bool]
    """False once the partition it was read from is no longer read here."""
    cap: int | None
    """Stop counting past it (None: count all, for the admin API's answer)."""
    found: int = 0


class PrefixChecks:
    """The prefix cancels read and not decided yet, counted a step per loop turn.

    Not thread-safe: the service's owner thread calls it.
    """

    def __init__(
        self, cap: int, budget: int, stores: Callable[[], Iterable[PartitionState]]
    ) -> None:
        """``cap``: ``cancels.prefix_confirm_above``; ``budget``: entries per turn;
        ``stores``: the partitions whose stores a count covers (this process's)."""
        self.cap = cap
        self.budget = budget
        self._stores = stores
        self._pending: list[Check] = []

    def start(
        self,
        key: PartKey,
        offset: int,
        request: CancelRequest,
        decide: Callable[[int], None],
        hold: Hold | None,
        alive: Callable[[], bool],
        *,
        whole: bool = False,
    ) -> None:
        """Count ``request`` (read from ``key`` at ``offset``) in this process's stores,
        then call ``decide`` with the count (past the cap: the cap + 1, unless
        ``whole``); ``hold`` keeps the offset from the commit meanwhile, and is done once
        decided; a check whose partition is not ``alive`` any more is dropped undecided
        (its next reader decides)."""
        cap = None if whole else self.cap
        origin = parse_origin(request.origin)
        counts = []
        for part in self._stores():
            cancel = for_store(request, origin, parse_origin(part.origin_prefix)[0])
            counts.append((part, part.store.start_count(cancel, cap)))
        self._pending.append(Check(key, offset, counts, decide, hold, alive, cap))

    @property
    def busy(self) -> bool:
        """Is a count under way (the loop should turn again at once)?"""
        return bool(self._pending)

    def held(self) -> dict[PartKey, int]:
        """Per partition, the offset of its oldest record waiting for a decision: its
        cancel horizon must not count it read (the cancel is not applied yet)."""
        out: dict[PartKey, int] = {}
        for check in self._pending:
            out[check.key] = min(out.get(check.key, check.offset), check.offset)
        return out

    def step(self) -> None:
        """Count on, up to the budget of entries in all; decide what is counted (the
        checks in the order they came: one ahead decided first)."""
        self._pending = [c for c in self._pending if c.alive()]
        budget = self.budget
        while self._pending and budget > 0:
            check = self._pending[0]
            budget -= self._advance(check, budget)
            over = check.cap is not None and check.found > check.cap
            if over or all(count.done or part.closed for part, count in check.counts):
                self._finish(check)

    def _advance(self, check: Check, budget: int) -> int:
        """Count ``check`` on in its stores; returns the entries examined (at least 1)."""
        spent = 0
        for part, count in check.counts:
            if count.done or part.closed:
                continue
            before = count.found
            spent += part.store.count_step(count, budget - spent)
            check.found += count.found - before
            if (check.cap is not None and check.found > check.cap) or spent >= budget:
                break
        return max(spent, 1)

    def _finish(self, check: Check) -> None:
        self._pending.remove(check)
        check.decide(check.found)
        if check.hold is not None:
            check.hold.done()


def sweep(
    parts: Iterable[PartitionState],
    budget: int,
    tally: Tally,
    on_removed: Callable[[PartitionState], None] | None,
) -> int:
    """One loop turn of the prefix cancels' sweeps: up to ``budget`` timer-log entries
    per store that has one running. Returns the messages taken; ``on_removed(part)``
    (the changelog's tombstones) runs for each store that took some."""
    taken = 0
    for part in parts:
        if not part.store.sweeping:
            continue
        got = part.store.sweep(budget)
        taken += got
        if got and on_removed is not None:
            on_removed(part)
    tally.cancelled += taken
    return taken
