"""The real sidecar on real topics, its output reconciled by the real PySpark job."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from delaybridge.settings import Settings
from delaybridge.spark.job import run_reconciliation
from delaybridge.spark.settings import ReconcileSettings
from tests.integration.sidecar.harness import (
    InProcessSidecar,
    Topics,
    Watcher,
    now_ms,
    produce,
)

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow]


def test_sidecar_output_reconciles_to_nothing_missing_nothing_early(
    kafka: Any,
    topics: Topics,
    watcher: Watcher,
    tmp_path: Path,
    make_settings: Callable[..., Settings],
) -> None:
    settings = make_settings()
    side = InProcessSidecar.start(settings)
    n, cancelled = 300, range(0, 300, 30)
    try:
        t = now_ms()
        produce(
            kafka.bootstrap_servers,
            topics.delay,
            [
                (
                    f"k{i}".encode(),
                    f"v{i}".encode(),
                    [
                        ("delay-target-topic", topics.targets[i % 2]),
                        ("deliver-at-ms", str(t + 2_000 + (i * 3_000) // n)),
                        ("delay-id", f"rec-{i}"),
                    ],
                )
                for i in range(n)
            ],
        )
        produce(
            kafka.bootstrap_servers,
            topics.delay,
            [(b"c", b"", [("delay-cancel", f"rec-{i}")]) for i in cancelled],
            partition=2,
        )
        want = {f"rec-{i}" for i in range(n)} - {f"rec-{i}" for i in cancelled}
        watcher.until(lambda a: want <= {x.id for x in a}, 60, "every uncancelled message")
        watcher.settle(1.0)
    finally:
        side.stop()
    report = run_reconciliation(
        ReconcileSettings.from_sidecar(
            settings,
            target_topics=tuple(topics.targets),
            output_dir=tmp_path / "report",
            grace_ms=0,
            master="local[2]",
        )
    )
    totals = report.totals
    assert (totals.sent, totals.cancelled) == (n, len(cancelled))
    assert totals.delivered == n - len(cancelled)
    assert totals.missing == 0 and totals.early == 0 and totals.cancel_ignored == 0
    assert report.exit_code == 0
    assert (tmp_path / "report" / "report.json").exists()
