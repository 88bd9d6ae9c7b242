"""retry_later on the in-memory fake: the retry's headers and backoff, the dead letter
after the last attempt, the transactional variant, and every argument it refuses."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from confluent_kafka import KafkaError, Message

from delaybridge.client import ATTEMPT_HEADER, ClientArgumentError, DelayClient, RetryPolicy
from delaybridge.client import attempt_of as attempt_in
from delaybridge.connectors import headers_of
from delaybridge.contract import Reason
from tests.fakes.cluster import FakeCluster
from tests.fakes.transactions import TransactionalProducer
from tests.unit.client.conftest import DELAY, NOW_S

POLICY = RetryPolicy(
    dead_letter_topic="dlt",
    max_attempts=3,
    initial_backoff=timedelta(seconds=2),
    multiplier=3.0,
    max_backoff=timedelta(seconds=10),
    jitter=0.5,
)


def failed(attempt: int | None = None, offset: int = 7) -> Message:
    """A record as a consumer got it from ``orders``, after a delivery by the sidecar."""
    headers: list[tuple[str, str | bytes | None]] = [
        ("trace", b"abc"),
        ("delay-id", b"order-42"),
        ("delay-origin", b"delay/1/3"),
        ("delay-due-ms", b"1767225600000"),
    ]
    if attempt is not None:
        headers.append((ATTEMPT_HEADER, str(attempt).encode()))
    return Message(
        topic="orders", partition=1, offset=offset, key=b"k", value=b"v", headers=headers
    )


def test_a_retry_keeps_key_value_and_headers_and_counts_the_attempt(
    client: DelayClient, cluster: FakeCluster
) -> None:
    ref = client.retry_later(failed(), None, POLICY)

    (msg,) = cluster.records(DELAY)
    assert (ref.topic, ref.partition, ref.offset) == (DELAY, msg.partition(), 0)
    assert (msg.key(), msg.value()) == (b"k", b"v")
    assert msg.headers() == [
        ("delay-target-topic", b"orders"),
        ("delay-ms", b"2500"),  # 2 s after attempt 1, plus half the jitter (uniform 0.5)
        ("delay-id", b"retry:orders/1/7"),
        ("trace", b"abc"),  # the delivery's delay-id, -origin, -due-ms are not carried
        (ATTEMPT_HEADER, b"2"),
    ]


@pytest.mark.parametrize(
    ("attempt", "uniform", "delay_ms"),
    [
        (1, 0.0, 2_000),
        (1, 0.999, 2_999),
        (2, 0.0, 6_000),  # × 3
        (2, 0.5, 7_500),
        (3, 0.0, 10_000),  # 18 s, capped at 10 s
        (900, 0.999, 14_995),  # capped before jitter; no overflow
    ],
)
def test_backoff_grows_by_the_multiplier_is_capped_and_jitter_only_adds(
    attempt: int, uniform: float, delay_ms: int
) -> None:
    assert POLICY.backoff_ms(attempt, uniform) == delay_ms


def test_the_attempt_comes_from_the_header_unless_given(
    client: DelayClient, cluster: FakeCluster
) -> None:
    assert attempt_in(failed(), POLICY) == 1
    assert attempt_in(failed(2), POLICY) == 2

    client.retry_later(failed(2), None, POLICY)
    client.retry_later(failed(offset=8), 2, POLICY)

    for msg in cluster.records(DELAY):
        assert (ATTEMPT_HEADER, b"3") in (msg.headers() or [])
        assert ("delay-ms", b"7500") in (msg.headers() or [])


def test_after_the_last_attempt_the_record_is_dead_lettered_with_a_reason(
    client: DelayClient, cluster: FakeCluster
) -> None:
    client.retry_later(failed(3), None, POLICY, error=ValueError("no such customer"))

    assert cluster.records(DELAY) == []
    (msg,) = cluster.records("dlt")
    assert (msg.key(), msg.value()) == (b"k", b"v")
    assert msg.headers() == [
        ("trace", b"abc"),  # the record as it was delivered
        ("delay-id", b"order-42"),
        ("delay-due-ms", b"1767225600000"),
        (ATTEMPT_HEADER, b"3"),
        ("delay-error", Reason.RETRIES_EXHAUSTED.value.encode()),
        ("delay-error-detail", b"attempt 3 of 3 failed: no such customer"),
        ("delay-origin", b"orders/1/7"),
    ]


def test_a_policy_of_one_attempt_dead_letters_at_once(
    client: DelayClient, cluster: FakeCluster
) -> None:
    once = RetryPolicy(dead_letter_topic="dlt", max_attempts=1)
    client.retry_later(failed(), None, once, error="boom")

    (msg,) = cluster.records("dlt")
    assert ("delay-error-detail", b"attempt 1 of 1 failed: boom") in (msg.headers() or [])


def test_a_retry_may_come_back_to_another_topic(client: DelayClient, cluster: FakeCluster) -> None:
    client.retry_later(failed(), 1, RetryPolicy(dead_letter_topic="dlt", target="reminders"))

    (msg,) = cluster.records(DELAY)
    assert headers_of(msg)[0] == ("delay-target-topic", b"reminders")


def test_in_a_transaction_the_record_is_queued_and_committed_with_the_transaction(
    cluster: FakeCluster,
) -> None:
    producer = TransactionalProducer(cluster, config={"transactional.id": "worker-1"})
    producer.init_transactions()
    client = DelayClient(producer, DELAY, clock=lambda: NOW_S, uniform=lambda: 0.0)

    producer.begin_transaction()
    client.retry_later_in_transaction(failed(), None, POLICY)
    assert len(producer) == 1  # queued, not waited for
    producer.abort_transaction()
    assert cluster.records(DELAY) == []  # an aborted retry is never read

    producer.begin_transaction()
    client.retry_later_in_transaction(failed(3), None, POLICY)
    client.retry_later_in_transaction(failed(1, offset=9), None, POLICY)
    producer.commit_transaction()
    assert len(cluster.records("dlt")) == 1
    (retry,) = cluster.records(DELAY)
    assert ("delay-id", b"retry:orders/1/9") in (retry.headers() or [])


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("dead_letter_topic", "", "not a legal Kafka topic name"),
        ("max_attempts", 0, "expected an int in 1.."),
        ("max_attempts", 2.0, "expected an int in 1.."),
        ("initial_backoff", 1, "expected a datetime.timedelta"),
        ("initial_backoff", timedelta(seconds=-1), "shorter than 0 ms"),
        ("max_backoff", timedelta(milliseconds=10), "shorter than initial_backoff"),
        ("multiplier", 0.5, "expected 1.0..100.0"),
        ("jitter", 1.5, "expected 0.0..1.0"),
        ("jitter", "0.1", "expected 0.0..1.0"),
        ("attempt_header", "", "expected a header name"),
        ("attempt_header", "delay-ms", "belongs to the delay contract"),
        ("attempt_header", "delaybridge-retry", "belongs to the delay contract"),
        ("target", "a b", "not a legal Kafka topic name"),
    ],
)
def test_a_policy_refuses_a_wrong_field_and_names_it(field: str, value: Any, says: str) -> None:
    fields: dict[str, Any] = {"dead_letter_topic": "dlt", field: value}
    with pytest.raises(ClientArgumentError) as caught:
        RetryPolicy(**fields)
    assert caught.value.argument == field
    assert says in str(caught.value)


@pytest.mark.parametrize(
    ("message", "attempt", "argument", "says"),
    [
        (Message(error=KafkaError(KafkaError._PARTITION_EOF)), 1, "message", "a consume error"),
        (Message(value=b"v"), 1, "message", "not a consumed record"),
        (failed(), 0, "attempt", "expected an int in 1.."),
        (failed(), True, "attempt", "expected an int in 1.."),
        (
            Message(topic="orders", partition=0, offset=1, headers=[(ATTEMPT_HEADER, b"x")]),
            None,
            "message",
            "not an attempt number",
        ),
    ],
)
def test_retry_later_refuses_a_wrong_argument_and_names_it(
    client: DelayClient,
    cluster: FakeCluster,
    message: Message,
    attempt: int | None,
    argument: str,
    says: str,
) -> None:
    with pytest.raises(ClientArgumentError) as caught:
        client.retry_later(message, attempt, POLICY)
    assert caught.value.argument == argument
    assert says in str(caught.value)
    assert cluster.records(DELAY) == cluster.records("dlt") == []


def test_retry_later_refuses_something_that_is_not_a_policy(client: DelayClient) -> None:
    with pytest.raises(ClientArgumentError, match="policy: expected a RetryPolicy"):
        client.retry_later(failed(), 1, "five times")  # type: ignore[arg-type]
