"""``delaybridge kafka up|down|status|fetch``: the local development broker.

    delaybridge kafka up [--port 9092] [--controller-port 9093] [--data-dir DIR]
    delaybridge kafka status [--data-dir DIR]
    delaybridge kafka down [--data-dir DIR]
    delaybridge kafka fetch --dest DIR     # only the pinned jars, e.g. for an image

Defaults (data dir, jar cache) are in docs/local-kafka.md.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def register(commands: Any, bench: Any) -> None:
    """Add ``kafka`` and its subcommands to ``commands`` (no benchmarks here)."""
    del bench
    kafka = commands.add_parser(
        "kafka", help="a local Apache Kafka 4.x broker for development and tests"
    )
    sub = kafka.add_subparsers(dest="kafka_command", required=True, metavar="ACTION")

    up = sub.add_parser("up", help="fetch the pinned jars, start the broker, wait until it works")
    _data_dir_option(up)
    up.add_argument("--port", type=int, default=9092, help="client (PLAINTEXT) port")
    up.add_argument("--controller-port", type=int, default=9093, help="KRaft controller port")
    up.add_argument(
        "--timeout-s",
        type=float,
        default=90.0,
        help="seconds to wait for a working broker (jar download not included)",
    )
    up.set_defaults(handler=_up)

    down = sub.add_parser("down", help="stop the broker (SIGTERM, then SIGKILL)")
    _data_dir_option(down)
    down.add_argument(
        "--timeout-s", type=float, default=30.0, help="seconds to wait after SIGTERM before SIGKILL"
    )
    down.set_defaults(handler=_down)

    status = sub.add_parser("status", help="is the broker running? pid and bootstrap servers")
    _data_dir_option(status)
    status.set_defaults(handler=_status)

    fetch = sub.add_parser("fetch", help="download and verify the pinned Kafka jars into DIR")
    fetch.add_argument("--dest", type=Path, required=True, help="directory for the jars")
    fetch.set_defaults(handler=_fetch)


def _data_dir_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="broker data dir (default: $DELAYBRIDGE_HOME/kafka or "
        "~/.local/state/delaybridge/kafka)",
    )


def _up(args: argparse.Namespace) -> int:
    from rich.console import Console

    from delaybridge.connectors.localkafka import LocalKafka, StartOutcome

    kafka = LocalKafka(args.data_dir, port=args.port, controller_port=args.controller_port)
    if kafka.pid() is None:
        kafka.fetch_jars()  # its own progress bar, before the spinner (one live display)
    with Console(stderr=True).status(f"starting Kafka at {kafka.bootstrap} ..."):
        outcome = kafka.start(timeout_s=args.timeout_s)
    if outcome is StartOutcome.ALREADY_RUNNING:
        print(f"kafka: already running: {kafka.status().describe()}")
    else:
        print(f"kafka: started: {kafka.status().describe()}")
    print(f"bootstrap.servers={kafka.bootstrap}")
    return 0


def _down(args: argparse.Namespace) -> int:
    from delaybridge.connectors.localkafka import LocalKafka

    kafka = LocalKafka(args.data_dir)
    if kafka.stop(timeout_s=args.timeout_s):
        print(f"kafka: stopped (data dir {kafka.layout.data_dir})")
    else:
        print(f"kafka: was not running (data dir {kafka.layout.data_dir})")
    return 0


def _status(args: argparse.Namespace) -> int:
    """Exit 0 when running and accepting connections, 3 when stopped, 1 when unhealthy."""
    from delaybridge.connectors.localkafka import BrokerState, LocalKafka

    status = LocalKafka(args.data_dir).status()
    print(f"kafka: {status.describe()}")
    if status.state is BrokerState.STOPPED:
        return 3
    return 0 if status.listening else 1


def _fetch(args: argparse.Namespace) -> int:
    from delaybridge import jars
    from delaybridge.connectors.localkafka import KAFKA_VERSION, lock_file

    classpath = jars.fetch(lock_file(), args.dest)
    print(f"kafka: {len(classpath)} verified jars of Kafka {KAFKA_VERSION} in {args.dest}")
    return 0
