"""The mapInArrow function on hand-made Arrow batches: classify() decides, row for row."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from delaybridge.contract.jitter import spread_ms
from delaybridge.contract.rules import HeaderRules
from delaybridge.settings import DEFAULT_DELAY_LEVELS
from delaybridge.spark.decisions import Kind, batch_classifier, classify_batch

RULES = HeaderRules.from_strings(DEFAULT_DELAY_LEVELS, 86_400_000, {"routed": "orders"})
HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def _batch(rows: list[dict[str, Any]]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {
            "topic": pa.array([r.get("topic", "delay") for r in rows], pa.string()),
            "partition": pa.array([r.get("partition", 0) for r in rows], pa.int32()),
            "offset": pa.array(list(range(len(rows))), pa.int64()),
            "timestamp_ms": pa.array([1_000_000] * len(rows), pa.int64()),
            "key": pa.array([r.get("key", b"k") for r in rows], pa.binary()),
            "value": pa.array([r.get("value", b"v") for r in rows], pa.binary()),
            "headers": pa.array(
                [[{"key": k, "value": v} for k, v in r.get("headers", [])] for r in rows], HEADERS
            ),
        }
    )


def test_each_kind_of_decision_becomes_one_row() -> None:
    batch = _batch(
        [
            {
                "headers": [
                    ("delay-target-topic", b"orders"),
                    ("delay-ms", b"500"),
                    ("delay-id", b"m1"),
                ]
            },
            {"headers": [("delay-cancel", b"m1")], "partition": 1},
            {"headers": [("delay-ms", b"abc"), ("delay-target-topic", b"orders")]},
            {"topic": "routed", "headers": [("DELAY", b"2")]},
            {"key": b"etf-1", "value": None},
        ]
    )
    out = classify_batch(batch, RULES).to_pylist()
    assert [row["kind"] for row in out] == [
        Kind.SCHEDULE,
        Kind.CANCEL,
        Kind.REJECTED,
        Kind.SCHEDULE,
        Kind.CANCEL,
    ]
    assert (out[0]["id"], out[0]["due_ms"], out[0]["target_topic"]) == ("m1", 1_000_500, "orders")
    assert (out[1]["id"], out[1]["partition"]) == ("m1", 1)
    assert (out[2]["reason"], out[2]["id"]) == ("bad-time", None)
    assert "delay-ms" in out[2]["detail"]
    # A route and RocketMQ level 2 (5 s); the default id names the record.
    assert (out[3]["target_topic"], out[3]["due_ms"], out[3]["id"]) == (
        "orders",
        1_005_000,
        "routed-0-3",
    )
    assert out[4]["id"] == "etf-1"


def test_the_classifier_streams_batches() -> None:
    batches = [_batch([{"headers": [("delay-cancel", b"x")]}]), _batch([])]
    out = list(batch_classifier(RULES)(iter(batches)))
    assert [b.num_rows for b in out] == [1, 0]
    assert out[1].schema == out[0].schema


def test_sliced_batches_and_null_header_lists_keep_rows_aligned() -> None:
    batch = _batch(
        [
            {"headers": [("delay-cancel", b"first")]},
            {"headers": [("delay-cancel", b"second"), ("x", None)]},
            {"key": None, "headers": []},
            {"headers": [("delay-cancel", b"fourth")]},
        ]
    )
    # Spark may hand over a slice of a larger batch, and a record without headers.
    nulled = batch.set_column(
        6,
        "headers",
        pa.array([[], [{"key": "delay-cancel", "value": b"second"}], None, []], HEADERS),
    )
    out = classify_batch(nulled.slice(1, 3), RULES).to_pylist()
    assert [(row["offset"], row["kind"], row["id"]) for row in out] == [
        (1, "cancel", "second"),
        (2, "rejected", None),
        (3, "rejected", None),
    ]
    out = classify_batch(batch.slice(1, 3), RULES).to_pylist()
    assert [row["id"] for row in out] == ["second", None, "fourth"]


def test_a_series_lists_its_occurrences_due_up_to_the_horizon() -> None:
    every = [("delay-target-topic", b"orders"), ("delay-every", b"2s"), ("delay-id", b"s")]
    batch = _batch([{"headers": every}, {"headers": [*every, ("delay-count", b"2")]}])
    out = classify_batch(batch, RULES, horizon_ms=1_007_000).to_pylist()
    assert out[0]["occurrences"] == [{"k": k, "due_ms": 1_000_000 + 2_000 * k} for k in (1, 2, 3)]
    assert [o["k"] for o in out[1]["occurrences"]] == [1, 2]  # delay-count
    first_only = classify_batch(batch, RULES, horizon_ms=0).to_pylist()
    assert first_only[0]["occurrences"] == [{"k": 1, "due_ms": 1_002_000}]  # at least one


def test_a_jittered_schedule_is_owed_at_its_jittered_due_time() -> None:
    # The job owes a message when the sidecar scheduled it: the asked time plus the id's
    # offset (contract/jitter.py), never the asked time alone.
    headers = [("delay-target-topic", b"orders"), ("delay-ms", b"500"), ("delay-id", b"j1")]
    out = classify_batch(_batch([{"headers": [*headers, ("delay-jitter", b"1h")]}]), RULES)
    (row,) = out.to_pylist()
    assert row["kind"] == Kind.SCHEDULE
    assert row["due_ms"] == 1_000_500 + spread_ms("j1", 3_600_000) > 1_000_500


def test_a_prefix_cancel_is_its_own_kind_holding_the_prefix() -> None:
    # outcomes.py matches it by startswith, so a prefix-cancelled message counts as
    # cancelled, not missing; an empty prefix is a rejected record naming the header.
    batch = _batch(
        [
            {"headers": [("delay-cancel-prefix", b"tenant-1/"), ("delay-target-topic", b"orders")]},
            {"headers": [("delay-cancel-prefix", b"")]},
        ]
    )
    prefix, empty = classify_batch(batch, RULES).to_pylist()
    assert (prefix["kind"], prefix["id"], prefix["target_topic"]) == (
        Kind.CANCEL_PREFIX,
        "tenant-1/",
        "orders",
    )
    assert (empty["kind"], empty["reason"]) == (Kind.REJECTED, "bad-header")
    assert "delay-cancel-prefix" in empty["detail"]
