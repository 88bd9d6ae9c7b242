"""Handing a failed record back for a later attempt: the policy and the record it makes.

A consumer that cannot process a record now gives it to ``DelayClient.retry_later``
(``client/client.py``), which produces one of two records (:func:`retry_record`):

- **a retry**, while attempts are left: the record's key, value and headers, sent to
  the delay topic to come back to its topic (or :attr:`RetryPolicy.target`) after the
  backoff, with the attempt it will be in the :attr:`RetryPolicy.attempt_header`;
- **a dead letter**, after the last attempt: the record as it was, to
  :attr:`RetryPolicy.dead_letter_topic`, with the headers the sidecar's own dead letters
  carry (``contract/dead_letters.py``): ``delay-error: retries-exhausted``,
  ``delay-error-detail`` (which attempt of how many, and the consumer's error) and
  ``delay-origin`` (the failed record's ``topic/partition/offset``).

**Backoff.** Attempt ``n`` failed: the next one is due after
``min(max_backoff, initial_backoff × multiplier^(n-1))``, spread uniformly over up to
``jitter`` times that again (``jitter`` 0.2: between 1× and 1.2×). Jitter only ever adds
(a retry is never earlier than its backoff), and spreads a herd of records that failed
together (a downstream outage) over a window instead of one instant.

**Attempts.** Attempt 1 is the first delivery; a record with no attempt header is in
attempt 1. The retry carries ``n + 1``; the dead letter carries the last one, ``n``.

**The retry's id** is ``retry:<topic>/<partition>/<offset>`` of the failed record, and a
schedule with an id replaces a pending one with the same id and target (DESIGN §2): a
consumer that crashes after ``retry_later`` but before committing its offset, reads the
record again and hands it back again, so the second retry replaces the first while it
is pending, and one retry comes back, not two. The record's old control headers (the
``delay-id``, ``delay-origin`` and ``delay-due-ms`` of its delivery) are not copied: the
sidecar would take them as the retry's own instructions.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from confluent_kafka import Message

from delaybridge.client.arguments import (
    ClientArgumentError,
    Headers,
    duration_ms,
    positive_int,
    topic_name,
)
from delaybridge.client.records import Outgoing
from delaybridge.connectors.records import headers_of
from delaybridge.contract.dead_letters import dead_letter_headers
from delaybridge.contract.names import (
    CONTROL_HEADERS,
    DELAY_ID,
    DELAY_MS,
    INTERNAL_HEADERS,
    TARGET_TOPIC,
)
from delaybridge.contract.reasons import Reason

#: The default name of the header that counts attempts (a plain header: the sidecar
#: carries it through, as it does every header that is not the contract's).
ATTEMPT_HEADER = "retry-attempt"
MAX_ATTEMPTS = 1_000


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often, and how far apart, a record is tried; where it goes after the last try.

    Checked when built: a wrong field raises :class:`ClientArgumentError` naming it.
    """

    dead_letter_topic: str
    """Where a record goes after its last attempt fails."""
    max_attempts: int = 5
    """Attempts in all, the first delivery included (1: dead-letter at once)."""
    initial_backoff: timedelta = timedelta(seconds=1)
    """The wait after attempt 1 fails."""
    multiplier: float = 2.0
    """Each later wait is this many times the one before (1.0: a fixed wait)."""
    max_backoff: timedelta = timedelta(hours=1)
    """No wait is longer than this (before jitter)."""
    jitter: float = 0.2
    """Up to this fraction of the wait is added at random (0: none; at most 1)."""
    attempt_header: str = ATTEMPT_HEADER
    """The header that carries the attempt number (decimal text)."""
    target: str | None = None
    """Where a retry comes back to; None: the failed record's own topic."""

    def __post_init__(self) -> None:
        topic_name("dead_letter_topic", self.dead_letter_topic)
        positive_int("max_attempts", self.max_attempts, MAX_ATTEMPTS)
        initial_ms = duration_ms("initial_backoff", self.initial_backoff)
        if duration_ms("max_backoff", self.max_backoff) < initial_ms:
            raise ClientArgumentError(
                "max_backoff", f"{self.max_backoff} is shorter than initial_backoff"
            )
        if not isinstance(self.multiplier, int | float) or not 1.0 <= self.multiplier <= 100.0:
            raise ClientArgumentError("multiplier", f"expected 1.0..100.0, got {self.multiplier!r}")
        if not isinstance(self.jitter, int | float) or not 0.0 <= self.jitter <= 1.0:
            raise ClientArgumentError("jitter", f"expected 0.0..1.0, got {self.jitter!r}")
        name = self.attempt_header
        if not isinstance(name, str) or not name:
            raise ClientArgumentError("attempt_header", f"expected a header name, got {name!r}")
        if name in CONTROL_HEADERS or name in INTERNAL_HEADERS:
            raise ClientArgumentError(
                "attempt_header", f"{name!r} belongs to the delay contract: choose another name"
            )
        if self.target is not None:
            topic_name("target", self.target)

    def backoff_ms(self, attempt: int, uniform: float) -> int:
        """The wait after attempt ``attempt`` failed, with ``uniform`` in [0, 1) drawn
        for its jitter (see the module docstring)."""
        initial_ms = duration_ms("initial_backoff", self.initial_backoff)
        cap_ms = duration_ms("max_backoff", self.max_backoff)
        try:
            grown = initial_ms * float(self.multiplier) ** (attempt - 1)
        except OverflowError:  # 100.0 ** 999: far past any cap
            grown = cap_ms
        base_ms = cap_ms if grown >= cap_ms else int(grown)
        return base_ms + int(base_ms * self.jitter * uniform)


def attempt_of(message: Message, policy: RetryPolicy) -> int:
    """The attempt a consumed record is in: its attempt header's number, else 1."""
    found: bytes | None = None
    for name, raw in headers_of(message):
        if name == policy.attempt_header:
            found = raw
    if found is None:
        return 1
    text = found.decode("utf-8", "replace").strip()
    if not text.isascii() or not text.isdigit() or not 1 <= int(text) <= MAX_ATTEMPTS:
        raise ClientArgumentError(
            "message", f"header {policy.attempt_header}: {text!r:.40} is not an attempt number"
        )
    return int(text)


def retry_record(
    message: Message,
    attempt: int | None,
    policy: RetryPolicy,
    delay_topic: str,
    uniform: float,
    error: str | None = None,
) -> Outgoing:
    """The record that hands ``message`` back after attempt ``attempt`` failed (None: the
    attempt its header says): a retry to ``delay_topic``, or the dead letter."""
    if message.error() is not None:
        raise ClientArgumentError("message", f"a consume error, not a record: {message.error()}")
    topic, partition, offset = message.topic(), message.partition(), message.offset()
    if topic is None or partition is None or offset is None or offset < 0:
        raise ClientArgumentError("message", "not a consumed record (no topic/partition/offset)")
    if not isinstance(policy, RetryPolicy):
        raise ClientArgumentError("policy", f"expected a RetryPolicy, got {type(policy).__name__}")
    n = attempt_of(message, policy) if attempt is None else attempt
    positive_int("attempt", n, MAX_ATTEMPTS)
    key, value = _raw(message.key()), _raw(message.value())
    own = [(k, v) for k, v in headers_of(message) if k != policy.attempt_header]
    if n >= policy.max_attempts:
        detail = f"attempt {n} of {policy.max_attempts} failed" + (f": {error}" if error else "")
        kept: Headers = [*own, (policy.attempt_header, str(n))]
        headers = dead_letter_headers(
            kept, Reason.RETRIES_EXHAUSTED, detail, f"{topic}/{partition}/{offset}"
        )
        return Outgoing(policy.dead_letter_topic, key, value, headers)
    carried: Headers = [
        (k, v) for k, v in own if k not in CONTROL_HEADERS and k not in INTERNAL_HEADERS
    ]
    out: Headers = [
        (TARGET_TOPIC, policy.target or topic),
        (DELAY_MS, str(policy.backoff_ms(n, uniform))),
        (DELAY_ID, f"retry:{topic}/{partition}/{offset}"),
        *carried,
        (policy.attempt_header, str(n + 1)),
    ]
    return Outgoing(delay_topic, key, value, out)


def _raw(data: str | bytes | None) -> bytes | None:
    return data.encode() if isinstance(data, str) else data
