"""Target-topic rows → deliveries, with the sidecar's provenance headers checked.

Every record the sidecar delivers carries ``delay-id``, ``delay-origin``
(``topic/partition/offset``) and ``delay-due-ms`` (a decimal string). A target topic may
also hold records that never went through the sidecar (a producer writing to it
directly): those have no ``delay-id`` and are only counted.

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

from delaybridge.bridge.headers import OUT_DUE_MS, OUT_ID, OUT_ORIGIN

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame


class DeliveryStatus(StrEnum):
    OK = "ok"
    NO_DELAY_ID = "no-delay-id"
    MALFORMED = "malformed"


def parse_deliveries(rows: DataFrame) -> DataFrame:
    """Kafka-source rows (with ``timestamp_ms``) → ``topic, partition, offset,
    timestamp_ms, delay_id, origin, header_due_ms, status, problem``."""
    from pyspark.sql import functions as F

    ids = _values(OUT_ID)
    origins = _values(OUT_ORIGIN)
    dues = _values(OUT_DUE_MS)
    delay_id = F.try_element_at(ids, F.lit(1)).cast("string")
    origin = F.try_element_at(origins, F.lit(1)).cast("string")
    due_text = F.try_element_at(dues, F.lit(1)).cast("string")
    problem = (
        F.when(F.size(ids) > 1, F.lit(f"{OUT_ID} appears more than once"))
        .when(_blank(delay_id), F.lit(f"{OUT_ID} is empty or null"))
        .when(~F.is_valid_utf8(delay_id), F.lit(f"{OUT_ID} is not UTF-8"))
        .when(F.size(dues) != 1, F.lit(f"{OUT_DUE_MS} missing or repeated"))
        .when(
            ~due_text.rlike(r"^[0-9]{1,18}$") | due_text.isNull(),
            F.lit(f"{OUT_DUE_MS} is not a decimal number"),
        )
        .when(F.size(origins) != 1, F.lit(f"{OUT_ORIGIN} missing or repeated"))
        .when(
            ~origin.rlike(r"^[A-Za-z0-9._-]+/[0-9]+/[0-9]+$") | origin.isNull(),
            F.lit(f"{OUT_ORIGIN} is not topic/partition/offset"),
        )
    )
    status = (
        F.when(F.size(ids) == 0, F.lit(DeliveryStatus.NO_DELAY_ID.value))
        .when(problem.isNotNull(), F.lit(DeliveryStatus.MALFORMED.value))
        .otherwise(F.lit(DeliveryStatus.OK.value))
    )
    return rows.select(
        "topic",
        "partition",
        "offset",
        "timestamp_ms",
        delay_id.alias("delay_id"),
        origin.alias("origin"),
        F.when(problem.isNull(), due_text.cast("long")).alias("header_due_ms"),
        status.alias("status"),
        F.when(F.size(ids) > 0, problem).alias("problem"),
    )


def _values(name: str) -> Column:
    """The values of every header called ``name`` (an array; empty when absent)."""
    from pyspark.sql import functions as F

    return F.transform(
        F.filter(F.coalesce("headers", F.array()), lambda h: h["key"] == F.lit(name)),
        lambda h: h["value"],
    )


def _blank(text: Column) -> Column:
    from pyspark.sql import functions as F

    return text.isNull() | (F.trim(text) == F.lit(""))
