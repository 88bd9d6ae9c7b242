"""Issue 10, acceptance: ``kill -9`` between the produce and the ack of a cancel and a
dead letter, on a real broker.

Before issue 10 a restart resumed at one past the last *stored* schedule: a cancel (offset
N) and a bad record (N+1) whose re-publication Kafka had not acknowledged, followed by a
schedule (N+2) that was stored and flushed, were skipped for good — the cancelled
message went out and the dead letter never existed. Here the cancel and dead-letter
topics refuse every write (``max.message.bytes`` 16) until the sidecar is killed, and
accept them again before it restarts.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

from delaybridge.settings import Settings
from tests.integration.sidecar.harness import SubprocessSidecar, Topics, Watcher, native, now_ms
from tests.integration.sidecar.harness import produce as produce_acked
from tests.integration.sidecar.observe import alive, http, lookup, metric, metric_reaches
from tests.support import wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

KEEP = ("delay-on-duplicate", "keep")
REFUSE = {"max.message.bytes": "16"}  # smaller than any record batch: every write fails


@pytest.fixture
def topics(kafka: Any) -> Topics:
    return Topics(
        delay=kafka.create_topic("delay"),
        targets=[kafka.create_topic("orders")],
        dead_letter=kafka.create_topic("dlt", config=REFUSE),
        cancels=kafka.create_topic("cancels", config=REFUSE),
    )


def accept_writes_again(kafka: Any, *names: str) -> None:
    """Drop the topics' ``max.message.bytes`` override (back to the broker's default)."""
    entry = ConfigEntry("max.message.bytes", None, incremental_operation=AlterConfigOpType.DELETE)
    resources = [ConfigResource("topic", name, incremental_configs=[entry]) for name in names]
    admin = kafka.admin()  # referenced until the futures are done
    for future in admin.incremental_alter_configs(resources).values():
        future.result(30)


def test_kill9_before_cancel_and_dead_letter_are_acked(
    kafka: Any, topics: Topics, tmp_path: Path, make_settings: Callable[..., Settings]
) -> None:
    bootstrap = kafka.bootstrap_servers
    delay = topics.delay
    orders = topics.targets[0]
    # Static membership, as the chart runs pods: the restarted process takes its
    # partition back at once instead of waiting out the killed one's session.
    settings = make_settings(kafka={"instance_id": "accept-0"})
    side = SubprocessSidecar(settings, tmp_path)
    side.start()
    client = http(side)
    side.wait_log("assigned", 60)
    watcher = Watcher(bootstrap, [orders, topics.dead_letter, topics.cancels])

    # Due after the restart: a victim to cancel and a message that must still go out.
    # (Kept, not replacing: a replace would be one more refused write to the cancel topic.)
    due = now_ms() + 40_000
    produce_acked(
        bootstrap,
        delay,
        [
            (b"k", b"victim", [*native(orders, "victim", ("deliver-at-ms", str(due))), KEEP]),
            (b"k", b"keep", [*native(orders, "keep", ("deliver-at-ms", str(due + 1_000))), KEEP]),
        ],
    )
    cancel_at, bad_at, later_at = produce_acked(
        bootstrap,
        delay,
        [
            (b"victim", b"cancel", [("delay-cancel", "victim")]),
            (b"bad", b"bad", [("delay-target-topic", orders), ("delay-ms", "--5")]),
            (b"k", b"later", [*native(orders, "later", ("deliver-at-ms", str(due + 1_000))), KEEP]),
        ],
    )
    # Both side writes were tried and refused; the schedule behind them is stored and a
    # checkpoint (flush, then metrics) has run since.
    for offset, topic in ((cancel_at, topics.cancels), (bad_at, topics.dead_letter)):
        side.wait_log(f"writing {delay}/0/{offset} to {topic!r} failed", 60)
    wait_until(lambda: lookup(client, "later") is not None, 30, "'later' stored")
    beat = metric(client, "delaybridge_loop_heartbeat_timestamp_seconds")

    def checkpointed() -> bool:
        return metric(client, "delaybridge_loop_heartbeat_timestamp_seconds") > beat

    wait_until(checkpointed, 30, "a checkpoint after 'later' was stored")
    # The owner applies a cancel read from its own partition at once (the cancel horizon,
    # docs/design/cancel-horizon.md): the victim is gone here although the cancel topic
    # refused the cancel. Replicas owning other partitions learn of it only from that
    # topic, so the refused write must still be made after the restart (checked below).
    assert lookup(client, "victim") is None
    metric_reaches(client, "delaybridge_side_writes_unacked", 2, 30)  # the runbook's signal
    side.kill9()

    accept_writes_again(kafka, topics.cancels, topics.dead_letter)
    side.start()
    client = http(side)

    def keep_out(_: object) -> bool:
        alive(side)
        return {"keep", "later"} <= set(watcher.ids(orders))

    watcher.until(keep_out, 90, "'keep' and 'later' delivered after the restart")
    watcher.until(
        lambda got: any(a.topic == topics.cancels and a.key == b"victim" for a in got),
        30,
        "the refused cancel re-published to the cancel topic after the restart",
    )
    metric_reaches(client, "delaybridge_side_writes_unacked", 0, 30)
    watcher.settle(2.0)
    alive(side)
    assert "victim" not in watcher.ids(orders), "the cancelled message was delivered"
    assert watcher.ids(orders).count("later") == 1, "'later' was stored before the kill"
    dead = [a for a in watcher.arrivals if a.topic == topics.dead_letter]
    assert [(a.value, a.headers["delay-error"]) for a in dead] == [(b"bad", "bad-time")]
    assert dead[0].headers["delay-origin"] == f"{delay}/0/{bad_at}"
    assert later_at == bad_at + 1 == cancel_at + 2
    assert side.terminate(30) == 0
    watcher.close()
