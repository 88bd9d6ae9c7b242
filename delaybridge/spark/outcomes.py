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

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from delaybridge.spark.decisions import Kind
from delaybridge.spark.deliveries import DeliveryStatus

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
    per occurrence of a recurring one.

    The sidecar's order -- timestamp, then offset in one partition, then the greater
    ``(topic, partition)`` on a tie across partitions -- is the order of
    ``(timestamp_ms, topic, partition, offset)``, so ``replaced_ms`` is a window: the
    least timestamp of the replacing records that follow a record with its id and
    target. The rows are hash-partitioned by ``id`` alone (which also clusters them by
    id and target): the cancels by id and the per-id counts of ``sides`` join and group
    on that partitioning without shuffling the schedules again.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    cols = ("id", "topic", "partition", "offset", "timestamp_ms", "due_ms", "target_topic")
    later = (
        Window.partitionBy("id", "target_topic")
        .orderBy("timestamp_ms", "topic", "partition", "offset")
        .rowsBetween(1, Window.unboundedFollowing)
    )
    replacing = F.when(F.col("replace"), F.col("timestamp_ms"))
    return (
        decisions.where(F.col("kind") == Kind.SCHEDULE.value)
        .select(*cols, "replace", "occurrences")
        .repartition("id")
        .select(*cols, "occurrences", F.min(replacing).over(later).alias("replaced_ms"))
        .select(
            *(c for c in cols if c != "due_ms"),
            "replaced_ms",
            F.explode_outer("occurrences").alias("occ"),
            "due_ms",
        )
        .select(
            *(F.coalesce("occ.due_ms", "due_ms").alias(c) if c == "due_ms" else c for c in cols),
            F.col("occ.k").alias("occurrence"),
            "replaced_ms",
        )
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

    # The occurrence as a join key that is never null (occurrences count from 1), so
    # that the join is a plain equi-join on the keys the deliveries were grouped by:
    # with ``eqNullSafe`` Spark would shuffle the grouped deliveries a second time.
    def slot(occurrence: str) -> Column:
        return F.coalesce(F.col(occurrence), F.lit(-1))

    delivered = (
        deliveries.where(F.col("status") == DeliveryStatus.OK.value)
        .groupBy(
            F.col("origin").alias("d_origin"),
            slot("occurrence").alias("d_slot"),
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
            & (slot("occurrence") == F.col("d_slot"))
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
    (the cancels of each id gathered into one array, joined on ``id``), or by id prefix
    (``delay-cancel-prefix``: few, so all of them in one broadcast array, matched with
    ``startswith``; those in ``refused``, by origin, left out); the same sent-before
    rule for both.

    Arrays rather than a join per cancel and a ``groupBy`` back to one row per message:
    the join keeps one row per message, so nothing is aggregated over the schedules,
    and the join on ``id`` uses the partitioning of :func:`schedules`.
    """
    from pyspark.sql import functions as F

    by_id = _cancels_of(decisions, Kind.CANCEL)
    by_prefix = _cancels_of(decisions, Kind.CANCEL_PREFIX)
    if refused is not None:
        where = F.concat_ws("/", "c_topic", F.col("c_partition").cast("string"), "c_offset")
        by_prefix = by_prefix.join(F.broadcast(refused), where == F.col("origin"), "left_anti")
    id_cancels = by_id.groupBy("c_id").agg(F.collect_list(F.struct(*_CANCEL)).alias("id_cancels"))
    prefix_cancels = by_prefix.agg(F.collect_list(F.struct(*_CANCEL)).alias("prefix_cancels"))
    joined = scheduled.join(id_cancels, F.col("id") == F.col("c_id"), "left").crossJoin(
        F.broadcast(prefix_cancels)
    )
    first_by_id = _first_of("id_cancels", lambda c: F.lit(True))
    first_by_prefix = _first_of("prefix_cancels", lambda c: F.col("id").startswith(c["c_id"]))
    return joined.select(
        *scheduled.columns, F.least(first_by_id, first_by_prefix).alias("cancel_ms")
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


# One cancel as an array element: what _first_of's rule reads.
_CANCEL = ("c_id", "c_target", "c_topic", "c_partition", "c_offset", "c_ms")


def _first_of(cancels: str, names: Callable[[Column], Column]) -> Column:
    """The send time of the first cancel in the array column ``cancels`` that ``names``
    the message (by id or by prefix) and was sent after it; null if none."""
    from pyspark.sql import functions as F

    def applies(c: Column) -> Column:
        same_partition = (c["c_topic"] == F.col("topic")) & (c["c_partition"] == F.col("partition"))
        after = (c["c_ms"] > F.col("timestamp_ms")) | (
            (c["c_ms"] == F.col("timestamp_ms"))
            & (~same_partition | (c["c_offset"] > F.col("offset")))
        )
        target = c["c_target"].isNull() | (c["c_target"] == F.col("target_topic"))
        return names(c) & target & after

    matching = F.filter(F.col(cancels), applies)
    # Higher-order functions are interpreted: only rows with a cancel pay for one.
    return F.when(F.size(cancels) > 0, F.array_min(F.transform(matching, lambda c: c["c_ms"])))


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
