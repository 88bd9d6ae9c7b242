"""The scenario reader (tools/scenario/arrivals.py) on a real broker: a reopen reads on
from where the old consumer stood, neither skipping nor reading a record twice."""

from __future__ import annotations

from typing import Any

import pytest

from delaybridge.connectors import KafkaClients, KafkaSettings
from delaybridge.tools.scenario.arrivals import ArrivalLog
from tests.integration.sidecar.harness import produce
from tests.support import wait_until

pytestmark = pytest.mark.kafka


def _delivery(n: int) -> tuple[bytes, bytes, list[tuple[str, str | bytes | None]]]:
    headers: list[tuple[str, str | bytes | None]] = [
        ("delay-id", f"m-{n}"),
        ("delay-due-ms", "1000"),
        ("delay-origin", f"delay/{n % 2}/{n}"),
    ]
    return b"k", b"v", headers


def test_a_reopened_reader_reads_on_without_gaps_or_repeats(kafka: Any) -> None:
    topic = kafka.create_topic("arrivals", partitions=2)
    arrivals = ArrivalLog(
        KafkaClients(KafkaSettings(bootstrap_servers=kafka.bootstrap_servers)), [topic]
    )
    try:
        produce(kafka.bootstrap_servers, topic, [_delivery(n) for n in range(10)])
        wait_until(lambda: len(arrivals) == 10, 30, "the first 10 read")
        arrivals.reopen()
        produce(kafka.bootstrap_servers, topic, [_delivery(n) for n in range(10, 25)])
        wait_until(lambda: len(arrivals) >= 25, 30, "the next 15 read by the new consumer")
        ids = [d.id for d in arrivals.records()]
        assert sorted(ids) == sorted(f"m-{n}" for n in range(25)), ids
    finally:
        arrivals.close()
