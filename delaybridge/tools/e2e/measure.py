"""Two measurements of ``bench e2e``: throughput and one tick (lateness: ``lateness.py``).

Each creates its own topics (names carry a timestamp, so runs never share data), starts
its own sidecar child and returns a flat dict of numbers for the JSON and the table.
Each runs twice, with the changelog on (the default) and off, so the
changelog's cost is measured in the same run (keys ending ``_no_changelog``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console

from delaybridge.connectors import KafkaClients, ensure_topics
from delaybridge.tools.e2e.sidecar import SidecarProcess
from delaybridge.tools.e2e.traffic import count_arrivals, fill
from delaybridge.tools.passthrough import run_passthrough

#: The sidecar's default tick, which the benchmark's children run with.
TICK_MS = 100


def _topics(
    clients: KafkaClients, prefix: str, *kinds: str, partitions: int = 1, admin: Any = None
) -> list[str]:
    """Fresh topics ``<prefix>.<kind>.<ns>``, created (through ``admin``, or a new one)."""
    names = [f"{prefix}.{kind}.{time.time_ns()}" for kind in kinds]
    ensure_topics(admin or clients.admin(), {name: {} for name in names}, partitions=partitions)
    return names


def throughput(
    console: Console,
    clients: KafkaClients,
    work: Path,
    n: int,
    exactly_once: bool = False,
    workers: tuple[int, ...] = (1,),
) -> dict[str, Any]:
    """N records already due: the sidecar's delivery rate vs the passthrough ceiling, with
    the changelog on (the default) and off, in the same run on the same data; with
    ``exactly_once``, exactly-once mode too, against at-least-once (changelog on).

    ``workers``: the sidecar's worker processes; the first count runs everything above,
    each further one the default mode again (keys ``..._workers_<w>``). With more than
    one worker anywhere, every delay topic gets 2 partitions per worker of the largest
    count (one partition would leave all but one worker idle), and every sidecar run
    starts on its empty delay topic, waits until the group has settled (each worker
    owns partitions), pauses ingest, gets its N records, resumes: so the rebalance of
    workers joining one after another is not timed (``settled_start`` in the JSON)."""
    parts = 1 if max(workers) == 1 else 2 * max(workers)
    admin = clients.admin()
    delay, delay_off = _topics(clients, "tp", "delay", "delay-nocl", partitions=parts, admin=admin)
    target, target_off, src, dst = _topics(
        clients, "tp", "out", "out-nocl", "src", "dst", admin=admin
    )
    past = int(time.time() * 1000) - 61_000

    def headers_to(out: str) -> Callable[[int], list[tuple[str, str | bytes | None]]]:
        return lambda i: [
            ("delay-target-topic", out),
            ("deliver-at-ms", str(past + (i * 60_000) // n)),
        ]

    settle = max(workers) > 1

    def load(topic: str, out: str) -> Callable[[], None] | None:
        """Fill ``topic`` now, or (settle) return what fills it once the group settled."""
        if settle:
            return lambda: fill(clients, topic, n, headers_to(out), console)
        fill(clients, topic, n, headers_to(out), console)
        return None

    load_on, load_off = load(delay, target), load(delay_off, target_off)
    fill(clients, src, n, lambda i: [("k", "v")], console)
    console.print("passthrough forwarder ...")
    ceiling = run_passthrough(clients.settings, src, dst, n, timeout_s=600)
    console.print(f"passthrough: {ceiling}")
    first = {"workers": workers[0]}
    on = _sidecar_rate(console, clients, work / "on", delay, target, n, first, load_on, parts)
    off = _sidecar_rate(
        console,
        clients,
        work / "off",
        delay_off,
        target_off,
        n,
        _NO_CHANGELOG | first,
        load_off,
        parts,
    )
    ceiling_rate = float(ceiling.get("messages_per_s", 0.0))
    more: dict[str, Any] = {
        "workers": workers[0],
        "delay_partitions": parts,
        "settled_start": settle,
    }
    for w in workers[1:]:
        (delay_w,) = _topics(clients, "tp", f"delay-w{w}", partitions=parts)
        (target_w,) = _topics(clients, "tp", f"out-w{w}")
        rate = _sidecar_rate(
            console,
            clients,
            work / f"w{w}",
            delay_w,
            target_w,
            n,
            {"workers": w},
            load(delay_w, target_w),
            parts,
        )
        more[f"sidecar_msgs_per_s_workers_{w}"] = round(rate["rate"])
        more[f"ratio_workers_{w}"] = round(rate["rate"] / ceiling_rate, 3) if ceiling_rate else None
        more[f"sidecar_peak_rss_mb_workers_{w}"] = round(rate["rss"], 1)
    eos: dict[str, Any] = {}
    if exactly_once:
        (delay_eos,) = _topics(clients, "tp", "delay-eos", partitions=parts)
        (target_eos,) = _topics(clients, "tp", "out-eos")
        rate = _sidecar_rate(
            console,
            clients,
            work / "eos",
            delay_eos,
            target_eos,
            n,
            EOS | first,
            load(delay_eos, target_eos),
            parts,
        )
        eos = {
            "exactly_once_msgs_per_s": round(rate["rate"]),
            "exactly_once_vs_at_least_once": round(rate["rate"] / on["rate"], 3)
            if on["rate"]
            else None,
            "exactly_once_peak_rss_mb": round(rate["rss"], 1),
        }
    return (
        eos
        | more
        | {
            "messages": n,
            "delivered": on["delivered"],
            "sidecar_msgs_per_s": round(on["rate"]),
            "sidecar_seconds": round(on["seconds"], 2),
            "sidecar_no_changelog_msgs_per_s": round(off["rate"]),
            "changelog_cost_ratio": round(on["rate"] / off["rate"], 3) if off["rate"] else None,
            "passthrough_msgs_per_s": round(ceiling_rate),
            "ratio": round(on["rate"] / ceiling_rate, 3) if ceiling_rate else None,
            "ratio_no_changelog": round(off["rate"] / ceiling_rate, 3) if ceiling_rate else None,
            "sidecar_peak_rss_mb": round(on["rss"], 1),
        }
    )


_NO_CHANGELOG = {"changelog": {"enabled": False}}
EOS = {"delivery": {"exactly_once": True}}


def _sidecar_rate(
    console: Console,
    clients: KafkaClients,
    work: Path,
    delay: str,
    target: str,
    n: int,
    overrides: dict[str, Any],
    load: Callable[[], None] | None = None,
    partitions: int = 1,
) -> dict[str, float]:
    """Start a sidecar on ``delay``; time from its first delivery to the n-th ack.
    ``load``: fills ``delay`` once every worker owns partitions, ingest paused."""
    label = {"changelog": "(changelog off) ", "delivery": "(exactly-once) "}
    workers = overrides.get("workers", 1)
    console.print(
        f"sidecar {''.join(label.get(k, '') for k in overrides)}"
        f"({workers} worker{'s' if workers > 1 else ''}) ..."
    )
    side = SidecarProcess(clients.settings, work, delay, **overrides)
    try:
        if load is not None:
            side.wait_for(lambda: _settled(side, partitions, workers), 120, "a settled group")
            side.get("/admin/pause?direction=enqueue", "POST")
            load()
            side.get("/admin/resume?direction=enqueue", "POST")
        seen, first, last = count_arrivals(clients, target, n, timeout_s=900)
        rss = side.peak_rss_mb()
    finally:
        side.stop()
    elapsed = last - first
    return {
        "delivered": seen,
        "rate": seen / elapsed if elapsed > 0 else 0.0,
        "seconds": elapsed,
        "rss": rss,
    }


def _settled(side: SidecarProcess, partitions: int, workers: int) -> bool:
    """Every partition owned, by as many workers as there are (each owns some)."""
    owned = (side.get("/admin/stats") or {}).get("partitions", [])
    return len(owned) == partitions and len({p.get("worker") for p in owned}) == workers


def one_tick(
    console: Console, clients: KafkaClients, work: Path, n: int, changelog: bool = True
) -> dict[str, Any]:
    """N records due at the same millisecond, stored while dequeue is paused, then drained
    (``changelog`` False: the same with the changelog off, for its cost in the same run)."""
    delay, target = _topics(clients, "tk", "delay", "out")
    side = SidecarProcess(clients.settings, work, delay, **({} if changelog else _NO_CHANGELOG))
    try:
        side.get("/admin/pause?direction=dequeue", method="POST")
        due = int(time.time() * 1000) + 1_000
        fill(
            clients,
            delay,
            n,
            lambda i: [("delay-target-topic", target), ("deliver-at-ms", str(due))],
            console,
        )
        with console.status("waiting for the sidecar to store them all"):
            side.wait_for(lambda: side.stored() >= n, 900, f"{n} records stored")
        rss_before = side.peak_rss_mb()
        resumed = time.time()
        side.get("/admin/resume?direction=dequeue", method="POST")
        seen, _, last = count_arrivals(clients, target, n, timeout_s=900)
        rss = side.peak_rss_mb()
    finally:
        side.stop()
    elapsed = last - resumed
    return {
        "messages": n,
        "delivered": seen,
        "drain_seconds": round(elapsed, 2),
        "drain_msgs_per_s": round(seen / elapsed) if elapsed > 0 else 0,
        "sidecar_peak_rss_mb_before_drain": round(rss_before, 1),
        "sidecar_peak_rss_mb": round(rss, 1),
        "sidecar_peak_anon_mb": round(side.peak_anon_mb, 1),
        "sidecar_peak_file_backed_mb": round(side.peak_file_mb, 1),
    }
