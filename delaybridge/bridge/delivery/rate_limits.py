"""Per-target-topic rate limits: a token bucket per limited topic.

A topic with no limit configured is never looked at twice: :meth:`RateLimits.allow`
returns True at once for it.
"""

from __future__ import annotations

from collections.abc import Mapping


class TokenBucket:
    """``rate_per_s`` tokens a second, at most one second's worth saved up."""

    def __init__(self, rate_per_s: float, now_s: float) -> None:
        self.rate_per_s = rate_per_s
        self.capacity = max(1.0, rate_per_s)
        self.tokens = self.capacity
        self.updated_s = now_s

    def take(self, now_s: float) -> bool:
        self.tokens = min(self.capacity, self.tokens + (now_s - self.updated_s) * self.rate_per_s)
        self.updated_s = now_s
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False


class RateLimits:
    def __init__(self, limits_per_s: Mapping[str, float], now_s: float) -> None:
        self._buckets = {
            topic: TokenBucket(rate, now_s) for topic, rate in limits_per_s.items() if rate > 0
        }

    def allow(self, topic: str, now_s: float) -> bool:
        bucket = self._buckets.get(topic)
        return bucket is None or bucket.take(now_s)

    def __bool__(self) -> bool:
        return bool(self._buckets)
