"""while_electing: an offset or metadata request asked again while Kafka settles."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError as RdKafkaError
from confluent_kafka import KafkaException

from delaybridge.connectors import KafkaClientError
from delaybridge.connectors.retry import while_electing


def failing(codes: list[int], answer: tuple[int, int]) -> tuple[list[int], object]:
    calls: list[int] = []

    def request() -> tuple[int, int]:
        calls.append(1)
        if codes:
            raise KafkaException(RdKafkaError(codes.pop(0), "injected"))
        return answer

    return calls, request


@pytest.mark.parametrize(
    "code",
    [
        RdKafkaError.NOT_LEADER_FOR_PARTITION,
        RdKafkaError._UNKNOWN_PARTITION,
        # A broker that restarted: librdkafka replaces its handle for it (seen on a real
        # broker after a 15 s outage, test_kafka_outage: the restore plan of a partition
        # taken back failed on it and the sidecar exited).
        RdKafkaError._DESTROY_BROKER,
        RdKafkaError._TRANSPORT,
        RdKafkaError._TIMED_OUT,
    ],
)
def test_a_passing_error_is_asked_again(code: int) -> None:
    calls, request = failing([code, code], (0, 7))
    assert while_electing(request, "offsets of t/0", timeout_s=5) == (0, 7)  # type: ignore[arg-type]
    assert len(calls) == 3


def test_another_error_is_raised_at_once_naming_what() -> None:
    calls, request = failing([RdKafkaError.TOPIC_AUTHORIZATION_FAILED], (0, 7))
    with pytest.raises(KafkaClientError, match="offsets of t/0"):
        while_electing(request, "offsets of t/0", timeout_s=5)  # type: ignore[arg-type]
    assert len(calls) == 1


def test_a_passing_error_that_lasts_is_raised_after_the_timeout() -> None:
    calls, request = failing([RdKafkaError._TRANSPORT] * 100, (0, 7))
    with pytest.raises(KafkaClientError, match="_TRANSPORT"):
        while_electing(request, "offsets of t/0", timeout_s=0.5)  # type: ignore[arg-type]
    assert 1 < len(calls) < 100
