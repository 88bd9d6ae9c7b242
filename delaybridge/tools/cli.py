"""``delaybridge demo``, ``delaybridge bench e2e`` and ``delaybridge bench restore``.

delaybridge demo [--work-dir var/demo] [--port 39092] [--no-report]   # the README's command
delaybridge bench e2e [--config FILE | --bootstrap HOST:PORT] [--messages N] [--only ...]
                      [--exactly-once] [--workers 1,2]
                      [--etf1 PATH [--etf1-rate 2000] [--etf1-seconds 60] [--etf1-burst 200000]]
delaybridge bench hotpath [--records N] [--package NAME=DIR]
delaybridge bench ingest [--records N] [--repeat N]
delaybridge bench restore [--bootstrap HOST:PORT] [--pending 1000000,10000000]
delaybridge bench roll [--bootstrap HOST:PORT] [--rate 200] [--seconds 150] [--set KEY=VALUE]
delaybridge bench idle [--bootstrap HOST:PORT] [--partitions 6] [--set KEY=VALUE]
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from delaybridge.tools.scenario.overlay import load_overlay, parse_set


def register(commands: Any, bench: Any) -> None:
    demo = commands.add_parser("demo", help="broker, sidecar, delayed messages, report")
    demo.add_argument("--work-dir", type=Path, default=Path("var/demo"))
    demo.add_argument("--port", type=int, default=39092, help="demo broker client port")
    demo.add_argument("--no-report", action="store_true", help="skip the Spark reconciliation")
    demo.set_defaults(handler=_demo)

    e2e = bench.add_parser("e2e", help="sidecar throughput vs passthrough, lateness, 1M tick")
    e2e.add_argument(
        "--config",
        type=Path,
        help="an existing cluster: the kafka section of this settings file (client: TLS, "
        "SASL) and DELAYBRIDGE_* variables; default: start a local broker",
    )
    e2e.add_argument("--bootstrap", help="an existing broker (default: start a local one)")
    e2e.add_argument("--messages", type=int, default=200_000, help="throughput run size")
    e2e.add_argument("--steady-s", type=int, default=30, help="seconds of steady 5k msg/s")
    e2e.add_argument("--rate", type=int, default=5_000, help="steady rate, msg/s")
    e2e.add_argument("--tick-messages", type=int, default=1_000_000, help="records in one tick")
    e2e.add_argument("--json", type=Path, default=Path("bench-results/e2e.json"))
    e2e.add_argument(
        "--only",
        choices=("throughput", "lateness", "tick", "cancels", "etf1"),
        action="append",
        help="measurements to run (default: throughput, lateness, tick; cancels only when "
        "named; with --etf1, only etf1, the side by side)",
    )
    e2e.add_argument(
        "--cancel-pending",
        type=int,
        default=1_000_000,
        help="cancels: messages pending far in the future before the orders start",
    )
    e2e.add_argument("--order-rate", type=int, default=1_000, help="cancels: orders/s")
    e2e.add_argument(
        "--workers",
        type=_counts,
        default=None,
        metavar="N[,N...]",
        help="throughput and lateness: the sidecar's worker processes, e.g. 1,2 (each "
        "count measured in the same run; delay topics get 2 partitions per worker of the "
        "largest); default: the sidecar's own default, one per usable core",
    )
    e2e.add_argument(
        "--pure-python",
        action="store_true",
        help="throughput: also run the sidecar with DELAYBRIDGE_PURE_PYTHON=1 (the "
        "compiled hot path off) in the same run",
    )
    e2e.add_argument(
        "--etf1",
        type=Path,
        metavar="PATH",
        help="etf1/kafka-message-scheduler's binary (scripts/build-etf1 prints it): run "
        "the side-by-side measurement (steady load, then a burst; one system at a time, "
        "delaybridge with its defaults); alone unless --only names more",
    )
    e2e.add_argument(
        "--etf1-rate", type=int, default=2_000, help="side by side: steady schedules/s"
    )
    e2e.add_argument(
        "--etf1-seconds", type=int, default=60, help="side by side: seconds of steady load"
    )
    e2e.add_argument(
        "--etf1-burst",
        type=int,
        default=200_000,
        help="side by side: schedules due in the same second",
    )
    e2e.add_argument(
        "--etf1-burst-lead-s",
        type=float,
        default=None,
        help="side by side: how far ahead the burst's second is when producing starts "
        "(default: 10 s, plus 1 s per 5,000 schedules)",
    )
    e2e.add_argument(
        "--exactly-once",
        action="store_true",
        help="also measure exactly-once mode (throughput and lateness) in the same run",
    )
    e2e.set_defaults(handler=_e2e)

    hot = bench.add_parser("hotpath", help="classify and the record codec: pure vs compiled")
    hot.add_argument("--records", type=int, default=5_000, help="records per round")
    hot.add_argument("--repeat", type=int, default=40, help="rounds; the best counts")
    hot.add_argument(
        "--package",
        action="append",
        default=[],
        metavar="NAME=DIR",
        help="another compiled build to compare (e.g. a Cython one), in DIR",
    )
    hot.add_argument("--json", type=Path, default=Path("bench-results/hotpath.json"))
    hot.set_defaults(handler=_hotpath)

    ingest = bench.add_parser("ingest", help="Ingestor.handle per record: pure vs compiled")
    ingest.add_argument("--records", type=int, default=20_000, help="records per round")
    ingest.add_argument("--repeat", type=int, default=10, help="rounds; the best counts")
    ingest.add_argument("--json", type=Path, default=Path("bench-results/ingest.json"))
    ingest.set_defaults(handler=_ingest)

    restore = bench.add_parser("restore", help="rebuild a store from its changelog: rate")
    restore.add_argument("--bootstrap", help="an existing broker (default: start a local one)")
    restore.add_argument(
        "--pending", default="1000000", help="pending messages, comma-separated sizes"
    )
    restore.add_argument("--json", type=Path, default=Path("bench-results/restore.json"))
    restore.set_defaults(handler=_restore)

    failover = bench.add_parser(
        "failover",
        help="a killed owner's partition, without and "
        "with a warm standby: time until it delivers again",
    )
    failover.add_argument("--bootstrap", help="an existing broker (default: start a local one)")
    failover.add_argument("--pending", type=int, default=200_000, help="pending messages")
    failover.add_argument("--session-timeout-ms", type=int, default=6_000)
    failover.add_argument("--json", type=Path, default=Path("bench-results/failover.json"))
    failover.set_defaults(handler=_failover)

    roll = bench.add_parser(
        "roll",
        help="a rolling restart under load with cancels: restart times, lateness, "
        "lost / early / cancelled delivered / duplicates",
    )
    roll.add_argument("--bootstrap", help="an existing broker (default: start a local one)")
    roll.add_argument("--replicas", type=int, default=3, help="sidecar replicas")
    roll.add_argument("--partitions", type=int, default=6, help="delay-topic partitions")
    roll.add_argument("--rate", type=int, default=200, help="schedules per second")
    roll.add_argument("--seconds", type=float, default=150, help="how long the load runs")
    roll.add_argument(
        "--steady-s", type=float, default=20, help="seconds of load before the first restart"
    )
    roll.add_argument(
        "--kill-down-s", type=float, default=10, help="the SIGKILLed replica's downtime"
    )
    roll.add_argument("--cancel-share", type=float, default=0.3, help="share cancelled")
    _add_set(
        roll,
        "a sidecar setting by its dotted path, the value in YAML "
        "(e.g. store.cancel_grace_ms=2000); repeatable",
    )
    roll.add_argument(
        "--overlay",
        type=load_overlay,
        action="append",
        default=[],
        metavar="FILE",
        help="a YAML file of sidecar settings laid over the benchmark's (before --set)",
    )
    roll.add_argument("--json", type=Path, default=Path("bench-results/roll.json"))
    roll.set_defaults(handler=_roll)

    idle = bench.add_parser(
        "idle", help="CPU of a sidecar with nothing to do (all processes), disk per partition"
    )
    idle.add_argument("--bootstrap", help="an existing broker (default: start a local one)")
    idle.add_argument("--partitions", type=int, default=6, help="delay-topic partitions")
    idle.add_argument("--settle-s", type=float, default=30, help="seconds before measuring")
    idle.add_argument("--measure-s", type=float, default=60, help="seconds measured")
    _add_set(
        idle,
        "one more run with this sidecar setting (dotted path, YAML value), e.g. "
        "workers=1; repeatable",
    )
    idle.add_argument("--json", type=Path, default=Path("bench-results/idle.json"))
    idle.set_defaults(handler=_idle)


def _add_set(parser: argparse.ArgumentParser, help: str) -> None:
    """``--set KEY=VALUE``, repeatable: sidecar settings by dotted path (``parse_set``)."""
    parser.add_argument(
        "--set", type=parse_set, action="append", default=[], metavar="KEY=VALUE", help=help
    )


def _demo(args: argparse.Namespace) -> int:
    from delaybridge.tools.demo import run_demo

    return run_demo(args.work_dir, port=args.port, report=not args.no_report)


def _hotpath(args: argparse.Namespace) -> int:
    from delaybridge.tools.bench_hotpath import run_hotpath_bench

    return run_hotpath_bench(args.records, args.repeat, args.package, args.json)


def _ingest(args: argparse.Namespace) -> int:
    from delaybridge.tools.bench_ingest import run_ingest_bench

    return run_ingest_bench(args.records, args.repeat, args.json)


def _failover(args: argparse.Namespace) -> int:
    from delaybridge.tools.bench_failover import run_failover_bench

    return run_failover_bench(args)


def _roll(args: argparse.Namespace) -> int:
    from delaybridge.tools.bench_roll import run_roll_bench

    return run_roll_bench(args)


def _idle(args: argparse.Namespace) -> int:
    from delaybridge.tools.bench_idle import run_idle_bench

    return run_idle_bench(args)


def _restore(args: argparse.Namespace) -> int:
    from delaybridge.tools.bench_restore import run_restore_bench

    return run_restore_bench(args)


def _counts(text: str) -> tuple[int, ...]:
    try:
        counts = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected counts like 1,2, not {text!r}") from None
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"worker counts must be at least 1: {text!r}")
    return counts


def _e2e(args: argparse.Namespace) -> int:
    from delaybridge.tools.e2e import run_e2e

    return run_e2e(args)
