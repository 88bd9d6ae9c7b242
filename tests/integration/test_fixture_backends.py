"""The fixture's backends themselves: each one works, and a dead broker fails fast.

These tests start their own brokers (never killing the session's): the local backend
always, the external backend pointed at the session's cluster, and a container for
the crash test. "Fails fast" means an error that names the topic and the address
within a bound, not a hang until pytest-timeout.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from delaybridge.errors import KafkaError
from tests.kafka_backends import BackendUnavailable, start_backend, start_cluster
from tests.kafka_cluster import Backend, KafkaCluster
from tests.support import free_port

pytestmark = pytest.mark.kafka


def test_local_backend_round_trips(tmp_path: Path) -> None:
    cluster = start_backend(Backend.LOCAL, tmp_path)
    try:
        assert cluster.backend is Backend.LOCAL
        assert cluster.bootstrap_servers.startswith("127.0.0.1:")
        got = cluster.round_trip("local-backend", n=10)
        assert (got[0].value() or b"").startswith(b"v0-")
    finally:
        cluster.stop()
    assert cluster.handle.pid() is None, "LocalKafka still running after stop()"


def test_external_backend_uses_the_named_cluster(
    kafka: KafkaCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DELAYBRIDGE_TEST_BACKEND", raising=False)
    monkeypatch.setenv("DELAYBRIDGE_TEST_BOOTSTRAP", kafka.bootstrap_servers)
    external, failures = start_cluster(tmp_path)
    assert (external.backend, failures) == (Backend.EXTERNAL, [])
    assert external.bootstrap_servers == kafka.bootstrap_servers
    topic = external.create_topic("external")
    external.produce(topic, [(b"k", b"through the external backend")])
    external.stop()  # must leave someone else's cluster running
    assert [m.value() for m in kafka.consume(topic, 1)] == [b"through the external backend"]


def test_external_backend_that_does_not_answer_is_an_error_not_a_fallback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nobody = f"127.0.0.1:{free_port()}"
    monkeypatch.delenv("DELAYBRIDGE_TEST_BACKEND", raising=False)
    monkeypatch.setenv("DELAYBRIDGE_TEST_BOOTSTRAP", nobody)
    started = time.monotonic()
    with pytest.raises(BackendUnavailable) as caught:
        start_cluster(tmp_path)
    assert time.monotonic() - started < 30
    message = str(caught.value)
    assert nobody in message and "DELAYBRIDGE_TEST_BOOTSTRAP" in message
    assert "container" not in message  # nothing else was tried


def test_unknown_forced_backend_names_the_choices(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DELAYBRIDGE_TEST_BACKEND", "zookeeper")
    with pytest.raises(BackendUnavailable, match="external, container, local"):
        start_cluster(tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize(
    "backend", [Backend.LOCAL, pytest.param(Backend.CONTAINER, marks=pytest.mark.container)]
)
def test_killed_broker_fails_produce_and_consume_quickly(backend: Backend, tmp_path: Path) -> None:
    cluster = start_backend(backend, tmp_path)
    try:
        topic = cluster.create_topic("doomed")
        cluster.produce(topic, [(b"k", b"before the crash")])
        cluster.kill()

        started = time.monotonic()
        with pytest.raises(KafkaError) as produce_error:
            cluster.produce(topic, [(b"k", b"after the crash")], timeout_s=5)
        assert time.monotonic() - started < 20, "produce to a dead broker took too long"
        assert topic in str(produce_error.value)
        assert cluster.bootstrap_servers in str(produce_error.value)

        started = time.monotonic()
        with pytest.raises((KafkaError, TimeoutError)) as consume_error:
            cluster.consume(topic, 2, timeout_s=5)
        assert time.monotonic() - started < 20, "consume from a dead broker took too long"
        assert topic in str(consume_error.value)
    finally:
        cluster.stop()
