"""Rates and lateness from samples of the replicas' /metrics text."""

from __future__ import annotations

import math

import pytest

from delaybridge.console.metrics_history import MetricsHistory, Sampler, parse, quantile
from delaybridge.console.replicas import ReplicaError


def text(delivered: float, dead: float = 0, fast: float = 0, slow: float = 0) -> str:
    """/metrics of one replica: ``fast`` deliveries within 50 ms, ``slow`` within 1 s."""
    return "\n".join(
        [
            "# TYPE delaybridge_delivered_total counter",
            f'delaybridge_delivered_total{{target_topic="a",worker="0"}} {delivered / 2}',
            f'delaybridge_delivered_total{{target_topic="b",worker="1"}} {delivered / 2}',
            "# TYPE delaybridge_dead_lettered_total counter",
            f'delaybridge_dead_lettered_total{{reason="bad-time"}} {dead}',
            'delaybridge_dead_lettered_total{reason="missing-target"} 0',
            "# TYPE delaybridge_delivery_lateness_seconds histogram",
            f'delaybridge_delivery_lateness_seconds_bucket{{le="0.05"}} {fast}',
            f'delaybridge_delivery_lateness_seconds_bucket{{le="1.0"}} {fast + slow}',
            f'delaybridge_delivery_lateness_seconds_bucket{{le="+Inf"}} {fast + slow}',
            f"delaybridge_delivery_lateness_seconds_count {fast + slow}",
            "delaybridge_delivery_lateness_seconds_sum 1.0",
            "",
        ]
    )


def test_parse_sums_labels_we_do_not_split_by() -> None:
    totals = parse(text(10, dead=2, fast=3, slow=1))
    assert totals.delivered == 10
    assert totals.dead_lettered == {"bad-time": 2, "missing-target": 0}
    assert totals.lateness == {0.05: 3, 1.0: 4, math.inf: 4}


def test_rates_per_replica_summed_and_resets_count_from_zero() -> None:
    history = MetricsHistory(history_s=600)
    assert history.rates(60) is None
    history.add(0, {"a": text(100, dead=1), "b": text(50)})
    assert history.rates(60) is None, "one sample is no rate"
    history.add(10, {"a": text(200, dead=3), "b": text(10)})  # b restarted: 10 new
    rates = history.rates(60)
    assert rates is not None
    assert rates.window_s == 10
    assert rates.delivered_per_s == pytest.approx(11.0)
    assert rates.dead_lettered_per_s == {"bad-time": 0.2, "missing-target": 0.0}
    assert [round(p.delivered_per_s, 3) for p in history.points()] == [11.0]


def test_a_replica_missing_from_a_scrape_loses_that_interval_only() -> None:
    history = MetricsHistory(history_s=600)
    history.add(0, {"a": text(0), "b": text(0)})
    history.add(10, {"a": text(100), "b": ReplicaError("b", 0, "down")})
    history.add(20, {"a": text(200), "b": text(100)})
    rates = history.rates(60)
    assert rates is not None and rates.delivered_per_s == pytest.approx(10.0)
    assert history.errors == {}
    assert history.dead_lettered_totals() == {"bad-time": 0.0, "missing-target": 0.0}


def test_lateness_quantiles_over_the_window() -> None:
    history = MetricsHistory(history_s=600)
    history.add(0, {"a": text(0, fast=1000, slow=0)})
    history.add(10, {"a": text(100, fast=1090, slow=10)})
    rates = history.rates(60)
    assert rates is not None and rates.deliveries == 100
    assert rates.lateness_p50_s == pytest.approx(0.05 * 50 / 90)
    assert rates.lateness_p99_s is not None and 0.05 < rates.lateness_p99_s <= 1.0


def test_quantile_edges() -> None:
    assert quantile(0.5, {}) is None
    assert quantile(0.5, {0.1: 0, math.inf: 0}) is None
    assert quantile(0.99, {0.1: 0, 1.0: 0, math.inf: 10}) == 1.0, "beyond the last bucket"
    assert quantile(0.5, {0.1: 10, math.inf: 10}) == pytest.approx(0.05)


def test_old_samples_are_forgotten_and_the_sampler_records_failures() -> None:
    history = MetricsHistory(history_s=30)
    now = [0.0]
    answers = {"a": text(0)}

    def scrape(url: str) -> str:
        if url == "b":
            raise ReplicaError("b", 0, "unreachable")
        return answers[url]

    sampler = Sampler(history, lambda: ["a", "b"], scrape, 10, clock=lambda: now[0])
    for step in range(6):
        now[0] = step * 10.0
        answers["a"] = text(step * 100)
        sampler.sample_once()
    assert "b" in history.errors
    assert len(history.points()) == 3, "samples older than 30 s dropped"
