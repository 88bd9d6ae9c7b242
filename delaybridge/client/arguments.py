"""Checking a client call's arguments: each error names the argument at fault.

The client writes the header contract (DESIGN §2) from typed values, so a mistake is
caught in the producer's process, with the argument's name, instead of arriving in the
dead-letter topic later. Every check here raises :class:`ClientArgumentError`; the
conversions round *up* to whole milliseconds where a due time depends on them (a
message is never early because of rounding).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from delaybridge.contract.decisions import MAX_ID_BYTES, MAX_PARTITION
from delaybridge.contract.names import CONTROL_HEADERS, INTERNAL_HEADERS
from delaybridge.contract.rules import HeaderRules
from delaybridge.errors import DelayBridgeError

#: Header values as confluent-kafka takes them (text is sent as UTF-8).
HeaderValue = str | bytes | None
Headers = list[tuple[str, HeaderValue]]
#: What a caller may pass as extra headers: pairs in order (repeats allowed), or a mapping.
HeadersArg = Sequence[tuple[str, HeaderValue]] | Mapping[str, HeaderValue]
_MS = timedelta(milliseconds=1)


class ClientArgumentError(DelayBridgeError, ValueError):
    """An argument of a ``delaybridge.client`` call is wrong; :attr:`argument` names it."""

    def __init__(self, argument: str, problem: str) -> None:
        super().__init__(f"{argument}: {problem}")
        self.argument = argument
        self.problem = problem


def topic_name(argument: str, name: object) -> str:
    """A legal Kafka topic name (1..249 of ``[A-Za-z0-9._-]``)."""
    if not isinstance(name, str) or not HeaderRules.is_topic_name(name):
        raise ClientArgumentError(argument, f"{name!r:.300} is not a legal Kafka topic name")
    return name


def message_id(argument: str, id: object) -> str:
    """A message id (``delay-id``): non-empty text of at most 65,535 UTF-8 bytes."""
    if not isinstance(id, str):
        raise ClientArgumentError(argument, f"expected a str, got {type(id).__name__}")
    if not id:
        raise ClientArgumentError(argument, "an id must not be empty")
    size = len(id.encode())
    if size > MAX_ID_BYTES:
        raise ClientArgumentError(argument, f"{size} bytes of UTF-8 (max {MAX_ID_BYTES})")
    return id


def id_prefix(argument: str, prefix: object) -> str:
    """An id prefix (``delay-cancel-prefix``): a message id that is not blank, since an
    empty prefix would name every message (the sidecar refuses it too)."""
    if isinstance(prefix, str) and not prefix.strip():
        raise ClientArgumentError(
            argument, "a prefix must not be empty: it would cancel everything"
        )
    return message_id(argument, prefix)


def partition_number(argument: str, partition: object) -> int:
    """A partition number, 0..2^31-1."""
    if type(partition) is not int or not 0 <= partition <= MAX_PARTITION:
        raise ClientArgumentError(
            argument, f"expected an int in 0..{MAX_PARTITION}, got {partition!r}"
        )
    return partition


def positive_int(argument: str, value: object, maximum: int) -> int:
    """An integer in ``1..maximum`` (a bool is not one)."""
    if type(value) is not int or not 1 <= value <= maximum:
        raise ClientArgumentError(argument, f"expected an int in 1..{maximum}, got {value!r}")
    return value


def duration_ms(argument: str, duration: object, *, minimum_ms: int = 0) -> int:
    """A :class:`~datetime.timedelta` in whole milliseconds, rounded up, at least ``minimum_ms``."""
    if not isinstance(duration, timedelta):
        raise ClientArgumentError(
            argument, f"expected a datetime.timedelta, got {type(duration).__name__}"
        )
    ms = -(-duration // _MS)
    if ms < minimum_ms:
        raise ClientArgumentError(argument, f"{duration} is shorter than {minimum_ms} ms")
    return ms


def epoch_ms(argument: str, instant: object, *, round_up: bool = True) -> int:
    """An aware :class:`~datetime.datetime` as epoch milliseconds, rounded up (a due
    time) or down (``round_up=False``: the end of a series)."""
    if not isinstance(instant, datetime):
        raise ClientArgumentError(
            argument, f"expected a datetime.datetime, got {type(instant).__name__}"
        )
    if instant.tzinfo is None or instant.utcoffset() is None:
        raise ClientArgumentError(
            argument, f"{instant.isoformat()} has no time zone: give an aware datetime"
        )
    since_epoch = instant - datetime.fromtimestamp(0, instant.tzinfo)
    return -(-since_epoch // _MS) if round_up else since_epoch // _MS


def record_bytes(argument: str, data: object) -> bytes | None:
    """A key or value: bytes, text (sent as UTF-8) or None."""
    if data is None or isinstance(data, bytes):
        return data
    if isinstance(data, str):
        return data.encode()
    raise ClientArgumentError(argument, f"expected bytes, str or None, got {type(data).__name__}")


def producer_headers(argument: str, headers: HeadersArg | None) -> Headers:
    """The caller's own headers, in order; the contract's names are refused.

    A control header here would steer the sidecar behind the typed arguments' back (a
    ``delay-cancel`` in a schedule, a second ``delay-ms``), and the sidecar's internal ones
    are never a producer's: the error names the header and the argument to use instead.
    """
    if headers is None:
        return []
    pairs = list(headers.items()) if isinstance(headers, Mapping) else list(headers)
    out: Headers = []
    for pair in pairs:
        if not isinstance(pair, tuple) or len(pair) != 2 or not isinstance(pair[0], str):
            raise ClientArgumentError(argument, f"expected (name, value) pairs, got {pair!r:.80}")
        name, value = pair
        if name in CONTROL_HEADERS or name in INTERNAL_HEADERS:
            raise ClientArgumentError(
                argument,
                f"header {name!r} belongs to the delay contract: use the call's typed "
                "arguments (target, delay, at, cron, every, id, ...) instead",
            )
        if value is not None and not isinstance(value, str | bytes):
            raise ClientArgumentError(
                argument,
                f"header {name!r}: expected str, bytes or None, got {type(value).__name__}",
            )
        out.append((name, value))
    return out
