"""The ``delaybridge`` command line.

Each part registers its own subcommands through a ``register(commands, bench)``
function in a small ``cli`` module, so this file stays a table of contents and the
heavy imports (PySpark, confluent-kafka) happen only when a command runs.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Callable, Sequence

from delaybridge.errors import DelayBridgeError

# (module, what it adds) — each module has register(commands, bench).
_PARTS = (
    "delaybridge.connectors.cli",  # kafka up|down|status
    "delaybridge.bridge.cli.commands",  # run, send, cancel, status
    "delaybridge.timerlog.cli",  # inspect, bench store
    "delaybridge.spark.cli",  # reconcile, bench reconcile
    "delaybridge.tools.cli",  # demo, bench e2e
    "delaybridge.console.cli",  # console
)

Handler = Callable[[argparse.Namespace], int]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="delaybridge",
        description="Arbitrary-delay and scheduled messages for Apache Kafka.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    bench_parser = commands.add_parser("bench", help="benchmarks: print a table, write JSON")
    bench = bench_parser.add_subparsers(dest="bench", required=True, metavar="BENCH")
    version = commands.add_parser("version", help="the version, and which hot path runs")
    version.set_defaults(handler=_version)
    for name in _PARTS:
        importlib.import_module(name).register(commands, bench)
    return parser


def _version(args: argparse.Namespace) -> int:
    from delaybridge import __version__, hotpath

    print(f"delaybridge {__version__}, hot path: {hotpath.implementation()}")
    for choice in hotpath.choices().values():
        print(f"  {choice.module}: {choice.implementation} ({choice.reason})")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    handler: Handler = args.handler
    try:
        return handler(args)
    except DelayBridgeError as exc:
        print(f"delaybridge: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
