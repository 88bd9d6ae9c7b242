"""The sidecar's Prometheus metrics, in one registry per sidecar.

:class:`Metrics` owns a dedicated ``CollectorRegistry`` (not the process-global one), so
two sidecars in one process, and tests, never collide. The service's owner thread
updates it once per refresh: :meth:`Metrics.count` takes what the loop counted since
the last one (a drained :class:`~delaybridge.bridge.observe.tally.Tally`, whose fields
declare the counters: one Prometheus counter per field), gauges are set from snapshots,
and the lateness histogram takes the whole batch of lateness values in one vectorised
call (:class:`LatenessHistogram`). The HTTP thread only reads, through ``registry``.

Names carry their unit (``_seconds``, ``_bytes``, ``_messages``, ``_total``). Labels are
low-cardinality on purpose; topic names come from producers' headers, so every topic
label goes through a :class:`LabelBudget` that folds values beyond a fixed number into
``"__other__"`` rather than let a stray producer create unbounded series.
docs/operations.md lists every metric with its meaning.

Thread-safety: the update methods are meant for the owner thread; reads (scrapes) may
come from any thread.

The chart's Grafana dashboard (helm/delaybridge/dashboards/delaybridge.json) and alert
rules (helm/delaybridge/templates/prometheusrule.yaml) query these names: renaming one
breaks them, and tests/unit/monitoring/ says which.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace

import numpy as np
import numpy.typing as npt
from prometheus_client import CollectorRegistry, Counter, Gauge, Info, ProcessCollector

from delaybridge import __version__, hotpath
from delaybridge.bridge.flow import Direction
from delaybridge.bridge.observe.labels import (
    DEFAULT_TOPIC_LABELS,
    TARGET_TOPIC,
    Label,
    LabelBudget,
)
from delaybridge.bridge.observe.lateness import LatenessHistogram
from delaybridge.bridge.observe.partition_metrics import PartitionMetrics
from delaybridge.bridge.observe.tally import Tally, declarations


class Metrics:
    """All of the sidecar's metrics; see the module docstring for the update contract."""

    def __init__(self, *, topic_labels: int = DEFAULT_TOPIC_LABELS, process: bool = True) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self._topic_labels = topic_labels
        self._budgets: dict[str, LabelBudget] = {}

        Info("delaybridge_build", "Version of the running sidecar.", registry=r).info(
            {"version": __version__, "hot_path": hotpath.implementation()}  # mypyc or pure
        )
        if process:
            # process_resident_memory_bytes, cpu, open fds: the 1M-in-one-tick RSS check.
            ProcessCollector(registry=r)

        # --- counters: one per declared field of the Tally (observe/tally.py) ---
        self._counters: list[tuple[str, Label | None, Counter]] = []
        for field_name, declared in declarations():
            labels = [] if declared.label is None else [declared.label.name]
            counter = Counter(declared.name, declared.help, labels, registry=r)
            if declared.label is not None:
                for value in declared.label.values:
                    counter.labels(value)
            self._counters.append((field_name, declared.label, counter))
        # Next to its counters, where /metrics has always listed it.
        self._txn_aborts_in_row = Gauge(
            "delaybridge_transaction_consecutive_aborts",
            "Exactly-once mode: aborts since the last commit (alert when it keeps growing).",
            registry=r,
        )

        # --- histogram ---
        self.lateness = LatenessHistogram()
        r.register(self.lateness)

        # --- gauges (set from snapshots) ---
        self._pending = Gauge(
            "delaybridge_pending_messages",
            "Messages stored and not yet delivered or cancelled.",
            [TARGET_TOPIC.name],
            registry=r,
        )
        self._pending_labels: set[str] = set()
        self._wheel_read_lag = Gauge(
            "delaybridge_wheel_read_lag_seconds",
            "Wall clock minus the wheel's read time: how far delivery runs behind.",
            registry=r,
        )
        self._free = Gauge(
            "delaybridge_store_free_bytes",
            "Free space of the data directory's filesystem (ingest pauses under "
            "store.min_free_bytes).",
            registry=r,
        )
        self._in_flight = Gauge(
            "delaybridge_in_flight_messages", "Produced and not yet acknowledged.", registry=r
        )
        self._backlog = Gauge(
            "delaybridge_delivery_backlog_messages",
            "Due messages read from the wheel and not yet acknowledged (waiting or in flight).",
            registry=r,
        )
        self._replace_waits = Gauge(
            "delaybridge_replace_waits",
            "Replaces held for older copies of their id (one table per process, ~73 B "
            "each; kept the grace plus two session timeouts): grows with a bulk load of ids.",
            registry=r,
        )
        self._side_unacked = Gauge(
            "delaybridge_side_writes_unacked",
            "Cancels and dead letters of bad input written to Kafka and not yet acknowledged "
            "(in flight or waiting for a retry); the delay-topic offset commit waits for them.",
            registry=r,
        )
        self._horizon_lag = Gauge(
            "delaybridge_cancel_horizon_lag_seconds",
            "How far the cancel horizon is behind now: due messages later than it wait "
            "until every delay-topic partition's cancels up to their due time are known "
            "(at most cancel_horizon.bound_ms; docs/design/cancel-horizon.md).",
            registry=r,
        )
        self._paused = Gauge(
            "delaybridge_paused",
            "1 while an operator has paused this direction.",
            ["direction"],
            registry=r,
        )
        self._backpressure = Gauge(
            "delaybridge_backpressure_active",
            "1 while ingest is paused by flow control (resumes by itself).",
            registry=r,
        )
        self._disk_pause = Gauge(
            "delaybridge_disk_pause_active",
            "1 while ingest is paused for want of disk space (resumes by itself once "
            "delivery has freed enough: delaybridge_disk_resume_free_bytes).",
            registry=r,
        )
        self._disk_resume = Gauge(
            "delaybridge_disk_resume_free_bytes",
            "Free space of the data directory at which a disk pause of ingest ends at once "
            "(store.min_free_bytes plus what refused appends need plus the margin); 0 while "
            "ingest is not paused for space.",
            registry=r,
        )
        self._assigned = Gauge(
            "delaybridge_assigned_partitions", "Delay-topic partitions owned.", registry=r
        )
        self._heartbeat = Gauge(
            "delaybridge_loop_heartbeat_timestamp_seconds",
            "Unix time of the service loop's last iteration (alert when it stops moving).",
            registry=r,
        )
        self._kafka_reachable = Gauge(
            "delaybridge_kafka_reachable",
            "0 while no Kafka bootstrap server accepts connections (after a client's "
            "connection error), else 1.",
            registry=r,
        )
        self._kafka_reachable.set(1)
        self.partitions = PartitionMetrics(r)
        """Series per delay-topic partition (store, lag, role, restore)."""
        self.set_paused(())

    # --- counters ---
    def count(self, counts: Tally) -> None:
        """Export what the loop counted since the last refresh (a drained :class:`Tally`):
        every declared field into its counter, the lateness values into the histogram.

        A topic label's values go through that label's budget; a negative lateness
        (early: a bug) is counted by ``delaybridge_early_deliveries_total`` and recorded
        as 0."""
        if counts.lateness_ms:
            early = self._observe_lateness_ms(counts.lateness_ms)
            counts = replace(counts, early=counts.early + early)
        for field_name, label, counter in self._counters:
            taken = getattr(counts, field_name)
            if label is None:
                counter.inc(taken)
                continue
            fold = self._budget(label)
            for value, n in taken.items():
                counter.labels(fold(str(value))).inc(n)

    def _observe_lateness_ms(self, lateness_ms: npt.ArrayLike) -> int:
        """One batch of ``actual - due`` in milliseconds; returns how many were early
        (below 0, recorded as 0)."""
        values = np.asarray(lateness_ms, dtype=np.float64).ravel()
        early = int(np.count_nonzero(values < 0))
        if early:
            values = np.maximum(values, 0.0)
        self.lateness.observe_ms(values)
        return early

    def _budget(self, label: Label) -> Callable[[str], str]:
        """What a value of ``label`` is exported as: a topic label's budget (one per label
        name, shared by every metric with that label), the value itself otherwise."""
        if not label.topic:
            return str
        budget = self._budgets.get(label.name)
        if budget is None:
            budget = LabelBudget(self._topic_labels)
            self._budgets[label.name] = budget
        return budget

    # --- gauges ---
    def set_pending(self, by_target_topic: Mapping[str, int]) -> None:
        """Replace the whole per-target-topic pending snapshot (topics gone drop out)."""
        folded: dict[str, int] = {}
        fold = self._budget(TARGET_TOPIC)
        for topic, count in by_target_topic.items():
            label = fold(topic)
            folded[label] = folded.get(label, 0) + count
        for gone in self._pending_labels - folded.keys():
            self._pending.remove(gone)
        for label, count in folded.items():
            self._pending.labels(label).set(count)
        self._pending_labels = set(folded)

    def set_wheel_read_lag_seconds(self, seconds: float) -> None:
        self._wheel_read_lag.set(seconds)

    def set_transaction_consecutive_aborts(self, aborts: int) -> None:
        self._txn_aborts_in_row.set(aborts)

    def set_store_free_bytes(self, n_bytes: int) -> None:
        self._free.set(n_bytes)

    def set_in_flight(self, messages: int) -> None:
        self._in_flight.set(messages)

    def set_delivery_backlog(self, messages: int) -> None:
        self._backlog.set(messages)

    def set_replace_waits(self, rows: int) -> None:
        self._replace_waits.set(rows)

    def set_side_writes_unacked(self, records: int) -> None:
        self._side_unacked.set(records)

    def set_cancel_horizon_lag_seconds(self, seconds: float) -> None:
        self._horizon_lag.set(seconds)

    def set_paused(self, directions: Iterable[Direction]) -> None:
        paused = set(directions)
        for direction in Direction:
            self._paused.labels(direction.value).set(1 if direction in paused else 0)

    def set_backpressure(self, active: bool) -> None:
        self._backpressure.set(1 if active else 0)

    def set_disk_pause(self, active: bool, resume_free_bytes: int) -> None:
        self._disk_pause.set(1 if active else 0)
        self._disk_resume.set(resume_free_bytes if active else 0)

    def set_assigned_partitions(self, n: int) -> None:
        self._assigned.set(n)

    def set_kafka_reachable(self, reachable: bool) -> None:
        self._kafka_reachable.set(1 if reachable else 0)

    def heartbeat(self, now_s: float | None = None) -> None:
        self._heartbeat.set(time.time() if now_s is None else now_s)
