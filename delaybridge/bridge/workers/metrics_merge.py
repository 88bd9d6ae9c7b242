"""One ``/metrics`` for several worker processes: every worker's series, labelled.

The supervisor (``supervisor.py``) answers a scrape by scraping each worker's own
registry over loopback (OpenMetrics, so counters keep their ``_created`` samples with
them), adding a ``worker="<index>"`` label to every sample and exposing the union, plus
its own series (:class:`SupervisorMetrics`: workers up, restarts). Sums across workers
are a ``sum without (worker)`` away in PromQL; per-worker series keep what a sum would
hide (one worker stuck, one worker's partitions lagging).

Why not prometheus_client's multiprocess mode: it covers counters, gauges and
histograms written through its mmap files only, not the collectors the sidecar computes
at scrape time (process metrics, build info), needs a directory wiped at every start,
and turns a killed worker's gauges into stale values unless each gauge picks a mode;
scraping the live workers shows exactly what each one reports, and a dead one shows
nothing but ``delaybridge_worker_up 0``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.metrics_core import Metric
from prometheus_client.openmetrics.parser import text_string_to_metric_families

#: Ask a worker for this, so its counters' ``_created`` samples stay in their family.
OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"
WORKER_LABEL = "worker"


class SupervisorMetrics:
    """The supervisor's own series (registered in ``registry``)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.workers = Gauge(
            "delaybridge_workers", "Worker processes configured", registry=registry
        )
        self.up = Gauge(
            "delaybridge_worker_up",
            "1 while the worker process runs and answered the last scrape, else 0",
            [WORKER_LABEL],
            registry=registry,
        )
        self.restarts = Counter(
            "delaybridge_worker_restarts",
            "Worker processes that ended without being asked to and were started again",
            [WORKER_LABEL],
            registry=registry,
        )


def labelled(text: str, worker: str) -> list[Metric]:
    """A worker's OpenMetrics exposition as families, every sample labelled ``worker``."""
    families = []
    for family in text_string_to_metric_families(text):  # type: ignore[no-untyped-call]
        family.samples = [
            s._replace(labels={**s.labels, WORKER_LABEL: worker}) for s in family.samples
        ]
        families.append(family)
    return families


def merge(by_worker: Mapping[str, Iterable[Metric]]) -> list[Metric]:
    """The families of every worker, one family per name (its samples in worker order).

    A family two workers describe differently (a mixed-version pod during an upgrade)
    keeps the first worker's type and help text."""
    merged: dict[str, Metric] = {}
    for families in by_worker.values():
        for family in families:
            into = merged.get(family.name)
            if into is None:
                into = Metric(family.name, family.documentation, family.type, family.unit)
                merged[family.name] = into
            if into.type == family.type:
                into.samples.extend(family.samples)
    return list(merged.values())


class Snapshot:
    """What one scrape exposes: fixed families, in the shape the encoders take (a
    registry's ``collect()``); one per scrape, so concurrent scrapes do not mix."""

    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterable[Metric]:
        return list(self._families)
