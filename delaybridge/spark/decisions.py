"""Delay-topic rows → the sidecar's decisions, by the sidecar's own :func:`classify`.

The timing rules (precedence of timing headers, delay levels, routes, etf1 tombstones,
the maximum delay) live in :mod:`delaybridge.bridge.headers` only. Re-writing them in
Spark SQL would give two implementations that drift; instead every delay-topic record
goes through ``classify`` in a Python worker, in Arrow batches (``mapInArrow``), and
comes back as one row of :data:`DECISION_SCHEMA`:

====================  ==========================================================
``kind``              ``schedule`` / ``cancel`` / ``rejected`` (:class:`Kind`)
``id``                message id (schedule, cancel); null when rejected
``due_ms``            due time (schedule)
``target_topic``      where it goes (schedule); the topic a cancel is limited to
``reason``/``detail`` the dead-letter reason code and text (rejected)
====================  ==========================================================

plus the record's ``topic``, ``partition``, ``offset`` and ``timestamp_ms``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from delaybridge.bridge.headers import (
    Cancel,
    HeaderRules,
    Rejected,
    Schedule,
    SourceRecord,
    classify,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame


class Kind(StrEnum):
    """What the sidecar does with a delay-topic record."""

    SCHEDULE = "schedule"
    CANCEL = "cancel"
    REJECTED = "rejected"


DECISION_SCHEMA = (
    "topic string, partition int, offset long, timestamp_ms long, kind string, id string, "
    "due_ms long, target_topic string, reason string, detail string"
)

_INPUT_COLUMNS = ("topic", "partition", "offset", "timestamp_ms", "key", "value", "headers")


def classify_rows(rows: DataFrame, rules: HeaderRules) -> DataFrame:
    """Classify Kafka-source rows (with ``timestamp_ms`` added) into decision rows."""
    return rows.select(*_INPUT_COLUMNS).mapInArrow(batch_classifier(rules), DECISION_SCHEMA)


def batch_classifier(
    rules: HeaderRules,
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The mapInArrow function; pure Python, so unit tests call it on hand-made batches."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            yield classify_batch(batch, rules)

    return run


def classify_batch(batch: pa.RecordBatch, rules: HeaderRules) -> pa.RecordBatch:
    """One Arrow batch of source rows → one Arrow batch of decisions, row for row."""
    import pyarrow as pa

    columns = {name: batch.column(name).to_pylist() for name in _INPUT_COLUMNS}
    out: dict[str, list[Any]] = {
        name: [] for name in ("kind", "id", "due_ms", "target_topic", "reason", "detail")
    }
    for i in range(batch.num_rows):
        raw_headers = columns["headers"][i] or ()
        record = SourceRecord(
            topic=columns["topic"][i],
            partition=columns["partition"][i],
            offset=columns["offset"][i],
            timestamp_ms=columns["timestamp_ms"][i],
            key=columns["key"][i],
            value=columns["value"][i],
            headers=[(h["key"], h["value"]) for h in raw_headers],
        )
        _append(out, classify(record, rules))
    return pa.RecordBatch.from_pydict(
        {
            "topic": pa.array(columns["topic"], pa.string()),
            "partition": pa.array(columns["partition"], pa.int32()),
            "offset": pa.array(columns["offset"], pa.int64()),
            "timestamp_ms": pa.array(columns["timestamp_ms"], pa.int64()),
            "kind": pa.array(out["kind"], pa.string()),
            "id": pa.array(out["id"], pa.string()),
            "due_ms": pa.array(out["due_ms"], pa.int64()),
            "target_topic": pa.array(out["target_topic"], pa.string()),
            "reason": pa.array(out["reason"], pa.string()),
            "detail": pa.array(out["detail"], pa.string()),
        }
    )


def _append(out: dict[str, list[Any]], decision: Schedule | Cancel | Rejected) -> None:
    row: tuple[str, str | None, int | None, str | None, str | None, str | None]
    if isinstance(decision, Schedule):
        row = (Kind.SCHEDULE.value, decision.id, decision.due_ms, decision.target_topic, None, None)
    elif isinstance(decision, Cancel):
        row = (Kind.CANCEL.value, decision.id, None, decision.target_topic, None, None)
    else:
        row = (Kind.REJECTED.value, None, None, None, decision.reason.value, decision.detail)
    for name, value in zip(out, row, strict=True):
        out[name].append(value)
