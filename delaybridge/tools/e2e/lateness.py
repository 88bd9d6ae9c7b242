"""``bench e2e``'s lateness: a steady stream with 1–5 s delays, each record's lateness.

Lateness is the broker timestamp of the delivered record minus its ``delay-due-ms``
(and, visible, when a read_committed reader saw it), for every record; run with the
changelog on and off, and optionally per worker count and in exactly-once mode, each on
fresh topics with its own sidecar child (``measure.py`` has the shared pieces).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException, TopicPartition
from rich.console import Console

from delaybridge.connectors import KafkaClients
from delaybridge.tools.e2e.measure import _NO_CHANGELOG, EOS, TICK_MS, _settled, _topics
from delaybridge.tools.e2e.sidecar import SidecarProcess
from delaybridge.tools.e2e.traffic import LiveArrivals, steady


def lateness(
    console: Console,
    clients: KafkaClients,
    work: Path,
    rate: int,
    seconds: int,
    exactly_once: bool = False,
    workers: tuple[int, ...] = (1,),
) -> dict[str, Any]:
    """A steady stream with 1–5 s delays: how late (or early) each record arrives, with
    the changelog on (the default) and off, one after the other in the same run; with
    ``exactly_once``, exactly-once mode too (keys ending ``_exactly_once``); for every
    worker count after the first, the default mode again (keys ending ``_workers_<w>``).
    With more than one worker anywhere, every delay topic gets 2 partitions per worker of
    the largest count, and the stream starts once each worker owns partitions."""
    parts = 1 if max(workers) == 1 else 2 * max(workers)
    first = {"workers": workers[0]}

    def run(name: str, overrides: dict[str, Any]) -> dict[str, Any]:
        return _steady_lateness(console, clients, work / name, rate, seconds, overrides, parts)

    on = run("on", first)
    off = run("off", _NO_CHANGELOG | first)
    more: dict[str, Any] = {}
    for w in workers[1:]:
        more |= {f"{key}_workers_{w}": value for key, value in run(f"w{w}", {"workers": w}).items()}
    eos: dict[str, Any] = {}
    if exactly_once:
        eos = run("eos", EOS | first)
        eos["lateness_p99_target_ms"] = TICK_MS + 150
    return {
        "rate_msgs_per_s": rate,
        "seconds": seconds,
        "workers": workers[0],
        "delay_partitions": parts,
        **on,
        **{f"{key}_no_changelog": value for key, value in off.items()},
        **more,
        **{f"{key}_exactly_once": value for key, value in eos.items()},
        "tick_ms": TICK_MS,
        "lateness_p99_target_ms": TICK_MS + 50,
    }


def _steady_lateness(
    console: Console,
    clients: KafkaClients,
    work: Path,
    rate: int,
    seconds: int,
    overrides: dict[str, Any],
    partitions: int = 1,
) -> dict[str, Any]:
    admin = clients.admin()
    (delay,) = _topics(clients, "lt", "delay", partitions=partitions, admin=admin)
    (target,) = _topics(clients, "lt", "out", admin=admin)
    side = SidecarProcess(clients.settings, work, delay, **overrides)
    label = {"changelog": " (changelog off)", "delivery": " (exactly-once)", "workers": ""}
    workers = int(overrides.get("workers", 1))
    try:
        if partitions > 1:
            side.wait_for(lambda: _settled(side, partitions, workers), 120, "a settled group")
        arrivals = LiveArrivals(clients, target)
        status = f"steady {rate} msg/s for {seconds} s{''.join(label[k] for k in overrides)}"
        status += f", {workers} worker{'s' if workers > 1 else ''}"
        with console.status(status):
            n = steady(
                clients,
                delay,
                rate,
                seconds,
                lambda i: [
                    ("delay-target-topic", target),
                    ("delay-ms", str(1000 + (i * 7919) % 4000)),
                ],
            )
        seen = arrivals.finish(n, timeout_s=60)
        rss = side.peak_rss_mb()
        cpu_s = side.cpu_seconds()
        changelog = changelog_records(clients, delay, partitions)
    finally:
        side.stop()
    late = sorted(arrivals.stamped)
    visible = sorted(arrivals.visible)

    def pct(p: float, values: list[int] = late) -> int:
        return values[min(len(values) - 1, int(p * len(values)))] if values else -1

    return {
        "sent": n,
        "delivered": seen,
        "lateness_p50_ms": pct(0.50),
        "lateness_p99_ms": pct(0.99),
        "lateness_max_ms": late[-1] if late else -1,
        "visible_lateness_p50_ms": pct(0.50, visible),
        "visible_lateness_p99_ms": pct(0.99, visible),
        "early": sum(1 for x in late if x < 0),
        "sidecar_peak_rss_mb": round(rss, 1),
        "sidecar_cpu_us_per_msg": round(cpu_s * 1e6 / n, 1) if n else None,
        "changelog_records": changelog,
    }


def changelog_records(clients: KafkaClients, delay: str, partitions: int) -> int | None:
    """Records (values, tombstones, progress) in ``delay``'s changelog topic, as written by
    a bench sidecar (group ``bench-<delay>``), or None without one."""
    reader = clients.reader()
    try:
        topic = f"bench-{delay}-{delay}-changelog"
        found = reader.list_topics(topic, timeout=10).topics.get(topic)
        if found is None or found.error is not None:
            return None
        marks = [
            reader.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            for p in range(partitions)
        ]
        return sum(high - low for low, high in marks)
    except KafkaException:
        return None
    finally:
        reader.close()
