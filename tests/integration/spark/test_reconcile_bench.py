"""``delaybridge bench reconcile``, run small on real Kafka and real PySpark: its verdict is
exact, and its baseline (a bare read and count of the same topics) is measured.

At 505b445 the bench named ``<delay>/0/<i>`` as every delivery's ``delay-origin`` while
its schedules spread over 4 partitions, and the job matches deliveries to schedules by
origin: 1M seeded gave delivered=250,290, missing=749,710 (issue 26, item 5).
Pass criteria: N sent, N delivered, 0 missing, 0 early; both baseline reads count 2N.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from delaybridge.connectors import KafkaSettings
from delaybridge.spark.bench import measure

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

N = 2_000


def test_the_bench_verdict_is_exact_over_several_partitions(
    kafka: Any, spark: Any, tmp_path: Path
) -> None:
    settings = KafkaSettings(bootstrap_servers=kafka.bootstrap_servers)
    result = measure(settings, N, 4, "local[2]", tmp_path / "report", spark=spark)
    assert result["counts"]["sent"] == N
    assert result["counts"]["delivered"] == N
    assert result["counts"]["missing"] == 0
    assert result["counts"]["early"] == 0
    assert result["verdict_exact"] is True
    assert len(result["seconds_baseline_runs"]) == 2
    assert result["seconds_baseline"] > 0
    assert result["ratio_to_baseline"] == pytest.approx(
        result["seconds_reconcile"] / result["seconds_baseline"], rel=0.05
    )
