"""Issue 10, acceptance: a replica down for twice the cancel grace misses no cancel.

Every replica reads the whole cancel topic. Before issue 10 its feed started at
``now - cancel_grace_ms`` at every start, so a replica down for longer than the grace
never saw the cancels published meanwhile for the messages it owns. Here two
``delaybridge run`` processes, each with its own data directory, share the group with
static membership (as the chart's pods do), so a replica's partitions wait for it while
it is down instead of moving; the cancel lands in a partition of the other replica,
which re-publishes it; the owner comes back three graces later and must apply it from
its saved feed position (``<data_dir>/cancel-feed.json``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from delaybridge.bridge.cancels.feed import POSITION_FILE
from delaybridge.settings import Settings
from tests.integration.sidecar.harness import (
    SubprocessSidecar,
    Topics,
    Watcher,
    native,
    now_ms,
    send,
)
from tests.integration.sidecar.observe import alive, high_watermarks, http, lookup, metric_reaches
from tests.support import wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

GRACE_MS = 2_000


def test_a_replica_down_for_twice_the_cancel_grace_misses_no_cancel(
    kafka: Any, topics: Topics, tmp_path: Path, make_settings: Callable[..., Settings]
) -> None:
    bootstrap = kafka.bootstrap_servers
    orders = topics.targets[0]

    def replica(name: str) -> SubprocessSidecar:
        settings = make_settings(
            # A session longer than the downtime: the partitions wait for their owner.
            kafka={"instance_id": name, "session_timeout_ms": 60_000},
            store={"data_dir": str(tmp_path / name), "cancel_grace_ms": GRACE_MS},
        )
        return SubprocessSidecar(settings, tmp_path, name)

    one, two = replica("one"), replica("two")
    watcher = Watcher(bootstrap, [orders])
    one.start()
    two.start()
    try:
        # 'victim' and 'keep' in a partition of 'one', due well after the owner is back
        mine, theirs = _split_then_send(one, two, bootstrap, topics, 30_000)
        client = http(one)
        wait_until(lambda: lookup(client, "keep") is not None, 30, "both stored by 'one'")
        one.kill9()
        down_since = now_ms()
        assert (tmp_path / "one" / POSITION_FILE).exists()

        send(bootstrap, topics.delay, [("delay-cancel", "victim")], partition=theirs)
        metric_reaches(http(two), "delaybridge_cancels_published_total", 1, 30)
        wait_until(
            lambda: now_ms() >= down_since + 3 * GRACE_MS,
            30,
            "three cancel graces of downtime",
        )
        one.start()
        client = http(one)

        def keep_out(_: object) -> bool:
            alive(one)
            alive(two)
            return "keep" in watcher.ids()

        watcher.until(keep_out, 90, "'keep' delivered by the restarted replica")
        watcher.settle(2.0)
        assert "victim" not in watcher.ids(), "a cancel published while its owner was down"
        assert f"{topics.delay}-{mine}" not in two.owned(), "the partition moved meanwhile"
    finally:
        watcher.close()
        for side in (one, two):
            if side.proc is not None and side.proc.poll() is None:
                side.terminate(timeout_s=30)


def test_a_cancel_published_while_its_partition_has_no_owner_survives_the_takeover(
    kafka: Any, topics: Topics, tmp_path: Path, make_settings: Callable[..., Settings]
) -> None:
    """Without static membership a dead replica's partitions move to another after the
    session timeout (10 s here, five graces): a cancel published in between must still
    reach the message the new owner restores from the changelog."""
    bootstrap = kafka.bootstrap_servers
    orders = topics.targets[0]

    def replica(name: str) -> SubprocessSidecar:
        settings = make_settings(
            store={"data_dir": str(tmp_path / name), "cancel_grace_ms": GRACE_MS}
        )
        return SubprocessSidecar(settings, tmp_path, name)

    one, two = replica("one"), replica("two")
    watcher = Watcher(bootstrap, [orders])
    one.start()
    two.start()
    try:
        # 'victim' and 'keep' in a partition of 'one', due after the takeover
        mine, theirs = _split_then_send(one, two, bootstrap, topics, 40_000)
        changelog = f"g-{topics.delay}-{topics.delay}-changelog"
        wait_until(
            lambda: high_watermarks(bootstrap, changelog, 3)[mine] >= 2,
            30,
            "both in the changelog",
        )
        one.kill9()
        send(bootstrap, topics.delay, [("delay-cancel", "victim")], partition=theirs)
        metric_reaches(http(two), "delaybridge_cancels_published_total", 1, 30)

        def keep_out(_: object) -> bool:
            alive(two)
            return "keep" in watcher.ids()

        watcher.until(keep_out, 90, "'keep' delivered by the replica that took over")
        watcher.settle(2.0)
        assert f"{topics.delay}-{mine}" in two.owned()
        assert "victim" not in watcher.ids(), "a cancel published while its partition moved"
    finally:
        watcher.close()
        if two.proc is not None and two.proc.poll() is None:
            two.terminate(timeout_s=30)


def _split_then_send(
    one: SubprocessSidecar, two: SubprocessSidecar, bootstrap: str, topics: Topics, due_in_ms: int
) -> tuple[int, int]:
    """Once the three delay partitions are split between the two replicas, send 'victim'
    (due ``due_in_ms`` from then) and 'keep' (a second later) to a partition of ``one``;
    returns (that partition, a partition of ``two``)."""
    everything = {f"{topics.delay}-{p}" for p in range(3)}
    wait_until(
        lambda: one.owned() and two.owned() and one.owned() | two.owned() == everything,
        90,
        "the three partitions split between the two replicas",
        detail=lambda: f"one {one.owned()}, two {two.owned()}",
    )
    mine = int(sorted(one.owned())[0].rsplit("-", 1)[1])
    theirs = int(sorted(two.owned())[0].rsplit("-", 1)[1])
    orders = topics.targets[0]
    due = now_ms() + due_in_ms
    for id, at in (("victim", due), ("keep", due + 1_000)):
        send(
            bootstrap, topics.delay, native(orders, id, ("deliver-at-ms", str(at))), partition=mine
        )
    return mine, theirs
