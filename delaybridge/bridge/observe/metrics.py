"""The sidecar's Prometheus metrics, in one registry per sidecar.

:class:`Metrics` owns a dedicated ``CollectorRegistry`` (not the process-global one), so
two sidecars in one process, and tests, never collide. The service's owner thread
updates it once per batch: counters take ``n``, gauges are set from snapshots, and the
lateness histogram takes a whole batch of lateness values in one vectorised call
(:class:`LatenessHistogram`). The HTTP thread only reads, through ``registry``.

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
from collections.abc import Iterable, Mapping

import numpy as np
import numpy.typing as npt
from prometheus_client import CollectorRegistry, Counter, Gauge, Info, ProcessCollector

from delaybridge import __version__, hotpath
from delaybridge.bridge.flow import Direction
from delaybridge.bridge.observe.labels import DEFAULT_TOPIC_LABELS, LabelBudget
from delaybridge.bridge.observe.lateness import LatenessHistogram
from delaybridge.bridge.observe.partition_metrics import PartitionMetrics
from delaybridge.contract.reasons import Reason


class Metrics:
    """All of the sidecar's metrics; see the module docstring for the update contract."""

    def __init__(self, *, topic_labels: int = DEFAULT_TOPIC_LABELS, process: bool = True) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self._delay_topic = LabelBudget(topic_labels)
        self._target_topic = LabelBudget(topic_labels)

        Info("delaybridge_build", "Version of the running sidecar.", registry=r).info(
            {"version": __version__, "hot_path": hotpath.implementation()}  # mypyc or pure
        )
        if process:
            # process_resident_memory_bytes, cpu, open fds: the 1M-in-one-tick RSS check.
            ProcessCollector(registry=r)

        # --- counters (per batch) ---
        self._enqueued = Counter(
            "delaybridge_enqueued", "Records accepted into a store.", ["delay_topic"], registry=r
        )
        self._delivered = Counter(
            "delaybridge_delivered",
            "Messages delivered (acked by the broker).",
            ["target_topic"],
            registry=r,
        )
        self._cancelled = Counter(
            "delaybridge_cancelled", "Pending messages removed by a cancel.", registry=r
        )
        self._replaced = Counter(
            "delaybridge_replaced",
            "Pending messages replaced by a later schedule with the same id and target topic.",
            registry=r,
        )
        self._cancel_unknown = Counter(
            "delaybridge_cancel_unknown",
            "Cancels naming an id that no store holds (already delivered, or never sent).",
            registry=r,
        )
        self._dead_lettered = Counter(
            "delaybridge_dead_lettered",
            "Records sent to the dead-letter topic.",
            ["reason"],
            registry=r,
        )
        self._rolled = Counter(
            "delaybridge_rolled", "Long delays re-entered into the wheel's window.", registry=r
        )
        self._retries = Counter(
            "delaybridge_delivery_retries",
            "Delivery attempts retried with backoff.",
            ["reason"],
            registry=r,
        )
        self._early = Counter(
            "delaybridge_early_deliveries",
            "Records handed out or delivered before their due time. Must stay 0; counted "
            "so an alert can fire (the sidecar holds such a record back, never sends it).",
            registry=r,
        )
        self._cancels_unreadable = Counter(
            "delaybridge_cancels_unreadable",
            "Records on the cancel topic that are not cancels (skipped and logged).",
            registry=r,
        )
        self._cancels_published = Counter(
            "delaybridge_cancels_published",
            "Cancels read from a delay topic and re-published to the cancel topic.",
            registry=r,
        )
        self._backpressure_pauses = Counter(
            "delaybridge_backpressure_pauses",
            "Times ingest paused itself because the store or delivery backlog hit its limit.",
            registry=r,
        )
        self._store_corrupt = Counter(
            "delaybridge_store_corrupt_records",
            "Stored records that failed their CRC when read; readable=true ones are "
            "dead-lettered as store-corrupt, readable=false ones skipped (logged).",
            ["readable"],
            registry=r,
        )
        self._txn_committed = Counter(
            "delaybridge_transactions_committed",
            "Exactly-once mode: transactions committed (one per commit interval with work).",
            registry=r,
        )
        self._txn_aborted = Counter(
            "delaybridge_transactions_aborted",
            "Exactly-once mode: transactions aborted (their partitions restarted from the "
            "last commit).",
            registry=r,
        )
        self._txn_aborts_in_row = Gauge(
            "delaybridge_transaction_consecutive_aborts",
            "Exactly-once mode: aborts since the last commit (alert when it keeps growing).",
            registry=r,
        )
        for reason in Reason:  # every code visible at 0 from the first scrape
            self._dead_lettered.labels(reason.value)
        for readable in ("true", "false"):
            self._store_corrupt.labels(readable)

        # --- histogram ---
        self.lateness = LatenessHistogram()
        r.register(self.lateness)

        # --- gauges (set from snapshots) ---
        self._pending = Gauge(
            "delaybridge_pending_messages",
            "Messages stored and not yet delivered or cancelled.",
            ["target_topic"],
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
        self._assigned = Gauge(
            "delaybridge_assigned_partitions", "Delay-topic partitions owned.", registry=r
        )
        self._heartbeat = Gauge(
            "delaybridge_loop_heartbeat_timestamp_seconds",
            "Unix time of the service loop's last iteration (alert when it stops moving).",
            registry=r,
        )
        self.partitions = PartitionMetrics(r)
        """Series per delay-topic partition (store, lag, role, restore)."""
        self.set_paused(())

    # --- counters ---
    def enqueued(self, delay_topic: str, n: int = 1) -> None:
        self._enqueued.labels(self._delay_topic(delay_topic)).inc(n)

    def delivered(self, target_topic: str, n: int = 1) -> None:
        self._delivered.labels(self._target_topic(target_topic)).inc(n)

    def cancelled(self, n: int = 1) -> None:
        self._cancelled.inc(n)

    def replaced(self, n: int = 1) -> None:
        self._replaced.inc(n)

    def cancel_unknown(self, n: int = 1) -> None:
        self._cancel_unknown.inc(n)

    def cancels_published(self, n: int = 1) -> None:
        self._cancels_published.inc(n)

    def cancels_unreadable(self, n: int = 1) -> None:
        self._cancels_unreadable.inc(n)

    def early(self, n: int = 1) -> None:
        self._early.inc(n)

    def dead_lettered(self, reason: Reason, n: int = 1) -> None:
        self._dead_lettered.labels(Reason(reason).value).inc(n)

    def rolled(self, n: int = 1) -> None:
        self._rolled.inc(n)

    def store_corrupt(self, readable: str, n: int = 1) -> None:
        self._store_corrupt.labels(readable).inc(n)

    def delivery_retried(self, reason: Reason, n: int = 1) -> None:
        self._retries.labels(Reason(reason).value).inc(n)

    def transactions_committed(self, n: int = 1) -> None:
        self._txn_committed.inc(n)

    def transactions_aborted(self, n: int = 1) -> None:
        self._txn_aborted.inc(n)

    def backpressure_pauses(self, n: int = 1) -> None:
        self._backpressure_pauses.inc(n)

    def observe_lateness_ms(self, lateness_ms: npt.ArrayLike) -> None:
        """One batch of ``actual - due`` in milliseconds. Negative values (early: a bug)
        are counted by ``delaybridge_early_deliveries_total`` and recorded as 0."""
        values = np.asarray(lateness_ms, dtype=np.float64).ravel()
        early = int(np.count_nonzero(values < 0))
        if early:
            self._early.inc(early)
            values = np.maximum(values, 0.0)
        self.lateness.observe_ms(values)

    # --- gauges ---
    def set_pending(self, by_target_topic: Mapping[str, int]) -> None:
        """Replace the whole per-target-topic pending snapshot (topics gone drop out)."""
        folded: dict[str, int] = {}
        for topic, count in by_target_topic.items():
            label = self._target_topic(topic)
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

    def set_paused(self, directions: Iterable[Direction]) -> None:
        paused = set(directions)
        for direction in Direction:
            self._paused.labels(direction.value).set(1 if direction in paused else 0)

    def set_backpressure(self, active: bool) -> None:
        self._backpressure.set(1 if active else 0)

    def set_assigned_partitions(self, n: int) -> None:
        self._assigned.set(n)

    def heartbeat(self, now_s: float | None = None) -> None:
        self._heartbeat.set(time.time() if now_s is None else now_s)
