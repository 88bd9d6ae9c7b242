"""The sidecar's metrics: names, labels, batch updates, and the batch lateness histogram."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from delaybridge.bridge.flow import Direction
from delaybridge.bridge.observe.labels import OTHER, LabelBudget
from delaybridge.bridge.observe.lateness import LATENESS_BUCKETS_S
from delaybridge.bridge.observe.metrics import Metrics
from delaybridge.bridge.observe.tally import Tally
from delaybridge.contract.reasons import SIDECAR_REASONS, Reason

LATENESS = "delaybridge_delivery_lateness_seconds"


@pytest.fixture
def m() -> Metrics:
    return Metrics(process=False)


def value(m: Metrics, name: str, **labels: str) -> float | None:
    return m.registry.get_sample_value(name, labels)


def test_counters_take_a_batch_count(m: Metrics) -> None:
    m.count(Tally(enqueued=Counter({"delay": 500})))
    m.count(
        Tally(
            enqueued=Counter({"delay": 2}),
            delivered=Counter({"orders": 7}),
            cancelled=3,
            cancel_unknown=1,
            dead_lettered=Counter({Reason.BAD_TIME: 4}),
            rolled=8,
            retries=Counter({Reason.TARGET_TOPIC_MISSING: 9}),
        )
    )
    assert value(m, "delaybridge_enqueued_total", delay_topic="delay") == 502
    assert value(m, "delaybridge_delivered_total", target_topic="orders") == 7
    assert value(m, "delaybridge_cancelled_total") == 3
    assert value(m, "delaybridge_cancel_unknown_total") == 1
    assert value(m, "delaybridge_dead_lettered_total", reason="bad-time") == 4
    assert value(m, "delaybridge_rolled_total") == 8
    assert value(m, "delaybridge_delivery_retries_total", reason="target-topic-missing") == 9


def test_every_dead_letter_reason_is_exported_from_the_start(m: Metrics) -> None:
    for reason in SIDECAR_REASONS:
        assert value(m, "delaybridge_dead_lettered_total", reason=reason.value) == 0
    # A client's reason (retry_later's retries-exhausted) is never the sidecar's count.
    assert value(m, "delaybridge_dead_lettered_total", reason="retries-exhausted") is None


def test_lateness_buckets_are_le_inclusive_and_cumulative(m: Metrics) -> None:
    # 100 ms exactly belongs to le="0.1"; 100.5 ms to the next bucket; 70 s only to +Inf.
    m.count(Tally(lateness_ms=[0, 5, 100, 70_000]))
    m.lateness.observe_ms(np.array([100.5]))  # the histogram takes fractions too
    m.count(Tally(lateness_ms=[20]))
    assert value(m, LATENESS + "_bucket", le="0.005") == 2
    assert value(m, LATENESS + "_bucket", le="0.025") == 3
    assert value(m, LATENESS + "_bucket", le="0.1") == 4
    assert value(m, LATENESS + "_bucket", le="0.125") == 5
    assert value(m, LATENESS + "_bucket", le="60.0") == 5
    assert value(m, LATENESS + "_bucket", le="+Inf") == 6
    assert value(m, LATENESS + "_count") == 6
    assert value(m, LATENESS + "_sum") == pytest.approx(70.2255)


def test_lateness_matches_a_per_value_model(m: Metrics) -> None:
    rng = np.random.default_rng(7)
    values = rng.exponential(80.0, size=10_000)
    m.lateness.observe_ms(values)
    for bound in LATENESS_BUCKETS_S:
        expected = int(np.count_nonzero(values <= bound * 1000))
        assert value(m, LATENESS + "_bucket", le=repr(bound)) == expected


def test_early_deliveries_are_counted_and_recorded_as_zero(m: Metrics) -> None:
    m.count(Tally(early=1, lateness_ms=[-3, -1, 10]))
    assert value(m, "delaybridge_early_deliveries_total") == 3
    assert value(m, LATENESS + "_bucket", le="0.005") == 2
    assert value(m, LATENESS + "_sum") == pytest.approx(0.01)


def test_an_empty_tally_changes_nothing(m: Metrics) -> None:
    m.count(Tally())
    assert value(m, LATENESS + "_count") == 0
    assert value(m, "delaybridge_cancelled_total") == 0
    assert value(m, "delaybridge_delivered_total", target_topic="orders") is None


def test_pending_snapshot_replaces_the_previous_one(m: Metrics) -> None:
    m.set_pending({"a": 3, "b": 4})
    m.set_pending({"b": 1, "c": 2})
    assert value(m, "delaybridge_pending_messages", target_topic="a") is None
    assert value(m, "delaybridge_pending_messages", target_topic="b") == 1
    assert value(m, "delaybridge_pending_messages", target_topic="c") == 2


def test_topic_labels_beyond_the_budget_fold_into_other() -> None:
    m = Metrics(topic_labels=2, process=False)
    m.set_pending({"a": 1, "b": 2, "c": 3, "d": 4})
    m.count(Tally(delivered=Counter({"e": 5}), enqueued=Counter({"x": 1, "y": 1, "z": 1})))
    assert value(m, "delaybridge_pending_messages", target_topic="a") == 1
    assert value(m, "delaybridge_pending_messages", target_topic=OTHER) == 7
    assert value(m, "delaybridge_delivered_total", target_topic=OTHER) == 5
    # Each topic label has a budget of its own: delay topics are not folded by the
    # target topics seen before them.
    assert value(m, "delaybridge_enqueued_total", delay_topic="y") == 1
    assert value(m, "delaybridge_enqueued_total", delay_topic=OTHER) == 1


def test_label_budget_keeps_values_it_has_seen() -> None:
    budget = LabelBudget(1)
    assert budget("x") == "x"
    assert budget("y") == OTHER
    assert budget("x") == "x"


def test_partition_gauges_and_forget(m: Metrics) -> None:
    m.partitions.set_store_bytes("delay", 3, 4096)
    m.partitions.set_consumer_lag("delay", 3, 12)
    m.partitions.store_recovered("delay", 3, 0.25)
    assert value(m, "delaybridge_store_bytes", topic="delay", partition="3") == 4096
    assert value(m, "delaybridge_consumer_lag_messages", topic="delay", partition="3") == 12
    assert value(m, "delaybridge_store_recovery_seconds", topic="delay", partition="3") == 0.25
    m.partitions.forget("delay", 3)
    m.partitions.forget("delay", 9)  # never set: no error
    assert value(m, "delaybridge_store_bytes", topic="delay", partition="3") is None
    assert value(m, "delaybridge_consumer_lag_messages", topic="delay", partition="3") is None


def test_scalar_gauges(m: Metrics) -> None:
    m.set_wheel_read_lag_seconds(0.4)
    m.set_in_flight(10)
    m.set_delivery_backlog(20)
    m.set_backpressure(True)
    m.count(Tally(backpressure_pauses=1))
    m.set_transaction_consecutive_aborts(2)
    m.set_assigned_partitions(6)
    m.heartbeat(1234.5)
    assert value(m, "delaybridge_wheel_read_lag_seconds") == 0.4
    assert value(m, "delaybridge_in_flight_messages") == 10
    assert value(m, "delaybridge_delivery_backlog_messages") == 20
    assert value(m, "delaybridge_backpressure_active") == 1
    assert value(m, "delaybridge_backpressure_pauses_total") == 1
    assert value(m, "delaybridge_transaction_consecutive_aborts") == 2
    assert value(m, "delaybridge_assigned_partitions") == 6
    assert value(m, "delaybridge_loop_heartbeat_timestamp_seconds") == 1234.5


def test_paused_gauge_shows_both_directions(m: Metrics) -> None:
    assert value(m, "delaybridge_paused", direction="enqueue") == 0
    m.set_paused({Direction.DEQUEUE})
    assert value(m, "delaybridge_paused", direction="enqueue") == 0
    assert value(m, "delaybridge_paused", direction="dequeue") == 1


def test_two_sidecars_in_one_process_do_not_collide() -> None:
    first, second = Metrics(), Metrics()
    first.count(Tally(cancelled=2))
    assert value(first, "delaybridge_cancelled_total") == 2
    assert value(second, "delaybridge_cancelled_total") == 0
    assert second.registry.get_sample_value("process_resident_memory_bytes") is not None


def test_exposition_parses_and_names_carry_units(m: Metrics) -> None:
    m.count(
        Tally(enqueued=Counter({"delay": 1}), delivered=Counter({"orders": 1}), lateness_ms=[1])
    )
    m.set_pending({"orders": 1})
    m.partitions.set_store_bytes("delay", 0, 1)
    m.partitions.set_consumer_lag("delay", 0, 1)
    families = {
        f.name for f in text_string_to_metric_families(generate_latest(m.registry).decode())
    }
    for name in (
        "delaybridge_pending_messages",
        "delaybridge_enqueued",
        "delaybridge_delivered",
        "delaybridge_cancelled",
        "delaybridge_cancel_unknown",
        "delaybridge_dead_lettered",
        LATENESS,
        "delaybridge_wheel_read_lag_seconds",
        "delaybridge_store_bytes",
        "delaybridge_consumer_lag_messages",
        "delaybridge_in_flight_messages",
        "delaybridge_paused",
        "delaybridge_build_info",
    ):
        assert name in families, name


# The counters /metrics exported at f0969c4, before each was declared once in the Tally:
# name, help text and label names; the dashboard, the alert rules and
# docs/operations.md depend on every one of them.
COUNTERS_AT_F0969C4 = {
    "delaybridge_enqueued": ("Records accepted into a store.", ("delay_topic",)),
    "delaybridge_delivered": ("Messages delivered (acked by the broker).", ("target_topic",)),
    "delaybridge_cancelled": ("Pending messages removed by a cancel.", ()),
    "delaybridge_replaced": (
        "Pending messages replaced by a later schedule with the same id and target topic.",
        (),
    ),
    "delaybridge_cancel_unknown": (
        "Cancels naming an id that no store holds (already delivered, or never sent).",
        (),
    ),
    "delaybridge_dead_lettered": ("Records sent to the dead-letter topic.", ("reason",)),
    "delaybridge_rolled": ("Long delays re-entered into the wheel's window.", ()),
    "delaybridge_delivery_retries": ("Delivery attempts retried with backoff.", ("reason",)),
    "delaybridge_early_deliveries": (
        "Records handed out or delivered before their due time. Must stay 0; counted so an "
        "alert can fire (the sidecar holds such a record back, never sends it).",
        (),
    ),
    "delaybridge_cancels_unreadable": (
        "Records on the cancel topic that are not cancels (skipped and logged).",
        (),
    ),
    "delaybridge_cancels_published": (
        "Cancels read from a delay topic and re-published to the cancel topic.",
        (),
    ),
    "delaybridge_backpressure_pauses": (
        "Times ingest paused itself because the store or delivery backlog hit its limit.",
        (),
    ),
    "delaybridge_store_corrupt_records": (
        "Stored records that failed their CRC when read; readable=true ones are "
        "dead-lettered as store-corrupt, readable=false ones skipped (logged).",
        ("readable",),
    ),
    "delaybridge_transactions_committed": (
        "Exactly-once mode: transactions committed (one per commit interval with work).",
        (),
    ),
    "delaybridge_transactions_aborted": (
        "Exactly-once mode: transactions aborted (their partitions restarted from the last "
        "commit).",
        (),
    ),
    "delaybridge_restored_records": (
        "Changelog records read to restore a partition's store.",
        ("topic", "partition"),
    ),
}
# Counters added since, each by the issue that asked for it.
COUNTERS_ADDED = {
    "delaybridge_deliveries_past_horizon": (  # issue 25: the cancel horizon's bound
        "Messages delivered although some delay-topic partition's cancels up to their due "
        "time were not known yet: cancel_horizon.bound_ms let them go "
        "(docs/design/cancel-horizon.md). A cancel sent for them may have come too late.",
        (),
    ),
    "delaybridge_disk_pauses": (  # issue 25 item 4: the disk pause seen
        "Times ingest paused for want of disk space (free space under "
        "store.min_free_bytes, or a write refused); each resumes by itself.",
        (),
    ),
}
# Series of existing counters added since, each by the issue that asked for it.
SERIES_ADDED = {
    ("delaybridge_dead_lettered_total", (("reason", "expired"),)),  # issue 27: expiry
}
# The series of those counters in the first scrape, before anything is counted.
FIRST_SCRAPE_AT_F0969C4 = {
    *(
        ("delaybridge_dead_lettered_total", (("reason", reason),))
        for reason in (
            "bad-header",
            "bad-partition",
            "bad-recurrence",
            "bad-target",
            "bad-time",
            "clock-skew",
            "conflicting-time",
            "delay-too-long",
            "delivery-failed",
            "internal-error",
            "missing-target",
            "prefix-over-cap",  # issue 27: delay-cancel-prefix over the cap
            "record-too-large",
            "store-corrupt",
            "target-is-delay-topic",
            "target-partition-missing",
            "target-topic-missing",
            "target-unavailable",
            "unknown-delay-level",
        )
    ),
    ("delaybridge_store_corrupt_records_total", (("readable", "true"),)),
    ("delaybridge_store_corrupt_records_total", (("readable", "false"),)),
    *(
        (f"{name}_total", ())
        for name in (
            "delaybridge_cancelled",
            "delaybridge_replaced",
            "delaybridge_cancel_unknown",
            "delaybridge_rolled",
            "delaybridge_early_deliveries",
            "delaybridge_cancels_unreadable",
            "delaybridge_cancels_published",
            "delaybridge_backpressure_pauses",
            "delaybridge_transactions_committed",
            "delaybridge_transactions_aborted",
        )
    ),
}


def counter_series(m: Metrics) -> dict[str, tuple[str, set[tuple[tuple[str, str], ...]]]]:
    """Each counter family's help text and the label sets of its ``_total`` samples."""
    return {
        family.name: (
            family.documentation,
            {tuple(s.labels.items()) for s in family.samples if s.name.endswith("_total")},
        )
        for family in m.registry.collect()
        if family.type == "counter"
    }


def test_the_first_scrape_exports_the_counters_of_f0969c4_each_at_0(m: Metrics) -> None:
    exported = counter_series(m)
    assert {name: help for name, (help, _) in exported.items()} == {
        name: help for name, (help, _) in (COUNTERS_AT_F0969C4 | COUNTERS_ADDED).items()
    }
    first = {
        (f"{name}_total", labels) for name, (_, series) in exported.items() for labels in series
    }
    added = {(f"{name}_total", ()) for name in COUNTERS_ADDED}
    assert first == FIRST_SCRAPE_AT_F0969C4 | added | SERIES_ADDED
    for sample, labels in first:
        assert value(m, sample, **dict(labels)) == 0


def test_every_counter_keeps_its_label_names_of_f0969c4(m: Metrics) -> None:
    m.count(
        Tally(
            enqueued=Counter({"delay": 1}),
            delivered=Counter({"orders": 1}),
            dead_lettered=Counter({Reason.BAD_TIME: 1}),
            retries=Counter({Reason.TARGET_TOPIC_MISSING: 1}),
            store_corrupt=Counter({"true": 1}),
        )
    )
    m.partitions.set_restore("delay", 0, remaining=0, read=1)
    names = {
        name: {tuple(key for key, _ in labels) for labels in series}
        for name, (_, series) in counter_series(m).items()
    }
    every = COUNTERS_AT_F0969C4 | COUNTERS_ADDED
    assert names == {name: {labels} for name, (_, labels) in every.items()}
