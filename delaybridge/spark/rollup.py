"""The counts of the report: per (target topic, due window), per topic and overall.

Input: the per-message rows of :func:`~delaybridge.spark.outcomes.outcomes` (their
``unmatched`` rows left out). Output: the rows :func:`~delaybridge.spark.report.split_rollup`
sorts, each with ``grouping`` 0 (a topic's window), 1 (a topic) or 3 (all), as Spark's
``grouping_id()`` of ``rollup(target_topic, window_start_ms)`` numbers them.

One pass over the messages, rather than a ``rollup`` with ``percentile_approx`` (which
expanded every message into three grouping sets):

1. **Fine counts**: one hash aggregation per (topic, window, lateness in ms) -- the
   flag sums and the extra copies. As many rows as distinct lateness values per
   window (a few thousand for a million messages delivered within a second of their
   due time), cached for the two steps below.
2. **Counts** per (topic, window): the fine counts summed, the largest lateness, and the
   lateness histogram (each fine row's messages go to its lateness's bucket of
   :data:`~delaybridge.spark.report.LATENESS_EDGES_MS`). Every one of them adds up (or,
   for the maximum, combines) exactly, so the per-topic and overall rows are summed
   here in Python from the few window rows.
3. **Percentiles** of lateness, exact: the fine counts of delivered messages summed
   per topic and overall too (``groupingSets``), and a running sum over each group's
   sorted lateness values finds the **nearest rank**: the p-th percentile is the least
   lateness ``v`` such that at least ``ceil(p · n)`` of the group's ``n`` delivered
   messages were no later than ``v``. That is the value ``percentile_approx`` aims at,
   without its approximation.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from delaybridge.spark.outcomes import FLAGS, messages
from delaybridge.spark.report import LATENESS_EDGES_MS

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

QUANTILES = {"lateness_p50_ms": 0.5, "lateness_p99_ms": 0.99}
"""The lateness percentiles of the report, by field of :class:`~.report.Counts`."""
HISTOGRAM = tuple(f"hist_{i}" for i in range(len(LATENESS_EDGES_MS) + 1))
"""One column per lateness bucket (``hist_0`` is below the first edge)."""
_SUMMED = ("sent", *FLAGS, "extra_copies", *HISTOGRAM)

# Group keys: (grouping, target_topic, window_start_ms).
Key = tuple[int, str | None, int | None]


def aggregate(per_message: DataFrame) -> list[dict[str, Any]]:
    """Counts per (target topic, window), per topic and overall (see the module doc)."""
    fine = _fine_counts(messages(per_message)).persist()
    try:
        windows = [row.asDict() for row in _window_counts(fine).collect()]
        quantiles = lateness_quantiles(fine)
    finally:
        fine.unpersist()
    rows = [{**row, "grouping": 0} for row in windows]
    for topic in sorted({row["target_topic"] for row in windows}):
        of_topic = [row for row in windows if row["target_topic"] == topic]
        rows.append(_combined(of_topic, grouping=1, target_topic=topic))
    if windows:
        rows.append(_combined(windows, grouping=3, target_topic=None))
    for row in rows:
        key = (row["grouping"], row["target_topic"], row["window_start_ms"])
        row.update(quantiles.get(key, dict.fromkeys(QUANTILES)))
    return rows


def histogram_of(rows: Iterable[Mapping[str, Any]]) -> list[int]:
    """The grand-total row's lateness histogram (all zeros when nothing was scheduled)."""
    for row in rows:
        if row["grouping"] == 3:
            return [int(row.get(name) or 0) for name in HISTOGRAM]
    return [0] * len(HISTOGRAM)


def _fine_counts(rows: DataFrame) -> DataFrame:
    """Step 1: ``sent``, each flag's sum and the extra copies per (topic, window,
    lateness)."""
    from pyspark.sql import functions as F

    return rows.groupBy("target_topic", "window_start_ms", "lateness_ms").agg(
        F.count(F.lit(1)).alias("sent"),
        *(F.sum(name).alias(name) for name in (*FLAGS, "extra_copies")),
    )


def _window_counts(fine: DataFrame) -> DataFrame:
    """Step 2: :func:`_fine_counts` summed per (topic, window), with the largest lateness
    and the histogram; a fine row's ``sent`` messages all have its lateness."""
    from pyspark.sql import functions as F

    bucket = _bucket(F.col("lateness_ms"))
    return fine.groupBy("target_topic", "window_start_ms").agg(
        *(F.sum(name).alias(name) for name in ("sent", *FLAGS, "extra_copies")),
        F.max("lateness_ms").alias("lateness_max_ms"),
        *(
            F.sum(F.when(bucket == F.lit(i), F.col("sent")).otherwise(0)).alias(name)
            for i, name in enumerate(HISTOGRAM)
        ),
    )


def _bucket(lateness: Column) -> Column:
    """The histogram bucket of ``lateness`` (null when null): i with edge[i-1] <= it < edge[i]."""
    from pyspark.sql import functions as F

    bucket = F.lit(len(LATENESS_EDGES_MS))
    for index in range(len(LATENESS_EDGES_MS) - 1, -1, -1):
        bucket = F.when(lateness < F.lit(LATENESS_EDGES_MS[index]), F.lit(index)).otherwise(bucket)
    return F.when(lateness.isNotNull(), bucket)


def _combined(
    rows: list[dict[str, Any]], *, grouping: int, target_topic: str | None
) -> dict[str, Any]:
    """The sums (and the largest lateness) of ``rows``, as one row of ``grouping``."""
    combined: dict[str, Any] = {
        "grouping": grouping,
        "target_topic": target_topic,
        "window_start_ms": None,
    }
    for name in _SUMMED:
        combined[name] = sum(int(row[name] or 0) for row in rows)
    latest = [row["lateness_max_ms"] for row in rows if row["lateness_max_ms"] is not None]
    combined["lateness_max_ms"] = max(latest) if latest else None
    return combined


def lateness_quantiles(fine: DataFrame) -> dict[Key, dict[str, int | None]]:
    """Step 3: exact nearest-rank lateness percentiles (:data:`QUANTILES`) of each window,
    each topic and overall, from :func:`_fine_counts`, keyed as the rows of
    :func:`aggregate`; groups without a delivered message are absent."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    topic, window, lateness = "target_topic", "window_start_ms", "lateness_ms"
    counted = fine.where(F.col(lateness).isNotNull()).select(
        topic, window, lateness, F.col("sent").alias("n")
    )
    # grouping_id() over (topic, window, lateness): 0, 2 (no window), 6 (neither).
    levels = counted.groupingSets(
        [[topic, window, lateness], [topic, lateness], [lateness]], topic, window, lateness
    ).agg(F.grouping_id().alias("level"), F.sum("n").alias("n"))
    group = Window.partitionBy("level", topic, window)
    upto = group.orderBy(lateness).rowsBetween(Window.unboundedPreceding, Window.currentRow)
    ranked = levels.select(
        "level",
        topic,
        window,
        lateness,
        "n",
        F.sum("n").over(upto).alias("upto"),
        F.sum("n").over(group).alias("total"),
    )
    hits = [
        F.when((F.col("upto") >= rank) & (F.col("upto") - F.col("n") < rank), F.lit(name))
        for name, rank in (
            (name, F.ceil(F.lit(q) * F.col("total"))) for name, q in QUANTILES.items()
        )
    ]
    picked = ranked.select(
        "level", topic, window, lateness, F.explode(F.array(*hits)).alias("name")
    )
    found: dict[Key, dict[str, int | None]] = {}
    grouping = {0: 0, 2: 1, 6: 3}
    for row in picked.where(F.col("name").isNotNull()).collect():
        key = (grouping[row["level"]], row[topic], row[window])
        found.setdefault(key, dict.fromkeys(QUANTILES))[row["name"]] = int(row[lateness])
    return found
