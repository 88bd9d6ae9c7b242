"""``delaybridge bench reconcile``: reconcile N sent + N delivered records, timed against a
bare read of the same topics.

1. Seed (unless ``--reuse`` finds them): a delay topic with N schedules due over the
   last hour, and a target topic with one delivery per schedule, 0–299 ms late, with the
   sidecar's provenance headers (``delay-origin`` names each schedule's own partition
   and offset, as the sidecar's does). One idempotent producer, lz4, large batches; a
   rich bar shows progress.
2. Start one Spark session on ``--master`` (default ``local[2]``).
3. The baseline: a bare read and count of both topics with the same Kafka source and
   options, in that session. It runs before the reconciliation and again after it (a
   warm JVM), and the faster of the two is the baseline.
4. Reconcile both with the CLI's defaults in the same session, and check the verdict is
   exact (N sent, N delivered, nothing missing or early).
5. Print a table of the step times and the ratio to the baseline, write JSON
   (``bench-results/reconcile.json``).

Other helpers share the CPU on the development machine; the JSON records the load
average before and after so a reader can judge the number.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from delaybridge.connectors import KafkaClients, KafkaSettings, produce_blocking
from delaybridge.errors import DelayBridgeError, KafkaError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from delaybridge.spark.settings import ReconcileSettings

HOUR_MS = 3_600_000
VALUE = b"x" * 100
#: In the bench topics' names: topics seeded by an older bench (whose origins named
#: partition 0 for every schedule) are not reused.
SEED_FORMAT = "v2"


def run_bench(args: argparse.Namespace) -> int:
    console = Console(stderr=True)
    kafka = _cluster(args.config, args.bootstrap)
    result = measure(
        kafka,
        args.messages,
        args.partitions,
        args.master,
        args.out.parent / "reconcile-report",
        reuse=args.reuse,
        console=console,
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    n = args.messages
    table = Table(title=f"bench reconcile: {n:,} sent + {n:,} delivered on {args.master}")
    table.add_column("step")
    table.add_column("seconds", justify="right")
    for name, seconds in result["step_seconds"].items():
        table.add_row(name, f"{seconds:.1f}")
    table.add_row("reconcile (session started)", f"{result['seconds_reconcile']:.1f}", style="bold")
    table.add_row("baseline: bare read + count", f"{result['seconds_baseline']:.1f}")
    table.add_row("reconcile / baseline", f"{result['ratio_to_baseline']:.2f}", style="bold")
    Console().print(table)
    load_before, load_after = result["load_average_before"], result["load_average_after"]
    print(
        f"verdict exact: {result['verdict_exact']}; load average {load_before[0]:.1f} → "
        f"{load_after[0]:.1f}; written {args.out}"
    )
    if not result["verdict_exact"]:
        raise DelayBridgeError(
            f"bench reconcile: expected {n} sent and delivered, got {result['counts']}"
        )
    return 0


def measure(
    kafka: KafkaSettings,
    n: int,
    partitions: int,
    master: str,
    output_dir: Path | None,
    *,
    reuse: bool = False,
    console: Console | None = None,
    spark: SparkSession | None = None,
) -> dict[str, Any]:
    """Seed (unless reused), then time the baseline and the reconciliation in one session
    (``spark``, or one started on ``master`` and stopped at the end); the result as the
    JSON the CLI writes."""
    from delaybridge.spark.job import open_session, run_reconciliation
    from delaybridge.spark.settings import ReconcileSettings

    console = console or Console(stderr=True)
    delay_topic = f"bench-reconcile-{SEED_FORMAT}-delay-{n}"
    target_topic = f"bench-reconcile-{SEED_FORMAT}-target-{n}"
    topics = [delay_topic, target_topic]
    seed_s = 0.0
    if not (reuse and _seeded(kafka, topics, n)):
        seed_s = seed(kafka, delay_topic, target_topic, n, partitions, console)
    load_before = os.getloadavg()
    settings = ReconcileSettings(
        bootstrap_servers=kafka.bootstrap_servers,
        kafka_options=dict(kafka.client),
        delay_topics=(delay_topic,),
        target_topics=(target_topic,),
        master=master,
        output_dir=output_dir,
    )
    started = time.monotonic()
    session = spark or open_session(settings)
    start_s = time.monotonic() - started
    try:
        baselines = [bare_read_count(session, settings, topics, 2 * n)]
        started = time.monotonic()
        report = run_reconciliation(settings, spark=session)
        reconcile_s = time.monotonic() - started
        baselines.append(bare_read_count(session, settings, topics, 2 * n))
    finally:
        if spark is None:
            session.stop()
    load_after = os.getloadavg()
    t = report.totals
    exact = (t.sent, t.delivered, t.missing, t.early) == (n, n, 0, 0)
    baseline_s = min(baselines)
    return {
        "benchmark": "reconcile",
        "messages_sent": n,
        "messages_delivered": n,
        "partitions": partitions,
        "master": master,
        "seconds_start_spark": round(start_s, 2),
        "seconds_reconcile": round(reconcile_s, 2),
        "seconds_baseline": round(baseline_s, 2),
        "seconds_baseline_runs": [round(b, 2) for b in baselines],
        "ratio_to_baseline": round(reconcile_s / baseline_s, 2),
        "step_seconds": report.step_s,
        "seed_seconds": round(seed_s, 2) if seed_s else None,
        "verdict_exact": exact,
        "counts": {
            "sent": t.sent,
            "delivered": t.delivered,
            "missing": t.missing,
            "early": t.early,
            "late": t.late,
            "lateness_p99_ms": t.lateness_p99_ms,
        },
        "machine": _machine(),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in load_after],
        "command": f"delaybridge bench reconcile --messages {n} --master {master}",
    }


def bare_read_count(
    spark: SparkSession, settings: ReconcileSettings, topics: list[str], expected: int
) -> float:
    """Seconds to read ``topics`` whole with the job's Kafka source (same options, headers
    included) and count the records: what any Spark job over them pays. Fails if the
    count is not ``expected``."""
    from delaybridge.spark.snapshot import take_snapshot
    from delaybridge.spark.sources import read_ranges

    started = time.monotonic()
    ranges = take_snapshot(settings.kafka(), topics)
    counted = read_ranges(spark, settings.bootstrap_servers, ranges, settings.kafka_options).count()
    seconds = time.monotonic() - started
    if counted != expected:
        raise DelayBridgeError(f"bench reconcile: the bare read counted {counted}, not {expected}")
    return seconds


def seed(
    kafka: KafkaSettings,
    delay_topic: str,
    target_topic: str,
    n: int,
    partitions: int,
    console: Console,
) -> float:
    """Create both topics afresh and fill them; return the seconds it took."""
    from confluent_kafka.cimpl import NewTopic

    clients = KafkaClients(kafka)
    admin = clients.admin()
    for future in admin.delete_topics([delay_topic, target_topic]).values():
        try:
            future.result()
        except Exception as exc:  # absent topics are fine; anything else will fail create
            if "UNKNOWN_TOPIC" not in str(exc):
                raise KafkaError(f"bench: cannot delete old bench topics: {exc}") from exc
    _create(admin, NewTopic, [delay_topic, target_topic], partitions)
    producer = clients.producer(
        {
            "compression.type": "lz4",
            "linger.ms": 50,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 500_000,
            "queue.buffering.max.kbytes": 1_048_576,
        }
    )
    now_ms = time.time_ns() // 1_000_000
    first_due = now_ms - HOUR_MS - 60_000
    step_ms = max(1, HOUR_MS // n) if n else 1
    started = time.monotonic()
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task("seed", total=2 * n)
        for i in range(n):
            due = first_due + i * step_ms
            key = f"k{i}".encode()
            message_id = f"b{i}"
            sent_at = due - 30_000
            # Round robin over the partitions, in order (one idempotent producer): the
            # i-th schedule is record i // partitions of partition i % partitions, which
            # the delivery's delay-origin names, as the sidecar's does.
            partition = i % partitions
            _produce(
                producer,
                delay_topic,
                partition,
                key,
                sent_at,
                [
                    ("delay-target-topic", target_topic.encode()),
                    ("deliver-at-ms", str(due).encode()),
                    ("delay-id", message_id.encode()),
                ],
            )
            _produce(
                producer,
                target_topic,
                partition,
                key,
                due + (i * 7919) % 300,
                [
                    ("delay-id", message_id.encode()),
                    ("delay-origin", f"{delay_topic}/{partition}/{i // partitions}".encode()),
                    ("delay-due-ms", str(due).encode()),
                ],
            )
            if i % 10_000 == 0:
                producer.poll(0)
                bar.update(task, completed=2 * i)
        bar.update(task, description="flush")
        if producer.flush(120) != 0:
            raise KafkaError("bench: records still unsent after 120 s of flush")
    return time.monotonic() - started


def _produce(
    producer: Any, topic: str, partition: int, key: bytes, ts: int, headers: list[Any]
) -> None:
    produce_blocking(
        producer, topic, VALUE, key, partition=partition, headers=headers, timestamp_ms=ts
    )


def _create(admin: Any, new_topic: Any, topics: list[str], partitions: int) -> None:
    deadline = time.monotonic() + 60
    while True:  # deletion is asynchronous: creation fails until it has finished
        futures = admin.create_topics([new_topic(t, partitions, 1) for t in topics])
        errors = []
        for topic, future in futures.items():
            try:
                future.result()
                topics = [t for t in topics if t != topic]
            except Exception as exc:
                errors.append(f"{topic}: {exc}")
        if not topics:
            return
        if time.monotonic() > deadline:
            raise KafkaError("bench: cannot create topics: " + "; ".join(errors))
        time.sleep(0.5)  # poll interval while the broker finishes deleting


def _seeded(kafka: KafkaSettings, topics: list[str], n: int) -> bool:
    from delaybridge.spark.snapshot import take_snapshot

    try:
        ranges = take_snapshot(kafka, topics, missing_ok=True)
    except DelayBridgeError:
        return False
    return all(t.exists and t.records == n for t in ranges)


def _cluster(config: Path | None, bootstrap: str | None) -> KafkaSettings:
    """``--config``'s kafka section (client settings included), ``--bootstrap`` over it."""
    kafka = KafkaSettings()  # 127.0.0.1:9092
    if config is not None:
        from delaybridge.settings import load

        kafka = load(config).kafka
    if bootstrap:
        kafka = kafka.model_copy(update={"bootstrap_servers": bootstrap})
    return kafka


def _machine() -> dict[str, Any]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass  # not Linux: the model stays "unknown"
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
        ).stdout.strip()
    except OSError:
        commit = ""
    return {
        "cpus": os.cpu_count(),
        "cpu_model": cpu,
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "python": platform.python_version(),
        "os": platform.platform(),
        "git_commit": commit,
    }
