"""Subcommands of the sidecar: ``run``, ``send``, ``cancel``, ``status``, ``demo``.

delaybridge run [--config FILE]
delaybridge send --to orders --delay 30s [--topic delay] [--key K] [--id ID] VALUE
delaybridge send --to orders --at 2026-11-22T08:00:00+01:00 VALUE
delaybridge cancel [--topic delay] [--to orders] ID
delaybridge status [--url http://127.0.0.1:8080] [--token T]
delaybridge demo                       # the README's main command
"""

from __future__ import annotations

import argparse
import json
import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from delaybridge.errors import DelayBridgeError


def register(commands: Any, bench: Any) -> None:
    run = commands.add_parser("run", help="run the sidecar (consumes delay topics, delivers)")
    run.add_argument("--config", type=Path, help="YAML settings file (default $DELAYBRIDGE_CONFIG)")
    run.set_defaults(handler=_run)

    send = commands.add_parser("send", help="produce one delayed message to a delay topic")
    _kafka_options(send)
    send.add_argument("--to", required=True, help="target topic (delay-target-topic)")
    when = send.add_mutually_exclusive_group(required=True)
    when.add_argument("--delay", help="relative delay: 500ms, 30s, 5m, 2h, 1d")
    when.add_argument("--at", help="absolute due time, RFC 3339 (2026-11-22T08:00:00Z)")
    send.add_argument("--key", help="record key (decides the target partition)")
    send.add_argument("--id", help="delay-id, for cancel and de-duplication")
    send.add_argument("--header", action="append", default=[], metavar="NAME=VALUE")
    send.add_argument("value", help="record value (UTF-8)")
    send.set_defaults(handler=_send)

    cancel = commands.add_parser("cancel", help="cancel a pending message by its delay-id")
    _kafka_options(cancel)
    cancel.add_argument("--to", help="only if the message targets this topic")
    cancel.add_argument("id", help="the delay-id to cancel")
    cancel.set_defaults(handler=_cancel)

    status = commands.add_parser("status", help="a running sidecar's partitions and counters")
    status.add_argument("--url", default="http://127.0.0.1:8080", help="sidecar HTTP address")
    status.add_argument("--token", default=os.environ.get("DELAYBRIDGE_HTTP__ADMIN_TOKEN", ""))
    status.set_defaults(handler=_status)

    demo = commands.add_parser("demo", help="broker, sidecar, delayed messages, report")
    demo.add_argument("--work-dir", type=Path, default=Path("var/demo"))
    demo.add_argument("--port", type=int, default=39092, help="demo broker client port")
    demo.add_argument("--no-report", action="store_true", help="skip the Spark reconciliation")
    demo.set_defaults(handler=_demo)

    from delaybridge.bridge.bench import register_bench

    register_bench(bench)


def _kafka_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bootstrap",
        default=os.environ.get("DELAYBRIDGE_KAFKA__BOOTSTRAP_SERVERS", "127.0.0.1:9092"),
        help="Kafka bootstrap servers",
    )
    parser.add_argument("--topic", default="delay", help="the delay topic")


def _run(args: argparse.Namespace) -> int:
    import signal

    from delaybridge.bridge.http import HttpServer
    from delaybridge.bridge.service import Service
    from delaybridge.bridge.settings import load

    settings = load(args.config)
    service = Service(settings)

    def on_signal(signum: int, _frame: object) -> None:
        service.stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    with HttpServer(settings.http, service, service.metrics) as http:
        print(f"delaybridge: HTTP on {http.url}", flush=True)
        service.run()
    return 0


def _send(args: argparse.Namespace) -> int:
    from delaybridge.bridge.sender import send_delayed

    headers = []
    for item in args.header:
        name, sep, value = item.partition("=")
        if not sep:
            raise DelayBridgeError(f"--header {item!r}: expected NAME=VALUE")
        headers.append((name, value))
    ref = send_delayed(
        args.bootstrap,
        args.topic,
        args.to,
        args.value.encode(),
        key=None if args.key is None else args.key.encode(),
        delay=args.delay,
        at=args.at,
        id=args.id,
        extra_headers=headers,
    )
    print(f"sent to {ref}")
    return 0


def _cancel(args: argparse.Namespace) -> int:
    from delaybridge.bridge.sender import send_cancel

    ref = send_cancel(args.bootstrap, args.topic, args.id, target_topic=args.to)
    print(f"cancel for {args.id!r} sent to {ref}")
    return 0


def _status(args: argparse.Namespace) -> int:
    request = urllib.request.Request(args.url.rstrip("/") + "/admin/stats")
    if args.token:
        request.add_header("Authorization", f"Bearer {args.token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            doc = json.load(response)
    except (urllib.error.URLError, OSError) as exc:
        raise DelayBridgeError(f"cannot reach the sidecar at {args.url}: {exc}") from exc
    print(json.dumps(doc, indent=2, sort_keys=True))
    return 0


def _demo(args: argparse.Namespace) -> int:
    from delaybridge.bridge.demo import run_demo

    return run_demo(args.work_dir, port=args.port, report=not args.no_report)
