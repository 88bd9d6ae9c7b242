"""The report model: rollup rows → windows and totals, the verdict, the JSON shape."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from delaybridge.settings import load
from delaybridge.spark.report import (
    EXIT_OK,
    EXIT_PROBLEMS,
    LATENESS_EDGES_MS,
    Counts,
    Report,
    lateness_bucket_labels,
    split_rollup,
)
from delaybridge.spark.settings import ReconcileSettings


def _row(grouping: int, topic: str | None, window: int | None, **counts: Any) -> dict[str, Any]:
    return {"grouping": grouping, "target_topic": topic, "window_start_ms": window, **counts}


def _report(totals: Counts) -> Report:
    return Report(
        as_of_ms=1_000_000,
        due_cutoff_ms=990_000,
        window_ms=60_000,
        grace_ms=10_000,
        late_after_ms=1_100,
        totals=totals,
        windows=[],
        targets=[],
        delay_topics=[],
    )


def test_split_rollup_sorts_windows_and_separates_totals() -> None:
    rows = [
        _row(0, "b", 120_000, sent=1, delivered=1),
        _row(0, "a", 60_000, sent=2, missing=1),
        _row(0, "a", 0, sent=3),
        _row(1, "a", None, sent=5, missing=1),
        _row(1, "b", None, sent=1, delivered=1),
        _row(3, None, None, sent=6, missing=1, delivered=1, lateness_p99_ms=42.0),
    ]
    windows, per_topic, overall = split_rollup(rows)
    assert [(w.target_topic, w.window_start_ms) for w in windows] == [
        ("a", 0),
        ("a", 60_000),
        ("b", 120_000),
    ]
    assert windows[1].counts.missing == 1
    assert per_topic == {"a": Counts(sent=5, missing=1), "b": Counts(sent=1, delivered=1)}
    assert overall == Counts(sent=6, missing=1, delivered=1, lateness_p99_ms=42)


def test_split_rollup_without_rows_is_all_zero() -> None:
    assert split_rollup([]) == ([], {}, Counts())


def test_split_rollup_rejects_an_unknown_grouping() -> None:
    with pytest.raises(ValueError, match="grouping id 2"):
        split_rollup([_row(2, None, 0, sent=1)])


def test_counts_from_row_keeps_missing_lateness_as_none() -> None:
    counts = Counts.from_row({"sent": 3, "due": None, "lateness_max_ms": None})
    assert (counts.sent, counts.due, counts.lateness_max_ms) == (3, 0, None)


@pytest.mark.parametrize(
    ("totals", "failures", "code"),
    [
        (Counts(sent=5, due=5, delivered=5), [], EXIT_OK),
        (Counts(sent=5, due=5, delivered=5, duplicated=2, late=1), [], EXIT_OK),
        (Counts(sent=5, due=5, delivered=4, missing=1), ["1 missing"], EXIT_PROBLEMS),
        (Counts(sent=5, due=5, delivered=5, early=2), ["2 early"], EXIT_PROBLEMS),
        (Counts(missing=3, early=1), ["3 missing", "1 early"], EXIT_PROBLEMS),
    ],
)
def test_verdict_fails_only_on_missing_or_early(
    totals: Counts, failures: list[str], code: int
) -> None:
    report = _report(totals)
    assert report.failures == failures
    assert report.exit_code == code


def test_in_exactly_once_mode_a_duplicate_fails_the_run() -> None:
    totals = Counts(sent=5, due=5, delivered=5, duplicated=2)
    report = dataclasses.replace(_report(totals), exactly_once=True)
    assert report.failures == ["2 duplicated (exactly-once mode)"]
    assert report.exit_code == EXIT_PROBLEMS


def test_the_sidecar_config_says_exactly_once() -> None:
    sidecar = load(None, delivery={"exactly_once": True}, delay_topics=["d"])
    assert ReconcileSettings.from_sidecar(sidecar).exactly_once
    assert not ReconcileSettings.from_sidecar(load(None, delay_topics=["d"])).exactly_once


def test_to_dict_is_json_with_the_verdict() -> None:
    data = json.loads(json.dumps(_report(Counts(sent=1, missing=1)).to_dict()))
    assert data["ok"] is False
    assert data["failures"] == ["1 missing"]
    assert data["totals"]["sent"] == 1


def test_one_label_per_histogram_bucket() -> None:
    labels = lateness_bucket_labels()
    assert len(labels) == len(LATENESS_EDGES_MS) + 1
    assert labels[0] == "< 0" and labels[1] == "0–100" and labels[-1] == "≥ 60000"
