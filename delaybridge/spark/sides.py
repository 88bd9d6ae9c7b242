"""Per-topic side counts: what the join does not see.

Target side: records read, records without ``delay-id`` (not the sidecar's),
malformed provenance, and *unmatched* deliveries (a ``delay-id`` no schedule in range
has — expected in a time-range run for messages sent before the range, suspicious in a
full run). Delay side: records, schedules, resent ids, cancels, cancels of unknown ids,
rejected records by reason, schedules for topics this run does not read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from delaybridge.spark.decisions import Kind
from delaybridge.spark.deliveries import DeliveryStatus
from delaybridge.spark.outcomes import matched_cancels
from delaybridge.spark.report import DelaySummary

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def target_counts(deliveries: DataFrame, per_message: DataFrame) -> dict[str, dict[str, int]]:
    """``{topic: {records, no_delay_id, malformed, unmatched}}`` for topics with records.

    ``unmatched`` comes from the unmatched rows of :func:`~.outcomes.outcomes`, so no
    second join of deliveries against schedules is needed.
    """
    from pyspark.sql import functions as F

    status = F.col("status")
    per_record = deliveries.select(
        "topic",
        F.explode(
            F.array(
                F.lit("records"),
                F.when(status == DeliveryStatus.NO_DELAY_ID.value, F.lit("no_delay_id")),
                F.when(status == DeliveryStatus.MALFORMED.value, F.lit("malformed")),
            )
        ).alias("metric"),
    ).where(F.col("metric").isNotNull())
    unmatched = per_message.where(F.col("unmatched") == 1).select(
        F.col("d_topic").alias("topic"), F.lit("unmatched").alias("metric")
    )
    result: dict[str, dict[str, int]] = {}
    for row in per_record.unionByName(unmatched).groupBy("topic", "metric").count().collect():
        counts = result.setdefault(
            row["topic"], {"records": 0, "no_delay_id": 0, "malformed": 0, "unmatched": 0}
        )
        counts[row["metric"]] = row["count"]
    return result


def delay_summaries(
    decisions: DataFrame, scheduled: DataFrame, delay_topics: list[str], targets: list[str]
) -> list[DelaySummary]:
    """One :class:`DelaySummary` per delay topic, in the order given (one Spark job)."""
    from pyspark.sql import functions as F

    # Every count as (topic, metric, n) rows of one union, so one job computes them all.
    by_kind = decisions.groupBy(
        "topic",
        F.when(F.col("kind") == Kind.REJECTED.value, F.concat(F.lit("rejected:"), "reason"))
        .otherwise(F.col("kind"))
        .alias("metric"),
    ).agg(F.count(F.lit(1)).alias("n"))
    # Resent = schedule records - distinct ids. The schedules are hash-partitioned by id
    # (outcomes.schedules), so the distinct ids are counted without a shuffle.
    ids = (
        scheduled.select("topic", "id")
        .distinct()
        .groupBy("topic")
        .agg(F.lit("ids").alias("metric"), F.count(F.lit(1)).alias("n"))
    )
    other = (
        scheduled.where(~F.col("target_topic").isin(targets))
        .groupBy("topic")
        .agg(F.lit("other_targets").alias("metric"), F.count(F.lit(1)).alias("n"))
    )
    unknown = (
        matched_cancels(decisions, scheduled)
        .where(~F.col("matched"))
        .groupBy("topic")
        .agg(F.lit("cancel_unknown").alias("metric"), F.count(F.lit(1)).alias("n"))
    )
    found: dict[str, dict[str, int]] = {}
    for row in by_kind.unionByName(ids).unionByName(other).unionByName(unknown).collect():
        found.setdefault(row["topic"], {})[row["metric"]] = int(row["n"] or 0)
    summaries = []
    for topic in delay_topics:
        metrics = found.get(topic, {})
        rejected = {
            name.removeprefix("rejected:"): n
            for name, n in metrics.items()
            if name.startswith("rejected:")
        }
        summaries.append(
            DelaySummary(
                topic=topic,
                records=sum(
                    n
                    for name, n in metrics.items()
                    if name in _KIND_METRICS or name.startswith("rejected:")
                ),
                schedules=metrics.get(Kind.SCHEDULE.value, 0),
                resent=metrics.get(Kind.SCHEDULE.value, 0) - metrics.get("ids", 0),
                cancels=metrics.get(Kind.CANCEL.value, 0)
                + metrics.get(Kind.CANCEL_PREFIX.value, 0),
                cancel_unknown=metrics.get("cancel_unknown", 0),
                rejected=dict(sorted(rejected.items())),
                other_targets=metrics.get("other_targets", 0),
            )
        )
    return summaries


_KIND_METRICS = frozenset({Kind.SCHEDULE.value, Kind.CANCEL.value, Kind.CANCEL_PREFIX.value})
