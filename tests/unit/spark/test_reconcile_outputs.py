"""Report files, console table and chart, from a hand-made report (no Spark)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
from rich.console import Console

from delaybridge.spark.output import write_report_files
from delaybridge.spark.render import print_report
from delaybridge.spark.report import (
    Counts,
    DelaySummary,
    Report,
    TargetSummary,
    WindowRow,
)

BASE_MS = 1_790_000_040_000


def _report(missing: int = 0) -> Report:
    good = Counts(
        sent=100,
        due=100,
        delivered=100,
        late=2,
        lateness_p50_ms=40,
        lateness_p99_ms=900,
        lateness_max_ms=4_000,
    )
    gap = Counts(
        sent=50,
        cancelled=5,
        due=45,
        delivered=45 - missing,
        missing=missing,
        lateness_p50_ms=30,
        lateness_p99_ms=80,
        lateness_max_ms=95,
    )
    total = Counts(
        sent=150,
        cancelled=5,
        due=145,
        delivered=145 - missing,
        missing=missing,
        late=2,
        lateness_p50_ms=35,
        lateness_p99_ms=900,
        lateness_max_ms=4_000,
    )
    return Report(
        as_of_ms=BASE_MS + 600_000,
        due_cutoff_ms=BASE_MS + 590_000,
        window_ms=60_000,
        grace_ms=10_000,
        late_after_ms=1_100,
        totals=total,
        windows=[WindowRow("orders", BASE_MS, good), WindowRow("orders", BASE_MS + 60_000, gap)],
        targets=[TargetSummary("orders", total, records=146, no_delay_id=1)],
        delay_topics=[
            DelaySummary(
                "delay",
                records=158,
                schedules=150,
                cancels=6,
                cancel_unknown=1,
                rejected={"bad-time": 2},
            )
        ],
        lateness_histogram=[0, 120, 20, 2, 1, 2, 0, 0, 0, 0, 0],
    )


def test_files_hold_the_report(tmp_path: Path) -> None:
    written = write_report_files(_report(missing=3), tmp_path)
    assert [p.name for p in written] == ["report.json", "windows.parquet", "reconcile.png"]
    data = json.loads((tmp_path / "report.json").read_text())
    assert data["failures"] == ["3 missing"]
    assert data["delay_topics"][0]["rejected"] == {"bad-time": 2}
    rows = pq.read_table(tmp_path / "windows.parquet").to_pylist()
    assert [(r["window_start_ms"], r["sent"], r["missing"]) for r in rows] == [
        (BASE_MS, 100, 0),
        (BASE_MS + 60_000, 50, 3),
    ]
    assert (tmp_path / "reconcile.png").read_bytes()[:4] == b"\x89PNG"
    assert not list(tmp_path.glob("*.tmp*")), "temporary files left behind"


def test_chart_is_optional(tmp_path: Path) -> None:
    written = write_report_files(_report(), tmp_path, chart=False)
    assert not (tmp_path / "reconcile.png").exists()
    assert len(written) == 2


def test_console_shows_windows_sides_and_verdict() -> None:
    console = Console(record=True, width=160)
    print_report(_report(missing=3), console)
    text = console.export_text()
    assert "FAIL: 3 missing" in text
    assert "unknown id 1" in text and "bad-time 2" in text
    assert text.count("orders") >= 3  # two windows and the topic total


def test_console_verdict_when_all_is_well() -> None:
    console = Console(record=True, width=160)
    print_report(_report(), console)
    assert "OK: nothing missing, nothing early (2 late)" in console.export_text()
