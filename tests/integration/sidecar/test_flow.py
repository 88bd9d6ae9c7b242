"""Flow control, rate limits and secrets, on a real broker."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from tests.integration.sidecar.harness import (
    InProcessSidecar,
    Topics,
    Watcher,
    now_ms,
    produce,
    settings_for,
)

pytestmark = pytest.mark.kafka


def _records(topics: Topics, n: int, prefix: str, due_ms: int) -> list[Any]:
    return [
        (
            b"k",
            b"v",
            [
                ("delay-target-topic", topics.targets[1]),
                ("deliver-at-ms", str(due_ms)),
                ("delay-id", f"{prefix}-{i}"),
            ],
        )
        for i in range(n)
    ]


def test_ingest_pauses_over_the_pending_limit_and_resumes_by_itself(
    kafka: Any, topics: Topics, watcher: Watcher, tmp_path: Path
) -> None:
    settings = settings_for(
        kafka.bootstrap_servers,
        topics,
        tmp_path / "d",
        f"g-{topics.delay}",
        store={"max_pending_messages": 50},
    )
    side = InProcessSidecar.start(settings)
    try:
        produce(kafka.bootstrap_servers, topics.delay, _records(topics, 400, "fc", now_ms() + 1500))
        watcher.until(lambda a: len({x.id for x in a}) >= 400, 60, "all 400 despite the limit")
        registry = side.service.metrics.registry
        pauses = registry.get_sample_value("delaybridge_backpressure_pauses_total")
        assert pauses is not None and pauses >= 1, "flow control never paused ingest"
        assert all(a.timestamp_ms >= a.due_ms for a in watcher.arrivals)
    finally:
        side.stop()


def test_per_topic_rate_limit_spreads_deliveries(
    kafka: Any, topics: Topics, watcher: Watcher, tmp_path: Path
) -> None:
    settings = settings_for(
        kafka.bootstrap_servers,
        topics,
        tmp_path / "d",
        f"g-{topics.delay}",
        delivery={"rate_limits_per_s": {topics.targets[1]: 100}},
    )
    side = InProcessSidecar.start(settings)
    try:
        produce(kafka.bootstrap_servers, topics.delay, _records(topics, 300, "rl", now_ms() - 1))
        watcher.until(lambda a: len(a) >= 300, 60, "all rate-limited deliveries")
        stamps = sorted(a.timestamp_ms for a in watcher.arrivals)
        # 300 at 100/s with one second saved up: at least ~2 s from first to last.
        assert stamps[-1] - stamps[0] >= 1_800, stamps[-1] - stamps[0]
    finally:
        side.stop()


def test_secrets_never_logged(
    kafka: Any, topics: Topics, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "hunter2-do-not-log"
    settings = settings_for(
        kafka.bootstrap_servers,
        topics,
        tmp_path / "d",
        f"g-{topics.delay}",
        kafka={"client": {"sasl.password": secret}},
        http={"admin_token": secret},
    )
    caplog.set_level(logging.DEBUG)
    side = InProcessSidecar.start(settings)
    side.stop()
    assert caplog.records, "nothing was logged at all"
    assert secret not in caplog.text
