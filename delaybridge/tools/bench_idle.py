"""``delaybridge bench idle``: what a sidecar costs with nothing to do.

One ``delaybridge run`` with the defaults (every core: a supervisor and its worker
processes) on a delay topic of ``--partitions`` (6) partitions, nothing pending, no
traffic. After ``--settle-s`` (30 s) the CPU time of every process of the pod (the
supervisor and its workers, from /proc) is read, and again ``--measure-s`` (60 s)
later: the idle cost is the difference over the wall time between, in % of one core
(issue 26's target: ≤ 1 %). Also reported: the disk the stores take per partition
(what an empty partition costs) and the summed RSS of the processes.

Each ``--set KEY=VALUE`` adds a run with that sidecar setting (e.g. ``workers=1``), in
the same run on the same broker, for a baseline.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from delaybridge.connectors import KafkaClients, KafkaSettings, ensure_topics
from delaybridge.tools.bench_kit import bench_cluster, report
from delaybridge.tools.e2e.sidecar import SidecarProcess

#: Issue 26: idle CPU ≤ 1 % of a core with 6 partitions, all processes counted.
TARGET_PERCENT = 1.0


def run_idle_bench(args: argparse.Namespace) -> int:
    console = Console()
    kafka = KafkaSettings(bootstrap_servers=args.bootstrap) if args.bootstrap else None
    variants: list[tuple[str, dict[str, Any]]] = [("defaults", {})]
    variants += [(_named(overrides), overrides) for overrides in args.set]
    with bench_cluster("delaybridge-idle-", kafka) as (work, clients):
        runs = [
            _one(console, clients, work / f"run{i}", name, overrides, args)
            for i, (name, overrides) in enumerate(variants)
        ]
    report(console, args.json, "idle", runs, lambda run: str(run["variant"]))
    return 0


def _one(
    console: Console,
    clients: KafkaClients,
    work: Path,
    name: str,
    overrides: dict[str, Any],
    args: argparse.Namespace,
) -> dict[str, Any]:
    delay = f"idle.delay.{time.time_ns()}"
    ensure_topics(clients.admin(), {delay: {}}, partitions=args.partitions)
    console.print(f"[bold]{name}[/]: starting the sidecar on {args.partitions} partitions")
    side = SidecarProcess(clients.settings, work, delay, **overrides)
    try:
        side.wait_for(lambda: _owned(side) == args.partitions, 120, "every partition owned")
        console.print(f"settling for {args.settle_s:.0f} s, then measuring {args.measure_s:.0f} s")
        time.sleep(args.settle_s)  # the settle the target names, not a wait on a condition
        cpu_before, wall_before = side.cpu_seconds(), time.monotonic()
        time.sleep(args.measure_s)  # the measured span itself
        cpu_after, wall_after = side.cpu_seconds(), time.monotonic()
        processes = 1 + len(side.children())
        rss_mb = side.rss_mb()
    finally:
        side.stop()
    percent = 100 * (cpu_after - cpu_before) / (wall_after - wall_before)
    disk = _disk_bytes(work / "data")
    return {
        "variant": name,
        "partitions": args.partitions,
        "processes": processes,
        "settle_s": args.settle_s,
        "measured_s": round(wall_after - wall_before, 1),
        "cpu_seconds": round(cpu_after - cpu_before, 2),
        "cpu_percent_of_a_core": round(percent, 2),
        "target_percent": TARGET_PERCENT,
        "met": percent <= TARGET_PERCENT,
        "rss_mb_all_processes": round(rss_mb, 1),
        "store_disk_kib_per_partition": round(disk / 1024 / args.partitions, 1),
        "cpus": os.cpu_count(),
    }


def _named(overrides: dict[str, Any], prefix: str = "") -> str:
    """``{"store": {"tick_ms": 50}}`` as ``store.tick_ms=50``."""
    parts = []
    for key, value in overrides.items():
        if isinstance(value, dict):
            parts.append(_named(value, f"{prefix}{key}."))
        else:
            parts.append(f"{prefix}{key}={value}")
    return ",".join(parts)


def _owned(side: SidecarProcess) -> int:
    stats = side.get("/admin/stats") or {}
    return len(stats.get("partitions", []))


def _disk_bytes(root: Path) -> int:
    """Blocks the files under ``root`` take on disk (sparse files count what they hold)."""
    total = 0
    for path in root.rglob("*"):
        try:
            if path.is_file():
                total += path.stat().st_blocks * 512
        except OSError:
            continue  # removed meanwhile
    return total
