"""Report files under the output directory.

======================  ===========================================================
``report.json``         the whole :class:`~delaybridge.spark.report.Report` (+ verdict)
``windows.parquet``     one row per (target topic, due window) with every counter
``problems/``           Parquet (written by Spark): every missing, early, duplicated,
                        late or cancel-ignored message with its offsets and times
``reconcile.png``       the chart (:mod:`delaybridge.spark.chart`)
======================  ===========================================================

Every file is replaced atomically and durably (:mod:`delaybridge.durable`), so a
scheduler that picks up ``report.json`` never reads half of it, even after a crash.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from delaybridge.durable import replacing, write_atomic
from delaybridge.spark.report import Counts, Report

REPORT_JSON = "report.json"
WINDOWS_PARQUET = "windows.parquet"
PROBLEMS_DIR = "problems"
CHART_PNG = "reconcile.png"


def write_report_files(report: Report, out_dir: Path, *, chart: bool = True) -> list[Path]:
    """Write JSON, windows Parquet and (optionally) the chart; return their paths."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    json_path = out_dir / REPORT_JSON
    write_atomic(json_path, json.dumps(report.to_dict(), indent=2, sort_keys=False) + "\n")
    written.append(json_path)

    names = [name for name in Counts.__dataclass_fields__]
    columns: dict[str, list[object]] = {"target_topic": [], "window_start_ms": []}
    columns.update({name: [] for name in names})
    for window in report.windows:
        columns["target_topic"].append(window.target_topic)
        columns["window_start_ms"].append(window.window_start_ms)
        for name, value in asdict(window.counts).items():
            columns[name].append(value)
    schema = pa.schema(
        [("target_topic", pa.string()), ("window_start_ms", pa.int64())]
        + [(name, pa.int64()) for name in names]
    )
    parquet_path = out_dir / WINDOWS_PARQUET
    with replacing(parquet_path) as tmp:
        pq.write_table(pa.table(columns, schema=schema), tmp)
    written.append(parquet_path)

    if chart:
        from delaybridge.spark.chart import write_chart

        png = out_dir / CHART_PNG
        with replacing(png, suffix=".tmp.png") as tmp_png:  # matplotlib reads the extension
            write_chart(report, tmp_png)
        written.append(png)
    return written
