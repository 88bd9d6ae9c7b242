"""``bench e2e --only throughput --pure-python``: the compiled hot path's end-to-end effect.

After the throughput measurement (whose sidecar runs the hot path ``delaybridge/hotpath.py``
selects: compiled where built), one more sidecar run on the same number of records,
already due, with ``DELAYBRIDGE_PURE_PYTHON=1``: the same code as pure Python. Keys
``sidecar_pure_python_msgs_per_s``, ``ratio_pure_python`` (to the same run's
passthrough) and ``compiled_vs_pure`` (the default run's rate over this one's), plus the
hot path each sidecar logged it ran (``hot_path``, ``hot_path_pure_python_run``).
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from delaybridge.connectors import KafkaClients
from delaybridge.tools.e2e.measure import _sidecar_rate, _topics
from delaybridge.tools.e2e.traffic import fill

_LOGGED = re.compile(rb"hot path: (\w+)")


def ran(work: Path) -> str:
    """The hot path a benchmark sidecar said it ran (its log line at start)."""
    found = _LOGGED.search((work / "sidecar.log").read_bytes())
    return found.group(1).decode() if found else "unknown"


def pure_python_run(
    console: Console, clients: KafkaClients, work: Path, n: int, throughput: dict[str, Any]
) -> dict[str, Any]:
    """The throughput run again with the pure-Python hot path; ratios to ``throughput``."""
    delay, target = _topics(clients, "tp", "delay-pure", "out-pure")
    past = int(time.time() * 1000) - 61_000
    fill(
        clients,
        delay,
        n,
        lambda i: [("delay-target-topic", target), ("deliver-at-ms", str(past + i * 60_000 // n))],
        console,
    )
    rate = _sidecar_rate(console, clients, work / "pure", delay, target, n, {"pure_python": True})
    ceiling = float(throughput.get("passthrough_msgs_per_s") or 0)
    compiled = float(throughput.get("sidecar_msgs_per_s") or 0)
    return {
        "hot_path": ran(work / "on"),
        "hot_path_pure_python_run": ran(work / "pure"),
        "sidecar_pure_python_msgs_per_s": round(rate["rate"]),
        "ratio_pure_python": round(rate["rate"] / ceiling, 3) if ceiling else None,
        "compiled_vs_pure": round(compiled / rate["rate"], 3) if rate["rate"] else None,
        "sidecar_pure_python_peak_rss_mb": round(rate["rss"], 1),
    }
