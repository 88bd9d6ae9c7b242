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
from delaybridge.spark.outcomes import matched_cancels, schedules
from delaybridge.spark.report import DelaySummary

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame


def target_counts(deliveries: DataFrame, decisions: DataFrame) -> dict[str, dict[str, int]]:
    """``{topic: {records, no_delay_id, malformed, unmatched}}`` for topics with records."""
    from pyspark.sql import functions as F

    scheduled = schedules(decisions).select(
        F.col("id").alias("delay_id"), F.col("target_topic").alias("topic")
    )
    ok = deliveries.where(F.col("status") == DeliveryStatus.OK.value)
    unmatched = ok.join(scheduled, ["delay_id", "topic"], "left_anti").groupBy("topic").count()
    by_status = deliveries.groupBy("topic").agg(
        F.count(F.lit(1)).alias("records"),
        F.sum((F.col("status") == DeliveryStatus.NO_DELAY_ID.value).cast("int")).alias(
            "no_delay_id"
        ),
        F.sum((F.col("status") == DeliveryStatus.MALFORMED.value).cast("int")).alias("malformed"),
    )
    result: dict[str, dict[str, int]] = {}
    for row in by_status.collect():
        result[row["topic"]] = {
            "records": row["records"],
            "no_delay_id": row["no_delay_id"] or 0,
            "malformed": row["malformed"] or 0,
            "unmatched": 0,
        }
    for row in unmatched.collect():
        result[row["topic"]]["unmatched"] = row["count"]
    return result


def delay_summaries(
    decisions: DataFrame, delay_topics: list[str], targets: list[str]
) -> list[DelaySummary]:
    """One :class:`DelaySummary` per delay topic, in the order given."""
    from pyspark.sql import functions as F

    def kind_count(kind: Kind) -> Column:
        return F.sum((F.col("kind") == kind.value).cast("int")).alias(kind.value)

    by_kind = {
        row["topic"]: row.asDict()
        for row in decisions.groupBy("topic")
        .agg(
            F.count(F.lit(1)).alias("records"),
            kind_count(Kind.SCHEDULE),
            kind_count(Kind.CANCEL),
            kind_count(Kind.REJECTED),
        )
        .collect()
    }
    rejected: dict[str, dict[str, int]] = {}
    for row in (
        decisions.where(F.col("kind") == Kind.REJECTED.value)
        .groupBy("topic", "reason")
        .count()
        .collect()
    ):
        rejected.setdefault(row["topic"], {})[row["reason"]] = row["count"]
    scheduled = schedules(decisions)
    per_schedule_topic = {
        row["topic"]: row.asDict()
        for row in scheduled.groupBy("topic")
        .agg(
            F.sum(F.col("copies") - 1).alias("resent"),
            F.sum((~F.col("target_topic").isin(targets)).cast("int")).alias("other_targets"),
        )
        .collect()
    }
    unknown = {
        row["topic"]: row["count"]
        for row in matched_cancels(decisions, scheduled)
        .where(~F.col("matched"))
        .groupBy("topic")
        .count()
        .collect()
    }
    summaries = []
    for topic in delay_topics:
        kinds = by_kind.get(topic, {})
        extra = per_schedule_topic.get(topic, {})
        summaries.append(
            DelaySummary(
                topic=topic,
                records=int(kinds.get("records") or 0),
                schedules=int(kinds.get(Kind.SCHEDULE.value) or 0),
                resent=int(extra.get("resent") or 0),
                cancels=int(kinds.get(Kind.CANCEL.value) or 0),
                cancel_unknown=int(unknown.get(topic, 0)),
                rejected=dict(sorted(rejected.get(topic, {}).items())),
                other_targets=int(extra.get("other_targets") or 0),
            )
        )
    return summaries
