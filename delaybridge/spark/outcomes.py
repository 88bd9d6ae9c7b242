"""The join: one row per scheduled message with what became of it.

Inputs are the decision rows of the delay topics (:mod:`.decisions`) and the parsed
target-topic rows (:mod:`.deliveries`). Steps:

1. **Schedules** (:func:`schedules`, cached by the caller), one per schedule record,
   with when a later schedule with its id and target *replaced* it (``replaced_ms``:
   the first replacing record sent after it, by the sidecar's order -- timestamp, then
   offset in one partition, then the greater ``(topic, partition)`` on a tie across
   partitions; ``bridge/cancels/requests.py``). A replace before the due time replaces. A
   recurring schedule is one row per occurrence due up to the report's time
   (``occurrence`` k; null for a one-off), each expected once.
2. **Cancels** match a schedule by id (and by target topic when the cancel names one,
   as :func:`~delaybridge.contract.classify.classify` documents) when sent after it
   (DESIGN §2: a cancel takes what was sent before it; a tie across partitions goes
   to the cancel); a cancel by id prefix (``delay-cancel-prefix``, kind
   ``cancel-prefix``) matches every id that starts with it, by the same rule (it counts
   as cancelled, not missing); the earliest such cancel counts. A cancel before the due time
   cancels; one at or after it came too late (for a series, per occurrence: a cancel
   or a replace stops the occurrences due after it).
3. **Deliveries**, well-formed only, grouped by ``delay-origin`` (the schedule record
   they came from) and ``delay-occurrence``: how many, and when the first one arrived
   (its Kafka timestamp is the delivery time).
4. Flags per message, each 0 or 1, so that aggregation is a sum (see
   :class:`~delaybridge.spark.report.Counts` for their meaning). Early compares the
   first delivery with the due time; lateness (and late) counts from when the message
   could first be delivered: the due time, or the schedule record's timestamp when the
   message was sent already past due.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from delaybridge.spark.decisions import Kind
from delaybridge.spark.deliveries import DeliveryStatus
from delaybridge.spark.report import LATENESS_EDGES_MS

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

# The per-message flags, in report order; each is a 0/1 int column of outcomes().
FLAGS = (
    "cancelled",
    "replaced",
    "due",
    "delivered",
    "missing",
    "duplicated",
    "early",
    "late",
    "pending",
    "expired",
    "cancel_ignored",
    "cancel_too_late",
)


@dataclass(frozen=True)
class Judgement:
    """The thresholds of one run, in epoch ms / ms."""

    due_cutoff_ms: int  # as_of - grace
    late_after_ms: int
    window_ms: int


def schedules(decisions: DataFrame) -> DataFrame:
    """Step 1: ``id, topic, partition, offset, timestamp_ms, due_ms, target_topic,
    occurrence, replaced_ms`` (null: never replaced), one row per schedule record, or
    per occurrence of a recurring one."""
    from pyspark.sql import functions as F

    cols = ("id", "topic", "partition", "offset", "timestamp_ms", "due_ms", "target_topic")
    rows = decisions.where(F.col("kind") == Kind.SCHEDULE.value)
    later = rows.where("replace").select(*(F.col(c).alias(f"r_{c}") for c in cols))
    same_partition = (F.col("r_topic") == F.col("topic")) & (
        F.col("r_partition") == F.col("partition")
    )
    tie = F.col("r_timestamp_ms") == F.col("timestamp_ms")
    after = (F.col("r_timestamp_ms") > F.col("timestamp_ms")) | (
        tie
        & F.when(same_partition, F.col("r_offset") > F.col("offset")).otherwise(
            F.struct("r_topic", "r_partition") > F.struct("topic", "partition")
        )
    )
    same = (F.col("r_id") == F.col("id")) & (F.col("r_target_topic") == F.col("target_topic"))
    expanded = rows.select(*cols, F.explode_outer("occurrences").alias("occ")).select(
        *(c for c in cols if c != "due_ms"),
        F.coalesce(F.col("occ.due_ms"), F.col("due_ms")).alias("due_ms"),
        F.col("occ.k").alias("occurrence"),
    )
    return (
        expanded.join(later, same & after, "left")
        .groupBy(*cols, "occurrence")
        .agg(F.min("r_timestamp_ms").alias("replaced_ms"))
    )


def matched_cancels(decisions: DataFrame, scheduled: DataFrame) -> DataFrame:
    """Step 2: every cancel with ``matched`` (it names a scheduled message) and that
    message's ``id``/``target_topic``; ``topic`` is the delay topic the cancel came from."""
    from pyspark.sql import functions as F

    cancels = decisions.where(F.col("kind") == Kind.CANCEL.value).select(
        "topic",
        "partition",
        "offset",
        "timestamp_ms",
        "id",
        F.col("target_topic").alias("cancel_target"),
    )
    targets = scheduled.select(
        F.col("id").alias("s_id"), F.col("target_topic").alias("s_target")
    ).distinct()
    condition = (F.col("id") == F.col("s_id")) & (
        F.col("cancel_target").isNull() | (F.col("cancel_target") == F.col("s_target"))
    )
    return cancels.join(targets, condition, "left").select(
        "topic",
        "partition",
        "offset",
        "timestamp_ms",
        "id",
        F.col("s_target").alias("target_topic"),
        F.col("s_id").isNotNull().alias("matched"),
    )


def outcomes(
    scheduled: DataFrame,
    decisions: DataFrame,
    deliveries: DataFrame,
    targets: list[str],
    judgement: Judgement,
    expired: DataFrame | None = None,
    refused_prefixes: DataFrame | None = None,
) -> DataFrame:
    """Steps 2–4 for the schedules (step 1's output) bound for ``targets``; ``expired``:
    the dead-letter topic's expired messages by origin (``deliveries.parse_expired``);
    ``refused_prefixes``: the origins of the prefix cancels the sidecar refused
    (``deliveries.parse_refused_prefix_cancels``), which cancel nothing.

    One row per message, plus one row per *unmatched* delivery group (a well-formed
    ``delay-id`` no schedule has): a full outer join finds both in one shuffle. Those
    rows have a null ``id``, ``unmatched = 1`` and every other flag 0; ``messages``
    filters them out again.
    """
    from pyspark.sql import functions as F

    delivered = (
        deliveries.where(F.col("status") == DeliveryStatus.OK.value)
        .groupBy(
            F.col("origin").alias("d_origin"),
            F.col("occurrence").alias("d_occurrence"),
            F.col("topic").alias("d_topic"),
        )
        .agg(F.count(F.lit(1)).alias("deliveries"), F.min("timestamp_ms").alias("first_ms"))
    )
    origin = F.concat_ws("/", "topic", F.col("partition").cast("string"), F.col("offset"))
    joined = (
        _first_cancels(
            scheduled.where(F.col("target_topic").isin(targets)), decisions, refused_prefixes
        )
        .join(
            delivered,
            (origin == F.col("d_origin"))
            & F.col("occurrence").eqNullSafe(F.col("d_occurrence"))
            & (F.col("target_topic") == F.col("d_topic")),
            "full_outer",
        )
        .withColumn("deliveries", F.coalesce("deliveries", F.lit(0)))
    )
    if expired is None:
        joined = joined.withColumn("expired_n", F.lit(0))
    else:
        found = expired.select(F.col("origin").alias("x_origin"), "expired_n")
        one_off = F.col("occurrence").isNull()  # a series has no expiry
        joined = (
            joined.join(found, one_off & (origin == F.col("x_origin")), "left")
            .drop("x_origin")
            .withColumn("expired_n", F.coalesce("expired_n", F.lit(0)))
        )
    return _flag(joined, judgement)


def _first_cancels(
    scheduled: DataFrame, decisions: DataFrame, refused: DataFrame | None = None
) -> DataFrame:
    """Step 2: ``scheduled`` plus ``cancel_ms``, the first cancel sent after each: by id
    (an equi-join), or by id prefix (``delay-cancel-prefix``: few, so broadcast and
    matched with ``startswith``; those in ``refused``, by origin, left out); the same
    sent-before rule for both."""
    from pyspark.sql import functions as F

    by_id = _cancels_of(decisions, Kind.CANCEL)
    by_prefix = _cancels_of(decisions, Kind.CANCEL_PREFIX)
    if refused is not None:
        where = F.concat_ws("/", "c_topic", F.col("c_partition").cast("string"), "c_offset")
        by_prefix = by_prefix.join(F.broadcast(refused), where == F.col("origin"), "left_anti")
    first = _first_of(scheduled, by_id, F.col("c_id") == F.col("id"), "cancel_ms")
    prefixed = F.col("id").startswith(F.col("c_id"))
    return _first_of(first, F.broadcast(by_prefix), prefixed, "prefix_ms").select(
        *scheduled.columns, F.least("cancel_ms", "prefix_ms").alias("cancel_ms")
    )


def _cancels_of(decisions: DataFrame, kind: Kind) -> DataFrame:
    from pyspark.sql import functions as F

    return decisions.where(F.col("kind") == kind.value).select(
        F.col("id").alias("c_id"),
        F.col("target_topic").alias("c_target"),
        F.col("topic").alias("c_topic"),
        F.col("partition").alias("c_partition"),
        F.col("offset").alias("c_offset"),
        F.col("timestamp_ms").alias("c_ms"),
    )


def _first_of(scheduled: DataFrame, cancels: DataFrame, names: Column, alias: str) -> DataFrame:
    """``scheduled`` plus ``alias``: the send time of the first of ``cancels`` that
    ``names`` each message (by id or by prefix) and was sent after it."""
    from pyspark.sql import functions as F

    same_partition = (F.col("c_topic") == F.col("topic")) & (
        F.col("c_partition") == F.col("partition")
    )
    after = (F.col("c_ms") > F.col("timestamp_ms")) | (
        (F.col("c_ms") == F.col("timestamp_ms"))
        & (~same_partition | (F.col("c_offset") > F.col("offset")))
    )
    applies = (
        names & (F.col("c_target").isNull() | (F.col("c_target") == F.col("target_topic"))) & after
    )
    return (
        scheduled.join(cancels, applies, "left")
        .groupBy(*scheduled.columns)
        .agg(F.min("c_ms").alias(alias))
    )


def messages(per_message: DataFrame) -> DataFrame:
    """Only the scheduled messages of :func:`outcomes` (not the unmatched deliveries)."""
    from pyspark.sql import functions as F

    return per_message.where(F.col("id").isNotNull())


def _flag(rows: DataFrame, j: Judgement) -> DataFrame:
    from pyspark.sql import functions as F

    n = F.col("deliveries")
    due_ms = F.col("due_ms")
    cancelled = F.col("cancel_ms").isNotNull() & (F.col("cancel_ms") < due_ms)
    replaced = ~cancelled & F.col("replaced_ms").isNotNull() & (F.col("replaced_ms") < due_ms)
    expected, one_off = ~cancelled & ~replaced, F.col("occurrence").isNull()
    due = expected & (due_ms <= F.lit(j.due_cutoff_ms))
    delivered = expected & (n > 0)
    # Past its deadline and dead-lettered as such (contract/expiry.py): accounted for.
    expired = expected & (n == 0) & (F.col("expired_n") > 0)
    # Lateness counts from when the message could first be delivered: its due time, or
    # when its schedule record was written if that is later (sent already past due).
    ready_ms = F.greatest(due_ms, F.col("timestamp_ms"))
    lateness = F.when(delivered, F.col("first_ms") - ready_ms)
    flags: dict[str, Column] = {
        "cancelled": cancelled,
        "replaced": replaced,
        "due": due,
        "delivered": delivered,
        "missing": due & (n == 0) & ~expired,
        "duplicated": delivered & (n > 1),
        "early": delivered & (F.col("first_ms") < due_ms),
        "late": delivered & (F.col("first_ms") - ready_ms > F.lit(j.late_after_ms)),
        "pending": expected & ~due & (n == 0) & ~expired,
        "expired": expired,
        "cancel_ignored": (cancelled | replaced) & (n > 0),
        # (a series' occurrences due before its cancel were meant to go out)
        "cancel_too_late": F.col("cancel_ms").isNotNull() & ~cancelled & one_off,
    }
    window = F.floor(due_ms / F.lit(j.window_ms)).cast("long") * F.lit(j.window_ms)
    return rows.select(
        F.col("id").isNull().cast("int").alias("unmatched"),
        "d_topic",
        "id",
        "occurrence",
        "topic",
        "partition",
        "offset",
        "target_topic",
        "due_ms",
        "cancel_ms",
        "replaced_ms",
        "deliveries",
        "first_ms",
        lateness.alias("lateness_ms"),
        F.when(delivered, n - 1).otherwise(0).alias("extra_copies"),
        window.alias("window_start_ms"),
        *(F.coalesce(flag, F.lit(False)).cast("int").alias(name) for name, flag in flags.items()),
    )


def aggregate(per_message: DataFrame) -> list[dict[str, object]]:
    """Counts per (target topic, window), per topic and overall; see ``split_rollup``.

    One Spark job: the lateness histogram rides along as one sum per bucket
    (``hist_<i>``), read from the grand-total row by :func:`histogram_of`.
    """
    from pyspark.sql import functions as F

    lateness = F.col("lateness_ms")
    bucket = F.lit(len(LATENESS_EDGES_MS))
    for index in range(len(LATENESS_EDGES_MS) - 1, -1, -1):
        bucket = F.when(lateness < F.lit(LATENESS_EDGES_MS[index]), F.lit(index)).otherwise(bucket)
    bucket = F.when(lateness.isNotNull(), bucket)
    buckets = range(len(LATENESS_EDGES_MS) + 1)
    rows = (
        messages(per_message)
        .rollup("target_topic", "window_start_ms")
        .agg(
            F.grouping_id().alias("grouping"),
            F.count(F.lit(1)).alias("sent"),
            *(F.sum(name).alias(name) for name in FLAGS),
            F.sum("extra_copies").alias("extra_copies"),
            F.percentile_approx("lateness_ms", [0.5, 0.99], 10_000).alias("lateness_q"),
            F.max("lateness_ms").alias("lateness_max_ms"),
            *(F.sum((bucket == F.lit(i)).cast("int")).alias(f"hist_{i}") for i in buckets),
        )
        .collect()
    )
    out = []
    for row in rows:
        data = row.asDict()
        quantiles = data.pop("lateness_q") or [None, None]
        data["lateness_p50_ms"], data["lateness_p99_ms"] = quantiles
        out.append(data)
    return out


def histogram_of(rows: list[dict[str, object]]) -> list[int]:
    """The grand-total row's lateness histogram (all zeros when nothing was scheduled)."""
    size = len(LATENESS_EDGES_MS) + 1
    for row in rows:
        if row["grouping"] == 3:
            return [int(row.get(f"hist_{i}") or 0) for i in range(size)]  # type: ignore[call-overload]
    return [0] * size
