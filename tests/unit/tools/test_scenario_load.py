"""The scenario load's record of what it sent is read while it sends."""

from __future__ import annotations

import threading
from typing import Any, cast

from delaybridge.tools.scenario.load import ScheduleLoad, _Sent
from tests.fakes import FakeClients, FakeCluster


def test_what_was_sent_can_be_read_while_the_load_sends() -> None:
    # test_rolling_restart reads it mid-run; iterating the dict the sending thread adds
    # to failed there with "dictionary changed size during iteration" (2 runs in 7), and
    # so did copying it with list(items()) in one CI run (the copy is no atomic step:
    # allocating its tuples can run the garbage collector, and another thread).
    cluster = FakeCluster()
    cluster.create_topic("delay", 2)
    load = ScheduleLoad(cast(Any, FakeClients(cluster)), "delay", 2, "orders")
    for i in range(2_000):
        load._sent[f"m-{i}"] = _Sent(i)

    def send() -> None:  # what the load's thread does to it
        for i in range(2_000, 50_000):
            load._schedule(f"m-{i}", i)

    sender = threading.Thread(target=send)
    sender.start()
    reads = 0
    while sender.is_alive():
        assert len(load.scheduled()) >= 2_000
        reads += 1
    sender.join()
    assert reads > 0 and len(load.scheduled()) == 50_000
