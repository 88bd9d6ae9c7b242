"""Reading a consumed record's headers (librdkafka gives a list of pairs, or None)."""

from __future__ import annotations

from typing import cast

from confluent_kafka import Message


def headers_of(msg: Message) -> list[tuple[str, bytes | None]]:
    """A consumed record's headers, in order (librdkafka gives a list of pairs)."""
    return cast(list[tuple[str, bytes | None]], msg.headers() or [])


def header_text(msg: Message) -> dict[str, str]:
    """A consumed record's headers as text (last one wins; undecodable bytes replaced)."""
    return {name: (raw or b"").decode("utf-8", "replace") for name, raw in headers_of(msg)}
