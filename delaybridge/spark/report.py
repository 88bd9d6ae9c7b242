"""The reconciliation report: plain data, built from the few rows Spark aggregates.

Everything here is pure Python (no Spark), so the verdict, the JSON layout and the
console/chart rendering are unit-tested without a session. Spark hands over one row per
``(target topic, due window)`` plus the rollups per topic and overall (``grouping``
tells which), and a few per-topic side counts; :func:`split_rollup` sorts them.

Verdict: the run *fails* (exit code 1) when any due message is missing or any message
was delivered early — the two things the sidecar promises never to do. Duplicates
(at-least-once mode allows them after a crash), lateness and cancels that lost a race
are reported but do not fail the run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from itertools import pairwise
from typing import Any

EXIT_OK = 0
EXIT_PROBLEMS = 1

# Lateness histogram bucket edges, ms: bucket i holds edges[i] <= lateness < edges[i+1];
# the first bucket (below 0) is early, the last is open-ended.
LATENESS_EDGES_MS = (0, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 30_000, 60_000)


def lateness_bucket_labels() -> list[str]:
    """``["< 0", "0–100", ..., "≥ 60000"]`` (ms), one per histogram bucket."""
    edges = LATENESS_EDGES_MS
    inner = [f"{lo:g}–{hi:g}" for lo, hi in pairwise(edges)]
    return ["< 0", *inner, f"≥ {edges[-1]:g}"]


@dataclass(frozen=True)
class Counts:
    """Per-message outcomes (each message counted once) and first-delivery lateness."""

    sent: int = 0  # schedule records
    cancelled: int = 0  # a matching cancel reached Kafka before the due time
    replaced: int = 0  # a later schedule with its id and target came before the due time
    due: int = 0  # not cancelled and due_ms <= as_of - grace
    delivered: int = 0  # not cancelled, at least one delivery (due or not)
    missing: int = 0  # due, never delivered
    duplicated: int = 0  # delivered more than once
    extra_copies: int = 0  # deliveries beyond the first
    early: int = 0  # first delivery before due_ms
    late: int = 0  # first delivery more than late_after_ms after due_ms
    pending: int = 0  # not due yet, not delivered yet
    expired: int = 0  # past its deadline, dead-lettered as expired (not delivered)
    cancel_ignored: int = 0  # cancelled or replaced in time, delivered anyway
    cancel_too_late: int = 0  # the cancel came at or after the due time
    lateness_p50_ms: int | None = None
    lateness_p99_ms: int | None = None
    lateness_max_ms: int | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Counts:
        """Take the fields of this class from ``row``; missing counters are 0."""
        values: dict[str, Any] = {}
        for f in fields(cls):
            value = row.get(f.name)
            if f.name.startswith("lateness_"):
                values[f.name] = None if value is None else int(value)
            else:
                values[f.name] = int(value or 0)
        return cls(**values)


@dataclass(frozen=True)
class WindowRow:
    target_topic: str
    window_start_ms: int
    counts: Counts


@dataclass(frozen=True)
class TargetSummary:
    """One target topic: the totals of its windows plus what did not join."""

    topic: str
    counts: Counts
    records: int = 0  # records read from the topic
    no_delay_id: int = 0  # not written by the sidecar
    malformed: int = 0  # delay-id present, provenance headers unreadable
    unmatched: int = 0  # well-formed delivery whose id no schedule in range has
    exists: bool = True


@dataclass(frozen=True)
class DelaySummary:
    """One delay topic: what the records in range were, as ``classify`` sees them."""

    topic: str
    records: int = 0
    schedules: int = 0
    resent: int = 0  # schedule records repeating an id already scheduled
    cancels: int = 0
    cancel_unknown: int = 0  # cancels matching no schedule in range
    rejected: dict[str, int] = field(default_factory=dict)  # by reason code
    other_targets: int = 0  # schedules for target topics this run did not read


@dataclass(frozen=True)
class Report:
    as_of_ms: int
    due_cutoff_ms: int
    window_ms: int
    grace_ms: int
    late_after_ms: int
    totals: Counts
    windows: list[WindowRow]
    targets: list[TargetSummary]
    delay_topics: list[DelaySummary]
    # The offsets read, per topic and partition: [start, end).
    snapshot: dict[str, dict[str, list[int]]] = field(default_factory=dict)
    # Delivered messages per lateness bucket (lateness_bucket_labels()), all topics.
    lateness_histogram: list[int] = field(default_factory=list)
    # A few offending ids (or records) per kind; the Parquet files hold all of them.
    examples: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    elapsed_s: float = 0.0
    # Wall-clock seconds per step of the job (snapshot, classify, join, ...).
    step_s: dict[str, float] = field(default_factory=dict)
    # Exactly-once mode: a duplicate is a failure too.
    exactly_once: bool = False

    @property
    def failures(self) -> list[str]:
        """Why the run fails, one phrase each; empty when it passes."""
        found = []
        if self.totals.missing:
            found.append(f"{self.totals.missing} missing")
        if self.totals.early:
            found.append(f"{self.totals.early} early")
        if self.exactly_once and self.totals.duplicated:
            found.append(f"{self.totals.duplicated} duplicated (exactly-once mode)")
        return found

    @property
    def exit_code(self) -> int:
        return EXIT_PROBLEMS if self.failures else EXIT_OK

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["failures"] = self.failures
        data["ok"] = not self.failures
        return data


def split_rollup(
    rows: Iterable[Mapping[str, Any]],
) -> tuple[list[WindowRow], dict[str, Counts], Counts]:
    """Rollup rows → (windows, totals per topic, overall totals).

    Each row has ``target_topic``, ``window_start_ms``, the :class:`Counts` fields, and
    ``grouping``: 0 for a (topic, window) row, 1 for a topic total, 3 for the grand total
    (Spark's ``grouping_id()`` for ``rollup(target_topic, window_start_ms)``).
    """
    windows: list[WindowRow] = []
    per_topic: dict[str, Counts] = {}
    overall = Counts()
    for row in rows:
        grouping = int(row["grouping"])
        counts = Counts.from_row(row)
        if grouping == 0:
            windows.append(WindowRow(row["target_topic"], int(row["window_start_ms"]), counts))
        elif grouping == 1:
            per_topic[row["target_topic"]] = counts
        elif grouping == 3:
            overall = counts
        else:
            raise ValueError(f"unexpected grouping id {grouping} in rollup row {dict(row)}")
    windows.sort(key=lambda w: (w.target_topic, w.window_start_ms))
    return windows, per_topic, overall
