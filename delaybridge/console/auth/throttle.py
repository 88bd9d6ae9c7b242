"""Login attempts: a wrong admin token costs time, so guessing one is hopeless.

After ``free`` failures from one client address within ``window_s``, that address must
wait before its next attempt; the wait doubles with each further failure, up to
``max_wait_s``. A success clears the address's record. The admin token is long and
random in any real deployment (the chart generates 40 characters), so this is about
noise and log floods as much as about guessing.

Thread-safe.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class LoginThrottle:
    def __init__(
        self,
        free: int = 5,
        window_s: float = 300.0,
        max_wait_s: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
        max_addresses: int = 10_000,
    ) -> None:
        self._free = free
        self._window_s = window_s
        self._max_wait_s = max_wait_s
        self._clock = clock
        self._max_addresses = max_addresses
        self._failures: dict[str, list[float]] = {}
        self._lock = threading.Lock()

    def wait_s(self, remote: str) -> float:
        """Seconds ``remote`` must wait before it may try again (0: now)."""
        now = self._clock()
        with self._lock:
            times = self._recent(remote, now)
            if len(times) < self._free:
                return 0.0
            wait = min(self._max_wait_s, 2.0 ** (len(times) - self._free + 1))
            return max(0.0, times[-1] + wait - now)

    def failed(self, remote: str) -> None:
        now = self._clock()
        with self._lock:
            if remote not in self._failures and len(self._failures) >= self._max_addresses:
                self._failures.clear()  # a flood of addresses: start over rather than grow
            self._recent(remote, now).append(now)

    def succeeded(self, remote: str) -> None:
        with self._lock:
            self._failures.pop(remote, None)

    def _recent(self, remote: str, now: float) -> list[float]:
        times = [t for t in self._failures.get(remote, []) if now - t <= self._window_s]
        self._failures[remote] = times
        return times
