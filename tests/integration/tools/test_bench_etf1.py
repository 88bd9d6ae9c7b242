"""``bench e2e --etf1``, small: delaybridge and etf1's real scheduler on the real broker.

The binary comes from ``scripts/build-etf1`` (scripts/test exports ``DELAYBRIDGE_ETF1``;
without it the test runs the script, which is idempotent). A binary that cannot be
built fails the test: the peer is part of the project's provisioning, never a skip.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from delaybridge.cli import main

ROOT = Path(__file__).resolve().parents[3]
BUILD = ROOT / "scripts" / "build-etf1"


def etf1_binary() -> Path:
    """The etf1 scheduler binary: ``$DELAYBRIDGE_ETF1``, else what scripts/build-etf1
    builds (or finds in its cache)."""
    given = os.environ.get("DELAYBRIDGE_ETF1")
    if given:
        return Path(given)
    done = subprocess.run(
        [str(BUILD)], capture_output=True, text=True, timeout=900, check=False, stdin=None
    )
    if done.returncode != 0 or not done.stdout.strip():
        pytest.fail(
            f"scripts/build-etf1 exited {done.returncode}, no etf1 binary: {done.stderr[-3000:]}",
            pytrace=False,
        )
    return Path(done.stdout.strip().splitlines()[-1])


@pytest.mark.kafka
def test_side_by_side_delivers_everything_on_time_for_both(kafka: Any, tmp_path: Path) -> None:
    binary = etf1_binary()
    assert os.access(binary, os.X_OK), f"{binary} is not executable"
    out = tmp_path / "e2e.json"

    code = main(
        [
            "bench",
            "e2e",
            "--bootstrap",
            kafka.bootstrap_servers,
            "--etf1",
            str(binary),
            "--etf1-rate",
            "200",
            "--etf1-seconds",
            "4",
            "--etf1-burst",
            "2000",
            "--etf1-burst-lead-s",
            "6",
            "--json",
            str(out),
        ]
    )

    assert code == 0
    result = json.loads(out.read_text())["etf1"]
    assert result["schedules_partitions"] >= 2
    for name in ("delaybridge", "etf1"):
        figures = result["systems"][name]
        for load, sent in (("steady", 800), ("burst", 2000)):
            assert figures[f"{load}_sent"] == sent, (name, load)
            assert figures[f"{load}_missing"] == 0, (name, load, figures)
            assert figures[f"{load}_early"] == 0, (name, load, figures)
            assert figures[f"{load}_delivered"] == sent, (name, load)
            assert figures[f"{load}_lateness_p99_ms"] >= 0, (name, load)
            assert figures[f"{load}_peak_rss_mb"] > 0, (name, load)
            assert figures[f"{load}_cpu_s"] > 0, (name, load)
        assert figures["steady_cpu_us_per_msg"] > 0, name
        assert figures["burst_drain_msgs_per_s"] > 0, name
    assert set(result["ratios_delaybridge_to_etf1"]) == {
        "steady_cpu_s",
        "steady_lateness_p99_ms",
        "burst_drain_msgs_per_s",
    }
