"""``delaybridge console``: the web console, in its own process.

delaybridge console (--url URL ... | --service NAME:PORT) [--config FILE]
                    [--host 127.0.0.1] [--port 8081] [--read-only] [--value-preview]
                    [--insecure-cookie] [--proxy-hops N] [--bootstrap HOST:PORT]
                    [--dead-letter-topic T] [--sample-interval-s 10]

The replicas are named as for ``delaybridge pending list``; the settings file (as for
``run``, ``send`` and ``cancel``: ``--config``, default ``$DELAYBRIDGE_CONFIG``, and
``DELAYBRIDGE_*`` variables) gives the Kafka cluster (TLS/SASL included), the
dead-letter topic and the admin token (``http.admin_token``, best passed as
``DELAYBRIDGE_HTTP__ADMIN_TOKEN``). docs/console.md has every option.
"""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path
from typing import Any

from delaybridge.errors import DelayBridgeError

log = logging.getLogger(__name__)


def register(commands: Any, bench: Any) -> None:
    del bench
    console = commands.add_parser(
        "console", help="the web console: pending messages, dead letters, pause (all replicas)"
    )
    console.add_argument("--url", action="append", default=[], help="a replica (repeatable)")
    console.add_argument(
        "--service", help="NAME:PORT of the headless service: every address is a replica"
    )
    console.add_argument(
        "--config", type=Path, help="settings file, as for `run` (default $DELAYBRIDGE_CONFIG)"
    )
    console.add_argument(
        "--token",
        default=os.environ.get("DELAYBRIDGE_CONSOLE_TOKEN"),
        help="the admin token (default: the settings' http.admin_token; prefer the "
        "environment to a command line, which other users of the host can read)",
    )
    console.add_argument("--host", default="127.0.0.1", help="listen address")
    console.add_argument("--port", type=int, default=8081, help="listen port (0: any free one)")
    console.add_argument("--read-only", action="store_true", help="refuse every change")
    console.add_argument(
        "--value-preview", action="store_true", help="show message values (may be personal data)"
    )
    console.add_argument(
        "--insecure-cookie",
        action="store_true",
        help="session cookie without Secure: for plain HTTP beyond localhost only",
    )
    console.add_argument(
        "--proxy-hops",
        type=int,
        default=0,
        help="proxies in front whose X-Forwarded-For/Proto/Host are trusted",
    )
    console.add_argument("--bootstrap", help="Kafka bootstrap servers (default: the settings')")
    console.add_argument("--dead-letter-topic", help="default: the settings' dead_letter_topic")
    console.add_argument(
        "--sample-interval-s",
        type=float,
        default=10.0,
        help="how often the replicas' /metrics are read for rates and lateness",
    )
    console.set_defaults(handler=_run)


def settings_from_args(args: argparse.Namespace) -> Any:
    """The :class:`~delaybridge.console.settings.ConsoleSettings` of a command line."""
    from delaybridge.console.settings import ConsoleSettings
    from delaybridge.settings import load

    settings = load(args.config)
    token = args.token or settings.http.admin_token
    if not token:
        raise DelayBridgeError(
            "the console needs the replicas' admin token to log people in: set "
            "DELAYBRIDGE_HTTP__ADMIN_TOKEN (or http.admin_token in --config)"
        )
    if not args.url and not args.service:
        raise DelayBridgeError("name the replicas: --url URL (repeatable) or --service NAME:PORT")
    if args.sample_interval_s <= 0:
        raise DelayBridgeError("--sample-interval-s must be above 0")
    kafka = settings.kafka
    if args.bootstrap:
        kafka = kafka.model_copy(update={"bootstrap_servers": args.bootstrap})
    return ConsoleSettings(
        urls=tuple(args.url),
        service=args.service,
        token=token,
        kafka=kafka,
        dead_letter_topic=args.dead_letter_topic or settings.dead_letter_topic,
        host=args.host,
        port=args.port,
        read_only=args.read_only,
        value_preview=args.value_preview,
        secure_cookie=not args.insecure_cookie,
        proxy_hops=max(0, args.proxy_hops),
        sample_interval_s=args.sample_interval_s,
    )


def _run(args: argparse.Namespace) -> int:
    try:
        from delaybridge.console.app import create_app
        from delaybridge.console.context import build
        from delaybridge.console.server import serve
    except ImportError as exc:
        raise DelayBridgeError(
            f"the console needs the `console` extra: pip install 'delaybridge[console]' ({exc})"
        ) from exc
    settings = settings_from_args(args)
    running = build(settings)
    mode = ", ".join(
        what
        for what, on in (
            ("read-only", settings.read_only),
            ("value previews", settings.value_preview),
            ("cookie without Secure", not settings.secure_cookie),
        )
        if on
    )
    log.info(
        "console for %s; dead letters from %r; %s",
        ", ".join(settings.urls) or settings.service,
        settings.dead_letter_topic,
        mode or "changes allowed, no value previews",
    )
    serve(create_app(running.context), settings.host, settings.port, running.close)
    return 0
