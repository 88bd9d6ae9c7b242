"""``delaybridge bench restore``: how fast a store is rebuilt from its changelog.

For each size N: a changelog partition is filled with N pending messages' values (keys
and values exactly as the sidecar writes them) plus, interleaved, a tenth as many
messages that were delivered (a value, then its tombstone): what an uncompacted head
holds. Then the sidecar's own restore path (``bridge/state/restorer.py``: the slices, the
buffer, the store's ``append_raw`` and ``remove``) rebuilds an empty store from it, and
the benchmark reports changelog records read per second, pending messages per second,
the wall and CPU time, and how much the process's RSS grew while restoring.

Prints a table and writes JSON (``bench-results/restore.json`` by default).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from delaybridge.bridge.commit.offsets import OffsetTracker
from delaybridge.bridge.partition.state import PartitionState
from delaybridge.bridge.state.restorer import CONSUMER_SETTINGS, Restorer, RestoreTask
from delaybridge.connectors import KafkaClients, KafkaSettings, ensure_topics, produce_blocking
from delaybridge.timerlog import StoreSettings, TimerRecord, TimerStore
from delaybridge.timerlog.bench import rss_mb
from delaybridge.timerlog.changelog_record import ID_HEADER, key_of, value_of
from delaybridge.timerlog.commit_codec import encode_batch
from delaybridge.tools.bench_kit import bench_cluster, report

VALUE = b"x" * 100
HEADERS = (("trace", b"abc"),)


def run_restore_bench(args: argparse.Namespace) -> int:
    console = Console()
    sizes = [int(s) for s in str(args.pending).split(",")]
    kafka = KafkaSettings(bootstrap_servers=args.bootstrap) if args.bootstrap else None
    with bench_cluster("delaybridge-restore-", kafka) as (work, clients):
        results = [_one(console, clients, work / f"n{n}", n) for n in sizes]
    report(console, args.json, "restore", results, lambda run: f"{run['pending']:,} pending")
    return 0


def _one(console: Console, clients: KafkaClients, work: Path, n: int) -> dict[str, Any]:
    topic = f"restore-bench.{n}.{time.time_ns()}"
    ensure_topics(clients.admin(), {topic: {"cleanup.policy": "compact"}})
    with console.status(f"writing a changelog of {n:,} pending messages"):
        written = _fill(clients, topic, n)
    store = TimerStore.open(work / "store", StoreSettings())
    part = PartitionState(topic, 0, store, OffsetTracker(0), 0.0)
    reader = clients.reader(CONSUMER_SETTINGS)
    restorer = Restorer(reader, 50_000)
    rss_before = rss_mb()
    peak = rss_before
    started, cpu = time.perf_counter(), time.process_time()
    restorer.start(RestoreTask(part, topic, 0, written, rebuild=True))
    with console.status(f"restoring {written:,} changelog records"):
        while restorer.tasks:
            restorer.step(50_000)
            peak = max(peak, rss_mb())
    seconds, cpu_s = time.perf_counter() - started, time.process_time() - cpu
    pending = store.stats().pending
    restorer.close()
    store.close()
    if pending != n:  # a restore that loses or repeats is a defect, not a result
        raise RuntimeError(f"restore of {topic}: {pending:,} pending after it, {n:,} expected")
    return {
        "pending": n,
        "changelog_records": written,
        "restored_pending": pending,
        "seconds": round(seconds, 2),
        "records_per_s": round(written / seconds),
        "pending_per_s": round(pending / seconds),
        "cpu_seconds": round(cpu_s, 2),
        "rss_before_mb": round(rss_before, 1),
        "rss_growth_during_restore_mb": round(peak - rss_before, 1),
    }


def _fill(clients: KafkaClients, topic: str, n: int) -> int:
    """n pending values, plus n/10 delivered messages (value, then tombstone)."""
    # Compressed as the sidecar's producer writes its changelog (lz4).
    producer = clients.producer({"linger.ms": 20, "batch.size": 1 << 20, "compression.type": "lz4"})
    due = int(time.time() * 1000) + 3_600_000
    written = 0
    i_done = 0
    chunk = 10_000
    for start in range(0, n, chunk):
        records = [
            TimerRecord(
                f"id-{i}", due + i % 600_000, "orders", -1, b"k%d" % i, VALUE, HEADERS, i, due
            )
            for i in range(start, min(n, start + chunk))
        ]
        enc = encode_batch(records).records()
        for rec, raw in zip(records, enc, strict=True):
            produce_blocking(producer, topic, value_of(raw), key_of(rec.source_offset), partition=0)
            written += 1
            if rec.source_offset % 10 == 0:  # a delivered neighbour: value, then tombstone
                # A message of its own (id, source offset), as the sidecar writes one: a
                # tombstone names the key of its value, so a restore that applied the
                # value in an earlier slice drops exactly that message.
                done = rec._replace(id=f"done-{rec.source_offset}", source_offset=n + i_done)
                i_done += 1
                gone = key_of(done.source_offset)
                (done_raw,) = encode_batch([done]).records()
                produce_blocking(producer, topic, value_of(done_raw), gone, partition=0)
                tomb: list[tuple[str, str | bytes | None]] = [(ID_HEADER, done.id.encode())]
                produce_blocking(producer, topic, None, gone, partition=0, headers=tomb)
                written += 2
    if producer.flush(120):
        raise RuntimeError(f"changelog fill of {topic}: records not acknowledged in 120 s")
    return written
