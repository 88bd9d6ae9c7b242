"""``delaybridge bench e2e``: the sidecar end to end, against a passthrough forwarder.

Three measurements, one broker, one run (issue 4):

1. **throughput** — N records (100-byte values) whose due times are spread over a
   minute that has just passed are put in the delay topic; the sidecar (a real
   ``delaybridge run`` child process) is started and timed from its first stored record
   to the last delivery acknowledgement. The passthrough forwarder (``passthrough.py``,
   same client settings, no store) moves the same N records between two topics: the
   ceiling. The ratio is the headline number.
2. **lateness** — a producer sends a steady 5k msg/s for ``--steady-s`` seconds with
   delays of 1–5 s; a consumer of the target topic computes lateness = broker
   timestamp − ``delay-due-ms`` for every record: p50/p99/max and the early count.
3. **one tick** — dequeue is paused through the admin API, 1M records all due at the
   same millisecond are stored, dequeue is resumed: drain rate and the sidecar's peak
   RSS (``VmHWM``).

Prints a table (rich) and writes JSON (``bench-results/e2e.json`` by default).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer
from rich.console import Console
from rich.table import Table

from delaybridge.connectors.kafka import ensure_topics, headers_of, make_admin

VALUE = b"x" * 100


def register_bench(bench: Any) -> None:
    e2e = bench.add_parser("e2e", help="sidecar throughput vs passthrough, lateness, 1M tick")
    e2e.add_argument("--bootstrap", help="an existing broker (default: start a local one)")
    e2e.add_argument("--messages", type=int, default=200_000, help="throughput run size")
    e2e.add_argument("--steady-s", type=int, default=30, help="seconds of steady 5k msg/s")
    e2e.add_argument("--rate", type=int, default=5_000, help="steady rate, msg/s")
    e2e.add_argument("--tick-messages", type=int, default=1_000_000, help="records in one tick")
    e2e.add_argument("--json", type=Path, default=Path("bench-results/e2e.json"))
    e2e.add_argument("--only", choices=("throughput", "lateness", "tick"), action="append")
    e2e.set_defaults(handler=_e2e)


def _e2e(args: argparse.Namespace) -> int:
    console = Console()
    with tempfile.TemporaryDirectory(prefix="delaybridge-bench-") as tmp:
        work = Path(tmp)
        broker = None
        bootstrap = args.bootstrap
        if not bootstrap:
            from delaybridge.connectors.localkafka import LocalKafka

            port = _free_port()
            broker = LocalKafka(
                work / "kafka", port=port, controller_port=_free_port(), heap_mb=1024
            )
            broker.start(timeout_s=120)
            bootstrap = broker.bootstrap
        try:
            results = _run_all(console, bootstrap, work, args)
        finally:
            if broker is not None:
                broker.stop()
    results["machine"] = {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=2))
    _print(console, results)
    console.print(f"JSON written to {args.json}")
    return 0


def _run_all(
    console: Console, bootstrap: str, work: Path, args: argparse.Namespace
) -> dict[str, Any]:
    only = set(args.only or ("throughput", "lateness", "tick"))
    results: dict[str, Any] = {}
    if "throughput" in only:
        results["throughput"] = _throughput(console, bootstrap, work / "t", args.messages)
    if "lateness" in only:
        results["lateness"] = _lateness(console, bootstrap, work / "l", args.rate, args.steady_s)
    if "tick" in only:
        results["tick"] = _one_tick(console, bootstrap, work / "k", args.tick_messages)
    return results


# -- the sidecar as a child process -----------------------------------------------------


class _Sidecar:
    def __init__(self, bootstrap: str, work: Path, delay: str, **extra: Any) -> None:
        work.mkdir(parents=True, exist_ok=True)
        self.port = _free_port()
        config: dict[str, Any] = {
            "kafka": {"bootstrap_servers": bootstrap, "group_id": f"bench-{delay}"},
            "delay_topics": [delay],
            "dead_letter_topic": f"{delay}.dlt",
            "cancel_topic": f"{delay}.cancels",
            "store": {"data_dir": str(work / "data")},
            "http": {"port": self.port},
        }
        config.update(extra)
        path = work / "config.json"  # YAML is a superset of JSON
        path.write_text(json.dumps(config))
        self.log = (work / "sidecar.log").open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "delaybridge", "run", "--config", str(path)],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        self.peak_anon_mb = 0.0
        self.peak_file_mb = 0.0
        self._sampling = True
        threading.Thread(target=self._sample, daemon=True).start()
        self._await(lambda: self.get("/readyz") is not None, 90, "sidecar ready")

    def _sample(self) -> None:
        """Peak anonymous memory vs file-backed pages (the store's mmap'd segments)."""
        while self._sampling and self.proc.poll() is None:
            try:
                status = Path(f"/proc/{self.proc.pid}/status").read_text()
            except OSError:
                return
            for line in status.splitlines():
                if line.startswith("RssAnon:"):
                    self.peak_anon_mb = max(self.peak_anon_mb, int(line.split()[1]) / 1024)
                elif line.startswith("RssFile:"):
                    self.peak_file_mb = max(self.peak_file_mb, int(line.split()[1]) / 1024)
            time.sleep(0.05)

    def get(self, path: str, method: str = "GET") -> Any:
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", method=method)
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                return json.loads(response.read() or b"null")
        except (OSError, ValueError):
            return None

    def pending(self) -> int:
        stats = self.get("/admin/stats") or {}
        return sum(int(p["pending"]) for p in stats.get("partitions", []))

    def stored(self) -> int:
        stats = self.get("/admin/stats") or {}
        return sum(int(p["last_source_offset"]) + 1 for p in stats.get("partitions", []))

    def peak_rss_mb(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def stop(self) -> None:
        self._sampling = False
        self.proc.terminate()
        self.proc.wait(60)
        self.log.close()

    def _await(self, cond: Any, timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"sidecar exited with {self.proc.returncode}; see {self.log.name}"
                )
            if cond():
                return
            time.sleep(0.1)
        raise RuntimeError(f"timed out waiting for {what}")


# -- the three measurements -------------------------------------------------------------


def _produce(bootstrap: str, topic: str, n: int, headers_for: Any, console: Console) -> None:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "compression.type": "lz4",
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    with console.status(f"producing {n:,} records to {topic}") as status:
        for i in range(n):
            while True:
                try:
                    producer.produce(topic, VALUE, str(i).encode(), headers=headers_for(i))
                    break
                except BufferError:
                    producer.poll(0.05)
            if i % 100_000 == 0:
                status.update(f"producing {n:,} records to {topic}: {i:,}")
        producer.flush(120)


def _count_target(
    bootstrap: str, topic: str, n: int, timeout_s: float, lateness: list[int] | None = None
) -> tuple[int, float, float]:
    """Read ``n`` records; returns (seen, first and last record timestamp in seconds)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"count-{time.time_ns()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    seen = 0
    first = float("inf")
    last = 0.0
    deadline = time.monotonic() + timeout_s
    while seen < n and time.monotonic() < deadline:
        for msg in consumer.consume(10_000, timeout=0.5):
            if msg.error():
                continue
            seen += 1
            ts = msg.timestamp()[1] / 1000
            first = min(first, ts)
            last = max(last, ts)
            if lateness is not None:
                for name, raw in headers_of(msg):
                    if name == "delay-due-ms" and raw is not None:
                        lateness.append(msg.timestamp()[1] - int(raw))
    consumer.close()
    return seen, first, last


def _throughput(console: Console, bootstrap: str, work: Path, n: int) -> dict[str, Any]:
    from delaybridge.bridge.passthrough import run_passthrough

    delay, target, src, dst = (f"tp.{x}.{time.time_ns()}" for x in ("delay", "out", "src", "dst"))
    ensure_topics(make_admin_for(bootstrap), {delay: {}, target: {}, src: {}, dst: {}})
    past = int(time.time() * 1000) - 61_000
    _produce(
        bootstrap,
        delay,
        n,
        lambda i: [
            ("delay-target-topic", target),
            ("deliver-at-ms", str(past + (i * 60_000) // n)),
        ],
        console,
    )
    _produce(bootstrap, src, n, lambda i: [("k", "v")], console)
    console.print("passthrough forwarder ...")
    ceiling = run_passthrough(bootstrap, src, dst, n, timeout_s=600)
    console.print(f"passthrough: {ceiling}")
    console.print("sidecar ...")
    side = _Sidecar(bootstrap, work, delay)
    try:
        # As for the passthrough: from the first record out to the last one acked.
        seen, first, last = _count_target(bootstrap, target, n, timeout_s=900)
        rss = side.peak_rss_mb()
    finally:
        side.stop()
    elapsed = last - first
    rate = seen / elapsed if elapsed > 0 else 0.0
    ceiling_rate = float(ceiling.get("messages_per_s", 0.0))
    return {
        "messages": n,
        "delivered": seen,
        "sidecar_msgs_per_s": round(rate),
        "sidecar_seconds": round(elapsed, 2),
        "passthrough_msgs_per_s": round(ceiling_rate),
        "ratio": round(rate / ceiling_rate, 3) if ceiling_rate else None,
        "sidecar_peak_rss_mb": round(rss, 1),
    }


def _lateness(
    console: Console, bootstrap: str, work: Path, rate: int, seconds: int
) -> dict[str, Any]:
    delay, target = f"lt.delay.{time.time_ns()}", f"lt.out.{time.time_ns()}"
    ensure_topics(make_admin_for(bootstrap), {delay: {}, target: {}})
    side = _Sidecar(bootstrap, work, delay)
    try:
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        n = rate * seconds
        start = time.monotonic()
        with console.status(f"steady {rate} msg/s for {seconds} s"):
            for i in range(n):
                target_t = start + i / rate
                wait = target_t - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                producer.produce(
                    delay,
                    VALUE,
                    str(i).encode(),
                    headers=[
                        ("delay-target-topic", target),
                        ("delay-ms", str(1000 + (i * 7919) % 4000)),
                    ],
                )
                producer.poll(0)
            producer.flush(30)
        lateness: list[int] = []
        seen, _, _ = _count_target(bootstrap, target, n, timeout_s=60, lateness=lateness)
        rss = side.peak_rss_mb()
    finally:
        side.stop()
    lateness.sort()

    def pct(p: float) -> int:
        return lateness[min(len(lateness) - 1, int(p * len(lateness)))] if lateness else -1

    return {
        "rate_msgs_per_s": rate,
        "seconds": seconds,
        "sent": n,
        "delivered": seen,
        "lateness_p50_ms": pct(0.50),
        "lateness_p99_ms": pct(0.99),
        "lateness_max_ms": lateness[-1] if lateness else -1,
        "early": sum(1 for x in lateness if x < 0),
        "tick_ms": 100,
        "sidecar_peak_rss_mb": round(rss, 1),
    }


def _one_tick(console: Console, bootstrap: str, work: Path, n: int) -> dict[str, Any]:
    delay, target = f"tk.delay.{time.time_ns()}", f"tk.out.{time.time_ns()}"
    ensure_topics(make_admin_for(bootstrap), {delay: {}, target: {}})
    side = _Sidecar(bootstrap, work, delay)
    try:
        side.get("/admin/pause?direction=dequeue", method="POST")
        due = int(time.time() * 1000) + 1_000
        _produce(
            bootstrap,
            delay,
            n,
            lambda i: [("delay-target-topic", target), ("deliver-at-ms", str(due))],
            console,
        )
        with console.status("waiting for the sidecar to store them all"):
            side._await(lambda: side.stored() >= n, 900, f"{n} records stored")
        rss_before = side.peak_rss_mb()
        resumed = time.time()
        side.get("/admin/resume?direction=dequeue", method="POST")
        seen, _, last = _count_target(bootstrap, target, n, timeout_s=900)
        rss = side.peak_rss_mb()
    finally:
        side.stop()
    elapsed = last - resumed
    return {
        "messages": n,
        "delivered": seen,
        "drain_seconds": round(elapsed, 2),
        "drain_msgs_per_s": round(seen / elapsed) if elapsed > 0 else 0,
        "sidecar_peak_rss_mb_before_drain": round(rss_before, 1),
        "sidecar_peak_rss_mb": round(rss, 1),
        "sidecar_peak_anon_mb": round(side.peak_anon_mb, 1),
        "sidecar_peak_file_backed_mb": round(side.peak_file_mb, 1),
    }


def make_admin_for(bootstrap: str) -> Any:
    from delaybridge.bridge.settings import KafkaSettings

    return make_admin(KafkaSettings(bootstrap_servers=bootstrap))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _print(console: Console, results: dict[str, Any]) -> None:
    table = Table(title="delaybridge bench e2e")
    table.add_column("measurement")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for section, values in results.items():
        if section == "machine":
            continue
        for key, value in values.items():
            table.add_row(section, key, str(value))
    console.print(table)
