"""A waiting replace survives ``kill -9`` (real broker, ``delaybridge run`` as a child).

Replaces wait in memory, in one table per process (``timerlog/replace_waits.py``). The
schedule "order" is stored, its replace goes round the cancel topic and the feed's
position (with ``replay_from``) is saved; then the sidecar is killed. While it is down,
an *older* copy of "order" (sent before it, due sooner) lands in another partition, as
from a lagging producer. The restarted sidecar reads the replace again from
``replay_from`` before it ingests anything, so the older copy is replaced: only the new
schedule is delivered, at its own time.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from delaybridge.settings import Settings
from tests.integration.sidecar.harness import SubprocessSidecar, Topics, Watcher, native, now_ms
from tests.integration.sidecar.observe import alive, this_run
from tests.support import wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def _replay_saved(data: Path) -> bool:
    for path in data.glob("cancel-feed*.json"):
        try:
            if json.loads(path.read_text()).get("replay_from"):
                return True
        except (OSError, ValueError):
            continue
    return False


def test_a_waiting_replace_takes_an_older_copy_sent_while_the_sidecar_was_down(
    kafka: Any,
    topics: Topics,
    watcher: Watcher,
    tmp_path: Path,
    make_settings: Callable[..., Settings],
) -> None:
    target = topics.targets[0]
    settings = make_settings(kafka={"instance_id": "replace-kill9"})
    side = SubprocessSidecar(settings, tmp_path)
    side.start()
    side.wait_log("assigned", 60)
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
    sent_ms = now_ms()
    new = native(target, "order", ("delay-ms", "8000"))
    producer.produce(topics.delay, b"new", b"k", headers=new, partition=0, timestamp=sent_ms)
    producer.flush(10)

    def saved() -> bool:
        alive(side)
        return _replay_saved(settings.store.data_dir)

    wait_until(saved, 60, "the replace applied and the feed's replay position saved")
    side.kill9()
    old = native(target, "order", ("delay-ms", "2000"))
    producer.produce(
        topics.delay, b"old", b"k", headers=old, partition=1, timestamp=sent_ms - 1_000
    )
    producer.flush(10)
    side.start()
    wait_until(lambda: "assigned" in this_run(side), 60, "the restarted sidecar assigned")
    watcher.until(lambda a: any(x.value == b"new" for x in a), 60, "the new schedule")
    watcher.settle(3.0)
    alive(side)
    assert [(a.id, a.value) for a in watcher.arrivals] == [("order", b"new")]
    assert all(a.timestamp_ms >= a.due_ms for a in watcher.arrivals)  # never early
    assert side.terminate(30) == 0
