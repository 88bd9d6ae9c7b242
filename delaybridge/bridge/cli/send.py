"""``delaybridge send`` and ``cancel``: command-line text into :mod:`delaybridge.client` calls.

The client writes the headers and checks them (``docs/client.md``); this module only
parses the options' text (durations, RFC 3339 times) into the client's typed arguments
and says which option is at fault when the client refuses one.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from delaybridge.client import ClientArgumentError, DelayClient
from delaybridge.connectors import KafkaSettings, RecordRef
from delaybridge.contract.timing import (
    TimeFormatError,
    parse_duration_ms,
    parse_interval_ms,
    parse_rfc3339_ms,
)
from delaybridge.errors import DelayBridgeError

#: The option behind each argument of the client's calls.
OPTION_OF = {
    "target": "--to",
    "value": "VALUE",
    "headers": "--header",
    "on_duplicate": "--on-duplicate",
}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
T = TypeVar("T")


def send(kafka: KafkaSettings, delay_topic: str, args: argparse.Namespace) -> RecordRef:
    """Schedule the message ``args`` describe (``delaybridge send``); where it landed."""
    headers = []
    for item in args.header:
        name, sep, value = item.partition("=")
        if not sep:
            raise DelayBridgeError(f"--header {item!r}: expected NAME=VALUE")
        headers.append((name, value))
    with DelayClient.connect(kafka, delay_topic) as client:
        return _as_options(
            lambda: client.schedule(
                args.to,
                args.value.encode(),
                key=None if args.key is None else args.key.encode(),
                headers=headers,
                delay=_parsed("--delay", args.delay, _duration),
                at=_parsed("--at", args.at, _instant),
                cron=args.cron,
                tz=args.tz,
                every=_parsed("--every", args.every, _interval),
                until=_parsed("--until", args.until, _instant),
                count=args.count,
                id=args.id,
                on_duplicate=args.on_duplicate,
            )
        )


def cancel(kafka: KafkaSettings, delay_topic: str, args: argparse.Namespace) -> RecordRef:
    """Cancel the pending messages with ``args.id``, or, with ``--prefix``, those whose id
    starts with ``args.prefix`` (``delaybridge cancel``)."""
    with DelayClient.connect(kafka, delay_topic) as client:
        if args.prefix is not None:
            return _as_options(lambda: client.cancel_prefix(args.prefix, target=args.to))
        return _as_options(lambda: client.cancel(args.id, target=args.to))


def _as_options(call: Callable[[], RecordRef]) -> RecordRef:
    """``call()``, its argument errors told in the command's option names."""
    try:
        return call()
    except ClientArgumentError as exc:
        names = [OPTION_OF.get(a, f"--{a}") for a in exc.argument.split("/")]
        raise DelayBridgeError(f"{'/'.join(names)}: {exc.problem}") from exc


def _parsed(option: str, text: str | None, parse: Callable[[str], T]) -> T | None:
    if text is None:
        return None
    try:
        return parse(text)
    except TimeFormatError as exc:
        raise DelayBridgeError(f"{option}: {exc}") from exc


def _duration(text: str) -> timedelta:
    return timedelta(milliseconds=parse_duration_ms(text))


def _interval(text: str) -> timedelta:
    return timedelta(milliseconds=parse_interval_ms(text))


def _instant(text: str) -> datetime:
    return _EPOCH + timedelta(milliseconds=parse_rfc3339_ms(text))
