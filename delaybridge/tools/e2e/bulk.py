"""A bulk load of explicit-id schedules through a real sidecar: replace against keep.

Every record has its own ``delay-id`` (a backlog moved from another system, order
timeouts keyed by order id); with the default ``delay-on-duplicate: replace`` each one is
also a replace that goes round the cancel topic and waits ``cancel_grace_ms``
(``timerlog/replace_waits.py``). Measured: records stored per second from the start of
the fill (the producer runs at broker speed, the sidecar consumes meanwhile), records
per second of the sidecar's CPU time (less noisy on a shared machine) and its peak RSS,
with ``replace`` and then ``keep`` in the same run.

    python -m delaybridge.tools.e2e.bulk --bootstrap HOST:PORT --records 1000000 \\
        [--modes replace,keep] [--partitions 2] [--grace-ms MS] [--sidecar-pythonpath DIR]

``--sidecar-pythonpath``: the code the sidecar child runs (another checkout: a before
and after in one run); the parent's code only produces and watches.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from delaybridge.connectors import KafkaClients, KafkaSettings, ensure_topics
from delaybridge.tools.e2e.sidecar import SidecarProcess
from delaybridge.tools.e2e.traffic import fill


def bulk_fill(
    console: Console,
    clients: KafkaClients,
    work: Path,
    n: int,
    mode: str,
    partitions: int,
    grace_ms: int | None = None,
) -> dict[str, Any]:
    stamp = time.time_ns()
    delay, target = f"bulk.delay.{stamp}", f"bulk.out.{stamp}"
    ensure_topics(clients.admin(), {delay: {}, target: {}}, partitions=partitions)
    here = work / f"{mode}-{stamp}"
    store: dict[str, Any] = {"data_dir": str(here / "data")}
    if grace_ms is not None:
        store["cancel_grace_ms"] = grace_ms
    side = SidecarProcess(clients.settings, here, delay, store=store)
    try:
        later = int(time.time() * 1000) + 3_600_000
        start = time.monotonic()
        fill(
            clients,
            delay,
            n,
            lambda i: [
                ("delay-target-topic", target),
                ("deliver-at-ms", str(later)),
                ("delay-id", f"order-{i}"),
                ("delay-on-duplicate", mode),
            ],
            console,
        )
        produced_s = time.monotonic() - start
        side.wait_for(lambda: side.stored() >= n, 1800, f"{n} records stored")
        stored_s = time.monotonic() - start
        rss = side.peak_rss_mb()
        cpu_s = _cpu_seconds(side.proc.pid)
    finally:
        side.stop()
    return {
        "mode": mode,
        "records": n,
        "partitions": partitions,
        "cancel_grace_ms": grace_ms if grace_ms is not None else "default",
        "produced_s": round(produced_s, 1),
        "stored_s": round(stored_s, 1),
        "stored_per_s": round(n / stored_s),
        "sidecar_cpu_s": round(cpu_s, 1),
        "stored_per_cpu_s": round(n / cpu_s) if cpu_s > 0 else 0,
        "peak_rss_mb": round(rss, 1),
        "peak_anon_mb": round(side.peak_anon_mb, 1),
        "peak_file_mb": round(side.peak_file_mb, 1),
    }


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a live process (a less noisy measure than wall time on
    a shared machine)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--modes", default="replace,keep")
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--sidecar-pythonpath", default=None)
    parser.add_argument("--grace-ms", type=int, default=None, help="store.cancel_grace_ms")
    parser.add_argument("--json", type=Path, default=Path("bench-results/bulk.json"))
    args = parser.parse_args()
    if args.sidecar_pythonpath:
        os.environ["PYTHONPATH"] = args.sidecar_pythonpath  # the child's code
    console = Console()
    clients = KafkaClients(KafkaSettings(bootstrap_servers=args.bootstrap))
    results = []
    with tempfile.TemporaryDirectory(prefix="delaybridge-bulk-") as tmp:
        for mode in args.modes.split(","):
            got = bulk_fill(
                console, clients, Path(tmp), args.records, mode, args.partitions, args.grace_ms
            )
            got["sidecar_code"] = args.sidecar_pythonpath or "this checkout"
            console.print(got)
            results.append(got)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
