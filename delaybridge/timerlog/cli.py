"""Subcommands of the store: ``inspect`` and ``bench store``.

delaybridge inspect DIR [--verify] [--id ID]      # a store's files, counters, a message
delaybridge bench store [--pending 1000000,10000000] [--json bench-results/store.json]
delaybridge bench listing [--pending 10000000] [--limit 100] [--json bench-results/listing.json]
delaybridge bench prefix [--pending 10000000] [--budget 65536] [--json bench-results/prefix.json]
"""

from __future__ import annotations

import argparse
import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def register(commands: Any, bench: Any) -> None:
    """Add this part's subcommands to ``commands`` and its benchmarks to ``bench``."""
    inspect = commands.add_parser("inspect", help="show a store directory (stop the sidecar first)")
    inspect.add_argument("directory", type=Path, help="data/<delay-topic>-<partition>")
    inspect.add_argument(
        "--verify", action="store_true", help="also check the CRC of every live commit-log record"
    )
    inspect.add_argument("--id", help="print the pending message with this delay-id")
    inspect.add_argument(
        "--tick-ms",
        type=int,
        default=None,
        help="store geometry (default: read from the checkpoint)",
    )
    inspect.set_defaults(handler=_inspect)

    store = bench.add_parser("store", help="store appends/s, deliveries/s, RSS, disk, recovery")
    store.add_argument(
        "--pending", default="1000000,10000000", help="comma-separated numbers of pending messages"
    )
    store.add_argument(
        "--deliver",
        type=int,
        default=1_000_000,
        help="messages to deliver when measuring deliveries/s",
    )
    store.add_argument("--json", type=Path, default=Path("bench-results/store.json"))
    store.add_argument(
        "--hot-path",
        default="",
        metavar="compiled,pure",
        help="run each size once per hot path listed, in this order, in this process "
        "(default: the one delaybridge/hotpath.py chose)",
    )
    store.add_argument(
        "--work-dir",
        type=Path,
        default=None,
        help="where the stores are built (default: a temp dir)",
    )
    store.set_defaults(handler=_bench_store)

    listing = bench.add_parser("listing", help="pages of the pending listing in a big store")
    listing.add_argument("--pending", type=int, default=10_000_000, help="pending messages")
    listing.add_argument("--limit", type=int, default=100, help="page size")
    listing.add_argument("--repeat", type=int, default=20, help="timings per case")
    listing.add_argument("--json", type=Path, default=Path("bench-results/listing.json"))
    listing.add_argument("--work-dir", type=Path, default=None, help="default: a temp dir")
    listing.set_defaults(handler=_bench_listing)

    prefix = bench.add_parser("prefix", help="count and sweep of a cancel by id prefix")
    prefix.add_argument("--pending", type=int, default=10_000_000, help="pending messages")
    prefix.add_argument(
        "--budget", type=int, default=65_536, help="entries per sweep step (one loop turn)"
    )
    prefix.add_argument("--repeat", type=int, default=5, help="timings per count case")
    prefix.add_argument("--json", type=Path, default=Path("bench-results/prefix.json"))
    prefix.add_argument("--work-dir", type=Path, default=None, help="default: a temp dir")
    prefix.set_defaults(handler=_bench_prefix)


def _inspect(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from delaybridge.errors import ConfigError
    from delaybridge.timerlog.checkpoint import Checkpoint
    from delaybridge.timerlog.settings import StoreSettings
    from delaybridge.timerlog.store import TimerStore

    console = Console()
    ck = Checkpoint.load(args.directory)
    if ck is None:
        raise ConfigError(f"{args.directory}: no checkpoint: not a flushed store")
    settings = StoreSettings(tick_ms=ck.tick_ms, wheel_slots=ck.wheel_slots)
    with TimerStore.open(args.directory, settings, verify_commit_log=args.verify) as store:
        stats = store.stats()
        table = Table(title=str(args.directory), show_header=False)
        for name, value in [*vars(ck).items(), *vars(stats).items()]:
            table.add_row(name, str(value))
        table.add_row("wheel_rebuilt_on_open", str(store.wheel_rebuilt))
        console.print(table)
        if args.verify:
            console.print("[green]every live record and entry passed its CRC check[/green]")
        if args.id:
            rec = store.lookup(args.id)
            console.print(rec if rec is not None else f"no pending message with id {args.id!r}")
            if rec is None:
                return 1
    return 0


def _bench_store(args: argparse.Namespace) -> int:
    import shutil

    from rich.console import Console
    from rich.progress import Progress
    from rich.table import Table

    from delaybridge.timerlog.bench import default_work_dir, run_one

    sizes = [int(x) for x in args.pending.split(",") if x.strip()]
    work = args.work_dir or default_work_dir()
    work.mkdir(parents=True, exist_ok=True)
    from delaybridge import hotpath

    paths = [p.strip() for p in args.hot_path.split(",") if p.strip()]
    results, ran = [], []
    try:
        with Progress() as progress:
            for n in sizes:
                for path in paths or [""]:
                    ran.append(
                        hotpath.switch(path == "compiled") if path else hotpath.implementation()
                    )
                    results.append(run_one(n, work, args.deliver, progress))
    finally:
        if args.work_dir is None:
            shutil.rmtree(work, ignore_errors=True)
    table = Table(title="delaybridge bench store")
    columns = [
        "pending",
        "hot path",
        "append/s (cpu)",
        "deliver/s (cpu)",
        "RSS MB: kept / peak append / peak deliver",
        "disk B/rec",
        "overhead B/rec",
        "disk MB after delivering (flush s)",
        "recovery s",
        "calibration s",
    ]
    for c in columns:
        table.add_column(c, justify="right")
    for r, path in zip(results, ran, strict=True):
        table.add_row(
            f"{r.pending:,}",
            path,
            f"{r.append_per_s:,.0f} ({r.append_per_cpu_s:,.0f})",
            f"{r.deliver_per_s:,.0f} ({r.deliver_per_cpu_s:,.0f})",
            f"{r.rss_mb_max:.0f} / {_mb(r.rss_peak_mb_append)} / {_mb(r.rss_peak_mb_deliver)}",
            f"{r.disk_bytes_per_record:.0f}",
            f"{r.overhead_bytes_per_record:.0f}",
            f"{(r.disk_bytes_after_deliver or 0) / 1e6:.1f} ({r.flush_after_deliver_s})",
            f"{r.recovery_s:.2f}",
            f"{r.calibration_s:.2f}",
        )
    Console().print(table)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(
        json.dumps(
            {"store": [r.as_json() | {"hot_path": p} for r, p in zip(results, ran, strict=True)]},
            indent=2,
        )
    )
    print(f"wrote {args.json}")
    return 0


def _bench_listing(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import Progress
    from rich.table import Table

    from delaybridge.timerlog.bench_listing import run_listing

    with _work_dir(args.work_dir) as work, Progress() as progress:
        r = run_listing(args.pending, work, args.limit, args.repeat, progress)
    table = Table(title=f"delaybridge bench listing: {r.pending:,} pending, pages of {r.limit}")
    for c in ("case", "median ms", "max ms", "items", "examined", "partial"):
        table.add_column(c, justify="left" if c == "case" else "right")
    for t in r.timings:
        table.add_row(
            t.case,
            f"{t.median_ms:.2f}",
            f"{t.max_ms:.2f}",
            str(t.items),
            f"{t.examined:,}",
            "yes" if t.partial else "",
        )
    Console().print(table)
    print(f"fill {r.fill_s} s; calibration {r.calibration_s} s")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"listing": r.as_json()}, indent=2))
    print(f"wrote {args.json}")
    return 0


@contextmanager
def _work_dir(given: Path | None) -> Iterator[Path]:
    """A bench's store directory: ``given``, kept; else a fresh one, removed after."""
    from delaybridge.timerlog.bench import default_work_dir

    work = given or default_work_dir()
    work.mkdir(parents=True, exist_ok=True)
    try:
        yield work
    finally:
        if given is None:
            shutil.rmtree(work, ignore_errors=True)


def _mb(value: float | None) -> str:
    return "?" if value is None else f"{value:.0f}"


def _bench_prefix(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import Progress
    from rich.table import Table

    from delaybridge.timerlog.bench_prefix import run_prefix

    with _work_dir(args.work_dir) as work, Progress() as progress:
        r = run_prefix(args.pending, work, args.budget, args.repeat, progress)
    table = Table(title=f"delaybridge bench prefix: {r.pending:,} pending")
    for c in ("case", "median ms", "max ms", "matched", "steps", "total s"):
        table.add_column(c, justify="left" if c == "case" else "right")
    for t in r.timings:
        table.add_row(
            t.case,
            f"{t.median_ms:.2f}",
            f"{t.max_ms:.2f}",
            f"{t.matched:,}",
            f"{t.steps:,}",
            f"{t.total_s:.2f}",
        )
    Console().print(table)
    print(f"fill {r.fill_s} s; calibration {r.calibration_s} s")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"prefix": r.as_json()}, indent=2))
    print(f"wrote {args.json}")
    return 0
