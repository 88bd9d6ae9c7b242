"""Issue 14, acceptance: a ``delay-every: 2s`` series with ``delay-count: 5`` delivers
exactly 5 occurrences at their times across a ``kill -9`` of the sidecar (real broker).

The sidecar is killed the moment occurrence 2 reaches the target: its delivery may not
be marked durable yet, while occurrence 3 was already spawned and may be on disk. The
restart then delivers occurrence 2 again (at-least-once allows that one repeat) but must
not spawn a second occurrence 3 (``bridge/delivery/occurrences.py``); in exactly-once mode a
read_committed consumer sees each occurrence once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from delaybridge.bridge.workers.identity import worker_count
from delaybridge.settings import Settings
from tests.integration.sidecar.harness import (
    Arrival,
    SubprocessSidecar,
    Topics,
    Watcher,
    now_ms,
    produce,
)
from tests.integration.sidecar.observe import alive, http, settled, this_run
from tests.support import wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.slow]
#: Lateness allowed to an occurrence not due while the sidecar was down (tick 100 ms,
#: a loaded 2-core machine).
ON_TIME_MS = 1_500
#: After the restart reports its assignment it still reopens the store (and, exactly
#: once, aborts the killed transaction): occurrences due this soon after are exempt
#: from the lateness bound (never early and counted once all the same).
SETTLING_MS = 3_000


@pytest.mark.parametrize("exactly_once", [False, True], ids=["at-least-once", "exactly-once"])
def test_a_series_of_5_survives_kill9(
    kafka: Any,
    topics: Topics,
    watcher: Watcher,
    tmp_path: Path,
    make_settings: Callable[..., Settings],
    exactly_once: bool,
) -> None:
    orders = topics.targets[1]  # one partition: arrivals in order
    settings = make_settings(
        kafka={"instance_id": "series-0"}, delivery={"exactly_once": exactly_once}
    )
    side = SubprocessSidecar(settings, tmp_path)
    side.start()
    client = http(side)
    workers = worker_count(settings)
    wait_until(
        lambda: settled(client, topics.delay, 3, workers),
        90,
        "the pod's workers sharing the delay topic",
        detail=side.tail,
    )
    headers: list[tuple[str, str | bytes | None]] = [
        ("delay-target-topic", orders),
        ("delay-every", "2s"),
        ("delay-count", "5"),
        ("delay-id", "beat"),
    ]
    produce(kafka.bootstrap_servers, topics.delay, [(b"k", b"beat", headers)])

    def occurrence(n: int) -> Callable[[list[Arrival]], bool]:
        def arrived(arrivals: list[Arrival]) -> bool:
            alive(side)
            return any(a.headers.get("delay-occurrence") == str(n) for a in arrivals)

        return arrived

    watcher.until(occurrence(2), 60, "occurrence 2 delivered")
    side.kill9()
    down_ms = now_ms()
    side.start()
    wait_until(lambda: "assigned" in this_run(side), 60, "the restarted sidecar assigned")
    back_ms = now_ms()
    watcher.until(occurrence(5), 60, "occurrence 5 delivered")
    watcher.settle(5.0)  # a sixth, or a doubled series, would show up by now
    alive(side)

    beats = [a for a in watcher.arrivals if a.id == "beat"]
    counts = Counter(int(a.headers["delay-occurrence"]) for a in beats)
    assert set(counts) == {1, 2, 3, 4, 5}, counts
    if exactly_once:
        assert list(counts.values()) == [1] * 5, counts
    else:  # only the occurrence in flight at the kill may come again
        assert all(n == 1 for k, n in counts.items() if k != 2), counts
    first = min(a.due_ms for a in beats)
    for a in beats:
        k = int(a.headers["delay-occurrence"])
        assert a.due_ms == first + 2_000 * (k - 1), "fixed rate from the first due time"
        assert a.timestamp_ms >= a.due_ms, f"occurrence {k} delivered early"
        if not down_ms - ON_TIME_MS <= a.due_ms <= back_ms + SETTLING_MS:
            assert a.timestamp_ms - a.due_ms <= ON_TIME_MS, f"occurrence {k} late"
        assert a.value == b"beat" and a.key == b"k"
    assert side.terminate(30) == 0
