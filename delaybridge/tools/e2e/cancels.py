"""``bench e2e --only cancels``: "close unpaid orders" on top of a large backlog.

The shop case of issue 13: ``pending`` messages wait far in the future (the backlog),
then for ``seconds`` a steady ``rate`` of orders arrives, each an order timeout due
``ORDER_DELAY_MS`` later; 70 % of them are cancelled ``CANCEL_BEFORE_MS`` before they
fall due (the order was paid). Measured: the lateness of the orders that stay (from
their due time to when a read_committed reader sees them), how many cancelled orders
were delivered anyway (must be 0), the cancel rate, and the sidecar's peak RSS. Cancels
look ids up in the id index (timerlog/id_index.py), so lateness should not grow with
the backlog (before it, every cancel batch scanned the live timer log).

The backlog is sent with ``delay-on-duplicate: keep``, so that the fill measures storing
and not the replace each explicit-id record publishes (when each store kept its waiting
replaces as objects and cancel-log records, a replace fill held ~1M of them, > 600 MB;
since ``timerlog/replace_waits.py`` a replace fill costs the cancel-topic record, see
``tools/e2e/bulk.py``), and stays comparable with earlier runs. The orders keep the
default (each is a replace, as in production).
"""

from __future__ import annotations

import heapq
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from delaybridge.connectors import KafkaClients, ensure_topics, produce_blocking
from delaybridge.tools.e2e.sidecar import SidecarProcess
from delaybridge.tools.e2e.traffic import VALUE, LiveArrivals, fill

ORDER_DELAY_MS = 20_000
CANCEL_BEFORE_MS = 10_000
CANCELLED_SHARE = 0.7


def cancel_heavy(
    console: Console, clients: KafkaClients, work: Path, pending: int, rate: int, seconds: int
) -> dict[str, Any]:
    """The scenario of the module docstring; a flat dict for the table and the JSON."""
    stamp = time.time_ns()
    delay, target = f"cx.delay.{stamp}", f"cx.out.{stamp}"
    ensure_topics(clients.admin(), {delay: {}, target: {}})
    side = SidecarProcess(clients.settings, work, delay)
    try:
        later = int(time.time() * 1000) + 3_600_000  # the backlog: due in an hour
        fill(
            clients,
            delay,
            pending,
            lambda i: [
                ("delay-target-topic", target),
                ("deliver-at-ms", str(later)),
                ("delay-id", f"backlog-{i}"),
                ("delay-on-duplicate", "keep"),
            ],
            console,
        )
        with console.status(f"waiting for the sidecar to store {pending:,} records"):
            side.wait_for(lambda: side.stored() >= pending, 900, f"{pending} records stored")
        fill_peak = side.peak_anon_mb, side.peak_file_mb, side.peak_rss_mb()
        side.peak_anon_mb = side.peak_file_mb = 0.0  # from here: the orders' peaks
        arrivals = LiveArrivals(clients, target)
        with console.status(f"{rate} orders/s for {seconds} s, 70 % cancelled"):
            sent, cancelled, cancel_s = _orders(clients, delay, target, rate, seconds)
        kept = sent - len(cancelled)
        seen = arrivals.finish(kept, timeout_s=ORDER_DELAY_MS / 1000 + 120)
        rss = side.peak_rss_mb()
    finally:
        side.stop()
    visible = sorted(arrivals.visible)
    wrongly = sum(1 for id in arrivals.ids if id in cancelled)

    def pct(p: float) -> int:
        return visible[min(len(visible) - 1, int(p * len(visible)))] if visible else -1

    return {
        "pending": pending,
        "orders_per_s": rate,
        "seconds": seconds,
        "orders": sent,
        "cancelled": len(cancelled),
        "cancels_per_s": round(len(cancelled) / cancel_s) if cancel_s > 0 else 0,
        "kept_delivered": seen,
        "cancelled_but_delivered": wrongly,
        "visible_lateness_p50_ms": pct(0.50),
        "visible_lateness_p99_ms": pct(0.99),
        "visible_lateness_max_ms": visible[-1] if visible else -1,
        "early": sum(1 for x in visible if x < 0),
        "sidecar_peak_rss_mb": round(rss, 1),
        # Where the memory is (RssAnon: heap, librdkafka; RssFile: mapped store files),
        # while the backlog was stored and then while the orders ran.
        "fill_peak_anon_mb": round(fill_peak[0], 1),
        "fill_peak_file_mb": round(fill_peak[1], 1),
        "fill_peak_rss_mb": round(fill_peak[2], 1),
        "orders_peak_anon_mb": round(side.peak_anon_mb, 1),
        "orders_peak_file_mb": round(side.peak_file_mb, 1),
    }


def _orders(
    clients: KafkaClients, delay: str, target: str, rate: int, seconds: int
) -> tuple[int, set[str], float]:
    """Send the orders on schedule and their cancels at due − CANCEL_BEFORE_MS; returns
    (orders sent, ids cancelled, seconds over which the cancels went out)."""
    producer = clients.producer({"linger.ms": 5})
    cancels: list[tuple[float, str]] = []  # (when, id), a heap
    cancelled: set[str] = set()
    start = time.monotonic()
    first_cancel = last_cancel = 0.0
    n = rate * seconds
    i = 0
    while i < n or cancels:
        now = time.monotonic()
        while i < n and start + i / rate <= now:
            id = f"order-{i}"
            headers: list[tuple[str, str | bytes | None]] = [
                ("delay-target-topic", target),
                ("delay-ms", str(ORDER_DELAY_MS)),
                ("delay-id", id),
            ]
            produce_blocking(producer, delay, VALUE, id.encode(), headers=headers)
            if (i * 7) % 10 < CANCELLED_SHARE * 10:  # 7 of every 10, spread evenly
                due_in = (ORDER_DELAY_MS - CANCEL_BEFORE_MS) / 1000
                heapq.heappush(cancels, (now + due_in, id))
            i += 1
        while cancels and cancels[0][0] <= now:
            _, id = heapq.heappop(cancels)
            produce_blocking(producer, delay, None, id.encode(), headers=[("delay-cancel", id)])
            cancelled.add(id)
            first_cancel = first_cancel or now
            last_cancel = now
        producer.poll(0)
        nexts = [c[0] for c in cancels[:1]] + ([start + i / rate] if i < n else [])
        wake = min(nexts) if nexts else now
        time.sleep(max(0.0, min(wake - time.monotonic(), 0.01)))  # pacing the producer
    producer.flush(30)
    return n, cancelled, last_cancel - first_cancel
