"""``delay-cancel-prefix`` end to end on a real broker (issue 27): a bulk cancel by id
prefix in one delay-topic partition reaches the messages of every partition through the
cancel topic, and takes only those sent before it.

Pass criteria, for :data:`FAMILY` messages whose id has the prefix and :data:`OTHERS`
without it, spread over the delay topic's three partitions, then the prefix cancel in
one partition, then :data:`LATE` more with the prefix sent after it, all due at the same
time: **0** cancelled messages delivered, **0** lost among the others and the late ones,
**0** early, **0** duplicates. Over the cap (``cancels.prefix_confirm_above``) the record
is dead-lettered as ``prefix-over-cap`` and every message goes out.
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
    send,
)

pytestmark = pytest.mark.kafka

FAMILY = 300
OTHERS = 300
LATE = 50


def _messages(target: str, ids: list[str], due_ms: int) -> list[Any]:
    return [(id.encode(), b"v", native(target, id, ("deliver-at-ms", str(due_ms)))) for id in ids]


def test_a_prefix_cancel_takes_the_family_in_every_partition_and_nothing_else(
    kafka: Any, topics: Topics, sidecar: InProcessSidecar, watcher: Watcher
) -> None:
    orders = topics.targets[0]
    due = now_ms() + 6_000
    family = [f"tenant-a/{n:04d}" for n in range(FAMILY)]
    others = [f"tenant-b/{n:04d}" for n in range(OTHERS)]
    for partition in range(3):  # each partition holds some of both
        ids = family[partition::3] + others[partition::3]
        produce(kafka.bootstrap_servers, topics.delay, _messages(orders, ids, due), partition)
    send(kafka.bootstrap_servers, topics.delay, [("delay-cancel-prefix", "tenant-a/")], partition=2)
    late = [f"tenant-a/late-{n:03d}" for n in range(LATE)]  # sent after the cancel
    produce(kafka.bootstrap_servers, topics.delay, _messages(orders, late, due), 0)
    owed = set(others) | set(late)

    def have_owed(arrivals: list[Any]) -> bool:
        return owed <= {a.id for a in arrivals}

    watcher.until(have_owed, (due - now_ms()) / 1000 + 30, "every message not cancelled")
    watcher.settle(2.0)
    arrivals = [a for a in watcher.arrivals if a.topic == orders]
    ids = [a.id for a in arrivals]
    cancelled_delivered = sorted(set(ids) & set(family))
    lost = sorted(owed - set(ids))
    early = [a.id for a in arrivals if a.timestamp_ms < a.due_ms]
    duplicates = len(ids) - len(set(ids))
    assert (len(cancelled_delivered), len(lost), len(early), duplicates) == (0, 0, 0, 0), (
        cancelled_delivered[:5],
        lost[:5],
        early[:5],
    )
    assert len(set(ids)) == OTHERS + LATE


def test_a_prefix_over_the_cap_is_dead_lettered_and_cancels_nothing(
    kafka: Any, topics: Topics, make_settings: Callable[..., Settings], watcher: Watcher
) -> None:
    orders = topics.targets[0]
    due = now_ms() + 4_000
    ids = [f"bulk/{n:03d}" for n in range(20)]
    settings = make_settings(cancels={"prefix_confirm_above": 10})
    with InProcessSidecar.start(settings):
        produce(kafka.bootstrap_servers, topics.delay, _messages(orders, ids, due), 1)
        send(kafka.bootstrap_servers, topics.delay, [("delay-cancel-prefix", "bulk/")], partition=1)

        def settled(arrivals: list[Any]) -> bool:
            dead = any(a.topic == topics.dead_letter for a in arrivals)
            return dead and set(ids) <= {a.id for a in arrivals if a.topic == orders}

        watcher.until(settled, (due - now_ms()) / 1000 + 30, "the dead letter and all 20")
    (dead,) = [a for a in watcher.arrivals if a.topic == topics.dead_letter]
    assert dead.headers["delay-error"] == "prefix-over-cap"
    assert dead.headers["delay-cancel-prefix"] == "bulk/"
    assert "prefix_confirm_above" in dead.headers["delay-error-detail"]
    assert all(a.timestamp_ms >= a.due_ms for a in watcher.arrivals if a.topic == orders)
