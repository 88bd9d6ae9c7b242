from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from delaybridge.connectors.localkafka import LocalKafka
from delaybridge.settings import Settings
from tests.integration.sidecar.harness import InProcessSidecar, Topics, Watcher, settings_for
from tests.kafka_backends import start_local
from tests.kafka_cluster import KafkaCluster


@pytest.fixture
def topics(kafka: Any) -> Topics:
    return Topics(
        delay=kafka.create_topic("delay", partitions=3),
        targets=[kafka.create_topic("orders", partitions=2), kafka.create_topic("reminders")],
        dead_letter=kafka.create_topic("dlt"),
        cancels=kafka.create_topic("cancels"),
    )


@pytest.fixture
def make_settings(kafka: Any, topics: Topics, tmp_path: Path) -> Callable[..., Settings]:
    """Settings for a sidecar on this test's topics, data dir and group; overrides merge."""

    def make(**overrides: Any) -> Settings:
        return settings_for(
            kafka.bootstrap_servers, topics, tmp_path / "data", f"g-{topics.delay}", **overrides
        )

    return make


@pytest.fixture
def sidecar(make_settings: Callable[..., Settings]) -> Iterator[InProcessSidecar]:
    with InProcessSidecar.start(make_settings(delivery={"missing_topic_retry_ms": 3_000})) as side:
        yield side


@pytest.fixture
def watcher(kafka: Any, topics: Topics) -> Iterator[Watcher]:
    w = Watcher(kafka.bootstrap_servers, [*topics.targets, topics.dead_letter])
    yield w
    w.close()


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[KafkaCluster]:
    """A broker for one test alone (a LocalKafka on free ports), which it may stop or
    freeze on purpose: the session's shared broker never does."""
    cluster = start_local(tmp_path / "kafka")
    try:
        yield cluster
    finally:
        broker = cluster.handle
        pid = broker.pid() if isinstance(broker, LocalKafka) else None
        if pid is not None:
            os.kill(pid, signal.SIGCONT)  # a frozen JVM cannot stop
        cluster.stop()
