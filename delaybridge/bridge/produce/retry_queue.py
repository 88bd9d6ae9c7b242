"""Retries with exponential backoff, on the owner thread: one queue for every kind.

A retry is a callable due at a time; :meth:`RetryQueue.run_due` calls the ones whose
time has come (the loop calls it every turn), and :meth:`RetryQueue.next_ms` tells the
loop how long it may sleep. Delivery attempts and side writes (re-published cancels,
dead letters of bad input) retry through it, so no failure is retried in a tight loop
inside a delivery callback. Not thread-safe: one owner thread.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

BACKOFF_MIN_MS = 500
BACKOFF_MAX_MS = 30_000


def backoff_ms(failures: int, low_ms: int = BACKOFF_MIN_MS, high_ms: int = BACKOFF_MAX_MS) -> int:
    """``low_ms`` doubling per failure, capped at ``high_ms``."""
    doublings: int = min(max(failures - 1, 0), 20)
    return min(high_ms, low_ms << doublings)


@dataclass(order=True, slots=True)
class _Due:
    at_ms: int
    seq: int
    run: Callable[[], bool] = field(compare=False)


class RetryQueue:
    """Callables due at a time. A callable returns False to be tried again shortly."""

    def __init__(self) -> None:
        self._heap: list[_Due] = []
        self._seq = itertools.count()

    def __len__(self) -> int:
        return len(self._heap)

    def at(self, at_ms: int, run: Callable[[], bool]) -> None:
        heapq.heappush(self._heap, _Due(at_ms, next(self._seq), run))

    def next_ms(self) -> int | None:
        return self._heap[0].at_ms if self._heap else None

    def run_due(self, now_ms: int) -> int:
        """Run what is due; a callable that returns False (e.g. producer queue full) is
        put back ``BACKOFF_MIN_MS`` later and stops this round. Returns how many ran."""
        done = 0
        while self._heap and self._heap[0].at_ms <= now_ms:
            due = heapq.heappop(self._heap)
            if not due.run():
                self.at(now_ms + BACKOFF_MIN_MS, due.run)
                break
            done += 1
        return done
