"""Hold the cyclic garbage collector off while a delivery batch is built.

``take_due`` makes three tuples per due message (the record, its cursor, the pair),
all alive until the caller marks them delivered. With the collector on, a batch of
1,000 triggers about five young-generation collections that find every one of them
still referenced, promote them, and so feed the full collections that walk the whole
heap: 15 % of delivery's CPU at 10M pending in a profile; 1.04-1.33x measured
(docs/benchmarks.md, "Deliveries per CPU second at 10M pending"). Paused, the batch
is built without a collection and the collector runs at its next allocation after
the call, when most earlier batches are gone. The objects made hold no cycles, so
nothing is kept longer than one call.
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


def without_gc(fn: Callable[P, R]) -> Callable[P, R]:
    """``fn`` run with the cyclic collector paused (re-enabled after, even on error);
    left alone where the application already disabled it."""

    @functools.wraps(fn)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        if not gc.isenabled():
            return fn(*args, **kwargs)
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            gc.enable()

    return run
