"""``/``: the group at a glance.

Pending messages per target topic and their due times (next hour by minute, then by
hour), delivery and dead-letter rates and lateness (from the replicas' ``/metrics``,
:mod:`~delaybridge.console.metrics_history`), every replica with its pause and
back-pressure state, and every partition with its owner. What is missing is said on the
page: a replica that did not answer, a partition owned twice during a rebalance.
"""

from __future__ import annotations

from flask import Flask, render_template

from delaybridge.console import charts
from delaybridge.console.cluster_view import merge
from delaybridge.console.pages.common import context, now_ms


def register(app: Flask) -> None:
    app.add_url_rule("/", "overview", _overview)


def _overview() -> str:
    ctx = context()
    now = now_ms()
    stats = ctx.replicas.each("GET", "/admin/stats")
    pending = ctx.replicas.each("GET", "/admin/pending", {"start_ms": str(now)})
    view = merge(stats, pending, now)
    rates = ctx.history.rates(ctx.settings.rate_window_s)
    points = ctx.history.points()
    by_topic = charts.bars(
        sorted(view.by_topic.items(), key=lambda kv: -kv[1]), title="Pending per target topic"
    )
    minutes = charts.columns(
        view.by_minute,
        [f"+{m}m" for m in range(len(view.by_minute))],
        title="Due in the next hour, by minute",
        every=10,
    )
    hours = charts.columns(
        view.by_hour,
        [f"+{h}h" for h in range(len(view.by_hour))],
        title="Due later, by hour (to the end of the wheel's window)",
        every=max(1, len(view.by_hour) // 12),
    )
    rate_chart = charts.lines(
        [
            ("delivered/s", [p.delivered_per_s for p in points]),
            ("dead-lettered/s", [p.dead_lettered_per_s for p in points]),
        ],
        title="Deliveries and dead letters per second, all replicas",
    )
    return render_template(
        "overview.html",
        view=view,
        rates=rates,
        points=len(points),
        scrape_errors=ctx.history.errors,
        dead_totals=ctx.history.dead_lettered_totals(),
        by_topic_chart=by_topic,
        minutes_chart=minutes,
        hours_chart=hours,
        rate_chart=rate_chart,
        sample_interval_s=ctx.settings.sample_interval_s,
        hour_total=sum(view.by_minute),
    )
