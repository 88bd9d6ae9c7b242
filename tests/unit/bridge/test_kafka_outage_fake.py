"""The sidecar while Kafka is away, on the fakes: quiet logs, the gauge and /readyz.

Issue 25 item 3: with the broker stopped for 45 s the sidecar logged 36-40 ERROR and
20-22 WARNING lines a second (every reconnect of every client, twice: librdkafka's log
line and the error callback), and nothing said Kafka was away: ``/readyz`` stayed 200.
Here every client of the sidecar reports what librdkafka reports for each refused
reconnect (a FAIL log line and a ``_TRANSPORT`` error) ten times a second each.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError

from tests.unit.bridge.sidecar_kit import FakeSidecar

REFUSED = (
    "kafka-0:9092/bootstrap: Connect to ipv4#10.0.0.5:9092 failed: Connection refused "
    "(after 0ms in state CONNECT)"
)


def every_client(side: FakeSidecar) -> list[dict[str, Any]]:
    """The configuration of every client the sidecar built."""
    c = side.clients
    return [
        *(p.config for p in c.producers),
        *(r.config for r in c.consumers),
        *(a.config for a in c.admins),
    ]


def refuse_everyone(side: FakeSidecar) -> None:
    """One refused reconnect of every client, as librdkafka reports it."""
    for config in every_client(side):
        config["logger"].log(logging.ERROR, "%s [%s] %s", "FAIL", "rdkafka#client-1", REFUSED)
        config["error_cb"](KafkaError(KafkaError._TRANSPORT, REFUSED))


def sidecar_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        f"{r.levelname} {r.name}: {r.getMessage()}"
        for r in caplog.records
        if r.levelno >= logging.INFO and r.name.startswith("delaybridge.")
    ]


def reachable_gauge(side: FakeSidecar) -> float | None:
    value: float | None = side.service.metrics.registry.get_sample_value(
        "delaybridge_kafka_reachable"
    )
    return value


def test_45_s_away_is_one_line_a_summary_and_one_line_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    side = FakeSidecar(tmp_path)
    side.turns(3)
    assert side.service.control.ready() == (True, "")
    assert reachable_gauge(side) == 1
    assert len(every_client(side)) >= 5  # producer, group consumer, readers, admin

    caplog.set_level(logging.INFO)
    side.listener.listening = False
    for _ in range(450):  # 45 s, a turn every 100 ms
        refuse_everyone(side)
        side.turns(1, advance_ms=100)
    lines = sidecar_lines(caplog)
    assert len(lines) == 2, lines
    assert lines[0].startswith(
        "ERROR delaybridge.connectors.reachability.tracker: Kafka unreachable: no bootstrap "
        "server accepts connections (kafka-0:9092: Connection refused)"
    )
    assert lines[1].startswith(
        "WARNING delaybridge.connectors.reachability.tracker: Kafka still unreachable after 30 s"
    )
    ready, why = side.service.control.ready()
    assert not ready
    assert why.startswith("Kafka unreachable for 45 s: no bootstrap server accepts connections")
    assert side.service.control.healthy()  # liveness: the process is fine
    assert reachable_gauge(side) == 0

    caplog.clear()
    side.listener.listening = True
    side.turns(1, advance_ms=1_000)
    (back,) = sidecar_lines(caplog)
    assert back.startswith(
        "INFO delaybridge.connectors.reachability.tracker: Kafka reachable again after 46 s"
    )
    assert side.service.control.ready() == (True, "")
    assert reachable_gauge(side) == 1
    side.stop()


def test_a_fatal_client_error_still_stops_the_sidecar_while_kafka_is_away(
    tmp_path: Path,
) -> None:
    side = FakeSidecar(tmp_path)
    side.turns(3)
    side.listener.listening = False
    refuse_everyone(side)
    side.turns(1)
    assert not side.service.control.ready()[0]
    error_cb = side.producer.config["error_cb"]
    error_cb(KafkaError(KafkaError._FATAL, "out of order sequence", fatal=True))
    assert not side.service.control.healthy()
    assert side.service._stop.is_set()
    side.stop()
