"""kill -9 in the middle of a run, SIGTERM drain, and two sidecars sharing a group."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from delaybridge.settings import Settings
from tests.integration.sidecar.harness import (
    SubprocessSidecar,
    Topics,
    Watcher,
    iter_chunks,
    now_ms,
    produce,
)
from tests.kafka_cluster import RecordWithHeaders
from tests.support import wait_until

MakeSettings = Callable[..., Settings]

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def _send_spread(kafka: Any, topics: Topics, n: int, spread_ms: int, prefix: str) -> int:
    """n messages due over the next ``spread_ms``; returns the latest due time."""
    t = now_ms() + 1_000
    for chunk in iter_chunks(n, 2_000):
        records: list[RecordWithHeaders] = [
            (
                f"k{i}".encode(),
                f"v{i}".encode(),
                [
                    ("delay-target-topic", topics.targets[i % 2]),
                    ("deliver-at-ms", str(t + (i * spread_ms) // n)),
                    ("delay-id", f"{prefix}-{i}"),
                ],
            )
            for i in chunk
        ]
        produce(kafka.bootstrap_servers, topics.delay, records)
    return t + spread_ms


def test_kill9_mid_run_loses_nothing_and_repeats_only_in_flight(
    kafka: Any, topics: Topics, watcher: Watcher, tmp_path: Path, make_settings: MakeSettings
) -> None:
    n = 6_000
    settings = make_settings()
    side = SubprocessSidecar(settings, tmp_path)
    side.start()
    side.wait_log("assigned", 60)
    last_due = _send_spread(kafka, topics, n, 8_000, "crash")
    # Kill once some but not all messages are out.
    watcher.until(lambda a: len(a) >= n // 3, 120, "a third delivered before the kill")
    side.kill9()
    before_kill = len(watcher.arrivals)
    side.start()
    watcher.until(
        lambda a: {x.id for x in a} >= {f"crash-{i}" for i in range(n)},
        240,  # a restart waits out the killed member's session timeout (10 s) first
        "every message after restart",
    )
    watcher.settle(2.0)
    side.terminate(30)
    counts = Counter(watcher.ids())
    duplicates = sum(c - 1 for c in counts.values())
    early = [a.id for a in watcher.arrivals if a.timestamp_ms < a.due_ms]
    print(
        f"\nkill -9 after {before_kill} of {n} deliveries: {duplicates} duplicates, "
        f"{len(early)} early, last due {last_due}"
    )
    assert not early
    assert len(counts) == n
    # Duplicates may only come from the in-flight window (bounded by max_in_flight_records).
    assert duplicates <= settings.delivery.max_in_flight_records


def test_sigterm_drains_and_exits_within_grace(
    kafka: Any, topics: Topics, watcher: Watcher, tmp_path: Path, make_settings: MakeSettings
) -> None:
    settings = make_settings(shutdown_grace_ms=5_000)
    side = SubprocessSidecar(settings, tmp_path)
    side.start()
    side.wait_log("assigned", 60)
    _send_spread(kafka, topics, 1_000, 500, "drain")
    watcher.until(lambda a: len(a) >= 100, 30, "deliveries under way")
    assert side.terminate(timeout_s=15) == 0
    assert "sidecar stopped" in side.tail()
    side.start()
    watcher.until(
        lambda a: {x.id for x in a} >= {f"drain-{i}" for i in range(1_000)},
        60,
        "the rest after restart",
    )
    side.terminate(15)


def test_two_sidecar_processes_share_partitions_and_take_over(
    kafka: Any, topics: Topics, watcher: Watcher, tmp_path: Path, make_settings: MakeSettings
) -> None:
    # Two `delaybridge run` processes, same group, each with its own data directory (as
    # the chart's replicas are): the survivor restores the other's partitions from Kafka.
    one = SubprocessSidecar(
        make_settings(store={"data_dir": str(tmp_path / "one")}), tmp_path, "one"
    )
    two = SubprocessSidecar(
        make_settings(store={"data_dir": str(tmp_path / "two")}), tmp_path, "two"
    )
    everything = {f"{topics.delay}-{p}" for p in range(3)}
    one.start()
    two.start()
    try:
        _await(
            lambda: (
                bool(one.owned()) and bool(two.owned()) and one.owned() | two.owned() == everything
            ),
            90,
            "the three partitions split between the two processes",
            one,
            two,
        )
        _send_spread(kafka, topics, 3_000, 6_000, "ha")
        watcher.until(lambda a: len(a) >= 300, 30, "deliveries from both")
        assert one.terminate(timeout_s=30) == 0
        _await(lambda: two.owned() == everything, 90, "the survivor owns every partition", two)
        watcher.until(
            lambda a: {x.id for x in a} >= {f"ha-{i}" for i in range(3_000)},
            90,
            "every message delivered by the survivor",
        )
        early = [a.id for a in watcher.arrivals if a.timestamp_ms < a.due_ms]
        assert not early
    finally:
        for side in (one, two):
            if side.proc is not None and side.proc.poll() is None:
                side.terminate(timeout_s=30)


def _await(
    condition: Callable[[], bool], timeout_s: float, what: str, *sides: SubprocessSidecar
) -> None:
    def logs() -> str:
        return "\n\n".join(f"--- {s.log.name}\n{s.tail()}" for s in sides)

    wait_until(condition, timeout_s, what, interval_s=0.1, detail=logs)
