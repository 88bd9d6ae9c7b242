"""The report on a terminal: one rich table per target topic's windows, then the verdict."""

from __future__ import annotations

import sys
from datetime import UTC, datetime

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from delaybridge.spark.report import Counts, Report

_COLUMNS = (
    ("sent", "sent"),
    ("cancelled", "cancel"),
    ("replaced", "repl"),
    ("due", "due"),
    ("delivered", "deliv"),
    ("missing", "missing"),
    ("expired", "expired"),
    ("duplicated", "dup"),
    ("early", "early"),
    ("late", "late"),
)
_BAD = {"missing", "early"}
_WARN = {"duplicated", "late"}


def utc(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _ms(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def _cells(counts: Counts) -> list[Text]:
    cells = []
    for name, _ in _COLUMNS:
        value = int(getattr(counts, name))
        style = ""
        if value and name in _BAD:
            style = "bold red"
        elif value and name in _WARN:
            style = "yellow"
        cells.append(Text(f"{value:,}", style=style))
    for lateness in (counts.lateness_p50_ms, counts.lateness_p99_ms, counts.lateness_max_ms):
        cells.append(Text(_ms(lateness)))
    return cells


def windows_table(report: Report) -> Table:
    """Rows: target topic × due window, then a total per topic and overall."""
    table = Table(
        title=f"Reconciliation as of {utc(report.as_of_ms)} UTC "
        f"(due before {utc(report.due_cutoff_ms)}, windows of {report.window_ms / 1000:g} s)",
        title_justify="left",
    )
    table.add_column("target topic", no_wrap=True)
    table.add_column("due window (UTC)", no_wrap=True)
    for _, header in _COLUMNS:
        table.add_column(header, justify="right")
    for header in ("p50 ms", "p99 ms", "max ms"):
        table.add_column(header, justify="right")
    targets = {t.topic: t for t in report.targets}
    for topic in sorted(targets):
        for window in (w for w in report.windows if w.target_topic == topic):
            table.add_row(topic, utc(window.window_start_ms), *_cells(window.counts))
        table.add_row(
            Text(topic, style="bold"),
            Text("total", style="bold"),
            *_cells(targets[topic].counts),
            end_section=True,
        )
    table.add_row(Text("all", style="bold"), "", *_cells(report.totals))
    return table


def sides_table(report: Report) -> Table:
    """What did not join: per delay topic and per target topic."""
    table = Table(title="Records outside the join", title_justify="left")
    for header in ("topic", "role", "records", "detail"):
        table.add_column(header, justify="right" if header == "records" else "left")
    for d in report.delay_topics:
        rejected = ", ".join(f"{reason} {n}" for reason, n in d.rejected.items()) or "none"
        table.add_row(
            d.topic,
            "delay",
            f"{d.records:,}",
            f"schedules {d.schedules}, resent {d.resent}, cancels {d.cancels} "
            f"(unknown id {d.cancel_unknown}), rejected: {rejected}"
            + (f", other targets {d.other_targets}" if d.other_targets else ""),
        )
    for t in report.targets:
        detail = (
            f"no delay-id {t.no_delay_id}, malformed {t.malformed}, unmatched {t.unmatched}"
            if t.exists
            else "topic does not exist"
        )
        table.add_row(t.topic, "target", f"{t.records:,}", detail)
    return table


def verdict(report: Report) -> Text:
    if report.failures:
        return Text("FAIL: " + ", ".join(report.failures), style="bold red")
    extra = []
    if report.totals.duplicated:
        extra.append(f"{report.totals.duplicated} duplicated")
    if report.totals.late:
        extra.append(f"{report.totals.late} late")
    note = f" ({', '.join(extra)})" if extra else ""
    return Text(f"OK: nothing missing, nothing early{note}", style="bold green")


def print_report(report: Report, console: Console | None = None) -> None:
    # 13 columns do not fit 80: off a terminal (logs, CI), print 150 wide rather than wrap.
    console = console or Console(width=None if sys.stdout.isatty() else 150)
    console.print(Group(windows_table(report), sides_table(report), verdict(report)))
