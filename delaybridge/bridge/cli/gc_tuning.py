"""The garbage collector's settings for a sidecar process (``delaybridge run``).

CPython's cyclic collector runs a young collection every 700 net allocations and a full
one when enough objects survived; the loop allocates a handful of short-lived objects
per record (a consumed batch of 5,000 messages and their header lists, the decoded due
records, delivery callbacks) that live just long enough to be promoted, so full
collections kept scanning every long-lived object: py-spy put the collector at 10–15 %
of the sidecar (docs/benchmarks.md, "The garbage collector"). The loop makes little
cyclic garbage (reference counting frees nearly everything), so the young generation
may be far larger, and what start-up built (modules, settings, clients) is frozen out
of every later collection. Measured: 11 % less CPU per message at 10k msg/s, the same
peak RSS.
"""

from __future__ import annotations

import gc

#: (young, middle, old) collection thresholds; CPython's default is (700, 10, 10).
THRESHOLDS = (50_000, 20, 20)


def tune() -> None:
    """Set the thresholds (once, before the service is built)."""
    gc.set_threshold(*THRESHOLDS)


def freeze_startup() -> None:
    """Move everything alive now (start-up's objects) out of the collector's reach."""
    gc.collect()
    gc.freeze()
