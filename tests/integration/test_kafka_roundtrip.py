"""Produce and consume through a real Kafka 4.x broker.

The first tests use the session's cluster, whatever backend provides it. The last one
always runs Kafka in a testcontainers container, and says so in the test output, so a
run shows a produce/consume through a container even when the session uses another
backend.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.kafka_backends import start_backend
from tests.kafka_cluster import Backend, KafkaCluster

pytestmark = pytest.mark.kafka


def test_round_trip_keeps_keys_values_headers_and_order(kafka: KafkaCluster) -> None:
    topic = kafka.create_topic("roundtrip")
    producer = kafka.producer()
    for i in range(20):
        producer.produce(topic, key=f"k{i}", value=f"v{i}", headers=[("n", str(i).encode())])
    assert producer.flush(30) == 0, f"20 records to {topic} not delivered within 30 s"
    got = kafka.consume(topic, 20, timeout_s=30)
    assert [(m.key(), m.value(), m.headers()) for m in got] == [
        (f"k{i}".encode(), f"v{i}".encode(), [("n", str(i).encode())]) for i in range(20)
    ]
    assert [m.offset() for m in got] == list(range(20))


def test_create_topic_names_are_unique_and_partitions_ready(kafka: KafkaCluster) -> None:
    a = kafka.create_topic("same", partitions=3)
    b = kafka.create_topic("same", partitions=3)
    assert a != b and a.startswith("same-") and b.startswith("same-")
    assert kafka.partitions(a) == [0, 1, 2]
    # Keyed records spread over all three partitions and all come back.
    reports = kafka.produce(a, [(f"key-{i}".encode(), b"x") for i in range(30)])
    assert {m.partition() for m in reports} == {0, 1, 2}
    assert len(kafka.consume(a, 30, timeout_s=30)) == 30


def test_topic_config_is_applied(kafka: KafkaCluster) -> None:
    from confluent_kafka.admin import ConfigResource, ResourceType

    topic = kafka.create_topic("compacted", config={"cleanup.policy": "compact"})
    resource = ConfigResource(ResourceType.TOPIC, topic)
    admin = kafka.admin()  # kept alive: the future fails if its client is destroyed
    configs = admin.describe_configs([resource])[resource].result(timeout=30)
    assert configs["cleanup.policy"].value == "compact"


def test_wait_for_times_out_naming_what_it_waited_for(kafka: KafkaCluster) -> None:
    with pytest.raises(TimeoutError, match="a condition that never holds"):
        kafka.wait_for(lambda: False, 0.3, "a condition that never holds")
    assert kafka.wait_for(lambda: 42, 1, "an answer") == 42


@pytest.fixture(scope="module")
def container_kafka(
    kafka: KafkaCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KafkaCluster]:
    """The session's cluster if it is a container; else one started for this module."""
    if kafka.backend is Backend.CONTAINER:
        yield kafka
        return
    own = start_backend(Backend.CONTAINER, tmp_path_factory.mktemp("container"))
    yield own
    own.stop()


@pytest.mark.container
def test_round_trip_through_a_testcontainers_container(
    container_kafka: KafkaCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    from testcontainers.core.container import DockerContainer

    container = container_kafka.handle
    assert isinstance(container, DockerContainer)
    container.reload()
    assert container.status == "running"
    got = container_kafka.round_trip("in-container", n=5)
    with capsys.disabled():
        print(
            f"\n  produced and consumed {len(got)} records through topic {got[0].topic()} "
            f"in {container_kafka.description}"
        )
