"""Subcommands of the sidecar: ``run``, ``send``, ``cancel``, ``status``.

delaybridge run [--config FILE]
delaybridge send --to orders --delay 30s [--config FILE] [--topic delay] [--key K] [--id ID] VALUE
delaybridge send --to orders --at 2026-11-22T08:00:00+01:00 VALUE
delaybridge send --to reminders --cron "0 8 * * *" --tz Europe/Paris [--until T | --count N] VALUE
delaybridge send --to reminders --every 1h30m [--at T] [--until T | --count N] VALUE
delaybridge cancel [--config FILE] [--topic delay] [--to orders] ID | --prefix P
delaybridge status [--url http://127.0.0.1:8080] [--token T]
delaybridge pending list|stats (--url URL ... | --service NAME:PORT)   # see pending_cli

``send`` and ``cancel`` go through :mod:`delaybridge.client` (``cli/send.py``), and read
the same settings as ``run`` (the file, then ``DELAYBRIDGE_*``
variables), so they reach the cluster as the sidecar does: TLS and SASL from
``kafka.client`` included. ``--bootstrap`` and ``--topic`` override the settings.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any

from delaybridge.errors import DelayBridgeError

if TYPE_CHECKING:
    from delaybridge.connectors import KafkaSettings


def register(commands: Any, bench: Any) -> None:
    run = commands.add_parser("run", help="run the sidecar (consumes delay topics, delivers)")
    run.add_argument("--config", type=Path, help="YAML settings file (default $DELAYBRIDGE_CONFIG)")
    # Set by the supervisor for its worker processes (bridge/workers/supervisor.py), not by hand.
    run.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    run.set_defaults(handler=_run)

    send = commands.add_parser("send", help="produce one delayed message to a delay topic")
    _kafka_options(send)
    send.add_argument("--to", required=True, help="target topic (delay-target-topic)")
    when = send.add_mutually_exclusive_group()
    when.add_argument("--delay", help="relative delay: 500ms, 30s, 5m, 2h, 1d")
    when.add_argument(
        "--at",
        help="absolute due time, RFC 3339 (2026-11-22T08:00:00Z); with --cron or "
        "--every: the first occurrence",
    )
    series = send.add_mutually_exclusive_group()
    series.add_argument("--cron", help="recurring: a 5-field cron expression or @daily, @hourly")
    series.add_argument("--every", help="recurring at a fixed rate: 2s, 5m, 1h30m (at least 1s)")
    send.add_argument("--tz", help="IANA time zone of --cron (default UTC): Europe/Paris")
    end = send.add_mutually_exclusive_group()
    end.add_argument("--until", help="a series' last due time, RFC 3339 (inclusive)")
    end.add_argument("--count", type=int, help="a series' number of occurrences (>= 1)")
    send.add_argument("--key", help="record key (decides the target partition)")
    send.add_argument("--id", help="delay-id, for cancel and de-duplication")
    send.add_argument(
        "--on-duplicate",
        choices=["replace", "keep"],
        help="with --id: replace a pending message with the same id and target (the "
        "default), or keep both",
    )
    send.add_argument("--header", action="append", default=[], metavar="NAME=VALUE")
    send.add_argument("value", help="record value (UTF-8)")
    send.set_defaults(handler=_send)

    cancel = commands.add_parser(
        "cancel", help="cancel a pending message by its delay-id, or all by an id prefix"
    )
    _kafka_options(cancel)
    cancel.add_argument("--to", help="only if the message targets this topic")
    which = cancel.add_mutually_exclusive_group(required=True)
    which.add_argument("id", nargs="?", help="the delay-id to cancel")
    which.add_argument(
        "--prefix",
        help="cancel every message whose delay-id starts with this (delay-cancel-prefix); "
        "above cancels.prefix_confirm_above matches a replica dead-letters it",
    )
    cancel.set_defaults(handler=_cancel)

    status = commands.add_parser("status", help="a running sidecar's partitions and counters")
    status.add_argument("--url", default="http://127.0.0.1:8080", help="sidecar HTTP address")
    status.add_argument("--token", default=os.environ.get("DELAYBRIDGE_HTTP__ADMIN_TOKEN", ""))
    status.set_defaults(handler=_status)
    from delaybridge.bridge.cli import pending as pending_cli

    pending_cli.register(commands)
    del bench  # the sidecar's benchmark is `bench e2e`, registered by delaybridge.tools


def _kafka_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        type=Path,
        help="YAML settings file, as for `run` (default $DELAYBRIDGE_CONFIG): its kafka "
        "section (bootstrap_servers, client: TLS/SASL) and delay_topics apply, and so do "
        "DELAYBRIDGE_* variables (e.g. DELAYBRIDGE_KAFKA__CLIENT='{\"sasl.password\": ...}')",
    )
    parser.add_argument(
        "--bootstrap",
        help="Kafka bootstrap servers (default: the settings' kafka.bootstrap_servers)",
    )
    parser.add_argument(
        "--topic", help="the delay topic (default: the settings' first delay topic)"
    )


def _kafka_target(args: argparse.Namespace) -> tuple[KafkaSettings, str]:
    """The cluster and delay topic of ``send``/``cancel``: settings, then the options."""
    from delaybridge.settings import load

    settings = load(args.config)
    kafka = settings.kafka
    if args.bootstrap:
        kafka = kafka.model_copy(update={"bootstrap_servers": args.bootstrap})
    if args.topic:
        return kafka, str(args.topic)
    if settings.delay_topic_pattern or not settings.delay_topics:
        raise DelayBridgeError(
            "give --topic: the settings name no delay topic "
            f"(delay_topic_pattern={settings.delay_topic_pattern!r})"
        )
    return kafka, settings.delay_topics[0]


def _run(args: argparse.Namespace) -> int:
    import signal

    from delaybridge import hotpath
    from delaybridge.bridge.cli import gc_tuning
    from delaybridge.bridge.http.server import HttpServer
    from delaybridge.bridge.service import Service
    from delaybridge.bridge.workers import membership
    from delaybridge.bridge.workers.identity import (
        HTTP_ANNOUNCE,
        worker_count,
        worker_settings,
    )
    from delaybridge.settings import load

    settings = membership.identify(load(args.config))
    count = worker_count(settings)
    if args.worker is None:  # the pod's process: members it no longer has leave
        membership.retire_stale(settings, count)
    if args.worker is None and count > 1:
        from delaybridge.bridge.workers.launch import run_supervised

        verbose = logging.getLogger().level <= logging.DEBUG
        return run_supervised(settings, count, args.config, verbose)
    if args.worker is not None:
        settings = worker_settings(settings, args.worker)
    gc_tuning.tune()
    service = Service(settings, worker=args.worker or 0)
    hotpath.announce()  # compiled (mypyc) or pure Python: logged once per process

    def on_signal(signum: int, _frame: object) -> None:
        service.stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    with HttpServer(settings.http, service.control, service.metrics) as http:
        print(f"{HTTP_ANNOUNCE}{http.url}", flush=True)
        service.run(on_ready=gc_tuning.freeze_startup)
    if service.control.failure is not None:
        print(f"delaybridge: stopped: {service.control.failure}", file=sys.stderr)
        return 3
    return 0


def _send(args: argparse.Namespace) -> int:
    from delaybridge.bridge.cli import send

    kafka, topic = _kafka_target(args)
    ref = send.send(kafka, topic, args)
    print(f"sent to {ref}")
    return 0


def _cancel(args: argparse.Namespace) -> int:
    from delaybridge.bridge.cli import send

    kafka, topic = _kafka_target(args)
    ref = send.cancel(kafka, topic, args)
    what = f"prefix {args.prefix!r}" if args.prefix is not None else repr(args.id)
    print(f"cancel for {what} sent to {ref}")
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
