"""Producing: a full queue, a refused record and a failed delivery, each handled once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import KafkaError as RdKafkaError
from confluent_kafka import KafkaException

from delaybridge.connectors import (
    KafkaClients,
    KafkaSettings,
    ProduceError,
    RecordRef,
    produce_and_wait,
    produce_blocking,
    try_produce,
    wrap,
)
from delaybridge.errors import DelayBridgeError


class Msg:
    def __init__(self, topic: str, partition: int, offset: int) -> None:
        self._where = (topic, partition, offset)

    def topic(self) -> str:
        return self._where[0]

    def partition(self) -> int:
        return self._where[1]

    def offset(self) -> int:
        return self._where[2]


class ScriptedProducer:
    """produce() raises BufferError while ``full`` > 0 (each poll frees one slot)."""

    def __init__(self, full: int = 0, report: Any = None, ack: bool = True) -> None:
        self.full = full
        self.report = report  # the error handed to on_delivery (None: success)
        self.ack = ack  # False: no delivery report ever comes
        self.produced: list[tuple[str, Any, Any, dict[str, Any]]] = []
        self.polls: list[float] = []
        self._pending: list[Callable[[Any, Any], None]] = []

    def produce(self, topic: str, value: Any = None, key: Any = None, **kwargs: Any) -> None:
        if self.full > 0:
            raise BufferError("Local: Queue full")
        self.produced.append((topic, value, key, kwargs))
        if kwargs.get("on_delivery") is not None:
            self._pending.append(kwargs["on_delivery"])

    def poll(self, timeout: float = 0) -> int:
        self.polls.append(timeout)
        self.full = max(0, self.full - 1)
        served = 0
        while self.ack and self._pending:
            self._pending.pop(0)(self.report, Msg(self.produced[-1][0], 2, 41))
            served += 1
        return served


def test_try_produce_passes_partition_and_timestamp_only_when_given() -> None:
    producer = ScriptedProducer()
    assert try_produce(producer, "t", b"v", b"k", headers=[("h", "1")]) is True  # type: ignore[arg-type]
    assert producer.produced == [("t", b"v", b"k", {"on_delivery": None, "headers": [("h", "1")]})]
    try_produce(producer, "t", b"v", None, partition=3)  # type: ignore[arg-type]
    try_produce(producer, "t", b"v", None, timestamp_ms=5)  # type: ignore[arg-type]
    unset = {"on_delivery": None, "headers": None}
    assert producer.produced[1][3] == {**unset, "partition": 3, "timestamp": 0}
    assert producer.produced[2][3] == {**unset, "partition": -1, "timestamp": 5}


def test_real_librdkafka_takes_the_unset_values() -> None:
    producer = KafkaClients(KafkaSettings(bootstrap_servers="")).producer({"log_level": 0})
    assert try_produce(producer, "t", b"v", None, headers=[("h", b"1")]) is True
    assert try_produce(producer, "t", b"v", None, partition=0, timestamp_ms=None) is True
    assert try_produce(producer, "t", b"v", None, timestamp_ms=1) is True
    assert len(producer) == 3
    producer.purge()


def test_try_produce_answers_false_on_a_full_queue_after_one_poll() -> None:
    producer = ScriptedProducer(full=5)
    assert try_produce(producer, "t", b"v", None) is False  # type: ignore[arg-type]
    assert producer.polls == [0] and producer.produced == []


def test_a_refused_record_is_a_produce_error_with_librdkafkas_error() -> None:
    # A real librdkafka producer with no brokers: the size check fails locally.
    producer = KafkaClients(KafkaSettings(bootstrap_servers="")).producer(
        {"message.max.bytes": 1000, "log_level": 0}
    )
    with pytest.raises(ProduceError, match=r"'big' partition 0.*MSG_SIZE_TOO_LARGE") as info:
        try_produce(producer, "big", b"x" * 5000, None, partition=0)
    assert info.value.error.code() == RdKafkaError.MSG_SIZE_TOO_LARGE
    assert isinstance(info.value, DelayBridgeError)


def test_produce_blocking_waits_for_room() -> None:
    producer = ScriptedProducer(full=3)
    produce_blocking(producer, "t", b"v", None, timeout_s=5)  # type: ignore[arg-type]
    assert len(producer.produced) == 1 and len(producer.polls) >= 3


def test_produce_blocking_gives_up_at_its_deadline() -> None:
    producer = ScriptedProducer(full=10**9)
    with pytest.raises(ProduceError, match="stayed full") as info:
        produce_blocking(producer, "t", b"v", None, timeout_s=0.05)  # type: ignore[arg-type]
    assert info.value.code == "_QUEUE_FULL"


def test_produce_and_wait_returns_where_the_record_landed() -> None:
    ref = produce_and_wait(ScriptedProducer(), "t", b"v", b"k")  # type: ignore[arg-type]
    assert ref == RecordRef("t", 2, 41) and str(ref) == "t/2/41"


def test_produce_and_wait_raises_the_delivery_error() -> None:
    failed = RdKafkaError(RdKafkaError._MSG_TIMED_OUT)
    with pytest.raises(ProduceError, match="produce to 't'") as info:
        produce_and_wait(ScriptedProducer(report=failed), "t", b"v")  # type: ignore[arg-type]
    assert info.value.code == "_MSG_TIMED_OUT" and info.value.error is failed


def test_produce_and_wait_times_out_without_a_report() -> None:
    with pytest.raises(ProduceError, match="no acknowledgement") as info:
        produce_and_wait(ScriptedProducer(ack=False), "t", b"v", timeout_s=0.05)  # type: ignore[arg-type]
    assert info.value.code == "_TIMED_OUT"


def test_wrap_keeps_the_code_and_context_adds_where() -> None:
    err = RdKafkaError(RdKafkaError.TOPIC_AUTHORIZATION_FAILED)
    wrapped = wrap(KafkaException(err), "create topic 'x'")
    assert wrapped.code == "TOPIC_AUTHORIZATION_FAILED" and wrapped.error is err
    assert str(wrapped).startswith("create topic 'x': ")
    placed = wrapped.context("at b:9092")
    assert str(placed).startswith("at b:9092: create topic 'x': ")
    assert placed.code == wrapped.code and placed.error is err
    assert wrap(KafkaException("plain"), "op").code is None
