"""Target-topic rows → deliveries, with the sidecar's provenance headers checked.

Every record the sidecar delivers carries ``delay-id``, ``delay-origin``
(``topic/partition/offset``) and ``delay-due-ms`` (a decimal string). A target topic may
also hold records that never went through the sidecar (a producer writing to it
directly): those have no ``delay-id`` and are only counted.

A recurring schedule's occurrence also carries ``delay-occurrence`` (its number,
column ``occurrence``; null for a one-off): deliveries match schedules on (id,
occurrence).

Each row gets a ``status`` (:class:`DeliveryStatus`) and, when malformed, a ``problem``
naming the header at fault. Only well-formed deliveries join with the schedules: a
record whose provenance cannot be read is not trusted as proof of delivery (its message
then shows as missing as well, which is what an operator needs to look at).

This runs as Spark SQL expressions, not Python, because target topics are the bigger
side of the join and the checks are simple.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING

from delaybridge.contract.names import (
    OUT_DUE_MS,
    OUT_ERROR,
    OUT_ID,
    OUT_OCCURRENCE,
    OUT_ORIGIN,
)
from delaybridge.contract.reasons import Reason

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame


class DeliveryStatus(StrEnum):
    OK = "ok"
    NO_DELAY_ID = "no-delay-id"
    MALFORMED = "malformed"


def parse_deliveries(rows: DataFrame) -> DataFrame:
    """Kafka-source rows (with ``timestamp_ms``) → ``topic, partition, offset,
    timestamp_ms, delay_id, origin, header_due_ms, occurrence, status, problem``.

    Three projections on purpose: the header names are extracted once (Spark does not
    inline a non-cheap alias into several uses), then the scalars, then the verdict.
    Every expression compiles (``array_position``, ``array_remove``, ``element_at``):
    no higher-order function, which Spark would interpret row by row.
    """
    from pyspark.sql import functions as F

    keep = ("topic", "partition", "offset", "timestamp_ms")
    named = rows.select(*keep, _names().alias("names"), F.col("headers.value").alias("values"))
    scalars = named.select(
        *keep,
        _count("names", OUT_ID).alias("n_ids"),
        _count("names", OUT_DUE_MS).alias("n_dues"),
        _count("names", OUT_ORIGIN).alias("n_origins"),
        _first("names", "values", OUT_ID).cast("string").alias("delay_id"),
        _first("names", "values", OUT_ORIGIN).cast("string").alias("origin"),
        _first("names", "values", OUT_DUE_MS).cast("string").alias("due_text"),
        _first("names", "values", OUT_OCCURRENCE).cast("string").alias("occurrence_text"),
    )
    delay_id, origin, due_text = F.col("delay_id"), F.col("origin"), F.col("due_text")
    problem = (
        F.when(F.col("n_ids") > 1, F.lit(f"{OUT_ID} appears more than once"))
        .when(_blank(delay_id), F.lit(f"{OUT_ID} is empty or null"))
        .when(~F.is_valid_utf8(delay_id), F.lit(f"{OUT_ID} is not UTF-8"))
        .when(F.col("n_dues") != 1, F.lit(f"{OUT_DUE_MS} missing or repeated"))
        .when(
            due_text.isNull() | ~due_text.rlike(r"^[0-9]{1,18}$"),
            F.lit(f"{OUT_DUE_MS} is not a decimal number"),
        )
        .when(F.col("n_origins") != 1, F.lit(f"{OUT_ORIGIN} missing or repeated"))
        .when(
            origin.isNull() | ~origin.rlike(r"^[A-Za-z0-9._-]+/[0-9]+/[0-9]+$"),
            F.lit(f"{OUT_ORIGIN} is not topic/partition/offset"),
        )
    )
    judged = scalars.select(
        *keep,
        "delay_id",
        "origin",
        "due_text",
        "n_ids",
        F.when(F.col("occurrence_text").rlike(r"^[0-9]{1,9}$"), F.col("occurrence_text"))
        .cast("int")
        .alias("occurrence"),
        F.when(F.col("n_ids") > 0, problem).alias("problem"),
    )
    status = (
        F.when(F.col("n_ids") == 0, F.lit(DeliveryStatus.NO_DELAY_ID.value))
        .when(F.col("problem").isNotNull(), F.lit(DeliveryStatus.MALFORMED.value))
        .otherwise(F.lit(DeliveryStatus.OK.value))
    )
    return judged.select(
        *keep,
        "delay_id",
        "origin",
        F.when(F.col("problem").isNull(), due_text.cast("long")).alias("header_due_ms"),
        "occurrence",
        status.alias("status"),
        "problem",
    )


def parse_expired(rows: DataFrame) -> DataFrame:
    """Dead-letter-topic rows → ``origin, expired`` (how many), for the dead letters the
    sidecar wrote as ``expired`` (``contract/expiry.py``): a message whose deadline
    passed is accounted for there, not missing. Other dead letters (bad input, a target
    that kept failing) are not the reconciliation's: their records were never owed, or
    are missing until delivered."""
    from pyspark.sql import functions as F

    reasons = _values(OUT_ERROR)
    origins = _values(OUT_ORIGIN)
    return (
        rows.select(
            F.try_element_at(reasons, F.lit(1)).cast("string").alias("reason"),
            F.try_element_at(origins, F.lit(1)).cast("string").alias("origin"),
        )
        .where((F.col("reason") == F.lit(Reason.EXPIRED.value)) & F.col("origin").isNotNull())
        .groupBy("origin")
        .agg(F.count(F.lit(1)).alias("expired_n"))
    )


def parse_refused_prefix_cancels(rows: DataFrame) -> DataFrame:
    """Dead-letter-topic rows → ``origin`` of every ``delay-cancel-prefix`` the sidecar
    refused as ``prefix-over-cap`` (it matched more than ``cancels.prefix_confirm_above``
    on the replica that read it): such a cancel took nothing, so it must not count."""
    from pyspark.sql import functions as F

    return (
        rows.select(
            F.try_element_at(_values(OUT_ERROR), F.lit(1)).cast("string").alias("reason"),
            F.try_element_at(_values(OUT_ORIGIN), F.lit(1)).cast("string").alias("origin"),
        )
        .where(
            (F.col("reason") == F.lit(Reason.PREFIX_OVER_CAP.value)) & F.col("origin").isNotNull()
        )
        .select("origin")
        .distinct()
    )


def _values(name: str) -> Column:
    """The values of every header called ``name`` (an array; empty when absent)."""
    from pyspark.sql import functions as F

    return F.transform(
        F.filter(F.coalesce("headers", F.array()), lambda h: h["key"] == F.lit(name)),
        lambda h: h["value"],
    )


def _names() -> Column:
    """The record's header names in order (an empty array when it has no headers)."""
    from pyspark.sql import functions as F

    return F.coalesce(F.col("headers.key"), F.array().cast("array<string>"))


def _count(names: str, name: str) -> Column:
    """How many of the header names in column ``names`` are ``name``."""
    from pyspark.sql import functions as F

    return F.size(names) - F.size(F.array_remove(names, F.lit(name)))


def _first(names: str, values: str, name: str) -> Column:
    """The value of the first header called ``name`` (null when there is none)."""
    from pyspark.sql import functions as F

    position = F.array_position(names, F.lit(name))
    return F.when(position > 0, F.element_at(values, position.cast("int")))


def _blank(text: Column) -> Column:
    from pyspark.sql import functions as F

    return text.isNull() | (F.trim(text) == F.lit(""))
