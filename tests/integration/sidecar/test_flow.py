"""Flow control, rate limits and secrets, on a real broker."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest

from delaybridge.settings import Settings
from tests.integration.sidecar.harness import (
    InProcessSidecar,
    Topics,
    Watcher,
    native,
    now_ms,
    produce,
)

pytestmark = pytest.mark.kafka


def _records(topics: Topics, n: int, prefix: str, due_ms: int) -> list[Any]:
    due = ("deliver-at-ms", str(due_ms))
    return [(b"k", b"v", native(topics.targets[1], f"{prefix}-{i}", due)) for i in range(n)]


def test_ingest_pauses_over_the_pending_limit_and_resumes_by_itself(
    kafka: Any, topics: Topics, watcher: Watcher, make_settings: Callable[..., Settings]
) -> None:
    with InProcessSidecar.start(make_settings(store={"max_pending_messages": 50})) as side:
        produce(kafka.bootstrap_servers, topics.delay, _records(topics, 400, "fc", now_ms() + 1500))
        watcher.until(lambda a: len({x.id for x in a}) >= 400, 60, "all 400 despite the limit")
        registry = side.service.metrics.registry
        pauses = registry.get_sample_value("delaybridge_backpressure_pauses_total")
        assert pauses is not None and pauses >= 1, "flow control never paused ingest"
        assert all(a.timestamp_ms >= a.due_ms for a in watcher.arrivals)


def test_per_topic_rate_limit_spreads_deliveries(
    kafka: Any, topics: Topics, watcher: Watcher, make_settings: Callable[..., Settings]
) -> None:
    limits = {"rate_limits_per_s": {topics.targets[1]: 100}}
    with InProcessSidecar.start(make_settings(delivery=limits)):
        produce(kafka.bootstrap_servers, topics.delay, _records(topics, 300, "rl", now_ms() - 1))
        watcher.until(lambda a: len(a) >= 300, 60, "all rate-limited deliveries")
        stamps = sorted(a.timestamp_ms for a in watcher.arrivals)
        # 300 at 100/s with one second saved up: at least ~2 s from first to last.
        assert stamps[-1] - stamps[0] >= 1_800, stamps[-1] - stamps[0]


def test_secrets_never_logged(
    make_settings: Callable[..., Settings], caplog: pytest.LogCaptureFixture
) -> None:
    secret = "hunter2-do-not-log"
    settings = make_settings(
        kafka={"client": {"sasl.password": secret}}, http={"admin_token": secret}
    )
    caplog.set_level(logging.DEBUG)
    with InProcessSidecar.start(settings):
        pass
    assert caplog.records, "nothing was logged at all"
    assert secret not in caplog.text
