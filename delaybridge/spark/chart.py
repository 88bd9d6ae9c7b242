"""The report as one PNG a person reads at a glance.

Top: per due window (all target topics together), two bars side by side: *sent* (grey,
cancelled hatched on top) and *delivered* (blue) with *missing* stacked on it in red, so
a healthy window shows two equal bars and a gap shows as colour, not as arithmetic; a
dark-red marker flags windows with early deliveries. Bottom: the first-delivery lateness
histogram, early bucket in red, buckets beyond the ``late`` threshold in orange. The
title carries the verdict. matplotlib's Agg backend: no display needed.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

from delaybridge.spark.report import LATENESS_EDGES_MS, Report, lateness_bucket_labels


def write_chart(report: Report, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    due: dict[int, int] = defaultdict(int)
    delivered: dict[int, int] = defaultdict(int)
    missing: dict[int, int] = defaultdict(int)
    early: dict[int, int] = defaultdict(int)
    sent: dict[int, int] = defaultdict(int)
    cancelled: dict[int, int] = defaultdict(int)
    for w in report.windows:
        sent[w.window_start_ms] += w.counts.sent
        cancelled[w.window_start_ms] += w.counts.cancelled
        due[w.window_start_ms] += w.counts.due
        delivered[w.window_start_ms] += w.counts.delivered
        missing[w.window_start_ms] += w.counts.missing
        early[w.window_start_ms] += w.counts.early
    starts = sorted(sent)
    labels = [datetime.fromtimestamp(s / 1000, UTC).strftime("%H:%M") for s in starts]
    x = list(range(len(starts)))

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(11, 7.5), height_ratios=(3, 2))
    ok = not report.failures
    verdict = "OK" if ok else "FAIL: " + ", ".join(report.failures)
    fig.suptitle(
        f"delaybridge reconciliation — {verdict}",
        color="tab:green" if ok else "tab:red",
        fontsize=14,
        fontweight="bold",
    )
    width = 0.4
    expected = [sent[s] - cancelled[s] for s in starts]
    top.bar([i - width / 2 for i in x], expected, width, label="sent (not cancelled)", color="0.6")
    top.bar(
        [i - width / 2 for i in x],
        [cancelled[s] for s in starts],
        width,
        bottom=expected,
        label="cancelled",
        color="0.88",
        hatch="//",
        edgecolor="0.6",
    )
    top.bar(
        [i + width / 2 for i in x],
        [delivered[s] for s in starts],
        width,
        label="delivered",
        color="tab:blue",
    )
    top.bar(
        [i + width / 2 for i in x],
        [missing[s] for s in starts],
        width,
        bottom=[delivered[s] for s in starts],
        label="missing",
        color="tab:red",
    )
    early_x = [i for i, s in zip(x, starts, strict=True) if early[s]]
    if early_x:
        top.scatter(
            early_x,
            [delivered[starts[i]] for i in early_x],
            marker="v",
            s=80,
            color="darkred",
            zorder=3,
            label="has early deliveries",
        )
    top.set_title(
        f"Messages per due window ({report.window_ms / 1000:g} s, UTC); "
        f"sent {report.totals.sent:,}, delivered {report.totals.delivered:,}, "
        f"missing {report.totals.missing:,}, early {report.totals.early:,}",
        fontsize=10,
    )
    top.set_ylabel("messages")
    top.set_xlim(-0.75, max(len(x), 2) - 0.25)
    top.yaxis.set_major_locator(MaxNLocator(integer=True))
    step = max(1, len(x) // 16)
    top.set_xticks(x[::step], labels[::step], rotation=0, fontsize=8)
    top.legend(loc="upper right", fontsize=8)
    top.grid(axis="y", alpha=0.3)

    counts = report.lateness_histogram or [0] * (len(LATENESS_EDGES_MS) + 1)
    bucket_labels = lateness_bucket_labels()
    colors = []
    for index in range(len(counts)):
        # Bucket i covers [edges[i-1], edges[i]); orange when any of it is past the threshold.
        upper = LATENESS_EDGES_MS[index] if index < len(LATENESS_EDGES_MS) else None
        if index == 0:
            colors.append("tab:red")
        elif upper is None or upper > report.late_after_ms:
            colors.append("tab:orange")
        else:
            colors.append("tab:blue")
    bottom.bar(range(len(counts)), counts, color=colors)
    bottom.set_xticks(range(len(counts)), bucket_labels, fontsize=8)
    t = report.totals
    bottom.set_title(
        f"First-delivery lateness (ms): p50 {_ms(t.lateness_p50_ms)}, "
        f"p99 {_ms(t.lateness_p99_ms)}, max {_ms(t.lateness_max_ms)}; "
        f"late (> {report.late_after_ms:,} ms) {t.late:,}",
        fontsize=10,
    )
    bottom.set_ylabel("messages")
    bottom.yaxis.set_major_locator(MaxNLocator(integer=True))
    bottom.margins(y=0.15)
    bottom.set_xlabel("lateness bucket, ms (red: early; orange: late)")
    bottom.grid(axis="y", alpha=0.3)
    for index, value in enumerate(counts):
        if value:
            bottom.annotate(f"{value:,}", (index, value), ha="center", va="bottom", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _ms(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"
