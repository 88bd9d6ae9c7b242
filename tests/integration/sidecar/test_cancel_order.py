"""A cancel takes only the messages with its id sent before it, on a real broker.

The cancel goes round through the cancel topic while the message re-sent after it is
stored at once; before issue 10 the round trip let the cancel take the new message too,
and a cancel for an id already delivered waited and took the next message with the id.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.sidecar.harness import (
    InProcessSidecar,
    Topics,
    Watcher,
    native,
    now_ms,
    produce,
    send,
)
from tests.support import wait_until

pytestmark = pytest.mark.kafka

H = list[tuple[str, str | bytes | None]]
CANCEL: H = [("delay-cancel", "order")]


def _values(watcher: Watcher, id: str) -> list[bytes | None]:
    return [a.value for a in watcher.arrivals if a.id == id]


def test_cancel_then_resend_delivers_only_the_new_message(
    kafka: Any, topics: Topics, sidecar: InProcessSidecar, watcher: Watcher
) -> None:
    target = topics.targets[0]
    boot = kafka.bootstrap_servers
    old = native(target, "order", ("delay-ms", "4000"))
    send(boot, topics.delay, old, value=b"old", partition=0)
    # Same partition, one batch: the offsets say the cancel came between the two.
    new = native(target, "order", ("delay-ms", "1500"))
    produce(boot, topics.delay, [(b"k", b"c", CANCEL), (b"k", b"new", new)], 0)
    # Another id, across partitions: the resend is sent a clock tick after the cancel.
    other = native(target, "other", ("delay-ms", "4000"))
    send(boot, topics.delay, other, value=b"old", partition=1)
    send(boot, topics.delay, [("delay-cancel", "other")], partition=2)
    after_cancel = now_ms()
    wait_until(lambda: now_ms() > after_cancel, 5, "the clock to move past the cancel")
    again = native(target, "other", ("delay-ms", "1500"))
    send(boot, topics.delay, again, value=b"new", partition=0)
    watcher.until(
        lambda a: {x.id for x in a} >= {"order", "other"}, 30, "both rescheduled messages"
    )
    watcher.settle(5.0)  # past the old messages' due time
    assert _values(watcher, "order") == [b"new"]
    assert _values(watcher, "other") == [b"new"]


def test_a_stale_cancel_does_not_touch_a_later_message(
    kafka: Any, topics: Topics, sidecar: InProcessSidecar, watcher: Watcher
) -> None:
    target = topics.targets[0]
    boot = kafka.bootstrap_servers
    send(boot, topics.delay, native(target, "order", ("delay-ms", "100")), value=b"first")
    watcher.until(lambda a: "order" in {x.id for x in a}, 20, "the first message")
    send(boot, topics.delay, CANCEL, partition=2)  # too late: nothing left to cancel
    after_cancel = now_ms()
    wait_until(lambda: now_ms() > after_cancel, 5, "the clock to move past the cancel")
    later = native(target, "order", ("delay-ms", "1000"))
    send(boot, topics.delay, later, value=b"second", partition=1)
    watcher.until(lambda a: len(_values(watcher, "order")) >= 2, 20, "the later message")
    assert _values(watcher, "order") == [b"first", b"second"]
    registry = sidecar.service.metrics.registry
    assert registry.get_sample_value("delaybridge_cancelled_total") == 0.0
