"""``delay-expire-after`` on a real broker: messages that fall due while the sidecar is
down come back after their deadline as dead letters (``expired``), not late deliveries.

A sidecar stores 20 messages due in 2 s that expire 1 s after due (header), 20 due at
the same time that expire after an hour (header), and 10 for a topic whose default
(``delivery.expire_after_ms``) is 1 s. It stops (SIGTERM's path) before they are due and
starts again once the short deadlines have passed. Pass criteria: the 20 long-lived
delivered, each once, never early; the 30 short-lived dead-lettered as ``expired`` with
their ``delay-origin``, none delivered to its target; 0 lost.
"""

from __future__ import annotations

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
from tests.kafka_cluster import RecordWithHeaders
from tests.support import wait_until

pytestmark = pytest.mark.kafka


def test_messages_past_their_deadline_after_a_downtime_are_dead_lettered_as_expired(
    kafka: Any, topics: Topics, make_settings: Callable[..., Settings], watcher: Watcher
) -> None:
    orders, reminders = topics.targets
    settings = make_settings(delivery={"expire_after_ms": {reminders: 1_000}})
    with InProcessSidecar.start(settings) as side:
        due = now_ms() + 4_000  # from a ready sidecar: stored and stopped well before
        at = ("deliver-at-ms", str(due))
        records: list[RecordWithHeaders] = []
        records += [
            (b"k", b"v", native(orders, f"short-{i}", at, ("delay-expire-after", "1s")))
            for i in range(20)
        ]
        records += [
            (b"k", b"v", native(orders, f"long-{i}", at, ("delay-expire-after", "1h")))
            for i in range(20)
        ]
        records += [(b"k", b"v", native(reminders, f"default-{i}", at)) for i in range(10)]
        produce(kafka.bootstrap_servers, topics.delay, records)

        def stored() -> int:
            return sum(p.store.stats().pending for p in list(side.service.partitions))

        side.wait_for(lambda: stored() == 50, 30, "the 50 messages stored")
    assert now_ms() < due, "stopped after the messages fell due: the machine is too slow"
    wait_until(lambda: now_ms() > due + 2_500, 10, "the short deadlines passed")
    with InProcessSidecar.start(settings):
        watcher.until(lambda a: len(a) >= 50, 60, "50 outcomes (deliveries and dead letters)")
        watcher.settle(2.0)
    delivered = [a for a in watcher.arrivals if a.topic != topics.dead_letter]
    dead = [a for a in watcher.arrivals if a.topic == topics.dead_letter]
    assert sorted(a.id for a in delivered) == sorted(f"long-{i}" for i in range(20))
    assert all(a.timestamp_ms >= a.due_ms for a in delivered)
    expected_dead = [f"short-{i}" for i in range(20)] + [f"default-{i}" for i in range(10)]
    assert sorted(a.id for a in dead) == sorted(expected_dead)
    assert {a.headers["delay-error"] for a in dead} == {"expired"}
    assert all(a.headers["delay-origin"].startswith(f"{topics.delay}/") for a in dead)
    assert all("delaybridge-expire-at" not in a.headers for a in watcher.arrivals)
