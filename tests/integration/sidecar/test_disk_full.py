"""A data directory on a real 8 MiB filesystem that fills up, with a real broker.

The sidecar's data directory is an 8 MiB tmpfs mounted for the test
(``tests/integration/small_disk.py``: this needs root, as the test machines and CI
run). A file takes all but a little of the space, records larger than what is left
arrive, and the kernel refuses a write halfway (ENOSPC). Before issue 10 that crashed
the loop, and every restart crashed again on its first batch before delivering
anything. (Where an append fails matters too: the store-level sweep over every fill
level is tests/integration/timerlog/test_store_full_tmpfs.py.)

Acceptance (issue 10): no crash loop, deliveries continue, ingest resumes by itself when
space returns, the store opens afterwards.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
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
from tests.integration.small_disk import fill, tmpfs

pytestmark = pytest.mark.kafka
LEFT_BYTES = 256 * 1024  # what the filler leaves free
VALUE = b"x" * 16 * 1024


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    with tmpfs(tmp_path / "data", "8m") as where:
        yield where


def test_a_full_disk_pauses_ingest_keeps_delivering_and_recovers(
    kafka: Any,
    topics: Topics,
    watcher: Watcher,
    small_disk: Path,
    make_settings: Callable[..., Settings],
) -> None:
    settings = make_settings(
        store={"data_dir": str(small_disk), "wheel_slots": 4096, "min_free_bytes": 0}
    )
    boot = kafka.bootstrap_servers
    target = topics.targets[0]
    with InProcessSidecar.start(settings) as side:
        early = native(target, "early", ("deliver-at-ms", str(now_ms() + 4_000)))
        send(boot, topics.delay, early, partition=0)
        registry = side.service.metrics.registry
        labels = {"delay_topic": topics.delay}

        def enqueued() -> float:
            return registry.get_sample_value("delaybridge_enqueued_total", labels) or 0.0

        side.wait_for(lambda: enqueued() >= 1, 20, "the early message stored")
        filler = fill(small_disk, LEFT_BYTES)
        due = ("delay-ms", "1000")
        records: list[Any] = [(b"k", VALUE, native(target, f"late-{i}", due)) for i in range(60)]
        produce(boot, topics.delay, records, 0)  # ~1 MiB: four times what is left
        side.wait_for(lambda: side.service.flow.disk_full, 30, "ingest paused: disk full")
        watcher.until(lambda a: "early" in {x.id for x in a}, 30, "a delivery while full")
        assert enqueued() < 61  # it was not all stored: the disk did fill
        filler.unlink()  # space is back
        watcher.until(lambda a: len({x.id for x in a}) >= 61, 60, "every late message")
        assert side.thread.is_alive() and not side.errors
    # The stores open afterwards, and hold nothing that was not delivered.
    with InProcessSidecar.start(settings) as again:
        stats = [p.store.stats() for p in again.service.partitions]
        assert sum(s.pending for s in stats) == 0, stats
    assert {a.id for a in watcher.arrivals} == {"early", *(f"late-{i}" for i in range(60))}
