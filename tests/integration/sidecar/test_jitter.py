"""``delay-jitter`` end to end on a real broker: a herd due at one instant is spread over
the window that follows it, never before it, by a hash of each id (contract/jitter.py).

Pass criteria for a herd of :data:`HERD` messages due at the same millisecond with a
:data:`JITTER_MS` jitter: 0 lost, 0 duplicates, 0 early (each arrival's timestamp at or
after its jittered due time); each arrival's ``delay-due-ms`` is exactly the asked time
plus ``spread_ms(id, jitter)``; each of the window's 1-s buckets holds 25 % ± 5 % of the
herd; all delivered within 10 s of the window's end.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from delaybridge.contract.jitter import spread_ms
from tests.integration.sidecar.harness import (
    InProcessSidecar,
    Topics,
    Watcher,
    native,
    now_ms,
    produce,
)
from tests.kafka_cluster import RecordWithHeaders

pytestmark = pytest.mark.kafka

HERD = 2_000
JITTER_MS = 4_000


def test_a_herd_is_spread_over_the_window_never_early(
    kafka: Any, topics: Topics, sidecar: InProcessSidecar, watcher: Watcher
) -> None:
    orders = topics.targets[0]
    asked = now_ms() + 3_000
    timing = [("deliver-at-ms", str(asked)), ("delay-jitter", f"{JITTER_MS}ms")]
    records: list[RecordWithHeaders] = [
        (f"c-{i % 50}".encode(), b"close", native(orders, f"herd-{i:05d}", *timing))
        for i in range(HERD)
    ]
    produce(kafka.bootstrap_servers, topics.delay, records)
    end = asked + JITTER_MS

    def herd(arrivals: list[Any]) -> int:
        return len({a.id for a in arrivals if a.id.startswith("herd-")})

    watcher.until(lambda a: herd(a) >= HERD, (end - now_ms()) / 1000 + 10, "the whole herd")
    watcher.settle(1.0)
    arrivals = [a for a in watcher.arrivals if a.id.startswith("herd-")]
    duplicates = len(arrivals) - len({a.id for a in arrivals})
    wrong_due = [a.id for a in arrivals if a.due_ms != asked + spread_ms(a.id, JITTER_MS)]
    early = [a.id for a in arrivals if a.timestamp_ms < a.due_ms]
    buckets = Counter((a.due_ms - asked) // 1_000 for a in arrivals)
    shares = {b: n / HERD for b, n in sorted(buckets.items())}
    assert duplicates == 0 and not wrong_due and not early, (duplicates, wrong_due[:5], early[:5])
    assert sorted(buckets) == [0, 1, 2, 3], shares
    assert all(0.20 <= share <= 0.30 for share in shares.values()), shares
    assert {a.topic for a in arrivals} == {orders}
    assert all("delay-jitter" not in a.headers for a in arrivals)


def test_a_bad_jitter_is_dead_lettered_naming_the_header(
    kafka: Any, topics: Topics, sidecar: InProcessSidecar, watcher: Watcher
) -> None:
    bad = native(topics.targets[0], "bad-jitter", ("delay-ms", "100"), ("delay-jitter", "later"))
    produce(kafka.bootstrap_servers, topics.delay, [(b"k", b"v", bad)])
    watcher.until(lambda a: any(x.topic == topics.dead_letter for x in a), 20, "the dead letter")
    (dead,) = [a for a in watcher.arrivals if a.topic == topics.dead_letter]
    assert dead.headers["delay-error"] == "bad-time"
    assert "delay-jitter" in dead.headers["delay-error-detail"]
