"""``delaybridge reconcile`` and ``delaybridge bench reconcile``.

Durations take a unit (``500ms``, ``10s``, ``1m``); times are epoch ms, RFC 3339, or a
duration meaning "that long ago" (``--since 2h``). Exit codes: 0 all delivered on time,
1 something missing or early, 2 an error (bad option, Kafka unreachable, ...).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from delaybridge.errors import ConfigError


def register(commands: Any, bench: Any) -> None:
    """Add this part's subcommands to ``commands`` and its benchmarks to ``bench``."""
    p = commands.add_parser(
        "reconcile",
        help="reconcile sent vs delivered with PySpark (exit 1 if missing or early)",
        description="Read the delay topics and the target topics with Spark's Kafka source, "
        "join on delay-id and report per target topic and due window: sent, cancelled, due, "
        "delivered, missing, duplicated, early, late. See docs/reconciliation.md.",
    )
    add_reconcile_arguments(p)
    p.set_defaults(handler=_reconcile)

    b = bench.add_parser("reconcile", help="time reconciling 1M sent + 1M delivered on local[2]")
    b.add_argument("--bootstrap", default=None, help="Kafka bootstrap servers")
    b.add_argument(
        "--config", type=Path, default=None, help="sidecar config: its kafka section (client too)"
    )
    b.add_argument("--messages", type=int, default=1_000_000, help="messages to seed")
    b.add_argument("--partitions", type=int, default=4, help="partitions per topic")
    b.add_argument("--master", default="local[2]")
    b.add_argument(
        "--reuse",
        action="store_true",
        help="reuse topics seeded by an earlier run with the same --messages",
    )
    b.add_argument("--out", type=Path, default=Path("bench-results/reconcile.json"))
    b.set_defaults(handler=_bench)


def add_reconcile_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--config",
        type=Path,
        default=None,
        help="the sidecar's config file: brokers, delay topics, routes, delay "
        "levels, max delay and tick are taken from it",
    )
    p.add_argument("--bootstrap", default=None, help="Kafka bootstrap servers")
    p.add_argument(
        "--delay-topic",
        action="append",
        default=[],
        metavar="TOPIC",
        help="delay topic (repeatable)",
    )
    p.add_argument(
        "--target-topic",
        action="append",
        default=[],
        metavar="TOPIC",
        help="target topic (repeatable; default: every target the schedules name)",
    )
    p.add_argument(
        "--dead-letter-topic",
        default=None,
        metavar="TOPIC",
        help="the sidecar's dead-letter topic: its expired messages count as expired, not "
        "missing (default with --config: the config's)",
    )
    p.add_argument("--since", default=None, help="delay-topic records from this time")
    p.add_argument("--until", default=None, help="delay-topic records before this time")
    p.add_argument("--as-of", default=None, help="judge as of this time (default: now)")
    p.add_argument("--window", default="1m", help="due-time window (default 1m)")
    p.add_argument(
        "--grace", default="10s", help="a message is due when due <= as-of minus this (default 10s)"
    )
    p.add_argument(
        "--late-after",
        default=None,
        help="late when delivered this long after due (default tick + 1s = 1100ms)",
    )
    p.add_argument(
        "--exactly-once",
        action="store_true",
        default=None,
        help="any duplicate fails the run (default: the sidecar config's "
        "delivery.exactly_once; at-least-once only reports duplicates)",
    )
    p.add_argument("--out", type=Path, default=Path("reconcile-report"), help="output directory")
    p.add_argument("--no-chart", action="store_true", help="skip the PNG chart")
    p.add_argument("--examples", type=int, default=20, help="offending ids listed per kind")
    p.add_argument("--master", default="local[*]", help="Spark master (ignored by spark-submit)")
    p.add_argument("--driver-memory", default="2g")
    p.add_argument("--shuffle-partitions", type=int, default=4)
    p.add_argument("--jar-cache", type=Path, default=None, help="connector jar cache directory")
    p.add_argument(
        "--offline", action="store_true", help="use only jars already in the cache; never download"
    )
    p.add_argument(
        "--fetch-jars",
        action="store_true",
        help="download and verify the connector jars, then exit",
    )


def settings_from_args(args: argparse.Namespace) -> Any:
    """Build :class:`ReconcileSettings` from parsed arguments (and the sidecar config)."""
    from delaybridge.contract.timing import parse_duration_ms
    from delaybridge.settings import load
    from delaybridge.spark.settings import (
        DEFAULT_LATE_AFTER_MS,
        ReconcileSettings,
        default_jar_cache,
    )

    def duration(option: str, text: str) -> int:
        try:
            return parse_duration_ms(text)
        except ValueError as exc:
            raise ConfigError(f"--{option}: {exc}") from exc

    overrides: dict[str, Any] = {
        "window_ms": duration("window", args.window),
        "grace_ms": duration("grace", args.grace),
        "since_ms": parse_time("since", args.since),
        "until_ms": parse_time("until", args.until),
        "as_of_ms": parse_time("as-of", args.as_of),
        "output_dir": args.out,
        "chart": not args.no_chart,
        "examples": args.examples,
        "master": args.master,
        "driver_memory": args.driver_memory,
        "shuffle_partitions": args.shuffle_partitions,
        "jar_cache_dir": args.jar_cache or default_jar_cache(),
        "offline": args.offline,
    }
    if getattr(args, "exactly_once", None):
        overrides["exactly_once"] = True
    if args.late_after is not None:
        overrides["late_after_ms"] = duration("late-after", args.late_after)
    if args.target_topic:
        overrides["target_topics"] = tuple(args.target_topic)
    if args.delay_topic:
        overrides["delay_topics"] = tuple(args.delay_topic)
    if args.dead_letter_topic:
        overrides["dead_letter_topic"] = args.dead_letter_topic
    if args.bootstrap:
        overrides["bootstrap_servers"] = args.bootstrap
    if args.config is not None:
        return ReconcileSettings.from_sidecar(load(args.config), **overrides)
    overrides.setdefault("bootstrap_servers", "127.0.0.1:9092")
    overrides.setdefault("delay_topics", ())
    overrides.setdefault("late_after_ms", DEFAULT_LATE_AFTER_MS)
    return ReconcileSettings(**overrides)


def parse_time(option: str, text: str | None, *, now_ms: int | None = None) -> int | None:
    """Epoch ms, RFC 3339, or a duration ago (``2h``); errors name the option."""
    from delaybridge.contract.timing import TimeFormatError, parse_duration_ms, parse_rfc3339_ms

    if text is None:
        return None
    stripped = text.strip()
    if stripped.isdigit():
        return int(stripped)
    now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    for parse in (parse_rfc3339_ms, lambda t: now - parse_duration_ms(t)):
        try:
            return parse(stripped)
        except TimeFormatError:
            continue
    raise ConfigError(
        f"--{option}: {text!r} is neither epoch milliseconds, an RFC 3339 time "
        "(2026-01-31T08:00:00Z) nor a duration ago (30m, 2h)"
    )


def _reconcile(args: argparse.Namespace) -> int:
    from delaybridge.spark.connector import connector_jars
    from delaybridge.spark.job import run_reconciliation
    from delaybridge.spark.render import print_report

    if args.fetch_jars:
        from delaybridge.spark.settings import default_jar_cache

        paths = connector_jars(args.jar_cache or default_jar_cache(), offline=args.offline)
        for path in paths:
            print(path)
        return 0
    settings = settings_from_args(args)
    report = run_reconciliation(settings)
    print_report(report)
    if settings.output_dir is not None:
        print(
            f"report: {settings.output_dir}/report.json (+ windows.parquet, problems/, "
            f"{'reconcile.png' if settings.chart else 'no chart'}); {report.elapsed_s:.1f} s"
        )
    return report.exit_code


def _bench(args: argparse.Namespace) -> int:
    from delaybridge.spark.bench import run_bench

    return run_bench(args)
