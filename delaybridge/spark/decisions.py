"""Delay-topic rows → the sidecar's decisions, by the sidecar's own :func:`classify`.

The timing rules (precedence of timing headers, delay levels, routes, etf1 tombstones,
the maximum delay) live in :mod:`delaybridge.contract.classify` only. Re-writing them in
Spark SQL would give two implementations that drift; instead every delay-topic record
goes through ``classify`` in a Python worker, in Arrow batches (``mapInArrow``), and
comes back as one row of :data:`DECISION_SCHEMA`:

====================  ==========================================================
``kind``              ``schedule`` / ``cancel`` / ``cancel-prefix`` / ``rejected``
                      (:class:`Kind`)
``id``                message id (schedule, cancel), the prefix (cancel-prefix); null
                      when rejected
``due_ms``            due time (schedule)
``target_topic``      where it goes (schedule); the topic a cancel is limited to
``replace``           the schedule replaces earlier ones with its id and target
``reason``/``detail`` the dead-letter reason code and text (rejected)
``occurrences``       a recurring schedule's occurrences due up to the horizon, as
                      ``(k, due_ms)`` structs (``Series.expand``; at least the first,
                      at most ``MAX_OCCURRENCES``); null for a one-off
====================  ==========================================================

plus the record's ``topic``, ``partition``, ``offset`` and ``timestamp_ms``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from enum import StrEnum
from typing import TYPE_CHECKING

from delaybridge.contract.classify import Cancel, Schedule, SourceRecord, classify
from delaybridge.contract.rules import HeaderRules

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame


class Kind(StrEnum):
    """What the sidecar does with a delay-topic record."""

    SCHEDULE = "schedule"
    CANCEL = "cancel"
    CANCEL_PREFIX = "cancel-prefix"
    """``delay-cancel-prefix``: ``id`` is a prefix (outcomes.py matches by ``startswith``)."""
    REJECTED = "rejected"


DECISION_SCHEMA = (
    "topic string, partition int, offset long, timestamp_ms long, kind string, id string, "
    "due_ms long, target_topic string, replace boolean, reason string, detail string, "
    "occurrences array<struct<k:int,due_ms:long>>"
)
#: Occurrences a single series record expands into, at most (a per-second series over a
#: month would be 2.6M rows: the report stops expecting beyond this).
MAX_OCCURRENCES = 100_000

_INPUT_COLUMNS = ("topic", "partition", "offset", "timestamp_ms", "key", "value", "headers")


def classify_rows(rows: DataFrame, rules: HeaderRules, horizon_ms: int | None = None) -> DataFrame:
    """Classify Kafka-source rows (with ``timestamp_ms`` added) into decision rows;
    recurring schedules list their occurrences due up to ``horizon_ms``."""
    classifier = batch_classifier(rules, horizon_ms)
    return rows.select(*_INPUT_COLUMNS).mapInArrow(classifier, DECISION_SCHEMA)


def batch_classifier(
    rules: HeaderRules, horizon_ms: int | None = None
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The mapInArrow function; pure Python, so unit tests call it on hand-made batches."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            yield classify_batch(batch, rules, horizon_ms)

    return run


def classify_batch(
    batch: pa.RecordBatch, rules: HeaderRules, horizon_ms: int | None = None
) -> pa.RecordBatch:
    """One Arrow batch of source rows → one Arrow batch of decisions, row for row.

    The hot loop of the job (one iteration per delay-topic record): headers are read as
    two flat lists plus offsets rather than one dict per header, and the record's
    position columns pass through as Arrow arrays without a round trip to Python.
    """
    import pyarrow as pa

    topics = batch.column("topic").to_pylist()
    partitions = batch.column("partition").to_pylist()
    offsets = batch.column("offset").to_pylist()
    timestamps = batch.column("timestamp_ms").to_pylist()
    keys = batch.column("key").to_pylist()
    values = batch.column("value").to_pylist()
    headers = batch.column("headers")
    # .offsets and .values index the same (unsliced) child array; null lists are empty.
    bounds = headers.offsets.to_pylist()
    header_keys = headers.values.field("key").to_pylist()
    header_values = headers.values.field("value").to_pylist()
    kinds: list[str] = []
    ids: list[str | None] = []
    dues: list[int | None] = []
    targets: list[str | None] = []
    replaces: list[bool] = []
    reasons: list[str | None] = []
    details: list[str | None] = []
    occurrences: list[list[dict[str, int]] | None] = []
    for i in range(batch.num_rows):
        lo, hi = bounds[i], bounds[i + 1]
        decision = classify(
            SourceRecord(
                topics[i],
                partitions[i],
                offsets[i],
                timestamps[i],
                keys[i],
                values[i],
                list(zip(header_keys[lo:hi], header_values[lo:hi], strict=True)),
            ),
            rules,
        )
        occurrences.append(None)
        if isinstance(decision, Schedule):
            if decision.series is not None:
                upto = max(horizon_ms or 0, decision.due_ms)  # the first one, at least
                expanded = decision.series.expand(upto, MAX_OCCURRENCES)
                occurrences[-1] = [{"k": k, "due_ms": due} for k, due in expanded]
            kinds.append(Kind.SCHEDULE.value)
            ids.append(decision.id)
            dues.append(decision.due_ms)
            targets.append(decision.target_topic)
            replaces.append(decision.replace)
            reasons.append(None)
            details.append(None)
        elif isinstance(decision, Cancel):
            kinds.append(Kind.CANCEL_PREFIX.value if decision.prefix else Kind.CANCEL.value)
            ids.append(decision.id)
            dues.append(None)
            targets.append(decision.target_topic)
            replaces.append(False)
            reasons.append(None)
            details.append(None)
        else:
            kinds.append(Kind.REJECTED.value)
            ids.append(None)
            dues.append(None)
            targets.append(None)
            replaces.append(False)
            reasons.append(decision.reason.value)
            details.append(decision.detail)
    return pa.RecordBatch.from_pydict(
        {
            "topic": batch.column("topic").cast(pa.string()),
            "partition": batch.column("partition").cast(pa.int32()),
            "offset": batch.column("offset").cast(pa.int64()),
            "timestamp_ms": batch.column("timestamp_ms").cast(pa.int64()),
            "kind": pa.array(kinds, pa.string()),
            "id": pa.array(ids, pa.string()),
            "due_ms": pa.array(dues, pa.int64()),
            "target_topic": pa.array(targets, pa.string()),
            "replace": pa.array(replaces, pa.bool_()),
            "reason": pa.array(reasons, pa.string()),
            "detail": pa.array(details, pa.string()),
            "occurrences": pa.array(
                occurrences, pa.list_(pa.struct([("k", pa.int32()), ("due_ms", pa.int64())]))
            ),
        }
    )
