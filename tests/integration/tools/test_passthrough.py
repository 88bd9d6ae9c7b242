"""The passthrough forwarder (the benchmark's ceiling) against a real broker."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from delaybridge.connectors import KafkaSettings
from delaybridge.errors import DelayBridgeError
from delaybridge.tools.passthrough import run_passthrough

N = 3_000


def fill(
    bootstrap: str, topic: str, n: int
) -> set[tuple[bytes | None, bytes | None, tuple[Any, ...]]]:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    sent = set()
    for i in range(n):
        key = None if i % 100 == 7 else f"k{i}".encode()
        value = None if i % 100 == 9 else f"value-{i}".encode() * 3
        headers: list[tuple[str, str | bytes | None]] = [
            ("delay-ms", b"1000"),
            ("n", str(i).encode()),
        ]
        producer.produce(topic, value, key, headers=headers)
        sent.add((key, value, tuple(headers)))
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0, f"could not fill {topic}"
    return sent


def read_all(
    bootstrap: str, topic: str, partitions: int, n: int, timeout_s: float = 30
) -> list[Any]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"check-{topic}", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[Any] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(got) < n and time.monotonic() < deadline:
            for msg in consumer.consume(1000, 0.2):
                assert msg.error() is None, msg.error()
                got.append(msg)
    finally:
        consumer.close()
    return got


@pytest.mark.kafka
def test_forwards_key_value_headers_unchanged(kafka: Any) -> None:
    src = kafka.create_topic("pt-src", partitions=3)
    dst = kafka.create_topic("pt-dst", partitions=2)
    sent = fill(kafka.bootstrap_servers, src, N)
    seen: list[int] = []

    cluster = KafkaSettings(bootstrap_servers=kafka.bootstrap_servers)
    result = run_passthrough(cluster, src, dst, N, 60, progress=seen.append)

    assert result["messages"] == N
    assert result["messages_per_s"] > 0 and result["seconds"] > 0
    assert result["compression_type"] == "lz4"
    assert seen and seen[-1] == N
    got = read_all(kafka.bootstrap_servers, dst, 2, N)
    assert len(got) == N  # nothing lost, and (below) nothing extra or changed
    assert {(m.key(), m.value(), tuple(m.headers() or ())) for m in got} == sent
    # Keyed records: the same key always lands in the same target partition.
    partition_of: dict[bytes, int] = {}
    for m in got:
        if m.key() is not None:
            assert partition_of.setdefault(m.key(), m.partition()) == m.partition()


@pytest.mark.kafka
def test_times_out_naming_how_far_it_got(kafka: Any) -> None:
    src = kafka.create_topic("pt-short", partitions=1)
    dst = kafka.create_topic("pt-short-dst")
    fill(kafka.bootstrap_servers, src, 10)
    with pytest.raises(DelayBridgeError, match="forwarded 10, acknowledged 10 of 11"):
        run_passthrough(KafkaSettings(bootstrap_servers=kafka.bootstrap_servers), src, dst, 11, 4)


def test_rejects_a_non_positive_count() -> None:
    with pytest.raises(DelayBridgeError, match="n_messages"):
        run_passthrough(KafkaSettings(bootstrap_servers="127.0.0.1:1"), "a", "b", 0, 1)
