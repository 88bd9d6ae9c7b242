"""The report's counts from per-message rows (``rollup.aggregate``) on real PySpark.

Lateness percentiles are exact nearest-rank figures: the p-th percentile of n delivered
messages is the ``ceil(p · n)``-th smallest lateness, per window, per topic and overall.

=======  =========  ======================================  ===================
topic    window     messages                                p50 / p99 / max
=======  =========  ======================================  ===================
a        0          delivered 1, 2, ..., 100 ms late        50 / 99 / 100
a        60 000     one 7 ms late, one missing              7 / 7 / 7
b        0          -5, 10 and 1 000 ms late                10 / 1 000 / 1 000
=======  =========  ======================================  ===================

So topic a: 1..7, 7, 8..100 (n = 101): ranks 51 and 100 hold 50 and 99; overall
(n = 104): -5, 1..7, 7, 8..10, 10, 11..100, 1000: ranks 52 and 103 hold 49 and 100.
"""

from __future__ import annotations

from typing import Any

import pytest

from delaybridge.spark.outcomes import FLAGS
from delaybridge.spark.report import Counts, split_rollup
from delaybridge.spark.rollup import aggregate, histogram_of

pytestmark = [pytest.mark.spark]


def _message(topic: str, window: int, lateness: int | None) -> dict[str, Any]:
    delivered = lateness is not None
    flags = dict.fromkeys(FLAGS, 0)
    flags.update(due=1, delivered=int(delivered), missing=int(not delivered))
    return {
        "unmatched": 0,
        "id": f"{topic}-{window}-{lateness}",
        "target_topic": topic,
        "window_start_ms": window,
        "lateness_ms": lateness,
        "extra_copies": 0,
        **flags,
    }


def test_counts_roll_up_and_lateness_percentiles_are_exact(spark: Any) -> None:
    rows = [_message("a", 0, ms) for ms in range(1, 101)]
    rows += [_message("a", 60_000, 7), _message("a", 60_000, None)]
    rows += [_message("b", 0, ms) for ms in (-5, 10, 1_000)]
    rows.append({**_message("a", 0, None), "id": None, "unmatched": 1, "missing": 0})
    schema = (
        "unmatched int, id string, target_topic string, window_start_ms long, "
        "lateness_ms long, extra_copies int, " + ", ".join(f"{name} int" for name in FLAGS)
    )
    per_message = spark.createDataFrame(
        [tuple(row[name.split()[0]] for name in schema.split(", ")) for row in rows], schema
    )

    rolled = aggregate(per_message)
    windows, per_topic, overall = split_rollup(rolled)

    def lateness(counts: Counts) -> tuple[int | None, int | None, int | None]:
        return counts.lateness_p50_ms, counts.lateness_p99_ms, counts.lateness_max_ms

    assert [(w.target_topic, w.window_start_ms, lateness(w.counts)) for w in windows] == [
        ("a", 0, (50, 99, 100)),
        ("a", 60_000, (7, 7, 7)),
        ("b", 0, (10, 1_000, 1_000)),
    ]
    assert lateness(per_topic["a"]) == (50, 99, 100)
    assert lateness(per_topic["b"]) == (10, 1_000, 1_000)
    assert lateness(overall) == (49, 100, 1_000)
    assert (per_topic["a"].sent, per_topic["a"].delivered, per_topic["a"].missing) == (102, 101, 1)
    assert (overall.sent, overall.delivered, overall.missing, overall.due) == (105, 104, 1, 105)
    # Buckets: < 0, [0, 100), [100, 200), [200, 500), [500, 1000), [1000, 2000), ...
    assert histogram_of(rolled) == [1, 101, 1, 0, 0, 1, 0, 0, 0, 0, 0]
