"""The HTTP side on a real sidecar: the service's Control implementation, end to end."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from confluent_kafka import Producer

from delaybridge.bridge.http.server import HttpServer
from tests.http_client import Client, Reply
from tests.integration.sidecar.harness import InProcessSidecar, Topics, Watcher, settings_for
from tests.integration.sidecar.observe import metric, metric_reaches
from tests.support import wait_until

pytestmark = pytest.mark.kafka

TOKEN = "live-admin-token"


@pytest.fixture
def topics(kafka: Any) -> Topics:
    return Topics(
        delay=kafka.create_topic("http-delay", partitions=2),
        targets=[kafka.create_topic("http-orders")],
        dead_letter=kafka.create_topic("http-dlt"),
        cancels=kafka.create_topic("http-cancels"),
    )


@pytest.fixture
def live(kafka: Any, topics: Topics, tmp_path: Path) -> Iterator[tuple[InProcessSidecar, Client]]:
    settings = settings_for(
        kafka.bootstrap_servers,
        topics,
        tmp_path / "data",
        f"g-{topics.delay}",
        http={"port": 0, "admin_token": TOKEN},
    )
    sidecar = InProcessSidecar.start(settings)
    try:
        with HttpServer(settings.http, sidecar.service.control, sidecar.service.metrics) as server:
            yield sidecar, Client(server.port)
    finally:
        sidecar.stop()


def send(bootstrap: str, topics: Topics, id: str, delay_ms: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    headers: list[tuple[str, str | bytes | None]] = [
        ("delay-target-topic", topics.targets[0]),
        ("delay-ms", str(delay_ms)),
        ("delay-id", id),
    ]
    producer.produce(topics.delay, b"payload", id.encode(), headers=headers)
    assert producer.flush(10) == 0


def until(client: Client, method: str, path: str, status: int, timeout_s: float = 20) -> Reply:
    replies: list[Reply] = []

    def answered() -> bool:
        replies.append(client(method, path, TOKEN))
        return replies[-1].status == status

    def last() -> str:
        return f"last reply: {replies[-1].status} {replies[-1].body!r}"

    wait_until(answered, timeout_s, f"{method} {path} to answer {status}", detail=last)
    return replies[-1]


def test_lookup_cancel_and_metrics(
    kafka: Any, topics: Topics, live: tuple[InProcessSidecar, Client]
) -> None:
    _, client = live
    assert client("GET", "/healthz").status == 200
    assert until(client, "GET", "/readyz", 200).json() == {"ready": True}
    send(kafka.bootstrap_servers, topics, "live-1", 3_600_000)

    found = until(client, "GET", "/admin/messages/live-1", 200).json()
    assert (found["id"], found["target_topic"]) == ("live-1", topics.targets[0])
    pending = "delaybridge_pending_messages"
    metric_reaches(client, pending, 1, 20, target_topic=topics.targets[0])
    assert metric(client, "delaybridge_enqueued_total", delay_topic=topics.delay) == 1
    stats = client("GET", "/admin/stats", TOKEN).json()
    assert sum(p["pending"] for p in stats["partitions"]) == 1

    reply = client("DELETE", "/admin/messages/live-1", TOKEN)
    assert reply.status == 200 and reply.json()["id"] == "live-1", reply.body
    until(client, "GET", "/admin/messages/live-1", 404)
    assert client("GET", "/admin/stats", TOKEN).status == 200


def test_pause_dequeue_holds_deliveries_until_resume(
    kafka: Any, topics: Topics, live: tuple[InProcessSidecar, Client]
) -> None:
    _, client = live
    until(client, "GET", "/readyz", 200)
    watcher = Watcher(kafka.bootstrap_servers, topics.targets)
    try:
        reply = client("POST", "/admin/pause?direction=dequeue", TOKEN)
        assert reply.json() == {"paused": ["dequeue"]}
        assert metric(client, "delaybridge_paused", direction="dequeue") == 1
        send(kafka.bootstrap_servers, topics, "held-1", 200)
        until(client, "GET", "/admin/messages/held-1", 200)
        # Due after 200 ms; paused, so it must still be pending well after that.
        watcher.settle(1.5)
        assert watcher.arrivals == []
        assert client("GET", "/admin/messages/held-1", TOKEN).status == 200

        reply = client("POST", "/admin/resume?direction=dequeue", TOKEN)
        assert reply.json() == {"paused": []}
        watcher.until(lambda a: len(a) == 1, 20, "the held message after resume")
        assert watcher.arrivals[0].id == "held-1"
        until(client, "GET", "/admin/messages/held-1", 404)
    finally:
        watcher.close()


def test_admin_needs_the_token_on_the_real_service(live: tuple[InProcessSidecar, Client]) -> None:
    _, client = live
    assert client("GET", "/admin/stats").status == 401
    body = client("GET", "/admin/stats", TOKEN).body
    assert "partitions" in orjson.loads(body)
