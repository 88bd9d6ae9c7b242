"""A Prometheus histogram fed a whole batch of observations per call.

The sidecar delivers in batches (up to a million messages in one tick), and records
each message's lateness. prometheus-client's ``Histogram.observe`` takes one value per
call under a lock; :class:`LatenessHistogram` instead sorts a batch into buckets with
one vectorised numpy pass and takes its lock once, so the cost per message is a few
nanoseconds and the scrape still sees a consistent (count, sum, buckets) triple.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Sequence

import numpy as np
import numpy.typing as npt
from prometheus_client.core import HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

#: Upper bounds (seconds) of the lateness buckets: fine around one tick (default 100 ms),
#: where the acceptance bound "tick + 50 ms" sits, coarse out to a minute.
LATENESS_BUCKETS_S = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.125,
    0.15,
    0.2,
    0.25,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
)


class LatenessHistogram(Collector):
    """``delaybridge_delivery_lateness_seconds``: a histogram fed a batch at a time.

    prometheus-client's Histogram takes one value per call under a lock; a tick that
    delivers a million messages would pay that a million times. Here one
    ``np.searchsorted`` + ``np.bincount`` per batch sorts the batch into buckets (a value
    equal to a bound counts in that bound's bucket, as Prometheus' ``le`` means), and
    one lock guards the arrays against a concurrent scrape.
    """

    name = "delaybridge_delivery_lateness_seconds"
    documentation = "Actual delivery time minus due time, per delivered message."

    def __init__(self, buckets_s: Sequence[float] = LATENESS_BUCKETS_S) -> None:
        self._bounds_ms = np.asarray([b * 1000.0 for b in buckets_s], dtype=np.float64)
        self._labels = [_float_label(b) for b in buckets_s] + ["+Inf"]
        self._counts = np.zeros(len(buckets_s) + 1, dtype=np.int64)
        self._sum_ms = 0.0
        self._lock = threading.Lock()

    def observe_ms(self, lateness_ms: npt.ArrayLike) -> None:
        values = np.asarray(lateness_ms, dtype=np.float64).ravel()
        if values.size == 0:
            return
        buckets = np.searchsorted(self._bounds_ms, values, side="left")
        counts = np.bincount(buckets, minlength=self._counts.size)
        total = float(values.sum())
        with self._lock:
            self._counts += counts
            self._sum_ms += total

    def describe(self) -> Iterable[Metric]:
        yield HistogramMetricFamily(self.name, self.documentation)

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            cumulative = np.cumsum(self._counts).tolist()
            sum_s = self._sum_ms / 1000.0
        yield HistogramMetricFamily(
            self.name,
            self.documentation,
            buckets=list(zip(self._labels, cumulative, strict=True)),
            sum_value=sum_s,
        )


def _float_label(bound: float) -> str:
    return repr(float(bound))
