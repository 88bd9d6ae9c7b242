"""Delivery and dead-letter rates and lateness, from the replicas' own ``/metrics``.

The admin API answers counts, not rates, so the console samples every replica's
Prometheus endpoint (open, no token) every ``interval_s`` and keeps the last
``history_s`` of samples in memory. A rate is the increase of a counter between two
samples divided by the time between them, per replica, then summed; a counter that went
down was reset (the replica or a worker restarted) and counts from zero, as
Prometheus's ``rate()`` does. Lateness quantiles come from the increase of
``delaybridge_delivery_lateness_seconds`` buckets over the window, interpolated within
a bucket like ``histogram_quantile``.

This is an operator's glance, not a monitoring system: it starts empty when the
console starts (rates need two samples), forgets after ``history_s``, and a replica
that misses a scrape is left out of that interval. Prometheus and the chart's dashboard
remain the record.

:class:`Sampler` runs :meth:`MetricsHistory.sample` on a daemon thread; the history is
read by request threads under a lock.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import pairwise

from prometheus_client.parser import text_string_to_metric_families

from delaybridge.console.replicas import ReplicaError

log = logging.getLogger(__name__)

DELIVERED = "delaybridge_delivered_total"
DEAD_LETTERED = "delaybridge_dead_lettered_total"
ENQUEUED = "delaybridge_enqueued_total"
LATENESS_BUCKET = "delaybridge_delivery_lateness_seconds_bucket"


@dataclass(frozen=True)
class Totals:
    """One replica's counters at one scrape (summed over labels we do not split by)."""

    delivered: float = 0.0
    enqueued: float = 0.0
    dead_lettered: dict[str, float] = field(default_factory=dict)
    #: Cumulative lateness buckets: upper bound in seconds -> count.
    lateness: dict[float, float] = field(default_factory=dict)


def parse(text: str) -> Totals:
    """A replica's ``/metrics`` text as :class:`Totals` (a ``worker`` label is summed)."""
    delivered = enqueued = 0.0
    dead: dict[str, float] = {}
    buckets: dict[float, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == DELIVERED:
                delivered += s.value
            elif s.name == ENQUEUED:
                enqueued += s.value
            elif s.name == DEAD_LETTERED:
                reason = s.labels.get("reason", "")
                dead[reason] = dead.get(reason, 0.0) + s.value
            elif s.name == LATENESS_BUCKET:
                le = float(s.labels["le"])
                buckets[le] = buckets.get(le, 0.0) + s.value
    return Totals(delivered, enqueued, dead, buckets)


@dataclass(frozen=True)
class Sample:
    at_s: float
    replicas: dict[str, Totals]


@dataclass(frozen=True)
class Rates:
    """What the overview shows for a window of ``window_s`` seconds ending now."""

    window_s: float
    delivered_per_s: float
    enqueued_per_s: float
    dead_lettered_per_s: dict[str, float]
    lateness_p50_s: float | None
    lateness_p99_s: float | None
    deliveries: float

    @property
    def dead_lettered_total_per_s(self) -> float:
        return sum(self.dead_lettered_per_s.values())


@dataclass(frozen=True)
class Point:
    """One interval of the history: when it ended, and the rates within it."""

    at_s: float
    delivered_per_s: float
    dead_lettered_per_s: float


def _increase(new: float, old: float) -> float:
    return new if new < old else new - old  # a reset counts from zero


def _between(old: Sample, new: Sample) -> tuple[float, float, dict[str, float], dict[float, float]]:
    delivered = enqueued = 0.0
    dead: dict[str, float] = {}
    buckets: dict[float, float] = {}
    for url, now in new.replicas.items():
        before = old.replicas.get(url)
        if before is None:
            continue
        delivered += _increase(now.delivered, before.delivered)
        enqueued += _increase(now.enqueued, before.enqueued)
        for reason, n in now.dead_lettered.items():
            dead[reason] = dead.get(reason, 0.0) + _increase(n, before.dead_lettered.get(reason, 0))
        reset = now.lateness.get(math.inf, 0.0) < before.lateness.get(math.inf, 0.0)
        for le, n in now.lateness.items():
            gained = n if reset else n - before.lateness.get(le, 0.0)
            buckets[le] = buckets.get(le, 0.0) + max(0.0, gained)
    return delivered, enqueued, dead, buckets


def quantile(q: float, buckets: dict[float, float]) -> float | None:
    """``histogram_quantile(q, ...)`` over cumulative ``buckets``; None when empty."""
    bounds = sorted(buckets)
    if not bounds or buckets.get(math.inf, buckets[bounds[-1]]) <= 0:
        return None
    total = buckets[bounds[-1]]
    rank = q * total
    lower_bound, lower_count = 0.0, 0.0
    for le in bounds:
        count = buckets[le]
        if count >= rank:
            if math.isinf(le):
                return lower_bound  # beyond the last finite bucket: its bound, as Prometheus
            if count == lower_count:
                return le
            return lower_bound + (le - lower_bound) * (rank - lower_count) / (count - lower_count)
        lower_bound, lower_count = le, count
    return bounds[-1]


class MetricsHistory:
    """The last ``history_s`` of samples of every replica's counters."""

    def __init__(self, history_s: float) -> None:
        self._history_s = history_s
        self._samples: deque[Sample] = deque()
        self._lock = threading.Lock()
        self.errors: dict[str, str] = {}
        """The last scrape's failure per replica (empty when all answered)."""

    def add(self, at_s: float, texts: dict[str, str | ReplicaError]) -> None:
        """One round of scrapes: each replica's ``/metrics`` text, or its error."""
        totals: dict[str, Totals] = {}
        errors: dict[str, str] = {}
        for url, text in texts.items():
            if isinstance(text, ReplicaError):
                errors[url] = str(text)
                continue
            try:
                totals[url] = parse(text)
            except ValueError as exc:
                errors[url] = f"unreadable /metrics: {exc}"
        with self._lock:
            self.errors = errors
            self._samples.append(Sample(at_s, totals))
            while self._samples and self._samples[0].at_s < at_s - self._history_s:
                self._samples.popleft()

    def rates(self, window_s: float) -> Rates | None:
        """Rates over the samples of the last ``window_s`` (None before two samples)."""
        with self._lock:
            samples = list(self._samples)
        if len(samples) < 2:
            return None
        newest = samples[-1]
        oldest = next(s for s in samples if s.at_s >= newest.at_s - window_s - 1e-9)
        if oldest is newest:
            oldest = samples[-2]
        span = newest.at_s - oldest.at_s
        delivered = enqueued = 0.0
        dead: dict[str, float] = {}
        buckets: dict[float, float] = {}
        # Interval by interval, so a replica missing from one scrape loses only that one.
        pairs = [s for s in samples if s.at_s >= oldest.at_s]
        for old, new in pairwise(pairs):
            d, e, dl, b = _between(old, new)
            delivered += d
            enqueued += e
            for reason, n in dl.items():
                dead[reason] = dead.get(reason, 0.0) + n
            for le, n in b.items():
                buckets[le] = buckets.get(le, 0.0) + n
        return Rates(
            window_s=span,
            delivered_per_s=delivered / span,
            enqueued_per_s=enqueued / span,
            dead_lettered_per_s={r: n / span for r, n in sorted(dead.items())},
            lateness_p50_s=quantile(0.5, buckets),
            lateness_p99_s=quantile(0.99, buckets),
            deliveries=delivered,
        )

    def points(self) -> list[Point]:
        """Delivered and dead-lettered per second, interval by interval (for a chart)."""
        with self._lock:
            samples = list(self._samples)
        out = []
        for old, new in pairwise(samples):
            span = new.at_s - old.at_s
            if span <= 0:
                continue
            d, _, dead, _ = _between(old, new)
            out.append(Point(new.at_s, d / span, sum(dead.values()) / span))
        return out

    def dead_lettered_totals(self) -> dict[str, float]:
        """Dead letters by reason since each replica started (the newest sample)."""
        with self._lock:
            newest = self._samples[-1] if self._samples else None
        out: dict[str, float] = {}
        for totals in newest.replicas.values() if newest else ():
            for reason, n in totals.dead_lettered.items():
                out[reason] = out.get(reason, 0.0) + n
        return dict(sorted(out.items()))


class Sampler:
    """Scrapes every replica's ``/metrics`` into a :class:`MetricsHistory`, on a thread."""

    def __init__(
        self,
        history: MetricsHistory,
        urls: Callable[[], Iterable[str]],
        scrape: Callable[[str], str],
        interval_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._history = history
        self._urls = urls
        self._scrape = scrape
        self._interval_s = interval_s
        self._clock = clock
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="console-sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=self._interval_s + 15)

    def sample_once(self) -> None:
        texts: dict[str, str | ReplicaError] = {}
        try:
            urls = list(self._urls())
        except Exception as exc:  # a --service that does not resolve: try again later
            log.warning("metrics sampler: cannot list the replicas: %s", exc)
            return
        for url in urls:
            try:
                texts[url] = self._scrape(url)
            except ReplicaError as exc:
                texts[url] = exc
        self._history.add(self._clock(), texts)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample_once()
            self._stop.wait(self._interval_s)
