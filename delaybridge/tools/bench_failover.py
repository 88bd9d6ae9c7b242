"""``delaybridge bench failover``: how long a partition is unowned after its owner dies.

Two ``delaybridge run`` replicas, each with its own data directory, share a delay topic
of two partitions holding N pending messages (one partition each). The owner of the
first partition is killed with SIGKILL; the benchmark reads the survivor's log for the
moment it took the partition over and finished restoring it, and reports the restore
(changelog records read, seconds) and the time from the kill until the partition was
delivering again. The whole is run twice, without and with a warm standby
(``changelog.standby_replicas`` 0 and 1), in the same run on the same broker.

The group's session timeout (``--session-timeout-ms``, default 6 s) is part of every
failover: the survivor only hears of the death when the dead member's session ends.
"""

from __future__ import annotations

import argparse
import re
import signal
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from delaybridge.connectors import KafkaClients, KafkaSettings, ensure_topics
from delaybridge.tools.bench_kit import bench_cluster, report
from delaybridge.tools.e2e.sidecar import SidecarProcess
from delaybridge.tools.e2e.traffic import fill

_RESTORED = re.compile(r"restored (\S+): (\d+) changelog records in ([\d.]+) s")


def run_failover_bench(args: argparse.Namespace) -> int:
    console = Console()
    kafka = KafkaSettings(bootstrap_servers=args.bootstrap) if args.bootstrap else None
    with bench_cluster("delaybridge-failover-", kafka) as (work, clients):
        results = [
            _one(console, clients, work / f"s{k}", args.pending, k, args.session_timeout_ms)
            for k in (0, 1)
        ]
    report(
        console,
        args.json,
        "failover",
        results,
        lambda run: f"standby_replicas={run['standby_replicas']}",
    )
    return 0


def _one(
    console: Console, clients: KafkaClients, work: Path, n: int, standbys: int, session_ms: int
) -> dict[str, Any]:
    tag = time.time_ns()
    delay, target = f"fo.delay.{tag}", f"fo.out.{tag}"
    ensure_topics(clients.admin(), {delay: {}}, partitions=2)
    ensure_topics(clients.admin(), {target: {}})
    # Both replicas share the group the benchmark's sidecar config names (per delay topic).
    kafka = clients.settings.model_copy(update={"session_timeout_ms": session_ms})
    changelog = {"changelog": {"standby_replicas": standbys}}
    replicas = [SidecarProcess(kafka, work / name, delay, **changelog) for name in ("r1", "r2")]
    try:
        due = int(time.time() * 1000) + 3_600_000
        fill(
            clients,
            delay,
            n,
            lambda i: [("delay-target-topic", target), ("deliver-at-ms", str(due))],
            console,
        )
        owner, survivor = _owners(replicas, delay)
        with console.status("waiting for every message to be stored and in the changelog"):
            owner.wait_for(lambda: _settled(replicas, n), 600, "every message stored")
        if standbys:
            with console.status("waiting for the standby to hold the other's partition"):
                survivor.wait_for(lambda: _standby_ready(survivor, delay), 600, "standby")
        log_at = Path(survivor.log.name).stat().st_size
        owner.proc.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        with console.status("waiting for the survivor to take the partition over"):
            survivor.wait_for(
                lambda: _taken_over(survivor, delay, log_at) is not None, 600, "takeover"
            )
        took = time.monotonic() - killed
        read, seconds = _taken_over(survivor, delay, log_at) or (0, 0.0)
    finally:
        for r in replicas:
            if r.proc.poll() is None:
                r.stop()
    return {
        "standby_replicas": standbys,
        "pending": n,
        "session_timeout_s": session_ms / 1000,
        "restore_records_read": read,
        "restore_seconds": seconds,
        "kill_to_active_s": round(took, 2),
    }


def _owners(replicas: list[SidecarProcess], delay: str) -> tuple[SidecarProcess, SidecarProcess]:
    """(the owner of partition 0, the other) once the group settled."""

    def owns_p0(r: SidecarProcess) -> bool:
        stats = r.get("/admin/stats") or {}
        return any(p["partition"] == 0 for p in stats.get("partitions", []))

    replicas[0].wait_for(lambda: any(owns_p0(r) for r in replicas), 120, "partition 0 owned")
    first = next(r for r in replicas if owns_p0(r))
    return first, next(r for r in replicas if r is not first)


def _settled(replicas: list[SidecarProcess], n: int) -> bool:
    """Every message stored, and safe (its changelog value acknowledged)."""
    parts = [p for r in replicas for p in (r.get("/admin/stats") or {}).get("partitions", [])]
    stored = sum(p["last_source_offset"] + 1 for p in parts)
    return stored >= n and all(p["commit_position"] > p["last_source_offset"] for p in parts)


def _standby_ready(r: SidecarProcess, delay: str) -> bool:
    text = Path(r.log.name).read_text(errors="replace")
    return f"standby for {delay}-0: tailing" in text


def _taken_over(r: SidecarProcess, delay: str, since: int) -> tuple[int, float] | None:
    """(changelog records read, restore seconds) once the survivor delivers partition 0
    (its log after byte ``since``): assigned and up to date at once, or restored."""
    with Path(r.log.name).open("rb") as f:
        f.seek(since)
        text = f.read().decode(errors="replace")
    name = f"{delay}-0"
    assigned = text.find(f"assigned {name}:")
    if assigned == -1:
        return None
    line = text[assigned : text.find("\n", assigned)]
    if "restoring from the changelog" not in line:
        return 0, 0.0  # the standby's copy was up to date: nothing to read
    for m in _RESTORED.finditer(text, assigned):
        if m.group(1) == name:
            return int(m.group(2)), float(m.group(3))
    return None
