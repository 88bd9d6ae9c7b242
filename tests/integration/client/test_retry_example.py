"""``retry_later`` end to end, through examples/retry_with_backoff.py's consumer loops:
a real broker, a real sidecar bringing each retry back, a real consumer group.

Three payments: one that succeeds at once, one that fails twice and then succeeds, one
that always fails. Pass criteria, in numbers: each payment either processed or
dead-lettered (lost 0); each attempt after its backoff (early 0); each payment handled
exactly as often as the policy allows (3 attempts; duplicates 0); the failing one
dead-lettered once with ``retries-exhausted``.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from confluent_kafka import Message, Producer

from delaybridge.client import ATTEMPT_HEADER, DelayClient, RetryPolicy
from delaybridge.connectors import header_text
from examples.retry_with_backoff import (
    consume_with_retries,
    consume_with_retries_in_transactions,
)
from tests.integration.sidecar.harness import InProcessSidecar, Topics, Watcher, now_ms, produce

pytestmark = pytest.mark.kafka

Loop = Callable[..., None]


@dataclass
class Payments:
    """The handler: fails ``pay-flaky`` twice and ``pay-dead`` always; records each call."""

    calls: list[tuple[str, int, int, dict[str, str]]] = field(default_factory=list)
    """(key, attempt, the call's clock in ms, the record's headers)."""
    done: list[str] = field(default_factory=list)

    def __call__(self, msg: Message, attempt: int) -> None:
        key = (msg.key() or b"").decode()
        self.calls.append((key, attempt, now_ms(), header_text(msg)))
        if key == "pay-dead" or (key == "pay-flaky" and attempt < 3):
            raise ConnectionError(f"gateway timeout for {key}")
        self.done.append(key)


@pytest.fixture
def policy(topics: Topics) -> RetryPolicy:
    return RetryPolicy(
        dead_letter_topic=topics.dead_letter,
        max_attempts=3,
        initial_backoff=timedelta(seconds=1),
        multiplier=2.0,
        jitter=0.2,
    )


@pytest.fixture
def payments_topic(kafka: Any) -> str:
    return str(kafka.create_topic("payments", partitions=2))


@pytest.fixture
def run_loop(
    kafka: Any, topics: Topics, payments_topic: str, policy: RetryPolicy
) -> Iterator[Callable[[Loop, Payments], None]]:
    """Starts an example loop on a thread; stops and joins it at the end."""
    stop = threading.Event()
    threads: list[threading.Thread] = []
    errors: list[BaseException] = []

    def start(loop: Loop, handler: Payments) -> None:
        def run() -> None:
            try:
                loop(
                    kafka.bootstrap_servers,
                    payments_topic,
                    topics.delay,
                    policy,
                    handler,
                    stop.is_set,
                    group=f"pay-{payments_topic}",
                )
            except BaseException as exc:
                errors.append(exc)

        thread = threading.Thread(target=run, name="payments", daemon=True)
        thread.start()
        threads.append(thread)

    yield start
    stop.set()
    for thread in threads:
        thread.join(30)
    assert not errors, errors


@pytest.mark.parametrize(
    "loop", [consume_with_retries, consume_with_retries_in_transactions], ids=["ack", "txn"]
)
def test_retries_come_back_after_their_backoff_and_the_last_one_is_dead_lettered(
    kafka: Any,
    topics: Topics,
    sidecar: InProcessSidecar,
    watcher: Watcher,
    payments_topic: str,
    run_loop: Callable[[Loop, Payments], None],
    loop: Loop,
) -> None:
    handler = Payments()
    run_loop(loop, handler)
    keys = [b"pay-ok", b"pay-flaky", b"pay-dead"]
    produce(
        kafka.bootstrap_servers, payments_topic, [(k, b"42 EUR", [("trace", "t")]) for k in keys]
    )

    watcher.until(
        lambda a: any(x.headers.get("delay-error") for x in a) and len(handler.done) >= 2,
        60,
        "pay-ok and pay-flaky processed, pay-dead dead-lettered",
    )
    watcher.settle(3.0)  # a duplicate retry would be due within its jittered backoff

    attempts = Counter(key for key, *_ in handler.calls)
    assert sorted(handler.done) == ["pay-flaky", "pay-ok"]  # lost 0
    assert attempts == Counter({"pay-ok": 1, "pay-flaky": 3, "pay-dead": 3})  # duplicates 0
    failed_at: dict[tuple[str, int], int] = {}
    for key, attempt, at_ms, headers in handler.calls:
        assert headers["trace"] == "t"  # the record's own headers come back with it
        if attempt == 1:
            assert ATTEMPT_HEADER not in headers
        else:
            backoff_ms = 1_000 * 2 ** (attempt - 2)
            due_ms = int(headers["delay-due-ms"])
            assert headers[ATTEMPT_HEADER] == str(attempt)
            assert due_ms - failed_at[(key, attempt - 1)] >= backoff_ms  # after its backoff
            assert due_ms <= at_ms  # early 0
        failed_at[(key, attempt)] = at_ms
    (dead,) = [a for a in watcher.arrivals if a.topic == topics.dead_letter]
    assert (dead.key, dead.value) == (b"pay-dead", b"42 EUR")
    assert dead.headers["delay-error"] == "retries-exhausted"
    assert (
        dead.headers["delay-error-detail"] == "attempt 3 of 3 failed: gateway timeout for pay-dead"
    )
    assert dead.headers[ATTEMPT_HEADER] == "3"
    assert dead.headers["delay-origin"].startswith(f"{payments_topic}/")


def test_an_aborted_transaction_never_brings_its_retry_back(
    kafka: Any, topics: Topics, sidecar: InProcessSidecar, watcher: Watcher, policy: RetryPolicy
) -> None:
    orders = topics.targets[0]
    produce(kafka.bootstrap_servers, orders, [(b"aborted", b"v", []), (b"committed", b"v", [])])
    first, second = sorted(kafka.consume(orders, 2), key=lambda m: m.key() or b"")
    producer = Producer(
        {"bootstrap.servers": kafka.bootstrap_servers, "transactional.id": f"t-{orders}"}
    )
    producer.init_transactions()
    client = DelayClient(producer, topics.delay)

    producer.begin_transaction()
    client.retry_later_in_transaction(first, 1, policy)
    producer.abort_transaction()
    producer.begin_transaction()
    client.retry_later_in_transaction(second, 1, policy)
    producer.commit_transaction()

    watcher.until(lambda a: sum(x.key == b"committed" for x in a) == 2, 30, "the committed retry")
    watcher.settle(2.0)  # past the aborted retry's due time (the same backoff)
    keys = Counter(a.key for a in watcher.arrivals)
    assert keys == Counter({b"aborted": 1, b"committed": 2})  # the originals + one retry
