"""The ``bench e2e`` command: a cluster, the chosen measurements, a table and JSON."""

from __future__ import annotations

import argparse
import json
import os
import platform
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from delaybridge.bridge.workers.identity import automatic_workers
from delaybridge.connectors import KafkaClients, KafkaSettings
from delaybridge.errors import DelayBridgeError
from delaybridge.tools.bench_kit import bench_cluster
from delaybridge.tools.e2e import measure
from delaybridge.tools.e2e.cancels import cancel_heavy
from delaybridge.tools.e2e.hot_path import pure_python_run
from delaybridge.tools.e2e.lateness import lateness
from delaybridge.tools.e2e.side_by_side import Plan, burst_lead_s, print_table, side_by_side

MEASUREMENTS = ("throughput", "lateness", "tick")
"""What runs by default; ``cancels`` (issue 13's shop case) runs only when named."""


def run_e2e(args: argparse.Namespace) -> int:
    """Run the measurements named by ``args.only`` (all by default); write ``args.json``.

    The cluster is ``--config``'s ``kafka`` section and/or ``--bootstrap``; with neither,
    a local broker is started in a temporary directory and stopped afterwards.
    """
    if "etf1" in (args.only or ()) and getattr(args, "etf1", None) is None:
        raise DelayBridgeError(
            "--only etf1 needs --etf1 PATH, etf1's scheduler binary (scripts/build-etf1)"
        )
    console = Console()
    with bench_cluster("delaybridge-bench-", _cluster(args)) as (work, clients):
        results = _run_all(console, clients, work, args)
    results["machine"] = {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=2))
    _print(console, results)
    console.print(f"JSON written to {args.json}")
    return 0


def _cluster(args: argparse.Namespace) -> KafkaSettings | None:
    """The existing cluster named by ``--config`` and ``--bootstrap``, if any."""
    if args.config is None:
        return KafkaSettings(bootstrap_servers=args.bootstrap) if args.bootstrap else None
    from delaybridge.settings import load

    kafka = load(args.config).kafka
    if args.bootstrap:
        kafka = kafka.model_copy(update={"bootstrap_servers": args.bootstrap})
    return kafka


def _run_all(
    console: Console, clients: KafkaClients, work: Path, args: argparse.Namespace
) -> dict[str, Any]:
    etf1 = getattr(args, "etf1", None)
    only = set(args.only or (("etf1",) if etf1 else MEASUREMENTS))
    results: dict[str, Any] = {}
    eos = bool(getattr(args, "exactly_once", False))
    # The sidecar's default (workers: 0) resolved here: the bench names the count it ran.
    workers = tuple(getattr(args, "workers", None) or (automatic_workers(),))
    if "throughput" in only:
        results["throughput"] = measure.throughput(
            console, clients, work / "t", args.messages, eos, workers
        )
        if getattr(args, "pure_python", False):
            results["throughput"] |= pure_python_run(
                console, clients, work / "t", args.messages, results["throughput"]
            )
    if "lateness" in only:
        results["lateness"] = lateness(
            console, clients, work / "l", args.rate, args.steady_s, eos, workers
        )
    if "tick" in only:
        tick = measure.one_tick(console, clients, work / "k", args.tick_messages)
        off = measure.one_tick(console, clients, work / "k0", args.tick_messages, False)
        tick["drain_msgs_per_s_no_changelog"] = off["drain_msgs_per_s"]
        tick["sidecar_peak_rss_mb_no_changelog"] = off["sidecar_peak_rss_mb"]
        if off["drain_msgs_per_s"]:
            tick["changelog_cost_ratio"] = round(
                tick["drain_msgs_per_s"] / off["drain_msgs_per_s"], 3
            )
        results["tick"] = tick
    if "etf1" in only and etf1 is not None:
        lead = args.etf1_burst_lead_s
        plan = Plan(
            binary=etf1.resolve(),
            rate=args.etf1_rate,
            seconds=args.etf1_seconds,
            burst=args.etf1_burst,
            lead_s=burst_lead_s(args.etf1_burst) if lead is None else lead,
        )
        results["etf1"] = side_by_side(console, clients, work / "etf1", plan)
    if "cancels" in only:
        results["cancels"] = cancel_heavy(
            console, clients, work / "c", args.cancel_pending, args.order_rate, args.steady_s
        )
    return results


def _print(console: Console, results: dict[str, Any]) -> None:
    table = Table(title="delaybridge bench e2e")
    table.add_column("measurement")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for section, values in results.items():
        if section in ("machine", "etf1"):
            continue
        for key, value in values.items():
            table.add_row(section, key, str(value))
    if table.rows:
        console.print(table)
    if "etf1" in results:
        print_table(console, results["etf1"])
