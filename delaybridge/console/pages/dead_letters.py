"""``/dead-letters``: the dead-letter topic by reason code, with the original headers.

Read with the console's own Kafka client
(:class:`~delaybridge.console.dead_letters.DeadLetterReader`: assigned partitions, no
group commits, ``read_committed``), newest first, a bounded
number of records per page; the reason filter applies to what a page reads, and the
counts by reason are of those records. The replicas' ``delaybridge_dead_lettered_total``
counters (since each replica started) are shown beside them for the long view.
"""

from __future__ import annotations

from flask import Flask, render_template, request

from delaybridge.console import charts
from delaybridge.console.dead_letters import Cursor
from delaybridge.console.formatting import preview
from delaybridge.console.pages.common import context
from delaybridge.contract.reasons import Reason
from delaybridge.errors import DelayBridgeError

PAGE_SIZE = 50


def register(app: Flask) -> None:
    app.add_url_rule("/dead-letters", "dead_letters", _dead_letters)


def _dead_letters() -> tuple[str, int] | str:
    ctx = context()
    reason = (request.args.get("reason") or "").strip() or None
    reasons = [r.value for r in Reason]
    try:
        raw = request.args.get("cursor")
        cursor = Cursor.decode(raw) if raw else None
        page = ctx.dead_letters.page(reason, cursor, PAGE_SIZE)
    except DelayBridgeError as exc:
        return render_template(
            "dead_letters.html",
            page=None,
            error=str(exc),
            reason=reason,
            reasons=reasons,
            topic=ctx.dead_letters.topic,
        ), 502
    previews = {}
    if ctx.settings.value_preview:
        previews = {
            (d.partition, d.offset): preview(d.value, ctx.settings.preview_bytes)
            for d in page.letters
        }
    totals = ctx.history.dead_lettered_totals()
    return render_template(
        "dead_letters.html",
        page=page,
        error=None,
        reason=reason,
        reasons=reasons,
        topic=ctx.dead_letters.topic,
        previews=previews,
        scanned_chart=charts.bars(
            sorted(page.scanned_by_reason.items(), key=lambda kv: -kv[1]),
            title="Dead letters by reason, among the records read",
        ),
        totals={r: n for r, n in totals.items() if n > 0},
    )
