"""``bench e2e --etf1``'s pieces that need no broker: headers, figures, lead, the guard."""

from __future__ import annotations

import argparse
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from delaybridge.errors import DelayBridgeError
from delaybridge.tools.e2e import run_e2e
from delaybridge.tools.e2e.side_by_side import (
    DUE_HEADER,
    ID_HEADER,
    _figures,
    burst_lead_s,
    schedule_headers,
)


def test_a_schedule_carries_etf1s_headers_and_the_two_both_pass_through() -> None:
    headers = dict(schedule_headers("b7", 1_800_000_000, "out"))

    assert headers == {
        "scheduler-epoch": "1800000000",
        "scheduler-target-topic": "out",
        "scheduler-target-key": "b7",
        DUE_HEADER: "1800000000000",
        ID_HEADER: "b7",
    }


def test_figures_count_missing_duplicates_early_and_the_late_tail() -> None:
    arrivals = SimpleNamespace(stamped=[-3, 10, 20, 1500, 30], ids=["0", "1", "2", "2", "3"])

    got = _figures("steady", 5, cast(Any, arrivals))

    assert got["steady_delivered"] == 4
    assert got["steady_missing"] == 1
    assert got["steady_duplicates"] == 1
    assert got["steady_early"] == 1
    assert got["steady_later_than_1s"] == 1
    assert got["steady_lateness_max_ms"] == 1500
    assert got["steady_lateness_p50_ms"] == 20


def test_the_bursts_default_lead_grows_with_its_size() -> None:
    assert burst_lead_s(2_000) == 10.0
    assert burst_lead_s(200_000) == 40.0


def test_only_etf1_without_the_binary_fails_before_starting_a_broker(tmp_path: Path) -> None:
    args = argparse.Namespace(
        config=None, bootstrap=None, only=["etf1"], etf1=None, json=tmp_path / "e2e.json"
    )

    with pytest.raises(DelayBridgeError, match="--only etf1 needs --etf1 PATH"):
        run_e2e(args)
