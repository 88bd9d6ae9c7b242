"""Replace by id on a real broker (DESIGN §2): a schedule whose id and target are pending
replaces them, latest sent wins, whichever delay-topic partition each landed in;
``delay-on-duplicate: keep`` keeps both."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.sidecar.harness import (
    InProcessSidecar,
    Topics,
    Watcher,
    native,
    now_ms,
    send,
)
from tests.support import wait_until

pytestmark = pytest.mark.kafka


def _tick() -> None:
    """Let the clock move, so the next record is sent strictly later."""
    before = now_ms()
    wait_until(lambda: now_ms() > before, 5, "the clock to move")


def test_replace_in_one_and_across_partitions_and_keep_both(
    kafka: Any, topics: Topics, sidecar: InProcessSidecar, watcher: Watcher
) -> None:
    target = topics.targets[0]
    boot = kafka.bootstrap_servers
    send(
        boot, topics.delay, native(target, "same", ("delay-ms", "5000")), value=b"old", partition=0
    )
    send(
        boot,
        topics.delay,
        native(target, "across", ("delay-ms", "5000")),
        value=b"old",
        partition=1,
    )
    send(
        boot, topics.delay, native(target, "both", ("delay-ms", "1000")), value=b"one", partition=0
    )
    _tick()
    moved_at = now_ms()
    send(
        boot, topics.delay, native(target, "same", ("delay-ms", "1500")), value=b"new", partition=0
    )
    send(
        boot,
        topics.delay,
        native(target, "across", ("delay-ms", "1500")),
        value=b"new",
        partition=2,
    )
    keep = [*native(target, "both", ("delay-ms", "1500")), ("delay-on-duplicate", "keep")]
    send(boot, topics.delay, keep, value=b"two", partition=1)
    watcher.until(lambda a: len(a) >= 4, 30, "the new messages and both kept ones")
    watcher.settle(6.0)  # past the replaced messages' due time
    got = sorted((a.id, a.value) for a in watcher.arrivals)
    assert got == [
        ("across", b"new"),
        ("both", b"one"),
        ("both", b"two"),
        ("same", b"new"),
    ]
    for a in watcher.arrivals:
        assert a.timestamp_ms >= a.due_ms  # never early
        if a.value == b"new":  # on its new time, not the old one
            assert moved_at + 1_500 <= a.due_ms < moved_at + 3_000
    registry = sidecar.service.metrics.registry
    wait_until(
        lambda: registry.get_sample_value("delaybridge_replaced_total") == 2.0,
        10,
        "the two replaces counted",
    )
    assert registry.get_sample_value("delaybridge_cancel_unknown_total") == 0.0
