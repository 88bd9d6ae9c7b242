"""Cancel by id prefix across a process's stores: the cap, and the paced sweeps.

A prefix cancel (``delay-cancel-prefix``, or ``DELETE /admin/messages?id_prefix=``)
travels like any cancel (``ledger.py``: the cancel topic, every replica, the sent-before
rule). Two things are its own:

- **The cap** (``cancels.prefix_confirm_above``). A bulk cancel of more pending messages
  than the cap must be confirmed. The admin API asks (409 with the count, then
  ``confirm=<count>``); a header cannot, so the replica that reads a
  ``delay-cancel-prefix`` record counts the matching pending messages *in its own
  stores* (:func:`over_cap`) and dead-letters the record as ``prefix-over-cap`` when
  they are more than the cap, before anything is published. That replica knows only
  its own stores: with R replicas holding similar shares, a prefix that matches N
  messages in all is seen as about N/R. The rule errs towards refusing (it never
  applies a cancel it counted over the cap); a producer that must bulk-cancel more
  uses the admin API, or several narrower prefixes. A cancel the count let through is
  applied everywhere, whatever the other replicas hold.
- **The sweep.** The stores find the messages by walking their timer logs
  (``timerlog/prefix_sweep.py``); :func:`sweep` runs the walks of every store a bounded
  number of entries per loop turn, so deliveries are never held back for a whole walk.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from delaybridge.bridge.cancels.ledger import for_store
from delaybridge.bridge.cancels.requests import CancelRequest, parse_origin
from delaybridge.bridge.observe.tally import Tally
from delaybridge.bridge.partition.state import PartitionState

DEFAULT_CONFIRM_ABOVE = 1_000


def matching(parts: Iterable[PartitionState], request: CancelRequest, cap: int | None) -> int:
    """How many pending messages of these stores the prefix cancel ``request`` takes now
    (the same rule as when it is applied), counting no further than ``cap + 1``."""
    origin = parse_origin(request.origin)
    found = 0
    for part in parts:
        left = None if cap is None else cap - found
        cancel = for_store(request, origin, parse_origin(part.origin_prefix)[0])
        found += part.store.count_prefix(cancel, left)
        if cap is not None and found > cap:
            break
    return found


def over_cap(parts: Iterable[PartitionState], request: CancelRequest, cap: int) -> int | None:
    """The count of :func:`matching` when it is above ``cap`` (the request must not be
    applied), else None."""
    count = matching(parts, request, cap)
    return count if count > cap else None


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
