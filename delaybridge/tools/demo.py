"""The README's main command: a local broker, the sidecar, delayed messages seen arriving.

1. start a local Kafka 4.x broker (pinned jars from Maven Central) in ``work_dir``;
2. create a delay topic with three partitions and two target topics;
3. run the sidecar in this process (its own thread, real store on disk, HTTP on a free
   port);
4. send messages with different delays and header dialects (native, RocketMQ 5 and 4,
   etf1), one message that is cancelled before it is due, one that is rescheduled (a
   new record with its id replaces it), and one bad record that goes to the
   dead-letter topic;
5. show each arrival live: due time, actual time, lateness;
6. stop the sidecar, reconcile sent vs delivered with PySpark, stop the broker.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from rich.console import Console
from rich.table import Table

from delaybridge.bridge.service import Service
from delaybridge.client import DelayClient
from delaybridge.connectors import KafkaClients, ensure_topics, header_text, produce_blocking
from delaybridge.contract.names import OUT_DUE_MS, OUT_ERROR, OUT_ID, OUT_OCCURRENCE
from delaybridge.errors import DelayBridgeError
from delaybridge.settings import Settings, load
from delaybridge.tools.demo_messages import (
    ARRIVALS_TIMEOUT_S,
    CANCEL_AFTER_MS,
    CANCELLED,
    DELAY_TOPIC,
    DLT,
    RECURRING,
    RECURRING_COUNT,
    RESCHEDULED,
    TARGETS,
    WATCH_MS,
    messages_at,
    rescheduled,
)


def run_demo(work_dir: Path, *, port: int, report: bool = True) -> int:
    from delaybridge.connectors.localkafka import LocalKafka

    # Wide enough for the reconciliation table when output is not a terminal (CI, logs).
    console = Console() if Console().is_terminal else Console(width=150)
    logging.getLogger("delaybridge").setLevel(logging.WARNING)  # the demo narrates itself
    if (work_dir / "store").exists():
        shutil.rmtree(work_dir / "store")
    broker = LocalKafka(work_dir / "kafka", port=port, controller_port=port + 1)
    console.rule("1. local Kafka broker")
    broker.start(timeout_s=120)
    console.print(f"broker at {broker.bootstrap}")
    try:
        return _with_broker(console, demo_settings(broker.bootstrap, work_dir), work_dir, report)
    finally:
        console.rule("stopping the broker")
        broker.stop()


def demo_settings(bootstrap: str, work_dir: Path) -> Settings:
    """The demo sidecar's settings; every client of the demo reaches Kafka through them."""
    return load(
        None,
        kafka={"bootstrap_servers": bootstrap, "group_id": "demo-sidecar"},
        delay_topics=[DELAY_TOPIC],
        dead_letter_topic=DLT,
        cancel_topic="demo.cancels",
        store={"data_dir": work_dir / "store", "tick_ms": 100},
        http={"port": 0},
    )


def _with_broker(console: Console, settings: Settings, work_dir: Path, report: bool) -> int:
    clients = KafkaClients(settings.kafka)
    admin = clients.admin()
    _await_group_coordinator(admin, 60)
    ensure_topics(admin, {DELAY_TOPIC: {}}, partitions=3)
    ensure_topics(admin, {t: {} for t in (*TARGETS, DLT)})
    console.rule("2. sidecar")
    service = Service(settings)
    ready = threading.Event()
    runner = threading.Thread(target=service.run, kwargs={"on_ready": ready.set}, daemon=True)
    runner.start()
    _await(lambda: service.control.ready()[0], 60, "the sidecar to join its group", runner)
    console.print(f"sidecar ready, store in {settings.store.data_dir}")

    watcher = clients.reader({"auto.offset.reset": "latest"})
    watcher.subscribe([*TARGETS, DLT])
    _await(lambda: bool(watcher.poll(0.2) is None and watcher.assignment()), 30, "watcher")

    console.rule("3. sending delayed messages")
    now_ms = int(time.time() * 1000)
    messages = messages_at(now_ms)
    producer = clients.producer()
    for m in messages:
        payload = f"payload of {m.id}".encode()
        produce_blocking(producer, DELAY_TOPIC, payload, m.id.encode(), headers=list(m.headers))
        console.print(f"  sent {m.id:<11} → {m.target:<15} {m.note}")
    produce_blocking(producer, DELAY_TOPIC, b"no target", b"bad-1", headers=[("delay-ms", "100")])
    console.print("  sent bad-1       → (no target header: goes to the dead-letter topic)")
    producer.flush(30)
    sent_ms = int(time.time() * 1000)

    table = Table(
        title="arrivals (due vs actual)",
        caption="late ms: from the due time, or from sending for a message sent past due",
    )
    for col in ("id", "topic", "due", "actual", "late ms"):
        table.add_column(col)
    expected = {m.id for m in messages} - {CANCELLED} | {"bad-1"}
    seen: dict[str, int] = {}
    arrived: Counter[str] = Counter()
    dues: dict[str, int] = {}
    cancelled = False
    deadline = time.monotonic() + ARRIVALS_TIMEOUT_S
    console.rule("4. arrivals")
    # Until all expected arrived and the watch ran past the cancelled and the replaced
    # message's old due time (6 s) and the recurring one's last occurrence.
    while (expected - seen.keys() or time.time() * 1000 < sent_ms + WATCH_MS) and (
        time.monotonic() < deadline
    ):
        if not cancelled and time.time() * 1000 >= sent_ms + CANCEL_AFTER_MS:
            with DelayClient.connect(settings.kafka, DELAY_TOPIC) as client:
                client.cancel(CANCELLED)
            console.print(f"  [yellow]cancelled {CANCELLED}[/yellow]")
            again = rescheduled()
            produce_blocking(
                producer, DELAY_TOPIC, b"moved", again.id.encode(), headers=list(again.headers)
            )
            producer.flush(10)
            console.print(f"  [yellow]rescheduled {again.id}: {again.note}[/yellow]")
            cancelled = True
        msg = watcher.poll(0.1)
        if msg is None or msg.error():
            continue
        hdrs = header_text(msg)
        if msg.topic() == DLT:
            seen["bad-1"] = 0
            console.print(f"  bad-1      dead-lettered: {hdrs.get(OUT_ERROR)}")
            continue
        id = hdrs.get(OUT_ID, "?")
        due = int(hdrs.get(OUT_DUE_MS, "0"))
        actual = msg.timestamp()[1]
        seen[id] = actual - due
        arrived[id] += 1
        dues[id] = due
        # Late counts from when it could first go out: sent past due, that is the send.
        late = actual - max(due, now_ms)
        what = f" (occurrence {hdrs[OUT_OCCURRENCE]})" if OUT_OCCURRENCE in hdrs else ""
        console.print(
            f"  {id:<10} {msg.topic():<14} due {_clock(due)} got {_clock(actual)} "
            f"+{late} ms" + (" after sending (it was sent past due)" if due < now_ms else "") + what
        )
        table.add_row(id, str(msg.topic()), _clock(due), _clock(actual), str(late))
    watcher.close()
    console.print(table)
    service.stop()
    runner.join(60)
    missing = expected - seen.keys()
    early = [i for i, late in seen.items() if late < 0 and i != "bad-1"]
    leaked = CANCELLED in seen
    # Once, on its new time (the old one was due at 6 s).
    moved = arrived[RESCHEDULED] == 1 and dues.get(RESCHEDULED, 0) < sent_ms + 5_000
    repeated = arrived[RECURRING] == RECURRING_COUNT
    console.print(
        f"delivered {len(seen)} of {len(expected)} expected; missing {sorted(missing)}; "
        f"early {early}; cancelled one delivered: {leaked}; "
        f"rescheduled one arrived once, on its new time: {moved}; "
        f"recurring one arrived {arrived[RECURRING]} of {RECURRING_COUNT} times"
    )
    ok = not missing and not early and not leaked and moved and repeated
    if report:
        console.rule("5. reconciliation (PySpark)")
        ok = _reconcile(console, settings, work_dir) and ok
    console.rule("[green]demo OK[/green]" if ok else "[red]demo FAILED[/red]")
    return 0 if ok else 1


def _reconcile(console: Console, settings: Settings, work_dir: Path) -> bool:
    """Reconcile what was sent with what arrived, reading both from Kafka with PySpark."""
    from delaybridge.spark.job import run_reconciliation
    from delaybridge.spark.render import print_report
    from delaybridge.spark.settings import ReconcileSettings

    recon = ReconcileSettings.from_sidecar(
        settings,
        target_topics=TARGETS,
        output_dir=work_dir / "report",
        master="local[2]",
        grace_ms=0,
    )
    report = run_reconciliation(recon)
    print_report(report, console)
    console.print(f"report files: {work_dir / 'report'} (report.json, Parquet, reconcile.png)")
    # The demo cancels one message on purpose; only missing or early deliveries fail it.
    return report.exit_code == 0


def _await_group_coordinator(admin: AdminClient, timeout_s: float) -> None:
    """Wait until the fresh broker's group coordinator answers.

    The first group request makes the broker create ``__consumer_offsets`` and load
    it; consumers that join meanwhile get "Coordinator load in progress" and librdkafka
    logs it as a warning, which a newcomer cannot act on. Asking for a group's
    description until it comes back without a retriable error waits that out first.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        (future,) = admin.describe_consumer_groups(["demo.coordinator-probe"]).values()
        try:
            future.result(timeout=10)
            return
        except KafkaException as exc:
            error = exc.args[0]
            if not (isinstance(error, KafkaError) and _coordinator_not_ready(error)):
                raise
            if time.monotonic() >= deadline:
                raise DelayBridgeError(
                    f"the broker's group coordinator did not come up in {timeout_s:g} s: {error}"
                ) from exc
        time.sleep(0.2)


def _coordinator_not_ready(error: KafkaError) -> bool:
    # librdkafka does not flag COORDINATOR_LOAD_IN_PROGRESS as retriable here.
    return error.retriable() or error.code() in (
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.NOT_COORDINATOR,
    )


def _clock(ms: int) -> str:
    return time.strftime("%H:%M:%S", time.localtime(ms / 1000)) + f".{ms % 1000:03d}"


def _await(
    condition: Callable[[], bool],
    timeout_s: float,
    what: str,
    worker: threading.Thread | None = None,
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        if worker is not None and not worker.is_alive():
            raise DelayBridgeError(f"the sidecar stopped while waiting for {what}; see its log")
        time.sleep(0.05)
    raise DelayBridgeError(f"timed out after {timeout_s} s waiting for {what}")
