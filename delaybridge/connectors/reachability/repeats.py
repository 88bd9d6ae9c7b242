"""The first line of a kind passes; the rest are counted until its window is over.

librdkafka reports every attempt: a broker that refuses connections produces a
"Connect to ... failed" for each reconnect of each client, about twenty a second per
client with librdkafka 2.16 (issue 25 measured 36-40 ERROR lines a second from one
sidecar). :class:`RepeatLimiter` keeps one line per kind per window (30 s)::

    t=0.0   Connect to 10.0.0.5:9092 failed: Connection refused   -> logged
    t=0.1 .. t=29.9   the same, 600 times                         -> counted
    t=30.2  the same                                              -> logged, "(600 more
                                                                     like it in 30 s)"

A *kind* is whatever the caller says it is; :func:`kind_of` makes the usual one from a
line's text by blanking the numbers that change from one attempt to the next
("after 12ms in state CONNECT", "1/3 brokers are down", the client's instance number)
while keeping those of addresses ("10.0.0.5:9092"), so two brokers failing stay two
kinds and the same broker failing again and again is one.

Not thread-safe: one owner calls it. Memory is bounded: kinds whose window is over and
that hold no count are forgotten once more than :data:`MAX_KINDS` are known.
"""

from __future__ import annotations

import re
from collections.abc import Hashable
from dataclasses import dataclass

#: How long a kind stays quiet after one of its lines passed.
WINDOW_S = 30.0
#: Kinds kept before idle ones are forgotten.
MAX_KINDS = 256

# A number not part of an address or a name: "after 12ms", "1/3 brokers", "consumer-2"
# (not 10.0.0.5, not :9092, not ipv4).
_VOLATILE_NUMBER = re.compile(r"(?<![\w.:])\d+(?!\d|[.:]\d)")


def kind_of(*parts: str) -> tuple[str, ...]:
    """A kind from a line's parts (a code or facility, its text), numbers blanked."""
    return tuple(_VOLATILE_NUMBER.sub("#", part) for part in parts)


@dataclass(frozen=True)
class Admission:
    """The limiter's answer for one line."""

    passes: bool
    """Log this line."""
    suppressed: int = 0
    """When it passes: lines of its kind counted (not logged) since the last one passed."""
    over_s: float = 0.0
    """When it passes: the seconds those suppressed lines were counted over."""

    def suffix(self) -> str:
        """`` (N more like it in S s)`` for a passing line that had company, else ``""``."""
        if not self.suppressed:
            return ""
        return f" ({self.suppressed} more like it in {self.over_s:.0f} s)"


@dataclass
class _Seen:
    passed_s: float
    suppressed: int = 0


class RepeatLimiter:
    """One line per kind per ``window_s``; see the module docstring."""

    def __init__(self, window_s: float = WINDOW_S) -> None:
        self.window_s = window_s
        self._kinds: dict[Hashable, _Seen] = {}

    def admit(self, kind: Hashable, now_s: float) -> Admission:
        """Does this line of ``kind`` pass at ``now_s``? Counts it when not."""
        seen = self._kinds.get(kind)
        if seen is not None and now_s - seen.passed_s < self.window_s:
            seen.suppressed += 1
            return Admission(False)
        if seen is None:
            self._forget_idle(now_s)
            self._kinds[kind] = _Seen(now_s)
            return Admission(True)
        answer = Admission(True, seen.suppressed, now_s - seen.passed_s)
        seen.passed_s = now_s
        seen.suppressed = 0
        return answer

    def hush(self, kind: Hashable, now_s: float) -> None:
        """Count ``kind`` as having just passed, with nothing suppressed: another line
        (an outage's summary) stands for it, so its next ``window_s`` stay quiet."""
        seen = self._kinds.get(kind)
        if seen is None:
            self._forget_idle(now_s)
            self._kinds[kind] = _Seen(now_s)
        else:
            seen.passed_s = now_s
            seen.suppressed = 0

    def __len__(self) -> int:
        return len(self._kinds)

    def _forget_idle(self, now_s: float) -> None:
        if len(self._kinds) < MAX_KINDS:
            return
        idle = [
            kind
            for kind, seen in self._kinds.items()
            if not seen.suppressed and now_s - seen.passed_s >= self.window_s
        ]
        for kind in idle:
            del self._kinds[kind]
