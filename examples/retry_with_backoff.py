"""A consumer that hands records it cannot process yet back for later, with backoff.

The payment gateway is down now and then. Instead of blocking its partition or dropping
the record, the consumer calls ``retry_later``: the record comes back to the same topic
after 1 s, 2 s, 4 s... (plus up to 20 % jitter), carrying ``retry-attempt``; after the
fifth failed attempt it goes to the dead-letter topic with ``delay-error:
retries-exhausted``. ``retry_later`` returns once Kafka has the record, so committing
the offset right after it never loses the record.

Two loops, one per commit style:

- :func:`consume_with_retries`: commit the offset after each record (at-least-once);
- :func:`consume_with_retries_in_transactions`: read and write in one transaction
  (``retry_later_in_transaction``), so a retry and the consumed offset commit together.

    python -m examples.retry_with_backoff --bootstrap 127.0.0.1:9092 --topic payments \\
        --delay-topic delay --dead-letter-topic payments.dlt --seconds 60
"""

from __future__ import annotations

import argparse
import random
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta

from confluent_kafka import Consumer, Message, Producer, TopicPartition

from delaybridge.client import DelayClient, RetryPolicy, attempt_of

#: ``handle(record, attempt)``: raises when the record cannot be processed now.
Handler = Callable[[Message, int], None]


def consumer_for(bootstrap: str, topic: str, group: str) -> Consumer:
    """A group member that commits by hand and reads only committed records."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    consumer.subscribe([topic])
    return consumer


def records(
    consumer: Consumer, policy: RetryPolicy, done: Callable[[], bool]
) -> Iterator[tuple[Message, int]]:
    """The consumed records until ``done()``, each with the attempt it is in."""
    while not done():
        msg = consumer.poll(0.2)
        if msg is not None and msg.error() is None:
            yield msg, attempt_of(msg, policy)


def consume_with_retries(
    bootstrap: str,
    topic: str,
    delay_topic: str,
    policy: RetryPolicy,
    handle: Handler,
    done: Callable[[], bool],
    group: str = "payments",
) -> None:
    """Process ``topic`` until ``done()``; a failed record goes back through the delay
    topic, and its offset is committed once Kafka has the retry (or the dead letter)."""
    consumer = consumer_for(bootstrap, topic, group)
    try:
        with DelayClient.connect(bootstrap, delay_topic) as client:
            for msg, attempt in records(consumer, policy, done):
                try:
                    handle(msg, attempt)
                except Exception as exc:
                    client.retry_later(msg, attempt, policy, error=exc)  # acknowledged
                consumer.commit(message=msg, asynchronous=False)
    finally:
        consumer.close()


def consume_with_retries_in_transactions(
    bootstrap: str,
    topic: str,
    delay_topic: str,
    policy: RetryPolicy,
    handle: Handler,
    done: Callable[[], bool],
    group: str = "payments",
) -> None:
    """As :func:`consume_with_retries`, but each record's retry and its offset commit in
    one Kafka transaction: both or neither, even across a crash."""
    consumer = consumer_for(bootstrap, topic, group)
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"{group}-{uuid.uuid4().hex[:8]}"}
    )
    producer.init_transactions()
    client = DelayClient(producer, delay_topic)
    try:
        for msg, attempt in records(consumer, policy, done):
            producer.begin_transaction()
            try:
                handle(msg, attempt)
            except Exception as exc:
                client.retry_later_in_transaction(msg, attempt, policy, error=exc)  # queued
            where = msg.topic(), msg.partition(), msg.offset()
            assert where[0] is not None and where[1] is not None and where[2] is not None
            position = TopicPartition(where[0], where[1], where[2] + 1)
            producer.send_offsets_to_transaction([position], consumer.consumer_group_metadata())
            producer.commit_transaction()  # the retry and the offset, together
    finally:
        consumer.close()


def flaky_gateway(msg: Message, attempt: int) -> None:
    """Fails half of the time: a payment gateway having a bad day."""
    if random.random() < 0.5:
        raise ConnectionError(f"gateway timeout (attempt {attempt})")
    print(f"paid {msg.key()!r} at attempt {attempt}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--topic", default="payments")
    parser.add_argument("--delay-topic", default="delay")
    parser.add_argument("--dead-letter-topic", default="payments.dlt")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--transactions", action="store_true")
    args = parser.parse_args(argv)
    policy = RetryPolicy(
        dead_letter_topic=args.dead_letter_topic,
        max_attempts=5,
        initial_backoff=timedelta(seconds=1),
        multiplier=2.0,
        jitter=0.2,
    )
    end = time.monotonic() + args.seconds
    loop = consume_with_retries_in_transactions if args.transactions else consume_with_retries
    loop(
        args.bootstrap,
        args.topic,
        args.delay_topic,
        policy,
        flaky_gateway,
        lambda: time.monotonic() > end,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
