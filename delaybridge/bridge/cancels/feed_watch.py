"""A cancel feed that stands still below an end it must read is given a new consumer.

The cancel horizon waits on this process's cancel feed (``feed.py``) in two places: a
partition new to this process takes its first horizon once the feed has read the cancel
topic up to the ends its first check found (``own_horizons.py``), and another owner's
word counts once the feed has read the cancels it vouches for (``horizon.py``). Both
name the offsets the feed must reach. If the feed stops reading, both wait, and
delivery waits with them until ``cancel_horizon.bound_ms``.

That happened: after a broker frozen with SIGSTOP for 45 s, under load, one worker's
feed stayed at offset 1,630 of a cancel partition whose end was 3,260, for the whole
60 s bound, while Kafka answered every other client (test_kafka_outage, frozen; the
bound's warning line named the partition and both offsets). A librdkafka consumer that
lived through the freeze read nothing more; a new one reads at once.

The rule: when the feed is below an end it must reach, and none of its positions there
has moved for :data:`FEED_STALL_MS`, the feed reads on with a new consumer from where it
stands (:meth:`CancelFeed.renew`). Once per stall: the next renewal needs another
:data:`FEED_STALL_MS` without progress, and only the first of a run of them is a
warning. A healthy feed below an end moves within a fetch (``fetch.wait.max.ms``,
500 ms); while Kafka is unreachable the feed is not renewed (nothing could read).

Not thread-safe: the service's owner thread calls it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

log = logging.getLogger(__name__)
#: How long the feed may stand still below an end it must reach before it is renewed.
FEED_STALL_MS = 5_000


class FeedWatch:
    """Renews the cancel feed's consumer when it stalls (see the module docstring)."""

    def __init__(
        self,
        position: Callable[[int], int],
        renew: Callable[[], None],
        stall_ms: int = FEED_STALL_MS,
    ) -> None:
        """``position(c)``: where the feed reads cancel-topic partition ``c``;
        ``renew()``: gives it a new consumer."""
        self._position = position
        self._renew = renew
        self._stall_ms = stall_ms
        self._behind: dict[int, int] = {}
        self._since_ms = 0
        self._renewed = 0
        """Renewals in the current stall (the first is a warning, the others debug)."""

    def step(self, wanted: Mapping[int, int], now_ms: int, reachable: bool = True) -> None:
        """``wanted``: per cancel-topic partition, the end the feed must reach."""
        behind = {c: at for c, end in wanted.items() if (at := self._position(c)) < end}
        if not behind:
            if self._renewed:
                log.info("cancel feed reading again after %d new consumer(s)", self._renewed)
            self._behind, self._renewed = {}, 0
            return
        if behind != self._behind or not reachable:
            self._behind = behind
            self._since_ms = now_ms
            return
        if now_ms - self._since_ms < self._stall_ms:
            return
        level = logging.WARNING if not self._renewed else logging.DEBUG
        log.log(
            level,
            "cancel feed stands at %s for %d ms below the ends it must read (%s): "
            "reading on with a new consumer",
            dict(sorted(behind.items())),
            now_ms - self._since_ms,
            dict(sorted((c, wanted[c]) for c in behind)),
        )
        self._renewed += 1
        self._since_ms = now_ms
        self._renew()
